//! Shared helpers of the in-process controller tests: a cluster (API server
//! + in-process client + controllers in a task) and polling.

#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use ksim_apiserver::ApiServer;
use ksim_controllers::ControllerName;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

/// An API server with the given controllers running against it.
pub struct Cluster {
    pub server: ApiServer,
    pub client: kube::Client,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Cluster {
    pub fn start(controllers: &[ControllerName]) -> Self {
        let server = ApiServer::new();
        let client = ksim_runtime::client::in_process(&server);
        let controllers = controllers.to_vec();
        let controller_client = client.clone();
        let task = tokio::spawn(async move {
            ksim_controllers::run_controllers(controller_client, &controllers).await;
        });
        Cluster {
            server,
            client,
            task,
        }
    }
}

/// Waits up to 60 s for `check` to return `Some` (generous: CI runs many
/// clusters at once on two cores; this bounds a hang, it does not time).
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
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

/// The pods of `namespace` matching `selector`.
pub async fn pods(client: &kube::Client, namespace: &str, selector: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    api.list(&ListParams::default().labels(selector))
        .await
        .expect("list pods")
        .items
}

/// Marks a pod Running and Ready (what the kubelet simulator would do).
pub async fn make_ready(client: &kube::Client, namespace: &str, name: &str) {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": now}
        ]}})),
    )
    .await
    .expect("make pod ready");
}

/// An API server and controllers on one virtual clock: time stands still
/// at [`VirtualCluster::start`] until the test advances it.
pub struct VirtualCluster {
    pub server: ApiServer,
    pub client: kube::Client,
    pub clock: ksim_runtime::clock::Clock,
    pub start: chrono::DateTime<chrono::Utc>,
    task: tokio::task::AbortHandle,
}

impl Drop for VirtualCluster {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl VirtualCluster {
    /// Starts `controllers` on a virtual clock standing at
    /// 2026-01-01T00:00:00Z, and lets them settle (caches listed).
    pub async fn start(controllers: &[ControllerName]) -> Self {
        use chrono::TimeZone;
        let start = chrono::Utc
            .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
            .single()
            .expect("start time");
        let clock =
            ksim_runtime::clock::Clock::virtual_with(start, ksim_runtime::clock::Random::seeded(7));
        let server = ApiServer::with_clock(clock.clone());
        let client = ksim_runtime::client::in_process(&server);
        let controllers = controllers.to_vec();
        let controller_client = client.clone();
        let controller_clock = clock.clone();
        let task = tokio::spawn(async move {
            ksim_controllers::run_controllers_with_clock(
                controller_client,
                &controllers,
                controller_clock,
            )
            .await;
        })
        .abort_handle();
        let cluster = VirtualCluster {
            server,
            client,
            clock,
            start,
            task,
        };
        cluster.settle().await;
        cluster
    }

    /// `start + seconds`, as the API writes times.
    pub fn at(&self, seconds: i64) -> k8s_openapi::jiff::Timestamp {
        let t = self.start + chrono::Duration::seconds(seconds);
        k8s_openapi::jiff::Timestamp::from_second(t.timestamp()).expect("time")
    }

    /// Lets the cluster settle (what the controllers do without time passing).
    pub async fn settle(&self) {
        self.clock.settle().await.expect("the cluster settles");
    }

    /// Advances the clock to `start + seconds`, firing every timer on the way.
    pub async fn advance_to(&self, seconds: i64) {
        let to = self.start + chrono::Duration::seconds(seconds);
        self.clock.advance_to(to).await.expect("advance");
        assert_eq!(self.clock.now(), to);
    }
}
