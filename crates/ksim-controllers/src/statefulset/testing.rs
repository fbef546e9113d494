//! Test support shared by the in-process tests of the workload controllers
//! (compiled for tests only): an API server with chosen controllers running
//! against it, polling with a generous deadline, and pod status changes the
//! kubelet simulator would make.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use ksim_apiserver::ApiServer;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::ControllerName;

/// An API server with the given controllers running against it.
pub(crate) struct Cluster {
    pub(crate) client: kube::Client,
    _server: ApiServer,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Cluster {
    pub(crate) fn start(controllers: &[ControllerName]) -> Self {
        let server = ApiServer::new();
        let client = ksim_runtime::client::in_process(&server);
        let controllers = controllers.to_vec();
        let controller_client = client.clone();
        let task = tokio::spawn(async move {
            crate::run_controllers(controller_client, &controllers).await;
        });
        Cluster {
            client,
            _server: server,
            task,
        }
    }

    /// An API server with the controller `run` starts against it (a
    /// controller with a test configuration).
    pub(crate) fn start_with<Fut>(run: impl FnOnce(kube::Client) -> Fut) -> Self
    where
        Fut: Future<Output = ()> + Send + 'static,
    {
        let server = ApiServer::new();
        let client = ksim_runtime::client::in_process(&server);
        let task = tokio::spawn(run(client.clone()));
        Cluster {
            client,
            _server: server,
            task,
        }
    }

    /// The pods of `default` matching `selector`, sorted by name.
    pub(crate) async fn pods(&self, selector: &str) -> Vec<Pod> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), "default");
        let mut pods = api
            .list(&ListParams::default().labels(selector))
            .await
            .expect("list pods")
            .items;
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        pods
    }

    /// Sets a pod's phase, Ready when Running (what the kubelet would do).
    pub(crate) async fn set_phase(&self, name: &str, phase: &str) {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), "default");
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let ready = if phase == "Running" { "True" } else { "False" };
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": phase, "conditions": [
                {"type": "Ready", "status": ready, "lastTransitionTime": now}
            ]}})),
        )
        .await
        .expect("set pod phase");
    }
}

/// Waits up to 60 s for `check` to return `Some` (generous: CI runs many
/// clusters at once on two cores; this bounds a hang, it does not time).
pub(crate) async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The names of `pods`.
pub(crate) fn names(pods: &[Pod]) -> Vec<String> {
    pods.iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect()
}
