//! The HTTP server: the axum router, health and version endpoints,
//! discovery, OpenAPI, and the REST handlers over the store.
//!
//! Every `/api` and `/apis` request goes through one handler that parses the
//! path against the current [`registry::Registry`] snapshot and dispatches
//! on the verb; the per-kind rules live in [`strategy`].
//!
//! Time is the cluster's [`Clock`]: the timestamps the server writes
//! (creationTimestamp, deletionTimestamp, managedFields, conditions,
//! events), the ages of `kubectl get`, the timers of watches; generated
//! names and uids come from the clock's random source. ksim's own
//! non-resource path `/ksim/v1alpha1/clock` shows the clock and
//! `/ksim/v1alpha1/clock/advance` moves a virtual one ([`clock`]);
//! `/ksim/v1alpha1/evictions` lists and watches the outcomes of the
//! eviction subresource ([`evictions`]).

mod bootstrap;
mod clock;
#[cfg(test)]
mod clock_tests;
mod codec;
mod conversion;
mod discovery;
mod evictions;
#[cfg(test)]
mod evictions_tests;
mod handlers;
mod path;
mod registry;
mod strategy;
mod watch;

use std::sync::{Arc, Mutex, RwLock};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State as AxumState};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::{Value, json};

use crate::openapi::OpenApi;
pub use handlers::bulk::{BulkCreated, BulkItem};
use ksim_clock::Clock;
use ksim_store::Store;
use registry::Registry;

/// Shared state of one API server.
pub(crate) struct State {
    pub(crate) store: Store,
    registry: RwLock<Arc<Registry>>,
    /// Made on first use; its documents are built on the first request
    /// for one, so that the server answers before they exist.
    openapi: RwLock<Option<OpenApi>>,
    /// The next ClusterIP and NodePort to hand out.
    allocations: Mutex<Allocations>,
    /// The cluster's clock: the time written into objects, the timers of
    /// watches, and the random source of generated names and uids.
    pub(crate) clock: Clock,
    /// Held by the advance in progress: advances run one at a time.
    advancing: tokio::sync::Mutex<()>,
}

struct Allocations {
    next_cluster_ip: u32,
    next_node_port: u16,
}

impl State {
    /// The current registry snapshot.
    pub(crate) fn registry(&self) -> Arc<Registry> {
        self.registry
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The current OpenAPI documents.
    pub(crate) fn openapi(&self) -> OpenApi {
        if let Some(openapi) = self
            .openapi
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            return openapi.clone();
        }
        let mut slot = self.openapi.write().unwrap_or_else(|e| e.into_inner());
        slot.get_or_insert_with(|| {
            let registry = self.registry();
            OpenApi::new(registry.resources(), registry.crds())
        })
        .clone()
    }

    /// Rebuilds the registry and OpenAPI documents from the stored CRDs.
    pub(crate) fn reload_custom_resources(&self) {
        let crds: Vec<Value> = self
            .store
            .list(
                "apiextensions.k8s.io/customresourcedefinitions",
                None,
                None,
                None,
                |_| true,
            )
            .items
            .iter()
            .map(|o| o.value.clone())
            .collect();
        let registry = Arc::new(Registry::new(crds));
        // Documents not built yet are built from the new registry on first
        // use (so the CRDs created at boot cost nothing until asked for).
        let openapi = self
            .openapi
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .map(|openapi| openapi.with_crds(registry.crds()));
        *self.registry.write().unwrap_or_else(|e| e.into_inner()) = registry;
        *self.openapi.write().unwrap_or_else(|e| e.into_inner()) = openapi;
    }

    /// Now on the cluster's clock, as Kubernetes writes times (RFC 3339,
    /// whole seconds).
    pub(crate) fn now(&self) -> String {
        self.clock.now_rfc3339()
    }

    /// The next free ClusterIP (from 10.96.0.0/12; 10.96.0.1 is the
    /// `kubernetes` service's).
    pub(crate) fn allocate_cluster_ip(&self) -> String {
        let mut allocations = self.allocations.lock().unwrap_or_else(|e| e.into_inner());
        let n = allocations.next_cluster_ip;
        allocations.next_cluster_ip += 1;
        let base: u32 = (10 << 24) | (96 << 16);
        std::net::Ipv4Addr::from(base + n).to_string()
    }

