//! ksim-controllers: the workload and disruption controllers of a ksim
//! cluster, as kube-controller-manager runs them. Every controller is a plain
//! Kubernetes API client (`kube::Client`), so the same code runs inside
//! `ksim serve` (in-process client) and against any cluster (`ksim controllers`).
//!
//! Modules: [`replicaset`], [`deployment`], [`statefulset`], [`daemonset`],
//! [`job`], [`garbagecollector`], [`namespace`], [`disruption`]
//! (PodDisruptionBudget status), [`nodelifecycle`] (node health and
//! taint-based eviction), [`ttlafterfinished`] (finished Jobs' TTL);
//! [`manager`] starts a chosen set. `cache` holds the indexed pod cache the
//! ReplicaSet and disruption controllers share.
//!
//! Every controller runs on the cluster's clock ([`run_controllers_with_clock`]):
//! timestamps, requeues, back-offs, grace periods and intervals are clock
//! time, their syncs go through a work queue on that clock (`workloop`), and
//! pending work holds the clock busy, so a virtual cluster advanced by
//! `clock.advance(d)` fires the controllers' timers in order and settles
//! exactly when they have nothing left to do.

mod cache;
mod common;
mod controller_ref;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod dpdb;
mod error;
mod events;
pub mod garbagecollector;
mod informer;
pub mod job;
pub mod manager;
pub mod namespace;
pub mod nodelifecycle;
mod pacing;
pub mod replicaset;
pub mod statefulset;
pub mod ttlafterfinished;
mod workloop;

pub use error::Error;
pub use informer::SharedInformers;
pub use manager::{
    ALL_CONTROLLERS, ControllerName, parse_controllers, run_controllers, run_controllers_with_clock,
};
