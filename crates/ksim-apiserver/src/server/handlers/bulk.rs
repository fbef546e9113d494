//! `POST /ksim/v1alpha1/objects`: many objects created in one request, each
//! as a POST of it to its collection would create it (defaulting,
//! admission, validation, managedFields) and, where the item carries a
//! `status`, with that status merged in as a merge patch of the status
//! subresource would, in the same write. A ksim-only, non-resource path
//! (kubectl reaches it with `--raw`); `ksim snapshot restore` loads
//! snapshots through it, a request per few hundred objects instead of two
//! per object. A cluster without it answers 404 and the restore falls back
//! to the API's own verbs.
//!
//! The body: `{"items": [{"object": {...}, "status": {...}}, ...]}`
//! (`status` optional), `fieldManager` as a query parameter or the user
//! agent's name, as on a POST. The answer, 200 with one result per item in
//! order: `{"kind": "ObjectCreations", "apiVersion": "ksim.io/v1alpha1",
//! "items": [{"uid": "...", "generation": 1}, {"status": <a Status>}]}`,
//! a failed item carrying the Status its POST would have answered. Items
//! are created one after another; a failed one does not stop the others.

use std::sync::Arc;

use axum::extract::{Request, State as AxumState};
use axum::response::{IntoResponse, Response};
use http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::ApiError;
use crate::resources::ResourceInfo;

use super::super::State;
use super::super::codec::{self, Output};
use super::super::conversion;
use super::write::create_object_with_status;
use super::{Query, field_manager, remove_field};

/// The path of bulk creation.
pub(crate) const OBJECTS_PATH: &str = "/ksim/v1alpha1/objects";

/// The largest body a bulk creation reads.
const BODY_LIMIT: usize = 256 * 1024 * 1024;

/// `POST /ksim/v1alpha1/objects`.
pub(crate) async fn create(AxumState(state): AxumState<Arc<State>>, request: Request) -> Response {
    match create_all(&state, request).await {
        Ok(value) => codec::respond_value(StatusCode::OK, Output::Json, &value),
        Err(error) => error.into_response(),
    }
}

async fn create_all(state: &State, request: Request) -> Result<Value, ApiError> {
    if request.method() != Method::POST {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({})",
            request.method()
        )));
    }
    let query = Query::parse(request.uri().query());
    let manager = field_manager(&query, request.headers(), "unknown");
    let body = axum::body::to_bytes(request.into_body(), BODY_LIMIT)
        .await
        .map_err(|_| {
            ApiError::too_large(format!("Request entity too large: limit is {BODY_LIMIT}"))
        })?;
    let mut body: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("error decoding the body: {e}")))?;
    let Some(Value::Array(items)) = body.get_mut("items").map(Value::take) else {
        return Err(ApiError::bad_request("the body has no items"));
    };
    let items = items
        .into_iter()
        .map(|mut item| BulkItem {
            status: item.get_mut("status").map(Value::take),
            object: item
                .get_mut("object")
                .map(Value::take)
                .unwrap_or(Value::Null),
        })
        .collect();
    let results: Vec<Value> = create_items(state, items, &manager)
        .into_iter()
        .map(|result| match result {
            Ok(created) => {
                let mut answer = json!({"uid": created.uid});
                if let Some(generation) = created.generation {
                    answer["generation"] = json!(generation);
                }
                answer
            }
            Err(error) => json!({"status": error.to_status()}),
        })
        .collect();
    Ok(json!({
        "kind": "ObjectCreations",
        "apiVersion": "ksim.io/v1alpha1",
        "items": results,
    }))
}

/// One object to create in bulk: the object as a POST to its collection
/// would carry it, and the status to merge in as a merge patch of its
/// `status` subresource would.
#[derive(Debug, Clone)]
pub struct BulkItem {
    pub object: Value,
    pub status: Option<Value>,
}

/// What creating one bulk item gave: the new object's uid and generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkCreated {
    pub uid: String,
    pub generation: Option<i64>,
}

/// Creates `items` one after another, as the bulk path does; a failed item
/// carries the error its POST would have answered.
pub(crate) fn create_items(
    state: &State,
    items: Vec<BulkItem>,
    manager: &str,
) -> Vec<Result<BulkCreated, ApiError>> {
    items
        .into_iter()
        .map(|item| create_one(state, item.object, item.status.as_ref(), manager))
        .collect()
}

/// The served resource of `apiVersion` and `kind`.
fn resource_of(state: &State, api_version: &str, kind: &str) -> Option<Arc<ResourceInfo>> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    state.registry().find_kind(group, version, kind)
}

