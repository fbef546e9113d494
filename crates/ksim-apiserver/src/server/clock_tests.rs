//! The API server on a virtual clock: the times it writes and shows, the
//! names and uids it generates from a seed, the timers of its watches, and
//! the clock's own path.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use http::{Method, Request, StatusCode, header};
use serde_json::{Value, json};
use tower::ServiceExt;

use ksim_clock::{Clock, Random};

use super::ApiServer;

fn start() -> DateTime<Utc> {
    "2026-01-01T00:00:00Z".parse().expect("start time")
}

async fn call(
    router: &Router,
    method: Method,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    call_with(router, method, uri, body, "application/json").await
}

async fn call_with(
    router: &Router,
    method: Method,
    uri: &str,
    body: Option<Value>,
    accept: &str,
) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::ACCEPT, accept)
        .header(header::CONTENT_TYPE, "application/json")
        .body(match body {
            Some(body) => Body::from(body.to_string()),
            None => Body::empty(),
        })
        .expect("request");
    let response = router.clone().oneshot(request).await.expect("response");
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, value)
}

fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}})
}

async fn create_config_map(router: &Router, body: Value) -> Value {
    let (status, created) = call(
        router,
        Method::POST,
        "/api/v1/namespaces/default/configmaps",
        Some(body),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    created
}

#[tokio::test(flavor = "current_thread")]
async fn objects_are_created_and_deleted_at_the_clocks_time() {
    let clock = Clock::virtual_at(start());
    let server = ApiServer::with_clock(clock.clone());
    let router = server.router();
    let created = create_config_map(&router, config_map("first")).await;
    assert_eq!(
        created["metadata"]["creationTimestamp"],
        json!("2026-01-01T00:00:00Z")
    );
    assert_eq!(
        created["metadata"]["managedFields"][0]["time"],
        json!("2026-01-01T00:00:00Z")
    );
    clock
        .advance(Duration::from_secs(300))
        .await
        .expect("advance");
    let mut held = config_map("held");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    create_config_map(&router, held).await;
    let (status, deleted) = call(
        &router,
        Method::DELETE,
        "/api/v1/namespaces/default/configmaps/held",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{deleted}");
    assert_eq!(
        deleted["metadata"]["deletionTimestamp"],
        json!("2026-01-01T00:05:00Z")
    );
    assert_eq!(
        deleted["metadata"]["creationTimestamp"],
        json!("2026-01-01T00:05:00Z")
    );
}

#[tokio::test(flavor = "current_thread")]
async fn kubectl_get_ages_are_counted_on_the_clock() {
    let clock = Clock::virtual_at(start());
    let server = ApiServer::with_clock(clock.clone());
    let router = server.router();
    create_config_map(&router, config_map("aged")).await;
    clock
        .advance(Duration::from_secs(600))
        .await
        .expect("advance");
    let (status, table) = call_with(
        &router,
        Method::GET,
        "/api/v1/namespaces/default/configmaps",
        None,
        "application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{table}");
    let age = table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .position(|c| c["name"] == "Age")
        .expect("an Age column");
    let row = table["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["cells"][0] == "aged")
        .expect("the config map's row");
    assert_eq!(row["cells"][age], json!("10m"));
}

#[tokio::test(flavor = "current_thread")]
async fn an_immutable_openapi_document_expires_a_year_from_the_clocks_now() {
    let server = ApiServer::with_clock(Clock::virtual_at(start()));
    let router = server.router();
    let (status, index) = call(&router, Method::GET, "/openapi/v3", None).await;
    assert_eq!(status, StatusCode::OK, "{index}");
    let url = index["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .expect("a hashed URL for api/v1");
    let request = Request::builder()
        .uri(url)
        .body(Body::empty())
        .expect("request");
    let response = router.clone().oneshot(request).await.expect("response");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::EXPIRES],
        "Fri, 01 Jan 2027 00:00:00 GMT"
    );
}

/// The names and uids of one server's first objects.
async fn generated(seed: u64) -> Vec<(String, String)> {
    let server = ApiServer::with_clock(Clock::virtual_with(start(), Random::seeded(seed)));
    let router = server.router();
    let mut out = Vec::new();
    for _ in 0..3 {
        let created = create_config_map(
            &router,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "web-"}}),
        )
        .await;
        out.push((
            created["metadata"]["name"]
                .as_str()
                .expect("name")
                .to_string(),
            created["metadata"]["uid"]
                .as_str()
                .expect("uid")
                .to_string(),
        ));
    }
    out
}

