//! `ksim bench bulk`: the API server's bulk creation in process
//! (`ApiServer::create_objects`, what a snapshot restore loads through):
//! N nodes (`ksim scale node`'s shape), then the ReplicaSets owning the
//! pods, then P pods bound to the nodes, each with a Running status (phase,
//! IPs, conditions, container statuses), in one API server; objects per
//! second and milliseconds per tier, then every pod read back through
//! paged JSON lists (`GET /api/v1/pods?limit=...`), all of them Running.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use http_body_util::BodyExt;
use ksim_apiserver::{ApiServer, BulkItem};
use serde::Deserialize;
use serde_json::{Value, json};

use super::measure::{mebibytes, millis, per_second, thousands, vm_rss_bytes};
use crate::commands::print_line;
use crate::commands::scale;

/// Sizes of `ksim bench bulk`.
#[derive(Debug, Clone, clap::Args)]
pub struct BulkBench {
    /// Nodes created.
    #[arg(long, default_value_t = 10_000)]
    pub nodes: usize,
    /// Running pods created (bound to the nodes in turn).
    #[arg(long, default_value_t = 100_000)]
    pub pods: usize,
    /// Pods per owning ReplicaSet.
    #[arg(long, default_value_t = 1_000)]
    pub pods_per_replica_set: usize,
    /// Items per `create_objects` call (0: a tier in one call).
    #[arg(long, default_value_t = 0)]
    pub chunk: usize,
    /// Items per page of the pod listing.
    #[arg(long, default_value_t = 5_000)]
    pub page: usize,
}

/// The field manager of the bulk creations (as a snapshot restore's).
const MANAGER: &str = "ksim-bench";

/// Runs the bulk benchmark and prints its figures.
pub fn bench_bulk(bench: &BulkBench) -> anyhow::Result<()> {
    if bench.nodes == 0 || bench.nodes > scale::MAX_REPLICAS {
        bail!("--nodes must be between 1 and {}", scale::MAX_REPLICAS);
    }
    if bench.page == 0 {
        bail!("--page must be at least 1");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load
        .split_whitespace()
        .next()
        .unwrap_or("unknown")
        .to_owned();
    print_line(format_args!(
        "machine: {cpus} CPUs, load average {load}; the API server alone, in process"
    ))?;
    let result = runtime.block_on(run(bench.clone()));
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

/// A pod of the benchmark, owned by `owner` (name, uid) and bound to a node.
fn pod(index: usize, nodes: usize, owner: &(String, String)) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("app-{:03}-{index:06}", index / 1000), "namespace": "default",
            "labels": {"app": owner.0},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner.0,
                "uid": owner.1, "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"nodeName": scale::node_name(index % nodes),
            "containers": [{"name": "app", "image": "busybox",
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]},
    })
}

