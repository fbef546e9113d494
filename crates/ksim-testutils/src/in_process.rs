//! One in-process cluster for the crates' tests: an API server (on the real
//! clock or a virtual one) and a client that reaches it without a socket
//! (or, on request, one over HTTP on a loopback port), plus the components
//! a test spawns on it, aborted when the cluster is dropped. A virtual clock
//! is advanced and settled through the cluster. Nodes and pods (from
//! [`crate::builders`]) are created with their status; [`InProcessCluster::set_pod_phase`]
//! does what a kubelet would; [`eventually`] is the one poller.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use k8s_openapi::api::core::v1::{Node, Pod};
use ksim_apiserver::ApiServer;
use ksim_runtime::clock::{Clock, Random};
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::task::JoinHandle;

/// The instant virtual clusters start at unless a test says otherwise
/// (2030-01-01T00:00:00Z).
pub fn start_time() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0)
        .single()
        .expect("a valid date")
}

/// The instant `seconds` after [`start_time`], as Kubernetes timestamps it.
pub fn at(seconds: i64) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::from_second(start_time().timestamp() + seconds)
        .expect("a valid timestamp")
}

/// An API server, an in-process client of it and the components spawned on it.
pub struct InProcessCluster {
    /// The server.
    pub server: ApiServer,
    /// A client of the server (no socket, no retry layer).
    pub client: kube::Client,
    /// The cluster's clock.
    pub clock: Clock,
    components: Vec<JoinHandle<()>>,
}

impl InProcessCluster {
    /// A cluster on the real clock.
    pub fn new() -> Self {
        Self::with_clock(Clock::real())
    }

    /// A cluster on a virtual clock standing at [`start_time`].
    pub fn virtual_clock() -> Self {
        Self::with_clock(Clock::virtual_at(start_time()))
    }

    /// A cluster on a virtual clock standing at [`start_time`] whose draws
    /// come from `random`.
    pub fn virtual_with(random: Random) -> Self {
        Self::with_clock(Clock::virtual_with(start_time(), random))
    }

    /// A cluster on `clock`.
    pub fn with_clock(clock: Clock) -> Self {
        let server = ApiServer::with_clock(clock.clone());
        InProcessCluster {
            client: ksim_runtime::client::in_process(&server),
            server,
            clock,
            components: Vec::new(),
        }
    }

    /// Another in-process client of the server (one per component, as the
    /// components of a real cluster each have theirs).
    pub fn new_client(&self) -> kube::Client {
        ksim_runtime::client::in_process(&self.server)
    }

