//! What decoding a built-in object into its Go types would report, checked
//! in one walk over the object against the kind's schema: the unknown
//! fields (which Go drops) and the first decoding error (a JSON type that
//! does not fit the Go field, a malformed quantity), worded as
//! `encoding/json` and apimachinery's custom unmarshalers word them.

use std::cell::RefCell;
use std::collections::HashMap;

use serde_json::Value;

use super::schemas::built_in_schemas;
use ksim_core::quantity::Quantity;
use ksim_core::schema::{Properties, REF_PREFIX, hashed_properties};

/// How deep the walk goes before giving up (bodies are bounded, schemas may recurse).
const MAX_DEPTH: usize = 128;

const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
const TIME: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Time";
const MICRO_TIME: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime";
/// Definitions that take any JSON.
const OPAQUE: [&str; 3] = [
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
];

/// The findings of one walk.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct BuiltInFindings {
    /// `unknown field "spec.foo"`, in walk order.
    pub unknown: Vec<String>,
    /// The decoding error Go would return, if any (without the
    /// `<Kind> in version ... cannot be handled as ...` prefix).
    pub decode_error: Option<String>,
}

/// One step of the path to the current value.
#[derive(Debug, Clone, Copy)]
enum Segment<'v> {
    /// A struct field.
    Field(&'v str),
    /// A list item.
    Index(usize),
    /// A map key.
    Key(&'v str),
}

/// The walk's state: where it is, its findings, and whether an unmarshaler
/// error stopped decoding. Paths are rendered only when something is found.
struct Walk<'v, 'c> {
    /// This thread's [`Facts`] of the schema nodes, borrowed for the walk.
    facts: &'c mut FactsCache,
    segments: Vec<Segment<'v>>,
    findings: BuiltInFindings,
    /// The first type error (Go keeps decoding after it and reports it at the end).
    type_error: Option<String>,
    /// An error of a custom unmarshaler (Go stops decoding there and reports it).
    fatal: Option<String>,
}

/// Walks `object` (a built-in kind `kind` with schema `schema`).
pub(super) fn check_built_in<'v>(
    schema: &'static Value,
    kind: &'v str,
    object: &'v Value,
) -> BuiltInFindings {
    FACTS.with(|cache| {
        let mut cache = cache.borrow_mut();
        let mut walk = Walk {
            facts: &mut cache,
            segments: Vec::with_capacity(16),
            findings: BuiltInFindings::default(),
            type_error: None,
            fatal: None,
        };
        walk.value(schema, object, kind, 0);
        let mut findings = walk.findings;
        findings.decode_error = walk.fatal.or(walk.type_error);
        findings
    })
}

/// The [`Facts`] of schema nodes by address (the built-in schemas live as
/// long as the process).
type FactsCache = HashMap<usize, Option<Facts>, ksim_core::schema::BuildAddressHasher>;

thread_local! {
    /// This thread's facts of the schema nodes it has met.
    static FACTS: RefCell<FactsCache> = RefCell::new(FactsCache::default());
}

/// Follows `$ref` and a single-element `allOf`: the definition name (if
/// reached through a reference) and the schema.
fn resolve(schema: &Value) -> Option<(Option<&'static str>, &Value)> {
    let mut schema = schema;
    let mut name = None;
    for _ in 0..MAX_DEPTH {
        if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
            let definition = target.strip_prefix(REF_PREFIX)?;
            let (key, found) = built_in_schemas().get_key_value(definition)?;
            name = Some(key.as_str());
            schema = found;
        } else if let Some(first) = schema
            .get("allOf")
            .and_then(Value::as_array)
            .and_then(|all| all.first())
        {
            schema = first;
        } else {
            return Some((name, schema));
        }
    }
    None
}

/// What the walk reads of a schema node, worked out once per node (a walk
/// meets the same few hundred nodes for every object: looking their keys up
/// in the schema maps each time was most of its cost).
#[derive(Debug, Clone, Copy)]
struct Facts {
    /// The definition name, if the node is reached through a reference.
    name: Option<&'static str>,
    /// `x-kubernetes-int-or-string: true`.
    int_or_string: bool,
    properties: Option<&'static Properties>,
    /// `type`.
    declared: Option<&'static str>,
    format: Option<&'static str>,
    items: Option<&'static Value>,
    /// `additionalProperties`, when it is a schema.
    additional: Option<&'static Value>,
}

impl Facts {
    fn of(schema: &'static Value) -> Option<Facts> {
        let (name, resolved) = resolve(schema)?;
        Some(Facts {
            name,
            int_or_string: resolved
                .get("x-kubernetes-int-or-string")
                .and_then(Value::as_bool)
                == Some(true),
            properties: resolved
                .get("properties")
                .and_then(Value::as_object)
                .map(hashed_properties),
            declared: resolved.get("type").and_then(Value::as_str),
            format: resolved.get("format").and_then(Value::as_str),
            items: resolved.get("items"),
            additional: resolved
                .get("additionalProperties")
                .filter(|v| v.is_object()),
        })
    }

