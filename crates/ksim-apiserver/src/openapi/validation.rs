//! Server-side field validation (`fieldValidation=Strict|Warn`): the unknown
//! and duplicate fields of a request body, and how kube-apiserver reports
//! them (a BadRequest strict decoding error, or `Warning` headers).

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::schemas::{OBJECT_META, built_in_schemas};
use crate::ApiError;
use crate::resources::ResourceInfo;
use ksim_core::schema::REF_PREFIX;

/// How deep the walkers go before giving up (bodies are bounded, schemas may recurse).
const MAX_DEPTH: usize = 128;

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn unknown(path: &str) -> String {
    format!("unknown field {path:?}")
}

/// Follows `$ref` and a single-element `allOf` to the built-in definition.
fn resolve(mut schema: &Value) -> Option<&Value> {
    for _ in 0..MAX_DEPTH {
        if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
            schema = built_in_schemas().get(target.strip_prefix(REF_PREFIX)?)?;
        } else if let Some(first) = schema
            .get("allOf")
            .and_then(Value::as_array)
            .and_then(|all| all.first())
        {
            schema = first;
        } else {
            return Some(schema);
        }
    }
    None
}

/// The unknown fields of `value` against a built-in schema. Objects whose
/// schema names no properties (`FieldsV1`, `RawExtension`) accept anything.
pub(super) fn built_in_unknown_fields(
    schema: &Value,
    value: &Value,
    path: &str,
    depth: usize,
    problems: &mut Vec<String>,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let Some(schema) = resolve(schema) else {
        return;
    };
    match value {
        Value::Object(fields) => {
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (key, field) in fields {
                    match properties.get(key) {
                        Some(property) => built_in_unknown_fields(
                            property,
                            field,
                            &child(path, key),
                            depth + 1,
                            problems,
                        ),
                        None => problems.push(unknown(&child(path, key))),
                    }
                }
            } else if let Some(values) =
                schema.get("additionalProperties").filter(|v| v.is_object())
            {
                for (key, field) in fields {
                    built_in_unknown_fields(values, field, &child(path, key), depth + 1, problems);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    built_in_unknown_fields(
                        item_schema,
                        item,
                        &format!("{path}[{i}]"),
                        depth + 1,
                        problems,
                    );
                }
            }
        }
        _ => {}
    }
}

fn is_true(schema: &Value, extension: &str) -> bool {
    schema.get(extension).and_then(Value::as_bool) == Some(true)
}

/// The unknown fields of `value` against a structural (CRD) schema: what
/// kube's pruning would drop. `embedded` marks the root and
/// `x-kubernetes-embedded-resource` objects, where `apiVersion`, `kind` and
/// `metadata` (checked as ObjectMeta) are always allowed.
pub(super) fn structural_unknown_fields(
    schema: &Value,
    value: &Value,
    path: &str,
    embedded: bool,
    depth: usize,
    problems: &mut Vec<String>,
) {
    if depth > MAX_DEPTH || !schema.is_object() {
        return;
    }
    let preserve = is_true(schema, "x-kubernetes-preserve-unknown-fields");
    match value {
        Value::Object(fields) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            for (key, field) in fields {
                let field_path = child(path, key);
                if embedded && (key == "apiVersion" || key == "kind") {
                    continue;
                }
                if embedded && key == "metadata" {
                    if let Some(meta) = built_in_schemas().get(OBJECT_META) {
                        built_in_unknown_fields(meta, field, &field_path, depth + 1, problems);
                    }
                    continue;
                }
                if let Some(property) = properties.and_then(|p| p.get(key)) {
                    let nested_embedded = is_true(property, "x-kubernetes-embedded-resource");
                    structural_unknown_fields(
                        property,
                        field,
                        &field_path,
                        nested_embedded,
                        depth + 1,
                        problems,
                    );
                } else if let Some(values) = additional.filter(|v| v.is_object()) {
                    let nested_embedded = is_true(values, "x-kubernetes-embedded-resource");
                    structural_unknown_fields(
                        values,
                        field,
                        &field_path,
                        nested_embedded,
                        depth + 1,
                        problems,
                    );
                } else if preserve || additional.and_then(Value::as_bool) == Some(true) {
                    continue;
                } else {
                    problems.push(unknown(&field_path));
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                let nested_embedded = is_true(item_schema, "x-kubernetes-embedded-resource");
                for (i, item) in items.iter().enumerate() {
                    structural_unknown_fields(
                        item_schema,
                        item,
                        &format!("{path}[{i}]"),
                        nested_embedded,
                        depth + 1,
                        problems,
                    );
                }
            }
        }
        _ => {}
    }
}

