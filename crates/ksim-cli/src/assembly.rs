//! Cluster assembly: the one place that wires an API server and the chosen
//! components into a cluster in process, all on one clock. `ksim serve`
//! serves it on its port; `ksim run` runs scenarios against it. The
//! components are API clients of the server (in-process transport), as they
//! would be of any cluster. A snapshot is loaded before they start, its
//! objects handed to the API server's own bulk creation (no encoding).
//!
//! On a real clock the components run on a runtime of their own whose
//! threads run at a lower priority than the API server's (nice
//! +[`COMPONENTS_NICENESS`]): in a real cluster kubelets and controllers do
//! not share the API server's CPU, and a user's `kubectl` is answered ahead
//! of the components' start work (their first lists of a restored cluster's
//! 100,000 pods) rather than queued behind it. The in-process client does
//! the server's work for a request in the task that sent it, so what the API
//! server does for the components runs at their priority too. When nothing
//! else asks for the CPU they have all of it. A caller on one thread (a
//! virtual clock, where runs repeat; `ksim run`) keeps everything on it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures::future::BoxFuture;
use ksim_apiserver::{ApiServer, BulkItem};
use ksim_runtime::clock::Clock;
use ksim_snapshot::api::{BulkAnswer, BulkCreate, BulkObject, CreatedMetadata};
use tokio::task::JoinHandle;

use crate::commands::Component;

/// What runs beside the API server, already read and checked.
#[derive(Debug, Default)]
pub struct Components {
    /// Components not to run.
    pub disabled: Vec<Component>,
    /// The scheduler's configuration (default: upstream's profile).
    pub scheduler: Option<PathBuf>,
    /// The in-cluster descheduler: its policy file and interval.
    pub descheduler: Option<(PathBuf, Duration)>,
    /// The in-cluster autoscaler's flags.
    pub autoscaler: Option<crate::commands::AutoscalerFlags>,
    /// The DPDB controller's configuration (its clock is the cluster's).
    pub dpdb: ksim_controllers::dpdb::DpdbConfig,
}

/// How much lower the components' threads run than the API server's, in
/// nice steps (each about 1.25 times less CPU when both want it: +5 gives
/// the API server about three quarters of a contended core).
pub const COMPONENTS_NICENESS: i32 = 5;

/// An API server and its running components, on one clock.
pub struct Cluster {
    server: ApiServer,
    clock: Clock,
    /// The components' own runtime (beside a multi-threaded caller), shut
    /// down with the cluster.
    runtime: Option<tokio::runtime::Runtime>,
    tasks: Vec<JoinHandle<()>>,
}

impl Cluster {
    /// A cluster of the API server alone (bootstrapped: namespaces, priority
    /// classes, the `kubernetes` service), on `clock`.
    pub fn new(clock: Clock) -> Self {
        Self {
            server: ApiServer::with_clock(clock.clone()),
            clock,
            runtime: None,
            tasks: Vec::new(),
        }
    }

    /// A client over the in-process transport.
    pub fn client(&self) -> kube::Client {
        ksim_runtime::client::in_process(&self.server)
    }

    /// The HTTP service: the API and, on the same origin, the web view.
    pub fn router(&self) -> axum::Router {
        self.server.router().merge(ksim_ui::router())
    }

    /// The cluster as a snapshot's target: the in-process client, and the
    /// API server's own bulk creation for loading objects.
    pub fn snapshot_target(&self) -> ksim_snapshot::Target {
        ksim_snapshot::Target::new(self.client()).with_bulk_creation(Arc::new(InProcessBulk {
            server: self.server.clone(),
        }))
    }

    /// Reads and loads a snapshot (before the components start, so they
    /// adopt what it holds).
    pub async fn restore(&self, snapshot: &Path) -> anyhow::Result<()> {
        let documents = crate::commands::read_snapshot(snapshot)?;
        self.restore_scanned(documents, snapshot).await.map(drop)
    }

