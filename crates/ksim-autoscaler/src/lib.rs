//! ksim-autoscaler: a cluster autoscaler for simulated clusters, configured
//! by cluster-autoscaler's kwok provider ConfigMaps (`config`), deciding
//! with the scheduler's own framework and filter plugins (`simulator` for
//! scale-up, `scaledown` for scale-down), acting through the API as a plain
//! kube-rs client (`runner`) and reporting in the `cluster-autoscaler-status`
//! ConfigMap (`status`), reading the cluster from watches (`state`).

pub mod config;
mod error;
pub mod eviction;
pub mod runner;
pub mod scaledown;
pub mod simulator;
pub mod state;
pub mod status;

pub use error::AutoscalerError;
pub use runner::{Autoscaler, AutoscalerOptions, LoopReport, read_node_groups};
pub use simulator::Expander;
