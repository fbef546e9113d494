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
    out.extend_from_slice(b"---\n");
    let api_version = resource.api_version();
    let identity = conversion::is_identity(resource, &object.value);
    let typed = object.value["apiVersion"].as_str() == Some(api_version.as_str())
        && object.value["kind"].as_str() == Some(resource.kind.as_str());
    if identity
        && typed
        && let Some(Value::Object(metadata)) = object.value.get("metadata")
        && let Some((start, end)) = metadata_span(&object.json)
    {
        // The bytes serialized at write time, but for metadata.
        out.extend_from_slice(&object.json[..start]);
        write_metadata(out, metadata);
        out.extend_from_slice(&object.json[end..]);
        out.push(b'\n');
        return;
    }
    let value = if identity {
        Cow::Borrowed(&object.value)
    } else {
        conversion::from_storage(resource, &object.value)
    };
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
    write_without_server_owned(out, &value);
    out.push(b'\n');
}

/// Where the value of the top-level `metadata` field of compact JSON (as
/// serde_json writes it: no white space) starts and ends; `None` when there
/// is none or the text is not such JSON.
fn metadata_span(json: &[u8]) -> Option<(usize, usize)> {
    if json.first() != Some(&b'{') {
        return None;
    }
    let mut at = 1;
    loop {
        if *json.get(at)? != b'"' {
            return None;
        }
        let key_end = skip_value(json, at)?;
        let key = json.get(at + 1..key_end - 1)?;
        if *json.get(key_end)? != b':' {
            return None;
        }
        let value_start = key_end + 1;
        let value_end = skip_value(json, value_start)?;
        if key == b"metadata" {
            return (json.get(value_start) == Some(&b'{')).then_some((value_start, value_end));
        }
        match json.get(value_end)? {
            b',' => at = value_end + 1,
            _ => return None,
        }
    }
}

/// The end of the compact JSON value starting at `at`.
fn skip_value(json: &[u8], at: usize) -> Option<usize> {
    match *json.get(at)? {
        b'"' => skip_string(json, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                match *json.get(i)? {
                    b'"' => {
                        i = skip_string(json, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            // A number, true, false or null: up to what follows it.
            let length = json
                .get(at..)?
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']'))?;
            Some(at + length)
        }
    }
}

/// The end of the JSON string starting (with its quote) at `at`.
fn skip_string(json: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    loop {
        match *json.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
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

    #[test]
    fn the_stored_bytes_are_copied_around_fresh_metadata() {
        let resource = crate::resources::built_in_resources()
            .into_iter()
            .find(|r| r.group.is_empty() && r.kind == "Pod")
            .expect("pods");
        let managed = json!([{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {"f:a\"{[": {}}}, "f:spec": {}}}]);
        let cases = [
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n", "uid": "u",
                "resourceVersion": "7", "managedFields": managed, "labels": {"a\"{[": "}]\\\"", "b": "é"},
                "ownerReferences": [{"uid": "o", "controller": true}]},
                "spec": {"nodeName": "x", "priority": -3, "f": 2.5e-7, "containers": [{"name": "c"}]},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
            json!({"apiVersion": "v1", "a": null, "b": [true, {"c": [1, []]}], "kind": "Pod", "metadata": {}, "z": {}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": "odd"}),
            json!({"apiVersion": "v1", "kind": "Other", "metadata": {"name": "p", "resourceVersion": "1"}}),
            json!({"apiVersion": "v2", "kind": "Pod", "metadata": {"name": "p", "resourceVersion": "1"}}),
        ];
        for object in cases {
            let stored = StoredObject::dry_run(object.clone());
            let mut out = Vec::new();
            write_document(&mut out, &resource, &stored);
            let mut expected = stored.value.clone();
            expected["apiVersion"] = json!("v1");
            expected["kind"] = json!("Pod");
            let mut want = b"---\n".to_vec();
            write_without_server_owned(&mut want, &expected);
            want.push(b'\n');
            assert_eq!(
                String::from_utf8(out).expect("utf-8"),
                String::from_utf8(want).expect("utf-8"),
                "{object}"
            );
        }
        let json = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"a":"}\"{"},"spec":{}}"#;
        let (start, end) = metadata_span(json).expect("a span");
        assert_eq!(&json[start..end], br#"{"a":"}\"{"}"#);
        for broken in [&b"{"[..], b"[]", br#"{"metadata":"#, br#"{"a":1"#, b""] {
            assert_eq!(metadata_span(broken), None);
        }
    }
}
