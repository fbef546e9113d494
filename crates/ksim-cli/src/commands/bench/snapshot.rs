//! `ksim bench snapshot`: snapshots and recordings at scale. A source API
//! server in process holds N nodes (`ksim scale node`'s shape, initialized
//! by the kubelet simulator as in a running cluster: Ready, with their
//! Leases; `--bare-nodes` leaves them as created) and P pods Running on
//! them, owned by ReplicaSets; then:
//!
//! - save: every object read through the in-process client and written as
//!   YAML, as `ksim snapshot save` does (ksim's snapshot path; time, file
//!   size), then through paged lists for comparison (`--save-only` stops
//!   there);
//! - restore: what `create cluster --snapshot` does (cluster assembly):
//!   the file parsed, its objects loaded through the API server's own bulk
//!   creation before the components start, then the components `ksim
//!   serve` starts (kubelet simulator, controllers, DPDB controller,
//!   scheduler), until a listing sees every pod Running on its original
//!   node, and the CPU of the 10 s after it (when the components' start
//!   work ends); then the same load through ksim's bulk path over HTTP (the
//!   in-process transport, objects JSON-encoded) for comparison;
//! - export over HTTP: the file restored over HTTP into a `ksim serve`
//!   child, then exported from it through HTTP at the default rate limit;
//! - replay: a recording of R changes (pods added, bound, Running, deleted)
//!   replayed as fast as possible into a fresh API server.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use ksim_snapshot::Target;
use ksim_snapshot::record::{Change, Speed};
use ksim_snapshot::restore::RestoreOptions;
use ksim_snapshot::save::SaveOptions;
use serde_json::{Value, json};

use super::cluster::run_on_runtime;
use super::measure::{cpu_time, mebibytes, millis, per_second, thousands};
use super::server::ServeChild;
use crate::commands::print_line;
use crate::commands::scale;

/// Sizes of `ksim bench snapshot`.
#[derive(Debug, Clone, clap::Args)]
pub struct SnapshotBench {
    /// Nodes in the saved cluster.
    #[arg(long, default_value_t = 10_000)]
    pub nodes: usize,
    /// Running pods in the saved cluster.
    #[arg(long, default_value_t = 100_000)]
    pub pods: usize,
    /// Pods per owning ReplicaSet.
    #[arg(long, default_value_t = 1_000)]
    pub pods_per_replica_set: usize,
    /// Changes in the replayed recording.
    #[arg(long, default_value_t = 100_000)]
    pub changes: usize,
    /// Skip the export over HTTP (it starts a `ksim serve` child).
    #[arg(long)]
    pub skip_export: bool,
    /// Stop after the saves (no restore, export or replay).
    #[arg(long)]
    pub save_only: bool,
    /// Save nodes as they are created (no status, no Lease): the restored
    /// cluster's kubelet simulator then initializes all of them, as for a
    /// snapshot of nodes no kubelet ever ran. By default the source's
    /// kubelet simulator first initializes them (Ready, with Leases), as in
    /// any running cluster that is saved.
    #[arg(long)]
    pub bare_nodes: bool,
    /// Components not to start after the restore (as `ksim serve
    /// --disable`), to see what each one's start costs.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub disable: Vec<crate::commands::Component>,
}

const CONCURRENCY: usize = 64;

/// Runs the snapshot benchmark and prints its figures.
pub fn bench_snapshot(bench: &SnapshotBench) -> anyhow::Result<()> {
    if bench.nodes == 0 || bench.nodes > scale::MAX_REPLICAS {
        bail!("--nodes must be between 1 and {}", scale::MAX_REPLICAS);
    }
    run_on_runtime(run(bench.clone()))
}

fn pod(index: usize, nodes: usize, owner: &(String, String)) -> Value {
    let node = index % nodes;
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("app-{:03}-{index:06}", index / 1000), "namespace": "default",
            "labels": {"app": owner.0},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner.0,
                "uid": owner.1, "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"nodeName": scale::node_name(node),
            "containers": [{"name": "app", "image": "busybox",
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]},
    })
}

