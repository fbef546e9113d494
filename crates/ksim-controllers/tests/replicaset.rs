//! In-process: the ReplicaSet controller creates, adopts and deletes pods
//! through the API.

mod support;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use ksim_controllers::ControllerName;
use ksim_testutils::builders;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{Cluster, eventually, make_ready, pods};

fn replica_set(name: &str, replicas: i32) -> ReplicaSet {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}
            }
        }
    }))
    .expect("replicaset")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_set_creates_named_owned_pods_and_reports_status() {
    let cluster = Cluster::start(&[ControllerName::ReplicaSet]);
    let api: Api<ReplicaSet> = Api::namespaced(cluster.client.clone(), "default");
    let rs = api
        .create(&PostParams::default(), &replica_set("web", 3))
        .await
        .expect("create rs");
    let created = eventually("3 pods", || async {
        let p = pods(&cluster.client, "default", "app=web").await;
        (p.len() == 3).then_some(p)
    })
    .await;
    for pod in &created {
        let name = pod.metadata.name.clone().expect("name");
        let suffix = name.strip_prefix("web-").expect("named after the rs");
        assert_eq!(suffix.len(), 5, "{name}");
        let owner = &pod.metadata.owner_references.as_ref().expect("owned")[0];
        assert_eq!(owner.uid, rs.metadata.uid.clone().expect("uid"));
        assert_eq!(owner.controller, Some(true));
        assert_eq!(owner.block_owner_deletion, Some(true));
    }
    make_ready(
        &cluster,
        "default",
        created[0].metadata.name.as_deref().expect("name"),
    )
    .await;
    eventually("status", || async {
        let s = api.get("web").await.ok()?.status?;
        (s.replicas == 3
            && s.ready_replicas == Some(1)
            && s.available_replicas == Some(1)
            && s.fully_labeled_replicas == Some(3)
            && s.observed_generation == Some(1))
        .then_some(())
    })
    .await;

    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .expect("scale down");
    let left = eventually("1 pod left", || async {
        let p = pods(&cluster.client, "default", "app=web").await;
        (p.len() == 1).then_some(p)
    })
    .await;
    assert_eq!(
        left[0].metadata.name, created[0].metadata.name,
        "the ready pod stays"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_set_adopts_matching_orphans_and_releases_relabeled_pods() {
    let cluster = Cluster::start(&[ControllerName::ReplicaSet]);
    let pods_api: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
    let orphan = builders::pod("orphan")
        .image("nginx")
        .label("app", "db")
        .obj();
    pods_api
        .create(&PostParams::default(), &orphan)
        .await
        .expect("orphan");
    let api: Api<ReplicaSet> = Api::namespaced(cluster.client.clone(), "default");
    api.create(&PostParams::default(), &replica_set("db", 2))
        .await
        .expect("create rs");
    eventually("orphan adopted and one pod created", || async {
        let p = pods(&cluster.client, "default", "app=db").await;
        let adopted = pods_api
            .get("orphan")
            .await
            .ok()?
            .metadata
            .owner_references
            .is_some();
        (p.len() == 2 && adopted).then_some(())
    })
    .await;
    pods_api
        .patch(
            "orphan",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"app": "other"}}})),
        )
        .await
        .expect("relabel");
    eventually("relabeled pod released and replaced", || async {
        let released = pods_api
            .get("orphan")
            .await
            .ok()?
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty();
        let p = pods(&cluster.client, "default", "app=db").await;
        (released && p.len() == 2).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_down_deletes_unscheduled_then_pending_then_not_ready_pods_first() {
    let cluster = Cluster::start(&[ControllerName::ReplicaSet]);
    let pods_api: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
    for (name, node) in [
        ("unscheduled", None),
        ("pending", Some("n1")),
        ("running", Some("n2")),
        ("ready", Some("n3")),
    ] {
        let mut pod = builders::pod(name).image("nginx").label("app", "order");
        if let Some(node) = node {
            pod = pod.node(node);
        }
        let pod = pod.obj();
        pods_api
            .create(&PostParams::default(), &pod)
            .await
            .expect("create pod");
    }
    pods_api
        .patch_status(
            "running",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running"}})),
        )
        .await
        .expect("running");
    make_ready(&cluster, "default", "ready").await;
    let api: Api<ReplicaSet> = Api::namespaced(cluster.client.clone(), "default");
    api.create(&PostParams::default(), &replica_set("order", 4))
        .await
        .expect("create rs");
    eventually("all four adopted", || async {
        let s = api.get("order").await.ok()?.status?;
        (s.replicas == 4).then_some(())
    })
    .await;
    let live = |want: usize| {
        let pods_api = pods_api.clone();
        async move {
            let names: Vec<String> = pods_api
                .list(&Default::default())
                .await
                .ok()?
                .items
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter_map(|p| p.metadata.name)
                .collect();
            (names.len() == want).then_some(names)
        }
    };
    for (replicas, survivors) in [
        (3, ["pending", "ready", "running"].as_slice()),
        (2, &["ready", "running"]),
        (1, &["ready"]),
    ] {
        api.patch(
            "order",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .expect("scale down");
        let mut names = eventually("scale down", || live(replicas)).await;
        names.sort();
        assert_eq!(names, survivors);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_replica_set_creates_exactly_its_replicas_while_its_pods_change() {
    let cluster = Cluster::start(&[ControllerName::ReplicaSet]);
    let api: Api<ReplicaSet> = Api::namespaced(cluster.client.clone(), "default");
    api.create(&PostParams::default(), &replica_set("many", 300))
        .await
        .expect("create rs");
    // Pod events (readiness changes) arrive while creations are in flight:
    // each triggers a sync, and none may create beyond the replicas.
    let created = eventually("300 pods", || async {
        let p = pods(&cluster.client, "default", "app=many").await;
        for pod in p.iter().take(20) {
            make_ready(
                &cluster,
                "default",
                pod.metadata.name.as_deref().expect("name"),
            )
            .await;
        }
        (p.len() >= 300).then_some(p)
    })
    .await;
    assert_eq!(created.len(), 300);
    eventually("status of 300 replicas", || async {
        let s = api.get("many").await.ok()?.status?;
        (s.replicas == 300).then_some(())
    })
    .await;
    assert_eq!(
        pods(&cluster.client, "default", "app=many").await.len(),
        300,
        "no pod beyond the replicas"
    );
}

/// The requests a client sent: method, and path with the query.
type SentRequests = std::sync::Arc<std::sync::Mutex<Vec<(http::Method, String)>>>;

/// A client of `cluster` whose pod watches are held until `release` says
/// so (a pod cache lagging behind the ReplicaSet watch), and the requests
/// it sent.
fn lagging_pod_watch_client(
    cluster: &support::Cluster,
    release: tokio::sync::watch::Receiver<bool>,
) -> (kube::Client, SentRequests) {
    use tower::ServiceExt;
    let router = cluster.server.router();
    let sent = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = sent.clone();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let router = router.clone();
        let mut release = release.clone();
        let log = log.clone();
        async move {
            let uri = request.uri().clone();
            log.lock()
                .expect("request log")
                .push((request.method().clone(), uri.to_string()));
            let query = uri.query().unwrap_or_default();
            if uri.path() == "/api/v1/pods" && query.contains("watch=true") {
                // A closed sender releases too.
                let _ = release.wait_for(|released| *released).await;
            }
            router.oneshot(request).await
        }
    });
    (kube::Client::new(service, "default"), sent)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_set_synced_before_its_pods_reach_the_cache_creates_none_twice() {
    let mut cluster = support::Cluster::start(&[]);
    let (release, held) = tokio::sync::watch::channel(false);
    let (client, sent) = lagging_pod_watch_client(&cluster, held);
    cluster.spawn(async move {
        ksim_controllers::run_controllers(client, &[ControllerName::ReplicaSet]).await;
    });
    // The controller's pod cache has listed (nothing) and waits on its
    // watch.
    eventually("the pod watch to be held", || async {
        let sent = sent.lock().expect("request log");
        sent.iter()
            .any(|(_, uri)| uri.starts_with("/api/v1/pods?") && uri.contains("watch=true"))
            .then_some(())
    })
    .await;
    // Pods first, then the set that will own them (as a snapshot restored
    // into a running cluster does).
    let pods_api: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
    for name in ["lag-a", "lag-b", "lag-c"] {
        let pod = builders::pod(name).image("nginx").label("app", "lag").obj();
        pods_api
            .create(&PostParams::default(), &pod)
            .await
            .expect("create pod");
    }
    let api: Api<ReplicaSet> = Api::namespaced(cluster.client.clone(), "default");
    api.create(&PostParams::default(), &replica_set("lag", 3))
        .await
        .expect("create rs");
    // The set, synced with an empty cache, asked the API server for its
    // pods instead of creating three.
    eventually("the set to count its pods on the server", || async {
        let sent = sent.lock().expect("request log");
        sent.iter()
            .any(|(method, uri)| {
                method == http::Method::GET
                    && uri.starts_with("/api/v1/namespaces/default/pods?")
                    && uri.contains("labelSelector=app%3Dlag")
            })
            .then_some(())
    })
    .await;
    release.send_replace(true);
    eventually("the three pods adopted", || async {
        let s = api.get("lag").await.ok()?.status?;
        (s.replicas == 3).then_some(())
    })
    .await;
    let names: Vec<String> = pods(&cluster.client, "default", "app=lag")
        .await
        .into_iter()
        .filter_map(|pod| pod.metadata.name)
        .collect();
    assert_eq!(names, ["lag-a", "lag-b", "lag-c"]);
    let creations = sent
        .lock()
        .expect("request log")
        .iter()
        .filter(|(method, uri)| method == http::Method::POST && uri.contains("/pods"))
        .count();
    assert_eq!(creations, 0, "the controller created pods");
}
