//! The kubelet simulator on a virtual clock, against an in-process API server
//! on the same clock: a stage's delay and lease renewals are timers that fire
//! exactly when the clock is advanced past them (a custom stage's jittered
//! delay too), and a node whose kubelet is stopped (annotation
//! `ksim.io/kubelet: stopped`) keeps neither its lease nor its pods moving
//! until it is resumed.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use ksim_kubelet::simulator::{
    KUBELET_ANNOTATION, KUBELET_STOPPED, create_stage, ensure_stage_crd,
};
use ksim_kubelet::stages::{StageSet, parse_stage};
use ksim_kubelet::{KubeletOptions, KubeletSimulator};
use ksim_runtime::clock::Random;
use ksim_testutils::builders;
use ksim_testutils::in_process::{InProcessCluster, start_time};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

const RUN_LATER: &str = r#"
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-run-later
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: DoesNotExist
    - key: '.status.phase'
      operator: In
      values:
      - Pending
  delay:
    durationMilliseconds: 30000
  next:
    statusTemplate: |
      phase: Running
      startTime: {{ Now | Quote }}
"#;

/// A custom stage: Running between 1.5 s and 2 s (its jitter) after a pod
/// is seen, stamped with the cluster's time it applied at.
const SLOW_READY: &str = r#"
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-slow-ready
spec:
  resourceRef:
    apiVersion: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: DoesNotExist
    - key: '.status.phase'
      operator: In
      values: [Pending]
  delay:
    durationMilliseconds: 1500
    jitterDurationMilliseconds: 2000
  next:
    statusTemplate: |
      phase: Running
      startTime: {{ Now | Quote }}
"#;

/// [`RUN_LATER`] after 1 s plus up to 59 s of jitter.
fn run_jittered() -> String {
    RUN_LATER.replace(
        "durationMilliseconds: 30000",
        "durationMilliseconds: 1000\n    jitterDurationMilliseconds: 60000",
    )
}

/// ksim-testutils' in-process cluster, with the simulator spawned on it.
type Cluster = InProcessCluster;

/// A server and a simulator on one virtual clock; `stages` are created first
/// (none: the default stages), leases last `lease_seconds` (0: no leases).
async fn start(stages: &[&str], lease_seconds: i32) -> Cluster {
    start_seeded(stages, lease_seconds, 7).await
}

async fn start_seeded(stages: &[&str], lease_seconds: i32, seed: u64) -> Cluster {
    let mut cluster = InProcessCluster::virtual_with(Random::seeded(seed));
    let client = cluster.client.clone();
    ensure_stage_crd(&client).await.expect("CRD installed");
    let stages: Vec<&str> = if stages.is_empty() {
        StageSet::Default.files().iter().map(|(_, t)| *t).collect()
    } else {
        stages.to_vec()
    };
    for text in stages {
        let stage = parse_stage(text).expect("stage parses");
        assert!(create_stage(&client, &stage).await.expect("stage created"));
    }
    let simulator = KubeletSimulator::new(
        client,
        KubeletOptions {
            lease_duration_seconds: lease_seconds,
            clock: cluster.clock.clone(),
            ..Default::default()
        },
    );
    cluster.spawn(async move {
        if let Err(error) = simulator.run().await {
            panic!("simulator failed: {error}");
        }
    });
    cluster.settle().await;
    cluster
}

fn default_stage(name: &str) -> &'static str {
    StageSet::Default
        .files()
        .iter()
        .find(|(file, _)| file.strip_suffix(".yaml") == Some(name))
        .map(|(_, text)| *text)
        .expect("shipped stage")
}

async fn create_node(client: &kube::Client, name: &str) {
    let node = builders::node(name).pod_cidr("10.0.1.0/24").obj();
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .expect("node created");
}

async fn create_pod(client: &kube::Client, name: &str, node: &str) {
    let pod = builders::pod(name).image("nginx").node(node).obj();
    Api::<Pod>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
}

async fn set_kubelet(client: &kube::Client, node: &str, value: Option<&str>) {
    Api::<Node>::all(client.clone())
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {KUBELET_ANNOTATION: value}}})),
        )
        .await
        .expect("node annotated");
}

async fn phase(client: &kube::Client, pod: &str) -> Option<String> {
    Api::<Pod>::namespaced(client.clone(), "default")
        .get(pod)
        .await
        .expect("pod exists")
        .status
        .and_then(|s| s.phase)
}

async fn renew_time(client: &kube::Client, node: &str) -> DateTime<Utc> {
    let lease = Api::<Lease>::namespaced(client.clone(), "kube-node-lease")
        .get(node)
        .await
        .expect("lease exists");
    let time = lease
        .spec
        .and_then(|s| s.renew_time)
        .expect("renewTime set")
        .0;
    DateTime::from_timestamp(time.as_second(), time.subsec_nanosecond() as u32).expect("valid time")
}