/// The status a kubelet reports for a Running pod of the benchmark.
fn running_status(index: usize, nodes: usize) -> Value {
    let ip = format!(
        "10.{}.{}.{}",
        64 + index / 65_536,
        (index / 256) % 256,
        index % 256
    );
    json!({"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
        "hostIP": scale::internal_ip(index % nodes), "startTime": "2026-01-01T00:00:00Z",
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"},
            {"type": "Initialized", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [{"name": "app", "image": "busybox", "imageID": "", "ready": true,
            "restartCount": 0, "started": true, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]})
}

/// Creates `items` in calls of `chunk` items (all at once for 0); the
/// results in order, and the time the calls took.
fn create(
    server: &ApiServer,
    items: Vec<BulkItem>,
    chunk: usize,
    what: &str,
) -> anyhow::Result<(Vec<ksim_apiserver::BulkCreated>, Duration)> {
    let chunk = if chunk == 0 {
        items.len().max(1)
    } else {
        chunk
    };
    let mut created = Vec::with_capacity(items.len());
    let mut items = items.into_iter().peekable();
    let mut elapsed = Duration::ZERO;
    while items.peek().is_some() {
        let batch: Vec<BulkItem> = items.by_ref().take(chunk).collect();
        let started = Instant::now();
        let results = server.create_objects(batch, MANAGER);
        elapsed += started.elapsed();
        for result in results {
            created.push(result.map_err(|e| anyhow::anyhow!("creating a {what}: {e}"))?);
        }
    }
    Ok((created, elapsed))
}

fn tier_line(what: &str, count: usize, elapsed: Duration) -> anyhow::Result<()> {
    print_line(format_args!(
        "create_objects: {} {what} in {} ({} objects/s)",
        thousands(count as f64),
        millis(elapsed),
        thousands(per_second(count as u64, elapsed)),
    ))
}

async fn run(bench: BulkBench) -> anyhow::Result<()> {
    let server = ApiServer::new();
    let values = scale::default_values();
    let nodes: Vec<BulkItem> = (0..bench.nodes)
        .map(|i| BulkItem {
            object: scale::node(i, &values),
            status: None,
        })
        .collect();
    let per_set = bench.pods_per_replica_set.max(1);
    let set_names: Vec<String> = (0..bench.pods.div_ceil(per_set))
        .map(|set| format!("app-{set:03}"))
        .collect();
    let sets: Vec<BulkItem> = set_names
        .iter()
        .map(|name| BulkItem {
            object: json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"replicas": per_set, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                        "spec": {"containers": [{"name": "app", "image": "busybox"}]}}}}),
            status: Some(json!({"replicas": per_set, "fullyLabeledReplicas": per_set,
                "readyReplicas": per_set, "availableReplicas": per_set, "observedGeneration": 1})),
        })
        .collect();

    let (_, nodes_took) = create(&server, nodes, bench.chunk, "node")?;
    let (created_sets, sets_took) = create(&server, sets, bench.chunk, "ReplicaSet")?;
    let owners: Vec<(String, String)> = set_names
        .into_iter()
        .zip(created_sets)
        .map(|(name, created)| (name, created.uid))
        .collect();
    let pods: Vec<BulkItem> = (0..bench.pods)
        .map(|i| BulkItem {
            object: pod(i, bench.nodes, &owners[i / per_set]),
            status: Some(running_status(i, bench.nodes)),
        })
        .collect();
    let (_, pods_took) = create(&server, pods, bench.chunk, "pod")?;
    let total = nodes_took + sets_took + pods_took;
    let objects = bench.nodes + owners.len() + bench.pods;
    tier_line("nodes", bench.nodes, nodes_took)?;
    tier_line("ReplicaSets", owners.len(), sets_took)?;
    tier_line("Running pods", bench.pods, pods_took)?;
    print_line(format_args!(
        "create_objects: {} objects in {} ({} objects/s; target 110,112 in <= 2 s), RSS {}",
        thousands(objects as f64),
        millis(total),
        thousands(per_second(objects as u64, total)),
        vm_rss_bytes(std::process::id()).map_or_else(|| "unknown".into(), mebibytes),
    ))?;

    let client = ksim_runtime::client::in_process(&server);
    let listing = list_pods(&client, bench.page).await?;
    if listing.pods != bench.pods || listing.running != bench.pods {
        bail!(
            "the listing saw {} pods, {} Running, of {} created",
            listing.pods,
            listing.running,
            bench.pods
        );
    }
    print_line(format_args!(
        "list: {} pods in {} pages of {} (JSON, {}) in {} (server {}), all Running",
        thousands(listing.pods as f64),
        listing.pages,
        bench.page,
        mebibytes(listing.bytes),
        millis(listing.elapsed),
        millis(listing.server),
    ))
}

/// What a paged listing of every pod saw.
struct Listing {
    pods: usize,
    running: usize,
    pages: usize,
    bytes: u64,
    /// From the first request to the last page decoded.
    elapsed: Duration,
    /// The part spent waiting for the pages' bytes.
    server: Duration,
}

#[derive(Deserialize)]
struct PodPage {
    metadata: PageMetadata,
    items: Vec<PagePod>,
}

#[derive(Deserialize)]
struct PageMetadata {
    #[serde(rename = "continue", default)]
    next: Option<String>,
}

#[derive(Deserialize)]
struct PagePod {
    #[serde(default)]
    status: PagePodStatus,
}

#[derive(Deserialize, Default)]
struct PagePodStatus {
    #[serde(default)]
    phase: Option<String>,
}

/// Lists every pod in pages of `page` through the in-process client.
async fn list_pods(client: &kube::Client, page: usize) -> anyhow::Result<Listing> {
    let mut listing = Listing {
        pods: 0,
        running: 0,
        pages: 0,
        bytes: 0,
        elapsed: Duration::ZERO,
        server: Duration::ZERO,
    };
    let started = Instant::now();
    let mut next: Option<String> = None;
    loop {
        let mut uri = format!("/api/v1/pods?limit={page}");
        if let Some(token) = &next {
            uri.push_str("&continue=");
            // The token is standard base64.
            uri.push_str(
                &token
                    .replace('+', "%2B")
                    .replace('/', "%2F")
                    .replace('=', "%3D"),
            );
        }
        let request = http::Request::builder()
            .uri(uri)
            .header(http::header::ACCEPT, "application/json")
            .body(kube::client::Body::empty())
            .context("cannot build a list request")?;
        let asked = Instant::now();
        let response = client.send(request).await.context("the list failed")?;
        let code = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .context("cannot read a list")?
            .to_bytes();
        listing.server += asked.elapsed();
        if !code.is_success() {
            bail!(
                "the list answered {code}: {}",
                String::from_utf8_lossy(&body)
            );
        }
        listing.bytes += body.len() as u64;
        listing.pages += 1;
        let decoded: PodPage = serde_json::from_slice(&body).context("cannot decode a list")?;
        listing.pods += decoded.items.len();
        listing.running += decoded
            .items
            .iter()
            .filter(|p| p.status.phase.as_deref() == Some("Running"))
            .count();
        match decoded.metadata.next.filter(|t| !t.is_empty()) {
            Some(token) => next = Some(token),
            None => break,
        }
    }
    listing.elapsed = started.elapsed();
    Ok(listing)
}
