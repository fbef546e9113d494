//! Validation of a custom resource against its CRD version's
//! `openAPIV3Schema`, with the messages kube-apiserver's OpenAPI schema
//! validator gives (`spec.replicas in body must be of type integer: "string"`).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use regex::Regex;
use serde_json::{Map, Value};

use crate::ApiError;
use crate::admission::field::{BadValue, FieldError, FieldErrors, go_float, index};
use crate::admission::validation::invalid_error;
use crate::resources::ResourceInfo;

/// How deep validation goes (bodies are bounded, but be safe).
const MAX_DEPTH: usize = 64;

/// Validates `object`, a custom resource of `resource`, against `schema`
/// (its CRD version's `openAPIV3Schema`): 422 Invalid with kube's causes.
/// The server calls it after [`crate::admission::default_custom_resource`]
/// and pruning, on create and update (main resource and `status`).
pub fn validate_custom_resource(
    resource: &ResourceInfo,
    schema: &Value,
    object: &Value,
) -> Result<(), ApiError> {
    let mut errors = FieldErrors::new();
    let mut validator = Validator {
        errors: &mut errors,
    };
    validator.root(schema, object);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(invalid_error(resource, object, errors))
    }
}

struct Validator<'e> {
    errors: &'e mut FieldErrors,
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn is_true(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

/// The type name the validator gives a JSON value.
fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn number(value: &Value) -> Option<f64> {
    value.as_f64()
}

/// A schema bound (`minimum: 1`) as Go's `%v` prints a float64.
fn bound(value: &Value) -> String {
    go_float(value.as_f64().unwrap_or_default())
}

fn regex(pattern: &str) -> Option<Regex> {
    static CACHE: LazyLock<Mutex<HashMap<String, Option<Regex>>>> =
        LazyLock::new(|| Mutex::new(HashMap::new()));
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if cache.len() > 1024 {
        cache.clear();
    }
    cache
        .entry(pattern.to_string())
        .or_insert_with(|| Regex::new(pattern).ok())
        .clone()
}

/// Whether a string has the schema's `format` (the formats kube checks; others pass).
fn has_format(format: &str, value: &str) -> bool {
    match format {
        "date-time" | "datetime" => chrono::DateTime::parse_from_rfc3339(value).is_ok(),
        "date" => chrono::NaiveDate::parse_from_str(value, "%Y-%m-%d").is_ok(),
        "ipv4" => value.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => value.parse::<std::net::Ipv6Addr>().is_ok(),
        "uuid" => {
            let groups: Vec<&str> = value.split('-').collect();
            groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
                && groups
                    .iter()
                    .all(|g| g.chars().all(|c| c.is_ascii_hexdigit()))
        }
        "byte" => is_base64(value),
        _ => true,
    }
}

fn is_base64(value: &str) -> bool {
    let bytes = value.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return false;
    }
    let body = value.trim_end_matches('=');
    bytes.len() - body.len() <= 2
        && body
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/')
}

