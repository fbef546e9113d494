//! The autoscaler's decisions, timed (one thread, so wall time is CPU time):
//! the scale-up decision for 1,000 unschedulable pods and three node groups
//! of max 500 (simulation with the scheduler's filters, binpacking,
//! expander), plain and with a hostname topology spread; and one full loop
//! over 5,000 nodes and 50,000 pods (the informers' state, the groups'
//! members, the scale-down scan: utilization, blocking pods, moving the pods
//! of the underutilized nodes), in CPU time of the thread.
//!
//! `cargo bench -p ksim-autoscaler --bench decisions`

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use ksim_autoscaler::config::{NodeGroupSpec, ProviderConfig};
use ksim_autoscaler::simulator::{Expander, GroupView, choose, plan_scale_up};
use ksim_autoscaler::state::ClusterState;
use ksim_autoscaler::{Autoscaler, AutoscalerOptions};
use ksim_runtime::informer::Change;
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

/// CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`): on a loaded
/// machine wall time includes waiting for a core.
fn thread_cpu_time() -> Duration {
    let time = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(time.tv_sec).unwrap_or_default(),
        u32::try_from(time.tv_nsec).unwrap_or_default(),
    )
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

const PROVIDER: &str = "apiVersion: v1alpha1\nreadNodesFrom: configmap\nnodegroups:\n  fromNodeLabelKey: kwok-nodegroup\nconfigmap:\n  name: kwok-provider-templates\n  key: templates\n";

/// One loop of the autoscaler over 5,000 nodes and 50,000 pods with no
/// pod pending: what every scan interval costs. The cluster is the state
/// the informers keep (built once from the first lists, then changed event
/// by event); a loop is `Autoscaler::decide` on it: the groups' members,
/// readiness and booting nodes, the pending pods, and the scale-down scan
/// (utilization, blocking pods, moving the pods of the underutilized nodes
/// on the state's own snapshot, putting them back).
fn scan(runtime: &tokio::runtime::Runtime) {
    let _guard = runtime.enter();
    let server = ksim_apiserver::ApiServer::new();
    let client = ksim_runtime::client::in_process(&server);
    let start: chrono::DateTime<chrono::Utc> = "2030-01-01T00:00:00Z".parse().expect("time");
    let clock = ksim_runtime::clock::Clock::virtual_at(start);
    let mut nodes = Vec::new();
    let mut pods = Vec::new();
    for i in 0..5000 {
        let name = format!("node-{i:05}");
        // One node in ten is underutilized (20%): its pods move elsewhere.
        let cpu = if i % 10 == 0 { "40m" } else { "120m" };
        for j in 0..10 {
            pods.push(pod(&format!("p-{i}-{j}"), Some(&name), cpu, false));
        }
        let mut node = node(&name, "2", "workers");
        node.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert("kwok.x-k8s.io/node".into(), "fake".into());
        nodes.push(node);
    }
    let provider = ProviderConfig::parse(PROVIDER).expect("provider");
    let mut spec = group("workers", "2").spec.as_ref().clone();
    spec.max_size = 10_000;
    let specs = vec![Arc::new(spec)];

    let (cpu, wall) = (thread_cpu_time(), Instant::now());
    let mut state = ClusterState::from_lists(nodes, pods.clone(), []);
    let (build_cpu, build_wall) = (thread_cpu_time() - cpu, wall.elapsed());

    // Changes as the informers apply them: every pod of 1,000 nodes updated.
    let updates: Vec<Pod> = pods.iter().take(10_000).cloned().collect();
    let cpu = thread_cpu_time();
    let count = updates.len();
    for pod in updates {
        state.pod_changed(Change::Applied(pod));
    }
    let event_cpu = (thread_cpu_time() - cpu) / u32::try_from(count).unwrap_or(1);

    for (label, limit) in [
        (
            "upstream's default --scale-down-non-empty-candidates-count=30",
            30,
        ),
        ("without the limit", usize::MAX),
    ] {
        let options = AutoscalerOptions {
            scale_down_non_empty_candidates_count: limit,
            ..Default::default()
        };
        let mut autoscaler = Autoscaler::with_clock(client.clone(), options, clock.clone());
        autoscaler.use_provider(provider.clone());
        let mut cpu_runs = Vec::new();
        let mut wall_runs = Vec::new();
        let mut unneeded = 0;
        for _ in 0..5 {
            let (cpu, wall) = (thread_cpu_time(), Instant::now());
            let decision = autoscaler.decide(&mut state, &specs, &[]);
            cpu_runs.push(thread_cpu_time() - cpu);
            wall_runs.push(wall.elapsed());
            assert_eq!(
                decision.nodes_to_remove(),
                0,
                "not unneeded long enough yet"
            );
            unneeded = autoscaler.unneeded();
        }
        // The scan left the informers' snapshot as it found it.
        let first = state.cache.snapshot.get("node-00000").expect("node");
        assert_eq!(first.pods.len(), 10);
        println!(
            "autoscaler loop, 5,000 nodes / 50,000 pods, nothing pending, {label}: median {:.1} ms CPU ({:.1} ms wall) (target < 200 ms CPU); {unneeded} nodes unneeded",
            ms(median(cpu_runs)),
            ms(median(wall_runs)),
        );
    }
    println!(
        "  the informers' state from the first lists (once, at start): {:.1} ms CPU ({:.1} ms wall); then each change: {:.1} µs CPU",
        ms(build_cpu),
        ms(build_wall),
        event_cpu.as_secs_f64() * 1e6,
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    scale_up(false);
    scale_up(true);
    scan(&runtime);
}
