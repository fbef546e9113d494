//! In-process: the DaemonSet controller places one pod per eligible node
//! and follows nodes coming and going.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use super::target_node;
use crate::ControllerName;
use crate::statefulset::testing::{Cluster, eventually};

fn node(name: &str, labels: serde_json::Value, taints: serde_json::Value) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints}
    }))
    .expect("node")
}

async fn targets(cluster: &Cluster) -> Vec<String> {
    let mut nodes: Vec<String> = cluster
        .pods("app=agent")
        .await
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(target_node)
        .collect();
    nodes.sort();
    nodes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pod_per_eligible_node_follows_nodes_coming_and_going() {
    let cluster = Cluster::start(&[ControllerName::DaemonSet]);
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    for n in [
        node("node-a", json!({"role": "agent"}), json!([])),
        node(
            "node-b",
            json!({"role": "agent"}),
            json!([
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
            ]),
        ),
        node(
            "node-c",
            json!({"role": "agent"}),
            json!([{"key": "gpu", "effect": "NoSchedule"}]),
        ),
        node("node-d", json!({"role": "other"}), json!([])),
    ] {
        nodes
            .create(&PostParams::default(), &n)
            .await
            .expect("node");
    }
    let sets: Api<DaemonSet> = Api::namespaced(cluster.client.clone(), "default");
    let set: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"nodeSelector": {"role": "agent"}, "containers": [{"name": "c", "image": "agent:1"}]}
            }
        }
    }))
    .expect("daemonset");
    sets.create(&PostParams::default(), &set)
        .await
        .expect("create");
    eventually("a pod on each eligible node", || async {
        (targets(&cluster).await == ["node-a", "node-b"]).then_some(())
    })
    .await;
    let pod: Pod = cluster.pods("app=agent").await.remove(0);
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .expect("tolerations");
    assert!(
        tolerations
            .iter()
            .any(|t| t.key.as_deref() == Some("node.kubernetes.io/unschedulable"))
    );
    assert!(
        pod.metadata
            .labels
            .as_ref()
            .expect("labels")
            .contains_key("controller-revision-hash")
    );
    let status = eventually("status", || async {
        let s = sets.get("agent").await.ok()?.status?;
        (s.desired_number_scheduled == 2 && s.current_number_scheduled == 2).then_some(s)
    })
    .await;
    assert_eq!(status.updated_number_scheduled, Some(2));
    assert_eq!(status.number_ready, 0);

    nodes
        .create(
            &PostParams::default(),
            &node("node-e", json!({"role": "agent"}), json!([])),
        )
        .await
        .expect("new node");
    eventually("the new node gets a pod", || async {
        (targets(&cluster).await == ["node-a", "node-b", "node-e"]).then_some(())
    })
    .await;
    nodes
        .delete("node-a", &DeleteParams::default())
        .await
        .expect("remove node");
    eventually("the removed node's pod goes", || async {
        (targets(&cluster).await == ["node-b", "node-e"]).then_some(())
    })
    .await;
}