    /// Another in-process client of the server whose requests (method, path,
    /// response status) are logged in the returned [`RequestLog`]: what a
    /// component asked of the server, counted at the HTTP layer.
    pub fn observed_client(&self) -> (kube::Client, RequestLog) {
        use tower::ServiceExt;
        let log = RequestLog::default();
        let router = self.server.router();
        let observed = log.clone();
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let router = router.clone();
            let log = observed.clone();
            async move {
                let method = request.method().clone();
                let path = request.uri().path().to_owned();
                let response = router.oneshot(request).await?;
                log.0
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(ObservedRequest {
                        method,
                        path,
                        status: response.status(),
                    });
                Ok::<_, std::convert::Infallible>(response)
            }
        });
        (kube::Client::new(service, "default"), log)
    }

    /// A client of the server over HTTP on a free loopback port, built as
    /// every kubeconfig path builds one (`ksim_runtime::client::from_config`),
    /// as a stand-alone component talks to any cluster. The listener runs
    /// until the cluster is dropped.
    pub async fn http_client(&mut self) -> kube::Client {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("bind a loopback port");
        let address = listener.local_addr().expect("the listener's address");
        let server = self.server.clone();
        self.spawn(async move {
            if let Err(error) = ksim_apiserver::serve(listener, server).await {
                panic!("the API server stopped serving HTTP: {error}");
            }
        });
        let url: http::Uri = format!("http://{address}").parse().expect("a loopback URL");
        ksim_runtime::client::from_config(kube::Config::new(url)).expect("an HTTP client")
    }

    /// Creates `node`, then sets its status when the create did not keep
    /// it; the node as stored.
    pub async fn create_node(&self, node: &Node) -> Node {
        let nodes = Api::<Node>::all(self.client.clone());
        let created = nodes
            .create(&PostParams::default(), node)
            .await
            .expect("create the node");
        match &node.status {
            Some(status) if created.status.as_ref() != Some(status) => {
                let name = node.metadata.name.as_deref().expect("a named node");
                nodes
                    .patch_status(
                        name,
                        &PatchParams::default(),
                        &Patch::Merge(serde_json::json!({"status": status})),
                    )
                    .await
                    .expect("set the node's status")
            }
            _ => created,
        }
    }

    /// Creates `pod` (in its namespace, `default` when unset), then sets
    /// the status it carries (phase, conditions), which a create resets;
    /// the pod as stored.
    pub async fn create_pod(&self, pod: &Pod) -> Pod {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let pods = Api::<Pod>::namespaced(self.client.clone(), namespace);
        let created = pods
            .create(&PostParams::default(), pod)
            .await
            .expect("create the pod");
        match &pod.status {
            Some(status) => {
                let name = pod.metadata.name.as_deref().expect("a named pod");
                pods.patch_status(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({"status": status})),
                )
                .await
                .expect("set the pod's status")
            }
            None => created,
        }
    }

    /// Runs a component until the cluster is dropped.
    pub fn spawn(&mut self, component: impl std::future::Future<Output = ()> + Send + 'static) {
        self.components.push(tokio::spawn(component));
    }

    /// Waits until nothing in the cluster has work left at this instant
    /// (virtual clocks only).
    pub async fn settle(&self) {
        self.clock.settle().await.expect("the cluster settles");
    }

    /// Moves the virtual clock to `at`, firing the timers due on the way
    /// and settling after each.
    pub async fn advance_to(&self, at: DateTime<Utc>) {
        self.clock.advance_to(at).await.expect("the clock advances");
    }

    /// Moves the virtual clock `seconds` on, firing the timers due on the
    /// way and settling after each.
    pub async fn advance(&self, seconds: u64) {
        self.clock
            .advance(Duration::from_secs(seconds))
            .await
            .expect("the clock advances");
    }

    /// Sets a pod's phase, with `Ready=True` when it is `Running` and
    /// `Ready=False` otherwise, as the kubelet simulator would (the
    /// transition stamped with the cluster's clock).
    pub async fn set_pod_phase(&self, namespace: &str, name: &str, phase: &str) {
        let now = self.clock.timestamp().to_string();
        let ready = if phase == "Running" { "True" } else { "False" };
        Api::<Pod>::namespaced(self.client.clone(), namespace)
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(
                    serde_json::json!({"status": {"phase": phase, "conditions": [
                        {"type": "Ready", "status": ready, "lastTransitionTime": now}
                    ]}}),
                ),
            )
            .await
            .expect("set the pod's phase");
    }
}

/// A request a client sent, as [`InProcessCluster::observed_client`] logs it
/// once answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedRequest {
    /// The request's method.
    pub method: http::Method,
    /// The request's path (no query).
    pub path: String,
    /// The response's status.
    pub status: http::StatusCode,
}

/// The requests of an observed client, in the order they were answered.
#[derive(Clone, Debug, Default)]
pub struct RequestLog(std::sync::Arc<std::sync::Mutex<Vec<ObservedRequest>>>);

impl RequestLog {
    /// Every request answered so far.
    pub fn requests(&self) -> Vec<ObservedRequest> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The requests answered so far with `method` to `path`.
    pub fn to(&self, method: &http::Method, path: &str) -> Vec<ObservedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == *method && r.path == path)
            .collect()
    }
}

/// Polls `check` until it returns `Some` and returns that; fails the test
/// after 60 s (generous: CI runs many clusters at once on two cores; this
/// bounds a hang, it does not time anything).
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    // wall-clock: a test's bound on a hang, not cluster time.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline, // wall-clock: as above
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await; // wall-clock: polling
    }
}

impl Default for InProcessCluster {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for InProcessCluster {
    fn drop(&mut self) {
        for component in &self.components {
            component.abort();
        }
    }
}
