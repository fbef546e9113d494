//! Conversions between JSON objects and template values.

use std::collections::BTreeMap;
use std::sync::Arc;

use gotmpl::Value;

/// Converts a JSON value into template data (numbers stay integers when they are).
pub fn to_template_value(json: &serde_json::Value) -> Value {
    match json {
        serde_json::Value::Null => Value::Nil,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                Value::Uint(u)
            } else {
                Value::Float(n.as_f64().unwrap_or(0.0))
            }
        }
        serde_json::Value::String(s) => Value::String(Arc::from(s.as_str())),
        serde_json::Value::Array(items) => {
            Value::List(items.iter().map(to_template_value).collect())
        }
        serde_json::Value::Object(map) => Value::Map(Arc::new(
            map.iter()
                .map(|(k, v)| (Arc::from(k.as_str()), to_template_value(v)))
                .collect::<BTreeMap<_, _>>(),
        )),
    }
}

/// Converts template data back into JSON (functions become null).
pub fn to_json_value(value: &Value) -> serde_json::Value {
    match value {
        Value::Nil | Value::Function(_) => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Int(i) => serde_json::Value::from(*i),
        Value::Uint(u) => serde_json::Value::from(*u),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(serde_json::Value::Number)
            .unwrap_or(serde_json::Value::Null),
        Value::String(s) => serde_json::Value::String(s.to_string()),
        Value::List(items) => serde_json::Value::Array(items.iter().map(to_json_value).collect()),
        Value::Map(map) => serde_json::Value::Object(
            map.iter()
                .map(|(k, v)| (k.to_string(), to_json_value(v)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_round_trips_through_template_values() {
        let value =
            json!({"a": [1, -2, 2.5, "s", true, null, {"b": {}}], "u": 18446744073709551615u64});
        assert_eq!(to_json_value(&to_template_value(&value)), value);
    }
}
