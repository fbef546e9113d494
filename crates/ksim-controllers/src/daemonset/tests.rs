//! In-process: the DaemonSet controller places one pod per eligible node
//! and follows nodes coming and going and labels changing; pods and
//! revisions that stop matching are released.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

use super::target_node;
use crate::ControllerName;
use crate::statefulset::testing::{Cluster, eventually};
use ksim_testutils::builders::{self, NodeBuilder};

/// A node labelled `role`.
fn node(name: &str, role: &str) -> NodeBuilder {
    builders::node(name).label("role", role)
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
        node("node-a", "agent").obj(),
        node("node-b", "agent")
            .taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
            .obj(),
        node("node-c", "agent").taint("gpu", "", "NoSchedule").obj(),
        node("node-d", "other").obj(),
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
        .create(&PostParams::default(), &node("node-e", "agent").obj())
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

fn agent_set() -> DaemonSet {
    serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"nodeSelector": {"role": "agent"}, "containers": [{"name": "c", "image": "agent:1"}]}
            }
        }
    }))
    .expect("daemonset")
}

/// The target nodes of the set's live pods, with repeats.
async fn owned_targets(cluster: &Cluster, uid: &str) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
    let mut nodes: Vec<String> = pods
        .list(&Default::default())
        .await
        .expect("list pods")
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.uid == uid && r.controller == Some(true))
        })
        .filter_map(target_node)
        .collect();
    nodes.sort();
    nodes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_nodes_get_exactly_one_pod_each_and_follow_label_changes() {
    let cluster = Cluster::start(&[ControllerName::DaemonSet]);
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let name = |i: usize| format!("node-{i:02}");
    for i in 0..20 {
        nodes
            .create(&PostParams::default(), &node(&name(i), "agent").obj())
            .await
            .expect("node");
    }
    // Every pod ever created, seen by a watch from before the set exists.
    let created = Arc::new(Mutex::new(HashSet::new()));
    let watch = {
        let created = Arc::clone(&created);
        let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
        tokio::spawn(async move {
            let config = watcher::Config::default().labels("app=agent");
            let mut events = std::pin::pin!(watcher::watcher(pods, config));
            while let Some(Ok(event)) = events.next().await {
                if let watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) = event {
                    let mut created = created.lock().expect("lock");
                    created.insert(pod.metadata.name.unwrap_or_default());
                }
            }
        })
    };
    let sets: Api<DaemonSet> = Api::namespaced(cluster.client.clone(), "default");
    let set = sets
        .create(&PostParams::default(), &agent_set())
        .await
        .expect("create");
    let uid = set.metadata.uid.clone().expect("uid");
    let mut want: Vec<String> = (0..20).map(name).collect();
    eventually("one pod on each of 20 nodes", || async {
        (owned_targets(&cluster, &uid).await == want).then_some(())
    })
    .await;
    let status = eventually("the status counts 20", || async {
        let s = sets.get("agent").await.ok()?.status?;
        (s.desired_number_scheduled == 20 && s.current_number_scheduled == 20).then_some(s)
    })
    .await;
    assert_eq!(status.number_misscheduled, 0);
    eventually("the watch to see every pod", || async {
        (created.lock().expect("lock").len() >= 20).then_some(())
    })
    .await;
    assert_eq!(
        created.lock().expect("lock").len(),
        20,
        "no pod was created twice while the cache lagged"
    );
    watch.abort();

    // Pod changes are planned node by node: a Ready pod is counted, a
    // deleted one replaced.
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
    let first = cluster.pods("app=agent").await.remove(0);
    cluster
        .set_phase(&first.metadata.name.clone().expect("name"), "Running")
        .await;
    eventually("the Ready pod counted", || async {
        let s = sets.get("agent").await.ok()?.status?;
        (s.number_ready == 1 && s.number_available == Some(1)).then_some(())
    })
    .await;
    pods.delete(
        &first.metadata.name.clone().expect("name"),
        &DeleteParams::default(),
    )
    .await
    .expect("delete a pod");
    eventually("the deleted pod replaced", || async {
        let s = sets.get("agent").await.ok()?.status?;
        let replaced = owned_targets(&cluster, &uid).await == want;
        (replaced && s.number_ready == 0 && s.current_number_scheduled == 20).then_some(())
    })
    .await;

    // A node added later gets its pod; a node labelled out loses its pod.
    nodes
        .create(&PostParams::default(), &node("node-20", "agent").obj())
        .await
        .expect("new node");
    want.push("node-20".into());
    eventually("the new node gets its pod", || async {
        (owned_targets(&cluster, &uid).await == want).then_some(())
    })
    .await;
    nodes
        .patch(
            "node-05",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"role": "other"}}})),
        )
        .await
        .expect("relabel");
    want.retain(|n| n != "node-05");
    eventually("the node labelled out loses its pod", || async {
        (owned_targets(&cluster, &uid).await == want).then_some(())
    })
    .await;
    eventually("the status counts 20 again", || async {
        let s = sets.get("agent").await.ok()?.status?;
        (s.desired_number_scheduled == 20 && s.current_number_scheduled == 20).then_some(())
    })
    .await;
    // Exactly one each still: nothing created twice while the cache lagged.
    assert_eq!(owned_targets(&cluster, &uid).await, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_and_revisions_that_stop_matching_are_released() {
    let cluster = Cluster::start(&[ControllerName::DaemonSet]);
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    nodes
        .create(&PostParams::default(), &node("node-a", "agent").obj())
        .await
        .expect("node");
    let sets: Api<DaemonSet> = Api::namespaced(cluster.client.clone(), "default");
    let set = sets
        .create(&PostParams::default(), &agent_set())
        .await
        .expect("create");
    let uid = set.metadata.uid.clone().expect("uid");
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
    let first = eventually("a pod", || async {
        cluster.pods("app=agent").await.into_iter().next()
    })
    .await;
    let first_name = first.metadata.name.clone().expect("name");
    pods.patch(
        &first_name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "debug"}}})),
    )
    .await
    .expect("relabel pod");
    eventually("the relabelled pod is released", || async {
        let pod = pods.get(&first_name).await.ok()?;
        pod.metadata
            .owner_references
            .as_ref()
            .is_none_or(|r| r.iter().all(|r| r.uid != uid))
            .then_some(())
    })
    .await;
    eventually("a replacement pod on the node", || async {
        (owned_targets(&cluster, &uid).await == ["node-a"]).then_some(())
    })
    .await;

    let revisions: Api<ControllerRevision> = Api::namespaced(cluster.client.clone(), "default");
    let revision = eventually("a revision", || async {
        revisions
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .next()
    })
    .await;
    let revision_name = revision.metadata.name.clone().expect("name");
    revisions
        .patch(
            &revision_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"app": "debug"}}})),
        )
        .await
        .expect("relabel revision");
    eventually("the relabelled revision is released", || async {
        let revision = revisions.get(&revision_name).await.ok()?;
        revision
            .metadata
            .owner_references
            .as_ref()
            .is_none_or(|r| r.iter().all(|r| r.uid != uid))
            .then_some(())
    })
    .await;
}
