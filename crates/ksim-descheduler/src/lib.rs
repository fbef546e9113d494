//! ksim-descheduler: the upstream descheduler (kubernetes-sigs/descheduler
//! v0.36) rebuilt as a plain Kubernetes API client. It reads the upstream
//! `descheduler/v1alpha2` DeschedulerPolicy unchanged, runs the profiles'
//! deschedule plugins then their balance plugins over one snapshot of the
//! cluster, and evicts only through the eviction API, so PodDisruptionBudgets
//! are honoured.
//!
//! Modules: [`framework`] (the snapshot, the plugin and evictor traits, plugin
//! args decoding), [`plugins`] (one folder per plugin and the registry),
//! [`nodeutil`] (node usage and "would this pod fit elsewhere"),
//! [`podutil`] (pod facts, selections and orders), [`policy`] (the
//! DeschedulerPolicy), [`evictor`] (DefaultEvictor, limits, the eviction
//! API) and [`runner`] (the cycle and the loop).

mod duration;
mod error;
pub mod evictor;
pub mod framework;
pub mod nodeutil;
pub mod plugins;
pub mod podutil;
pub mod policy;
pub mod runner;

pub use duration::parse_go_duration;
pub use error::Error;
pub use policy::DeschedulerPolicy;
pub use runner::{CycleReport, Descheduler, simulate};
