//! ksim-scheduler: kube-scheduler's scheduling framework and its default
//! plugins, as pure code over k8s-openapi `Pod` and `Node` values.
//!
//! `framework` owns the extension points, `Status`, `CycleState`, the
//! `NodeInfo` snapshot, profiles and [`framework::schedule_one`]; `plugins`
//! holds one module per plugin; `queue` is the scheduling queue. All of
//! that is pure code; `scheduler` is the component that watches the API,
//! drives it and binds pods (a plain kube-rs client).

pub mod config;
pub mod framework;
pub mod plugins;
pub mod queue;
pub mod scheduler;

#[cfg(test)]
pub(crate) mod testing;
