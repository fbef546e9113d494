//! Scheduling-cycle throughput on scheduler_perf-like workloads, without
//! the API: SchedulingBasic, TopologySpreading and PreferredTopologySpreading
//! on 5,000 nodes, and the per-pod cycle cost at 5,000 and 50,000 nodes.
//! Run with `cargo bench -p ksim-scheduler --bench schedule_one` (release);
//! `KSIM_BENCH_SCALE=0.1` shrinks every workload; `KSIM_BENCH_ONLY=Name`
//! runs the workloads whose name contains `Name` (`cycle` the cycle costs).
//! `DefaultSpreading` is `ksim bench workloads`' rollout: a ReplicaSet's
//! 5,000 pods on 500 nodes without zone labels, under the system default
//! spread constraints.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Instant;

use k8s_openapi::api::core::v1::{
    Container, Node, NodeSpec, NodeStatus, Pod, PodSpec, ResourceRequirements,
    TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use ksim_core::selector::LabelSelectorRequirements;
use ksim_scheduler::framework::{
    Profile, ScheduleState, Snapshot, WorkloadKind, WorkloadSelector, schedule_one,
};

#[path = "common/workloads.rs"]
mod workloads;
use workloads::{WORKLOADS, Workload, process_cpu_seconds};

/// The allocator the `ksim` binary runs with (the system one would spend
/// a large share of the API server's CPU on small JSON allocations).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

/// scheduler_perf's node template: 4 cpu, 32Gi, 110 pods, in one of 3 zones.
fn node(i: usize) -> Node {
    let name = format!("node-{i:06}");
    Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(BTreeMap::from([
                ("kubernetes.io/hostname".to_string(), name),
                (
                    "topology.kubernetes.io/zone".to_string(),
                    format!("zone-{}", i % 3),
                ),
            ])),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            allocatable: Some(quantities(&[
                ("cpu", "4"),
                ("memory", "32Gi"),
                ("pods", "110"),
            ])),
            ..Default::default()
        }),
    }
}

/// scheduler_perf's pod template: 100m cpu, 500Mi memory.
fn pod(name: &str, spread: Option<&str>) -> Pod {
    let constraints = spread.map(|when| {
        vec![TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "topology.kubernetes.io/zone".to_string(),
            when_unsatisfiable: when.to_string(),
            label_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([("color".to_string(), "blue".to_string())])),
                match_expressions: None,
            }),
            ..Default::default()
        }]
    });
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            labels: Some(BTreeMap::from([("color".to_string(), "blue".to_string())])),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "pause".to_string(),
                image: Some("registry.k8s.io/pause:3.10".to_string()),
                resources: Some(ResourceRequirements {
                    requests: Some(quantities(&[("cpu", "100m"), ("memory", "500Mi")])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            topology_spread_constraints: constraints,
            ..Default::default()
        }),
        status: None,
    }
}

/// Schedules `pods` pods one by one (binding each into the snapshot);
/// returns pods per second of wall-clock time and CPU µs per pod (the
/// figure that holds on a loaded machine).
fn run(nodes: usize, init_pods: usize, pods: usize, spread: Option<&str>) -> (f64, Option<f64>) {
    let mut snapshot = Snapshot::new((0..nodes).map(node), []);
    let profile = Profile::default_profile();
    let mut state = ScheduleState::seeded(1);
    for i in 0..init_pods {
        let p = pod(&format!("init-{i}"), None);
        if let Ok(result) = schedule_one(&profile, &snapshot, &p, &mut state) {
            snapshot.bind_pod(p, &result.suggested_host);
        }
    }
    let cpu_start = process_cpu_seconds();
    let start = Instant::now();
    let mut scheduled = 0usize;
    for i in 0..pods {
        let p = pod(&format!("pod-{i}"), spread);
        if let Ok(result) = schedule_one(&profile, &snapshot, &p, &mut state) {
            snapshot.bind_pod(p, &result.suggested_host);
            scheduled += 1;
        }
    }
    let rate = scheduled as f64 / start.elapsed().as_secs_f64().max(f64::EPSILON);
    let cpu = process_cpu_seconds()
        .zip(cpu_start)
        .map(|(end, start)| (end - start) * 1e6 / scheduled.max(1) as f64);
    (rate, cpu)
}

