//! The API server's own record of the eviction subresource's outcomes, at a
//! ksim-only, non-resource path (no discovery, no kind in any group; kubectl
//! reaches it with `--raw`):
//!
//! - `GET /ksim/v1alpha1/evictions[?namespace=NS][&limit=N]`: every
//!   eviction and every refusal (429) so far, as `{"kind":
//!   "EvictionRecordList", "apiVersion": "ksim.io/v1alpha1", "metadata":
//!   {"resourceVersion": "42"}, "items": [...]}`, oldest first (`limit`:
//!   at most N items, with no continuation: a client that only wants the
//!   resourceVersion to watch from asks for 1);
//! - `?watch=true` (or `1`): newline-delimited watch events as for any
//!   resource (`ADDED` for each record; `BOOKMARK` with
//!   `allowWatchBookmarks=true`; an `ERROR` Status with code 410 past the
//!   history), from `resourceVersion` or, without one, starting with the
//!   existing records; `timeoutSeconds` ends it.
//!
//! `GET /ksim/v1alpha1/timeline?watch=true` watches the core/v1 Events and
//! these records in one stream (the store gives both one resourceVersion
//! sequence; the same parameters; without `watch`, both lists in one, in
//! order): the web view's timeline reads it, since a browser opens at most
//! six HTTP/1.1 connections to an origin and the page's other watches
//! (nodes, pods, budgets, the filter's selection) need theirs.
//!
//! One record (`kind: EvictionRecord`):
//! `{"metadata": {"name", "namespace", "uid", "resourceVersion",
//! "creationTimestamp"}, "pod": {"name", "namespace", "uid"}, "outcome":
//! "Evicted" | "Refused", "requestedBy": "kubectl drain", "message": "...",
//! "time": RFC 3339}`. `requestedBy` is the Eviction's `requested-by`
//! annotation (as the descheduler and ksim's autoscaler set it), else
//! kubectl's `Kubectl-Command` header, else the User-Agent's product.
//!
//! kube-apiserver records neither evictions nor refusals anywhere: a
//! refusal is only the 429 its client saw. ksim keeps them here rather than
//! as core/v1 Events so that `kubectl get events` shows what a real
//! cluster shows; the web view's timeline and `ksim run`'s `evictions`
//! check read them from here. Records live in the store beside the objects
//! (one resourceVersion sequence) under a collection no resource maps to.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State as AxumState};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, Method, StatusCode, header};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::State;
use super::codec::{self, Output};
use super::handlers::Query;
use super::watch::{expired_line, line};
use crate::ApiError;
use ksim_store::{StoredObject, WatchEvent};

/// The records' path.
pub(crate) const PATH: &str = "/ksim/v1alpha1/evictions";
/// The records and the core/v1 Events in one watch.
pub(crate) const TIMELINE_PATH: &str = "/ksim/v1alpha1/timeline";
/// The store collection holding the records (no resource maps to it).
const RECORDS: &str = "ksim.io/evictionrecords";
/// The store collection of core/v1 (and events.k8s.io/v1) Events.
const EVENTS: &str = "/events";
const API_VERSION: &str = "ksim.io/v1alpha1";
/// How often a watch with `allowWatchBookmarks` gets a BOOKMARK.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(30);
/// The longest a watch stays open without `timeoutSeconds`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// What became of an eviction request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The pod was evicted.
    Evicted,
    /// 429: a budget forbade it (or was still being processed).
    Refused,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Evicted => "Evicted",
            Outcome::Refused => "Refused",
        }
    }
}

/// Records one outcome for the pod `namespace/name`; a failure to record
/// is only logged.
pub(crate) fn record(
    state: &State,
    pod: (&str, &str, Option<&str>),
    outcome: Outcome,
    requested_by: &str,
    message: &str,
) {
    let (namespace, name, uid) = pod;
    let now = state.now();
    let random = state
        .clock
        .random()
        .keyed(&format!("eviction:{namespace}/{name}"));
    let suffix = format!("{:016x}", random.next_u64());
    let value = json!({
        "apiVersion": API_VERSION, "kind": "EvictionRecord",
        "metadata": {
            "name": format!("{name}.{suffix}"),
            "namespace": namespace,
            "uid": random.uuid(),
            "creationTimestamp": now,
        },
        "pod": {"name": name, "namespace": namespace, "uid": uid},
        "outcome": outcome.as_str(),
        "requestedBy": requested_by,
        "message": message,
        "time": now,
    });
    if let Err(error) = state.store.create(RECORDS, value) {
        tracing::debug!(%error, pod = name, "cannot record the eviction");
    }
}

/// `GET /ksim/v1alpha1/evictions`: the list, or a watch.
pub(crate) async fn serve(AxumState(state): AxumState<Arc<State>>, request: Request) -> Response {
    respond(state, request, &[RECORDS], "EvictionRecordList")
}

/// `GET /ksim/v1alpha1/timeline`: the records and the Events, listed or
/// watched together.
pub(crate) async fn serve_timeline(
    AxumState(state): AxumState<Arc<State>>,
    request: Request,
) -> Response {
    respond(state, request, &[RECORDS, EVENTS], "List")
}

