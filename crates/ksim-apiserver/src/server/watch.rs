//! Watches: a streaming response of newline-delimited watch events,
//! resumed from a resourceVersion (or starting with the current state as
//! ADDED events), filtered by namespace, name and selectors, with
//! bookmarks, `sendInitialEvents`, `timeoutSeconds`, and an ERROR event
//! carrying 410 Expired when the client fell behind the history.

use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, StatusCode, header};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use ksim_clock::Busy;
use ksim_store::{EventKind, StoreError, StoredObject, WatchEvent};

use crate::ApiError;

use super::codec::Output;
use super::conversion;
use super::handlers::ObjectFilter;
use super::handlers::{ResourceRequest, meta_api_version};
use super::registry::collection_of;

/// How often a watch with `allowWatchBookmarks` gets a BOOKMARK.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(30);
/// The longest a watch stays open without `timeoutSeconds`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// What one watch sends.
struct WatchSpec {
    view: ResourceRequest,
    filter: ObjectFilter,
    output: Output,
    bookmarks: bool,
}

/// Starts a watch response.
pub(crate) fn serve(view: ResourceRequest, output: Output) -> Result<Response, ApiError> {
    let filter = view.selectors()?;
    if output == Output::Yaml {
        return Err(ApiError::not_acceptable(
            "only the following media types are accepted: application/json, application/json;stream=watch",
        ));
    }
    let query = &view.query;
    let requested = match query.get("resourceVersion") {
        None | Some("0") => None,
        Some(version) => Some(version.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!("invalid resource version: {version:?}"))
        })?),
    };
    let send_initial = match query.get("sendInitialEvents") {
        Some("true") => true,
        Some(_) => false,
        None => requested.is_none(),
    };
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_TIMEOUT);
    let bookmarks = query.flag("allowWatchBookmarks");
    let explicit_initial = query.get("sendInitialEvents") == Some("true");
    let spec = WatchSpec {
        view,
        filter,
        output,
        bookmarks,
    };
    let (sender, receiver) = mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    // The initial events are work in flight, as the request was: a virtual
    // cluster is not settled until they are sent.
    let busy = spec.view.state.clock.busy();
    tokio::spawn(run(
        busy,
        spec,
        requested,
        send_initial,
        explicit_initial,
        timeout,
        sender,
    ));
    let mut response = Response::new(Body::from_stream(ReceiverStream::new(receiver)));
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

async fn run(
    busy: Busy,
    spec: WatchSpec,
    requested: Option<u64>,
    send_initial: bool,
    explicit_initial: bool,
    timeout: Duration,
    sender: mpsc::Sender<Result<Bytes, std::io::Error>>,
) {
    let store = &spec.view.state.store;
    let collection = collection_of(&spec.view.target.resource);
    let mut first_table = true;
    let mut start = requested;
    if send_initial {
        let page = store.list(
            &collection,
            spec.view.target.namespace.as_deref(),
            None,
            None,
            |object| spec.selects(object),
        );
        for chunk in page.items.chunks(256) {
            let mut batch = BytesMut::new();
            for object in chunk {
                batch.put_slice(&spec.event_line("ADDED", object, &mut first_table));
            }
            if sender.send(Ok(batch.freeze())).await.is_err() {
                return;
            }
        }
        if explicit_initial && spec.bookmarks {
            let line = spec.bookmark(page.revision, true);
            if sender.send(Ok(line)).await.is_err() {
                return;
            }
        }
        start = Some(page.revision);
    }
    let mut cursor = match store.watch(&collection, start) {
        Ok(cursor) => cursor,
        Err(error) => {
            let _ = sender.send(Ok(expired_line(&error))).await;
            return;
        }
    };
    drop(busy);
    // Both timers are on the cluster's clock: on a virtual clock a watch
    // times out (and its client starts another) as cluster time passes.
    let clock = spec.view.state.clock.clone();
    let mut deadline = clock.sleep(timeout);
    let mut bookmark = clock.sleep(BOOKMARK_INTERVAL);
    loop {
        let events = match store.next_events(&mut cursor) {
            Ok(events) => events,
            Err(error) => {
                let _ = sender.send(Ok(expired_line(&error))).await;
                return;
            }
        };
        // One chunk per batch: a burst of writes reaches each watcher in one
        // write, not one per event.
        let mut batch = BytesMut::new();
        for event in &events {
            if let Some(line) = spec.transform(event, &mut first_table) {
                batch.put_slice(&line);
            }
        }
        if !batch.is_empty() {
            if sender.send(Ok(batch.freeze())).await.is_err() {
                return;
            }
            // Events on their way to a client: not settled yet.
            clock.touch();
        }
        tokio::select! {
            biased;
            changed = cursor.changed() => if !changed { return },
            () = &mut bookmark => {
                bookmark.reset(clock.instant() + BOOKMARK_INTERVAL);
                if spec.bookmarks {
                    let line = spec.bookmark(cursor.revision.max(store.revision()), false);
                    if sender.send(Ok(line)).await.is_err() {
                        return;
                    }
                }
            }
            () = &mut deadline => return,
            _ = sender.closed() => return,
        }
    }
}