/// Creates one object; its new uid and generation.
fn create_one(
    state: &State,
    mut object: Value,
    status: Option<&Value>,
    manager: &str,
) -> Result<BulkCreated, ApiError> {
    if !object.is_object() {
        return Err(ApiError::bad_request("an item's object is not an object"));
    }
    let api_version = object["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    let resource = resource_of(state, &api_version, &kind).ok_or_else(|| {
        let mut error = ApiError::not_found_path();
        error.message = format!("{}: {kind} in {api_version}", error.message);
        error
    })?;
    if !object.get("metadata").is_some_and(Value::is_object) {
        object["metadata"] = json!({});
    }
    let metadata = object["metadata"]
        .as_object_mut()
        .expect("metadata was just made an object");
    if resource.namespaced {
        if metadata
            .get("namespace")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(ApiError::bad_request(format!(
                "{kind} {}: metadata.namespace is required",
                metadata
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            )));
        }
    } else {
        metadata.remove("namespace");
    }
    // Unknown fields are dropped, as a POST's decoding drops them.
    let check = state.openapi().check_fields(&resource, &object);
    if let Some(error) = check.decode_error {
        return Err(error);
    }
    for problem in &check.unknown {
        if let Some(path) = problem
            .strip_prefix("unknown field \"")
            .and_then(|p| p.strip_suffix('"'))
        {
            remove_field(&mut object, path);
        }
    }
    let object = conversion::to_storage(&resource, object);
    let created = create_object_with_status(state, &resource, object, status, manager)?;
    Ok(BulkCreated {
        uid: created.value["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        generation: created.value["metadata"]["generation"].as_i64(),
    })
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use http::{Method, Request, StatusCode, header};
    use serde_json::{Value, json};
    use tower::ServiceExt;

    use super::OBJECTS_PATH;
    use crate::ApiServer;

    async fn call(router: &Router, method: Method, uri: &str, body: Value) -> (StatusCode, Value) {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::USER_AGENT, "restorer/v1")
            .body(Body::from(body.to_string()))
            .expect("request");
        let response = router.clone().oneshot(request).await.expect("response");
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    fn running_pod(name: &str) -> Value {
        json!({
            "object": {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "labels": {"app": "a"}},
                "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "busybox"}]},
                "status": {"phase": "Failed"}},
            "status": {"phase": "Running", "podIP": "10.0.0.7", "hostIP": "192.168.0.1",
                "conditions": [{"type": "Ready", "status": "True"}]},
        })
    }

    #[tokio::test]
    async fn objects_are_created_with_their_status_in_one_request() {
        let router = ApiServer::new().router();
        let (code, answer) = call(
            &router,
            Method::POST,
            OBJECTS_PATH,
            json!({"items": [
                {"object": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}},
                running_pod("web"),
                {"object": {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": {"name": "web", "namespace": "team"},
                    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "a"}},
                        "template": {"metadata": {"labels": {"app": "a"}},
                            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}},
                 "status": {"replicas": 1, "readyReplicas": 1, "observedGeneration": 1}},
            ]}),
        )
        .await;
        assert_eq!(code, StatusCode::OK, "{answer}");
        let items = answer["items"].as_array().expect("items");
        assert_eq!(items.len(), 3, "{answer}");
        assert!(
            items
                .iter()
                .all(|i| i["uid"].as_str().is_some_and(|u| !u.is_empty())),
            "{answer}"
        );
        assert_eq!(items[2]["generation"], 1, "{answer}");

        let (code, pod) = call(
            &router,
            Method::GET,
            "/api/v1/namespaces/default/pods/web",
            Value::Null,
        )
        .await;
        assert_eq!(code, StatusCode::OK, "{pod}");
        assert_eq!(pod["metadata"]["uid"], items[1]["uid"]);
        assert_eq!(pod["spec"]["nodeName"], "node-1");
        // The status is the item's, merged over what a create starts a pod with.
        assert_eq!(pod["status"]["phase"], "Running");
        assert_eq!(pod["status"]["podIP"], "10.0.0.7");
        assert_eq!(pod["status"]["qosClass"], "BestEffort");
        // Written by the manager the user agent names, the status as its subresource.
        let managers: Vec<(&str, &str)> = pod["metadata"]["managedFields"]
            .as_array()
            .expect("managedFields")
            .iter()
            .map(|m| {
                (
                    m["manager"].as_str().unwrap_or_default(),
                    m["subresource"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(managers, [("restorer", ""), ("restorer", "status")]);
        let (_, set) = call(
            &router,
            Method::GET,
            "/apis/apps/v1/namespaces/team/replicasets/web",
            Value::Null,
        )
        .await;
        assert_eq!(set["status"]["readyReplicas"], 1, "{set}");
        // A new namespace gets its default service account, as on a POST.
        let (code, _) = call(
            &router,
            Method::GET,
            "/api/v1/namespaces/team/serviceaccounts/default",
            Value::Null,
        )
        .await;
        assert_eq!(code, StatusCode::OK);
    }

    #[tokio::test]
    async fn a_failed_item_carries_its_status_and_the_others_are_created() {
        let router = ApiServer::new().router();
        let (code, answer) = call(
            &router,
            Method::POST,
            OBJECTS_PATH,
            json!({"items": [
                running_pod("web"),
                running_pod("web"),
                {"object": {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}},
                {"object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nowhere"},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
                {"object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad", "namespace": "default"},
                    "spec": {"containers": []}}},
                running_pod("other"),
            ]}),
        )
        .await;
        assert_eq!(code, StatusCode::OK, "{answer}");
        let items = answer["items"].as_array().expect("items");
        let codes: Vec<i64> = items
            .iter()
            .map(|i| i["status"]["code"].as_i64().unwrap_or(0))
            .collect();
        assert_eq!(codes, [0, 409, 404, 400, 422, 0], "{answer}");
        assert_eq!(items[1]["status"]["reason"], "AlreadyExists");
        assert_eq!(items[1]["status"]["message"], "pods \"web\" already exists");
        let (code, _) = call(
            &router,
            Method::GET,
            "/api/v1/namespaces/default/pods/other",
            Value::Null,
        )
        .await;
        assert_eq!(code, StatusCode::OK);
    }

    #[tokio::test]
    async fn only_a_post_with_items_is_answered() {
        let router = ApiServer::new().router();
        let (code, status) = call(&router, Method::GET, OBJECTS_PATH, Value::Null).await;
        assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED, "{status}");
        assert_eq!(status["kind"], "Status");
        let (code, status) =
            call(&router, Method::POST, OBJECTS_PATH, json!({"objects": []})).await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{status}");
        assert_eq!(status["message"], "the body has no items");
    }
}
