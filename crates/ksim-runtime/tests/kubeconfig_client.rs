//! The client built from a kubeconfig, over HTTP against a stub API server
//! that counts requests: a refusal without `Retry-After` comes back at once
//! (one request), a 429/5xx with `Retry-After` is retried as client-go
//! does, at most ten times.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use k8s_openapi::api::core::v1::ConfigMap;
use ksim_runtime::client::{MAX_RETRIES, from_kubeconfig};
use kube::Api;
use serde_json::json;

/// What the stub answers: `failures` times `status` (with `retry_after`
/// when set), then the ConfigMap.
#[derive(Clone)]
struct Stub {
    status: u16,
    retry_after: Option<&'static str>,
    failures: u32,
    requests: Arc<AtomicU32>,
}

async fn answer(State(stub): State<Stub>) -> impl IntoResponse {
    let seen = stub.requests.fetch_add(1, Ordering::SeqCst);
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if seen >= stub.failures {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "default"}});
        return (StatusCode::OK, headers, body.to_string());
    }
    if let Some(value) = stub.retry_after {
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static(value));
    }
    let status = StatusCode::from_u16(stub.status).expect("valid status");
    let body = json!({"apiVersion": "v1", "kind": "Status", "status": "Failure",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "reason": "TooManyRequests", "code": stub.status});
    (status, headers, body.to_string())
}

/// Serves `stub` on a loopback port and writes a kubeconfig for it.
async fn serve(stub: Stub) -> (tempfile::TempDir, PathBuf) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .expect("bind loopback");
    let address = listener.local_addr().expect("local address");
    let router = Router::new()
        .route("/api/v1/namespaces/default/configmaps/c", get(answer))
        .with_state(stub);
    tokio::spawn(async move { axum::serve(listener, router).await });
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("kubeconfig");
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: stub\n\
         clusters:\n- name: stub\n  cluster:\n    server: http://{address}\n\
         contexts:\n- name: stub\n  context:\n    cluster: stub\n    user: stub\n\
         users:\n- name: stub\n  user: {{}}\n"
    );
    std::fs::write(&path, kubeconfig).expect("write kubeconfig");
    (dir, path)
}

fn stub(status: u16, retry_after: Option<&'static str>, failures: u32) -> Stub {
    Stub {
        status,
        retry_after,
        failures,
        requests: Arc::new(AtomicU32::new(0)),
    }
}

async fn get_configmap(stub: &Stub) -> Result<ConfigMap, kube::Error> {
    let (_dir, path) = serve(stub.clone()).await;
    let client = from_kubeconfig(Some(&path), None)
        .await
        .expect("client from the kubeconfig");
    Api::<ConfigMap>::namespaced(client, "default")
        .get("c")
        .await
}

fn code(result: Result<ConfigMap, kube::Error>) -> u16 {
    match result {
        Err(kube::Error::Api(status)) => status.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_refusal_without_retry_after_comes_back_at_once() {
    for status in [429, 503, 504] {
        let stub = stub(status, None, u32::MAX);
        assert_eq!(code(get_configmap(&stub).await), status);
        assert_eq!(stub.requests.load(Ordering::SeqCst), 1, "status {status}");
    }
}

#[tokio::test]
async fn a_429_or_5xx_with_retry_after_is_retried_until_it_succeeds() {
    for status in [429, 500, 503] {
        let stub = stub(status, Some("0"), 2);
        let configmap = get_configmap(&stub)
            .await
            .expect("third answer is the object");
        assert_eq!(configmap.metadata.name.as_deref(), Some("c"));
        assert_eq!(stub.requests.load(Ordering::SeqCst), 3, "status {status}");
    }
}

#[tokio::test]
async fn retries_stop_after_ten() {
    let stub = stub(429, Some("0"), u32::MAX);
    assert_eq!(code(get_configmap(&stub).await), 429);
    assert_eq!(stub.requests.load(Ordering::SeqCst), 1 + MAX_RETRIES);
}

#[tokio::test]
async fn an_unknown_context_is_named() {
    let (_dir, path) = serve(stub(200, None, 0)).await;
    let Err(error) = from_kubeconfig(Some(&path), Some("ksim-nope")).await else {
        panic!("a client for a context that does not exist");
    };
    assert!(
        matches!(error, ksim_runtime::Error::NoContext { ref context, .. } if context == "ksim-nope"),
        "{error}"
    );
}
