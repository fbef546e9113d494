//! The autoscaler's decisions, timed (one thread, so wall time is CPU time):
//! the scale-up decision for 1,000 unschedulable pods and three node groups
//! of max 500 (simulation with the scheduler's filters, binpacking,
//! expander), plain and with a hostname topology spread; and one
//! scale-down scan over 5,000 nodes and 50,000 pods (snapshot, utilization,
//! blocking pods, moving the pods of the underutilized nodes).
//!
//! `cargo bench -p ksim-autoscaler --bench decisions`

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use ksim_autoscaler::config::NodeGroupSpec;
use ksim_autoscaler::scaledown::{Candidate, find_unneeded};
use ksim_autoscaler::simulator::{Expander, GroupView, choose, plan_scale_up};
use ksim_scheduler::framework::{Profile, Snapshot};
use serde_json::json;

fn node(name: &str, cpu: &str, group: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kwok-nodegroup": group}},
        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .expect("node")
}

fn pod(name: &str, node: Option<&str>, cpu: &str, spread: bool) -> Pod {
    let mut value = json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                "uid": "u", "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]}
    });
    if let Some(node) = node {
        value["spec"]["nodeName"] = json!(node);
    }
    if spread {
        value["spec"]["topologySpreadConstraints"] = json!([{
            "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}}]);
    }
    serde_json::from_value(value).expect("pod")
}

fn group(name: &str, cpu: &str) -> GroupView {
    GroupView {
        spec: Arc::new(NodeGroupSpec {
            name: name.into(),
            group_value: name.into(),
            min_size: 0,
            max_size: 500,
            desired_size: 0,
            template: node(&format!("{name}-template"), cpu, name),
        }),
        target_size: 0,
        skip: None,
    }
}

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

fn scale_up(spread: bool) {
    let profile = Profile::default_profile();
    let nodes: Vec<Node> = (0..10)
        .map(|i| node(&format!("full-{i}"), "1", "small"))
        .collect();
    let fillers: Vec<Pod> = (0..10)
        .map(|i| {
            pod(
                &format!("filler-{i}"),
                Some(&format!("full-{i}")),
                "1",
                false,
            )
        })
        .collect();
    let snapshot = Snapshot::new(nodes, fillers);
    let pending: Vec<Arc<Pod>> = (0..1000)
        .map(|i| Arc::new(pod(&format!("p-{i}"), None, "500m", spread)))
        .collect();
    let groups = [
        group("small", "2"),
        group("medium", "4"),
        group("large", "8"),
    ];
    let mut rng = rand::rng();
    let mut runs = Vec::new();
    let mut summary = String::new();
    for _ in 0..5 {
        let start = Instant::now();
        let plan = plan_scale_up(&profile, &snapshot, &[], &groups, &pending);
        let chosen = choose(
            &[Expander::LeastWaste],
            &plan.options,
            &groups,
            &[],
            &mut rng,
        )
        .expect("an option");
        runs.push(start.elapsed());
        summary = format!(
            "{} +{} nodes for {} pods",
            groups[chosen.group].spec.name,
            chosen.node_count,
            chosen.pods.len()
        );
    }
    println!(
        "scale-up decision, 1,000 pending pods, 3 groups of max 500{}: median {:.1} ms (target < 1000 ms); chose {summary}",
        if spread { ", hostname spread" } else { "" },
        median(runs).as_secs_f64() * 1000.0
    );
}

fn scan() {
    let profile = Profile::default_profile();
    let mut nodes = Vec::new();
    let mut pods = Vec::new();
    for i in 0..5000 {
        let name = format!("node-{i:05}");
        // One node in ten is underutilized (20%): its pods move elsewhere.
        let cpu = if i % 10 == 0 { "40m" } else { "120m" };
        for j in 0..10 {
            pods.push(pod(&format!("p-{i}-{j}"), Some(&name), cpu, false));
        }
        nodes.push(node(&name, "2", "workers"));
    }
    let candidates: Vec<Candidate> = (0..5000)
        .map(|i| Candidate {
            name: format!("node-{i:05}"),
            group: 0,
            scale_down_disabled: false,
        })
        .collect();
    let mut runs = Vec::new();
    let mut build_runs = Vec::new();
    let mut all_runs = Vec::new();
    let mut found = 0;
    let mut found_all = 0;
    for _ in 0..3 {
        let (nodes, pods) = (nodes.clone(), pods.clone());
        let start = Instant::now();
        let mut snapshot = Snapshot::new(nodes, pods);
        let built = start.elapsed();
        let mut all = snapshot.clone();
        let scan = Instant::now();
        let mut excluded = HashSet::new();
        let (unneeded, _) = find_unneeded(
            &profile,
            &mut snapshot,
            &candidates,
            &mut excluded,
            Vec::new(),
            0.5,
            30,
        );
        runs.push(scan.elapsed());
        build_runs.push(built);
        found = unneeded.len();
        let scan = Instant::now();
        let mut excluded = HashSet::new();
        let (unneeded, _) = find_unneeded(
            &profile,
            &mut all,
            &candidates,
            &mut excluded,
            Vec::new(),
            0.5,
            usize::MAX,
        );
        all_runs.push(scan.elapsed());
        found_all = unneeded.len();
    }
    println!(
        "scale-down scan, 5,000 nodes / 50,000 pods (500 underutilized, upstream's limit of 30 non-empty candidates): median {:.1} ms (target < 200 ms); {found} nodes unneeded",
        median(runs).as_secs_f64() * 1000.0,
    );
    println!(
        "  the same scan without the limit: median {:.1} ms; {found_all} nodes unneeded",
        median(all_runs).as_secs_f64() * 1000.0,
    );
    println!(
        "  building the scheduler snapshot of 5,000 nodes / 50,000 pods (each loop): median {:.1} ms",
        median(build_runs).as_secs_f64() * 1000.0,
    );
}

fn main() {
    scale_up(false);
    scale_up(true);
    scan();
}