impl Validator<'_> {
    fn root(&mut self, schema: &Value, object: &Value) {
        let Some(fields) = object.as_object() else {
            return;
        };
        // apiVersion, kind and metadata are the server's (checked elsewhere).
        let mut rest = Map::new();
        for (key, value) in fields {
            if !matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                rest.insert(key.clone(), value.clone());
            }
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        self.object(schema, properties, &rest, "", 0, true);
    }

    fn fail_type(&mut self, schema: &Value, value: &Value, path: &str) {
        let expected = if is_true(schema, "x-kubernetes-int-or-string") {
            "integer,string".to_string()
        } else {
            schema
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let actual = type_of(value);
        self.errors.push(FieldError::type_invalid(
            path,
            BadValue::str(actual),
            &format!("{path} in body must be of type {expected}: \"{actual}\""),
        ));
    }

    fn invalid(&mut self, path: &str, value: BadValue, message: String) {
        self.errors.push(FieldError::invalid(path, value, &message));
    }

    fn value(&mut self, schema: &Value, value: &Value, path: &str, depth: usize) {
        if depth > MAX_DEPTH || !schema.is_object() {
            return;
        }
        if value.is_null() && is_true(schema, "nullable") {
            return;
        }
        if !self.type_matches(schema, value) {
            self.fail_type(schema, value, path);
            return;
        }
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
            && !allowed.iter().any(|a| a == value)
        {
            let supported: Vec<String> = allowed
                .iter()
                .map(|a| match a {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect();
            let supported: Vec<&str> = supported.iter().map(String::as_str).collect();
            self.errors.push(FieldError::not_supported(
                path,
                BadValue::json(value),
                &supported,
            ));
        }
        match value {
            Value::String(s) => self.string(schema, s, path),
            Value::Number(_) => self.number(schema, value, path),
            Value::Array(items) => self.array(schema, items, path, depth),
            Value::Object(fields) => {
                if is_true(schema, "x-kubernetes-embedded-resource") {
                    for key in ["apiVersion", "kind"] {
                        if !fields.contains_key(key) {
                            self.errors
                                .push(FieldError::required(&child(path, key), "must not be empty"));
                        }
                    }
                }
                let properties = schema.get("properties").and_then(Value::as_object);
                self.object(schema, properties, fields, path, depth, false);
            }
            _ => {}
        }
    }

    fn type_matches(&self, schema: &Value, value: &Value) -> bool {
        let actual = type_of(value);
        if is_true(schema, "x-kubernetes-int-or-string") {
            return matches!(actual, "integer" | "string");
        }
        match schema.get("type").and_then(Value::as_str) {
            None | Some("") => !value.is_null() || schema.get("properties").is_none(),
            Some("number") => matches!(actual, "number" | "integer"),
            Some("integer") => {
                actual == "integer" || number(value).is_some_and(|f| f.fract() == 0.0)
            }
            Some(expected) => expected == actual,
        }
    }

    fn string(&mut self, schema: &Value, s: &str, path: &str) {
        let length = s.chars().count();
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && length as u64 > max
        {
            self.errors.push(FieldError::too_long(
                path,
                usize::try_from(max).unwrap_or(usize::MAX),
            ));
        }
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && (length as u64) < min
        {
            self.invalid(
                path,
                BadValue::str(s),
                format!("{path} in body should be at least {min} chars long"),
            );
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
            && let Some(re) = regex(pattern)
            && !re.is_match(s)
        {
            self.invalid(
                path,
                BadValue::str(s),
                format!("{path} in body should match '{pattern}'"),
            );
        }
        if let Some(format) = schema.get("format").and_then(Value::as_str)
            && !has_format(format, s)
        {
            self.errors.push(FieldError::type_invalid(
                path,
                BadValue::str(s),
                &format!(
                    "{path} in body must be of type {format}: {}",
                    crate::admission::field::go_quote(s)
                ),
            ));
        }
    }

    fn number(&mut self, schema: &Value, value: &Value, path: &str) {
        let Some(n) = number(value) else {
            return;
        };
        if let Some(multiple) = schema.get("multipleOf").and_then(Value::as_f64)
            && multiple > 0.0
            && (n / multiple).fract() != 0.0
        {
            self.invalid(
                path,
                BadValue::json(value),
                format!(
                    "{path} in body should be a multiple of {}",
                    bound(&schema["multipleOf"])
                ),
            );
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
            let exclusive = is_true(schema, "exclusiveMaximum");
            if n > max || (exclusive && n == max) {
                let relation = if exclusive {
                    "less than"
                } else {
                    "less than or equal to"
                };
                self.invalid(
                    path,
                    BadValue::json(value),
                    format!(
                        "{path} in body should be {relation} {}",
                        bound(&schema["maximum"])
                    ),
                );
            }
        }
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
            let exclusive = is_true(schema, "exclusiveMinimum");
            if n < min || (exclusive && n == min) {
                let relation = if exclusive {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                self.invalid(
                    path,
                    BadValue::json(value),
                    format!(
                        "{path} in body should be {relation} {}",
                        bound(&schema["minimum"])
                    ),
                );
            }
        }
    }

    fn array(&mut self, schema: &Value, items: &[Value], path: &str, depth: usize) {
        let count = items.len();
        if let Some(max) = schema.get("maxItems").and_then(Value::as_i64)
            && count as i64 > max
        {
            self.errors.push(FieldError::too_many(path, count, max));
        }
        if let Some(min) = schema.get("minItems").and_then(Value::as_i64)
            && (count as i64) < min
        {
            self.invalid(
                path,
                BadValue::Int(count as i64),
                format!("{path} in body should have at least {min} items"),
            );
        }
        if is_true(schema, "uniqueItems")
            && items
                .iter()
                .enumerate()
                .any(|(i, a)| items[..i].contains(a))
        {
            self.invalid(
                path,
                BadValue::str(""),
                format!("{path} in body shouldn't contain duplicates"),
            );
        }
        if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
            for (i, item) in items.iter().enumerate() {
                self.value(item_schema, item, &index(path, i), depth + 1);
            }
        }
    }

    fn object(
        &mut self,
        schema: &Value,
        properties: Option<&Map<String, Value>>,
        fields: &Map<String, Value>,
        path: &str,
        depth: usize,
        root: bool,
    ) {
        let count = fields.len();
        if !root {
            if let Some(max) = schema.get("maxProperties").and_then(Value::as_i64)
                && count as i64 > max
            {
                self.errors.push(FieldError::too_many(path, count, max));
            }
            if let Some(min) = schema.get("minProperties").and_then(Value::as_i64)
                && (count as i64) < min
            {
                self.invalid(
                    path,
                    BadValue::Int(count as i64),
                    format!("{path} in body should have at least {min} properties"),
                );
            }
        }
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for name in required.iter().filter_map(Value::as_str) {
                if root && matches!(name, "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if !fields.contains_key(name) {
                    self.errors
                        .push(FieldError::required(&child(path, name), ""));
                }
            }
        }
        let additional = schema.get("additionalProperties").filter(|s| s.is_object());
        for (key, field) in fields {
            let field_path = child(path, key);
            if let Some(property) = properties.and_then(|p| p.get(key)) {
                self.value(property, field, &field_path, depth + 1);
            } else if let Some(values) = additional {
                self.value(values, field, &field_path, depth + 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn widget() -> ResourceInfo {
        ResourceInfo {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
            singular: "widget".into(),
            namespaced: true,
            short_names: vec![],
            categories: vec![],
            subresources: vec![],
            custom: true,
        }
    }

    fn schema() -> Value {
        json!({"type": "object", "required": ["spec"], "properties": {
        "spec": {"type": "object", "required": ["size"], "properties": {
            "replicas": {"type": "integer", "minimum": 0, "maximum": 10},
            "ratio": {"type": "number", "exclusiveMinimum": true, "minimum": 0},
            "size": {"type": "string", "enum": ["small", "large"]},
            "name": {"type": "string", "minLength": 3, "maxLength": 5, "pattern": "^[a-z]+$"},
            "when": {"type": "string", "format": "date-time"},
            "port": {"x-kubernetes-int-or-string": true},
            "tags": {"type": "array", "maxItems": 2, "minItems": 1, "uniqueItems": true,
                "items": {"type": "string"}},
            "labels": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}},
            "note": {"type": "string", "nullable": true},
            "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                "x-kubernetes-preserve-unknown-fields": true},
            "items": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        }}}})
    }

    fn message(spec: Value) -> String {
        let object = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "bad1"}, "spec": spec});
        match validate_custom_resource(&widget(), &schema(), &object) {
            Ok(()) => String::new(),
            Err(error) => error.message,
        }
    }

    #[test]
    fn schema_violations_are_worded_as_kube_words_them() {
        let cases = [
            (
                json!({"size": "small", "replicas": "many"}),
                "Widget.example.com \"bad1\" is invalid: spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
            ),
            (
                json!({"size": "small", "replicas": 11}),
                "Widget.example.com \"bad1\" is invalid: spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
            ),
            (
                json!({"size": "small", "replicas": -1}),
                "Widget.example.com \"bad1\" is invalid: spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
            ),
            (
                json!({"size": "small", "ratio": 0}),
                "Widget.example.com \"bad1\" is invalid: spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0",
            ),
            (
                json!({"size": "medium"}),
                "Widget.example.com \"bad1\" is invalid: spec.size: Unsupported value: \"medium\": supported values: \"small\", \"large\"",
            ),
            (
                json!({}),
                "Widget.example.com \"bad1\" is invalid: spec.size: Required value",
            ),
            (
                json!({"size": "small", "name": "ab"}),
                "Widget.example.com \"bad1\" is invalid: spec.name: Invalid value: \"ab\": spec.name in body should be at least 3 chars long",
            ),
            (
                json!({"size": "small", "name": "abcdef"}),
                "Widget.example.com \"bad1\" is invalid: spec.name: Too long: may not be more than 5 bytes",
            ),
            (
                json!({"size": "small", "name": "AB1"}),
                "Widget.example.com \"bad1\" is invalid: spec.name: Invalid value: \"AB1\": spec.name in body should match '^[a-z]+$'",
            ),
            (
                json!({"size": "small", "when": "yesterday"}),
                "Widget.example.com \"bad1\" is invalid: spec.when: Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"yesterday\"",
            ),
            (
                json!({"size": "small", "port": true}),
                "Widget.example.com \"bad1\" is invalid: spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
            ),
            (
                json!({"size": "small", "tags": ["a", "b", "c"]}),
                "Widget.example.com \"bad1\" is invalid: spec.tags: Too many: 3: must have at most 2 items",
            ),
            (
                json!({"size": "small", "tags": []}),
                "Widget.example.com \"bad1\" is invalid: spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items",
            ),
            (
                json!({"size": "small", "tags": ["a", "a"]}),
                "Widget.example.com \"bad1\" is invalid: spec.tags: Invalid value: \"\": spec.tags in body shouldn't contain duplicates",
            ),
            (
                json!({"size": "small", "labels": {"a": "1", "b": "2"}}),
                "Widget.example.com \"bad1\" is invalid: spec.labels: Too many: 2: must have at most 1 item",
            ),
            (
                json!({"size": "small", "template": {"metadata": {}}}),
                "Widget.example.com \"bad1\" is invalid: [spec.template.apiVersion: Required value: must not be empty, spec.template.kind: Required value: must not be empty]",
            ),
            (
                json!({"size": "small", "items": [{"n": 1}, {"n": "x"}]}),
                "Widget.example.com \"bad1\" is invalid: spec.items[1].n: Invalid value: \"string\": spec.items[1].n in body must be of type integer: \"string\"",
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(message(spec.clone()), want, "{spec}");
        }
    }

    #[test]
    fn valid_objects_pass() {
        let cases = [
            json!({"size": "small"}),
            json!({"size": "large", "replicas": 10, "ratio": 0.5, "name": "abc", "port": "http",
                "when": "2024-01-02T03:04:05Z", "tags": ["a"], "labels": {"a": "b"}, "note": null,
                "template": {"apiVersion": "v1", "kind": "Pod", "spec": {}}, "items": [{"n": 2.0}]}),
            json!({"size": "small", "port": 8080}),
        ];
        for spec in cases {
            assert_eq!(message(spec.clone()), "", "{spec}");
        }
    }

    #[test]
    fn invalid_causes_carry_the_type_invalid_reason() {
        let object =
            json!({"metadata": {"name": "bad1"}, "spec": {"size": "small", "replicas": "many"}});
        let error = validate_custom_resource(&widget(), &schema(), &object).expect_err("invalid");
        assert_eq!(error.code, 422);
        let details = error.details.expect("details");
        assert_eq!(details["kind"], "Widget");
        assert_eq!(details["causes"][0]["reason"], "FieldValueTypeInvalid");
        assert_eq!(details["causes"][0]["field"], "spec.replicas");
    }
}
