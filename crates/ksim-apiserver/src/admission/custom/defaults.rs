//! Structural defaulting of custom resources, as kube-apiserver applies it
//! on create, update and read: `default`s of the schema fill missing
//! fields, and `null`s of fields that are not `nullable` are dropped (or
//! replaced by the default).

use serde_json::Value;

/// How deep defaulting goes (bodies are bounded, but be safe).
const MAX_DEPTH: usize = 64;

fn is_true(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

/// Applies the defaults of `schema` (a CRD version's `openAPIV3Schema`) to
/// `object`, a custom resource. The server calls it before validation on
/// create and update, and on every object it reads from storage.
pub fn default_custom_resource(schema: &Value, object: &mut Value) {
    apply(schema, object, true, 0);
}

fn apply(schema: &Value, value: &mut Value, root: bool, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::Object(fields) => {
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (key, property) in properties {
                    if root && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                        continue;
                    }
                    let default = property.get("default");
                    match fields.get(key) {
                        Some(Value::Null) if !is_true(property, "nullable") => match default {
                            Some(default) => {
                                fields.insert(key.clone(), default.clone());
                            }
                            None => {
                                fields.remove(key);
                            }
                        },
                        None => {
                            if let Some(default) = default {
                                fields.insert(key.clone(), default.clone());
                            }
                        }
                        Some(_) => {}
                    }
                }
                for (key, field) in fields.iter_mut() {
                    if root && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                        continue;
                    }
                    if let Some(property) = properties.get(key) {
                        apply(property, field, false, depth + 1);
                    }
                }
            } else if let Some(values) =
                schema.get("additionalProperties").filter(|v| v.is_object())
            {
                for field in fields.values_mut() {
                    apply(values, field, false, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|v| v.is_object()) {
                for item in items {
                    apply(item_schema, item, false, depth + 1);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_fill_missing_and_null_fields_at_every_level() {
        let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "mode": {"type": "string", "default": "auto"},
            "count": {"type": "integer", "minimum": 1},
            "gone": {"type": "string"},
            "kept": {"type": "string", "nullable": true},
            "ports": {"type": "array", "items": {"type": "object", "properties": {
                "protocol": {"type": "string", "default": "TCP"}}}},
            "labels": {"type": "object", "additionalProperties": {"type": "object",
                "properties": {"weight": {"type": "integer", "default": 1}}}},
            "nested": {"type": "object", "default": {}, "properties": {
                "inner": {"type": "string", "default": "x"}}},
        }}}});
        let cases = [
            (
                json!({"spec": {}}),
                json!({"spec": {"mode": "auto", "nested": {"inner": "x"}}}),
            ),
            (
                json!({"spec": {"mode": null, "gone": null, "kept": null, "nested": {}}}),
                json!({"spec": {"mode": "auto", "kept": null, "nested": {"inner": "x"}}}),
            ),
            (
                json!({"spec": {"mode": "manual", "ports": [{}, {"protocol": "UDP"}], "labels": {"a": {}}, "nested": {"inner": "y"}}}),
                json!({"spec": {"mode": "manual", "ports": [{"protocol": "TCP"}, {"protocol": "UDP"}],
                    "labels": {"a": {"weight": 1}}, "nested": {"inner": "y"}}}),
            ),
            (
                json!({"metadata": {"name": "g1"}}),
                json!({"metadata": {"name": "g1"}}),
            ),
        ];
        for (mut object, want) in cases {
            default_custom_resource(&schema, &mut object);
            assert_eq!(object, want);
        }
    }
}
