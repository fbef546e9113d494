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
//! a failed item carrying the Status its POST would have answered. The
//! results are those of creating the items one after another (see
//! [`create_items`]: runs of independent items use every core); a failed
//! one does not stop the others.

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

/// Creates `items` as the bulk path does; a failed item carries the error
/// its POST would have answered. One result per item, in order.
///
/// What the results are is what creating the items one after another in
/// order gives: objects of kinds whose creation changes how later items are
/// created (namespaces and their default ServiceAccount, ServiceAccounts,
/// PriorityClasses, CRDs, Services with their allocations) and items with a
/// generated name are created alone, in order, after every item before
/// them. The items between two of those are created on every core: all
/// items of one kind and name on the same thread in
/// their order (the first one wins, later ones are AlreadyExists), so only
/// the resourceVersions of items of different names may interleave.
pub(crate) fn create_items(
    state: &State,
    items: Vec<BulkItem>,
    manager: &str,
) -> Vec<Result<BulkCreated, ApiError>> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    create_items_on(state, items, manager, threads)
}

/// [`create_items`] on at most `threads` threads.
fn create_items_on(
    state: &State,
    items: Vec<BulkItem>,
    manager: &str,
    threads: usize,
) -> Vec<Result<BulkCreated, ApiError>> {
    let total = items.len();
    let mut results = Vec::with_capacity(total);
    let mut run: Vec<BulkItem> = Vec::new();
    for item in items {
        if is_ordered(&item.object) {
            create_run(
                state,
                std::mem::take(&mut run),
                manager,
                threads,
                &mut results,
            );
            results.push(create_one(state, item.object, item.status, manager));
        } else {
            run.push(item);
        }
    }
    create_run(state, run, manager, threads, &mut results);
    debug_assert_eq!(results.len(), total);
    results
}

/// The fewest items of a run worth spreading over threads.
const PARALLEL_RUN: usize = 256;

/// Whether creating `object` may change how later items are created (or
/// its name is drawn): created alone, in order.
fn is_ordered(object: &Value) -> bool {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    let named = object["metadata"]["name"]
        .as_str()
        .is_some_and(|n| !n.is_empty());
    !named
        || matches!(
            (group, kind),
            ("", "Namespace" | "ServiceAccount" | "Service")
                | ("scheduling.k8s.io", "PriorityClass")
                | ("apiextensions.k8s.io", _)
                | ("apiregistration.k8s.io", _)
                | ("admissionregistration.k8s.io", _)
        )
}

