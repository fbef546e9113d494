//! ksim-scheduler: kube-scheduler's scheduling framework and its default
//! plugins, as pure code over k8s-openapi `Pod` and `Node` values.
//!
//! `framework` owns the extension points, `Status`, `CycleState`, the
//! `NodeInfo` snapshot, profiles and [`framework::schedule_one`]; `plugins`
//! holds one module per plugin. Nothing here does I/O: the component that
//! watches the API and binds pods drives this code.

pub mod config;
pub mod framework;
pub mod plugins;
pub mod queue;

#[cfg(test)]
pub(crate) mod testing;