    /// The next free NodePort (30000-32767).
    pub(crate) fn allocate_node_port(&self) -> u16 {
        let mut allocations = self.allocations.lock().unwrap_or_else(|e| e.into_inner());
        let port = allocations.next_node_port;
        allocations.next_node_port = if port >= 32767 { 30000 } else { port + 1 };
        port
    }
}

/// A ksim API server: its store and registry. Cheap to clone.
#[derive(Clone)]
pub struct ApiServer {
    state: Arc<State>,
}

impl Default for ApiServer {
    fn default() -> Self {
        Self::new()
    }
}

impl ApiServer {
    /// A new cluster with the built-in namespaces, priority classes and the
    /// `kubernetes` service.
    pub fn new() -> Self {
        Self::with_clock(Clock::real())
    }

    /// A new cluster on `clock` (the same clock its components use).
    pub fn with_clock(clock: Clock) -> Self {
        let registry = Arc::new(Registry::new(Vec::new()));
        let state = Arc::new(State {
            store: Store::default(),
            registry: RwLock::new(registry),
            openapi: RwLock::new(None),
            allocations: Mutex::new(Allocations {
                next_cluster_ip: 2,
                next_node_port: 30000,
            }),
            clock,
            advancing: tokio::sync::Mutex::new(()),
        });
        bootstrap::create_initial_objects(&state);
        // The schemas (for managedFields, patches, field validation) are
        // built by the first write that needs them and the OpenAPI documents
        // by the first request for one: an idle server holds neither.
        ApiServer { state }
    }

    /// Creates `items` in process, as `POST /ksim/v1alpha1/objects` does
    /// (each as a POST to its collection would, its status merged in), by
    /// field manager `manager`, without encoding them: how a cluster loads
    /// a snapshot before its components start. One result per item, in order.
    ///
    /// The results (objects, errors) are those of creating the items one
    /// after another in order. Namespaces, ServiceAccounts, PriorityClasses,
    /// CRDs and Services (whose creation changes how later items are
    /// created) and items without a name are created alone, after every
    /// item before them; the items between two of those are created on
    /// every core, the items of one kind and name on one thread in their
    /// order, so the resourceVersions of different objects may interleave.
    /// An item may rely on earlier items of those kinds (a pod on its
    /// namespace, ServiceAccount and PriorityClass), not on other items.
    pub fn create_objects(
        &self,
        items: Vec<BulkItem>,
        manager: &str,
    ) -> Vec<Result<BulkCreated, crate::ApiError>> {
        let _busy = self.state.clock.busy();
        handlers::bulk::create_items(&self.state, items, manager)
    }

    /// How many handles share this server's state (this one, its clones,
    /// the routers and clients serving it): 1 once only this handle is
    /// left, so that dropping it frees the store there and then.
    pub fn handles(&self) -> usize {
        Arc::strong_count(&self.state)
    }

    /// The cluster's clock.
    pub fn clock(&self) -> &Clock {
        &self.state.clock
    }

    /// The axum router serving the whole API. Usable as a `kube::Client`
    /// transport as it is.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route("/livez", get(|| async { "ok" }))
            .route("/readyz", get(|| async { "ok" }))
            .route("/version", get(version))
            .route("/openapi/v3", get(openapi_index))
            .route("/openapi/v3/{*path}", get(openapi_document))
            .route("/openapi/v2", get(openapi_v2))
            .route(clock::CLOCK_PATH, any(clock::get))
            .route(clock::ADVANCE_PATH, any(clock::advance))
            .route(evictions::PATH, any(evictions::serve))
            .route(evictions::TIMELINE_PATH, any(evictions::serve_timeline))
            .route(handlers::bulk::OBJECTS_PATH, any(handlers::bulk::create))
            .route(
                handlers::snapshot::SNAPSHOT_ROUTE,
                any(handlers::snapshot::serve),
            )
            .route("/api", any(handlers::handle))
            .route("/api/{*rest}", any(handlers::handle))
            .route("/apis", any(handlers::handle))
            .route("/apis/{*rest}", any(handlers::handle))
            .fallback(not_found)
            .layer(axum::middleware::from_fn_with_state(
                self.state.clone(),
                in_flight,
            ))
            .with_state(self.state.clone())
    }
}