/// Creates a run of items none of which changes how the others are created
/// (see [`create_items`]), appending their results in order.
fn create_run(
    state: &State,
    run: Vec<BulkItem>,
    manager: &str,
    threads: usize,
    results: &mut Vec<Result<BulkCreated, ApiError>>,
) {
    let threads = threads.min(run.len() / PARALLEL_RUN).max(1);
    if threads == 1 {
        results.extend(
            run.into_iter()
                .map(|item| create_one(state, item.object, item.status, manager)),
        );
        return;
    }
    // Items of one name go to one thread, in their order.
    let mut shares: Vec<Vec<(usize, BulkItem)>> = (0..threads)
        .map(|_| Vec::with_capacity(run.len() / threads + 1))
        .collect();
    for (index, item) in run.into_iter().enumerate() {
        let share = name_hash(&item.object) as usize % threads;
        shares[share].push((index, item));
    }
    let start = results.len();
    let count: usize = shares.iter().map(Vec::len).sum();
    let mut slots: Vec<Option<Result<BulkCreated, ApiError>>> =
        std::iter::repeat_with(|| None).take(count).collect();
    std::thread::scope(|scope| {
        let workers: Vec<_> = shares
            .into_iter()
            .map(|share| {
                scope.spawn(move || {
                    share
                        .into_iter()
                        .map(|(index, item)| {
                            (index, create_one(state, item.object, item.status, manager))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for worker in workers {
            match worker.join() {
                Ok(created) => {
                    for (index, result) in created {
                        slots[index] = Some(result);
                    }
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
    });
    results.extend(slots.into_iter().map(|slot| {
        slot.unwrap_or_else(|| Err(ApiError::internal("a bulk item was not created")))
    }));
    debug_assert_eq!(results.len(), start + count);
}

/// A hash of an item's kind and name: the same for two items that are the
/// same object (whatever version or namespace field they carry).
fn name_hash(object: &Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    object["kind"]
        .as_str()
        .unwrap_or_default()
        .hash(&mut hasher);
    object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

/// The served resource of `apiVersion` and `kind`.
fn resource_of(state: &State, api_version: &str, kind: &str) -> Option<Arc<ResourceInfo>> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    state.registry().find_kind(group, version, kind)
}

/// Drops the fields of `object` its kind does not have (the unknown
/// fields decoding drops); a decoding error is the item's error.
fn drop_unknown_fields(
    openapi: &crate::openapi::OpenApi,
    resource: &ResourceInfo,
    object: &mut Value,
) -> Result<(), ApiError> {
    let check = openapi.check_fields(resource, object);
    if let Some(error) = check.decode_error {
        return Err(error);
    }
    for problem in &check.unknown {
        if let Some(path) = problem
            .strip_prefix("unknown field \"")
            .and_then(|p| p.strip_suffix('"'))
        {
            remove_field(object, path);
        }
    }
    Ok(())
}

/// Creates one object; its new uid and generation.
fn create_one(
    state: &State,
    mut object: Value,
    status: Option<Value>,
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
    // Unknown fields are dropped, as a POST's decoding drops them, and
    // those of the status as its merge patch's decoding drops them.
    let openapi = state.openapi();
    drop_unknown_fields(&openapi, &resource, &mut object)?;
    let status = match status {
        Some(status @ Value::Object(_)) if resource.has_subresource("status") => {
            let mut patched =
                Value::Object(serde_json::Map::from_iter([("status".to_string(), status)]));
            drop_unknown_fields(&openapi, &resource, &mut patched)?;
            patched.as_object_mut().and_then(|p| p.remove("status"))
        }
        other => other,
    };
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

    /// `object` without what differs between two creations of it: uid,
    /// creationTimestamp, resourceVersion, the managedFields' times.
    fn comparable(mut object: Value) -> Value {
        let metadata = &mut object["metadata"];
        for field in ["uid", "creationTimestamp", "resourceVersion"] {
            assert!(metadata[field].is_string(), "{field} is set: {metadata}");
            metadata[field] = json!("-");
        }
        for entry in metadata["managedFields"]
            .as_array_mut()
            .expect("managedFields")
        {
            entry["time"] = json!("-");
        }
        object
    }

    async fn call_as(
        router: &Router,
        method: Method,
        uri: &str,
        content_type: &str,
        body: Value,
    ) -> Value {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::CONTENT_TYPE, content_type)
            .header(header::USER_AGENT, "restorer/v1")
            .body(Body::from(body.to_string()))
            .expect("request");
        let response = router.clone().oneshot(request).await.expect("response");
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        assert!(status.is_success(), "{uri}: {status} {value}");
        value
    }

    #[tokio::test]
    async fn an_item_is_created_as_a_post_and_a_status_merge_patch_create_it() {
        let mut pod = running_pod("web");
        // Fields the kind does not have are dropped, from the object and the status.
        pod["object"]["spec"]["notAField"] = json!(1);
        pod["status"]["notAField"] = json!(1);
        pod["status"]["conditions"][0]["alsoNot"] = json!("x");
        let set = json!({
            "object": {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": "web", "namespace": "default", "labels": {"app": "a"}},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "a"}},
                    "template": {"metadata": {"labels": {"app": "a"}},
                        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}},
            "status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2,
                "observedGeneration": 1,
                "conditions": [{"type": "ReplicaFailure", "status": "False", "reason": "R"}]},
        });
        let bulk = ApiServer::new();
        let results = bulk.create_objects(
            [&pod, &set]
                .into_iter()
                .map(|item| super::BulkItem {
                    object: item["object"].clone(),
                    status: Some(item["status"].clone()),
                })
                .collect(),
            "restorer",
        );
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        let bulk = bulk.router();
        let posted = ApiServer::new().router();
        for (item, collection) in [
            (&pod, "/api/v1/namespaces/default/pods"),
            (&set, "/apis/apps/v1/namespaces/default/replicasets"),
        ] {
            call_as(
                &posted,
                Method::POST,
                collection,
                "application/json",
                item["object"].clone(),
            )
            .await;
            call_as(
                &posted,
                Method::PATCH,
                &format!("{collection}/web/status"),
                "application/merge-patch+json",
                json!({"status": item["status"]}),
            )
            .await;
            let uri = format!("{collection}/web");
            let by_post =
                call_as(&posted, Method::GET, &uri, "application/json", Value::Null).await;
            let in_bulk = call_as(&bulk, Method::GET, &uri, "application/json", Value::Null).await;
            let managers: Vec<(&str, &str)> = in_bulk["metadata"]["managedFields"]
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
            assert_eq!(
                managers,
                [("restorer", ""), ("restorer", "status")],
                "{in_bulk}"
            );
            assert!(in_bulk["status"].get("notAField").is_none(), "{in_bulk}");
            assert!(in_bulk["spec"].get("notAField").is_none(), "{in_bulk}");
            assert_eq!(comparable(in_bulk), comparable(by_post), "{uri}");
        }
    }

    /// Items for the concurrency tests: `count` pods in `namespace`, some
    /// of them repeated or bad.
    fn many_items(namespace: &str, count: usize) -> Vec<super::BulkItem> {
        let mut items = vec![super::BulkItem {
            object: json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
            status: None,
        }];
        for i in 0..count {
            let mut item = running_pod(&format!("p-{i:05}"));
            item["object"]["metadata"]["namespace"] = json!(namespace);
            let object = match i % 97 {
                // The same name again, later: AlreadyExists.
                13 => {
                    item["object"]["metadata"]["name"] = json!(format!("p-{:05}", i - 13));
                    item["object"]["metadata"]["labels"] = json!({"copy": "yes"});
                    item["object"].clone()
                }
                // Invalid: 422.
                50 => {
                    item["object"]["spec"]["containers"] = json!([]);
                    item["object"].clone()
                }
                _ => item["object"].clone(),
            };
            items.push(super::BulkItem {
                object,
                status: Some(item["status"].clone()),
            });
        }
        items
    }

    #[tokio::test]
    async fn items_created_on_many_threads_are_answered_in_order() {
        let server = ApiServer::new();
        let items = many_items("many", 1_500);
        let names: Vec<String> = items
            .iter()
            .map(|i| {
                i.object["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        let results = super::create_items_on(&server.state, items, "restorer", 3);
        assert_eq!(results.len(), names.len());
        for (i, (result, name)) in results.iter().zip(&names).enumerate() {
            let expected = match i.checked_sub(1).map(|i| i % 97) {
                Some(13) => Some(409),
                Some(50) => Some(422),
                _ => None,
            };
            match (result, expected) {
                (Ok(created), None) => {
                    let collection = if i == 0 { "/namespaces" } else { "/pods" };
                    let namespace = if i == 0 { "" } else { "many" };
                    let stored = server
                        .state
                        .store
                        .get(collection, namespace, name)
                        .expect("created");
                    assert_eq!(stored.uid(), Some(created.uid.as_str()), "item {i}");
                }
                (Err(error), Some(code)) => assert_eq!(error.code, code, "item {i}: {error}"),
                (other, _) => panic!("item {i} ({name}): {other:?}, expected {expected:?}"),
            }
        }
        // The first of two items of one name won, as one after another.
        let first = server
            .state
            .store
            .get("/pods", "many", "p-00000")
            .expect("pod");
        assert!(first.labels().and_then(|l| l.get("copy")).is_none());
        let failed = (0..1_500).filter(|i| matches!(i % 97, 13 | 50)).count();
        assert_eq!(server.state.store.len("/pods"), 1_500 - failed);
    }

    #[tokio::test]
    async fn many_threads_create_what_one_thread_creates() {
        let created = |threads: usize| {
            let server = ApiServer::new();
            let results =
                super::create_items_on(&server.state, many_items("same", 600), "m", threads);
            let codes: Vec<u16> = results
                .iter()
                .map(|r| r.as_ref().map_or_else(|e| e.code, |_| 0))
                .collect();
            let pods: Vec<Value> = server
                .state
                .store
                .list("/pods", Some("same"), None, None, |_| true)
                .items
                .iter()
                .map(|p| {
                    let mut value = p.value.clone();
                    ksim_store::expand_managed_fields(&mut value);
                    comparable(value)
                })
                .collect();
            (codes, pods)
        };
        let (one_codes, one_pods) = created(1);
        let (many_codes, many_pods) = created(4);
        assert_eq!(one_codes, many_codes);
        let failed = (0..600).filter(|i| matches!(i % 97, 13 | 50)).count();
        assert_eq!(one_pods.len(), 600 - failed);
        assert_eq!(one_pods, many_pods);
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
