//! Pods that already show IPs when the kubelet simulator meets them (a
//! snapshot restored before the simulator starts, or written with their
//! status while it runs) keep them, and no other pod is given one of them:
//! not when a pod is seen before its node, and not when a pod bound but not
//! yet running is listed before the running pods that hold the first
//! addresses of the pool.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::Pod;
use ksim_kubelet::simulator::{Engine, RenderEnv, SimulatedKind};
use ksim_kubelet::stages::{StageSet, parse_stage};
use ksim_kubelet::template::TemplateEnv;
use ksim_kubelet::{KubeletOptions, KubeletSimulator};
use ksim_testutils::builders;
use ksim_testutils::in_process::{InProcessCluster, eventually};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

fn node(name: &str, cidr: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1"},
        "spec": {"podCIDR": cidr}})
}

fn running_pod(name: &str, node: &str, ip: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "resourceVersion": "2"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx"}]},
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}})
}

/// The IP the simulator would hand a new pod on `node`.
fn next_ip(engine: &std::sync::Arc<Engine>, node: &str, uid: &str) -> String {
    let env = RenderEnv {
        now: String::new(),
        start_time: String::new(),
        node_name: node.to_owned(),
        node_port: 0,
        network: engine.network.clone(),
    };
    env.pod_ips_with(node, false, uid, uid, "default")
        .into_iter()
        .next()
        .expect("an IP")
}

#[tokio::test]
async fn a_pod_seen_before_its_node_keeps_its_ip_to_itself() {
    let cluster = InProcessCluster::new();
    let engine = KubeletSimulator::new(cluster.client.clone(), KubeletOptions::default()).engine();
    // The pods' informer delivers before the nodes' one.
    engine.pod_applied(running_pod("restored-a", "n1", "10.0.3.1"));
    engine.pod_applied(running_pod("restored-b", "n1", "10.0.3.2"));
    engine.node_applied(node("n1", "10.0.3.0/24"));
    let given: HashSet<String> = (0..3)
        .map(|i| next_ip(&engine, "n1", &format!("new-{i}")))
        .collect();
    assert_eq!(
        given,
        HashSet::from(["10.0.3.3".into(), "10.0.3.4".into(), "10.0.3.5".into()]),
        "new pods get none of the restored pods' IPs"
    );
}

#[tokio::test]
async fn a_pod_with_only_a_pod_ip_keeps_it_to_itself() {
    let cluster = InProcessCluster::new();
    let engine = KubeletSimulator::new(cluster.client.clone(), KubeletOptions::default()).engine();
    engine.node_applied(node("n1", "10.0.3.0/24"));
    let mut pod = running_pod("restored", "n1", "10.0.3.1");
    pod["status"]
        .as_object_mut()
        .expect("a status")
        .remove("podIPs");
    engine.pod_applied(pod);
    assert_eq!(next_ip(&engine, "n1", "new"), "10.0.3.2");
}

