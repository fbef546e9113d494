//! What kube-apiserver's typed round trip drops from a written object: an
//! empty (or null) list or map in a field Go tags `omitempty`. A body or a
//! patched object is decoded into Go structs and encoded again, so
//! `command: []` disappears while `containers: []` (no `omitempty`) stays.
//! Driven by the same wire facts as the protobuf decoder (the Go struct
//! tags of k8s.io/api), for the kinds those facts cover.

use serde_json::{Map, Value};

use super::schema::{self, INLINE, Kind, MessageFacts, OMIT, REP};

/// Drops the empty `omitempty` lists and maps of a built-in object, at any
/// depth, as decoding it into its Go type and encoding it again would.
/// Objects of kinds the facts do not cover are left as they are.
pub(crate) fn drop_empty_fields(object: &mut Value) {
    let message = match (object["apiVersion"].as_str(), object["kind"].as_str()) {
        (Some(api_version), Some(kind)) => {
            schema::root_message(api_version, kind).and_then(schema::message)
        }
        _ => None,
    };
    if let (Some(message), Some(map)) = (message, object.as_object_mut()) {
        prune_message(message, map);
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

fn prune_message(message: &MessageFacts, object: &mut Map<String, Value>) {
    for field in message.fields {
        if field.is(INLINE) {
            if let Kind::Message(name) = field.kind
                && let Some(inner) = schema::message(name)
            {
                prune_message(inner, object);
            }
            continue;
        }
        let Some(value) = object.get_mut(field.json_name) else {
            continue;
        };
        let list_or_map = field.is(REP) || matches!(field.kind, Kind::Map(_));
        if field.is(OMIT) && list_or_map && is_empty(value) {
            object.remove(field.json_name);
            continue;
        }
        match field.kind {
            Kind::Message(name) => {
                let Some(inner) = schema::message(name) else {
                    continue;
                };
                if field.is(REP) {
                    for item in value.as_array_mut().into_iter().flatten() {
                        if let Some(item) = item.as_object_mut() {
                            prune_message(inner, item);
                        }
                    }
                } else if let Some(nested) = value.as_object_mut() {
                    prune_message(inner, nested);
                }
            }
            Kind::Map(Kind::Message(name)) => {
                let Some(inner) = schema::message(name) else {
                    continue;
                };
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
            _ => {}
        }
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