pub(super) fn expired_line(error: &StoreError) -> Bytes {
    let message = match error {
        StoreError::Expired { requested, oldest } => {
            format!("too old resource version: {requested} ({oldest})")
        }
        other => other.to_string(),
    };
    let status = ApiError::gone(message).to_status();
    line("ERROR", &serde_json::to_vec(&status).unwrap_or_default())
}

pub(super) fn line(kind: &str, object: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(object.len() + 32);
    out.put_slice(b"{\"type\":\"");
    out.put_slice(kind.as_bytes());
    out.put_slice(b"\",\"object\":");
    out.put_slice(object);
    out.put_slice(b"}\n");
    out.freeze()
}

impl WatchSpec {
    fn selects(&self, object: &StoredObject) -> bool {
        if let Some(name) = &self.view.target.name
            && object.name() != name
        {
            return false;
        }
        self.filter.matches(object)
    }

    /// The event as the client sees it, with selector transitions: an
    /// object leaving the selection is DELETED, one entering it ADDED.
    fn transform(&self, event: &WatchEvent, first_table: &mut bool) -> Option<Bytes> {
        if let Some(namespace) = &self.view.target.namespace
            && event.object.namespace() != namespace
        {
            return None;
        }
        let now = self.selects(&event.object);
        let before = event.previous.as_ref().is_some_and(|p| self.selects(p));
        let kind = match (event.kind, before, now) {
            (EventKind::Added, _, true) => "ADDED",
            (EventKind::Deleted, true, _) | (EventKind::Deleted, _, true) => "DELETED",
            (EventKind::Modified, true, true) => "MODIFIED",
            (EventKind::Modified, false, true) => "ADDED",
            (EventKind::Modified, true, false) => "DELETED",
            _ => return None,
        };
        Some(self.event_line(kind, &event.object, first_table))
    }

    fn event_line(&self, kind: &str, object: &StoredObject, first_table: &mut bool) -> Bytes {
        match self.output {
            Output::Table { v1beta1 } => {
                let value = conversion::for_table(&self.view.target.resource, &object.value);
                let table = self.view.table(&[value.as_ref()], !*first_table, v1beta1);
                *first_table = false;
                line(kind, &serde_json::to_vec(&table).unwrap_or_default())
            }
            Output::Metadata { v1beta1 } => line(
                kind,
                &object.partial_metadata_json(meta_api_version(v1beta1)),
            ),
            _ if conversion::is_identity(&self.view.target.resource, &object.value) => {
                line(kind, &object.json)
            }
            _ => {
                let value = conversion::from_storage(&self.view.target.resource, &object.value);
                line(
                    kind,
                    &serde_json::to_vec(value.as_ref()).unwrap_or_default(),
                )
            }
        }
    }

    fn bookmark(&self, revision: u64, initial_events_end: bool) -> Bytes {
        let mut metadata = json!({"resourceVersion": revision.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = json!({
            "kind": self.view.target.resource.kind,
            "apiVersion": self.view.target.resource.api_version(),
            "metadata": metadata,
        });
        line("BOOKMARK", &serde_json::to_vec(&object).unwrap_or_default())
    }
}
