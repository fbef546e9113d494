//! `save::write` against an in-process ksim API server: through ksim's
//! snapshot path (`/ksim/v1alpha1/snapshot/...`) and through plain paged
//! lists (asked for, or because the cluster answers 404 there as a real
//! kube-apiserver does) the file is byte for byte the same, and the same as
//! collecting the objects then writing them; it restores with pods on their
//! nodes.

use ksim_snapshot::Target;
use ksim_snapshot::save::{SaveOptions, Written};
use ksim_snapshot::{Style, parse_documents};
use serde_json::{Value, json};

/// The instant kwok's relative times would resolve against when a saved
/// file is read back (these files have none, so any instant does).
const PARSED_AT: chrono::DateTime<chrono::Utc> = chrono::DateTime::UNIX_EPOCH;

fn target_of(router: axum::Router) -> Target {
    Target::new(kube::Client::new(router, "default"))
}

/// A cluster with nodes, a namespace, pods Running on the nodes (status set
/// through the status subresource), a Deployment, a ConfigMap with awkward
/// text and a custom resource.
async fn source() -> ksim_apiserver::ApiServer {
    let server = ksim_apiserver::ApiServer::new();
    let target = target_of(server.router());
    let resources = target.resources().await.expect("discovery");
    let find = |v: &str, k: &str| resources.find(v, k).cloned().expect("served");
    let (nodes, namespaces, pods, configmaps, deployments, crds) = (
        find("v1", "Node"),
        find("v1", "Namespace"),
        find("v1", "Pod"),
        find("v1", "ConfigMap"),
        find("apps/v1", "Deployment"),
        find("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    );
    for i in 0..3 {
        let node = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("node-{i}"), "labels": {"zone": format!("z{i}")}},
            "status": {"capacity": {"cpu": "4", "pods": "110"}, "allocatable": {"cpu": "4", "pods": "110"}}});
        target.create(&nodes, &node).await.expect("node");
    }
    target
        .create(
            &namespaces,
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}),
        )
        .await
        .expect("namespace");
    for i in 0..7 {
        let name = format!("pod-{i}");
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "a", "labels": {"app": if i % 2 == 0 { "even" } else { "odd" }}},
            "spec": {"nodeName": format!("node-{}", i % 3),
                "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}]}});
        target.create(&pods, &pod).await.expect("pod");
        let status = json!({"status": {"phase": "Running", "podIP": format!("10.0.0.{i}"),
            "conditions": [{"type": "Ready", "status": "True"}]}});
        target
            .merge_patch(&pods, Some("a"), &name, Some("status"), &status)
            .await
            .expect("pod status");
    }
    target
        .create(
            &deployments,
            &json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "a"},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
        )
        .await
        .expect("deployment");
    target
        .create(
            &configmaps,
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "text", "namespace": "a"},
                "data": {"yaml": "a: b\n---\nc: [d]\n", "unicode": "é \u{2028} \"quoted\" \\ tab\t"}}),
        )
        .await
        .expect("configmap");
    target
        .create(
            &crds,
            &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "widgets.example.com"},
                "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}),
        )
        .await
        .expect("crd");
    let resources = target.resources().await.expect("discovery");
    let widgets = resources
        .find("example.com/v1", "Widget")
        .cloned()
        .expect("widgets served");
    target
        .create(
            &widgets,
            &json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w", "namespace": "a"}, "spec": {"size": 1.5, "big": 12345678901234u64}}),
        )
        .await
        .expect("widget");
    server
}

async fn save(target: &Target, options: &SaveOptions, style: Style) -> (Written, String) {
    let (written, out) = ksim_snapshot::save::write(target, options, style, Vec::new())
        .await
        .expect("saved");
    assert_eq!(written.bytes, out.len() as u64);
    (written, String::from_utf8(out).expect("utf-8"))
}

fn plain_lists() -> SaveOptions {
    SaveOptions {
        server_side: false,
        ..SaveOptions::all()
    }
}

