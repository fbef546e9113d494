//! One descheduling cycle (dry run, no API) over a generated cluster of
//! 5,000 nodes and 50,000 pods: the time to index the snapshot, the time of
//! the cycle with every registered plugin enabled, and the memory the
//! snapshot holds. Prints figures; asserts nothing about time.
//!
//! `cargo bench -p ksim-descheduler --bench cycle [-- NODES PODS_PER_NODE]`

use std::collections::BTreeMap;
use std::time::Instant;

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerStatus, Node, NodeCondition, NodeSpec, NodeStatus, Pod,
    PodAffinityTerm, PodAntiAffinity, PodSpec, PodStatus, ResourceRequirements, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::jiff::Timestamp;
use ksim_descheduler::framework::ClusterSnapshot;
use ksim_descheduler::plugins::lookup;
use ksim_descheduler::{DeschedulerPolicy, simulate};

/// Resident memory in bytes (Linux), 0 if unknown.
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|statm| statm.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

fn node(index: usize) -> Node {
    let name = format!("node-{index:06}");
    let taints = index.is_multiple_of(10).then(|| {
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
                (
                    "topology.kubernetes.io/zone".to_string(),
                    format!("zone-{}", index % 10),
                ),
            ])),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints,
            ..Default::default()
        }),
        status: Some(NodeStatus {
            allocatable: Some(BTreeMap::from([
                ("cpu".to_string(), Quantity("32".into())),
                ("memory".to_string(), Quantity("256Gi".into())),
                ("pods".to_string(), Quantity("110".into())),
            ])),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

fn pod(index: usize, node: &str) -> Pod {
    let app = format!("app-{}", index % 500);
    let anti = index.is_multiple_of(50).then(|| Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                label_selector: Some(LabelSelector {
                    match_labels: Some(BTreeMap::from([("app".to_string(), app.clone())])),
                    ..Default::default()
                }),
                topology_key: "kubernetes.io/hostname".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    });
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("pod-{index:07}")),
            namespace: Some(format!("ns-{}", index % 20)),
            uid: Some(format!("uid-{index}")),
            labels: Some(BTreeMap::from([("app".to_string(), app.clone())])),
            creation_timestamp: Some(Time(Timestamp::UNIX_EPOCH)),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: app.clone(),
                uid: format!("rs-{app}"),
                controller: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.to_string()),
            affinity: anti,
            containers: vec![Container {
                name: "c".into(),
                resources: Some(ResourceRequirements {
                    requests: Some(BTreeMap::from([
                        ("cpu".to_string(), Quantity("500m".into())),
                        ("memory".to_string(), Quantity("1Gi".into())),
                    ])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
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
                name: "c".into(),
                restart_count: i32::try_from(index % 13).unwrap_or_default(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

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

const BALANCE: [(&str, &str); 4] = [
    ("RemoveDuplicates", "{}"),
    (
        "LowNodeUtilization",
        r#"{"thresholds": {"cpu": 20, "memory": 20, "pods": 20}, "targetThresholds": {"cpu": 50, "memory": 50, "pods": 50}}"#,
    ),
    (
        "HighNodeUtilization",
        r#"{"thresholds": {"cpu": 20, "memory": 20, "pods": 20}}"#,
    ),
    ("RemovePodsViolatingTopologySpreadConstraint", "{}"),
];

/// A policy with one profile per plugin (every registered plugin of the
/// lists above), so each runs on its own.
fn policy() -> (DeschedulerPolicy, Vec<&'static str>) {
    let mut profiles = Vec::new();
    let mut names = Vec::new();
    for (point, plugins) in [("deschedule", &DESCHEDULE[..]), ("balance", &BALANCE[..])] {
        for (name, args) in plugins {
            if lookup(name).is_none() {
                continue;
            }
            let args: serde_json::Value = serde_json::from_str(args).expect("bench args");
            profiles.push(serde_json::json!({
                "name": name,
                "pluginConfig": [{"name": name, "args": args}],
                "plugins": {point: {"enabled": [name]}},
            }));
            names.push(*name);
        }
    }
    let policy = DeschedulerPolicy::from_value(serde_json::json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": profiles,
    }))
    .expect("the bench policy is valid");
    (policy, names)
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let nodes = args.first().copied().unwrap_or(5_000);
    let per_node = args.get(1).copied().unwrap_or(10);
    let (policy, plugins) = policy();
    let before = rss();
    let node_list: Vec<Node> = (0..nodes).map(node).collect();
    let pods: Vec<Pod> = (0..nodes * per_node)
        .map(|index| pod(index, &format!("node-{:06}", index % nodes)))
        .collect();
    let started = Instant::now();
    let snapshot = ClusterSnapshot::new(
        node_list,
        pods,
        vec![],
        Timestamp::from_second(100_000).expect("valid"),
    );
    let indexed = started.elapsed();
    let held = rss().saturating_sub(before);
    println!(
        "cluster: {nodes} nodes, {} pods; plugins: {}",
        nodes * per_node,
        plugins.join(", ")
    );
    println!(
        "snapshot: indexed in {:.1} ms; nodes+pods+index hold {:.1} MiB RSS",
        indexed.as_secs_f64() * 1e3,
        held as f64 / (1024.0 * 1024.0)
    );
    let mut times = Vec::new();
    let mut evicted = 0;
    let peak_before = rss();
    for _ in 0..5 {
        let started = Instant::now();
        let report = simulate(&policy, &snapshot, &[]).expect("cycle");
        times.push(started.elapsed());
        evicted = report.total_evicted;
    }
    times.sort();
    println!(
        "cycle (dry run, {} profiles): min {:.1} ms, median {:.1} ms over 5 runs; {evicted} pods would be evicted; RSS grew {:.1} MiB during the cycles",
        plugins.len(),
        times[0].as_secs_f64() * 1e3,
        times[2].as_secs_f64() * 1e3,
        rss().saturating_sub(peak_before) as f64 / (1024.0 * 1024.0)
    );
    for (name, _) in DESCHEDULE.iter().chain(BALANCE.iter()) {
        if lookup(name).is_none() {
            continue;
        }
        let single = DeschedulerPolicy::from_value(serde_json::json!({
            "apiVersion": "descheduler/v1alpha2",
            "kind": "DeschedulerPolicy",
            "profiles": [policy.profiles.iter().find(|p| p.name == *name).map(|p| serde_json::json!({
                "name": p.name,
                "pluginConfig": p.plugin_config.iter().map(|c| serde_json::json!({"name": c.name, "args": c.args})).collect::<Vec<_>>(),
                "plugins": if DESCHEDULE.iter().any(|(n, _)| n == name) {
                    serde_json::json!({"deschedule": {"enabled": [name]}})
                } else {
                    serde_json::json!({"balance": {"enabled": [name]}})
                },
            }))],
        }))
        .expect("single-plugin policy");
        let started = Instant::now();
        let report = simulate(&single, &snapshot, &[]).expect("cycle");
        println!(
            "  {name}: {:.1} ms, {} pods",
            started.elapsed().as_secs_f64() * 1e3,
            report.total_evicted
        );
    }
}
