//! One descheduling cycle over a generated cluster (default 5,000 nodes and
//! 50,000 pods), through the same pipeline `ksim deschedule --dry-run`
//! runs (policy, DefaultEvictor, limits, dry-run evictor; no API):
//!
//! - the cycle with every balance plugin in one profile (the issue's
//!   figure: target < 1 s of compute), then each balance plugin alone;
//! - the cycle with every deschedule plugin in one profile, then each alone;
//! - the cycle with all of them.
//!
//! Each line gives wall time and CPU time (the thread's own,
//! `CLOCK_THREAD_CPUTIME_ID`: on a loaded machine wall time includes
//! waiting for a core), the pods evicted, and the cycle's peak RSS over the
//! snapshot. Prints figures; asserts nothing about time.
//!
//! `cargo bench -p ksim-descheduler --bench cycle [-- NODES PODS]`

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerStatus, Node, NodeAffinity, NodeCondition, NodeSelector,
    NodeSelectorRequirement, NodeSelectorTerm, NodeSpec, NodeStatus, Pod, PodAffinityTerm,
    PodAntiAffinity, PodSpec, PodStatus, ResourceRequirements, Taint, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::jiff::Timestamp;
use ksim_descheduler::framework::ClusterSnapshot;
use ksim_descheduler::{DeschedulerPolicy, simulate};
use serde_json::json;

const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
const PODS_PER_DEPLOYMENT: usize = 50;
const NAMESPACES: usize = 20;

