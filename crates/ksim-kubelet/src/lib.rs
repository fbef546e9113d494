//! The ksim kubelet simulator: KWOK-compatible Stages (matching, delay, next action),
//! Go-template status rendering, the shipped stage sets and pod IP allocation.
//! Everything here is pure; the controllers that drive it over a `kube::Client` build on it.

pub mod error;
pub mod pod;
pub mod stage;
pub mod stages;
pub mod template;

pub use error::KubeletError;
