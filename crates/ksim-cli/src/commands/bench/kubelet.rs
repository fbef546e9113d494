//! `ksim bench kubelet`: the kubelet simulator's figures, each beside its
//! target, against an in-process cluster (API server and kubelet simulator,
//! no scheduler or controllers). Nodes made as `ksim scale node` makes them
//! until all are Ready (timed by a watch), the steady CPU and RSS of those
//! nodes idle with their leases, and pre-bound pods from creation to Running
//! and from deletion to gone (timed by a watch).

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use http_body_util::BodyExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::runtime::watcher;
use serde::Deserialize;
use tokio::task::JoinSet;

use super::measure::{cpu_time, mebibytes, per_second, thousands, vm_rss_bytes};
use crate::commands::print_line;
use crate::commands::scale;

/// The namespace of the benchmarked pods (it exists in a new cluster).
const NAMESPACE: &str = "default";
/// How long any phase may take before the benchmark gives up.
const PHASE_DEADLINE: Duration = Duration::from_secs(600);

/// Sizes of `ksim bench kubelet`; the defaults are the targets' sizes.
#[derive(Debug, Clone, clap::Args)]
pub struct KubeletBench {
    /// Nodes made Ready, then measured idle (0 skips both).
    #[arg(long, default_value_t = 10_000)]
    pub nodes: usize,
    /// Seconds the idle nodes' CPU is measured over, once they settled.
    #[arg(long, default_value_t = 30)]
    pub idle_seconds: u64,
    /// Seconds waited after every node is Ready with its Lease before the idle window.
    #[arg(long, default_value_t = 15)]
    pub settle_seconds: u64,
    /// Pre-bound pods made Running, then deleted (0 skips them).
    #[arg(long, default_value_t = 100_000)]
    pub pods: usize,
    /// Nodes the pods are bound to (round-robin).
    #[arg(long, default_value_t = 1_000)]
    pub pod_nodes: usize,
    /// Concurrent tasks creating and deleting objects through the in-process client.
    #[arg(long, default_value_t = 8)]
    pub tasks: usize,
}