/// The deschedule plugins and the args they run with.
const DESCHEDULE: [(&str, &str); 6] = [
    (
        "RemovePodsViolatingNodeAffinity",
        r#"{"nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]}"#,
    ),
    ("RemovePodsViolatingNodeTaints", "{}"),
    ("RemovePodsViolatingInterPodAntiAffinity", "{}"),
    (
        "RemovePodsHavingTooManyRestarts",
        r#"{"podRestartThreshold": 12}"#,
    ),
    ("PodLifeTime", r#"{"maxPodLifeTimeSeconds": 86400}"#),
    ("RemoveFailedPods", "{}"),
];

/// The balance plugins and the args they run with.
const BALANCE: [(&str, &str); 4] = [
    ("RemoveDuplicates", "{}"),
    (
        "LowNodeUtilization",
        r#"{"thresholds": {"cpu": 20, "memory": 20, "pods": 20}, "targetThresholds": {"cpu": 50, "memory": 50, "pods": 50}}"#,
    ),
    (
        "HighNodeUtilization",
        r#"{"thresholds": {"cpu": 10, "memory": 10}}"#,
    ),
    (
        "RemovePodsViolatingTopologySpreadConstraint",
        r#"{"constraints": ["DoNotSchedule", "ScheduleAnyway"]}"#,
    ),
];

fn quantity(value: &str) -> Quantity {
    Quantity(value.to_string())
}

/// Node `index`: three zones round robin; one node in 50 tainted
/// NoSchedule after its pods started.
fn make_node(index: usize) -> Node {
    let name = format!("node-{index:06}");
    let zone = ZONES[index % ZONES.len()];
    let resources = BTreeMap::from([
        ("cpu".to_string(), quantity("8")),
        ("memory".to_string(), quantity("32Gi")),
        ("pods".to_string(), quantity("110")),
    ]);
    let taints = index.is_multiple_of(50).then(|| {
        vec![Taint {
            key: "maintenance".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]
    });
    Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(BTreeMap::from([
                ("kubernetes.io/hostname".to_string(), name),
                ("topology.kubernetes.io/zone".to_string(), zone.to_string()),
            ])),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints,
            ..Default::default()
        }),
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

/// Pod `k` of deployment `d`. Placement: half the pods in zone a, 30% in
/// b, 20% in c (skewed spread); within a zone a third crowd onto the first
/// tenth of the nodes (skewed utilization, duplicates on a node). Every
/// deployment has a zone spread constraint (DoNotSchedule or
/// ScheduleAnyway); one in 40 requires zone a (violated outside it); one
/// pod in 50 has required anti-affinity to its own app per node; one in 97
/// has failed; restarts go up to 12; ages are spread so that about one
/// pod in seven is past PodLifeTime's day.
fn make_pod(d: usize, k: usize, nodes: usize) -> Pod {
    let zone = match k % 10 {
        0..=4 => 0,
        5..=7 => 1,
        _ => 2,
    };
    let per_zone = (nodes / ZONES.len()).max(1);
    let slot = if k.is_multiple_of(3) {
        (d * 7 + k) % (per_zone / 10).max(1)
    } else {
        (d * 131 + k * 17) % per_zone
    };
    let node = format!("node-{:06}", (slot * ZONES.len() + zone) % nodes.max(1));
    let app = format!("web-{d}");
    let index = d * PODS_PER_DEPLOYMENT + k;
    let cpu = ["100m", "250m", "500m"][d % 3];
    let memory = ["128Mi", "512Mi", "1Gi"][d % 3];
    let when = if d.is_multiple_of(2) {
        "DoNotSchedule"
    } else {
        "ScheduleAnyway"
    };
    let app_selector = || LabelSelector {
        match_labels: Some(BTreeMap::from([("app".to_string(), app.clone())])),
        ..Default::default()
    };
    let node_affinity = d.is_multiple_of(40).then(|| NodeAffinity {
        required_during_scheduling_ignored_during_execution: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: "topology.kubernetes.io/zone".into(),
                    operator: "In".into(),
                    values: Some(vec![ZONES[0].into()]),
                }]),
                ..Default::default()
            }],
        }),
        ..Default::default()
    });
    let pod_anti_affinity = index.is_multiple_of(50).then(|| PodAntiAffinity {
        required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
            label_selector: Some(app_selector()),
            topology_key: "kubernetes.io/hostname".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let affinity = (node_affinity.is_some() || pod_anti_affinity.is_some()).then(|| Affinity {
        node_affinity,
        pod_anti_affinity,
        ..Default::default()
    });
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("{app}-{k}")),
            namespace: Some(format!("ns-{}", d % NAMESPACES)),
            uid: Some(format!("uid-{d}-{k}")),
            creation_timestamp: Some(Time(
                Timestamp::from_second(((index * 7_919) % 100_000) as i64).expect("valid"),
            )),
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
            affinity,
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
                label_selector: Some(app_selector()),
                match_label_keys: Some(vec!["pod-template-hash".into()]),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some(
                if index.is_multiple_of(97) {
                    "Failed"
                } else {
                    "Running"
                }
                .into(),
            ),
            container_statuses: Some(vec![ContainerStatus {
                name: "app".into(),
                restart_count: i32::try_from(index % 13).unwrap_or_default(),
                ..Default::default()
            }]),
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

/// CPU time of the calling thread (the cycle runs on it):
/// `CLOCK_THREAD_CPUTIME_ID`.
fn thread_cpu_time() -> Option<Duration> {
    let time = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Some(Duration::new(
        u64::try_from(time.tv_sec).ok()?,
        u32::try_from(time.tv_nsec).ok()?,
    ))
}

/// Resets VmHWM to the current RSS (Linux: `5` into /proc/self/clear_refs).
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// A policy with one profile enabling `plugins` at their extension points.
fn policy(name: &str, plugins: &[(&str, &str, &str)]) -> DeschedulerPolicy {
    let mut config = Vec::new();
    let mut deschedule = Vec::new();
    let mut balance = Vec::new();
    for (point, plugin, args) in plugins {
        let args: serde_json::Value = serde_json::from_str(args).expect("bench args are JSON");
        config.push(json!({"name": plugin, "args": args}));
        match *point {
            "deschedule" => deschedule.push(*plugin),
            _ => balance.push(*plugin),
        }
    }
    DeschedulerPolicy::from_value(json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [{
            "name": name,
            "pluginConfig": config,
            "plugins": {"deschedule": {"enabled": deschedule}, "balance": {"enabled": balance}},
        }],
    }))
    .expect("the bench policy is valid")
}

/// What one measured cycle took.
struct Measure {
    wall: Duration,
    cpu: Option<Duration>,
    evicted: u32,
    peak_over_snapshot_kib: Option<i64>,
}

/// Runs the cycle `runs` times; keeps the times of the run with the least
/// CPU time (the least disturbed by other processes) and the highest peak.
fn measure(policy: &DeschedulerPolicy, snapshot: &ClusterSnapshot, runs: usize) -> Measure {
    let mut best: Option<Measure> = None;
    for _ in 0..runs {
        let rss_before = proc_status_kib("VmRSS");
        let peak_reset = reset_peak_rss();
        let cpu_before = thread_cpu_time();
        let started = Instant::now();
        let report = simulate(policy, snapshot, &[], &[]).expect("the bench policy runs");
        let wall = started.elapsed();
        let cpu = thread_cpu_time()
            .zip(cpu_before)
            .map(|(after, before)| after.saturating_sub(before));
        let peak = proc_status_kib("VmHWM")
            .zip(rss_before)
            .filter(|_| peak_reset)
            .map(|(peak, before)| peak as i64 - before as i64);
        let measure = Measure {
            wall,
            cpu,
            evicted: report.total_evicted,
            peak_over_snapshot_kib: peak,
        };
        best = Some(match best {
            None => measure,
            Some(best) => {
                let peak = best
                    .peak_over_snapshot_kib
                    .max(measure.peak_over_snapshot_kib);
                let faster = measure.cpu.unwrap_or(measure.wall) < best.cpu.unwrap_or(best.wall);
                Measure {
                    peak_over_snapshot_kib: peak,
                    ..if faster { measure } else { best }
                }
            }
        });
    }
    best.expect("at least one run")
}

