//! In-process: the node lifecycle controller marks a node whose Lease is not
//! renewed Unknown, taints it, evicts the pods that stop tolerating it, and
//! taints cordoned nodes.

mod support;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use ksim_controllers::SharedInformers;
use ksim_controllers::nodelifecycle::{NodeLifecycleConfig, run_with};
use ksim_runtime::clock::Clock;
use ksim_testutils::builders::{self, PodBuilder};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{Cluster, eventually};

fn short() -> NodeLifecycleConfig {
    NodeLifecycleConfig {
        grace_period: Duration::from_secs(2),
        monitor_period: Duration::from_millis(200),
    }
}

async fn ready_node(cluster: &Cluster, name: &str) {
    let client = &cluster.client;
    let now = cluster.clock.timestamp().to_string();
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name}})).expect("node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("node");
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [{
                "type": "Ready", "status": "True", "reason": "KubeletReady",
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            }]}})),
        )
        .await
        .expect("node status");
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                 "renewTime": cluster.clock.timestamp().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}
    }))
    .expect("lease");
    leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("lease");
}

/// A pod bound to `node`.
fn bound_pod(name: &str, node: &str) -> PodBuilder {
    builders::pod(name).image("nginx").node(node)
}

fn taint_keys(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_node_goes_unknown_and_its_intolerant_pods_are_evicted() {
    let mut cluster = Cluster::start(&[]);
    let client = cluster.client.clone();
    ready_node(&cluster, "n1").await;
    cluster
        .create_pod(
            &bound_pod("short", "n1")
                .toleration_seconds("node.kubernetes.io/unreachable", 1)
                .obj(),
        )
        .await;
    cluster
        .create_pod(
            &bound_pod("forever", "n1")
                .toleration("", "Exists", "", "")
                .obj(),
        )
        .await;
    cluster.create_pod(&bound_pod("default", "n1").obj()).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let defaulted = pods.get("default").await.expect("pod");
    let tolerations = defaulted
        .spec
        .and_then(|s| s.tolerations)
        .unwrap_or_default();
    assert!(
        tolerations.iter().any(
            |t| t.key.as_deref() == Some("node.kubernetes.io/unreachable")
                && t.toleration_seconds == Some(300)
        ),
        "DefaultTolerationSeconds admission: {tolerations:?}"
    );

    cluster.spawn(run_with(
        client.clone(),
        short(),
        SharedInformers::new(client.clone()),
    ));
    let nodes: Api<Node> = Api::all(client.clone());
    let node = eventually("node Unknown and tainted unreachable", || async {
        let node = nodes.get("n1").await.ok()?;
        let ready = node
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == "Ready")?
            .clone();
        let keys = taint_keys(&node);
        (ready.status == "Unknown"
            && keys.contains(&"node.kubernetes.io/unreachable:NoExecute".to_string()))
        .then_some((node, ready))
    })
    .await;
    assert_eq!(
        node.1.message.as_deref(),
        Some("Kubelet stopped posting node status.")
    );
    assert!(taint_keys(&node.0).contains(&"node.kubernetes.io/unreachable:NoSchedule".to_string()));

    let evicted = eventually("the 1 s pod evicted", || async {
        let pod = pods.get("short").await.ok()?;
        pod.metadata.deletion_timestamp.is_some().then_some(pod)
    })
    .await;
    let condition = evicted
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "DisruptionTarget")
        .expect("DisruptionTarget condition");
    assert_eq!(condition.reason.as_deref(), Some("DeletionByTaintManager"));
    for name in ["forever", "default"] {
        let pod = pods.get(name).await.expect("pod stays");
        assert!(
            pod.metadata.deletion_timestamp.is_none(),
            "{name} was evicted"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cordoned_nodes_get_the_unschedulable_taint() {
    let mut cluster = Cluster::start(&[]);
    let client = cluster.client.clone();
    ready_node(&cluster, "n1").await;
    cluster.spawn(run_with(
        client.clone(),
        NodeLifecycleConfig {
            grace_period: Duration::from_secs(600),
            ..short()
        },
        SharedInformers::new(client.clone()),
    ));
    let nodes: Api<Node> = Api::all(client.clone());
    let cordon = |on: bool| Patch::Merge(json!({"spec": {"unschedulable": on}}));
    nodes
        .patch("n1", &PatchParams::default(), &cordon(true))
        .await
        .expect("cordon");
    eventually("unschedulable taint", || async {
        let node = nodes.get("n1").await.ok()?;
        (taint_keys(&node) == ["node.kubernetes.io/unschedulable:NoSchedule"]).then_some(())
    })
    .await;
    nodes
        .patch("n1", &PatchParams::default(), &cordon(false))
        .await
        .expect("uncordon");
    eventually("taint removed", || async {
        let node = nodes.get("n1").await.ok()?;
        taint_keys(&node).is_empty().then_some(())
    })
    .await;
}

fn ready_condition(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

/// Renews the node's Lease every 200 ms, as a kubelet that came back does.
async fn renew_lease_forever(client: kube::Client, clock: Clock, name: &'static str) {
    let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    loop {
        let now = clock
            .timestamp()
            .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
            .to_string();
        let _ = leases
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"renewTime": now}})),
            )
            .await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_node_marks_its_pods_not_ready_and_recovers_when_it_posts_ready() {
    let mut cluster = Cluster::start(&[]);
    let client = cluster.client.clone();
    ready_node(&cluster, "n1").await;
    cluster
        .create_pod(&bound_pod("p", "n1").toleration("", "Exists", "", "").obj())
        .await;
    support::make_ready(&cluster, "default", "p").await;
    cluster.spawn(run_with(
        client.clone(),
        short(),
        SharedInformers::new(client.clone()),
    ));
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let unreachable = "node.kubernetes.io/unreachable:NoExecute".to_string();

    eventually("the node's pod marked not ready", || async {
        let pod = pods.get("p").await.ok()?;
        (ready_condition(&pod).as_deref() == Some("False")).then_some(())
    })
    .await;
    let node = nodes.get("n1").await.expect("node");
    assert!(taint_keys(&node).contains(&unreachable));
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), "default");
    let (node_event, pod_event) = eventually("NodeNotReady events", || async {
        let list = events.list(&Default::default()).await.ok()?.items;
        let find = |kind: &str| {
            list.iter()
                .find(|e| {
                    e.reason.as_deref() == Some("NodeNotReady")
                        && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some(kind)
                })
                .cloned()
        };
        Some((find("Node")?, find("Pod")?))
    })
    .await;
    assert_eq!(
        (node_event.type_.as_deref(), node_event.note.as_deref()),
        (Some("Normal"), Some("Node n1 status is now: NodeNotReady"))
    );
    assert_eq!(
        (pod_event.type_.as_deref(), pod_event.note.as_deref()),
        (Some("Warning"), Some("Node is not ready"))
    );

    // The kubelet comes back: Lease renewed, Ready posted again.
    let clock = cluster.clock.clone();
    cluster.spawn(renew_lease_forever(client.clone(), clock, "n1"));
    let now = cluster.clock.timestamp().to_string();
    nodes
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [{
                "type": "Ready", "status": "True", "reason": "KubeletReady",
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            }]}})),
        )
        .await
        .expect("node Ready again");
    let node = eventually("the unreachable taints removed", || async {
        let node = nodes.get("n1").await.ok()?;
        let keys = taint_keys(&node);
        keys.iter()
            .all(|k| !k.starts_with("node.kubernetes.io/unreachable"))
            .then_some(node)
    })
    .await;
    assert!(taint_keys(&node).is_empty(), "{:?}", taint_keys(&node));
    let pod = pods.get("p").await.expect("the tolerating pod stays");
    assert!(pod.metadata.deletion_timestamp.is_none());
}