/// A ReplicaSet's `pods` pods on `nodes` nodes labelled with their hostname
/// only (as kwok nodes): no constraints of their own, so PodTopologySpread
/// scores the system defaults (hostname and zone, ScheduleAnyway).
fn run_default_spreading(nodes: usize, pods: usize) -> (f64, Option<f64>) {
    let mut snapshot = Snapshot::new(
        (0..nodes).map(|i| {
            let mut n = node(i);
            if let Some(labels) = n.metadata.labels.as_mut() {
                labels.remove("topology.kubernetes.io/zone");
            }
            n
        }),
        [],
    );
    snapshot.upsert_workload_selector(WorkloadSelector {
        kind: WorkloadKind::ReplicaSet,
        namespace: "default".to_string(),
        name: "web".to_string(),
        selector: LabelSelectorRequirements::parse("color=blue").expect("a valid selector"),
    });
    let profile = Profile::default_profile();
    let mut state = ScheduleState::seeded(1);
    let cpu_start = process_cpu_seconds();
    let start = Instant::now();
    let mut scheduled = 0usize;
    for i in 0..pods {
        let mut p = pod(&format!("web-{i}"), None);
        p.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".to_string(),
            kind: "ReplicaSet".to_string(),
            name: "web".to_string(),
            uid: "web-uid".to_string(),
            controller: Some(true),
            ..Default::default()
        }]);
        if let Ok(result) = schedule_one(&profile, &snapshot, &p, &mut state) {
            snapshot.bind_pod(p, &result.suggested_host);
            scheduled += 1;
        }
    }
    let rate = scheduled as f64 / start.elapsed().as_secs_f64().max(f64::EPSILON);
    let cpu = process_cpu_seconds()
        .zip(cpu_start)
        .map(|(end, start)| (end - start) * 1e6 / scheduled.max(1) as f64);
    (rate, cpu)
}

fn cpu_note(cpu_per_pod: Option<f64>) -> String {
    cpu_per_pod
        .map(|us| format!(", {us:.0} µs CPU/pod"))
        .unwrap_or_default()
}

fn main() {
    let scale: f64 = std::env::var("KSIM_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let only = std::env::var("KSIM_BENCH_ONLY").ok();
    let n = |count: usize| ((count as f64 * scale) as usize).max(1);
    let mut out = std::io::stdout().lock();
    for Workload {
        name,
        nodes,
        init,
        pods,
        spread,
        threshold,
    } in WORKLOADS
    {
        if only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let (rate, cpu) = run(n(nodes), n(init), n(pods), spread);
        let _ = writeln!(
            out,
            "{name}: {rate:.0} pods/s ({} nodes, {} pods{}; upstream threshold {threshold}, target {})",
            n(nodes),
            n(pods),
            cpu_note(cpu),
            threshold * 10.0
        );
    }
    if only
        .as_deref()
        .is_none_or(|o| "DefaultSpreading".contains(o))
    {
        let (rate, cpu) = run_default_spreading(n(500), n(5_000));
        let _ = writeln!(
            out,
            "DefaultSpreading: {rate:.0} pods/s ({} nodes without zones, {} pods of a ReplicaSet{})",
            n(500),
            n(5_000),
            cpu_note(cpu)
        );
    }
    if only.as_deref().is_some_and(|o| !o.contains("cycle")) {
        return;
    }
    for nodes in [5_000, 50_000] {
        let (rate, cpu) = run(n(nodes), 0, n(1_000), None);
        let _ = writeln!(
            out,
            "cycle cost at {} nodes: {:.1} µs/pod{}",
            n(nodes),
            1e6 / rate,
            cpu_note(cpu)
        );
    }
}
