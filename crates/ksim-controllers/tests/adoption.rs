//! In-process: the DaemonSet and Job controllers adopt matching orphan pods
//! and release pods that stop matching (upstream's ControllerRefManager),
//! and the DaemonSet keeps its ControllerRevisions within
//! `revisionHistoryLimit`, renumbering a revision rolled back to.

mod support;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ksim_controllers::ControllerName;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{Cluster, eventually, pods};

fn orphan(name: &str, labels: serde_json::Value, node: Option<&str>) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node, "restartPolicy": "Never",
                 "containers": [{"name": "c", "image": "busybox"}]}
    }))
    .expect("pod")
}

fn controlled_by(meta: &ObjectMeta, kind: &str, uid: &str) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|r| r.kind == kind && r.uid == uid && r.controller == Some(true))
}

fn released(meta: &ObjectMeta) -> bool {
    meta.owner_references.as_ref().is_none_or(Vec::is_empty)
}

async fn relabel(client: &kube::Client, name: &str, labels: serde_json::Value) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": labels}})),
    )
    .await
    .expect("relabel");
}

fn daemon_set(image: &str, strategy: &str, history: i32) -> DaemonSet {
    serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "updateStrategy": {"type": strategy},
            "revisionHistoryLimit": history,
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "c", "image": image}]}
            }
        }
    }))
    .expect("daemonset")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_set_adopts_an_orphan_on_its_node_and_releases_it_when_relabelled() {
    let cluster = Cluster::start(&[ControllerName::DaemonSet]);
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "node-a"}})).expect("node");
    Api::<Node>::all(cluster.client.clone())
        .create(&PostParams::default(), &node)
        .await
        .expect("node");
    let pods_api: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
    pods_api
        .create(
            &PostParams::default(),
            &orphan("agent-old", json!({"app": "agent"}), Some("node-a")),
        )
        .await
        .expect("orphan");
    let sets: Api<DaemonSet> = Api::namespaced(cluster.client.clone(), "default");
    // OnDelete: the adopted pod, though of no revision, is kept.
    let set = sets
        .create(
            &PostParams::default(),
            &daemon_set("agent:1", "OnDelete", 10),
        )
        .await
        .expect("create");
    let uid = set.metadata.uid.clone().expect("uid");
    eventually("the orphan is adopted", || async {
        let pod = pods_api.get("agent-old").await.ok()?;
        controlled_by(&pod.metadata, "DaemonSet", &uid).then_some(())
    })
    .await;
    let status = eventually("the status counts it", || async {
        let s = sets.get("agent").await.ok()?.status?;
        (s.current_number_scheduled == 1).then_some(s)
    })
    .await;
    assert_eq!(status.desired_number_scheduled, 1);
    assert_eq!(
        pods(&cluster.client, "default", "app=agent").await.len(),
        1,
        "no second pod for the node"
    );
    let revisions: Api<ControllerRevision> = Api::namespaced(cluster.client.clone(), "default");
    let listed = revisions
        .list(&ListParams::default())
        .await
        .expect("revisions")
        .items;
    assert_eq!(listed.len(), 1, "the template's revision");
    assert!(controlled_by(&listed[0].metadata, "DaemonSet", &uid));
    assert_eq!(listed[0].revision, 1);

    relabel(&cluster.client, "agent-old", json!({"app": "retired"})).await;
    eventually("the relabelled pod is released", || async {
        let pod = pods_api.get("agent-old").await.ok()?;
        released(&pod.metadata).then_some(())
    })
    .await;
    eventually("a new daemon pod replaces it", || async {
        let pods = pods(&cluster.client, "default", "app=agent").await;
        (pods.len() == 1 && controlled_by(&pods[0].metadata, "DaemonSet", &uid)).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_set_revisions_beyond_the_limit_are_deleted_and_a_rollback_renumbers() {
    let cluster = Cluster::start(&[ControllerName::DaemonSet]);
    let sets: Api<DaemonSet> = Api::namespaced(cluster.client.clone(), "default");
    sets.create(
        &PostParams::default(),
        &daemon_set("agent:1", "RollingUpdate", 1),
    )
    .await
    .expect("create");
    let revisions: Api<ControllerRevision> = Api::namespaced(cluster.client.clone(), "default");
    let numbered = || async {
        let mut numbered: Vec<(i64, String)> = revisions
            .list(&ListParams::default())
            .await
            .expect("revisions")
            .items
            .into_iter()
            .map(|r| (r.revision, r.metadata.name.unwrap_or_default()))
            .collect();
        numbered.sort();
        numbered
    };
    let set_image = |image: String| {
        let sets = sets.clone();
        async move {
            sets.patch(
                "agent",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [
                    {"name": "c", "image": image}
                ]}}}})),
            )
            .await
            .expect("new image");
        }
    };
    let mut names = Vec::new();
    for image in 1..=4 {
        if image > 1 {
            set_image(format!("agent:{image}")).await;
        }
        let name = eventually("the new revision", || async {
            let numbered = numbered().await;
            numbered
                .last()
                .filter(|(n, _)| *n == image)
                .map(|(_, name)| name.clone())
        })
        .await;
        names.push(name);
    }
    eventually("one old revision is kept", || async {
        let numbers: Vec<i64> = numbered().await.iter().map(|(n, _)| *n).collect();
        (numbers == [3, 4]).then_some(())
    })
    .await;
    // Back to agent:3: its revision becomes the newest, agent:4's is old.
    set_image("agent:3".into()).await;
    eventually("the rolled-back revision is renumbered", || async {
        let numbered = numbered().await;
        (numbered == [(4, names[3].clone()), (5, names[2].clone())]).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_adopts_a_matching_orphan_instead_of_creating_a_pod() {
    let cluster = Cluster::start(&[ControllerName::Job]);
    let pods_api: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
    pods_api
        .create(
            &PostParams::default(),
            &orphan("worker", json!({"app": "batch"}), None),
        )
        .await
        .expect("orphan");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "batch"},
        "spec": {
            "manualSelector": true,
            "selector": {"matchLabels": {"app": "batch"}},
            "completions": 1, "parallelism": 1,
            "template": {
                "metadata": {"labels": {"app": "batch"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
            }
        }
    }))
    .expect("job");
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), "default");
    let job = jobs
        .create(&PostParams::default(), &job)
        .await
        .expect("create");
    let uid = job.metadata.uid.clone().expect("uid");
    eventually("the orphan is adopted", || async {
        let pod = pods_api.get("worker").await.ok()?;
        controlled_by(&pod.metadata, "Job", &uid).then_some(())
    })
    .await;
    let status = eventually("the status counts it", || async {
        let s = jobs.get("batch").await.ok()?.status?;
        (s.active == Some(1)).then_some(s)
    })
    .await;
    assert_eq!(status.active, Some(1));
    assert_eq!(
        pods(&cluster.client, "default", "app=batch").await.len(),
        1,
        "the adopted pod counts as the active one"
    );

    relabel(&cluster.client, "worker", json!({"app": "elsewhere"})).await;
    eventually("the relabelled pod is released and replaced", || async {
        let pod = pods_api.get("worker").await.ok()?;
        let replacements = pods(&cluster.client, "default", "app=batch").await;
        (released(&pod.metadata)
            && replacements.len() == 1
            && controlled_by(&replacements[0].metadata, "Job", &uid))
        .then_some(())
    })
    .await;
}
