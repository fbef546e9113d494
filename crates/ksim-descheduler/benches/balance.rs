//! One descheduling cycle of the four balance plugins (RemoveDuplicates,
//! LowNodeUtilization, HighNodeUtilization,
//! RemovePodsViolatingTopologySpreadConstraint) over 5,000 nodes and 50,000
//! pods, with an evictor that accepts and records every eviction. Prints
//! the compute time of each plugin and of the cycle, and the memory: RSS
//! added by the snapshot and the cycle's peak RSS.
//!
//! `cargo bench -p ksim-descheduler --bench balance [-- NODES PODS]`

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    Container, Node, NodeCondition, NodeSpec, NodeStatus, Pod, PodSpec, PodStatus,
    ResourceRequirements, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use ksim_descheduler::framework::{
    BalancePlugin, ClusterSnapshot, EvictionError, EvictionRequest, PodEvictor,
};
use ksim_descheduler::plugins::{PluginFactory, lookup};
use serde_json::json;

const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
const PODS_PER_DEPLOYMENT: usize = 50;
const NAMESPACES: usize = 20;

/// Accepts every pod and records evictions in order.
#[derive(Default)]
struct RecordingEvictor {
    evicted: Vec<String>,
}

impl PodEvictor for RecordingEvictor {
    fn filter(&self, _pod: &Pod) -> bool {
        true
    }
    fn pre_eviction_filter(&self, _pod: &Pod) -> bool {
        true
    }
    fn evict(&mut self, pod: &Pod, _request: EvictionRequest<'_>) -> Result<(), EvictionError> {
        self.evicted.push(format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default()
        ));
        Ok(())
    }
    fn node_limit_exceeded(&self, _node_name: &str) -> bool {
        false
    }
    fn total_limit_exceeded(&self) -> bool {
        false
    }
}

fn quantity(value: &str) -> Quantity {
    Quantity(value.to_string())
}

