//! `/openapi/v2`: the Swagger 2.0 document kube-apiserver still serves,
//! made from the same schemas and paths as the `/openapi/v3` documents
//! (one document: every group-version's paths and every schema as a
//! definition), as JSON and as the protobuf kubectl asks for
//! (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`, gnostic's
//! `openapi.v2.Document`). kubectl validates a `kind: List` (and anything
//! `--validate=strict` finds no server-side support for) against these
//! definitions, looked up by `x-kubernetes-group-version-kind`.
//!
//! The protobuf is written field by field below (message and field numbers
//! of gnostic's OpenAPI v2 model, only the parts a Kubernetes document
//! uses): schemas, paths with their operations, parameters and responses,
//! vendor extensions (as YAML, which JSON is), info and security.

use serde_json::{Map, Value, json};

/// The media type of the protobuf document (what kube-apiserver answers
/// with, for either spelling asked).
pub const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
/// The deprecated spelling client-go still asks for.
pub const PROTOBUF_DEPRECATED: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// What a request's `Accept` header chooses, as kube-openapi's handler does:
/// the first clause that matches JSON or protobuf (`*/*` is JSON); `None`
/// is 406 Not Acceptable.
pub fn negotiate(accept: &str) -> Option<bool> {
    let accept = if accept.trim().is_empty() {
        "*/*"
    } else {
        accept
    };
    for clause in accept.split(',') {
        let media = clause.split(';').next().unwrap_or_default().trim();
        let (kind, subtype) = media.split_once('/').unwrap_or((media, ""));
        if kind != "application" && kind != "*" {
            continue;
        }
        match subtype {
            "json" | "*" => return Some(false),
            _ if media == PROTOBUF || media == PROTOBUF_DEPRECATED => return Some(true),
            _ => {}
        }
    }
    None
}

const V3_REF: &str = "#/components/schemas/";
const V2_REF: &str = "#/definitions/";

/// The Swagger 2.0 document of a set of v3 group-version documents.
pub fn document<'a>(v3_documents: impl IntoIterator<Item = &'a Value>) -> Value {
    let mut paths = Map::new();
    let mut definitions = Map::new();
    for v3 in v3_documents {
        if let Some(schemas) = v3["components"]["schemas"].as_object() {
            for (name, schema) in schemas {
                definitions
                    .entry(name.clone())
                    .or_insert_with(|| schema_v2(schema));
            }
        }
        if let Some(v3_paths) = v3["paths"].as_object() {
            for (path, item) in v3_paths {
                paths.insert(path.clone(), path_item_v2(item));
            }
        }
    }
    json!({
        "swagger": "2.0",
        "info": { "title": "Kubernetes", "version": crate::KUBERNETES_VERSION },
        "paths": paths,
        "definitions": definitions,
        "securityDefinitions": {
            "BearerToken": {
                "description": "Bearer Token authentication",
                "in": "header",
                "name": "authorization",
                "type": "apiKey",
            }
        },
        "security": [{ "BearerToken": [] }],
    })
}

/// A v3 schema as Swagger 2.0 has it: `$ref`s into `#/definitions/`, a
/// described reference (`allOf: [{$ref}]`) as the `$ref` itself,
/// int-or-string as `type: string, format: int-or-string`, no junctors
/// (`allOf`, `anyOf`, `oneOf`, `not`), and what kubectl's v2 validation
/// cannot cope with dropped as kube-apiserver drops it from CRD schemas: a
/// nullable schema is untyped (and not required), one preserving unknown
/// fields has no properties or items (and is untyped if an object), an
/// array without items is untyped.
fn schema_v2(schema: &Value) -> Value {
    let Some(object) = schema.as_object() else {
        return schema.clone();
    };
    let mut out = Map::new();
    if let Some([only]) = object
        .get("allOf")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        && only.get("$ref").is_some()
    {
        out.extend(schema_v2(only).as_object().cloned().unwrap_or_default());
    }
    let mut nullable_properties: Vec<&String> = Vec::new();
    for (key, value) in object {
        let value = match key.as_str() {
            "nullable" | "allOf" | "anyOf" | "oneOf" | "not" => continue,
            "$ref" => match value.as_str() {
                Some(reference) => json!(reference.replacen(V3_REF, V2_REF, 1)),
                None => value.clone(),
            },
            "properties" => Value::Object(
                value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, property)| {
                        if property["nullable"] == true {
                            nullable_properties.push(name);
                        }
                        (name.clone(), schema_v2(property))
                    })
                    .collect(),
            ),
            "items" | "additionalProperties" if value.is_object() => schema_v2(value),
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    if out.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
        && !out.contains_key("type")
    {
        out.insert("type".into(), json!("string"));
        out.insert("format".into(), json!("int-or-string"));
    }
    if object.get("nullable") == Some(&Value::Bool(true)) {
        for key in ["type", "items", "properties"] {
            out.remove(key);
        }
    }
    let preserves = out.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if preserves {
        out.remove("items");
        out.remove("properties");
    }
    let typed = |out: &Map<String, Value>, name: &str| out.get("type") == Some(&json!(name));
    if (typed(&out, "array") && !out.contains_key("items")) || (preserves && typed(&out, "object"))
    {
        out.remove("type");
    }
    let additional_nullable = object
        .get("additionalProperties")
        .is_some_and(|additional| additional["nullable"] == true);
    if let Some(Value::Array(required)) = out.get_mut("required") {
        required.retain(|field| {
            !additional_nullable
                && !nullable_properties
                    .iter()
                    .any(|name| field.as_str() == Some(name.as_str()))
        });
        if required.is_empty() {
            out.remove("required");
        }
    }
    Value::Object(out)
}

