//! `/ksim/v1alpha1/evictions`: evictions and refusals of the eviction
//! subresource are listed and watched there with who asked, and no core/v1
//! Event is recorded for them (kube-apiserver records none).

use axum::Router;
use axum::body::Body;
use futures::StreamExt;
use http::{Method, Request, StatusCode, header};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::ApiServer;

async fn call(
    router: &Router,
    method: Method,
    uri: &str,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> (StatusCode, Value) {
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
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

/// A Running, Ready pod labelled app=db in `namespace`.
async fn ready_pod(router: &Router, namespace: &str, name: &str) {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "db"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}});
    let pods = format!("/api/v1/namespaces/{namespace}/pods");
    let (status, created) = call(router, Method::POST, &pods, Some(pod), &[]).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let mut running = created;
    running["status"] = json!({"phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}]});
    let (status, updated) = call(
        router,
        Method::PUT,
        &format!("{pods}/{name}/status"),
        Some(running),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
}

/// A budget over app=db in `default` that allows no disruption.
async fn exhausted_budget(router: &Router) {
    let budget = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "db"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}});
    let path = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";
    let (status, mut created) = call(router, Method::POST, path, Some(budget), &[]).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    created["status"] = json!({"observedGeneration": 1, "disruptionsAllowed": 0,
        "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1});
    let (status, updated) = call(
        router,
        Method::PUT,
        &format!("{path}/db/status"),
        Some(created),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
}

async fn evict(
    router: &Router,
    namespace: &str,
    name: &str,
    headers: &[(&str, &str)],
) -> StatusCode {
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace}});
    call(
        router,
        Method::POST,
        &format!("/api/v1/namespaces/{namespace}/pods/{name}/eviction"),
        Some(eviction),
        headers,
    )
    .await
    .0
}

