//! What kube-apiserver's typed round trip drops from a written object: an
//! empty (or null) list or map in a field Go tags `omitempty`. A body or a
//! patched object is decoded into Go structs and encoded again, so
//! `command: []` disappears while `containers: []` (no `omitempty`) stays.
//! Driven by the same wire facts as the protobuf decoder (the Go struct
//! tags of k8s.io/api), for the kinds those facts cover.

use std::collections::HashMap;
use std::sync::OnceLock;

use foldhash::fast::FixedState;
use serde_json::{Map, Value};

use super::facts::MESSAGES;
use super::schema::{self, INLINE, Kind, OMIT, REP};

/// Drops the empty `omitempty` lists and maps of a built-in object, at any
/// depth, as decoding it into its Go type and encoding it again would.
/// Objects of kinds the facts do not cover are left as they are.
pub(crate) fn drop_empty_fields(object: &mut Value) {
    let message = match (object["apiVersion"].as_str(), object["kind"].as_str()) {
        (Some(api_version), Some(kind)) => {
            schema::root_message(api_version, kind).and_then(position)
        }
        _ => None,
    };
    if let (Some(message), Some(map)) = (message, object.as_object_mut()) {
        prune_message(index(message), map);
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(list) => list.is_empty(),
        Value::Object(map) => map.is_empty(),
        _ => false,
    }
}

/// What pruning needs of one JSON field of a message.
#[derive(Debug, Clone, Copy)]
struct Field {
    /// `omitempty` on a list or map: dropped when empty.
    omit_when_empty: bool,
    /// Its value: a message, a list of messages or a map of messages (by
    /// position in [`MESSAGES`]), or none of those.
    walk: Walk,
}

#[derive(Debug, Clone, Copy)]
enum Walk {
    No,
    Message(usize),
    List(usize),
    Map(usize),
}

/// A message's fields by JSON name, those of its inline messages among
/// them (in the message's field order, as a name may come twice): an
/// object is pruned by looking its few keys up here, instead of looking
/// every field of the message up in the object.
#[derive(Debug, Default)]
struct MessageIndex {
    fields: HashMap<&'static str, Vec<Field>, FixedState>,
}

/// Where the message of this full protobuf name is in [`MESSAGES`].
fn position(name: &str) -> Option<usize> {
    MESSAGES.binary_search_by(|facts| facts.name.cmp(name)).ok()
}

/// The index of the message at `at` in [`MESSAGES`], built once.
fn index(at: usize) -> &'static MessageIndex {
    static INDEXES: OnceLock<Vec<OnceLock<MessageIndex>>> = OnceLock::new();
    let indexes = INDEXES.get_or_init(|| MESSAGES.iter().map(|_| OnceLock::new()).collect());
    match indexes.get(at) {
        Some(index) => index.get_or_init(|| {
            let mut index = MessageIndex::default();
            add_fields(&mut index, at, 0);
            index
        }),
        None => {
            static EMPTY: OnceLock<MessageIndex> = OnceLock::new();
            EMPTY.get_or_init(MessageIndex::default)
        }
    }
}

/// Adds the fields of the message at `at` (its inline messages'
/// fields in their place) to `index`.
fn add_fields(index: &mut MessageIndex, at: usize, depth: usize) {
    let Some(message) = MESSAGES.get(at) else {
        return;
    };
    for field in message.fields {
        if field.is(INLINE) {
            if let Kind::Message(name) = field.kind
                && let Some(inner) = position(name)
                && depth < 8
            {
                add_fields(index, inner, depth + 1);
            }
            continue;
        }
        let list_or_map = field.is(REP) || matches!(field.kind, Kind::Map(_));
        let walk = match field.kind {
            Kind::Message(name) => match position(name) {
                Some(inner) if field.is(REP) => Walk::List(inner),
                Some(inner) => Walk::Message(inner),
                None => Walk::No,
            },
            Kind::Map(Kind::Message(name)) => position(name).map_or(Walk::No, Walk::Map),
            _ => Walk::No,
        };
        index
            .fields
            .entry(field.json_name)
            .or_default()
            .push(Field {
                omit_when_empty: field.is(OMIT) && list_or_map,
                walk,
            });
    }
}

fn prune_message(index: &MessageIndex, object: &mut Map<String, Value>) {
    let mut emptied: Vec<String> = Vec::new();
    for (key, value) in object.iter_mut() {
        let Some(fields) = index.fields.get(key.as_str()) else {
            continue;
        };
        for field in fields {
            if field.omit_when_empty && is_empty(value) {
                emptied.push(key.clone());
                break;
            }
            match field.walk {
                Walk::No => {}
                Walk::Message(inner) => {
                    if let Some(nested) = value.as_object_mut() {
                        prune_message(self::index(inner), nested);
                    }
                }
                Walk::List(inner) => {
                    let inner = self::index(inner);
                    for item in value.as_array_mut().into_iter().flatten() {
                        if let Some(item) = item.as_object_mut() {
                            prune_message(inner, item);
                        }
                    }
                }
                Walk::Map(inner) => {
                    let inner = self::index(inner);
                    for item in value
                        .as_object_mut()
                        .into_iter()
                        .flat_map(|m| m.values_mut())
                    {
                        if let Some(item) = item.as_object_mut() {
                            prune_message(inner, item);
                        }
                    }
                }
            }
        }
    }
    for key in emptied {
        object.remove(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_omitempty_lists_and_maps_are_dropped_at_any_depth() {
        let mut deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {}, "finalizers": []},
            "spec": {"selector": {"matchLabels": {"app": "web"}, "matchExpressions": []},
                "template": {"metadata": {"annotations": {}}, "spec": {
                    "containers": [{"name": "app", "command": [], "args": null, "env": [],
                        "resources": {}, "ports": [{"containerPort": 80}]}],
                    "nodeSelector": {}, "volumes": [{"name": "v", "emptyDir": {}}],
                    "initContainers": []}}}
        });
        drop_empty_fields(&mut deployment);
        assert_eq!(
            deployment,
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web"},
                "spec": {"selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {}, "spec": {
                        "containers": [{"name": "app", "resources": {}, "ports": [{"containerPort": 80}]}],
                        "volumes": [{"name": "v", "emptyDir": {}}]}}}
            })
        );
    }

    #[test]
    fn lists_without_omitempty_and_unknown_kinds_are_kept() {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": []}});
        let before = pod.clone();
        drop_empty_fields(&mut pod);
        assert_eq!(pod, before, "PodSpec.containers has no omitempty");
        let mut widget = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w"}, "spec": {"items": []}});
        let before = widget.clone();
        drop_empty_fields(&mut widget);
        assert_eq!(widget, before);
    }

    #[test]
    fn inline_fields_and_maps_of_messages_are_walked() {
        // ProbeHandler is inline in Probe; ExecAction.command is omitempty.
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "livenessProbe": {"exec": {"command": []}}}]}});
        drop_empty_fields(&mut pod);
        assert_eq!(
            pod["spec"]["containers"][0]["livenessProbe"],
            json!({"exec": {}})
        );
    }
}