/// Runs the kubelet benchmark and prints one line per figure.
pub fn bench_kubelet(bench: &KubeletBench) -> anyhow::Result<()> {
    if bench.tasks == 0 {
        bail!("--tasks must be at least 1");
    }
    if bench.pods > 0 && bench.pod_nodes == 0 {
        bail!("--pod-nodes must be at least 1 when --pods is set");
    }
    for (flag, count) in [("--nodes", bench.nodes), ("--pod-nodes", bench.pod_nodes)] {
        if count > scale::MAX_REPLICAS {
            bail!("{flag} {count} is more than ksim can scale to");
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split_whitespace().next().unwrap_or("unknown");
    print_line(format_args!(
        "machine: {cpus} CPUs, load average {load} (the API server, the kubelet simulator and this benchmark share the process)"
    ))?;
    let result = runtime.block_on(async {
        if bench.nodes > 0 {
            nodes_ready_then_idle(bench).await?;
        }
        if bench.pods > 0 {
            pods_running_then_deleted(bench).await?;
        }
        anyhow::Ok(())
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

/// An API server with the kubelet simulator managing every node, in this process.
struct Cluster {
    client: kube::Client,
    kubelet: tokio::task::JoinHandle<()>,
}

impl Cluster {
    fn start() -> Self {
        let server = ksim_apiserver::ApiServer::new();
        let client = ksim_runtime::client::in_process(&server);
        let simulator = ksim_kubelet::KubeletSimulator::new(
            ksim_runtime::client::in_process(&server),
            ksim_kubelet::KubeletOptions::default(),
        );
        let kubelet = tokio::spawn(async move {
            if let Err(error) = simulator.run().await {
                tracing::error!(%error, "the kubelet simulator stopped");
            }
        });
        Self { client, kubelet }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.kubelet.abort();
    }
}

/// Just what the benchmark reads of a watched Node or Pod: cheap to decode.
#[derive(Clone, Debug, Deserialize)]
struct Slim<K> {
    #[serde(deserialize_with = "slim_metadata")]
    metadata: ObjectMeta,
    #[serde(default)]
    status: SlimStatus,
    #[serde(skip)]
    kind: std::marker::PhantomData<K>,
}

/// The identity fields of `metadata` the watcher and the benchmark read; the rest
/// (managedFields above all) is skipped unread.
fn slim_metadata<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<ObjectMeta, D::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Identity {
        name: Option<String>,
        namespace: Option<String>,
        resource_version: Option<String>,
        uid: Option<String>,
    }
    let identity = Identity::deserialize(deserializer)?;
    Ok(ObjectMeta {
        name: identity.name,
        namespace: identity.namespace,
        resource_version: identity.resource_version,
        uid: identity.uid,
        ..ObjectMeta::default()
    })
}

#[derive(Clone, Debug, Default, Deserialize)]
struct SlimStatus {
    #[serde(default)]
    phase: Option<String>,
    #[serde(default)]
    conditions: Vec<SlimCondition>,
}

#[derive(Clone, Debug, Deserialize)]
struct SlimCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
}

impl<K> Slim<K> {
    fn ready(&self) -> bool {
        self.status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    }

    fn running(&self) -> bool {
        self.status.phase.as_deref() == Some("Running")
    }

    fn name(&self) -> String {
        self.metadata.name.clone().unwrap_or_default()
    }
}

/// The core/v1 kinds watched.
trait CoreKind: Clone + Send + Sync + std::fmt::Debug + 'static {
    const KIND: &'static str;
    const PLURAL: &'static str;
}

#[derive(Clone, Debug)]
struct NodeKind;
impl CoreKind for NodeKind {
    const KIND: &'static str = "Node";
    const PLURAL: &'static str = "nodes";
}

#[derive(Clone, Debug)]
struct PodKind;
impl CoreKind for PodKind {
    const KIND: &'static str = "Pod";
    const PLURAL: &'static str = "pods";
}

impl<K: CoreKind> kube::Resource for Slim<K> {
    type DynamicType = ();
    type Scope = kube::core::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(K::KIND)
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(K::PLURAL)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// What a watch of one kind has seen so far.
#[derive(Default)]
struct Seen {
    /// Names of objects that exist.
    present: HashSet<String>,
    /// Names of objects that met the condition (Ready nodes, Running pods) at least once.
    met: HashSet<String>,
}

/// A watch (started and listed before it returns) that tracks which objects exist
/// and which met `condition`; the counts are published through the returned handle.
struct Tracker {
    present: Arc<AtomicUsize>,
    met: Arc<AtomicUsize>,
    changed: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Tracker {
    async fn start<K: CoreKind>(
        client: &kube::Client,
        condition: fn(&Slim<K>) -> bool,
    ) -> anyhow::Result<Self> {
        let api: Api<Slim<K>> = Api::all(client.clone());
        let present = Arc::new(AtomicUsize::new(0));
        let met = Arc::new(AtomicUsize::new(0));
        let changed = Arc::new(tokio::sync::Notify::new());
        let (listed_tx, listed_rx) = tokio::sync::oneshot::channel();
        let task = {
            let (present, met, changed) = (present.clone(), met.clone(), changed.clone());
            tokio::spawn(async move {
                let mut seen = Seen::default();
                // The objects of a (re-)list in progress: they replace `present` once it
                // is complete (objects deleted while the watch was down are then gone).
                let mut relisted: Option<HashSet<String>> = None;
                let mut listed = Some(listed_tx);
                // Unpaged lists: a re-list is one snapshot, so its watch misses no deletion.
                let config = watcher::Config {
                    page_size: None,
                    ..watcher::Config::default()
                };
                let mut stream = std::pin::pin!(watcher(api, config));
                while let Some(event) = stream.next().await {
                    match event {
                        Ok(watcher::Event::InitApply(object)) => {
                            let name = object.name();
                            if condition(&object) {
                                seen.met.insert(name.clone());
                            }
                            relisted.get_or_insert_with(HashSet::new).insert(name);
                        }
                        Ok(watcher::Event::Apply(object)) => {
                            let name = object.name();
                            if condition(&object) {
                                seen.met.insert(name.clone());
                            }
                            seen.present.insert(name);
                        }
                        Ok(watcher::Event::Delete(object)) => {
                            seen.present.remove(&object.name());
                        }
                        Ok(watcher::Event::InitDone) => {
                            seen.present = relisted.take().unwrap_or_default();
                            if let Some(tx) = listed.take() {
                                let _ = tx.send(());
                            }
                        }
                        Ok(watcher::Event::Init) => relisted = Some(HashSet::new()),
                        Err(error) => tracing::warn!(%error, "benchmark watch failed; retrying"),
                    }
                    present.store(seen.present.len(), Ordering::Release);
                    met.store(seen.met.len(), Ordering::Release);
                    changed.notify_waiters();
                }
            })
        };
        tokio::time::timeout(Duration::from_secs(60), listed_rx)
            .await
            .context("the benchmark's watch did not list in 60 s")?
            .context("the benchmark's watch stopped")?;
        Ok(Self {
            present,
            met,
            changed,
            task,
        })
    }

    /// Waits until `done(present, met)` holds; the time it held first.
    async fn wait(
        &self,
        what: &str,
        done: impl Fn(usize, usize) -> bool,
    ) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + PHASE_DEADLINE;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (present, met) = (
                self.present.load(Ordering::Acquire),
                self.met.load(Ordering::Acquire),
            );
            if done(present, met) {
                return Ok(Instant::now());
            }
            if Instant::now() > deadline {
                bail!("gave up waiting for {what}: {present} present, {met} met the condition");
            }
            // Also wake now and then in case the watch task stopped.
            let _ = tokio::time::timeout(Duration::from_secs(1), notified).await;
        }
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Sends `request` and fails unless the answer is a success (or one of `tolerated`).
async fn send(
    client: &kube::Client,
    request: http::Request<Vec<u8>>,
    tolerated: &[u16],
) -> anyhow::Result<()> {
    let what = format!("{} {}", request.method(), request.uri());
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .with_context(|| format!("{what} failed"))?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .with_context(|| format!("{what}: the answer failed"))?
        .to_bytes();
    if status.is_success() || tolerated.contains(&status.as_u16()) {
        return Ok(());
    }
    bail!(
        "{what} answered {status}: {}",
        String::from_utf8_lossy(&body[..body.len().min(300)])
    )
}

fn json_request(method: &str, path: &str, body: Vec<u8>) -> anyhow::Result<http::Request<Vec<u8>>> {
    http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(body)
        .context("cannot build a request")
}

/// Runs `work(i)` for every `i` in `0..count` on `tasks` concurrent tasks.
async fn for_each_concurrently<F, Fut>(count: usize, tasks: usize, work: F) -> anyhow::Result<()>
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let mut set = JoinSet::new();
    for task in 0..tasks.min(count.max(1)) {
        let work = work.clone();
        set.spawn(async move {
            for i in (task..count).step_by(tasks) {
                work(i).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(joined) = set.join_next().await {
        joined.context("a benchmark task failed")??;
    }
    Ok(())
}

/// Creates scaled nodes `0..count` as `ksim scale node` makes them (status included).
async fn create_nodes(client: &kube::Client, count: usize, tasks: usize) -> anyhow::Result<()> {
    let values = Arc::new(scale::default_values());
    let client = client.clone();
    for_each_concurrently(count, tasks, move |i| {
        let (client, values) = (client.clone(), values.clone());
        async move {
            let node = scale::node(i, &values);
            let body = serde_json::to_vec(&node).context("a node encodes")?;
            let created: serde_json::Value = client
                .request(json_request("POST", "/api/v1/nodes", body)?)
                .await
                .with_context(|| format!("cannot create node {}", scale::node_name(i)))?;
            // As `ksim scale node`: set the status when the server dropped it on create.
            if created.pointer("/status/addresses").is_none() {
                let patch = serde_json::json!({"status": node["status"]});
                let mut request = json_request(
                    "PATCH",
                    &format!("/api/v1/nodes/{}/status", scale::node_name(i)),
                    serde_json::to_vec(&patch).context("a patch encodes")?,
                )?;
                request.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/merge-patch+json"),
                );
                send(&client, request, &[]).await?;
            }
            Ok(())
        }
    })
    .await
}

/// Seconds with two decimals.
fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// `✓` when a figure meets its target, `✗` otherwise.
fn mark(met: bool) -> &'static str {
    if met { "✓" } else { "✗" }
}

/// CPU this process used between two readings, when both were readable.
fn cpu_between(before: Option<Duration>, after: Option<Duration>) -> Option<Duration> {
    before.zip(after).map(|(b, a)| a.saturating_sub(b))
}

/// How many leases `kube-node-lease` holds.
async fn lease_count(client: &kube::Client) -> anyhow::Result<usize> {
    #[derive(Deserialize)]
    struct List {
        #[serde(default)]
        items: Vec<serde::de::IgnoredAny>,
    }
    let request = http::Request::get(format!(
        "/apis/coordination.k8s.io/v1/namespaces/{}/leases",
        ksim_kubelet::simulator::NODE_LEASE_NAMESPACE
    ))
    .header(
        http::header::ACCEPT,
        "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json",
    )
    .body(Vec::new())
    .context("cannot build the lease list request")?;
    let list: List = client
        .request(request)
        .await
        .context("cannot list leases")?;
    Ok(list.items.len())
}

async fn nodes_ready_then_idle(bench: &KubeletBench) -> anyhow::Result<()> {
    let nodes = bench.nodes;
    let cluster = Cluster::start();
    let tracker = Tracker::start::<NodeKind>(&cluster.client, Slim::ready).await?;
    let started = Instant::now();
    create_nodes(&cluster.client, nodes, bench.tasks).await?;
    let created = started.elapsed();
    let ready = tracker
        .wait("every node Ready", |_, met| met >= nodes)
        .await?
        .duration_since(started);
    drop(tracker);
    print_line(format_args!(
        "{} nodes Ready: {} from the first create (target < 5 s) {}; created in {} ({} nodes/s)",
        thousands(nodes as f64),
        secs(ready),
        mark(ready < Duration::from_secs(5)),
        secs(created),
        thousands(per_second(nodes as u64, created)),
    ))?;

    let deadline = Instant::now() + PHASE_DEADLINE;
    loop {
        let leases = lease_count(&cluster.client).await?;
        if leases >= nodes {
            break;
        }
        if Instant::now() > deadline {
            bail!("gave up waiting for {nodes} node leases: {leases} exist");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep(Duration::from_secs(bench.settle_seconds)).await;
    let own = std::process::id();
    let window = Duration::from_secs(bench.idle_seconds.max(1));
    let cpu_before = cpu_time(own);
    let window_start = Instant::now();
    tokio::time::sleep(window).await;
    let elapsed = window_start.elapsed();
    let cpu = cpu_between(cpu_before, cpu_time(own));
    let rss = vm_rss_bytes(own);
    let share = cpu.map(|cpu| 100.0 * cpu.as_secs_f64() / elapsed.as_secs_f64());
    print_line(format_args!(
        "{} idle nodes with leases: {} of one core over {} (target < 10%) {}; RSS {}",
        thousands(nodes as f64),
        share.map_or_else(|| "unknown".to_owned(), |s| format!("{s:.1}%")),
        secs(elapsed),
        mark(share.is_some_and(|s| s < 10.0)),
        rss.map_or_else(|| "unknown".to_owned(), mebibytes),
    ))?;
    drop(cluster);
    Ok(())
}

/// A pod of one container bound to scaled node `node`, as JSON.
fn bound_pod(name: &str, node: usize) -> Vec<u8> {
    let pod = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "nodeName": scale::node_name(node),
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
        },
    });
    serde_json::to_vec(&pod).unwrap_or_default()
}

fn pod_name(i: usize) -> String {
    format!("pod-{i:06}")
}

async fn pods_running_then_deleted(bench: &KubeletBench) -> anyhow::Result<()> {
    let (pods, pod_nodes, tasks) = (bench.pods, bench.pod_nodes, bench.tasks);
    let cluster = Cluster::start();
    let node_tracker = Tracker::start::<NodeKind>(&cluster.client, Slim::ready).await?;
    create_nodes(&cluster.client, pod_nodes, tasks).await?;
    node_tracker
        .wait("every node Ready", |_, met| met >= pod_nodes)
        .await?;
    drop(node_tracker);

    let tracker = Tracker::start::<PodKind>(&cluster.client, Slim::running).await?;
    let own = std::process::id();
    let cpu_before = cpu_time(own);
    let started = Instant::now();
    let client = cluster.client.clone();
    let collection = format!("/api/v1/namespaces/{NAMESPACE}/pods");
    {
        let collection = collection.clone();
        for_each_concurrently(pods, tasks, move |i| {
            let client = client.clone();
            let request = json_request("POST", &collection, bound_pod(&pod_name(i), i % pod_nodes));
            async move { send(&client, request?, &[]).await }
        })
        .await?;
    }
    let created = started.elapsed();
    let running = tracker
        .wait("every pod Running", |_, met| met >= pods)
        .await?
        .duration_since(started);
    let cpu = cpu_between(cpu_before, cpu_time(own));
    let rate = per_second(pods as u64, running);
    print_line(format_args!(
        "{} pre-bound pods on {} nodes Running: {} from the first create (target < 20 s) {}, {} pods/s (target >= 5,000) {}; created in {}{}",
        thousands(pods as f64),
        thousands(pod_nodes as f64),
        secs(running),
        mark(running < Duration::from_secs(20)),
        thousands(rate),
        mark(rate >= 5_000.0),
        secs(created),
        cpu.map_or_else(String::new, |cpu| format!("; process CPU {}", secs(cpu))),
    ))?;

    let cpu_before = cpu_time(own);
    let started = Instant::now();
    let client = cluster.client.clone();
    for_each_concurrently(pods, tasks, move |i| {
        let client = client.clone();
        let request = json_request(
            "DELETE",
            &format!("{collection}/{}", pod_name(i)),
            Vec::new(),
        );
        async move { send(&client, request?, &[404]).await }
    })
    .await?;
    let requested = started.elapsed();
    let gone = tracker
        .wait("every pod gone", |present, _| present == 0)
        .await?
        .duration_since(started);
    let cpu = cpu_between(cpu_before, cpu_time(own));
    print_line(format_args!(
        "{} pods deleted: all gone {} after the first delete, {} pods/s; deletes sent in {}{}",
        thousands(pods as f64),
        secs(gone),
        thousands(per_second(pods as u64, gone)),
        secs(requested),
        cpu.map_or_else(String::new, |cpu| format!("; process CPU {}", secs(cpu))),
    ))?;
    drop(tracker);
    drop(cluster);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slim_objects_read_readiness_and_phase() {
        let node: Slim<NodeKind> = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n"},
            "status": {"conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True"},
            ]},
        }))
        .expect("decodes");
        assert!(node.ready());
        assert_eq!(node.name(), "n");
        let bare: Slim<NodeKind> =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "m"}}))
                .expect("decodes");
        assert!(!bare.ready());
        let pod: Slim<PodKind> = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"}, "status": {"phase": "Running"},
        }))
        .expect("decodes");
        assert!(pod.running());
    }

    #[test]
    fn bound_pods_name_their_scaled_node() {
        let pod: serde_json::Value =
            serde_json::from_slice(&bound_pod("pod-000007", 7)).expect("JSON");
        assert_eq!(pod["spec"]["nodeName"], "node-000007");
        assert_eq!(pod["metadata"]["name"], "pod-000007");
    }
}