/// (pod, outcome, requestedBy) of each record.
fn summary(list: &Value) -> Vec<(String, String, String)> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|r| {
            (
                format!(
                    "{}/{}",
                    r["pod"]["namespace"].as_str().unwrap_or_default(),
                    r["pod"]["name"].as_str().unwrap_or_default()
                ),
                r["outcome"].as_str().unwrap_or_default().to_string(),
                r["requestedBy"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn evictions_and_refusals_are_listed_with_who_asked_and_no_event() {
    let server = ApiServer::new();
    let router = server.router();
    let (status, namespace) = call(
        &router,
        Method::POST,
        "/api/v1/namespaces",
        Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{namespace}");
    ready_pod(&router, "default", "db-0").await;
    ready_pod(&router, "other", "free").await;
    exhausted_budget(&router).await;

    let drain = [
        ("kubectl-command", "kubectl drain"),
        ("user-agent", "kubectl/v1.33.0"),
    ];
    assert_eq!(
        evict(&router, "default", "db-0", &drain).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    let agent = [("user-agent", "cluster-autoscaler/v1.33.0 (linux/amd64)")];
    assert_eq!(
        evict(&router, "other", "free", &agent).await,
        StatusCode::CREATED
    );
    // Neither a dry run nor a request for a missing pod is recorded.
    let dry = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "db-0", "namespace": "default"}, "deleteOptions": {"dryRun": ["All"]}});
    let (status, _) = call(
        &router,
        Method::POST,
        "/api/v1/namespaces/default/pods/db-0/eviction",
        Some(dry),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        evict(&router, "default", "nope", &[]).await,
        StatusCode::NOT_FOUND
    );

    let (status, list) = call(&router, Method::GET, "/ksim/v1alpha1/evictions", None, &[]).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["kind"], "EvictionRecordList");
    assert_eq!(list["apiVersion"], "ksim.io/v1alpha1");
    assert_eq!(
        summary(&list),
        [
            (
                "default/db-0".to_string(),
                "Refused".to_string(),
                "kubectl drain".to_string()
            ),
            (
                "other/free".to_string(),
                "Evicted".to_string(),
                "cluster-autoscaler".to_string()
            ),
        ]
    );
    let refusal = &list["items"][0];
    assert_eq!(refusal["kind"], "EvictionRecord");
    assert_eq!(
        refusal["message"],
        "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget db needs 1 healthy pods and has 1 currently"
    );
    assert!(refusal["pod"]["uid"].is_string(), "{refusal}");
    let (_, only_other) = call(
        &router,
        Method::GET,
        "/ksim/v1alpha1/evictions?namespace=other",
        None,
        &[],
    )
    .await;
    assert_eq!(summary(&only_other).len(), 1, "{only_other}");

    // No Events: kube-apiserver records none for evictions.
    let (status, events) = call(&router, Method::GET, "/api/v1/events", None, &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(events["items"], json!([]), "{events}");

    // Read-only.
    let (status, refused) = call(
        &router,
        Method::POST,
        "/ksim/v1alpha1/evictions",
        Some(json!({})),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{refused}");
    assert_eq!(refused["kind"], "Status");
}

/// Reads watch lines from `uri` as they come.
async fn watch(router: &Router, uri: &str) -> tokio::sync::mpsc::UnboundedReceiver<Value> {
    let request = Request::builder()
        .uri(uri)
        .body(Body::empty())
        .expect("request");
    let response = router.clone().oneshot(request).await.expect("response");
    assert_eq!(response.status(), StatusCode::OK);
    let (lines, received) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut body = response.into_body().into_data_stream();
        while let Some(Ok(chunk)) = body.next().await {
            for line in String::from_utf8_lossy(&chunk).lines() {
                let _ = lines.send(serde_json::from_str(line).unwrap_or(Value::Null));
            }
        }
    });
    received
}

async fn next(received: &mut tokio::sync::mpsc::UnboundedReceiver<Value>) -> Value {
    tokio::time::timeout(std::time::Duration::from_secs(30), received.recv())
        .await
        .expect("the watch answers")
        .expect("the watch is open")
}

#[tokio::test]
async fn a_watch_starts_with_the_records_or_from_a_resource_version() {
    let server = ApiServer::new();
    let router = server.router();
    ready_pod(&router, "default", "a").await;
    ready_pod(&router, "default", "b").await;
    assert_eq!(
        evict(&router, "default", "a", &[]).await,
        StatusCode::CREATED
    );
    let (_, list) = call(&router, Method::GET, "/ksim/v1alpha1/evictions", None, &[]).await;
    let version = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("a version")
        .to_string();

    let mut from_start = watch(&router, "/ksim/v1alpha1/evictions?watch=true").await;
    let mut from_version = watch(
        &router,
        &format!("/ksim/v1alpha1/evictions?watch=1&resourceVersion={version}"),
    )
    .await;
    let first = next(&mut from_start).await;
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["pod"]["name"], "a");

    assert_eq!(
        evict(&router, "default", "b", &[("user-agent", "ksim-test/1")]).await,
        StatusCode::CREATED
    );
    for received in [&mut from_start, &mut from_version] {
        let event = next(received).await;
        assert_eq!(event["type"], "ADDED", "{event}");
        assert_eq!(event["object"]["pod"]["name"], "b", "{event}");
        assert_eq!(event["object"]["requestedBy"], "ksim-test", "{event}");
    }
    let (status, bad) = call(
        &router,
        Method::GET,
        "/ksim/v1alpha1/evictions?watch=1&resourceVersion=x",
        None,
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
}

#[tokio::test]
async fn the_timeline_watches_events_and_records_in_one_stream_in_order() {
    let server = ApiServer::new();
    let router = server.router();
    ready_pod(&router, "default", "a").await;
    let (status, list) = call(&router, Method::GET, "/ksim/v1alpha1/timeline", None, &[]).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["items"], json!([]), "{list}");
    let version = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("a version")
        .to_string();
    let mut received = watch(
        &router,
        &format!("/ksim/v1alpha1/timeline?watch=1&resourceVersion={version}"),
    )
    .await;
    let event = json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "a.1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "a", "namespace": "default"},
        "reason": "Scheduled", "message": "Successfully assigned default/a to n1",
        "source": {"component": "default-scheduler"}});
    let (status, created) = call(
        &router,
        Method::POST,
        "/api/v1/namespaces/default/events",
        Some(event),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(
        evict(&router, "default", "a", &[]).await,
        StatusCode::CREATED
    );
    let first = next(&mut received).await;
    assert_eq!(
        (
            &first["type"],
            &first["object"]["kind"],
            &first["object"]["reason"]
        ),
        (&json!("ADDED"), &json!("Event"), &json!("Scheduled")),
        "{first}"
    );
    let second = next(&mut received).await;
    assert_eq!(
        (
            &second["type"],
            &second["object"]["kind"],
            &second["object"]["outcome"]
        ),
        (&json!("ADDED"), &json!("EvictionRecord"), &json!("Evicted")),
        "{second}"
    );
    // Listed together, in the same order.
    let (_, list) = call(&router, Method::GET, "/ksim/v1alpha1/timeline", None, &[]).await;
    let kinds: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|o| o["kind"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(kinds, ["Event", "EvictionRecord"]);
    // `limit` bounds the list (the page asks for one item, for the version).
    let (_, one) = call(
        &router,
        Method::GET,
        "/ksim/v1alpha1/timeline?limit=1",
        None,
        &[],
    )
    .await;
    assert_eq!(one["items"].as_array().map(Vec::len), Some(1), "{one}");
    assert_eq!(
        one["metadata"]["resourceVersion"],
        list["metadata"]["resourceVersion"]
    );
}