    /// The facts of `schema`, from `cache` (keyed by its address: the
    /// built-in schemas live as long as the process).
    fn cached(cache: &mut FactsCache, schema: &'static Value) -> Option<Facts> {
        let key = std::ptr::from_ref(schema) as usize;
        *cache.entry(key).or_insert_with(|| Facts::of(schema))
    }
}

/// How `encoding/json` names a JSON value in `cannot unmarshal <value>`.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The last segment of a definition name (`PodSpec`).
fn short_name(definition: &str) -> &str {
    definition.rsplit('.').next().unwrap_or(definition)
}

/// The Go type of a schema as `reflect.Type.String()` prints it
/// (`string`, `int32`, `[]v1.Container`, `map[string]string`, `v1.PodSpec`).
fn go_type(schema: &Value, depth: usize) -> String {
    let Some((name, schema)) = resolve(schema) else {
        return "interface {}".to_string();
    };
    if depth > MAX_DEPTH {
        return "interface {}".to_string();
    }
    if let Some(name) = name {
        let mut segments = name.rsplit('.');
        let last = segments.next().unwrap_or(name);
        return match segments.next() {
            Some(package) => format!("{package}.{last}"),
            None => last.to_string(),
        };
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") if schema.get("format").and_then(Value::as_str) == Some("byte") => {
            "[]uint8".to_string()
        }
        Some("string") => "string".to_string(),
        Some("boolean") => "bool".to_string(),
        Some("integer") => match schema.get("format").and_then(Value::as_str) {
            Some("int32") => "int32".to_string(),
            _ => "int64".to_string(),
        },
        Some("number") => "float64".to_string(),
        Some("array") => match schema.get("items") {
            Some(items) => format!("[]{}", go_type(items, depth + 1)),
            None => "[]interface {}".to_string(),
        },
        _ => match schema.get("additionalProperties").filter(|v| v.is_object()) {
            Some(values) => format!("map[string]{}", go_type(values, depth + 1)),
            None => "map[string]interface {}".to_string(),
        },
    }
}

/// The text Go's decoder sees for a number (`serde_json` keeps its value, not its spelling).
fn number_text(value: &Value) -> String {
    value.to_string()
}

/// Whether a JSON number fits a Go integer of the schema's format.
fn fits_integer(value: &Value, format: Option<&str>) -> bool {
    let Some(n) = value.as_i64() else {
        return false;
    };
    format != Some("int32") || i32::try_from(n).is_ok()
}

/// Where Go's `base64.StdEncoding` stops decoding `s` (the byte offset its
/// `CorruptInputError` reports), or `None` if it decodes. Line breaks are skipped, as Go does.
fn base64_error_at(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut quantum = 0;
    let mut quantum_start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\r' || b == b'\n' {
            i += 1;
            continue;
        }
        if quantum == 0 {
            quantum_start = i;
        }
        if b == b'=' {
            // Padding: only after two or three symbols, then nothing but padding to the end.
            let needed = match quantum {
                2 => 2,
                3 => 1,
                _ => return Some(i),
            };
            let mut seen = 0;
            let mut j = i;
            while j < bytes.len() {
                match bytes[j] {
                    b'\r' | b'\n' => {}
                    b'=' if seen < needed => seen += 1,
                    // Incorrect padding: Go points at the byte before.
                    _ if seen < needed => return Some(j - 1),
                    // Trailing garbage after the padding.
                    _ => return Some(j),
                }
                j += 1;
            }
            return (seen < needed).then_some(bytes.len());
        }
        if !(b.is_ascii_alphanumeric() || b == b'+' || b == b'/') {
            return Some(i);
        }
        quantum = (quantum + 1) % 4;
        i += 1;
    }
    (quantum != 0).then_some(quantum_start)
}

