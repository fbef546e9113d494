//! A `--replace` restore whose replacement of an object fails half way puts
//! the object back at once; put back by creating it again, it has a new
//! uid, and the rollback points the owner references naming its old uid at
//! it. Against an in-process ksim API server behind a layer that refuses
//! one pod's status merge patch (no real cluster refuses it on cue).

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ksim_snapshot::Target;
use ksim_snapshot::parse_documents;
use ksim_snapshot::restore::{Conflicts, RestoreOptions, restore};
use serde_json::{Value, json};

/// The status subresource whose merge patches are refused.
const REFUSED: &str = "/api/v1/namespaces/default/pods/holder/status";

async fn refuse_holder_status(request: Request, next: Next) -> Response {
    if request.method() == http::Method::PATCH && request.uri().path() == REFUSED {
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": "status refused on cue", "reason": "Invalid", "code": 422});
        return (
            http::StatusCode::UNPROCESSABLE_ENTITY,
            [(http::header::CONTENT_TYPE, "application/json")],
            status.to_string(),
        )
            .into_response();
    }
    next.run(request).await
}

#[tokio::test]
async fn an_owner_put_back_half_way_by_creating_it_again_keeps_its_dependents() {
    let server = ksim_apiserver::ApiServer::new();
    let router = server
        .router()
        .layer(axum::middleware::from_fn(refuse_holder_status));
    let target = Target::new(kube::Client::new(router, "default"));
    let resources = target.resources().await.expect("discovery");
    let pods = resources.find("v1", "Pod").cloned().expect("pods");
    let configmaps = resources
        .find("v1", "ConfigMap")
        .cloned()
        .expect("configmaps");
    let holder = target
        .create(
            &pods,
            &json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "holder", "namespace": "default"},
                "spec": {"containers": [{"name": "first", "image": "nginx"}]}}),
        )
        .await
        .expect("the pod");
    let old = holder["metadata"]["uid"]
        .as_str()
        .expect("a uid")
        .to_string();
    target
        .create(
            &configmaps,
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "held", "namespace": "default",
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "holder", "uid": old}]},
                "data": {"k": "v"}}),
        )
        .await
        .expect("the config map");
    // Another container: refused in place, so the pod is deleted and
    // created again; then its status is refused, and it is put back.
    let documents = parse_documents(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: holder\n  namespace: default\nspec:\n  containers:\n  - name: second\n    image: busybox\nstatus:\n  phase: Running\n",
        chrono::DateTime::UNIX_EPOCH,
    )
    .expect("a snapshot");
    let options = RestoreOptions {
        conflicts: Conflicts::Replace,
        ..RestoreOptions::default()
    };
    let error = restore(&target, documents, &options)
        .await
        .expect_err("the restore fails")
        .to_string();
    assert!(
        error.starts_with(
            "restore failed: document 1 (line 1), Pod default/holder: status refused on cue"
        ),
        "{error}"
    );
    assert!(
        error.ends_with(
            "; nothing was applied; the owner references of 1 object now name the new uid of the 1 object put back by creating it again"
        ),
        "{error}"
    );
    let holder: Value = target
        .get(&pods, Some("default"), "holder")
        .await
        .expect("the pod is back");
    assert_eq!(holder["spec"]["containers"][0]["name"], "first");
    let new = holder["metadata"]["uid"].as_str().expect("a uid");
    assert_ne!(new, old);
    let held = target
        .get(&configmaps, Some("default"), "held")
        .await
        .expect("the config map");
    assert_eq!(held["metadata"]["ownerReferences"][0]["uid"], new);
}