/// The duplicate fields of a JSON body, as kube's strict decoder reports
/// them (`duplicate field "spec.replicas"`), in document order. A body that
/// is not JSON gives none (decoding reports that error).
pub fn duplicate_fields(body: &[u8]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut path = String::new();
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let seed = DuplicateSeed {
        path: &mut path,
        problems: &mut problems,
        depth: 0,
    };
    if seed.deserialize(&mut deserializer).is_err() {
        return Vec::new();
    }
    problems
}

/// A JSON body decoded as `serde_json::from_slice::<Value>` decodes it,
/// with its [`duplicate_fields`], in one parse. None when the body is not a
/// JSON object or holds anything unusual (an error, nesting past the
/// walk's depth, serde_json's private raw-value key): decoding it and
/// [`duplicate_fields`] apart then give the object or the error.
pub fn decode_with_duplicates(body: &[u8]) -> Option<(Value, Vec<String>)> {
    let mut problems = Vec::new();
    let mut path = String::new();
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let seed = ValueSeed {
        path: &mut path,
        problems: &mut problems,
        depth: 0,
    };
    let value = seed.deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    value.is_object().then_some((value, problems))
}

/// [`DuplicateSeed`] building the value as serde_json's `Value` does.
struct ValueSeed<'p> {
    path: &'p mut String,
    problems: &'p mut Vec<String>,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any valid JSON value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }
    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }
    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }
    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }
    fn visit_string<E: de::Error>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        use std::fmt::Write as _;
        if self.depth > MAX_DEPTH {
            return Err(de::Error::custom("too deep"));
        }
        let parent = self.path.len();
        let mut items = Vec::new();
        loop {
            self.path.truncate(parent);
            let _ = write!(self.path, "[{}]", items.len());
            let seed = ValueSeed {
                path: &mut *self.path,
                problems: &mut *self.problems,
                depth: self.depth + 1,
            };
            let item = seq.next_element_seed(seed)?;
            self.path.truncate(parent);
            match item {
                Some(item) => items.push(item),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        if self.depth > MAX_DEPTH {
            return Err(de::Error::custom("too deep"));
        }
        let parent = self.path.len();
        let mut fields = serde_json::Map::new();
        let mut seen = SeenKeys::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            // serde_json's Value reads this key specially (raw values).
            if key == "$serde_json::private::RawValue" {
                return Err(de::Error::custom("a raw value token"));
            }
            if parent > 0 {
                self.path.push('.');
            }
            self.path.push_str(&key);
            let owned = key.clone().into_owned();
            let repeated = seen.repeated(key);
            if repeated {
                self.problems
                    .push(format!("duplicate field {:?}", self.path.as_str()));
            }
            let value = map.next_value_seed(ValueSeed {
                path: &mut *self.path,
                problems: &mut *self.problems,
                depth: self.depth + 1,
            })?;
            self.path.truncate(parent);
            fields.insert(owned, value);
        }
        Ok(Value::Object(fields))
    }
}

/// Keys of one object up to this many are checked for repeats by a scan;
/// past it, by a hash set (a large map stays linear).
const SCANNED_KEYS: usize = 32;

/// The keys of one JSON object read so far: a short list scanned while the
/// object has few keys, a hash set past [`SCANNED_KEYS`].
#[derive(Default)]
struct SeenKeys<'de> {
    scanned: Vec<std::borrow::Cow<'de, str>>,
    hashed: HashSet<std::borrow::Cow<'de, str>>,
}

impl<'de> SeenKeys<'de> {
    /// Notes `key`; whether the object had it already.
    fn repeated(&mut self, key: std::borrow::Cow<'de, str>) -> bool {
        if self.hashed.is_empty() && self.scanned.len() < SCANNED_KEYS {
            let repeated = self.scanned.contains(&key);
            if !repeated {
                self.scanned.push(key);
            }
            repeated
        } else {
            if self.hashed.is_empty() {
                self.hashed.extend(self.scanned.drain(..));
            }
            !self.hashed.insert(key)
        }
    }
}

