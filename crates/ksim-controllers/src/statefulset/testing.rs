//! Test support shared by the in-process tests of the workload controllers
//! (compiled for tests only): ksim-testutils' in-process cluster with chosen
//! controllers running against it, its poller, and pod status changes the
//! kubelet simulator would make.

use std::future::Future;

use k8s_openapi::api::core::v1::Pod;
use ksim_testutils::in_process::InProcessCluster;
use kube::api::{Api, ListParams};

pub(crate) use ksim_testutils::in_process::eventually;

use crate::ControllerName;

/// ksim-testutils' in-process cluster with the chosen controllers running
/// against it.
pub(crate) struct Cluster(InProcessCluster);

impl std::ops::Deref for Cluster {
    type Target = InProcessCluster;
    fn deref(&self) -> &InProcessCluster {
        &self.0
    }
}

impl Cluster {
    pub(crate) fn start(controllers: &[ControllerName]) -> Self {
        let controllers = controllers.to_vec();
        Self::start_with(|client| async move {
            crate::run_controllers(client, &controllers).await;
        })
    }

    /// An API server with the controller `run` starts against it (a
    /// controller with a test configuration).
    pub(crate) fn start_with<Fut>(run: impl FnOnce(kube::Client) -> Fut) -> Self
    where
        Fut: Future<Output = ()> + Send + 'static,
    {
        let mut cluster = InProcessCluster::new();
        let client = cluster.new_client();
        cluster.spawn(run(client));
        Cluster(cluster)
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
        self.0.set_pod_phase("default", name, phase).await;
    }
}

/// The names of `pods`.
pub(crate) fn names(pods: &[Pod]) -> Vec<String> {
    pods.iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect()
}
