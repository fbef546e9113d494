//! The descheduler framework: what every plugin sees and calls.
//!
//! A cycle lists the cluster once into a [`ClusterSnapshot`]; plugins are
//! pure functions of that snapshot which ask a [`PodEvictor`] to evict pods.
//! The evictor owns the policy's limits (per node, per namespace, total), the
//! DefaultEvictor's Filter and PreEvictionFilter, dry-run, and the I/O: an
//! eviction is a synchronous call from the plugin's point of view, as
//! upstream's `EvictPod`, so that a plugin can stop or go on when one is
//! refused (the runner runs cycles on a blocking thread for this reason).

mod args;
mod plugin;
mod snapshot;

pub use args::{ArgsError, decode_args};
pub use plugin::{
    BalancePlugin, DeschedulePlugin, EvictionError, EvictionRequest, PluginStatus, PodEvictor,
};
pub use snapshot::ClusterSnapshot;