/// Walks a JSON document, noting keys seen twice in one object. The path
/// of the value being walked is kept in one buffer shared by the whole walk
/// (its children append to it and truncate it back), and keys are borrowed
/// from the body when they have no escapes: a body without duplicates
/// costs a parse without allocations.
struct DuplicateSeed<'p> {
    path: &'p mut String,
    problems: &'p mut Vec<String>,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for DuplicateSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// A key of an object, borrowed from the body when it can be.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = std::borrow::Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = std::borrow::Cow<'de, str>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a string key")
    }

    fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Self::Value, E> {
        Ok(std::borrow::Cow::Borrowed(key))
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(std::borrow::Cow::Owned(key.to_string()))
    }

    fn visit_string<E: de::Error>(self, key: String) -> Result<Self::Value, E> {
        Ok(std::borrow::Cow::Owned(key))
    }
}

impl<'de> Visitor<'de> for DuplicateSeed<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        use std::fmt::Write as _;
        if self.depth > MAX_DEPTH {
            return Err(de::Error::custom("too deep"));
        }
        let parent = self.path.len();
        let mut i = 0;
        loop {
            self.path.truncate(parent);
            let _ = write!(self.path, "[{i}]");
            let seed = DuplicateSeed {
                path: &mut *self.path,
                problems: &mut *self.problems,
                depth: self.depth + 1,
            };
            let more = seq.next_element_seed(seed)?.is_some();
            self.path.truncate(parent);
            if !more {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        if self.depth > MAX_DEPTH {
            return Err(de::Error::custom("too deep"));
        }
        let parent = self.path.len();
        let mut seen = SeenKeys::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            if parent > 0 {
                self.path.push('.');
            }
            self.path.push_str(&key);
            let repeated = seen.repeated(key);
            if repeated {
                self.problems
                    .push(format!("duplicate field {:?}", self.path.as_str()));
            }
            map.next_value_seed(DuplicateSeed {
                path: &mut *self.path,
                problems: &mut *self.problems,
                depth: self.depth + 1,
            })?;
            self.path.truncate(parent);
        }
        Ok(())
    }
}

/// kube-apiserver's answer to a create or update with
/// `fieldValidation=Strict` and problems: 400 BadRequest
/// `Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.foo"`.
pub fn strict_error(resource: &ResourceInfo, problems: &[String]) -> ApiError {
    ApiError::bad_request(format!(
        "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
        problems.join(", "),
        kind = resource.kind,
        version = resource.version,
    ))
}

