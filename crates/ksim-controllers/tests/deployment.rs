//! In-process: Deployments roll through ReplicaSets and pods via the API.

mod support;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use ksim_controllers::ControllerName;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{Cluster, eventually, make_ready, pods};

fn deployment(name: &str, replicas: i32, image: &str) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": image}]}
            }
        }
    }))
    .expect("deployment")
}

async fn replica_sets(client: &kube::Client) -> Vec<ReplicaSet> {
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    api.list(&ListParams::default())
        .await
        .expect("list rs")
        .items
}

/// Marks every not-ready pod of `selector` ready, as a kubelet would.
async fn ready_all(cluster: &Cluster, selector: &str) {
    for pod in pods(&cluster.client, "default", selector).await {
        let ready = pod
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        if !ready && pod.metadata.deletion_timestamp.is_none() {
            make_ready(
                cluster,
                "default",
                pod.metadata.name.as_deref().expect("name"),
            )
            .await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_creates_a_hashed_replica_set_with_its_pods_and_completes() {
    let cluster = Cluster::start(&[ControllerName::ReplicaSet, ControllerName::Deployment]);
    let api: Api<Deployment> = Api::namespaced(cluster.client.clone(), "default");
    api.create(&PostParams::default(), &deployment("web", 3, "nginx:1"))
        .await
        .expect("create deployment");
    let rs = eventually("one replica set", || async {
        let list = replica_sets(&cluster.client).await;
        (list.len() == 1).then(|| list[0].clone())
    })
    .await;
    let hash = rs
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("pod-template-hash"))
        .expect("hash label")
        .clone();
    assert_eq!(
        rs.metadata.name.as_deref(),
        Some(format!("web-{hash}").as_str())
    );
    let annotations = rs.metadata.annotations.clone().expect("annotations");
    assert_eq!(
        annotations
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("1")
    );
    assert_eq!(
        rs.spec
            .as_ref()
            .and_then(|s| s.selector.match_labels.as_ref())
            .and_then(|m| m.get("pod-template-hash")),
        Some(&hash)
    );
    eventually("3 pods", || async {
        (pods(&cluster.client, "default", "app=web").await.len() == 3).then_some(())
    })
    .await;
    ready_all(&cluster, "app=web").await;
    let status = eventually("complete rollout", || async {
        let s = api.get("web").await.ok()?.status?;
        (s.available_replicas == Some(3) && s.updated_replicas == Some(3)).then_some(s)
    })
    .await;
    let conditions = status.conditions.expect("conditions");
    let reason = |t: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == t)
            .and_then(|c| c.reason.clone())
    };
    assert_eq!(
        reason("Available").as_deref(),
        Some("MinimumReplicasAvailable")
    );
    eventually("NewReplicaSetAvailable", || async {
        let s = api.get("web").await.ok()?.status?;
        s.conditions?
            .iter()
            .any(|c| c.reason.as_deref() == Some("NewReplicaSetAvailable"))
            .then_some(())
    })
    .await;

    // kubectl scale patches the scale subresource.
    api.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await
    .expect("scale");
    eventually("5 pods", || async {
        (pods(&cluster.client, "default", "app=web").await.len() == 5).then_some(())
    })
    .await;
    assert_eq!(replica_sets(&cluster.client).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_change_rolls_to_a_new_replica_set_within_max_unavailable() {
    let cluster = Cluster::start(&[ControllerName::ReplicaSet, ControllerName::Deployment]);
    let api: Api<Deployment> = Api::namespaced(cluster.client.clone(), "default");
    api.create(&PostParams::default(), &deployment("app", 4, "nginx:1"))
        .await
        .expect("create deployment");
    eventually("4 pods", || async {
        (pods(&cluster.client, "default", "app=app").await.len() == 4).then_some(())
    })
    .await;
    ready_all(&cluster, "app=app").await;
    eventually("available", || async {
        (api.get("app").await.ok()?.status?.available_replicas == Some(4)).then_some(())
    })
    .await;

    api.patch(
        "app",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}})),
    )
    .await
    .expect("new image");
    // Drive the rollout: make new pods ready, and check at every step what
    // upstream's rolling-update check (test/utils checkRollingUpdateStatus)
    // checks: the ReplicaSets' spec.replicas sum to at most desired +
    // maxSurge = 5, at least desired - maxUnavailable = 3 pods are
    // available (by the Deployment's status, and ready pods). Live pods are
    // not bounded by 5: an old ReplicaSet's pod outlives its scale-down
    // until the ReplicaSet controller deletes it, while the new one may
    // already grow (see `surge_is_counted_in_replica_set_spec_replicas_...`).
    eventually("rollout to finish", || async {
        let all = pods(&cluster.client, "default", "app=app").await;
        let ready = all
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        assert!(ready >= 3, "only {ready} ready pods during the rollout");
        let sizes: Vec<i32> = replica_sets(&cluster.client)
            .await
            .iter()
            .map(spec_replicas)
            .collect();
        assert!(
            sizes.iter().sum::<i32>() <= 5,
            "replica sets of {sizes:?} replicas during the rollout"
        );
        ready_all(&cluster, "app=app").await;
        let d = api.get("app").await.ok()?;
        let s = d.status?;
        let available = s.available_replicas.unwrap_or(0);
        assert!(available >= 3, "only {available} available replicas");
        let done = s.observed_generation == d.metadata.generation
            && s.updated_replicas == Some(4)
            && s.replicas == Some(4)
            && s.available_replicas == Some(4);
        done.then_some(())
    })
    .await;
    let list = replica_sets(&cluster.client).await;
    assert_eq!(list.len(), 2);
    let revisions: Vec<(i32, String)> = list
        .iter()
        .map(|rs| {
            (
                rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(-1),
                rs.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("deployment.kubernetes.io/revision"))
                    .cloned()
                    .unwrap_or_default(),
            )
        })
        .collect();
    assert!(revisions.contains(&(0, "1".into())), "{revisions:?}");
    assert!(revisions.contains(&(4, "2".into())), "{revisions:?}");
    let d = api.get("app").await.expect("deployment");
    assert_eq!(
        d.metadata
            .annotations
            .and_then(|a| a.get("deployment.kubernetes.io/revision").cloned())
            .as_deref(),
        Some("2")
    );
}

fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

fn revision(rs: &ReplicaSet) -> Option<&str> {
    rs.metadata
        .annotations
        .as_ref()?
        .get("deployment.kubernetes.io/revision")
        .map(String::as_str)
}

/// The ReplicaSet of `revision`, once it exists with `replicas`.
async fn replica_set_at(client: &kube::Client, revision_: &str, replicas: i32) -> ReplicaSet {
    eventually(
        &format!("revision {revision_} at {replicas} replicas"),
        || async {
            replica_sets(client)
                .await
                .into_iter()
                .find(|rs| revision(rs) == Some(revision_) && spec_replicas(rs) == replicas)
        },
    )
    .await
}

/// Writes a ReplicaSet's status as its controller would.
async fn set_replica_set_status(
    client: &kube::Client,
    rs: &ReplicaSet,
    replicas: i32,
    available: i32,
) {
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let status = json!({"status": {
        "replicas": replicas,
        "readyReplicas": available,
        "availableReplicas": available,
        "observedGeneration": rs.metadata.generation,
    }});
    api.patch_status(
        rs.metadata.name.as_deref().expect("name"),
        &PatchParams::default(),
        &Patch::Merge(status),
    )
    .await
    .expect("replica set status");
}

/// Only the Deployment controller runs; the test writes the ReplicaSets'
/// status in its place, holding the old set's status back as a lagging
/// ReplicaSet controller would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn surge_is_counted_in_replica_set_spec_replicas_and_a_lagging_old_status_holds_the_scale_down()
 {
    let cluster = Cluster::start(&[ControllerName::Deployment]);
    let client = &cluster.client;
    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &deployment("lag", 4, "nginx:1"))
        .await
        .expect("create deployment");
    let old = replica_set_at(client, "1", 4).await;
    set_replica_set_status(client, &old, 4, 4).await;
    eventually("4 available", || async {
        (api.get("lag").await.ok()?.status?.available_replicas == Some(4)).then_some(())
    })
    .await;

    api.patch(
        "lag",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}})),
    )
    .await
    .expect("new image");
    // The new set starts at maxSurge, the old one sheds maxUnavailable, and
    // the new one grows again as soon as the old one's spec.replicas is
    // down: upstream counts spec.replicas, not pods, so the old set's four
    // pods (its status still says 4) and the new set's two exist together
    // until the ReplicaSet controller deletes the old set's extra pod.
    let new = replica_set_at(client, "2", 2).await;
    let old = replica_set_at(client, "1", 3).await;
    assert_eq!(old.status.as_ref().map(|s| s.replicas), Some(4));

    // One new pod available while the old set's status lags its scale-down
    // (4 available of 3): upstream refuses to count that status, so the old
    // set keeps 3 replicas. The Deployment's status (available 4 + 1, as the
    // ReplicaSets report) is written after that sync's scaling.
    set_replica_set_status(client, &new, 2, 1).await;
    eventually("the sync that saw the new pod available", || async {
        let s = api.get("lag").await.ok()?.status?;
        (s.available_replicas == Some(5) && s.updated_replicas == Some(2)).then_some(())
    })
    .await;
    let sizes: Vec<(Option<String>, i32)> = replica_sets(client)
        .await
        .iter()
        .map(|rs| (revision(rs).map(str::to_string), spec_replicas(rs)))
        .collect();
    assert!(
        sizes.contains(&(Some("1".into()), 3)),
        "the old set was scaled on its lagging status: {sizes:?}"
    );

    // Its status catches up (3 available): now 3 + 1 available exceed the
    // 3 required, so one more old pod goes, and the new set takes its place.
    set_replica_set_status(client, &old, 3, 3).await;
    replica_set_at(client, "1", 2).await;
    replica_set_at(client, "2", 3).await;
    let total: i32 = replica_sets(client).await.iter().map(spec_replicas).sum();
    assert_eq!(total, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_removes_every_old_pod_before_creating_new_ones() {
    let cluster = Cluster::start(&[ControllerName::ReplicaSet, ControllerName::Deployment]);
    let api: Api<Deployment> = Api::namespaced(cluster.client.clone(), "default");
    let mut d = deployment("rec", 3, "nginx:1");
    d.spec.as_mut().expect("spec").strategy =
        Some(serde_json::from_value(json!({"type": "Recreate"})).expect("strategy"));
    api.create(&PostParams::default(), &d)
        .await
        .expect("create deployment");
    eventually("3 pods", || async {
        (pods(&cluster.client, "default", "app=rec").await.len() == 3).then_some(())
    })
    .await;
    api.patch(
        "rec",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}})),
    )
    .await
    .expect("new image");
    eventually("3 new pods only", || async {
        let all = pods(&cluster.client, "default", "app=rec").await;
        let hashes: std::collections::BTreeSet<String> = all
            .iter()
            .filter_map(|p| {
                p.metadata
                    .labels
                    .as_ref()?
                    .get("pod-template-hash")
                    .cloned()
            })
            .collect();
        assert!(hashes.len() <= 1, "old and new pods together: {hashes:?}");
        let d = api.get("rec").await.ok()?;
        let s = d.status?;
        let done = s.observed_generation == d.metadata.generation
            && s.updated_replicas == Some(3)
            && s.replicas == Some(3);
        done.then_some(())
    })
    .await;
}
