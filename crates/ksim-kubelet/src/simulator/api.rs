//! The simulator's requests to the API server: object paths, patches of any
//! type (with optional impersonation), deletion, events and leases, sent as
//! plain HTTP requests through a `kube::Client`.

use http::Request;
use serde_json::{Value, json};

use crate::error::KubeletError;
use crate::stage::PatchType;

/// The kinds of object the simulator drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SimulatedKind {
    /// `v1` Node.
    Node,
    /// `v1` Pod.
    Pod,
}

impl SimulatedKind {
    /// The kind's name.
    pub fn kind(self) -> &'static str {
        match self {
            SimulatedKind::Node => "Node",
            SimulatedKind::Pod => "Pod",
        }
    }
}

/// The URL path of one Node or Pod (`key` is `name` or `namespace/name`), or of its subresource.
pub fn object_path(kind: SimulatedKind, key: &str, subresource: Option<&str>) -> String {
    let base = match kind {
        SimulatedKind::Node => format!("/api/v1/nodes/{key}"),
        SimulatedKind::Pod => {
            let (namespace, name) = key.split_once('/').unwrap_or(("default", key));
            format!("/api/v1/namespaces/{namespace}/pods/{name}")
        }
    };
    match subresource {
        Some(sub) if !sub.is_empty() => format!("{base}/{sub}"),
        _ => base,
    }
}

/// Whether `error` is the server's 404.
pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// Whether `error` is the server's 409.
pub fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

fn body_bytes(body: &Value) -> Vec<u8> {
    serde_json::to_vec(body).unwrap_or_default()
}

fn build(
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
    impersonate: Option<&str>,
) -> Result<Request<Vec<u8>>, KubeletError> {
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::ACCEPT, "application/json");
    if let Some(user) = impersonate.filter(|u| !u.is_empty()) {
        builder = builder.header("Impersonate-User", user);
    }
    builder
        .body(body)
        .map_err(|e| KubeletError::api(format!("{method} {path}"), e))
}

/// Sends a patch to `path`; the server's answer is the patched object.
pub async fn patch(
    client: &kube::Client,
    path: &str,
    patch_type: PatchType,
    body: &Value,
    impersonate: Option<&str>,
) -> Result<Value, kube::Error> {
    let request = build(
        "PATCH",
        &patch_target(path, patch_type),
        patch_type.content_type(),
        body_bytes(body),
        impersonate,
    )
    .map_err(|e| kube::Error::Service(Box::new(e)))?;
    client.request::<Value>(request).await
}

/// Sends a patch to `path` and discards the server's answer (cheaper than [`patch`]
/// when the patched object is not needed: it is never decoded).
pub async fn patch_discarding(
    client: &kube::Client,
    path: &str,
    patch_type: PatchType,
    body: Vec<u8>,
) -> Result<(), kube::Error> {
    let request = build(
        "PATCH",
        &patch_target(path, patch_type),
        patch_type.content_type(),
        body,
        None,
    )
    .map_err(|e| kube::Error::Service(Box::new(e)))?;
    client.request_text(request).await.map(drop)
}

/// The URL of a patch of `path`: server-side apply names the simulator's field manager.
fn patch_target(path: &str, patch_type: PatchType) -> String {
    if patch_type == PatchType::Apply {
        format!("{path}?fieldManager=ksim-kubelet&force=true")
    } else {
        path.to_owned()
    }
}

/// Deletes the object at `path` at once (gracePeriodSeconds 0), only if its UID is still `uid`.
pub async fn delete_now(
    client: &kube::Client,
    path: &str,
    uid: Option<&str>,
) -> Result<(), kube::Error> {
    let mut options = json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0});
    if let Some(uid) = uid {
        options["preconditions"] = json!({"uid": uid});
    }
    let request = build(
        "DELETE",
        path,
        "application/json",
        body_bytes(&options),
        None,
    )
    .map_err(|e| kube::Error::Service(Box::new(e)))?;
    client.request::<Value>(request).await.map(|_| ())
}

/// Creates `body` by POST to `path`; the server's answer (the created object)
/// is discarded unread.
pub async fn create(client: &kube::Client, path: &str, body: &Value) -> Result<(), kube::Error> {
    let request = build("POST", path, "application/json", body_bytes(body), None)
        .map_err(|e| kube::Error::Service(Box::new(e)))?;
    client.request_text(request).await.map(drop)
}

/// Reads the object at `path`.
pub async fn get(client: &kube::Client, path: &str) -> Result<Value, kube::Error> {
    let request = build("GET", path, "application/json", Vec::new(), None)
        .map_err(|e| kube::Error::Service(Box::new(e)))?;
    client.request::<Value>(request).await
}

/// A core/v1 Event about `object` (a Node or Pod as JSON), as the simulator records it,
/// named `<object>.<unique hex>` as client-go's recorder names them.
pub fn event_for(
    kind: SimulatedKind,
    object: &Value,
    event_type: &str,
    reason: &str,
    message: &str,
    now: &str,
    unique: u64,
) -> Value {
    let meta = |field: &str| {
        object
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let name = meta("name");
    let namespace = match kind {
        SimulatedKind::Node => "default".to_owned(),
        SimulatedKind::Pod => meta("namespace"),
    };
    let mut involved = json!({
        "apiVersion": "v1",
        "kind": kind.kind(),
        "name": name,
        "uid": meta("uid"),
        "resourceVersion": meta("resourceVersion"),
    });
    if kind == SimulatedKind::Pod {
        involved["namespace"] = json!(namespace);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": format!("{name}.{unique:x}"), "namespace": namespace},
        "involvedObject": involved,
        "type": if event_type.is_empty() { "Normal" } else { event_type },
        "reason": reason,
        "message": message,
        "source": {"component": "ksim-kubelet"},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_nodes_pods_and_subresources() {
        let cases = [
            (SimulatedKind::Node, "n1", None, "/api/v1/nodes/n1"),
            (
                SimulatedKind::Node,
                "n1",
                Some("status"),
                "/api/v1/nodes/n1/status",
            ),
            (
                SimulatedKind::Pod,
                "ns/p",
                Some("status"),
                "/api/v1/namespaces/ns/pods/p/status",
            ),
            (
                SimulatedKind::Pod,
                "ns/p",
                Some(""),
                "/api/v1/namespaces/ns/pods/p",
            ),
        ];
        for (kind, key, sub, want) in cases {
            assert_eq!(object_path(kind, key, sub), want);
        }
    }

    #[test]
    fn node_events_go_to_default_namespace_pod_events_to_the_pods() {
        let node = json!({"metadata": {"name": "n1", "uid": "u1"}});
        let event = event_for(SimulatedKind::Node, &node, "", "Ready", "m", "t", 255);
        assert_eq!(event["metadata"]["namespace"], "default");
        assert_eq!(event["type"], "Normal");
        assert_eq!(event["metadata"]["name"], "n1.ff");
        assert!(event["involvedObject"].get("namespace").is_none());
        let pod = json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u2"}});
        let event = event_for(SimulatedKind::Pod, &pod, "Warning", "Failed", "m", "t", 1);
        assert_eq!(event["metadata"]["namespace"], "ns");
        assert_eq!(event["involvedObject"]["namespace"], "ns");
        assert_eq!(event["metadata"]["name"], "p.1");
    }
}