/// The `Warning` header values of `fieldValidation=Warn`, one per problem:
/// `299 - "unknown field \"spec.foo\""`.
pub fn warning_headers(problems: &[String]) -> Vec<String> {
    problems
        .iter()
        .map(|problem| {
            let mut escaped = String::with_capacity(problem.len() + 8);
            for c in problem.chars() {
                if c == '"' || c == '\\' {
                    escaped.push('\\');
                }
                escaped.push(c);
            }
            format!("299 - \"{escaped}\"")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn duplicate_fields_are_found_with_their_paths() {
        let body = br#"{"spec":{"replicas":1,"replicas":2,"template":{"spec":{"containers":[{"name":"a","name":"b"}]}}},"kind":"x"}"#;
        assert_eq!(
            duplicate_fields(body),
            vec![
                "duplicate field \"spec.replicas\"".to_string(),
                "duplicate field \"spec.template.spec.containers[0].name\"".to_string(),
            ]
        );
        assert!(duplicate_fields(br#"{"a":1,"b":{"a":1}}"#).is_empty());
        assert!(duplicate_fields(b"not json").is_empty());
    }

    #[test]
    fn one_parse_gives_the_value_and_the_duplicates_of_two() {
        let mut large = String::from(r#"{"data":{"#);
        for i in 0..40 {
            large.push_str(&format!(r#""k{i}":{i}.5,"#));
        }
        large.push_str(r#""k3":"again"},"l":[{"x":1},{"x":-1,"x":18446744073709551615}],"e":"\u00e9\n","n":null,"b":[true,false,[]]}"#);
        let bodies = [
            large.as_str(),
            r#"{"spec":{"replicas":1,"replicas":2},"kind":"x","f":1e400}"#,
            r#"{"a\u0062":1,"ab":{"":{"":1,"":2}}}"#,
            // Not an object, not JSON, or unusual: decoded apart.
            "[1]",
            "{} x",
            "{\"a\":",
            r#"{"$serde_json::private::RawValue":"1"}"#,
        ];
        for body in bodies {
            let apart = serde_json::from_slice::<Value>(body.as_bytes())
                .ok()
                .filter(Value::is_object)
                .map(|value| (value, duplicate_fields(body.as_bytes())));
            let together = decode_with_duplicates(body.as_bytes());
            if together.is_some() {
                assert_eq!(together, apart, "{body}");
            }
        }
        assert!(decode_with_duplicates(large.as_bytes()).is_some());
        assert!(decode_with_duplicates(b"[1]").is_none());
        let deep = format!("{}{}", r#"{"a":"#.repeat(100), "}".repeat(100));
        assert_eq!(decode_with_duplicates(deep.as_bytes()), None);
    }

    #[test]
    fn duplicate_fields_of_large_objects_escaped_keys_and_arrays_are_found() {
        // 40 distinct keys (past the scanned ones), then two repeats.
        let mut body = String::from(r#"{"data":{"#);
        for i in 0..40 {
            body.push_str(&format!(r#""k{i}":"v","#));
        }
        body.push_str(r#""k3":"again","k39":"again"},"#);
        // An escaped key repeats its unescaped spelling; array items get
        // their index, the path goes back to the parent after each.
        body.push_str(r#""m":{"a\u0062":1,"ab":2},"l":[{"x":1},{"x":1,"x":2}],"l":[],"#);
        body.push_str(r#""":{"":1,"":2}}"#);
        assert_eq!(
            duplicate_fields(body.as_bytes()),
            vec![
                "duplicate field \"data.k3\"",
                "duplicate field \"data.k39\"",
                "duplicate field \"m.ab\"",
                "duplicate field \"l[1].x\"",
                "duplicate field \"l\"",
                // A key under an empty path is its path (as before).
                "duplicate field \"\"",
            ]
        );
        assert!(duplicate_fields(br#"[{"a":1},{"a":1}]"#).is_empty());
        assert_eq!(
            duplicate_fields(br#"[{"a":1},{"a":1,"a":1}]"#),
            vec!["duplicate field \"[1].a\""]
        );
    }

    #[test]
    fn warning_headers_quote_the_problem() {
        assert_eq!(
            warning_headers(&["unknown field \"spec.foo\"".to_string()]),
            vec![r#"299 - "unknown field \"spec.foo\"""#.to_string()]
        );
    }

    #[test]
    fn strict_error_is_a_bad_request_naming_kind_and_version() {
        let resource = crate::resources::built_in_resources()
            .into_iter()
            .find(|r| r.kind == "Deployment")
            .expect("deployments are built in");
        let error = strict_error(
            &resource,
            &[
                "unknown field \"spec.foo\"".to_string(),
                "unknown field \"spec.bar\"".to_string(),
            ],
        );
        assert_eq!(error.code, 400);
        assert_eq!(error.reason, "BadRequest");
        assert_eq!(
            error.message,
            r#"Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.foo", unknown field "spec.bar""#
        );
    }

    #[test]
    fn structural_schema_reports_fields_it_does_not_declare() {
        let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        }}}});
        let object = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a", "bogus": 1},
            "spec": {"items": [{"a": "x", "b": 1}], "free": {"anything": {"goes": 1}},
                "labels": {"k": "v"}, "extra": 1}, "top": 1});
        let mut problems = Vec::new();
        structural_unknown_fields(&schema, &object, "", true, 0, &mut problems);
        assert_eq!(
            problems,
            vec![
                "unknown field \"metadata.bogus\"",
                "unknown field \"spec.extra\"",
                "unknown field \"spec.items[0].b\"",
                "unknown field \"top\"",
            ]
        );
    }
}
