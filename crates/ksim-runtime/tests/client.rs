//! kube-rs against ksim: CRUD, watcher and reflector through the
//! in-process client and over HTTP, as every ksim component uses them.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use ksim_testutils::builders;
use ksim_testutils::in_process::{InProcessCluster, eventually};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;

fn pod(name: &str, app: &str) -> Pod {
    builders::pod(name).image("nginx").label("app", app).obj()
}

async fn crud_and_conflicts(client: kube::Client) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let created = pods
        .create(&PostParams::default(), &pod("a", "web"))
        .await
        .expect("create");
    let uid = created.metadata.uid.clone().expect("uid set");
    assert_eq!(
        created.status.clone().and_then(|s| s.phase).as_deref(),
        Some("Pending")
    );
    let error = pods
        .create(&PostParams::default(), &pod("a", "web"))
        .await
        .expect_err("duplicate");
    assert!(
        matches!(error, kube::Error::Api(ref s) if s.code == 409 && s.reason == "AlreadyExists")
    );

    let mut stale = created.clone();
    let patched = pods
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"tier": "front"}}})),
        )
        .await
        .expect("merge patch");
    assert_eq!(patched.metadata.uid.as_deref(), Some(uid.as_str()));
    stale.metadata.labels = None;
    let conflict = pods
        .replace("a", &PostParams::default(), &stale)
        .await
        .expect_err("stale update");
    assert!(matches!(conflict, kube::Error::Api(ref s) if s.code == 409 && s.reason == "Conflict"));

    let listed = pods
        .list(&ListParams::default().labels("tier=front"))
        .await
        .expect("list");
    assert_eq!(listed.items.len(), 1);
    pods.delete("a", &DeleteParams::default())
        .await
        .expect("delete");
    let missing = pods.get("a").await.expect_err("deleted");
    assert!(matches!(missing, kube::Error::Api(ref s) if s.code == 404));
}

async fn reflector_follows_changes(client: kube::Client) {
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector(
        writer,
        watcher(config_maps.clone(), watcher::Config::default()),
    )
    .applied_objects()
    .boxed();
    let task = tokio::spawn(async move {
        let mut stream = stream;
        while let Some(item) = stream.next().await {
            item.expect("watch event");
        }
    });
    reader.wait_until_ready().await.expect("initial list");
    for i in 0..5 {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": format!("cm-{i}")}, "data": {"i": i.to_string()}
        }))
        .expect("valid");
        config_maps
            .create(&PostParams::default(), &cm)
            .await
            .expect("create configmap");
    }
    config_maps
        .delete("cm-0", &DeleteParams::default())
        .await
        .expect("delete configmap");
    let settled = eventually("the reflector sees every create and the delete", || async {
        let names: Vec<String> = reader
            .state()
            .iter()
            .filter_map(|cm| cm.metadata.name.clone())
            .collect();
        (names.len() == 4 && !names.contains(&"cm-0".to_string())).then_some(names)
    })
    .await;
    assert!(settled.contains(&"cm-4".to_string()));
    task.abort();
}

async fn watcher_uses_streaming_lists(client: kube::Client) {
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(&PostParams::default(), &pod("existing", "x"))
        .await
        .expect("create");
    let config = watcher::Config::default().streaming_lists();
    let mut stream = watcher(pods.clone(), config).boxed();
    let mut initial = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(60), stream.next())
            .await
            .expect("event in time")
            .expect("stream open")
            .expect("no error");
        match event {
            watcher::Event::InitApply(pod) => initial.push(pod.metadata.name.unwrap_or_default()),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(initial, ["existing"]);
    pods.create(&PostParams::default(), &pod("later", "x"))
        .await
        .expect("create");
    let applied = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            if let Some(Ok(watcher::Event::Apply(pod))) = stream.next().await {
                break pod.metadata.name.unwrap_or_default();
            }
        }
    })
    .await
    .expect("apply event");
    assert_eq!(applied, "later");
}

#[tokio::test]
async fn in_process_client_crud_and_conflicts() {
    let cluster = InProcessCluster::new();
    crud_and_conflicts(cluster.client.clone()).await;
}

#[tokio::test]
async fn http_client_crud_and_conflicts() {
    let mut cluster = InProcessCluster::new();
    crud_and_conflicts(cluster.http_client().await).await;
}

#[tokio::test]
async fn in_process_reflector_follows_changes() {
    let cluster = InProcessCluster::new();
    reflector_follows_changes(cluster.client.clone()).await;
}

