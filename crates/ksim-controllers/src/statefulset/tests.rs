//! In-process: the StatefulSet controller through the API (pods made
//! Running and Ready by the test, as the kubelet simulator would): ordered
//! and parallel pods, rolling updates, claims from volumeClaimTemplates and
//! their retention policy (with the garbage collector), adoption and
//! release, and the revision history limit.

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
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
    // web-1 waits for web-2 to be gone. The status counts live pods from
    // the controller's cache before it acts: 2 replicas means it has synced
    // with web-2 terminating, and any deletion that sync made is done.
    eventually("a sync that sees web-2 terminating", || async {
        let s = api.get("web").await.ok()?.status?;
        (s.replicas == 2).then_some(())
    })
    .await;
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

fn claimed_set(replicas: i32, policy: serde_json::Value) -> StatefulSet {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "serviceName": "web",
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": "web"}},
            "persistentVolumeClaimRetentionPolicy": policy,
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1",
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "data", "labels": {"tier": "db"}},
                "spec": {"accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "1Gi"}}}
            }]
        }
    }))
    .expect("statefulset")
}

async fn claim_names(cluster: &Cluster) -> Vec<String> {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(cluster.client.clone(), "default");
    let mut names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .expect("claims")
        .items
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .map(|c| c.name_any())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_templates_become_claims_before_pods_and_the_retention_policy_deletes_them() {
    let cluster = Cluster::start(&[
        ControllerName::StatefulSet,
        ControllerName::GarbageCollector,
    ]);
    let api: Api<StatefulSet> = Api::namespaced(cluster.client.clone(), "default");
    let set = api
        .create(
            &PostParams::default(),
            &claimed_set(3, json!({"whenDeleted": "Delete", "whenScaled": "Delete"})),
        )
        .await
        .expect("create");
    let set_uid = set.metadata.uid.clone().expect("uid");
    eventually("three pods", || async {
        (cluster.pods("app=web").await.len() == 3).then_some(())
    })
    .await;
    assert_eq!(
        claim_names(&cluster).await,
        ["data-web-0", "data-web-1", "data-web-2"]
    );
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(cluster.client.clone(), "default");
    let claim = eventually("the set owns the claim", || async {
        let claim = claims.get("data-web-1").await.ok()?;
        let refs = claim.metadata.owner_references.clone()?;
        (refs.len() == 1 && refs[0].uid == set_uid && refs[0].controller == Some(true))
            .then_some(claim)
    })
    .await;
    let labels = claim.metadata.labels.clone().expect("labels");
    assert_eq!(
        (labels["app"].as_str(), labels["tier"].as_str()),
        ("web", "db")
    );
    let pods = cluster.pods("app=web").await;
    let volume = pods[1]
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .and_then(|v| v.iter().find(|v| v.name == "data"))
        .and_then(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.clone());
    assert_eq!(volume.as_deref(), Some("data-web-1"));
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(cluster.client.clone(), "default");
    eventually("the claim event", || async {
        let listed = events.list(&ListParams::default()).await.ok()?.items;
        listed
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("SuccessfulCreate")
                    && e.note.as_deref()
                        == Some("create Claim data-web-0 Pod web-0 in StatefulSet web success")
            })
            .then_some(())
    })
    .await;

    // whenScaled: Delete: the claim of the removed ordinal goes with its pod.
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 2}})),
    )
    .await
    .expect("scale down");
    eventually("data-web-2 is deleted", || async {
        (claim_names(&cluster).await == ["data-web-0", "data-web-1"]).then_some(())
    })
    .await;

    // whenDeleted: Delete: the rest go with the set.
    api.delete("web", &Default::default())
        .await
        .expect("delete");
    eventually("every claim is deleted", || async {
        claim_names(&cluster).await.is_empty().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retained_claims_outlive_scale_down_and_are_used_again() {
    let cluster = Cluster::start(&[
        ControllerName::StatefulSet,
        ControllerName::GarbageCollector,
    ]);
    let api: Api<StatefulSet> = Api::namespaced(cluster.client.clone(), "default");
    api.create(&PostParams::default(), &claimed_set(2, json!(null)))
        .await
        .expect("create");
    eventually("two claims", || async {
        (claim_names(&cluster).await.len() == 2).then_some(())
    })
    .await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(cluster.client.clone(), "default");
    let claim = claims.get("data-web-1").await.expect("claim");
    assert_eq!(claim.metadata.owner_references, None, "Retain: no owner");
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .expect("scale down");
    eventually("one pod", || async {
        (cluster.pods("app=web").await.len() == 1).then_some(())
    })
    .await;
    assert_eq!(claim_names(&cluster).await, ["data-web-0", "data-web-1"]);
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 2}})),
    )
    .await
    .expect("scale up");
    eventually("two pods", || async {
        (cluster.pods("app=web").await.len() == 2).then_some(())
    })
    .await;
    let again = claims.get("data-web-1").await.expect("claim");
    assert_eq!(again.metadata.uid, claim.metadata.uid, "the same claim");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_are_adopted_and_pods_that_stop_matching_are_released() {
    let cluster = Cluster::start(&[ControllerName::StatefulSet]);
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
    let orphan = |name: &str| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}
        }))
        .expect("pod")
    };
    for name in ["web-0", "stray"] {
        pods.create(&PostParams::default(), &orphan(name))
            .await
            .expect("orphan");
    }
    let revisions: Api<ControllerRevision> = Api::namespaced(cluster.client.clone(), "default");
    let old_revision: ControllerRevision = serde_json::from_value(json!({
        "metadata": {"name": "web-old", "labels": {"app": "web"}},
        "revision": 7,
        "data": {"spec": {"template": {"$patch": "replace"}}}
    }))
    .expect("revision");
    revisions
        .create(&PostParams::default(), &old_revision)
        .await
        .expect("orphan revision");

    let api: Api<StatefulSet> = Api::namespaced(cluster.client.clone(), "default");
    let mut set = stateful_set("Parallel");
    if let Some(spec) = set.spec.as_mut() {
        spec.replicas = Some(2);
    }
    let set = api
        .create(&PostParams::default(), &set)
        .await
        .expect("create");
    let uid = set.metadata.uid.clone().expect("uid");
    let controlled_by_set = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.owner_references
            .iter()
            .flatten()
            .any(|r| r.uid == uid && r.controller == Some(true) && r.kind == "StatefulSet")
    };
    eventually("web-0 is adopted and web-1 created", || async {
        let web0 = pods.get("web-0").await.ok()?;
        let web1 = pods.get("web-1").await.ok()?;
        (controlled_by_set(&web0.metadata) && controlled_by_set(&web1.metadata)).then_some(())
    })
    .await;
    eventually("the orphan revision is adopted", || async {
        let revision = revisions.get("web-old").await.ok()?;
        controlled_by_set(&revision.metadata).then_some(())
    })
    .await;
    let stray = pods.get("stray").await.expect("stray");
    assert_eq!(
        stray.metadata.owner_references, None,
        "not a member by name: left alone"
    );

    // Relabelled out of the selector: released, and an ordinal is missing.
    pods.patch(
        "web-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "elsewhere"}}})),
    )
    .await
    .expect("relabel");
    eventually("web-1 is released", || async {
        let web1 = pods.get("web-1").await.ok()?;
        web1.metadata
            .owner_references
            .as_ref()
            .is_none_or(Vec::is_empty)
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisions_beyond_the_history_limit_are_deleted_oldest_first() {
    let cluster = Cluster::start(&[ControllerName::StatefulSet]);
    let api: Api<StatefulSet> = Api::namespaced(cluster.client.clone(), "default");
    let mut set = stateful_set("Parallel");
    if let Some(spec) = set.spec.as_mut() {
        spec.replicas = Some(0);
        spec.revision_history_limit = Some(1);
    }
    api.create(&PostParams::default(), &set)
        .await
        .expect("create");
    let revisions: Api<ControllerRevision> = Api::namespaced(cluster.client.clone(), "default");
    let numbers = || async {
        let mut numbers: Vec<i64> = revisions
            .list(&ListParams::default())
            .await
            .expect("revisions")
            .items
            .iter()
            .map(|r| r.revision)
            .collect();
        numbers.sort_unstable();
        numbers
    };
    for image in 2..=4 {
        let last = i64::from(image) - 1;
        eventually("the previous revision", || async {
            numbers()
                .await
                .last()
                .is_some_and(|n| *n == last)
                .then_some(())
        })
        .await;
        api.patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "c", "image": format!("nginx:{image}")}
            ]}}}})),
        )
        .await
        .expect("new image");
    }
    eventually("the update revision and one old one are kept", || async {
        (numbers().await == [3, 4]).then_some(())
    })
    .await;
}