    /// Loads a snapshot's parsed documents, as [`Cluster::restore`] does;
    /// `path` names the file in messages.
    #[cfg(test)]
    pub async fn restore_documents(
        &self,
        documents: Vec<ksim_snapshot::Document>,
        path: &Path,
    ) -> anyhow::Result<ksim_snapshot::restore::Report> {
        let documents = documents.into_iter().map(Into::into).collect();
        self.restore_scanned(documents, path).await
    }

    /// Loads a snapshot's documents as [`crate::commands::read_snapshot`]
    /// reads them (objects built from the file's text while those before
    /// them are created), as [`Cluster::restore`] does.
    pub async fn restore_scanned(
        &self,
        documents: Vec<ksim_snapshot::ScannedDocument>,
        path: &Path,
    ) -> anyhow::Result<ksim_snapshot::restore::Report> {
        crate::commands::restore_at_start(&self.snapshot_target(), documents, path).await
    }

    /// Starts the components not disabled: on a runtime of their own at a
    /// lower priority when the caller's runtime is multi-threaded, else on
    /// the caller's (one thread). Must be called inside a runtime.
    pub async fn start(&mut self, components: Components) -> anyhow::Result<()> {
        let caller = tokio::runtime::Handle::current();
        let handle = match caller.runtime_flavor() {
            tokio::runtime::RuntimeFlavor::MultiThread => {
                self.runtime.insert(components_runtime()?).handle().clone()
            }
            _ => caller,
        };
        // The descheduler reads the cluster before it runs: started in a
        // task of the components' runtime, so its client is that runtime's.
        let descheduler = match components.descheduler.clone() {
            Some((policy, interval)) => {
                let server = self.server.clone();
                let clock = self.clock.clone();
                let started = handle.spawn(async move {
                    crate::commands::start_descheduler(&server, &policy, interval, clock).await
                });
                Some(started.await.context("the descheduler's start failed")??)
            }
            None => None,
        };
        // Everything below spawns onto (and builds its clients in) the
        // components' runtime; no await while it is entered.
        let _entered = handle.enter();
        self.spawn_components(components)?;
        self.tasks.extend(descheduler);
        Ok(())
    }

    /// Spawns the components (but the descheduler) on the current runtime.
    fn spawn_components(&mut self, components: Components) -> anyhow::Result<()> {
        let enabled = |component: Component| !components.disabled.contains(&component);
        if enabled(Component::Kubelet) {
            // All nodes managed; stopped with the cluster.
            let kubelet = ksim_kubelet::KubeletSimulator::new(
                self.client(),
                ksim_kubelet::KubeletOptions {
                    clock: self.clock.clone(),
                    ..ksim_kubelet::KubeletOptions::default()
                },
            );
            self.tasks.push(tokio::spawn(async move {
                if let Err(error) = kubelet.run().await {
                    tracing::error!(%error, "the kubelet simulator stopped");
                }
            }));
        }
        if enabled(Component::Controllers) {
            self.tasks
                .push(tokio::spawn(ksim_controllers::run_controllers_with_clock(
                    self.client(),
                    ksim_controllers::ALL_CONTROLLERS,
                    self.clock.clone(),
                )));
        }
        if enabled(Component::Dpdb) {
            let config = ksim_controllers::dpdb::DpdbConfig {
                clock: self.clock.clone(),
                ..components.dpdb
            };
            self.tasks.push(tokio::spawn(ksim_controllers::dpdb::run(
                self.client(),
                config,
            )));
        }
        if enabled(Component::Scheduler) {
            let task = crate::commands::start_scheduler(
                &self.server,
                components.scheduler.as_deref(),
                self.clock.clone(),
            )?;
            self.tasks.push(task);
        }
        if let Some(flags) = &components.autoscaler {
            let task = crate::commands::start_autoscaler(&self.server, flags, self.clock.clone());
            self.tasks.push(task);
        }
        Ok(())
    }
}

/// The API server's bulk creation called in process: the objects are moved
/// to it, not encoded, and created on the blocking pool, a few chunks at
/// once (one per core).
struct InProcessBulk {
    server: ApiServer,
}