/// A request in flight keeps a virtual cluster from counting as settled
/// (until its response starts: a watch's stream is not counted). An advance
/// of the clock is not: it waits for the cluster to settle.
async fn in_flight(
    AxumState(state): AxumState<Arc<State>>,
    request: Request,
    next: axum::middleware::Next,
) -> Response {
    if request.uri().path() == clock::ADVANCE_PATH {
        return next.run(request).await;
    }
    let _busy = state.clock.busy();
    next.run(request).await
}

async fn version() -> Response {
    let body = json!({
        "major": "1",
        "minor": "33",
        "gitVersion": crate::KUBERNETES_VERSION,
        "gitCommit": "ksim",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24",
        "compiler": "gc",
        "platform": "linux/amd64",
    });
    codec::respond_value(StatusCode::OK, codec::Output::Json, &body)
}

async fn not_found() -> Response {
    crate::ApiError::not_found_path().into_response()
}

async fn openapi_index(AxumState(state): AxumState<Arc<State>>) -> Response {
    let mut response = codec::respond(StatusCode::OK, "application/json", state.openapi().index());
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    response
}

async fn openapi_document(AxumState(state): AxumState<Arc<State>>, request: Request) -> Response {
    let path = request
        .uri()
        .path()
        .trim_start_matches("/openapi/v3/")
        .to_string();
    let requested_hash = request.uri().query().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("hash="))
            .map(str::to_string)
    });
    let Some((bytes, hash)) = state.openapi().document(&path) else {
        return crate::ApiError::not_found_path().into_response();
    };
    match OpenApi::caching(&path, requested_hash.as_deref(), &hash) {
        crate::openapi::DocumentCaching::Redirect(location) => {
            let mut response = Response::new(Body::empty());
            *response.status_mut() = StatusCode::MOVED_PERMANENTLY;
            if let Ok(value) = HeaderValue::from_str(&location) {
                response.headers_mut().insert(header::LOCATION, value);
            }
            response
        }
        caching => {
            let mut response = codec::respond(StatusCode::OK, "application/json", bytes);
            if let Some(control) = caching.cache_control() {
                response
                    .headers_mut()
                    .insert(header::CACHE_CONTROL, HeaderValue::from_static(control));
            }
            if caching == crate::openapi::DocumentCaching::Immutable {
                // A year from the cluster's now, as kube-apiserver's is from its own.
                let expires = (state.clock.now() + chrono::Duration::days(365))
                    .format("%a, %d %b %Y %H:%M:%S GMT")
                    .to_string();
                if let Ok(value) = HeaderValue::from_str(&expires) {
                    response.headers_mut().insert(header::EXPIRES, value);
                }
            }
            response
        }
    }
}

/// `GET /openapi/v2`: protobuf when the client asks for it (kubectl's
/// validation does), else JSON, else 406; `If-None-Match` with the current
/// ETag is 304.
async fn openapi_v2(AxumState(state): AxumState<Arc<State>>, headers: HeaderMap) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let Some(protobuf) = crate::openapi::negotiate_v2(accept) else {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::NOT_ACCEPTABLE;
        return response;
    };
    let (bytes, etag) = state.openapi().v2(protobuf);
    let content_type = if protobuf {
        crate::openapi::V2_PROTOBUF
    } else {
        "application/json"
    };
    let unchanged = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tag| tag == etag);
    let mut response = if unchanged {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        response
    } else {
        codec::respond(StatusCode::OK, content_type, bytes)
    };
    if let Ok(value) = HeaderValue::from_str(&etag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
        .headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    response
}

/// Serves `server` on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, server: ApiServer) -> std::io::Result<()> {
    axum::serve(listener, server.router()).await
}