/// Pods bound to a node, some Running with IPs written through their status
/// before the simulator starts, others not started yet and listed first:
/// once the simulator has started them, every pod shows a different IP and
/// the running ones still show theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_started_after_a_restore_get_ips_no_restored_pod_holds() {
    let mut cluster = InProcessCluster::new();
    let client = cluster.client.clone();
    cluster
        .create_node(
            &builders::node("n1")
                .annotation("kwok.x-k8s.io/node", "fake")
                .pod_cidr("10.0.3.0/24")
                .obj(),
        )
        .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    // Listed first (by name and by creation), before the running pods.
    for i in 0..20 {
        cluster
            .create_pod(
                &builders::pod(&format!("a-pending-{i:02}"))
                    .image("nginx")
                    .node("n1")
                    .obj(),
            )
            .await;
    }
    let mut restored = Vec::new();
    for i in 0..60 {
        let name = format!("b-restored-{i:02}");
        cluster
            .create_pod(&builders::pod(&name).image("nginx").node("n1").obj())
            .await;
        let ip = format!("10.0.3.{}", i + 1);
        let status = json!({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
            "conditions": [{"type": "Ready", "status": "True"}]}});
        pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("status written");
        restored.push(format!("{name} {ip}"));
    }
    let simulator = KubeletSimulator::new(client, KubeletOptions::default());
    cluster.spawn(async move {
        if let Err(error) = simulator.run().await {
            panic!("simulator failed: {error}");
        }
    });
    let shown = eventually("every pod Running with an IP", || async {
        let list = pods.list(&ListParams::default()).await.ok()?;
        let shown: Vec<String> = list
            .items
            .iter()
            .filter_map(|p| {
                let status = p.status.as_ref()?;
                (status.phase.as_deref() == Some("Running"))
                    .then_some(())
                    .and(status.pod_ip.as_ref())
                    .map(|ip| format!("{} {ip}", p.metadata.name.as_deref().unwrap_or_default()))
            })
            .collect();
        (shown.len() == 80).then_some(shown)
    })
    .await;
    for pod in &restored {
        assert!(shown.contains(pod), "{pod} keeps its IP: {shown:?}");
    }
    let ips: HashSet<&str> = shown
        .iter()
        .filter_map(|l| l.split_once(' ').map(|(_, ip)| ip))
        .collect();
    assert_eq!(ips.len(), 80, "no IP is shown twice: {shown:?}");
}

/// The Pod informer's first list delivers a bound pod that has not started
/// before a running pod holding the pool's first address, and the pod
/// worker gets its turns in between (a single-threaded runtime, yielding):
/// the worker waits for the whole list before starting any pod, so the new
/// pod is not given the running pod's address.
#[tokio::test(flavor = "current_thread")]
async fn no_pod_starts_before_the_first_list_of_pods_is_complete() {
    let mut cluster = InProcessCluster::new();
    let client = cluster.client.clone();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    cluster
        .create_pod(&builders::pod("a-pending").image("nginx").node("n1").obj())
        .await;
    cluster
        .create_pod(&builders::pod("b-restored").image("nginx").node("n1").obj())
        .await;
    let status = json!({"status": {"phase": "Running", "podIP": "10.0.3.1", "podIPs": [{"ip": "10.0.3.1"}],
        "conditions": [{"type": "Ready", "status": "True"}]}});
    pods.patch_status(
        "b-restored",
        &PatchParams::default(),
        &Patch::Merge(&status),
    )
    .await
    .expect("status written");
    let read = |name: &'static str| {
        let pods = pods.clone();
        async move {
            serde_json::to_value(pods.get(name).await.expect("the pod")).expect("a pod as JSON")
        }
    };
    let (pending, restored) = (read("a-pending").await, read("b-restored").await);

    let engine = KubeletSimulator::new(client, KubeletOptions::default()).engine();
    let stages = StageSet::Default
        .files()
        .iter()
        .map(|(_, text)| parse_stage(text).expect("a shipped stage parses"))
        .collect();
    engine.set_stages(stages);
    cluster.spawn(engine.clone().work(SimulatedKind::Pod));
    // As the informers deliver their first lists: the node, then the pods.
    engine.node_applied(node("n1", "10.0.3.0/24"));
    engine.listed(SimulatedKind::Node);
    engine.pod_applied(pending);
    // The pod worker's turns while the rest of the pods' list is on its way.
    for _ in 0..1000 {
        tokio::task::yield_now().await;
    }
    engine.pod_applied(restored);
    engine.listed(SimulatedKind::Pod);
    let started = eventually("the pending pod runs with an IP", || async {
        let pod = pods.get("a-pending").await.ok()?;
        let status = pod.status?;
        (status.phase.as_deref() == Some("Running"))
            .then_some(())
            .and(status.pod_ip)
    })
    .await;
    assert_ne!(
        started, "10.0.3.1",
        "the running pod's IP is not handed out again"
    );
}
