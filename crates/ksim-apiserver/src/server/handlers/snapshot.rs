//! `GET /ksim/v1alpha1/snapshot/<collection path>`: a collection read as
//! the documents of a snapshot file, so that `ksim snapshot save` writes
//! what it receives instead of parsing and re-serializing every object. A
//! ksim-only, non-resource path (kubectl reaches it with `--raw`); a cluster
//! without it answers 404 (a real kube-apiserver: 404, or 403 where RBAC
//! guards non-resource paths) and the save falls back to paged lists.
//!
//! The collection path is that of a list (`/api/v1/pods`,
//! `/apis/apps/v1/namespaces/NS/deployments`); `labelSelector` and
//! `fieldSelector` narrow it as on a list. The answer, 200 with
//! `Content-Type: application/yaml`, is multi-document YAML in flow style:
//! per object in key order a line `---` then the object as compact JSON on
//! one line, in the version the path names, with `apiVersion` and `kind`
//! set and the server-owned fields a restore cannot set
//! (`metadata.resourceVersion`, `metadata.managedFields`,
//! `metadata.selfLink`) left out. Every object is read from one state of
//! the store (no paging), and serialized as the body is streamed, a few
//! hundred kilobytes at a time, each chunk ending at a document's end.

use std::borrow::Cow;
use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State as AxumState};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode, header};
use serde_json::{Map, Value};

use ksim_store::StoredObject;

use crate::ApiError;
use crate::resources::ResourceInfo;

use super::super::State;
use super::super::conversion;
use super::super::path::{self, Target};
use super::{Query, ResourceRequest};

/// The path under which collections are read as snapshot documents.
pub(crate) const SNAPSHOT_PATH: &str = "/ksim/v1alpha1/snapshot";

/// The route of [`serve`].
pub(crate) const SNAPSHOT_ROUTE: &str = "/ksim/v1alpha1/snapshot/{*collection}";

/// What one chunk of the streamed body holds, at least (the document that
/// crosses it is finished first).
const CHUNK_BYTES: usize = 256 * 1024;

/// Metadata fields a snapshot leaves out: set by the server on every write.
const SERVER_OWNED: &[&str] = &["resourceVersion", "managedFields", "selfLink"];

/// `GET /ksim/v1alpha1/snapshot/<collection path>`.
pub(crate) async fn serve(AxumState(state): AxumState<Arc<State>>, request: Request) -> Response {
    match documents(state, request) {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

fn documents(state: Arc<State>, request: Request) -> Result<Response, ApiError> {
    let (parts, _) = request.into_parts();
    if parts.method != Method::GET {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({})",
            parts.method
        )));
    }
    let collection_path = parts
        .uri
        .path()
        .strip_prefix(SNAPSHOT_PATH)
        .unwrap_or_default();
    let registry = state.registry();
    let Target::Resource(target) = path::parse(collection_path, &registry)? else {
        return Err(ApiError::not_found_path());
    };
    if target.name.is_some() || target.subresource.is_some() || target.watch_prefix {
        return Err(ApiError::not_found_path());
    }
    let request = ResourceRequest {
        state: state.clone(),
        registry,
        target,
        query: Query::parse(parts.uri.query()),
        headers: HeaderMap::new(),
    };
    let filter = request.selectors()?;
    let page = state.store.list(
        &request.collection(),
        request.target.namespace.as_deref(),
        None,
        None,
        |object| filter.is_empty() || filter.matches(object),
    );
    let resource = request.target.resource.clone();
    let mut items = page.items.into_iter().peekable();
    let chunks = futures::stream::poll_fn(move |_| {
        if items.peek().is_none() {
            return std::task::Poll::Ready(None);
        }
        let mut out = Vec::with_capacity(CHUNK_BYTES + 16 * 1024);
        for object in items.by_ref() {
            write_document(&mut out, &resource, &object);
            if out.len() >= CHUNK_BYTES {
                break;
            }
        }
        std::task::Poll::Ready(Some(Ok::<_, Infallible>(Bytes::from(out))))
    });
    let mut response = Body::from_stream(chunks).into_response();
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/yaml"),
    );
    Ok(response)
}

/// Appends `---` and the object as a snapshot keeps it, on one line.
fn write_document(out: &mut Vec<u8>, resource: &ResourceInfo, object: &StoredObject) {
    let value = if conversion::is_identity(resource, &object.value) {
        Cow::Borrowed(&object.value)
    } else {
        conversion::from_storage(resource, &object.value)
    };
    let api_version = resource.api_version();
    let typed = value["apiVersion"].as_str() == Some(api_version.as_str())
        && value["kind"].as_str() == Some(resource.kind.as_str());
    let value = match value {
        value if typed => value,
        // Set as a client would set them on a listed item.
        value => {
            let mut value = value.into_owned();
            if let Some(map) = value.as_object_mut() {
                map.insert("apiVersion".into(), Value::String(api_version));
                map.insert("kind".into(), Value::String(resource.kind.clone()));
            }
            Cow::Owned(value)
        }
    };
    out.extend_from_slice(b"---\n");
    write_without_server_owned(out, &value);
    out.push(b'\n');
}

/// Appends the compact JSON of `object` without [`SERVER_OWNED`] metadata:
/// what serializing it after removing them gives.
fn write_without_server_owned(out: &mut Vec<u8>, object: &Value) {
    let Value::Object(fields) = object else {
        write_json(out, object);
        return;
    };
    out.push(b'{');
    for (n, (name, field)) in fields.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        write_json(out, name);
        out.push(b':');
        match field {
            Value::Object(metadata) if name == "metadata" => write_metadata(out, metadata),
            other => write_json(out, other),
        }
    }
    out.push(b'}');
}

fn write_metadata(out: &mut Vec<u8>, metadata: &Map<String, Value>) {
    out.push(b'{');
    let kept = metadata
        .iter()
        .filter(|(name, _)| !SERVER_OWNED.contains(&name.as_str()));
    for (n, (name, field)) in kept.enumerate() {
        if n > 0 {
            out.push(b',');
        }
        write_json(out, name);
        out.push(b':');
        write_json(out, field);
    }
    out.push(b'}');
}

/// Appends compact JSON (serializing into a Vec cannot fail).
fn write_json(out: &mut Vec<u8>, value: &(impl serde::Serialize + ?Sized)) {
    if let Err(error) = serde_json::to_writer(&mut *out, value) {
        tracing::error!(%error, "cannot serialize a JSON value");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn server_owned_metadata_is_left_out_as_removing_it_would() {
        let cases = [
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "uid": "u",
                "resourceVersion": "7", "managedFields": "[{}]", "selfLink": "/x", "labels": {"a": "é\n"}},
                "spec": {"x": [1, 2.5, null]}}),
            json!({"metadata": {"resourceVersion": "7"}}),
            json!({"metadata": "odd", "b": 1}),
            json!({}),
        ];
        for object in cases {
            let mut out = Vec::new();
            write_without_server_owned(&mut out, &object);
            let mut expected = object.clone();
            if let Some(metadata) = expected.get_mut("metadata").and_then(Value::as_object_mut) {
                for field in SERVER_OWNED {
                    metadata.remove(*field);
                }
            }
            assert_eq!(
                String::from_utf8(out).expect("utf-8"),
                serde_json::to_string(&expected).expect("serializable"),
                "{object}"
            );
        }
    }
}
