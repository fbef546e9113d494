//! Scheduling throughput through the API, as scheduler_perf measures it:
//! an in-process ksim API server, the scheduler running against it with
//! informers and `pods/binding`, pods created through the API while it
//! runs. Prints pods/s for SchedulingBasic, TopologySpreading and
//! PreferredTopologySpreading (5,000 nodes), and the per-pod cost at
//! 5,000 and 50,000 nodes.
//! Run with `cargo bench -p ksim-scheduler --bench api_throughput`;
//! `KSIM_BENCH_SCALE=0.1` shrinks every workload.

use std::collections::HashSet;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use ksim_apiserver::ApiServer;
use ksim_scheduler::scheduler::{SchedulerOptions, run};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::{Value, json};

#[path = "common/workloads.rs"]
mod workloads;
use workloads::{WORKLOADS, process_cpu_seconds};

/// The allocator the `ksim` binary runs with (the system one would spend
/// a large share of the API server's CPU on small JSON allocations).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Concurrent API writers when creating objects.
const WRITERS: usize = 16;

fn node(i: usize) -> (Node, Value) {
    let name = format!("node-{i:06}");
    let node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "topology.kubernetes.io/zone": format!("zone-{}", i % 3)}},
    }))
    .expect("valid node");
    let status = json!({"status": {
        "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
        "capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"}}});
    (node, status)
}

fn pod(name: &str, spread: Option<&str>) -> Pod {
    let mut spec = json!({"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]});
    if let Some(when) = spread {
        spec["topologySpreadConstraints"] = json!([{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {"color": "blue"}}}]);
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"color": "blue"}},
        "spec": spec,
    }))
    .expect("valid pod")
}

async fn create_nodes(client: &kube::Client, count: usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let mut writers = Vec::new();
    for _ in 0..WRITERS {
        let (client, next) = (client.clone(), next.clone());
        writers.push(tokio::spawn(async move {
            let nodes = Api::<Node>::all(client);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return;
                }
                let (node, status) = node(i);
                let name = node.metadata.name.clone().unwrap_or_default();
                nodes
                    .create(&PostParams::default(), &node)
                    .await
                    .expect("create node");
                nodes
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                    .await
                    .expect("node status");
            }
        }));
    }
    for writer in writers {
        writer.await.expect("writer");
    }
}

async fn create_pods(client: &kube::Client, prefix: &str, count: usize, spread: Option<&str>) {
    let next = Arc::new(AtomicUsize::new(0));
    let mut writers = Vec::new();
    for _ in 0..WRITERS {
        let (client, next, prefix) = (client.clone(), next.clone(), prefix.to_string());
        let spread = spread.map(str::to_string);
        writers.push(tokio::spawn(async move {
            let pods = Api::<Pod>::namespaced(client, "default");
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return;
                }
                pods.create(
                    &PostParams::default(),
                    &pod(&format!("{prefix}-{i}"), spread.as_deref()),
                )
                .await
                .expect("create pod");
            }
        }));
    }
    for writer in writers {
        writer.await.expect("writer");
    }
}

/// Counts bound pods whose name starts with `prefix` until `count` are.
fn watch_bound(
    client: &kube::Client,
    prefix: &str,
    count: usize,
) -> tokio::task::JoinHandle<Instant> {
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    let prefix = format!("{prefix}-");
    tokio::spawn(async move {
        let mut bound: HashSet<String> = HashSet::new();
        let mut stream = watcher(pods, watcher::Config::default()).boxed();
        while let Some(event) = stream.next().await {
            let pod = match event {
                Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => pod,
                _ => continue,
            };
            let name = pod.metadata.name.clone().unwrap_or_default();
            if name.starts_with(&prefix)
                && pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_ref())
                    .is_some()
            {
                bound.insert(name);
                if bound.len() >= count {
                    break;
                }
            }
        }
        Instant::now()
    })
}

