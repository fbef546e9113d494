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
//!
//! Order. Upstream reads nodes and pods from informer caches and groups
//! them in Go maps, so the order it visits nodes, pods of a node, owners,
//! topology domains of equal size and chosen pods is random from one run
//! to the next. ksim visits them in a fixed order instead: nodes and pods
//! in listing order, groups in the order they are first met, and every sort
//! stable. Whenever upstream's result is order-free the result is the same;
//! where it is not (which of two equal candidates goes first, which pods
//! are taken once a per-node or total eviction limit is reached) ksim gives
//! one of the outcomes upstream can give, the same one on every run. Each
//! plugin's module says where this applies to it.

mod error;
pub mod evictor;
pub mod framework;
pub mod nodeutil;
pub mod plugins;
pub mod podutil;
pub mod policy;
pub mod runner;

pub use error::Error;
pub use ksim_core::duration::{format_go_duration, parse_go_duration};
pub use policy::DeschedulerPolicy;
pub use runner::{CycleReport, Descheduler, simulate};