impl BulkCreate for InProcessBulk {
    fn create(
        &self,
        items: Vec<BulkObject>,
    ) -> BoxFuture<'static, Result<BulkAnswer, ksim_snapshot::Error>> {
        let server = self.server.clone();
        Box::pin(async move {
            let items = items
                .into_iter()
                .map(|item| BulkItem {
                    object: item.object,
                    status: item.status,
                })
                .collect();
            let results = tokio::task::spawn_blocking(move || {
                server.create_objects(items, ksim_snapshot::api::BULK_FIELD_MANAGER)
            })
            .await
            .map_err(|e| ksim_snapshot::Error::Invalid(format!("the bulk creation failed: {e}")))?;
            Ok(BulkAnswer::Created(
                results
                    .into_iter()
                    .map(|result| match result {
                        Ok(created) => Ok(CreatedMetadata {
                            uid: created.uid,
                            generation: created.generation,
                        }),
                        Err(error) => Err(Box::new(status_of(&error))),
                    })
                    .collect(),
            ))
        })
    }

    fn chunk_size(&self) -> usize {
        2_000
    }

    fn in_flight(&self) -> usize {
        std::thread::available_parallelism().map_or(1, usize::from)
    }
}

/// The Status the API would answer for `error`.
fn status_of(error: &ksim_apiserver::ApiError) -> kube::core::Status {
    let mut status =
        kube::core::Status::failure(&error.message, error.reason).with_code(error.code);
    status.details = error
        .details
        .clone()
        .and_then(|details| serde_json::from_value(details).ok());
    status
}

/// The components' runtime: as many workers as cores, each thread (the
/// blocking pool's too) lowered by [`COMPONENTS_NICENESS`] as it starts.
fn components_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .thread_name("ksim-components")
        .on_thread_start(lower_priority)
        .enable_all()
        .build()
        .context("cannot start the components' runtime")
}

