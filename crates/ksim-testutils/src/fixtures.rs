//! Objects the end-to-end tests share: the Widget CustomResourceDefinition
//! (`widgets.example.com`) and its Widgets.

use serde_json::{Value, json};

/// The Widget CRD's name.
pub const WIDGET_CRD_NAME: &str = "widgets.example.com";

/// The Widget CustomResourceDefinition: group `example.com`, version `v1`,
/// namespaced; `spec.size` and `status.count` are integers, `status` a
/// subresource.
pub fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": WIDGET_CRD_NAME},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                    "status": {"type": "object", "properties": {"count": {"type": "integer"}}},
                }}},
            }],
        },
    })
}

/// [`widget_crd`] as a manifest for `kubectl apply -f` (JSON, which kubectl
/// reads as YAML).
pub fn widget_crd_manifest() -> String {
    widget_crd().to_string()
}

/// Widget `name` in `namespace` of `spec.size` `size`.
pub fn widget(name: &str, namespace: &str, size: i64) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"size": size}})
}

/// `object` with `metadata.uid` set to `uid` (as a recording holds it).
pub fn with_uid(mut object: Value, uid: &str) -> Value {
    object["metadata"]["uid"] = json!(uid);
    object
}

/// The text of a `ksim record` recording (format v1, started
/// 2026-01-01T00:00:00Z) of `changes`: (t in nanoseconds, type, object).
pub fn recording(changes: &[(i64, &str, Value)]) -> String {
    let mut text =
        String::from("{\"ksimRecording\":\"v1\",\"startTime\":\"2026-01-01T00:00:00Z\"}\n");
    for (t, kind, object) in changes {
        text.push_str(&json!({"t": t, "type": kind, "object": object}).to_string());
        text.push('\n');
    }
    text
}

/// A recording (see [`recording`]) in which the Widget CRD is created
/// (uid `crd-1`), Widget `first` created and changed, the CRD deleted
/// (`first` with it), created again (`crd-2`), and Widget `second`
/// created (size 3) and changed (size 4): eight changes, one a nanosecond.
pub fn widget_crd_created_again() -> String {
    let definition = |uid: &str| with_uid(widget_crd(), uid);
    let widget =
        |name: &str, size: i64| with_uid(widget(name, "default", size), &format!("uid-{name}"));
    let changes = [
        ("ADDED", definition("crd-1")),
        ("ADDED", widget("first", 1)),
        ("MODIFIED", widget("first", 2)),
        ("DELETED", definition("crd-1")),
        ("DELETED", widget("first", 2)),
        ("ADDED", definition("crd-2")),
        ("ADDED", widget("second", 3)),
        ("MODIFIED", widget("second", 4)),
    ];
    let changes: Vec<_> = (0..)
        .zip(changes)
        .map(|(t, (kind, object))| (t, kind, object))
        .collect();
    recording(&changes)
}