/// The first event with this reason, once there is one.
async fn event_with_reason(
    client: &kube::Client,
    reason: &str,
) -> k8s_openapi::api::events::v1::Event {
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), "default");
    eventually(reason, || async {
        let list = events.list(&Default::default()).await.ok()?.items;
        list.into_iter()
            .find(|e| e.reason.as_deref() == Some(reason))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_that_come_and_go_get_registered_and_removing_events() {
    let mut cluster = Cluster::start(&[]);
    let client = cluster.client.clone();
    ready_node(&cluster, "n1").await;
    let nodes: Api<Node> = Api::all(client.clone());
    let uid = nodes.get("n1").await.expect("node").metadata.uid;
    cluster.spawn(run_with(
        client.clone(),
        short(),
        SharedInformers::new(client.clone()),
    ));
    let registered = event_with_reason(&client, "RegisteredNode").await;
    assert_eq!(
        (registered.type_.as_deref(), registered.note.as_deref()),
        (Some("Normal"), Some("Registered Node n1 in Controller"))
    );
    let regarding = registered.regarding.expect("regarding");
    assert_eq!(
        (
            regarding.kind.as_deref(),
            regarding.name.as_deref(),
            regarding.uid
        ),
        (Some("Node"), Some("n1"), uid.clone())
    );
    nodes
        .delete("n1", &Default::default())
        .await
        .expect("delete node");
    let removing = event_with_reason(&client, "RemovingNode").await;
    assert_eq!(
        removing.note.as_deref(),
        Some("Removing Node n1 from Controller")
    );
    assert_eq!(removing.regarding.and_then(|r| r.uid), uid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovering_node_cancels_its_pods_pending_eviction() {
    let mut cluster = Cluster::start(&[]);
    let client = cluster.client.clone();
    ready_node(&cluster, "n1").await;
    cluster
        .create_pod(
            &bound_pod("p", "n1")
                .toleration_seconds("node.kubernetes.io/unreachable", 300)
                .obj(),
        )
        .await;
    cluster.spawn(run_with(
        client.clone(),
        short(),
        SharedInformers::new(client.clone()),
    ));
    let nodes: Api<Node> = Api::all(client.clone());
    eventually("the unreachable taint", || async {
        let node = nodes.get("n1").await.ok()?;
        taint_keys(&node)
            .contains(&"node.kubernetes.io/unreachable:NoExecute".to_string())
            .then_some(())
    })
    .await;
    let clock = cluster.clock.clone();
    cluster.spawn(renew_lease_forever(client.clone(), clock, "n1"));
    let now = cluster.clock.timestamp().to_string();
    nodes
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [{
                "type": "Ready", "status": "True", "reason": "KubeletReady",
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            }]}})),
        )
        .await
        .expect("node Ready again");
    let cancelled = event_with_reason(&client, "TaintManagerEviction").await;
    assert_eq!(
        cancelled.note.as_deref(),
        Some("Cancelling deletion of Pod default/p")
    );
}