#[tokio::test]
async fn http_reflector_follows_changes() {
    let mut cluster = InProcessCluster::new();
    reflector_follows_changes(cluster.http_client().await).await;
}

#[tokio::test]
async fn in_process_watcher_with_streaming_lists() {
    let cluster = InProcessCluster::new();
    watcher_uses_streaming_lists(cluster.client.clone()).await;
}

#[tokio::test]
async fn http_watcher_with_streaming_lists() {
    let mut cluster = InProcessCluster::new();
    watcher_uses_streaming_lists(cluster.http_client().await).await;
}

/// A client that lists in pages and then watches from the list's
/// resourceVersion (kube-rs's watcher does) must see a change made to an
/// already-read page while it paged: every page carries the first page's
/// revision, as kube-apiserver's snapshot lists do.
#[tokio::test]
async fn paged_list_then_watch_sees_changes_made_while_paging() {
    let cluster = InProcessCluster::new();
    let client = cluster.client.clone();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    for name in ["a", "b", "c", "d"] {
        pods.create(&PostParams::default(), &pod(name, "web"))
            .await
            .expect("create");
    }
    let first = pods
        .list(&ListParams::default().limit(2))
        .await
        .expect("first page");
    let token = first.metadata.continue_.clone().expect("more pages");
    // Changed after its page was read, before the last page is.
    pods.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"changed": "yes"}}})),
    )
    .await
    .expect("patch a");
    let last = pods
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .expect("last page");
    let revision = last.metadata.resource_version.clone().expect("revision");
    assert_eq!(Some(revision.clone()), first.metadata.resource_version);

    let mut events = pods
        .watch(&kube::api::WatchParams::default(), &revision)
        .await
        .expect("watch")
        .boxed();
    let event = tokio::time::timeout(Duration::from_secs(30), events.next())
        .await
        .expect("an event for the change")
        .expect("stream open")
        .expect("event");
    match event {
        kube::api::WatchEvent::Modified(pod) => {
            assert_eq!(pod.metadata.name.as_deref(), Some("a"));
        }
        other => panic!("expected a's modification, got {other:?}"),
    }
}

/// The metadata-only reads (get, list, watch) serve each object's metadata
/// exactly as the full read does, managedFields included.
async fn metadata_reads_match_the_full_objects(client: kube::Client) {
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let metadata_only: Api<kube::core::PartialObjectMeta<ConfigMap>> =
        Api::namespaced(client, "default");
    let config_map: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "m", "labels": {"app": "web"}},
        "data": {"a": "b"}
    }))
    .expect("config map");
    config_maps
        .create(&PostParams::default(), &config_map)
        .await
        .expect("create");
    let params = PatchParams {
        field_manager: Some("patcher".into()),
        ..PatchParams::default()
    };
    let full = config_maps
        .patch("m", &params, &Patch::Merge(json!({"data": {"c": "d"}})))
        .await
        .expect("patch");
    let managers: Vec<String> = full
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|entry| entry.manager.clone())
        .collect();
    assert_eq!(managers.len(), 2, "{managers:?}");

    let got = config_maps.get_metadata("m").await.expect("get metadata");
    assert_eq!(got.metadata, full.metadata);
    let listed = config_maps
        .list_metadata(&ListParams::default())
        .await
        .expect("list metadata");
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].metadata, full.metadata);
    assert!(listed.metadata.resource_version.is_some());

    let mut watch =
        std::pin::pin!(watcher(metadata_only, watcher::Config::default()).applied_objects());
    let seen = tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .expect("an event in time")
        .expect("stream open")
        .expect("no watch error");
    assert_eq!(seen.metadata, full.metadata);
    // A change arrives through the watch itself, in the same form.
    let changed = config_maps
        .patch(
            "m",
            &params,
            &Patch::Merge(json!({"metadata": {"labels": {"v": "2"}}})),
        )
        .await
        .expect("patch labels");
    let seen = tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .expect("an event in time")
        .expect("stream open")
        .expect("no watch error");
    assert_eq!(seen.metadata, changed.metadata);
}

#[tokio::test]
async fn in_process_metadata_reads_match_the_full_objects() {
    let cluster = InProcessCluster::new();
    metadata_reads_match_the_full_objects(cluster.client.clone()).await;
}

#[tokio::test]
async fn http_metadata_reads_match_the_full_objects() {
    let mut cluster = InProcessCluster::new();
    metadata_reads_match_the_full_objects(cluster.http_client().await).await;
}