fn print_line(label: &str, measure: &Measure) {
    let cpu = measure.cpu.map_or("n/a".to_string(), |cpu| {
        format!("{:.1} ms", cpu.as_secs_f64() * 1e3)
    });
    let peak = measure
        .peak_over_snapshot_kib
        .map_or("n/a".to_string(), |kib| {
            format!("{:+.1} MiB", kib as f64 / 1024.0)
        });
    println!(
        "  {label:<46} wall {:>8.1} ms  cpu {:>10}  {:>6} evicted  peak RSS {peak}",
        measure.wall.as_secs_f64() * 1e3,
        cpu,
        measure.evicted,
    );
}

/// The extension point's cycle with all its plugins, then each alone.
fn run_point(
    title: &str,
    point: &str,
    plugins: &[(&str, &str)],
    snapshot: &ClusterSnapshot,
    runs: usize,
) {
    let all: Vec<(&str, &str, &str)> = plugins
        .iter()
        .map(|(name, args)| (point, *name, *args))
        .collect();
    println!("{title}");
    print_line(
        &format!("total: one cycle, {} plugins", plugins.len()),
        &measure(&policy(point, &all), snapshot, runs),
    );
    for plugin in &all {
        print_line(
            plugin.1,
            &measure(&policy(plugin.1, &[*plugin]), snapshot, runs),
        );
    }
}

fn main() {
    let mut numbers = std::env::args()
        .skip(1)
        .filter_map(|arg| arg.parse::<usize>().ok());
    let node_count = numbers.next().unwrap_or(5_000);
    let pod_count = numbers.next().unwrap_or(50_000);
    let runs = 3;

    let rss_before = proc_status_kib("VmRSS").unwrap_or(0);
    let started = Instant::now();
    let nodes: Vec<Node> = (0..node_count).map(make_node).collect();
    let pods: Vec<Pod> = (0..pod_count)
        .map(|i| make_pod(i / PODS_PER_DEPLOYMENT, i % PODS_PER_DEPLOYMENT, node_count))
        .collect();
    let generated = started.elapsed();
    let started = Instant::now();
    let snapshot = ClusterSnapshot::new(
        nodes,
        pods,
        vec![],
        Timestamp::from_second(100_000).expect("valid"),
    );
    let indexed = started.elapsed();
    let rss_snapshot = proc_status_kib("VmRSS").unwrap_or(0);

    println!(
        "cluster: {node_count} nodes, {pod_count} pods ({} deployments with zone spread, {NAMESPACES} namespaces); dry run through the DefaultEvictor; best of {runs} runs by CPU time",
        pod_count.div_ceil(PODS_PER_DEPLOYMENT)
    );
    println!(
        "snapshot: generated in {:.0} ms, indexed in {:.1} ms; RSS {:.1} MiB (+{:.1} MiB for nodes, pods and index)",
        generated.as_secs_f64() * 1e3,
        indexed.as_secs_f64() * 1e3,
        mib(rss_snapshot),
        mib(rss_snapshot.saturating_sub(rss_before)),
    );
    run_point(
        "balance plugins (target: total < 1000 ms of compute)",
        "balance",
        &BALANCE,
        &snapshot,
        runs,
    );
    run_point(
        "deschedule plugins",
        "deschedule",
        &DESCHEDULE,
        &snapshot,
        runs,
    );
    let everything: Vec<(&str, &str, &str)> = DESCHEDULE
        .iter()
        .map(|(name, args)| ("deschedule", *name, *args))
        .chain(BALANCE.iter().map(|(name, args)| ("balance", *name, *args)))
        .collect();
    println!("every plugin");
    print_line(
        "total: one cycle, deschedule then balance",
        &measure(&policy("all", &everything), &snapshot, runs),
    );
}