const METHODS: [&str; 7] = ["get", "put", "post", "delete", "options", "head", "patch"];

fn path_item_v2(item: &Value) -> Value {
    let mut out = Map::new();
    for (key, value) in item.as_object().into_iter().flatten() {
        let value = if METHODS.contains(&key.as_str()) {
            operation_v2(value)
        } else if key == "parameters" {
            parameters_v2(value)
        } else {
            value.clone()
        };
        out.insert(key.clone(), value);
    }
    Value::Object(out)
}

fn parameters_v2(parameters: &Value) -> Value {
    Value::Array(
        parameters
            .as_array()
            .into_iter()
            .flatten()
            .map(|parameter| {
                let mut out = Map::new();
                for (key, value) in parameter.as_object().into_iter().flatten() {
                    if key == "schema" {
                        for (k, v) in value.as_object().into_iter().flatten() {
                            out.insert(k.clone(), v.clone());
                        }
                    } else {
                        out.insert(key.clone(), value.clone());
                    }
                }
                Value::Object(out)
            })
            .collect(),
    )
}

fn operation_v2(operation: &Value) -> Value {
    let mut out = Map::new();
    let mut parameters = parameters_v2(&operation["parameters"]);
    let mut produces: Vec<String> = Vec::new();
    for (key, value) in operation.as_object().into_iter().flatten() {
        match key.as_str() {
            "parameters" => {}
            "requestBody" => {
                let content = value["content"].as_object();
                let consumes: Vec<&String> =
                    content.into_iter().flatten().map(|(m, _)| m).collect();
                let schema = content
                    .and_then(|c| c.values().next())
                    .map(|media| schema_v2(&media["schema"]))
                    .unwrap_or_else(|| json!({}));
                if let Some(list) = parameters.as_array_mut() {
                    list.insert(
                        0,
                        json!({
                            "in": "body",
                            "name": "body",
                            "required": value["required"].as_bool().unwrap_or(false),
                            "schema": schema,
                        }),
                    );
                }
                out.insert("consumes".into(), json!(consumes));
            }
            "responses" => {
                let mut responses = Map::new();
                for (code, response) in value.as_object().into_iter().flatten() {
                    let mut converted = Map::new();
                    if let Some(description) = response.get("description") {
                        converted.insert("description".into(), description.clone());
                    }
                    if let Some(content) = response["content"].as_object() {
                        for media in content.keys() {
                            if !produces.contains(media) {
                                produces.push(media.clone());
                            }
                        }
                        if let Some(media) = content.values().next() {
                            converted.insert("schema".into(), schema_v2(&media["schema"]));
                        }
                    }
                    responses.insert(code.clone(), Value::Object(converted));
                }
                out.insert("responses".into(), Value::Object(responses));
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    if parameters.as_array().is_some_and(|p| !p.is_empty()) {
        out.insert("parameters".into(), parameters);
    }
    if !produces.is_empty() {
        out.insert("produces".into(), json!(produces));
    }
    out.insert("schemes".into(), json!(["https"]));
    Value::Object(out)
}

/// The document as gnostic's `openapi.v2.Document` protobuf.
pub fn protobuf(document: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, 1, &document["swagger"]);
    message(&mut out, 2, |m| {
        string(m, 1, &document["info"]["title"]);
        string(m, 2, &document["info"]["version"]);
    });
    message(&mut out, 8, |m| {
        for (path, item) in entries(&document["paths"]) {
            message(m, 2, |named| {
                string_value(named, 1, path);
                message(named, 2, |p| path_item(p, item));
            });
        }
    });
    message(&mut out, 9, |m| {
        for (name, schema) in entries(&document["definitions"]) {
            named_schema(m, 1, name, schema);
        }
    });
    for requirement in document["security"].as_array().into_iter().flatten() {
        message(&mut out, 12, |m| {
            for (name, scopes) in entries(requirement) {
                message(m, 1, |named| {
                    string_value(named, 1, name);
                    message(named, 2, |array| strings(array, 1, scopes));
                });
            }
        });
    }
    message(&mut out, 13, |m| {
        for (name, definition) in entries(&document["securityDefinitions"]) {
            message(m, 1, |named| {
                string_value(named, 1, name);
                // SecurityDefinitionsItem.api_key_security
                message(named, 2, |item| {
                    message(item, 2, |key| {
                        string(key, 1, &definition["type"]);
                        string(key, 2, &definition["name"]);
                        string(key, 3, &definition["in"]);
                        string(key, 4, &definition["description"]);
                    });
                });
            });
        }
    });
    out
}

fn path_item(out: &mut Vec<u8>, item: &Value) {
    for (number, method) in (2..).zip(METHODS) {
        if let Some(operation) = item.get(method) {
            message(out, number, |m| operation_message(m, operation));
        }
    }
    for parameter in item["parameters"].as_array().into_iter().flatten() {
        message(out, 9, |m| parameters_item(m, parameter));
    }
    vendor_extensions(out, 10, item);
}

fn operation_message(out: &mut Vec<u8>, operation: &Value) {
    strings(out, 1, &operation["tags"]);
    string(out, 3, &operation["description"]);
    string(out, 5, &operation["operationId"]);
    strings(out, 6, &operation["produces"]);
    strings(out, 7, &operation["consumes"]);
    for parameter in operation["parameters"].as_array().into_iter().flatten() {
        message(out, 8, |m| parameters_item(m, parameter));
    }
    if let Some(responses) = operation.get("responses") {
        message(out, 9, |m| {
            for (code, response) in entries(responses) {
                message(m, 1, |named| {
                    string_value(named, 1, code);
                    // ResponseValue.response
                    message(named, 2, |value| {
                        message(value, 1, |r| {
                            string(r, 1, &response["description"]);
                            if let Some(schema) = response.get("schema") {
                                // SchemaItem.schema
                                message(r, 2, |item| {
                                    message(item, 1, |s| schema_message(s, schema))
                                });
                            }
                        });
                    });
                });
            }
        });
    }
    strings(out, 10, &operation["schemes"]);
    vendor_extensions(out, 13, operation);
}

/// A `ParametersItem` holding a `Parameter`: a `BodyParameter`, or a query
/// or path `NonBodyParameter`.
fn parameters_item(out: &mut Vec<u8>, parameter: &Value) {
    message(out, 1, |p| {
        if parameter["in"] == "body" {
            message(p, 1, |body| {
                string(body, 1, &parameter["description"]);
                string(body, 2, &parameter["name"]);
                string(body, 3, &parameter["in"]);
                boolean(body, 4, &parameter["required"]);
                if let Some(schema) = parameter.get("schema") {
                    message(body, 5, |s| schema_message(s, schema));
                }
            });
            return;
        }
        message(p, 2, |non_body| {
            // QueryParameterSubSchema = 3, PathParameterSubSchema = 4: the
            // same leading fields; `type` and `uniqueItems` differ by one.
            let (number, type_field, unique_field) = if parameter["in"] == "path" {
                (4, 5, 19)
            } else {
                (3, 6, 20)
            };
            message(non_body, number, |sub| {
                boolean(sub, 1, &parameter["required"]);
                string(sub, 2, &parameter["in"]);
                string(sub, 3, &parameter["description"]);
                string(sub, 4, &parameter["name"]);
                string(sub, type_field, &parameter["type"]);
                boolean(sub, unique_field, &parameter["uniqueItems"]);
            });
        });
    });
}

fn named_schema(out: &mut Vec<u8>, number: u32, name: &str, schema: &Value) {
    message(out, number, |named| {
        string_value(named, 1, name);
        message(named, 2, |s| schema_message(s, schema));
    });
}

/// gnostic's `Schema`.
fn schema_message(out: &mut Vec<u8>, schema: &Value) {
    string(out, 1, &schema["$ref"]);
    string(out, 2, &schema["format"]);
    string(out, 3, &schema["title"]);
    string(out, 4, &schema["description"]);
    if let Some(default) = schema.get("default") {
        any(out, 5, default);
    }
    double(out, 6, &schema["multipleOf"]);
    double(out, 7, &schema["maximum"]);
    boolean(out, 8, &schema["exclusiveMaximum"]);
    double(out, 9, &schema["minimum"]);
    boolean(out, 10, &schema["exclusiveMinimum"]);
    int64(out, 11, &schema["maxLength"]);
    int64(out, 12, &schema["minLength"]);
    string(out, 13, &schema["pattern"]);
    int64(out, 14, &schema["maxItems"]);
    int64(out, 15, &schema["minItems"]);
    boolean(out, 16, &schema["uniqueItems"]);
    int64(out, 17, &schema["maxProperties"]);
    int64(out, 18, &schema["minProperties"]);
    strings(out, 19, &schema["required"]);
    for value in schema["enum"].as_array().into_iter().flatten() {
        any(out, 20, value);
    }
    match schema.get("additionalProperties") {
        Some(Value::Bool(allowed)) => message(out, 21, |m| {
            encode_key(2, WireType::Varint, m);
            encode_varint(u64::from(*allowed), m);
        }),
        Some(additional @ Value::Object(_)) => {
            message(out, 21, |m| {
                message(m, 1, |s| schema_message(s, additional))
            });
        }
        _ => {}
    }
    match &schema["type"] {
        Value::String(_) => message(out, 22, |m| string(m, 1, &schema["type"])),
        types @ Value::Array(_) => message(out, 22, |m| strings(m, 1, types)),
        _ => {}
    }
    match schema.get("items") {
        Some(items @ Value::Object(_)) => {
            message(out, 23, |m| message(m, 1, |s| schema_message(s, items)));
        }
        Some(Value::Array(items)) => message(out, 23, |m| {
            for item in items {
                message(m, 1, |s| schema_message(s, item));
            }
        }),
        _ => {}
    }
    for part in schema["allOf"].as_array().into_iter().flatten() {
        message(out, 24, |s| schema_message(s, part));
    }
    if let Some(properties) = schema.get("properties") {
        message(out, 25, |m| {
            for (name, property) in entries(properties) {
                named_schema(m, 1, name, property);
            }
        });
    }
    boolean(out, 27, &schema["readOnly"]);
    vendor_extensions(out, 31, schema);
}

/// `x-` keys as `NamedAny`s, their values as YAML (JSON is YAML). kubectl
/// finds a kind's schema by its `x-kubernetes-group-version-kind`.
fn vendor_extensions(out: &mut Vec<u8>, number: u32, object: &Value) {
    for (name, value) in entries(object) {
        if name.starts_with("x-") {
            message(out, number, |named| {
                string_value(named, 1, name);
                any(named, 2, value);
            });
        }
    }
}

/// gnostic's `Any` with its `yaml` field.
fn any(out: &mut Vec<u8>, number: u32, value: &Value) {
    let yaml = value.to_string();
    message(out, number, |m| string_value(m, 2, &yaml));
}

fn entries(value: &Value) -> impl Iterator<Item = (&String, &Value)> {
    value.as_object().into_iter().flatten()
}

/// Protobuf wire types used here.
#[derive(Clone, Copy)]
enum WireType {
    Varint = 0,
    SixtyFourBit = 1,
    LengthDelimited = 2,
}

fn encode_varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn encode_key(number: u32, wire_type: WireType, out: &mut Vec<u8>) {
    encode_varint((u64::from(number) << 3) | wire_type as u64, out);
}

fn message(out: &mut Vec<u8>, number: u32, fill: impl FnOnce(&mut Vec<u8>)) {
    let mut body = Vec::new();
    fill(&mut body);
    encode_key(number, WireType::LengthDelimited, out);
    encode_varint(body.len() as u64, out);
    out.extend_from_slice(&body);
}

fn string_value(out: &mut Vec<u8>, number: u32, text: &str) {
    if text.is_empty() {
        return;
    }
    encode_key(number, WireType::LengthDelimited, out);
    encode_varint(text.len() as u64, out);
    out.extend_from_slice(text.as_bytes());
}

fn string(out: &mut Vec<u8>, number: u32, value: &Value) {
    if let Some(text) = value.as_str() {
        string_value(out, number, text);
    }
}

fn strings(out: &mut Vec<u8>, number: u32, values: &Value) {
    for value in values.as_array().into_iter().flatten() {
        if let Some(text) = value.as_str() {
            // Repeated strings keep empty elements.
            encode_key(number, WireType::LengthDelimited, out);
            encode_varint(text.len() as u64, out);
            out.extend_from_slice(text.as_bytes());
        }
    }
}

fn boolean(out: &mut Vec<u8>, number: u32, value: &Value) {
    if value.as_bool() == Some(true) {
        encode_key(number, WireType::Varint, out);
        encode_varint(1, out);
    }
}

fn int64(out: &mut Vec<u8>, number: u32, value: &Value) {
    if let Some(n) = value.as_i64().filter(|n| *n != 0) {
        encode_key(number, WireType::Varint, out);
        encode_varint(n as u64, out);
    }
}

fn double(out: &mut Vec<u8>, number: u32, value: &Value) {
    if let Some(n) = value.as_f64().filter(|n| *n != 0.0) {
        encode_key(number, WireType::SixtyFourBit, out);
        out.extend_from_slice(&n.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi::OpenApi;
    use crate::resources::built_in_resources;

    /// The fields of one protobuf message: (number, length-delimited bytes
    /// or the varint as little-endian bytes).
    fn fields(mut bytes: &[u8]) -> Vec<(u32, Vec<u8>)> {
        fn varint(bytes: &mut &[u8]) -> u64 {
            let mut value = 0u64;
            for shift in (0..).step_by(7) {
                let byte = bytes[0];
                *bytes = &bytes[1..];
                value |= u64::from(byte & 0x7f) << shift;
                if byte < 0x80 {
                    break;
                }
            }
            value
        }
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let key = varint(&mut bytes);
            let number = (key >> 3) as u32;
            match key & 7 {
                0 => out.push((number, varint(&mut bytes).to_le_bytes().to_vec())),
                1 => {
                    out.push((number, bytes[..8].to_vec()));
                    bytes = &bytes[8..];
                }
                2 => {
                    let len = varint(&mut bytes) as usize;
                    out.push((number, bytes[..len].to_vec()));
                    bytes = &bytes[len..];
                }
                other => panic!("unexpected wire type {other}"),
            }
        }
        out
    }

    fn field(bytes: &[u8], number: u32) -> Vec<Vec<u8>> {
        fields(bytes)
            .into_iter()
            .filter(|(n, _)| *n == number)
            .map(|(_, v)| v)
            .collect()
    }

    fn text(bytes: &[u8]) -> String {
        String::from_utf8(bytes.to_vec()).expect("utf-8")
    }

    fn open_api() -> OpenApi {
        OpenApi::new(&built_in_resources(), &[])
    }

    #[test]
    fn accept_chooses_protobuf_json_or_nothing() {
        assert_eq!(negotiate(PROTOBUF_DEPRECATED), Some(true));
        assert_eq!(negotiate(PROTOBUF), Some(true));
        assert_eq!(negotiate("application/json"), Some(false));
        assert_eq!(negotiate(""), Some(false));
        assert_eq!(negotiate("*/*"), Some(false));
        assert_eq!(
            negotiate(&format!("{PROTOBUF_DEPRECATED}, application/json")),
            Some(true)
        );
        assert_eq!(negotiate("text/html"), None);
    }

    #[test]
    fn schemas_are_swagger_2_shaped() {
        let v3 = json!({
            "properties": {
                "port": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.util.intstr.IntOrString"}],
                         "description": "The port."},
                "names": {"type": "array", "items": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.Volume"}]}},
                "any": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            }
        });
        assert_eq!(
            schema_v2(&v3),
            json!({
                "properties": {
                    "port": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.util.intstr.IntOrString",
                             "description": "The port."},
                    "names": {"type": "array", "items": {"$ref": "#/definitions/io.k8s.api.core.v1.Volume"}},
                    "any": {"x-kubernetes-int-or-string": true, "type": "string", "format": "int-or-string"},
                }
            })
        );
    }

    #[test]
    fn crd_schemas_lose_what_kubectl_cannot_validate() {
        let v3 = json!({
            "type": "object",
            "required": ["a", "b"],
            "properties": {
                "a": {"type": "string", "nullable": true},
                "b": {"type": "string"},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                         "properties": {"x": {"type": "string"}}},
                "list": {"type": "array", "x-kubernetes-preserve-unknown-fields": true,
                         "items": {"type": "string"}},
                "either": {"type": "string", "anyOf": [{"pattern": "^a"}], "allOf": [{"minLength": 1}]},
            }
        });
        assert_eq!(
            schema_v2(&v3),
            json!({
                "type": "object",
                "required": ["b"],
                "properties": {
                    "a": {},
                    "b": {"type": "string"},
                    "free": {"x-kubernetes-preserve-unknown-fields": true},
                    "list": {"x-kubernetes-preserve-unknown-fields": true},
                    "either": {"type": "string"},
                }
            })
        );
    }

    #[test]
    fn the_json_document_has_every_group_versions_paths_and_definitions() {
        let (bytes, etag) = open_api().v2(false);
        let document: Value = serde_json::from_slice(&bytes).expect("JSON");
        assert_eq!(document["swagger"], "2.0");
        assert!(etag.starts_with('"'), "{etag}");
        let configmap = &document["definitions"]["io.k8s.api.core.v1.ConfigMap"];
        assert_eq!(
            configmap["x-kubernetes-group-version-kind"],
            json!([{"group": "", "kind": "ConfigMap", "version": "v1"}])
        );
        let deployment = &document["definitions"]["io.k8s.api.apps.v1.DeploymentSpec"];
        assert_eq!(
            deployment["properties"]["template"]["$ref"],
            "#/definitions/io.k8s.api.core.v1.PodTemplateSpec"
        );
        let patch =
            &document["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(patch["x-kubernetes-action"], "patch");
        let parameters = patch["parameters"].as_array().expect("parameters");
        assert_eq!(parameters[0]["in"], "body");
        assert!(
            parameters
                .iter()
                .any(|p| p["name"] == "fieldValidation" && p["type"] == "string"),
            "{parameters:?}"
        );
        assert!(!bytes.windows(12).any(|w| w == b"#/components"));
    }

    #[test]
    fn the_protobuf_document_carries_the_definitions_and_their_kinds() {
        let (bytes, _) = open_api().v2(true);
        assert_eq!(field(&bytes, 1), [b"2.0".to_vec()]);
        let info = &field(&bytes, 2)[0];
        assert_eq!(text(&field(info, 1)[0]), "Kubernetes");
        let definitions = &field(&bytes, 9)[0];
        let named: Vec<Vec<u8>> = field(definitions, 1);
        let configmap = named
            .iter()
            .find(|n| text(&field(n, 1)[0]) == "io.k8s.api.core.v1.ConfigMap")
            .expect("ConfigMap is defined");
        let schema = &field(configmap, 2)[0];
        // type: [object]
        let types = &field(schema, 22)[0];
        assert_eq!(text(&field(types, 1)[0]), "object");
        // properties.data: a map of strings
        let properties = &field(schema, 25)[0];
        let data = field(properties, 1)
            .into_iter()
            .find(|n| text(&field(n, 1)[0]) == "data")
            .expect("data property");
        let data = &field(&data, 2)[0];
        let additional = &field(data, 21)[0];
        let value_schema = &field(additional, 1)[0];
        assert_eq!(text(&field(&field(value_schema, 22)[0], 1)[0]), "string");
        // x-kubernetes-group-version-kind as YAML (JSON)
        let extension = field(schema, 31)
            .into_iter()
            .find(|n| text(&field(n, 1)[0]) == "x-kubernetes-group-version-kind")
            .expect("the kind extension");
        let yaml = text(&field(&field(&extension, 2)[0], 2)[0]);
        let gvk: Value = serde_json::from_str(&yaml).expect("JSON is YAML");
        assert_eq!(
            gvk,
            json!([{"group": "", "kind": "ConfigMap", "version": "v1"}])
        );
        // A reference is `_ref` into #/definitions/.
        let spec = named
            .iter()
            .find(|n| text(&field(n, 1)[0]) == "io.k8s.api.apps.v1.Deployment")
            .expect("Deployment is defined");
        let properties = &field(&field(spec, 2)[0], 25)[0];
        let spec = field(properties, 1)
            .into_iter()
            .find(|n| text(&field(n, 1)[0]) == "spec")
            .expect("spec property");
        assert_eq!(
            text(&field(&field(&spec, 2)[0], 1)[0]),
            "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
        );
        // Paths are there too.
        let paths = &field(&bytes, 8)[0];
        assert!(
            field(paths, 2)
                .iter()
                .any(|n| text(&field(n, 1)[0]) == "/api/v1/namespaces/{namespace}/configmaps")
        );
    }
}