/// Lowers the calling thread's priority by [`COMPONENTS_NICENESS`] (on
/// Linux a thread's nice value is its own). Where it cannot (another
/// platform, a limit), the thread runs as it is.
fn lower_priority() {
    let thread = rustix::thread::gettid();
    let lowered = rustix::process::getpriority_process(Some(thread)).and_then(|nice| {
        rustix::process::setpriority_process(Some(thread), nice + COMPONENTS_NICENESS)
    });
    if let Err(error) = lowered {
        tracing::debug!(%error, "the components' thread keeps its priority");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        // Not waited for: a cluster may be dropped inside another runtime.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksim_snapshot::restore::RestoreOptions;
    use serde_json::{Value, json};

    /// A snapshot: a namespace, two nodes, a Deployment owning a
    /// ReplicaSet owning two Running pods, one on each node.
    fn snapshot() -> Vec<ksim_snapshot::Document> {
        let owner = |kind: &str, name: &str, uid: &str| {
            json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid,
                "controller": true, "blockOwnerDeletion": true}])
        };
        let template = json!({"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "busybox"}]}});
        let mut objects = vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "uid": "ns-1"}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "team", "uid": "d-1", "generation": 3},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template},
                "status": {"observedGeneration": 3, "replicas": 2, "readyReplicas": 2, "availableReplicas": 2}}),
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": "web-1", "namespace": "team", "uid": "rs-1", "generation": 1,
                    "labels": {"app": "web"}, "ownerReferences": owner("Deployment", "web", "d-1")},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template},
                "status": {"observedGeneration": 1, "replicas": 2, "readyReplicas": 2, "availableReplicas": 2}}),
        ];
        for (i, node) in ["node-a", "node-b"].into_iter().enumerate() {
            objects.push(json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node, "uid": format!("n-{i}"), "labels": {"type": "kwok"}},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                    "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}]}}));
            objects.push(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("web-1-{i}"), "namespace": "team", "uid": format!("p-{i}"),
                    "labels": {"app": "web"}, "ownerReferences": owner("ReplicaSet", "web-1", "rs-1")},
                "spec": {"nodeName": node, "containers": [{"name": "app", "image": "busybox"}]},
                "status": {"phase": "Running", "podIP": format!("10.0.0.{i}"), "hostIP": format!("192.168.0.{i}"),
                    "conditions": [{"type": "Ready", "status": "True"}]}}));
        }
        objects
            .into_iter()
            .enumerate()
            .map(|(i, object)| ksim_snapshot::Document {
                number: i + 1,
                line: i + 1,
                object,
            })
            .collect()
    }

    /// Every object of `path` (a collection) as restored, without what
    /// differs between any two creations (uid, resourceVersion, times); an
    /// owner reference's uid checked against its owner's and then named
    /// `<owner>` wherever it appears (managedFields key on it too).
    async fn restored(client: &kube::Client, path: &str) -> Vec<Value> {
        let request = http::Request::get(path).body(Vec::new()).expect("request");
        let mut list: Value = client.request(request).await.expect("list");
        let mut items = match list["items"].take() {
            Value::Array(items) => items,
            _ => Vec::new(),
        };
        let mut owners = Vec::new();
        for item in &mut items {
            let metadata = item["metadata"].as_object_mut().expect("metadata");
            for field in ["uid", "resourceVersion", "creationTimestamp"] {
                metadata.remove(field);
            }
            for entry in metadata
                .get_mut("managedFields")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                entry.as_object_mut().expect("an entry").remove("time");
            }
            for reference in metadata
                .get_mut("ownerReferences")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                let kind = reference["kind"].as_str().expect("kind").to_lowercase();
                let name = reference["name"].as_str().expect("name");
                let request =
                    http::Request::get(format!("/apis/apps/v1/namespaces/team/{kind}s/{name}"))
                        .body(Vec::new())
                        .expect("request");
                let owner: Value = client.request(request).await.expect("the owner");
                assert_eq!(reference["uid"], owner["metadata"]["uid"], "{reference}");
                owners.push(
                    owner["metadata"]["uid"]
                        .as_str()
                        .expect("a uid")
                        .to_string(),
                );
            }
        }
        items
            .into_iter()
            .map(|item| {
                let text = owners
                    .iter()
                    .fold(item.to_string(), |text, uid| text.replace(uid, "<owner>"));
                serde_json::from_str(&text).expect("JSON")
            })
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn objects_created_in_process_are_those_the_bulk_path_over_http_creates() {
        let options = RestoreOptions {
            controllers_running: false,
            ..RestoreOptions::default()
        };
        let in_process = Cluster::new(Clock::real());
        let report = in_process
            .restore_documents(snapshot(), Path::new("snapshot.yaml"))
            .await
            .expect("restored in process");
        assert_eq!(report.created_total(), 7, "{report:?}");
        let server = ApiServer::new();
        let over_http = ksim_runtime::client::in_process(&server);
        ksim_snapshot::restore::restore(
            &ksim_snapshot::Target::new(over_http.clone()),
            snapshot(),
            &options,
        )
        .await
        .expect("restored over HTTP");

        let client = in_process.client();
        for path in [
            "/api/v1/nodes",
            "/api/v1/namespaces/team/pods",
            "/apis/apps/v1/namespaces/team/replicasets",
            "/apis/apps/v1/namespaces/team/deployments",
        ] {
            let created = restored(&client, path).await;
            assert_eq!(created, restored(&over_http, path).await, "{path}");
            assert!(!created.is_empty(), "{path}");
        }
        // Pods on their nodes, Running with their IPs, owned by the new
        // ReplicaSet (checked above), written by the restore's manager.
        let pods = restored(&client, "/api/v1/namespaces/team/pods").await;
        let placed: Vec<(&str, &str, &str)> = pods
            .iter()
            .map(|p| {
                (
                    p["spec"]["nodeName"].as_str().unwrap_or_default(),
                    p["status"]["phase"].as_str().unwrap_or_default(),
                    p["status"]["podIP"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            placed,
            [
                ("node-a", "Running", "10.0.0.0"),
                ("node-b", "Running", "10.0.0.1")
            ]
        );
        assert_eq!(
            pods[0]["metadata"]["ownerReferences"][0]["name"], "web-1",
            "{}",
            pods[0]
        );
        assert_eq!(
            pods[0]["metadata"]["managedFields"][0]["manager"],
            ksim_snapshot::api::BULK_FIELD_MANAGER
        );
        let sets = restored(&client, "/apis/apps/v1/namespaces/team/replicasets").await;
        assert_eq!(sets[0]["status"]["readyReplicas"], 2, "{}", sets[0]);
    }

    /// `objects` written as `ksim snapshot save` writes them (flow style).
    fn write_file(objects: &[Value]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("snapshot.yaml");
        let mut out = Vec::new();
        ksim_snapshot::write_documents(objects, ksim_snapshot::Style::Flow, &mut out)
            .expect("written");
        std::fs::write(&path, out).expect("the file written");
        (dir, path)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_file_restores_as_its_parsed_documents_do() {
        let objects: Vec<Value> = snapshot().into_iter().map(|d| d.object).collect();
        let (_dir, path) = write_file(&objects);
        let from_file = Cluster::new(Clock::real());
        from_file
            .restore(&path)
            .await
            .expect("restored from the file");
        let parsed = Cluster::new(Clock::real());
        parsed
            .restore_documents(snapshot(), &path)
            .await
            .expect("restored from parsed documents");
        for collection in [
            "/api/v1/nodes",
            "/api/v1/namespaces/team/pods",
            "/apis/apps/v1/namespaces/team/replicasets",
            "/apis/apps/v1/namespaces/team/deployments",
        ] {
            let restored_from_file = restored(&from_file.client(), collection).await;
            assert!(!restored_from_file.is_empty(), "{collection}");
            assert_eq!(
                restored_from_file,
                restored(&parsed.client(), collection).await,
                "{collection}"
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_malformed_document_late_in_a_large_file_restores_nothing_and_says_where() {
        let mut objects =
            vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})];
        objects.extend((0..6_000).map(|i| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("c{i}"), "namespace": "team"}, "data": {"k": "v"}})
        }));
        let (_dir, path) = write_file(&objects);
        // Document 5,990 (line 2 * 5,990 + 1 after the header and `---`
        // lines) is cut short.
        let text = std::fs::read_to_string(&path).expect("read");
        let text = text.replacen(
            "\"name\":\"c5988\",\"namespace\":\"team\"}}",
            "\"name\":",
            1,
        );
        std::fs::write(&path, text).expect("written");
        let cluster = Cluster::new(Clock::real());
        let error = cluster.restore(&path).await.expect_err("malformed");
        let message = format!("{error:#}");
        assert!(
            message.contains("snapshot.yaml: document 5990 (line 11981)"),
            "{message}"
        );
        let request = http::Request::get("/api/v1/namespaces/team/configmaps")
            .body(Vec::new())
            .expect("request");
        let listed: Value = cluster.client().request(request).await.expect("listed");
        assert_eq!(listed["items"], json!([]), "nothing was created");
        let request = http::Request::get("/api/v1/namespaces/team")
            .body(Vec::new())
            .expect("request");
        let missing = cluster.client().request::<Value>(request).await;
        assert!(
            missing.is_err(),
            "the namespace was not created: {missing:?}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_in_process_restore_says_where_and_deletes_what_it_created() {
        let cluster = Cluster::new(Clock::real());
        let mut documents = snapshot();
        documents.push(ksim_snapshot::Document {
            number: 8,
            line: 8,
            object: json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "nowhere"}}),
        });
        let error = cluster
            .restore_documents(documents, Path::new("snapshot.yaml"))
            .await
            .expect_err("a namespace is missing");
        let message = format!("{error:#}");
        assert!(
            message.contains(
                "document 8 (line 8), ConfigMap nowhere/settings: namespaces \"nowhere\" not found"
            ),
            "{message}"
        );
        assert!(message.contains("were deleted again"), "{message}");
        // The nodes (created before the ConfigMap's tier) are gone again.
        let nodes = restored(&cluster.client(), "/api/v1/nodes").await;
        assert!(nodes.is_empty(), "{nodes:?}");
    }
}