#[tokio::test]
async fn the_snapshot_path_and_plain_lists_write_the_same_file() {
    let server = source().await;
    let target = target_of(server.router());
    for style in [Style::Flow, Style::Block] {
        let (fast, text) = save(&target, &SaveOptions::all(), style).await;
        assert!(
            fast.server_side,
            "{style:?}: read through the snapshot path"
        );
        let (listed, listed_text) = save(&target, &plain_lists(), style).await;
        assert!(!listed.server_side, "{style:?}");
        assert_eq!(text, listed_text, "{style:?}: the same file either way");
        assert_eq!(fast.objects, listed.objects, "{style:?}");

        // And the same as collecting the objects, then writing them.
        let collected = ksim_snapshot::save::collect(&target, &plain_lists())
            .await
            .expect("collected");
        let mut written = Vec::new();
        ksim_snapshot::write_documents(&collected.objects, style, &mut written).expect("written");
        assert_eq!(
            text,
            String::from_utf8(written).expect("utf-8"),
            "{style:?}"
        );
        assert_eq!(fast.objects, collected.objects.len(), "{style:?}");

        let documents = parse_documents(&text, PARSED_AT).expect("a valid file");
        assert_eq!(documents.len(), fast.objects, "{style:?}");
        for kind in [
            "Node",
            "Pod",
            "Deployment",
            "ConfigMap",
            "Widget",
            "Namespace",
        ] {
            assert!(
                documents.iter().any(|d| d.object["kind"] == kind),
                "{style:?}: a {kind} is saved"
            );
        }
        assert!(!text.contains("resourceVersion"), "{style:?}");
        assert!(!text.contains("managedFields"), "{style:?}");
        let text_map = documents
            .iter()
            .find(|d| d.object["kind"] == "ConfigMap" && d.object["metadata"]["name"] == "text")
            .expect("the configmap");
        assert_eq!(text_map.object["data"]["yaml"], "a: b\n---\nc: [d]\n");
    }
}

#[tokio::test]
async fn a_cluster_without_the_snapshot_path_is_saved_through_lists() {
    let server = source().await;
    let (_, expected) = save(
        &target_of(server.router()),
        &SaveOptions::all(),
        Style::Flow,
    )
    .await;
    // What a kube-apiserver answers on a path it does not serve.
    let not_found = || async {
        (
            http::StatusCode::NOT_FOUND,
            axum::Json(json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": "the server could not find the requested resource",
                "reason": "NotFound", "details": {}, "code": 404})),
        )
    };
    let plain = axum::Router::new()
        .route(
            "/ksim/v1alpha1/snapshot/{*rest}",
            axum::routing::any(not_found),
        )
        .fallback_service(server.router());
    let (written, text) = save(&target_of(plain), &SaveOptions::all(), Style::Flow).await;
    assert!(!written.server_side, "listed");
    assert_eq!(text, expected);
}

#[tokio::test]
async fn a_saved_file_restores_pods_on_their_nodes() {
    let server = source().await;
    let (_, text) = save(
        &target_of(server.router()),
        &SaveOptions::all(),
        Style::Flow,
    )
    .await;
    let documents = parse_documents(&text, PARSED_AT).expect("a valid file");
    let copy = ksim_apiserver::ApiServer::new();
    let target = target_of(copy.router());
    let options = ksim_snapshot::restore::RestoreOptions {
        controllers_running: false,
        ..Default::default()
    };
    ksim_snapshot::restore::restore(&target, documents, &options)
        .await
        .expect("restored");
    let resources = target.resources().await.expect("discovery");
    let pods = resources.find("v1", "Pod").cloned().expect("pods");
    let mut placed = Vec::new();
    target
        .list_pages(&pods, Some("a"), None, 100, |items| {
            for pod in items {
                placed.push(format!(
                    "{} {} {}",
                    pod["metadata"]["name"].as_str().unwrap_or_default(),
                    pod["spec"]["nodeName"].as_str().unwrap_or_default(),
                    pod["status"]["phase"].as_str().unwrap_or_default()
                ));
            }
            Ok(())
        })
        .await
        .expect("listed");
    let expected: Vec<String> = (0..7)
        .map(|i| format!("pod-{i} node-{} Running", i % 3))
        .collect();
    assert_eq!(placed, expected);
}