fn make_node(index: usize) -> Node {
    let name = format!("node-{index:06}");
    let zone = ZONES[index % ZONES.len()];
    let resources = BTreeMap::from([
        ("cpu".to_string(), quantity("8")),
        ("memory".to_string(), quantity("32Gi")),
        ("pods".to_string(), quantity("110")),
    ]);
    Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(BTreeMap::from([
                ("kubernetes.io/hostname".to_string(), name),
                ("topology.kubernetes.io/zone".to_string(), zone.to_string()),
            ])),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            allocatable: Some(resources.clone()),
            capacity: Some(resources),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

/// Pod `k` of deployment `d`: half the pods land in zone a, 30% in b, 20%
/// in c; within a zone a third of them crowd onto the first tenth of the
/// nodes (skewed utilization and duplicates on a node).
fn make_pod(d: usize, k: usize, nodes: usize) -> Pod {
    let zone = match k % 10 {
        0..=4 => 0,
        5..=7 => 1,
        _ => 2,
    };
    let per_zone = nodes / ZONES.len();
    let slot = if k.is_multiple_of(3) {
        (d * 7 + k) % (per_zone / 10).max(1)
    } else {
        (d * 131 + k * 17) % per_zone
    };
    let node = format!("node-{:06}", slot * ZONES.len() + zone);
    let app = format!("web-{d}");
    let cpu = ["100m", "250m", "500m"][d % 3];
    let memory = ["128Mi", "512Mi", "1Gi"][d % 3];
    let when = if d.is_multiple_of(2) {
        "DoNotSchedule"
    } else {
        "ScheduleAnyway"
    };
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("{app}-{k}")),
            namespace: Some(format!("ns-{}", d % NAMESPACES)),
            uid: Some(format!("uid-{d}-{k}")),
            labels: Some(BTreeMap::from([
                ("app".to_string(), app.clone()),
                ("pod-template-hash".to_string(), format!("h{d}")),
            ])),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: format!("{app}-h{d}"),
                uid: format!("rs-{d}"),
                controller: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node),
            priority: Some((d % 4) as i32 * 100),
            containers: vec![Container {
                name: "app".into(),
                image: Some(format!("registry.example/{app}:1")),
                resources: Some(ResourceRequirements {
                    requests: Some(BTreeMap::from([
                        ("cpu".to_string(), quantity(cpu)),
                        ("memory".to_string(), quantity(memory)),
                    ])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            topology_spread_constraints: Some(vec![TopologySpreadConstraint {
                max_skew: 1,
                topology_key: "topology.kubernetes.io/zone".into(),
                when_unsatisfiable: when.into(),
                label_selector: Some(LabelSelector {
                    match_labels: Some(BTreeMap::from([("app".to_string(), app)])),
                    ..Default::default()
                }),
                match_label_keys: Some(vec!["pod-template-hash".into()]),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        }),
    }
}

/// A field of /proc/self/status in KiB (VmRSS, VmHWM).
fn proc_status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// CPU time (user + system) of this process so far, from /proc/self/stat
/// (clock ticks of 10 ms): on a loaded machine it shows the compute apart
/// from the time spent waiting for a core.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let user: u64 = fields.get(11)?.parse().ok()?;
    let system: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((user + system) * 10))
}

/// Resets VmHWM to the current RSS (Linux: `5` into /proc/self/clear_refs).
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn build_plugin(name: &str, args: serde_json::Value) -> Box<dyn BalancePlugin> {
    match lookup(name) {
        Some(PluginFactory::Balance(factory)) => factory(Some(&args)).expect("valid args"),
        _ => panic!("{name} is not a registered balance plugin"),
    }
}

fn main() {
    let mut numbers = std::env::args()
        .skip(1)
        .filter_map(|arg| arg.parse::<usize>().ok());
    let node_count = numbers.next().unwrap_or(5_000);
    let pod_count = numbers.next().unwrap_or(50_000);
    let deployments = pod_count.div_ceil(PODS_PER_DEPLOYMENT);

    let plugins = [
        build_plugin("RemoveDuplicates", json!({})),
        build_plugin(
            "LowNodeUtilization",
            json!({
                "thresholds": {"cpu": 20, "memory": 20, "pods": 20},
                "targetThresholds": {"cpu": 50, "memory": 50, "pods": 50}
            }),
        ),
        build_plugin(
            "HighNodeUtilization",
            json!({"thresholds": {"cpu": 10, "memory": 10}}),
        ),
        build_plugin(
            "RemovePodsViolatingTopologySpreadConstraint",
            json!({"constraints": ["DoNotSchedule", "ScheduleAnyway"]}),
        ),
    ];

    let rss_before = proc_status_kib("VmRSS").unwrap_or(0);
    let started = Instant::now();
    let nodes: Vec<Node> = (0..node_count).map(make_node).collect();
    let pods: Vec<Pod> = (0..pod_count)
        .map(|i| make_pod(i / PODS_PER_DEPLOYMENT, i % PODS_PER_DEPLOYMENT, node_count))
        .collect();
    let snapshot = ClusterSnapshot::new(nodes, pods, vec![], Timestamp::now());
    let build_time = started.elapsed();
    let rss_snapshot = proc_status_kib("VmRSS").unwrap_or(0);
    let node_refs: Vec<&Node> = snapshot.nodes().iter().collect();

    println!(
        "balance cycle: {node_count} nodes, {pod_count} pods ({deployments} deployments with zone spread, {NAMESPACES} namespaces)"
    );
    println!(
        "snapshot built in {:.0} ms, RSS {:.1} MiB (+{:.1} MiB for the snapshot)",
        build_time.as_secs_f64() * 1e3,
        mib(rss_snapshot),
        mib(rss_snapshot.saturating_sub(rss_before)),
    );

    let peak_reset = reset_peak_rss();
    let cpu_before = cpu_time();
    let mut total = Duration::ZERO;
    let mut evictor = RecordingEvictor::default();
    for plugin in &plugins {
        let before = evictor.evicted.len();
        let started = Instant::now();
        plugin.balance(&snapshot, &node_refs, &mut evictor);
        let elapsed = started.elapsed();
        total += elapsed;
        println!(
            "  {:<45} {:>8.1} ms  {:>6} evictions",
            plugin.name(),
            elapsed.as_secs_f64() * 1e3,
            evictor.evicted.len() - before
        );
    }
    let cpu_used = cpu_time()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before));
    let peak = proc_status_kib("VmHWM").unwrap_or(0);
    println!(
        "cycle compute time: {:.1} ms (target < 1000 ms), {} evictions recorded",
        total.as_secs_f64() * 1e3,
        evictor.evicted.len()
    );
    if let Some(cpu) = cpu_used {
        println!(
            "cycle CPU time: {:.0} ms (user + system; wall time above includes waiting for a core)",
            cpu.as_secs_f64() * 1e3
        );
    }
    println!(
        "cycle peak RSS: {:.1} MiB ({:+.1} MiB over the snapshot){}",
        mib(peak),
        mib(peak) - mib(rss_snapshot),
        if peak_reset {
            ""
        } else {
            " (peak not reset: process lifetime peak)"
        }
    );
}