fn respond(
    state: Arc<State>,
    request: Request,
    collections: &'static [&'static str],
    list_kind: &str,
) -> Response {
    if request.method() != Method::GET {
        return ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({})",
            request.method()
        ))
        .into_response();
    }
    let query = Query::parse(request.uri().query());
    let namespace = query.get("namespace").map(str::to_string);
    let result = if query.flag("watch") {
        watch(state, &query, namespace, collections)
    } else {
        let limit = query.get("limit").and_then(|l| l.parse::<usize>().ok());
        Ok(list(
            &state,
            namespace.as_deref(),
            collections,
            list_kind,
            limit,
        ))
    };
    result.unwrap_or_else(IntoResponse::into_response)
}

/// The objects of `collections` (of `namespace`; at most `limit` of each,
/// then of all), oldest first, and the store's revision.
fn list_objects(
    state: &State,
    namespace: Option<&str>,
    collections: &[&str],
    limit: Option<usize>,
) -> (Vec<Arc<StoredObject>>, u64) {
    let mut items = Vec::new();
    let mut revision = 0;
    for collection in collections {
        let page = state
            .store
            .list(collection, namespace, None, limit, |_| true);
        revision = revision.max(page.revision);
        items.extend(page.items);
    }
    items.sort_by_key(|o| o.revision);
    if let Some(limit) = limit.filter(|l| *l > 0) {
        items.truncate(limit);
    }
    (items, revision)
}

fn list(
    state: &State,
    namespace: Option<&str>,
    collections: &[&str],
    kind: &str,
    limit: Option<usize>,
) -> Response {
    let (items, revision) = list_objects(state, namespace, collections, limit);
    let items: Vec<&Value> = items.iter().map(|o| &o.value).collect();
    let body = json!({
        "kind": kind, "apiVersion": API_VERSION,
        "metadata": {"resourceVersion": revision.to_string()},
        "items": items,
    });
    codec::respond_value(StatusCode::OK, Output::Json, &body)
}

fn watch(
    state: Arc<State>,
    query: &Query,
    namespace: Option<String>,
    collections: &'static [&'static str],
) -> Result<Response, ApiError> {
    let requested = match query.get("resourceVersion") {
        None | Some("0") => None,
        Some(version) => Some(version.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!("invalid resource version: {version:?}"))
        })?),
    };
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_TIMEOUT);
    let bookmarks = query.flag("allowWatchBookmarks");
    let (sender, receiver) = mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    let spec = WatchSpec {
        namespace,
        collections,
        requested,
        timeout,
        bookmarks,
    };
    tokio::spawn(stream(state, spec, sender));
    let mut response = Response::new(Body::from_stream(ReceiverStream::new(receiver)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// What one watch sends.
struct WatchSpec {
    namespace: Option<String>,
    collections: &'static [&'static str],
    requested: Option<u64>,
    timeout: Duration,
    bookmarks: bool,
}

async fn stream(
    state: Arc<State>,
    spec: WatchSpec,
    sender: mpsc::Sender<Result<Bytes, std::io::Error>>,
) {
    let store = &state.store;
    let namespace = spec.namespace.as_deref();
    let mut start = spec.requested;
    if start.is_none() {
        // The existing objects first, as ADDED, oldest first.
        let (items, revision) = list_objects(&state, namespace, spec.collections, None);
        let mut batch = BytesMut::new();
        for object in items {
            batch.put_slice(&line("ADDED", &object.json));
        }
        if !batch.is_empty() && sender.send(Ok(batch.freeze())).await.is_err() {
            return;
        }
        start = Some(revision);
    }
    let mut cursors = Vec::new();
    for collection in spec.collections {
        match store.watch(collection, start) {
            Ok(cursor) => cursors.push(cursor),
            Err(error) => {
                let _ = sender.send(Ok(expired_line(&error))).await;
                return;
            }
        }
    }
    let clock = state.clock.clone();
    let mut deadline = clock.sleep(spec.timeout);
    let mut bookmark = clock.sleep(BOOKMARK_INTERVAL);
    loop {
        let mut events = Vec::new();
        for cursor in &mut cursors {
            match store.next_events(cursor) {
                Ok(more) => events.extend(more),
                Err(error) => {
                    let _ = sender.send(Ok(expired_line(&error))).await;
                    return;
                }
            }
        }
        events.sort_by_key(WatchEvent::revision);
        let mut batch = BytesMut::new();
        for event in events
            .iter()
            .filter(|e| namespace.is_none_or(|ns| e.object.namespace() == ns))
        {
            batch.put_slice(&line(event.kind.as_str(), &event.object.json));
        }
        if !batch.is_empty() {
            if sender.send(Ok(batch.freeze())).await.is_err() {
                return;
            }
            clock.touch();
        }
        let changed = futures::future::select_all(
            cursors.iter_mut().map(|cursor| Box::pin(cursor.changed())),
        );
        tokio::select! {
            biased;
            (changed, _, _) = changed => if !changed { return },
            () = &mut bookmark => {
                bookmark.reset(clock.instant() + BOOKMARK_INTERVAL);
                if spec.bookmarks {
                    let object = json!({
                        "kind": "EvictionRecord", "apiVersion": API_VERSION,
                        "metadata": {"resourceVersion": store.revision().to_string()},
                    });
                    let bytes = serde_json::to_vec(&object).unwrap_or_default();
                    if sender.send(Ok(line("BOOKMARK", &bytes))).await.is_err() {
                        return;
                    }
                }
            }
            () = &mut deadline => return,
            _ = sender.closed() => return,
        }
    }
}
