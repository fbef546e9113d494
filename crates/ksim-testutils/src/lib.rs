//! ksim-testutils: helpers for ksim's tests (builders, harnesses, kubectl driver).
//!
//! [`KsimEnv`] is a private environment (temporary `KSIM_HOME`, `KUBECONFIG`
//! and `HOME`) in which to run the `ksim` binary and the real `kubectl`;
//! [`TestCluster`] is a cluster created in such an environment and deleted on
//! drop; [`component::Component`] a stand-alone component run against one
//! through its kubeconfig. [`webdriver::Browser`] drives headless Chromium for the web view.
//! [`builders`] make nodes and pods;
//! [`in_process::InProcessCluster`] is the crates' in-process cluster (API
//! server, client, clock, spawned components). [`fixtures`] are the objects
//! tests share (the Widget CRD); [`recorder::Recorder`] a `ksim record` in
//! the background.

pub mod builders;
mod cluster;
pub mod component;
pub mod fixtures;
pub mod in_process;
pub mod kubectl;
pub mod recorder;
pub mod webdriver;

pub use cluster::{KSIM_CLUSTER_NAME, KsimEnv, KubectlOutput, TestCluster, poll_until};