fn running_status(index: usize, nodes: usize) -> Value {
    let node = index % nodes;
    let ip = format!(
        "10.{}.{}.{}",
        64 + index / 65_536,
        (index / 256) % 256,
        index % 256
    );
    json!({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
        "hostIP": scale::internal_ip(node), "startTime": "2026-01-01T00:00:00Z",
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"},
            {"type": "Initialized", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [{"name": "app", "image": "busybox", "imageID": "", "ready": true,
            "restartCount": 0, "started": true, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}})
}

/// Runs the kubelet simulator over the source until every node is Ready
/// and holds its Lease, as in a running cluster, then stops it.
async fn initialize_nodes(client: &kube::Client, nodes: usize) -> anyhow::Result<()> {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Api, ListParams};

    let kubelet = ksim_kubelet::KubeletSimulator::new(
        client.clone(),
        ksim_kubelet::KubeletOptions::default(),
    );
    let task = tokio::spawn(async move { kubelet.run().await });
    let ready = |node: &Node| {
        node.status
            .as_ref()
            .and_then(|status| status.conditions.as_ref())
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
    };
    let deadline = Instant::now() + Duration::from_secs(300); // wall-clock: the bench's give-up time
    loop {
        let listed = Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await?;
        let leases = Api::<Lease>::namespaced(client.clone(), "kube-node-lease")
            .list_metadata(&ListParams::default())
            .await?;
        let initialized = listed.items.iter().filter(|node| ready(node)).count();
        if initialized == nodes && leases.items.len() == nodes {
            break;
        }
        let expired = Instant::now() > deadline; // wall-clock: the bench's give-up time
        if expired {
            task.abort();
            bail!(
                "the kubelet simulator initialized {initialized} of {nodes} nodes ({} Leases) in 300 s",
                leases.items.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    task.abort();
    Ok(())
}

async fn fill_source(client: &kube::Client, bench: &SnapshotBench) -> anyhow::Result<()> {
    let target = Target::new(client.clone());
    let resources = target.resources().await?;
    let find = |v: &str, k: &str| {
        resources
            .find(v, k)
            .cloned()
            .with_context(|| format!("{k} not served"))
    };
    let (nodes, pods, sets) = (
        find("v1", "Node")?,
        find("v1", "Pod")?,
        find("apps/v1", "ReplicaSet")?,
    );
    let values = scale::default_values();
    let results: Vec<Result<Value, kube::Error>> = futures::stream::iter(0..bench.nodes)
        .map(|i| {
            let (target, nodes, node) = (&target, &nodes, scale::node(i, &values));
            async move { target.create(nodes, &node).await }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect::<Result<Vec<_>, _>>()?;
    let per_set = bench.pods_per_replica_set.max(1);
    let mut owners = Vec::new();
    for set in 0..bench.pods.div_ceil(per_set) {
        let name = format!("app-{set:03}");
        let created = target
            .create(
                &sets,
                &json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"replicas": per_set, "selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": {"app": name}},
                            "spec": {"containers": [{"name": "app", "image": "busybox"}]}}}}),
            )
            .await?;
        let uid = created["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        // Settled, as the ReplicaSet controller of a running cluster leaves
        // it: its status counts its Running, Ready pods (a restored set
        // whose status is right is not written again).
        let count = per_set.min(bench.pods - set * per_set);
        target
            .merge_patch(
                &sets,
                Some("default"),
                &name,
                Some("status"),
                &json!({"status": {"replicas": count, "fullyLabeledReplicas": count,
                    "readyReplicas": count, "availableReplicas": count, "observedGeneration": 1}}),
            )
            .await?;
        owners.push((name, uid));
    }
    let node_count = bench.nodes;
    let results: Vec<Result<(), kube::Error>> = futures::stream::iter(0..bench.pods)
        .map(|i| {
            let (target, pods) = (&target, &pods);
            let owner = &owners[i / per_set];
            async move {
                let body = pod(i, node_count, owner);
                let name = body["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                target.create(pods, &body).await?;
                target
                    .merge_patch(
                        pods,
                        Some("default"),
                        &name,
                        Some("status"),
                        &running_status(i, node_count),
                    )
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(())
}

/// The process's CPU after a restore's listing, sampled for 10 s.
struct Quiet {
    /// CPU seconds in each second.
    per_second: Vec<String>,
    /// When the components' start work ended: the start of the first
    /// second whose four quarters each used under half a core.
    start_work: Option<Duration>,
}

/// Samples `cpu` every quarter second for 10 s (see [`Quiet`]).
async fn quiet_after(cpu: impl Fn() -> Duration) -> Quiet {
    const QUARTER: Duration = Duration::from_millis(250);
    let mut quarters = Vec::with_capacity(40);
    let mut last = cpu();
    for _ in 0..40 {
        tokio::time::sleep(QUARTER).await;
        let now = cpu();
        quarters.push(now.saturating_sub(last).as_secs_f64() / QUARTER.as_secs_f64());
        last = now;
    }
    let per_second = quarters
        .chunks(4)
        .map(|second| format!("{:.2}", second.iter().sum::<f64>() / 4.0))
        .collect();
    let start_work = quarters
        .windows(4)
        .position(|second| second.iter().all(|cores| *cores < 0.5))
        .map(|first| QUARTER * first as u32);
    Quiet {
        per_second,
        start_work,
    }
}

/// Saves the cluster behind `client` to `path` as `ksim snapshot save` does.
async fn save_to(
    client: &kube::Client,
    path: &std::path::Path,
    options: &SaveOptions,
) -> anyhow::Result<ksim_snapshot::save::Written> {
    let file = std::fs::File::create(path)?;
    let writer = std::io::BufWriter::with_capacity(1 << 20, file);
    let (written, writer) = ksim_snapshot::save::write(
        &Target::new(client.clone()),
        options,
        ksim_snapshot::Style::Flow,
        writer,
    )
    .await?;
    writer.into_inner().map_err(|e| e.into_error())?;
    Ok(written)
}

/// pod name → node name of every Running pod.
async fn running_pods(target: &Target) -> anyhow::Result<HashMap<String, String>> {
    Ok(running_pods_written_after(target, u64::MAX).await?.0)
}

/// What the bench reads of a listed pod (the rest of each item is skipped
/// while parsing, not built into a tree: the check should cost the cluster's
/// time, not the bench's).
#[derive(serde::Deserialize)]
struct ListedPods {
    #[serde(default)]
    items: Vec<ListedPod>,
    #[serde(default)]
    metadata: ListedMeta,
}

#[derive(serde::Deserialize, Default)]
struct ListedMeta {
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
}

#[derive(serde::Deserialize)]
struct ListedPod {
    metadata: ListedPodMeta,
    #[serde(default)]
    spec: ListedPodSpec,
    #[serde(default)]
    status: ListedPodStatus,
}

#[derive(serde::Deserialize)]
struct ListedPodMeta {
    name: String,
    #[serde(default, rename = "resourceVersion")]
    resource_version: String,
}

#[derive(serde::Deserialize, Default)]
struct ListedPodSpec {
    #[serde(default, rename = "nodeName")]
    node_name: Option<String>,
}

#[derive(serde::Deserialize, Default)]
struct ListedPodStatus {
    #[serde(default)]
    phase: Option<String>,
}

/// pod name → node name of every Running pod, and how many pods were
/// written after resourceVersion `revision`.
async fn running_pods_written_after(
    target: &Target,
    revision: u64,
) -> anyhow::Result<(HashMap<String, String>, usize)> {
    let mut placed = HashMap::new();
    let mut written = 0;
    let mut token: Option<String> = None;
    loop {
        let mut params = kube::api::ListParams::default().limit(5_000);
        if let Some(token) = &token {
            params = params.continue_token(token);
        }
        let request = kube::core::Request::new("/api/v1/pods")
            .list(&params)
            .context("a list request")?;
        let page: ListedPods = target.client().request(request).await?;
        for pod in page.items {
            if pod
                .metadata
                .resource_version
                .parse::<u64>()
                .is_ok_and(|v| v > revision)
            {
                written += 1;
            }
            if pod.status.phase.as_deref() == Some("Running")
                && let Some(node) = pod.spec.node_name
            {
                placed.insert(pod.metadata.name, node);
            }
        }
        token = page.metadata.continue_token.filter(|t| !t.is_empty());
        if token.is_none() {
            return Ok((placed, written));
        }
    }
}

/// The cluster's current resourceVersion.
async fn revision(target: &Target) -> anyhow::Result<u64> {
    let list = target
        .send(
            http::Request::get("/api/v1/namespaces?limit=1")
                .body(Vec::new())
                .context("a list request")?,
        )
        .await?;
    list["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .context("a list without a resourceVersion")
}

async fn run(bench: SnapshotBench) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("ksim-bench-snapshot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let result = run_in(&bench, &dir).await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn run_in(bench: &SnapshotBench, dir: &std::path::Path) -> anyhow::Result<()> {
    print_line(format_args!(
        "snapshot: {} nodes, {} pods Running in ReplicaSets of {}",
        bench.nodes, bench.pods, bench.pods_per_replica_set
    ))?;
    let source = ksim_apiserver::ApiServer::new();
    let source_client = ksim_runtime::client::in_process(&source);
    let started = Instant::now();
    fill_source(&source_client, bench).await?;
    if !bench.bare_nodes {
        initialize_nodes(&source_client, bench.nodes).await?;
    }
    print_line(format_args!(
        "setup: source filled in {} ({})",
        millis(started.elapsed()),
        if bench.bare_nodes {
            "bare nodes: no status, no Lease"
        } else {
            "nodes initialized by the kubelet simulator: Ready, with their Leases"
        }
    ))?;
    let expected = running_pods(&Target::new(source_client.clone())).await?;

    // Save, as `ksim snapshot save` does: through ksim's snapshot path, the
    // file written while the cluster is read.
    let path = dir.join("snapshot.yaml");
    let started = Instant::now();
    let written = save_to(&source_client, &path, &SaveOptions::all()).await?;
    let save = started.elapsed();
    let size = std::fs::metadata(&path)?.len();
    print_line(format_args!(
        "save: {} objects in {} (target < 3 s; ksim's snapshot path: {}), file {}",
        written.objects,
        millis(save),
        written.server_side,
        mebibytes(size)
    ))?;
    // And through paged lists, as from a cluster without that path.
    let listed_path = dir.join("listed.yaml");
    let started = Instant::now();
    let options = SaveOptions {
        server_side: false,
        ..SaveOptions::all()
    };
    let listed = save_to(&source_client, &listed_path, &options).await?;
    let elapsed = started.elapsed();
    let same = std::fs::read(&path)? == std::fs::read(&listed_path)?;
    std::fs::remove_file(&listed_path)?;
    print_line(format_args!(
        "save through paged lists (a cluster without the snapshot path): {} objects in {}, the same file: {}",
        listed.objects,
        millis(elapsed),
        if same { "yes" } else { "NO" }
    ))?;
    if bench.save_only {
        return Ok(());
    }
    // The source's objects are freed here, before the restore is timed:
    // the client's connection tasks hold the server until they end, and the
    // last of them to go would free its 110,000 objects on a runtime thread
    // while the restore below runs (over a second of CPU counted as the
    // load's, more or less of it by chance).
    drop(source_client);
    let waited = Instant::now(); // wall-clock: the bench waits for the source to be freed
    while source.handles() > 1 && waited.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(source);

    // Restore as `ksim create cluster --snapshot` does (its `ksim serve`):
    // the file read and checked (each document's head read, the rest only
    // checked), its objects built from the text a chunk at a time while the
    // chunks before them are handed to the API server's own bulk creation
    // (the two overlap: "load" holds the building), before the components
    // start, then the components
    // started as `ksim serve` starts them; until a client's listing sees
    // every pod Running on its original node.
    let cpu = || cpu_time(std::process::id()).unwrap_or_default();
    let (started, cpu_started) = (Instant::now(), cpu());
    let documents = crate::commands::read_snapshot(&path)?;
    let (parsed, cpu_parsed) = (started.elapsed(), cpu());
    let mut cluster = crate::assembly::Cluster::new(ksim_runtime::clock::Clock::real());
    let report = cluster.restore_scanned(documents, &path).await?;
    let (loaded, cpu_loaded) = (started.elapsed(), cpu());
    let target = Target::new(cluster.client());
    let restored_at = revision(&target).await?;
    cluster
        .start(crate::assembly::Components {
            disabled: bench.disable.clone(),
            ..crate::assembly::Components::default()
        })
        .await?;
    let placed = running_pods(&target).await?;
    let (all_running, cpu_all_running) = (started.elapsed(), cpu());
    let misplaced = expected
        .iter()
        .filter(|(name, node)| placed.get(*name) != Some(node))
        .count();
    print_line(format_args!(
        "restore (as create cluster --snapshot: the API server's bulk creation in process): {} objects to {} pods Running, {misplaced} not on their original node, in {} (target < 5 s; read and check {}, load with the objects built as they are created {}, then until a listing sees all Running with the components started {})",
        report.created_total() + report.existing,
        placed.len(),
        millis(all_running),
        millis(parsed),
        millis(loaded.saturating_sub(parsed)),
        millis(all_running.saturating_sub(loaded)),
    ))?;
    print_line(format_args!(
        "restore CPU (all threads; holds on a busy machine): {} (read and check {}, load with building {}, until all Running {})",
        millis(cpu_all_running.saturating_sub(cpu_started)),
        millis(cpu_parsed.saturating_sub(cpu_started)),
        millis(cpu_loaded.saturating_sub(cpu_parsed)),
        millis(cpu_all_running.saturating_sub(cpu_loaded)),
    ))?;
    // `start` only spawns the components: their first lists, caches and
    // the kubelet's node initialization go on after the listing above.
    // The process's CPU, a quarter second at a time, shows when that burst
    // ends (the heartbeats of every node go on after it, in short spikes).
    let quiet = quiet_after(cpu).await;
    print_line(format_args!(
        "restore: CPU seconds used in each of the 10 s after that listing (the components' start work, then their steady work): {}",
        quiet.per_second.join(" ")
    ))?;
    match quiet.start_work {
        Some(start_work) => print_line(format_args!(
            "restore to a quiet cluster (the components' start work done: the first second under half a core after it): {} (the start work went on {} after that listing)",
            millis(all_running + start_work),
            millis(start_work),
        ))?,
        None => print_line(format_args!(
            "restore to a quiet cluster: the components were still busy 10 s after that listing"
        ))?,
    }
    // The controllers own what was restored: no pod was added once they ran.
    let (after, written) = running_pods_written_after(&target, restored_at).await?;
    print_line(format_args!(
        "restore: {} pods 10 s after that listing ({} in it), {written} of them written by the components",
        after.len(),
        placed.len()
    ))?;
    drop(target);
    drop(cluster);

    // What the restore above overlaps with the API server's creation, alone:
    // reading and checking the file, then building every object (one
    // thread; a restore builds them a chunk at a time as they are created).
    let (started, cpu_started) = (Instant::now(), cpu());
    let documents = crate::commands::read_snapshot(&path)?;
    let (checked, cpu_checked) = (started.elapsed(), cpu());
    let built = documents
        .into_iter()
        .map(|d| d.body.into_object())
        .collect::<Result<Vec<Value>, String>>()
        .map_err(anyhow::Error::msg)?;
    let (done, cpu_done) = (started.elapsed(), cpu());
    drop(built);
    print_line(format_args!(
        "reading alone (for comparison; overlapped with the load above): read and check {} (CPU {}), then every object built {} (CPU {})",
        millis(checked),
        millis(cpu_checked.saturating_sub(cpu_started)),
        millis(done.saturating_sub(checked)),
        millis(cpu_done.saturating_sub(cpu_checked)),
    ))?;

    // The same load through ksim's bulk path over HTTP (the in-process
    // transport: every object JSON-encoded and decoded, as `ksim snapshot
    // restore` sends them), into an API server alone.
    let (started, cpu_started) = (Instant::now(), cpu());
    let documents = crate::commands::read_snapshot(&path)?;
    let parsed = started.elapsed();
    let server = ksim_apiserver::ApiServer::new();
    let options = RestoreOptions {
        controllers_running: false,
        ..RestoreOptions::default()
    };
    let report = ksim_snapshot::restore::restore_scanned(
        &Target::new(ksim_runtime::client::in_process(&server)),
        documents,
        &options,
    )
    .await?;
    let (loaded, cpu_loaded) = (started.elapsed(), cpu());
    print_line(format_args!(
        "restore through the bulk path over HTTP (in-process transport, API server alone): {} objects in {} (read and check {}, load with building {}; CPU {})",
        report.created_total() + report.existing,
        millis(loaded),
        millis(parsed),
        millis(loaded.saturating_sub(parsed)),
        millis(cpu_loaded.saturating_sub(cpu_started)),
    ))?;
    drop(server);

    if !bench.skip_export {
        export_over_http(&path, bench).await?;
    }
    replay(bench).await
}

async fn export_over_http(path: &std::path::Path, bench: &SnapshotBench) -> anyhow::Result<()> {
    let serve = ServeChild::start()?;
    let config = kube::Config::new(serve.url().parse().context("the server's URL")?);
    let client = ksim_runtime::client::from_config(config)?;
    let started = Instant::now();
    let text = std::fs::read_to_string(path)?;
    let documents =
        ksim_snapshot::parse_documents(&text, ksim_runtime::clock::Clock::real().now())?;
    drop(text);
    let report = ksim_snapshot::restore::restore(
        &Target::new(client.clone()),
        documents,
        &RestoreOptions::default(),
    )
    .await?;
    print_line(format_args!(
        "restore over HTTP (API server alone): {} objects in {}",
        report.created_total() + report.existing,
        millis(started.elapsed())
    ))?;
    let started = Instant::now();
    let target = Target::with_rate_limit(client, ksim_snapshot::RateLimit::new(50.0, 300));
    let exported = ksim_snapshot::save::collect(&target, &SaveOptions::export()).await?;
    let elapsed = started.elapsed();
    let pods = exported
        .objects
        .iter()
        .filter(|o| o["kind"] == "Pod")
        .count();
    print_line(format_args!(
        "export over HTTP: {} objects ({pods} pods, want {}) in {} (target < 10 s; --qps 50 --burst 300, pages of 500)",
        exported.objects.len(),
        bench.pods,
        millis(elapsed)
    ))?;
    Ok(())
}

/// A recording of `changes` changes: pods added, bound, Running and
/// deleted, four changes a pod, on a few nodes added first.
fn recording(changes: usize) -> String {
    let nodes = 100;
    let values = scale::default_values();
    let mut lines = vec![ksim_snapshot::record::header(
        ksim_runtime::clock::Clock::real().now(),
    )];
    let mut t = 0i64;
    let mut push = |kind: &str, object: Value, lines: &mut Vec<String>| {
        t += 10_000;
        lines.push(ksim_snapshot::record::line(&Change {
            t,
            kind: kind.into(),
            object,
        }));
    };
    for i in 0..nodes {
        push("ADDED", scale::node(i, &values), &mut lines);
    }
    let pods = changes.saturating_sub(nodes).div_ceil(4);
    for i in 0..pods {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("replayed-{i:06}"), "namespace": "default", "uid": format!("u-{i}")},
            "spec": {"containers": [{"name": "app", "image": "busybox"}]},
            "status": {"phase": "Pending", "qosClass": "BestEffort"}});
        push("ADDED", pod.clone(), &mut lines);
        pod["spec"]["nodeName"] = json!(scale::node_name(i % nodes));
        push("MODIFIED", pod.clone(), &mut lines);
        pod["status"] = running_status(i, nodes)["status"].clone();
        pod["status"]["qosClass"] = json!("BestEffort");
        push("MODIFIED", pod.clone(), &mut lines);
        push("DELETED", pod, &mut lines);
    }
    lines.truncate(changes + 1);
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

async fn replay(bench: &SnapshotBench) -> anyhow::Result<()> {
    let text = recording(bench.changes);
    let started = Instant::now();
    let changes = ksim_snapshot::record::parse(&text)?;
    let parsed = started.elapsed();
    let count = changes.len();
    let server = ksim_apiserver::ApiServer::new();
    let client = ksim_runtime::client::in_process(&server);
    let report =
        ksim_snapshot::record::replay(&Target::new(client), changes, Speed::Max, 32).await?;
    let elapsed = started.elapsed();
    print_line(format_args!(
        "replay: {} of {count} changes ({} bytes) as fast as possible in {} (target < 10 s; parse {}), {}/s",
        report.applied,
        text.len(),
        millis(elapsed),
        millis(parsed),
        thousands(per_second(report.applied as u64, elapsed))
    ))?;
    Ok(())
}