#[tokio::test(flavor = "current_thread")]
async fn a_seed_gives_the_same_generated_names_and_uids() {
    let first = generated(7).await;
    assert_eq!(first, generated(7).await);
    assert_ne!(first, generated(8).await);
    for (name, uid) in &first {
        assert!(name.starts_with("web-") && name.len() == 9, "{name}");
        assert_eq!(uid.len(), 36, "{uid}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn the_clock_is_shown_and_advanced_over_the_api() {
    let clock = Clock::virtual_with(start(), Random::seeded(7));
    let server = ApiServer::with_clock(clock.clone());
    let router = server.router();
    let (status, shown) = call(&router, Method::GET, "/ksim/v1alpha1/clock", None).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(shown["kind"], "Clock");
    assert_eq!(shown["mode"], "virtual");
    assert_eq!(shown["now"], "2026-01-01T00:00:00Z");
    assert_eq!(shown["seed"], 7);

    let (status, advanced) = call(
        &router,
        Method::POST,
        "/ksim/v1alpha1/clock/advance",
        Some(json!({"by": "10m"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{advanced}");
    assert_eq!(advanced["now"], "2026-01-01T00:10:00Z");
    assert_eq!(clock.now_rfc3339(), "2026-01-01T00:10:00Z");

    let (status, advanced) = call(
        &router,
        Method::POST,
        "/ksim/v1alpha1/clock/advance?by=1h30m",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{advanced}");
    assert_eq!(advanced["now"], "2026-01-01T01:40:00Z");

    let (status, refused) = call(
        &router,
        Method::POST,
        "/ksim/v1alpha1/clock/advance",
        Some(json!({"by": "soon"})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(refused["kind"], "Status");
    assert_eq!(refused["reason"], "BadRequest");
    assert_eq!(refused["details"]["causes"][0]["field"], "by");
    assert_eq!(clock.now_rfc3339(), "2026-01-01T01:40:00Z");

    let (status, advanced) = call(
        &router,
        Method::POST,
        "/ksim/v1alpha1/clock/advance",
        Some(json!({"to": "2026-01-01T02:00:00Z"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{advanced}");
    assert_eq!(advanced["now"], "2026-01-01T02:00:00Z");
    let (status, refused) = call(
        &router,
        Method::POST,
        "/ksim/v1alpha1/clock/advance",
        Some(json!({"to": "2026-01-01T01:00:00Z"})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(refused["details"]["causes"][0]["field"], "to");

    let (status, _) = call(&router, Method::GET, "/ksim/v1alpha1/clock/advance", None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test(flavor = "current_thread")]
async fn a_real_clock_is_not_advanced() {
    let server = ApiServer::new();
    let router = server.router();
    let (status, shown) = call(&router, Method::GET, "/ksim/v1alpha1/clock", None).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(shown["mode"], "real");
    assert!(shown.get("nextTimer").is_none(), "{shown}");
    let (status, refused) = call(
        &router,
        Method::POST,
        "/ksim/v1alpha1/clock/advance",
        Some(json!({"by": "10m"})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(refused["reason"], "BadRequest");
    assert_eq!(
        refused["message"],
        "the cluster's clock is real; only a virtual clock (--clock virtual) can be advanced"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_watch_bookmarks_and_times_out_on_the_clock() {
    let clock = Clock::virtual_at(start());
    let server = ApiServer::with_clock(clock.clone());
    let router = server.router();
    let request = Request::builder()
        .uri("/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true&timeoutSeconds=45")
        .body(Body::empty())
        .expect("request");
    let response = router.clone().oneshot(request).await.expect("response");
    assert_eq!(response.status(), StatusCode::OK);
    let (lines, mut received) = tokio::sync::mpsc::unbounded_channel::<Option<String>>();
    tokio::spawn(async move {
        let mut body = response.into_body().into_data_stream();
        while let Some(Ok(chunk)) = body.next().await {
            for line in String::from_utf8_lossy(&chunk).lines() {
                let _ = lines.send(Some(line.to_string()));
            }
        }
        let _ = lines.send(None);
    });
    clock.settle().await.expect("settled");
    assert_eq!(
        clock.next_timer(),
        Some("2026-01-01T00:00:30Z".parse().expect("time"))
    );
    clock
        .advance(Duration::from_secs(30))
        .await
        .expect("advance");
    let line = next_line(&mut received).await.expect("a bookmark");
    let event: Value = serde_json::from_str(&line).expect("a watch event");
    assert_eq!(event["type"], "BOOKMARK");
    clock
        .advance(Duration::from_secs(15))
        .await
        .expect("advance");
    // The watch ends at its timeout, 45 s of cluster time after it began.
    assert_eq!(next_line(&mut received).await, None);
}

/// The next line of a watch (None once it ended); a hang guard in real time.
async fn next_line(
    received: &mut tokio::sync::mpsc::UnboundedReceiver<Option<String>>,
) -> Option<String> {
    tokio::time::timeout(Duration::from_secs(30), received.recv())
        .await
        .expect("the watch answers")
        .flatten()
}

#[tokio::test(flavor = "current_thread")]
async fn an_eviction_is_recorded_at_the_clocks_time() {
    let clock = Clock::virtual_with(start(), Random::seeded(7));
    let server = ApiServer::with_clock(clock.clone());
    let router = server.router();
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "evicted"},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]}});
    let (status, created) = call(
        &router,
        Method::POST,
        "/api/v1/namespaces/default/pods",
        Some(pod),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    clock
        .advance(Duration::from_secs(300))
        .await
        .expect("advance");
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "evicted", "namespace": "default"}});
    let (status, answer) = call(
        &router,
        Method::POST,
        "/api/v1/namespaces/default/pods/evicted/eviction",
        Some(eviction),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    let (status, records) = call(&router, Method::GET, "/ksim/v1alpha1/evictions", None).await;
    assert_eq!(status, StatusCode::OK, "{records}");
    let record = &records["items"][0];
    assert_eq!(record["outcome"], "Evicted", "{records}");
    assert_eq!(record["time"], json!("2026-01-01T00:05:00Z"));
    assert_eq!(
        record["metadata"]["creationTimestamp"],
        json!("2026-01-01T00:05:00Z")
    );
}
