//! ksim-testutils: helpers for ksim's tests (builders, harnesses, kubectl driver).
//!
//! [`KsimEnv`] is a private environment (temporary `KSIM_HOME`, `KUBECONFIG`
//! and `HOME`) in which to run the `ksim` binary and the real `kubectl`;
//! [`TestCluster`] is a cluster created in such an environment and deleted on
//! drop. [`webdriver::Browser`] drives headless Chromium for the web view.

mod cluster;
pub mod kubectl;
pub mod webdriver;

pub use cluster::{KSIM_CLUSTER_NAME, KsimEnv, KubectlOutput, TestCluster};