impl<'v> Walk<'v, '_> {
    fn stopped(&self) -> bool {
        self.fatal.is_some()
    }

    /// The path as field validation prints it: `spec.containers[0].name`, `data.key`.
    fn path(&self) -> String {
        let mut path = String::new();
        for segment in &self.segments {
            match segment {
                Segment::Field(name) | Segment::Key(name) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(name);
                }
                Segment::Index(i) => {
                    path.push('[');
                    path.push_str(&i.to_string());
                    path.push(']');
                }
            }
        }
        path
    }

    /// The path as `encoding/json` prints it: struct fields only (`spec.containers.name`).
    fn go_path(&self) -> String {
        let fields: Vec<&str> = self
            .segments
            .iter()
            .filter_map(|segment| match segment {
                Segment::Field(name) => Some(*name),
                _ => None,
            })
            .collect();
        fields.join(".")
    }

    fn type_mismatch(&mut self, value_kind: &str, schema: &'static Value, go_struct: &str) {
        if self.type_error.is_some() || self.segments.is_empty() {
            return;
        }
        self.type_error = Some(format!(
            "json: cannot unmarshal {value_kind} into Go struct field {go_struct}.{} of type {}",
            self.go_path(),
            go_type(schema, 0)
        ));
    }

    /// Walks `value` one segment down.
    fn nested(
        &mut self,
        segment: Segment<'v>,
        schema: &'static Value,
        value: &'v Value,
        go_struct: &'v str,
        depth: usize,
    ) {
        self.segments.push(segment);
        self.value(schema, value, go_struct, depth + 1);
        self.segments.pop();
    }

    /// `resource.Quantity`'s UnmarshalJSON: strings and bare literals parse as quantities.
    fn quantity(&mut self, value: &Value) {
        let parsed = match value {
            Value::String(s) => Quantity::parse(s.trim()),
            other => Quantity::parse(&other.to_string()),
        };
        if let Err(error) = parsed {
            self.fatal = Some(error.to_string());
        }
    }

    /// `intstr.IntOrString`'s UnmarshalJSON: a string, or else an int32.
    fn int_or_string(&mut self, value: &Value) {
        match value {
            Value::String(_) | Value::Null => {}
            Value::Number(_) if fits_integer(value, Some("int32")) => {}
            Value::Number(_) => {
                self.fatal = Some(format!(
                    "json: cannot unmarshal number {} into Go value of type int32",
                    number_text(value)
                ));
            }
            other => {
                self.fatal = Some(format!(
                    "json: cannot unmarshal {} into Go value of type int32",
                    json_kind(other)
                ));
            }
        }
    }

    fn value(
        &mut self,
        schema: &'static Value,
        value: &'v Value,
        go_struct: &'v str,
        depth: usize,
    ) {
        if depth > MAX_DEPTH || self.stopped() || value.is_null() {
            return;
        }
        let Some(facts) = Facts::cached(self.facts, schema) else {
            return;
        };
        let name = facts.name;
        match name {
            Some(QUANTITY) => return self.quantity(value),
            Some(INT_OR_STRING) => return self.int_or_string(value),
            Some(TIME) | Some(MICRO_TIME) => {
                if !value.is_string() {
                    self.fatal = Some(format!(
                        "json: cannot unmarshal {} into Go value of type string",
                        json_kind(value)
                    ));
                }
                return;
            }
            Some(name) if OPAQUE.contains(&name) => return,
            _ => {}
        }
        if facts.int_or_string {
            return self.int_or_string(value);
        }
        let properties = facts.properties;
        match (facts.declared, value) {
            (Some("string"), Value::String(s)) if facts.format == Some("byte") => {
                if let Some(at) = base64_error_at(s)
                    && self.type_error.is_none()
                {
                    self.type_error = Some(format!("illegal base64 data at input byte {at}"));
                }
            }
            (Some("string"), Value::String(_)) | (Some("boolean"), Value::Bool(_)) => {}
            (Some("number"), Value::Number(_)) => {}
            (Some("integer"), Value::Number(_)) => {
                if !fits_integer(value, facts.format) {
                    let kind = format!("number {}", number_text(value));
                    self.type_mismatch(&kind, schema, go_struct);
                }
            }
            (Some("array"), Value::Array(items)) => {
                let Some(item_schema) = facts.items else {
                    return;
                };
                for (i, item) in items.iter().enumerate() {
                    self.nested(Segment::Index(i), item_schema, item, go_struct, depth);
                    if self.stopped() {
                        return;
                    }
                }
            }
            (Some("object") | None, Value::Object(fields)) => {
                if let Some(properties) = properties {
                    let go_struct = name.map(short_name).unwrap_or(go_struct);
                    for (key, field) in fields {
                        if depth == 0 && (key == "apiVersion" || key == "kind") {
                            continue;
                        }
                        match properties.get(key.as_str()) {
                            Some(property) => {
                                self.nested(Segment::Field(key), property, field, go_struct, depth);
                                if self.stopped() {
                                    return;
                                }
                            }
                            None => {
                                self.segments.push(Segment::Field(key));
                                let path = self.path();
                                self.segments.pop();
                                self.findings
                                    .unknown
                                    .push(format!("unknown field {path:?}"));
                            }
                        }
                    }
                } else if let Some(values) = facts.additional {
                    for (key, field) in fields {
                        self.nested(Segment::Key(key), values, field, go_struct, depth);
                        if self.stopped() {
                            return;
                        }
                    }
                }
            }
            (None, _) if properties.is_none() => {}
            (_, other) => self.type_mismatch(json_kind(other), schema, go_struct),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(definition: &str, kind: &str, object: Value) -> BuiltInFindings {
        let schema = &built_in_schemas()[definition];
        check_built_in(schema, kind, &object)
    }

    #[test]
    fn decode_errors_are_worded_as_go_decoding_words_them() {
        let cases = [
            (
                "io.k8s.api.core.v1.ConfigMap",
                "ConfigMap",
                json!({"metadata": {"name": "typed"}, "data": {"a": 1}}),
                "json: cannot unmarshal number into Go struct field ConfigMap.data of type string",
            ),
            (
                "io.k8s.api.core.v1.Pod",
                "Pod",
                json!({"spec": {"containers": [{"name": "c", "image": "nginx",
                    "env": [{"name": true, "value": "2"}]}]}}),
                "json: cannot unmarshal bool into Go struct field EnvVar.spec.containers.env.name of type string",
            ),
            (
                "io.k8s.api.core.v1.Pod",
                "Pod",
                json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "abc"}}}]}}),
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ),
            (
                "io.k8s.api.core.v1.Pod",
                "Pod",
                json!({"spec": "nope"}),
                "json: cannot unmarshal string into Go struct field Pod.spec of type v1.PodSpec",
            ),
            (
                "io.k8s.api.apps.v1.Deployment",
                "Deployment",
                json!({"spec": {"replicas": "3"}}),
                "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32",
            ),
            (
                "io.k8s.api.apps.v1.Deployment",
                "Deployment",
                json!({"spec": {"replicas": 1.5}}),
                "json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32",
            ),
            (
                "io.k8s.api.core.v1.Pod",
                "Pod",
                json!({"spec": {"containers": {"name": "c"}}}),
                "json: cannot unmarshal object into Go struct field PodSpec.spec.containers of type []v1.Container",
            ),
            (
                "io.k8s.api.core.v1.ConfigMap",
                "ConfigMap",
                json!({"metadata": {"name": "x", "labels": {"a": 1}}}),
                "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string",
            ),
            (
                "io.k8s.api.apps.v1.Deployment",
                "Deployment",
                json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": true}}}}),
                "json: cannot unmarshal bool into Go value of type int32",
            ),
        ];
        for (definition, kind, object, want) in cases {
            let findings = check(definition, kind, object);
            assert_eq!(findings.decode_error.as_deref(), Some(want), "{kind}");
        }
    }

    #[test]
    fn base64_errors_are_reported_where_go_stops() {
        let cases = [
            ("aGVsbG8=", None),
            ("aGVsbA==", None),
            ("aGVs\nbG8=", None),
            ("", None),
            ("abc", Some(0)),
            ("abcde", Some(4)),
            ("ab!d", Some(2)),
            ("a===", Some(1)),
            ("ab=", Some(3)),
            ("ab==cd", Some(4)),
            ("ab=c", Some(2)),
        ];
        for (input, want) in cases {
            assert_eq!(base64_error_at(input), want, "{input:?}");
        }
        let findings = check(
            "io.k8s.api.core.v1.Secret",
            "Secret",
            json!({"metadata": {"name": "s"}, "data": {"password": "not base64!"}}),
        );
        assert_eq!(
            findings.decode_error.as_deref(),
            Some("illegal base64 data at input byte 3")
        );
    }

    #[test]
    fn well_typed_objects_decode_and_nulls_are_allowed() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "b"}, "creationTimestamp": null},
            "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}],
                "resources": {"requests": {"cpu": "100m", "memory": 1024}},
                "livenessProbe": {"httpGet": {"port": "http"}}}],
                "nodeSelector": null, "terminationGracePeriodSeconds": 30}});
        let findings = check("io.k8s.api.core.v1.Pod", "Pod", pod);
        assert_eq!(findings, BuiltInFindings::default());
    }

    #[test]
    fn unknown_fields_are_found_in_the_same_walk() {
        let findings = check(
            "io.k8s.api.apps.v1.Deployment",
            "Deployment",
            json!({"spec": {"replicas": 1, "foo": 1, "template": {"spec": {"containers": [{"name": "c", "imagePullPolcy": "x"}]}}}}),
        );
        assert_eq!(
            findings.unknown,
            vec![
                "unknown field \"spec.foo\"".to_string(),
                "unknown field \"spec.template.spec.containers[0].imagePullPolcy\"".to_string(),
            ]
        );
        assert_eq!(findings.decode_error, None);
    }

    #[test]
    fn a_quantity_error_wins_over_an_earlier_type_error() {
        let findings = check(
            "io.k8s.api.core.v1.Pod",
            "Pod",
            json!({"spec": {"containers": [{"name": 1, "resources": {"limits": {"cpu": "x"}}}]}}),
        );
        assert!(
            findings
                .decode_error
                .as_deref()
                .is_some_and(|e| e.starts_with("quantities must match")),
            "{findings:?}"
        );
    }
}
