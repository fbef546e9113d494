//! In-process: the StatefulSet controller through the API (pods made
//! Running and Ready by the test, as the kubelet simulator would).

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::testing::{Cluster, eventually, names};
use crate::ControllerName;

fn stateful_set(policy: &str) -> StatefulSet {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "serviceName": "web",
            "podManagementPolicy": policy,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}
            }
        }
    }))
    .expect("statefulset")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_ready_creates_in_order_rolls_back_to_front_and_scales_down_in_reverse() {
    let cluster = Cluster::start(&[ControllerName::StatefulSet]);
    let api: Api<StatefulSet> = Api::namespaced(cluster.client.clone(), "default");
    api.create(&PostParams::default(), &stateful_set("OrderedReady"))
        .await
        .expect("create");
    for expected in [
        vec!["web-0"],
        vec!["web-0", "web-1"],
        vec!["web-0", "web-1", "web-2"],
    ] {
        let pods = eventually("the next ordinal", || async {
            let pods = cluster.pods("app=web").await;
            (pods.len() == expected.len()).then_some(pods)
        })
        .await;
        assert_eq!(names(&pods), expected, "one pod at a time, in order");
        let newest = expected.last().expect("a pod");
        let pod = &pods[expected.len() - 1];
        let labels = pod.metadata.labels.clone().expect("labels");
        assert_eq!(labels["statefulset.kubernetes.io/pod-name"], *newest);
        assert!(labels["controller-revision-hash"].starts_with("web-"));
        assert_eq!(
            pod.spec.as_ref().and_then(|s| s.subdomain.as_deref()),
            Some("web")
        );
        cluster.set_phase(newest, "Running").await;
    }
    let status = eventually("all ready", || async {
        let s = api.get("web").await.ok()?.status?;
        (s.ready_replicas == Some(3) && s.updated_replicas == Some(3)).then_some(s)
    })
    .await;
    assert_eq!(status.current_revision, status.update_revision);
    assert_eq!(status.observed_generation, Some(1));
    let first_revision = status.update_revision.clone().expect("revision");

    // A new image: web-2 goes first, then web-1, then web-0.
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}})),
    )
    .await
    .expect("update image");
    let mut order = Vec::new();
    for _ in 0..3 {
        let updated = eventually("the next updated pod", || async {
            let pods = cluster.pods("app=web").await;
            let status = api.get("web").await.ok()?.status?;
            let update = status.update_revision?;
            if update == first_revision {
                return None;
            }
            pods.into_iter().find(|p| {
                p.labels().get("controller-revision-hash") == Some(&update)
                    && !order.contains(p.metadata.name.as_ref().expect("name"))
            })
        })
        .await;
        let name = updated.metadata.name.clone().expect("name");
        cluster.set_phase(&name, "Running").await;
        order.push(name);
    }
    assert_eq!(order, ["web-2", "web-1", "web-0"]);
    eventually("the rollout completes", || async {
        let s = api.get("web").await.ok()?.status?;
        (s.current_revision == s.update_revision
            && s.updated_replicas == Some(3)
            && s.ready_replicas == Some(3))
        .then_some(())
    })
    .await;
    let revisions: Api<ControllerRevision> = Api::namespaced(cluster.client.clone(), "default");
    let listed = revisions
        .list(&ListParams::default())
        .await
        .expect("revisions")
        .items;
    let mut numbers: Vec<i64> = listed.iter().map(|r| r.revision).collect();
    numbers.sort_unstable();
    assert_eq!(numbers, [1, 2]);

    // A finalizer keeps deleted pods Terminating, so the order shows.
    let pods_api: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
    let hold = |value: serde_json::Value| Patch::Merge(json!({"metadata": {"finalizers": value}}));
    for name in ["web-1", "web-2"] {
        pods_api
            .patch(
                name,
                &PatchParams::default(),
                &hold(json!(["example.com/hold"])),
            )
            .await
            .expect("hold");
    }
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .expect("scale down");
    let terminating = || async {
        let pods = cluster.pods("app=web").await;
        pods.iter()
            .filter(|p| p.metadata.deletion_timestamp.is_some())
            .map(|p| p.name_any())
            .collect::<Vec<_>>()
    };
    eventually("web-2 goes first", || async {
        (terminating().await == ["web-2"]).then_some(())
    })
    .await;
    // web-1 waits for web-2 to be gone.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(terminating().await, ["web-2"]);
    pods_api
        .patch("web-2", &PatchParams::default(), &hold(json!(null)))
        .await
        .expect("release web-2");
    eventually("then web-1", || async {
        (terminating().await == ["web-1"]).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_creates_every_pod_without_waiting() {
    let cluster = Cluster::start(&[ControllerName::StatefulSet]);
    let api: Api<StatefulSet> = Api::namespaced(cluster.client.clone(), "default");
    api.create(&PostParams::default(), &stateful_set("Parallel"))
        .await
        .expect("create");
    let pods = eventually("three pods", || async {
        let pods = cluster.pods("app=web").await;
        (pods.len() == 3).then_some(pods)
    })
    .await;
    assert_eq!(names(&pods), ["web-0", "web-1", "web-2"]);
    let status = eventually("status", || async {
        let s = api.get("web").await.ok()?.status?;
        (s.replicas == 3).then_some(s)
    })
    .await;
    assert_eq!(status.ready_replicas, None, "nothing is ready yet");
}