async fn node_ready(client: &kube::Client, node: &str) -> bool {
    let node = Api::<Node>::all(client.clone())
        .get(node)
        .await
        .expect("node exists");
    node.status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[tokio::test(flavor = "current_thread")]
async fn a_stage_delay_fires_exactly_when_the_clock_reaches_it() {
    let cluster = start(&[RUN_LATER], 0).await;
    let (clock, client) = (&cluster.clock, &cluster.client);
    create_node(client, "n1").await;
    create_pod(client, "p", "n1").await;
    clock.settle().await.expect("settles");
    assert_eq!(clock.now(), start_time(), "time stands still");
    assert_eq!(
        clock.next_timer(),
        Some(start_time() + secs(30)),
        "the stage waits its 30 s delay"
    );

    clock.advance(secs(29)).await.expect("advances");
    assert_eq!(phase(client, "p").await.as_deref(), Some("Pending"));

    clock.advance(secs(1)).await.expect("advances");
    let pod = Api::<Pod>::namespaced(client.clone(), "default")
        .get("p")
        .await
        .expect("pod exists");
    let status = pod.status.expect("status");
    assert_eq!(status.phase.as_deref(), Some("Running"));
    let started = status.start_time.expect("startTime").0;
    assert_eq!(
        started.as_second(),
        (start_time() + secs(30)).timestamp(),
        "applied at start + 30 s"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn custom_stage_delay_is_honoured() {
    let cluster = start(&[default_stage("node-initialize"), SLOW_READY], 0).await;
    let (clock, client) = (&cluster.clock, &cluster.client);
    create_node(client, "n1").await;
    create_pod(client, "slow", "n1").await;
    clock.settle().await.expect("settles");

    // Not before its delay, in the cluster's time.
    clock
        .advance_to(start_time() + Duration::from_millis(1499))
        .await
        .expect("advances");
    assert_eq!(phase(client, "slow").await.as_deref(), Some("Pending"));
    let due = clock.next_timer().expect("the stage waits on a timer");
    assert!(
        due >= start_time() + Duration::from_millis(1500) && due <= start_time() + secs(2),
        "due at {due}, not 1.5 s to 2 s after the start"
    );
    clock
        .advance_to(due - Duration::from_millis(1))
        .await
        .expect("advances");
    assert_eq!(phase(client, "slow").await.as_deref(), Some("Pending"));

    // Applied once the clock reaches it, stamped with that time.
    clock.advance_to(due).await.expect("advances");
    let pod = Api::<Pod>::namespaced(client.clone(), "default")
        .get("slow")
        .await
        .expect("pod exists");
    let status = pod.status.expect("status");
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert_eq!(
        status.start_time.expect("startTime").0.as_second(),
        due.timestamp(),
        "applied at {due}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn leases_renew_with_virtual_time_and_stop_with_the_kubelet() {
    let cluster = start(&[], 40).await;
    let (clock, client) = (&cluster.clock, &cluster.client);
    create_node(client, "n1").await;
    clock.settle().await.expect("settles");
    assert!(node_ready(client, "n1").await);
    let first = renew_time(client, "n1").await;
    assert_eq!(first, start_time(), "created at once");

    // Renewed every quarter of the duration (10 s) plus up to 4 % jitter, on a
    // virtual clock batched by the second.
    let mut last = first;
    for _ in 0..6 {
        clock.advance(secs(11)).await.expect("advances");
        let renewed = renew_time(client, "n1").await;
        let gap = (renewed - last).to_std().expect("forward");
        assert!(
            gap >= secs(10) && gap <= secs(11),
            "renewed {gap:?} after the last renewal"
        );
        assert!(renewed <= clock.now());
        last = renewed;
    }

    set_kubelet(client, "n1", Some(KUBELET_STOPPED)).await;
    clock.settle().await.expect("settles");
    let stopped_at = renew_time(client, "n1").await;
    clock.advance(secs(120)).await.expect("advances");
    assert_eq!(
        renew_time(client, "n1").await,
        stopped_at,
        "a stopped kubelet renews nothing"
    );

    set_kubelet(client, "n1", None).await;
    clock.settle().await.expect("settles");
    assert_eq!(
        renew_time(client, "n1").await,
        clock.now(),
        "renewed at once on resume"
    );
    clock.advance(secs(11)).await.expect("advances");
    assert!(renew_time(client, "n1").await >= clock.now() - secs(1));
}

#[tokio::test(flavor = "current_thread")]
async fn a_stopped_nodes_pods_wait_for_its_kubelet() {
    let cluster = start(&[], 40).await;
    let (clock, client) = (&cluster.clock, &cluster.client);
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    create_node(client, "n1").await;
    create_pod(client, "old", "n1").await;
    clock.settle().await.expect("settles");
    assert_eq!(phase(client, "old").await.as_deref(), Some("Running"));

    set_kubelet(client, "n1", Some(KUBELET_STOPPED)).await;
    clock.settle().await.expect("settles");
    create_pod(client, "new", "n1").await;
    pods.delete("old", &DeleteParams::default())
        .await
        .expect("deletion accepted");
    clock.advance(secs(600)).await.expect("advances");
    assert_eq!(
        phase(client, "new").await.as_deref(),
        Some("Pending"),
        "no kubelet starts it"
    );
    let old = pods.get("old").await.expect("still there: Terminating");
    assert!(old.metadata.deletion_timestamp.is_some());

    set_kubelet(client, "n1", Some("running")).await;
    clock.settle().await.expect("settles");
    assert_eq!(phase(client, "new").await.as_deref(), Some("Running"));
    assert!(
        pods.get_opt("old").await.expect("get").is_none(),
        "the resumed kubelet finishes the deletion"
    );
    assert!(node_ready(client, "n1").await);
}

/// When each of five pods started under [`run_jittered`], in seconds after
/// the start, on a cluster seeded with `seed`.
async fn jittered_starts(seed: u64) -> Vec<i64> {
    let stage = run_jittered();
    let cluster = start_seeded(&[&stage], 0, seed).await;
    let (clock, client) = (&cluster.clock, &cluster.client);
    create_node(client, "n1").await;
    for i in 0..5 {
        create_pod(client, &format!("p{i}"), "n1").await;
    }
    clock.advance(secs(60)).await.expect("advances");
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    let mut starts = Vec::new();
    for i in 0..5 {
        let pod = pods.get(&format!("p{i}")).await.expect("pod exists");
        let started = pod
            .status
            .and_then(|s| s.start_time)
            .unwrap_or_else(|| panic!("p{i} started within the jitter"))
            .0;
        starts.push(started.as_second() - start_time().timestamp());
    }
    starts
}

#[tokio::test(flavor = "current_thread")]
async fn a_seeded_cluster_repeats_its_jitter() {
    let first = jittered_starts(7).await;
    assert!(first.iter().all(|s| (1..=60).contains(s)), "{first:?}");
    assert_eq!(jittered_starts(7).await, first, "same seed, same delays");
    assert_ne!(
        jittered_starts(8).await,
        first,
        "another seed, other delays"
    );
}

/// A cluster restored from a snapshot of a running one: its node is Ready
/// already and its pod Running with an IP. Once the simulator has started
/// and settled (the node holds its lease, a new pod on it runs), neither was
/// written: the node is not initialized again, the pod not started again.
#[tokio::test(flavor = "current_thread")]
async fn a_restored_ready_node_and_running_pod_are_not_written_again() {
    let mut cluster = InProcessCluster::virtual_with(Random::seeded(7));
    let client = cluster.client.clone();
    ensure_stage_crd(&client).await.expect("CRD installed");
    for (_, text) in StageSet::Default.files() {
        let stage = parse_stage(text).expect("stage parses");
        assert!(create_stage(&client, &stage).await.expect("stage created"));
    }
    let nodes = Api::<Node>::all(client.clone());
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    create_node(&client, "restored").await;
    let since = start_time().to_rfc3339();
    let conditions: Vec<_> = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
        .iter()
        .map(|kind| {
            json!({"type": kind, "status": if *kind == "Ready" { "True" } else { "False" },
                "lastHeartbeatTime": since, "lastTransitionTime": since})
        })
        .collect();
    let node = nodes
        .patch_status(
            "restored",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"phase": "Running", "conditions": conditions,
                "addresses": [{"type": "InternalIP", "address": "10.128.0.9"}]}}),
            ),
        )
        .await
        .expect("node status written");
    create_pod(&client, "running", "restored").await;
    let pod = pods
        .patch_status(
            "running",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running", "podIP": "10.0.1.7",
                "podIPs": [{"ip": "10.0.1.7"}], "startTime": since,
                "conditions": [{"type": "Ready", "status": "True"}]}})),
        )
        .await
        .expect("pod status written");
    let simulator = KubeletSimulator::new(
        client.clone(),
        KubeletOptions {
            clock: cluster.clock.clone(),
            ..Default::default()
        },
    );
    cluster.spawn(async move {
        if let Err(error) = simulator.run().await {
            panic!("simulator failed: {error}");
        }
    });
    create_pod(&client, "new", "restored").await;
    cluster.settle().await;
    // The simulator has seen the node and the pods, and done what was due.
    renew_time(&client, "restored").await;
    assert_eq!(phase(&client, "new").await.as_deref(), Some("Running"));
    let after = nodes.get("restored").await.expect("node exists");
    assert_eq!(
        after.metadata.resource_version, node.metadata.resource_version,
        "the Ready node is not initialized again"
    );
    let after = pods.get("running").await.expect("pod exists");
    assert_eq!(
        after.metadata.resource_version, pod.metadata.resource_version,
        "the Running pod is not started again"
    );
}