#[tokio::test]
async fn the_snapshot_path_reads_one_collection_narrowed_as_a_list() {
    let server = source().await;
    let client = kube::Client::new(server.router(), "default");
    let get = |path: &str| {
        http::Request::get(path)
            .body(Vec::new())
            .expect("a request")
    };
    let text = client
        .request_text(get(
            "/ksim/v1alpha1/snapshot/api/v1/namespaces/a/pods?labelSelector=app%3Deven",
        ))
        .await
        .expect("documents");
    let names: Vec<Value> = parse_documents(&text, PARSED_AT)
        .expect("documents")
        .into_iter()
        .map(|d| d.object["metadata"]["name"].clone())
        .collect();
    assert_eq!(names, ["pod-0", "pod-2", "pod-4", "pod-6"]);
    assert!(text.lines().step_by(2).all(|line| line == "---"), "{text}");
    for path in [
        "/ksim/v1alpha1/snapshot/api/v1/namespaces/a/pods/pod-0",
        "/ksim/v1alpha1/snapshot/api/v1/nonsense",
    ] {
        let error = client.request_text(get(path)).await.expect_err(path);
        assert!(
            matches!(&error, kube::Error::Api(status) if status.code == 404),
            "{path}: {error}"
        );
    }
    let post = http::Request::post("/ksim/v1alpha1/snapshot/api/v1/pods")
        .body(Vec::new())
        .expect("a request");
    let error = client.request_text(post).await.expect_err("a POST");
    assert!(
        matches!(&error, kube::Error::Api(status) if status.code == 405),
        "{error}"
    );
}

/// A bulk creation handing chunks of `size` to `inner`, or, without one,
/// answering that the cluster has no bulk path.
struct Chunked {
    inner: Option<std::sync::Arc<dyn ksim_snapshot::api::BulkCreate>>,
    size: usize,
}

impl ksim_snapshot::api::BulkCreate for Chunked {
    fn create(
        &self,
        items: Vec<ksim_snapshot::api::BulkObject>,
    ) -> futures::future::BoxFuture<
        'static,
        Result<ksim_snapshot::api::BulkAnswer, ksim_snapshot::Error>,
    > {
        assert!(items.len() <= self.size, "{} items", items.len());
        match &self.inner {
            Some(inner) => inner.create(items),
            None => Box::pin(async move { Ok(ksim_snapshot::api::BulkAnswer::Unsupported(items)) }),
        }
    }

    fn chunk_size(&self) -> usize {
        self.size
    }

    fn in_flight(&self) -> usize {
        2
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scanned_file_restores_in_small_chunks_and_without_a_bulk_path() {
    let server = source().await;
    let (_, text) = save(
        &target_of(server.router()),
        &SaveOptions::all(),
        Style::Flow,
    )
    .await;
    for bulk in [true, false] {
        let copy = ksim_apiserver::ApiServer::new();
        let plain = target_of(copy.router());
        let chunked = Chunked {
            inner: bulk.then(|| plain.bulk_creation()),
            size: 2,
        };
        let target = target_of(copy.router()).with_bulk_creation(std::sync::Arc::new(chunked));
        let documents = ksim_snapshot::scan_documents(std::sync::Arc::new(text.clone()), PARSED_AT)
            .expect("a valid file");
        let texts = documents
            .iter()
            .filter(|d| matches!(d.body, ksim_snapshot::Body::Text { .. }))
            .count();
        assert!(texts > 10, "{texts} documents left as text");
        let options = ksim_snapshot::restore::RestoreOptions {
            controllers_running: false,
            ..Default::default()
        };
        let report = ksim_snapshot::restore::restore_scanned(&target, documents, &options)
            .await
            .expect("restored");
        assert_eq!(report.created["Pod"], 7, "bulk {bulk}: {report:?}");
        let resources = target.resources().await.expect("discovery");
        let pods = resources.find("v1", "Pod").cloned().expect("pods");
        let mut placed = Vec::new();
        target
            .list_pages(&pods, Some("a"), None, 100, |items| {
                for pod in items {
                    placed.push(format!(
                        "{} {} {}",
                        pod["metadata"]["name"].as_str().unwrap_or_default(),
                        pod["spec"]["nodeName"].as_str().unwrap_or_default(),
                        pod["status"]["phase"].as_str().unwrap_or_default(),
                    ));
                }
                Ok(())
            })
            .await
            .expect("listed");
        let expected: Vec<String> = (0..7)
            .map(|i| format!("pod-{i} node-{} Running", i % 3))
            .collect();
        assert_eq!(placed, expected, "bulk {bulk}");
    }
}
