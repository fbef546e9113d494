//! Shared helpers of the in-process controller tests: a cluster (API server
//! + in-process client + controllers in a task) and polling.

#![allow(dead_code)]

use k8s_openapi::api::core::v1::Pod;
use ksim_controllers::ControllerName;
use ksim_testutils::in_process::{InProcessCluster, at, start_time};
use kube::api::{Api, ListParams};

#[allow(unused_imports)] // not every test file polls
pub use ksim_testutils::in_process::eventually;

/// ksim-testutils' in-process cluster with the given controllers running
/// against it.
pub struct Cluster(InProcessCluster);

impl std::ops::Deref for Cluster {
    type Target = InProcessCluster;
    fn deref(&self) -> &InProcessCluster {
        &self.0
    }
}

impl std::ops::DerefMut for Cluster {
    fn deref_mut(&mut self) -> &mut InProcessCluster {
        &mut self.0
    }
}

impl Cluster {
    pub fn start(controllers: &[ControllerName]) -> Self {
        let mut cluster = InProcessCluster::new();
        let client = cluster.new_client();
        let controllers = controllers.to_vec();
        cluster.spawn(async move {
            ksim_controllers::run_controllers(client, &controllers).await;
        });
        Cluster(cluster)
    }
}

/// The pods of `namespace` matching `selector`.
pub async fn pods(client: &kube::Client, namespace: &str, selector: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    api.list(&ListParams::default().labels(selector))
        .await
        .expect("list pods")
        .items
}

/// Marks a pod Running and Ready (what the kubelet simulator would do).
pub async fn make_ready(cluster: &InProcessCluster, namespace: &str, name: &str) {
    cluster.set_pod_phase(namespace, name, "Running").await;
}

/// ksim-testutils' in-process cluster with controllers on its virtual
/// clock: time stands still at [`VirtualCluster::start`] (ksim-testutils'
/// start time) until the test advances it.
pub struct VirtualCluster {
    cluster: InProcessCluster,
    pub start: chrono::DateTime<chrono::Utc>,
}

impl std::ops::Deref for VirtualCluster {
    type Target = InProcessCluster;
    fn deref(&self) -> &InProcessCluster {
        &self.cluster
    }
}

impl VirtualCluster {
    /// Starts `controllers` on a virtual clock with seeded draws, and lets
    /// them settle (caches listed).
    pub async fn start(controllers: &[ControllerName]) -> Self {
        let mut cluster = InProcessCluster::virtual_with(ksim_runtime::clock::Random::seeded(7));
        let client = cluster.new_client();
        let clock = cluster.clock.clone();
        let controllers = controllers.to_vec();
        cluster.spawn(async move {
            ksim_controllers::run_controllers_with_clock(client, &controllers, clock).await;
        });
        cluster.settle().await;
        VirtualCluster {
            cluster,
            start: start_time(),
        }
    }

    /// `start + seconds`, as the API writes times.
    pub fn at(&self, seconds: i64) -> k8s_openapi::jiff::Timestamp {
        at(seconds)
    }

    /// Advances the clock to `start + seconds`, firing every timer on the way.
    pub async fn advance_to(&self, seconds: i64) {
        let to = self.start + chrono::Duration::seconds(seconds);
        self.cluster.advance_to(to).await;
        assert_eq!(self.clock.now(), to);
    }
}
