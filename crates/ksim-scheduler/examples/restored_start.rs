//! The scheduler's start on a restored cluster: an in-process API server
//! loaded (through its bulk creation, as a snapshot restore is) with N
//! Ready nodes and P pods bound and Running on them (the shape `ksim bench
//! snapshot` restores), then the scheduler started against it; one
//! unbound pod created at once is bound only after the scheduler has
//! listed everything and built its cache. Prints the process CPU and wall
//! time from the scheduler's start to that binding.
//!
//! `cargo run --release -p ksim-scheduler --example restored_start -- [NODES] [PODS]`
//! (default 1,000 nodes and 10 pods per node). Under
//! `valgrind --tool=callgrind` it counts the start's instructions; pass
//! `--load-only` as the third argument to stop before the scheduler (the
//! load's own count, to subtract).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use ksim_apiserver::{ApiServer, BulkItem};
use ksim_scheduler::scheduler::{SchedulerOptions, run};
use kube::api::{Api, PostParams};
use serde_json::json;

/// The allocator the `ksim` binary runs with.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn node(index: usize) -> BulkItem {
    let name = format!("node-{index:06}");
    let resources = json!({"cpu": "32", "memory": "256Gi", "pods": "110"});
    BulkItem {
        object: json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {
                "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                "topology.kubernetes.io/zone": format!("zone-{}", index % 3),
                "type": "kwok"}},
        }),
        status: Some(json!({
            "allocatable": resources, "capacity": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "addresses": [{"type": "InternalIP", "address": format!("10.128.{}.{}", index / 256, index % 256)}],
            "phase": "Running",
        })),
    }
}

fn pod(index: usize, nodes: usize) -> BulkItem {
    let owner = format!("app-{:03}", index / 1000);
    let ip = format!(
        "10.{}.{}.{}",
        64 + index / 65_536,
        (index / 256) % 256,
        index % 256
    );
    BulkItem {
        object: json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{owner}-{index:06}"), "namespace": "default",
                "labels": {"app": owner},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner,
                    "uid": format!("00000000-0000-0000-0000-{:012}", index / 1000),
                    "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"nodeName": format!("node-{:06}", index % nodes),
                "containers": [{"name": "app", "image": "busybox",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]},
        }),
        status: Some(json!({
            "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
            "hostIP": "10.128.0.1", "startTime": "2026-01-01T00:00:00Z",
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"},
                {"type": "Initialized", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "app", "image": "busybox", "imageID": "", "ready": true,
                "restartCount": 0, "started": true,
                "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}],
        })),
    }
}

/// User plus system CPU of this process.
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    let total = ticks(11).unwrap_or(0) + ticks(12).unwrap_or(0);
    Duration::from_millis(total * 10)
}

async fn start(nodes: usize, pods: usize, load_only: bool) {
    let server = ApiServer::new();
    let loaded = {
        let server = server.clone();
        tokio::task::spawn_blocking(move || {
            let items = (0..nodes)
                .map(node)
                .chain((0..pods).map(|i| pod(i, nodes)))
                .collect();
            server.create_objects(items, "restore")
        })
        .await
        .expect("the load finishes")
    };
    let failed = loaded.iter().filter(|r| r.is_err()).count();
    assert_eq!(failed, 0, "every object loads");
    println!("loaded {nodes} nodes and {pods} pods");
    if load_only {
        return;
    }

    let client = ksim_runtime::client::in_process(&server);
    let (cpu, wall) = (process_cpu(), Instant::now()); // wall-clock: the example times the start
    let scheduler = tokio::spawn(run(client.clone(), SchedulerOptions::default()));
    let api: Api<Pod> = Api::namespaced(client, "default");
    let probe: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "probe"},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    }))
    .expect("a valid pod");
    api.create(&PostParams::default(), &probe)
        .await
        .expect("the probe is created");
    loop {
        let bound = api
            .get("probe")
            .await
            .expect("the probe exists")
            .spec
            .and_then(|s| s.node_name)
            .is_some();
        if bound {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    println!(
        "scheduler start: {} ms CPU, {} ms wall, until a new pod is bound",
        (process_cpu() - cpu).as_millis(),
        wall.elapsed().as_millis()
    );
    scheduler.abort();
}

fn main() {
    let mut args = std::env::args().skip(1);
    let nodes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1_000);
    let pods: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(nodes * 10);
    let load_only = args.next().as_deref() == Some("--load-only");
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(start(nodes, pods, load_only));
}