/// What one workload measured.
struct Measured {
    /// Pods bound per second of wall-clock time.
    rate: f64,
    /// Seconds creating the measured pods alone took.
    created: f64,
    /// CPU (API server, scheduler and benchmark clients together) per pod, in µs.
    cpu_per_pod: Option<f64>,
    /// `Scheduled` events written just after the last pod was bound (the
    /// writer runs behind binding and, as upstream's, drops events past a
    /// queue of 1,000).
    scheduled_events: usize,
}

/// One workload, from the first measured create to the last pod bound.
async fn run_workload(nodes: usize, init: usize, pods: usize, spread: Option<&str>) -> Measured {
    let server = ApiServer::new();
    let client = ksim_runtime::client::in_process(&server);
    create_nodes(&client, nodes).await;
    let scheduler = tokio::spawn({
        let client = client.clone();
        async move {
            let _ = run(client, SchedulerOptions::default()).await;
        }
    });
    if init > 0 {
        let done = watch_bound(&client, "init", init);
        create_pods(&client, "init", init, None).await;
        done.await.expect("init pods bound");
    }
    let done = watch_bound(&client, "pod", pods);
    let cpu_start = process_cpu_seconds();
    let start = Instant::now();
    create_pods(&client, "pod", pods, spread).await;
    let created = start.elapsed().as_secs_f64();
    let end = done.await.expect("pods bound");
    let cpu = process_cpu_seconds()
        .zip(cpu_start)
        .map(|(end, start)| (end - start) * 1e6 / pods as f64);
    let scheduled_events =
        Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), "default")
            .list(&Default::default())
            .await
            .map(|list| {
                list.items
                    .iter()
                    .filter(|e| e.reason.as_deref() == Some("Scheduled"))
                    .filter(|e| {
                        e.regarding
                            .as_ref()
                            .and_then(|r| r.name.as_deref())
                            .is_some_and(|n| n.starts_with("pod-"))
                    })
                    .count()
            })
            .unwrap_or(0);
    scheduler.abort();
    let seconds = end.duration_since(start).as_secs_f64().max(f64::EPSILON);
    Measured {
        rate: pods as f64 / seconds,
        created,
        cpu_per_pod: cpu,
        scheduled_events,
    }
}

fn cpu_note(cpu_per_pod: Option<f64>) -> String {
    cpu_per_pod
        .map(|us| format!("; {us:.0} µs CPU/pod for the whole process"))
        .unwrap_or_default()
}

fn main() {
    let scale: f64 = std::env::var("KSIM_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let only = std::env::var("KSIM_BENCH_ONLY").ok();
    let n = |count: usize| ((count as f64 * scale) as usize).max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut out = std::io::stdout().lock();
    for w in WORKLOADS {
        if only.as_deref().is_some_and(|o| !w.name.contains(o)) {
            continue;
        }
        let m = runtime.block_on(run_workload(n(w.nodes), n(w.init), n(w.pods), w.spread));
        let _ = writeln!(
            out,
            "{}: {:.0} pods/s through the API ({} nodes, {} pods; creating them alone took {:.2}s{}; {} Scheduled events written by then; upstream threshold {}, target {})",
            w.name,
            m.rate,
            n(w.nodes),
            n(w.pods),
            m.created,
            cpu_note(m.cpu_per_pod),
            m.scheduled_events,
            w.threshold,
            w.threshold * 10.0
        );
    }
    if only.as_deref().is_none_or(|o| o.contains("cycle")) {
        for nodes in [5_000, 50_000] {
            let m = runtime.block_on(run_workload(n(nodes), 0, n(1_000), None));
            let _ = writeln!(
                out,
                "per-pod cost through the API at {} nodes: {:.1} µs/pod ({:.0} pods/s{})",
                n(nodes),
                1e6 / m.rate,
                m.rate,
                cpu_note(m.cpu_per_pod)
            );
        }
    }
    runtime.shutdown_timeout(Duration::from_secs(1));
}
