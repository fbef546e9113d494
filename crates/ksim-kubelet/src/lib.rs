//! The ksim kubelet simulator: KWOK-compatible Stages (matching, delay, next action),
//! Go-template status rendering, the shipped stage sets and pod IP allocation (all
//! pure), and [`KubeletSimulator`], which drives them over a `kube::Client`.

pub mod error;
pub mod pod;
pub mod simulator;
pub mod stage;
pub mod stages;
pub mod template;

pub use error::KubeletError;
pub use simulator::{KubeletOptions, KubeletSimulator, NodeSelection};
