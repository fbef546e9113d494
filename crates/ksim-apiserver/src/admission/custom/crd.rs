//! Validation of CustomResourceDefinitions (apiextensions.k8s.io/v1) as
//! kube-apiserver does it on create and update: names, group, scope,
//! versions (one storage version, schemas required), structural schemas,
//! subresources and printer columns.

use serde_json::{Map, Value};

use crate::admission::field::{BadValue, FieldError, FieldErrors, child, index, key};
use crate::admission::json::{array_of, str_of};
use crate::admission::names::{is_dns1035_label, is_dns1123_subdomain};
use crate::resources::ResourceInfo;

/// How deep schema checks go.
const MAX_DEPTH: usize = 64;

const SCHEMA_TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];
const COLUMN_TYPES: &str = "boolean,date,integer,number,string";
const COLUMN_FORMATS: &str = "byte,date,date-time,double,float,int32,int64,password";

/// Whether `resource` is `customresourcedefinitions.apiextensions.k8s.io`.
pub(crate) fn is_crd(resource: &ResourceInfo) -> bool {
    !resource.custom
        && resource.group == "apiextensions.k8s.io"
        && resource.kind == "CustomResourceDefinition"
}

/// The `%#v`-like rendering kube gives whole structs in messages; kubectl
/// users see `Invalid value: ...` for these in practice.
fn opaque() -> BadValue {
    BadValue::Raw("...".to_string())
}

/// The checks of a CRD (new or updated).
pub(crate) fn validate_crd(crd: &Value, errors: &mut FieldErrors) {
    let spec = crd.get("spec").unwrap_or(&Value::Null);
    let group = str_of(spec, "group");
    let names = spec.get("names").unwrap_or(&Value::Null);
    let plural = str_of(names, "plural");
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !name.is_empty() && name != format!("{plural}.{group}") {
        errors.push(FieldError::invalid(
            "metadata.name",
            BadValue::str(name),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }

    if group.is_empty() {
        errors.push(FieldError::required("spec.group", ""));
    } else {
        let problems = is_dns1123_subdomain(group);
        if !problems.is_empty() {
            errors.push(FieldError::invalid(
                "spec.group",
                BadValue::str(group),
                &problems.join(","),
            ));
        } else if !group.contains('.') {
            errors.push(FieldError::invalid(
                "spec.group",
                BadValue::str(group),
                "should be a domain with at least one dot",
            ));
        }
    }

    match str_of(spec, "scope") {
        "" => errors.push(FieldError::required("spec.scope", "")),
        "Cluster" | "Namespaced" => {}
        other => errors.push(FieldError::not_supported(
            "spec.scope",
            BadValue::str(other),
            &["Cluster", "Namespaced"],
        )),
    }

    let preserve_unknown = spec.get("preserveUnknownFields").and_then(Value::as_bool) == Some(true);
    let versions = array_of(spec, "versions");
    let mut storage = 0;
    let mut seen: Vec<&str> = Vec::new();
    let mut unique = true;
    for (i, version) in versions.iter().enumerate() {
        let path = index("spec.versions", i);
        if version.get("storage").and_then(Value::as_bool) == Some(true) {
            storage += 1;
        }
        let version_name = str_of(version, "name");
        if seen.contains(&version_name) {
            unique = false;
        } else {
            seen.push(version_name);
        }
        let problems = is_dns1035_label(version_name);
        if !problems.is_empty() {
            errors.push(FieldError::invalid(
                &child(&path, "name"),
                BadValue::str(version_name),
                &problems.join(","),
            ));
        }
        let schema_path = child(&path, "schema.openAPIV3Schema");
        match version.pointer("/schema/openAPIV3Schema") {
            None | Some(Value::Null) => {
                errors.push(FieldError::required(&schema_path, "schemas are required"))
            }
            Some(schema) => {
                validate_structural_root(schema, &schema_path, preserve_unknown, errors)
            }
        }
        validate_subresources(
            version.get("subresources"),
            &child(&path, "subresources"),
            errors,
        );
        for (c, column) in array_of(version, "additionalPrinterColumns")
            .iter()
            .enumerate()
        {
            validate_column(
                column,
                &index(&child(&path, "additionalPrinterColumns"), c),
                errors,
            );
        }
    }
    if versions.is_empty() {
        errors.push(FieldError::required(
            "spec.versions",
            "must have exactly one version marked as storage version",
        ));
    } else {
        if !unique {
            errors.push(FieldError::invalid(
                "spec.versions",
                opaque(),
                "must contain unique version names",
            ));
        }
        if storage != 1 {
            errors.push(FieldError::invalid(
                "spec.versions",
                opaque(),
                "must have exactly one version marked as storage version",
            ));
        }
    }

    validate_names(names, errors);
}

fn validate_names(names: &Value, errors: &mut FieldErrors) {
    let plural = str_of(names, "plural");
    let kind = str_of(names, "kind");
    // singular and listKind are defaulted from kind.
    let singular = match str_of(names, "singular") {
        "" => kind.to_lowercase(),
        s => s.to_string(),
    };
    let list_kind = match str_of(names, "listKind") {
        "" if !kind.is_empty() => format!("{kind}List"),
        s => s.to_string(),
    };
    for (field, value) in [
        ("plural", plural),
        ("singular", singular.as_str()),
        ("kind", kind),
        ("listKind", list_kind.as_str()),
    ] {
        if value.is_empty() {
            errors.push(FieldError::required(&child("spec.names", field), ""));
        }
    }
    for (field, value) in [("plural", plural), ("singular", singular.as_str())] {
        let problems = is_dns1035_label(value);
        if !value.is_empty() && !problems.is_empty() {
            errors.push(FieldError::invalid(
                &child("spec.names", field),
                BadValue::str(value),
                &problems.join(","),
            ));
        }
    }
    for (field, value) in [("kind", kind), ("listKind", list_kind.as_str())] {
        let problems = is_dns1035_label(&value.to_lowercase());
        if !value.is_empty() && !problems.is_empty() {
            errors.push(FieldError::invalid(
                &child("spec.names", field),
                BadValue::str(value),
                &format!(
                    "may have mixed case, but should otherwise match: {}",
                    problems.join(",")
                ),
            ));
        }
    }
    for (i, short_name) in array_of(names, "shortNames").iter().enumerate() {
        let short_name = short_name.as_str().unwrap_or_default();
        let problems = is_dns1035_label(short_name);
        if !problems.is_empty() {
            errors.push(FieldError::invalid(
                &index("spec.names.shortNames", i),
                BadValue::str(short_name),
                &problems.join(","),
            ));
        }
    }
    if !kind.is_empty() && kind == list_kind {
        errors.push(FieldError::invalid(
            "spec.names.listKind",
            BadValue::str(&list_kind),
            "kind and listKind may not be the same",
        ));
    }
    for (i, category) in array_of(names, "categories").iter().enumerate() {
        let category = category.as_str().unwrap_or_default();
        let problems = is_dns1035_label(category);
        if !problems.is_empty() {
            errors.push(FieldError::invalid(
                &index("spec.names.categories", i),
                BadValue::str(category),
                &problems.join(","),
            ));
        }
    }
}

/// kube's `validateSimpleJSONPath`.
fn validate_simple_json_path(value: &str, path: &str, errors: &mut FieldErrors) -> bool {
    if value.is_empty() {
        errors.push(FieldError::invalid(
            path,
            BadValue::str(value),
            "must not be empty",
        ));
        false
    } else if !value.starts_with('.') {
        errors.push(FieldError::invalid(
            path,
            BadValue::str(value),
            "must be a simple json path starting with .",
        ));
        false
    } else {
        true
    }
}

fn validate_subresources(subresources: Option<&Value>, path: &str, errors: &mut FieldErrors) {
    let Some(scale) = subresources
        .and_then(|s| s.get("scale"))
        .filter(|s| s.is_object())
    else {
        return;
    };
    for (field, prefix, under) in [
        ("specReplicasPath", ".spec.", ".spec"),
        ("statusReplicasPath", ".status.", ".status"),
    ] {
        let field_path = child(path, &format!("scale.{field}"));
        let value = str_of(scale, field);
        if value.is_empty() {
            errors.push(FieldError::required(&field_path, ""));
        } else if validate_simple_json_path(value, &field_path, errors)
            && !value.starts_with(prefix)
        {
            errors.push(FieldError::invalid(
                &field_path,
                BadValue::str(value),
                &format!("should be a json path under {under}"),
            ));
        }
    }
    let selector = str_of(scale, "labelSelectorPath");
    let selector_path = child(path, "scale.labelSelectorPath");
    if !selector.is_empty()
        && validate_simple_json_path(selector, &selector_path, errors)
        && !selector.starts_with(".status.")
    {
        errors.push(FieldError::invalid(
            &selector_path,
            BadValue::str(selector),
            "should be a json path under .status",
        ));
    }
}

fn validate_column(column: &Value, path: &str, errors: &mut FieldErrors) {
    if str_of(column, "name").is_empty() {
        errors.push(FieldError::required(&child(path, "name"), ""));
    }
    let kind = str_of(column, "type");
    let types_message = format!("must be one of {COLUMN_TYPES}");
    if kind.is_empty() {
        errors.push(FieldError::required(&child(path, "type"), &types_message));
    } else if !COLUMN_TYPES.split(',').any(|t| t == kind) {
        errors.push(FieldError::invalid(
            &child(path, "type"),
            BadValue::str(kind),
            &types_message,
        ));
    }
    let format = str_of(column, "format");
    if !format.is_empty() && !COLUMN_FORMATS.split(',').any(|f| f == format) {
        errors.push(FieldError::invalid(
            &child(path, "format"),
            BadValue::str(format),
            &format!("must be one of {COLUMN_FORMATS}"),
        ));
    }
    let json_path = str_of(column, "jsonPath");
    if json_path.is_empty() {
        errors.push(FieldError::required(&child(path, "jsonPath"), ""));
    } else {
        validate_simple_json_path(json_path, &child(path, "jsonPath"), errors);
    }
}

fn is_true(schema: &Map<String, Value>, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

/// The structural-schema rules of the root schema of a version.
fn validate_structural_root(
    schema: &Value,
    path: &str,
    preserve_unknown: bool,
    errors: &mut FieldErrors,
) {
    let Some(root) = schema.as_object() else {
        errors.push(FieldError::invalid(path, opaque(), "must be an object"));
        return;
    };
    match root.get("type").and_then(Value::as_str) {
        None | Some("") if !preserve_unknown => errors.push(FieldError::required(
            &child(path, "type"),
            "must not be empty at the root",
        )),
        Some(kind) if !kind.is_empty() && kind != "object" => errors.push(FieldError::invalid(
            &child(path, "type"),
            BadValue::str(kind),
            "must be object at the root",
        )),
        _ => {}
    }
    if let Some(metadata) = root
        .get("properties")
        .and_then(|p| p.get("metadata"))
        .and_then(Value::as_object)
    {
        let allowed = metadata.iter().all(|(k, v)| match k.as_str() {
            "type" => v == "object",
            "properties" => v.as_object().is_some_and(|p| {
                p.iter().all(|(name, s)| {
                    matches!(name.as_str(), "name" | "generateName")
                        && s.as_object().is_some_and(|s| {
                            s.keys().all(|k| k == "type")
                                && s.get("type").is_none_or(|t| t == "string")
                        })
                })
            }),
            _ => false,
        });
        if !allowed {
            errors.push(FieldError::forbidden(
                &key(&child(path, "properties"), "metadata"),
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    validate_structural(root, path, errors, 0);
}

/// The structural-schema rules of any schema node, then its children.
fn validate_structural(
    schema: &Map<String, Value>,
    path: &str,
    errors: &mut FieldErrors,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    if let Some(kind) = schema.get("type").and_then(Value::as_str) {
        if kind == "null" {
            errors.push(FieldError::forbidden(
                &child(path, "type"),
                "type cannot be set to null",
            ));
        } else if !kind.is_empty() && !SCHEMA_TYPES.contains(&kind) {
            errors.push(FieldError::not_supported(
                &child(path, "type"),
                BadValue::str(kind),
                &SCHEMA_TYPES,
            ));
        }
        if kind == "array" && !schema.get("items").is_some_and(Value::is_object) {
            errors.push(FieldError::required(
                &child(path, "items"),
                "must be specified",
            ));
        }
    }
    if schema.contains_key("$ref") {
        errors.push(FieldError::forbidden(
            &child(path, "$ref"),
            "$ref is not supported",
        ));
    }
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        errors.push(FieldError::invalid(
            &child(path, "x-kubernetes-preserve-unknown-fields"),
            BadValue::Raw("false".into()),
            "must be true or undefined",
        ));
    }
    if is_true(schema, "uniqueItems") {
        errors.push(FieldError::forbidden(
            &child(path, "uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if is_true(schema, "x-kubernetes-embedded-resource")
        && schema.get("type").and_then(Value::as_str) != Some("object")
    {
        errors.push(FieldError::invalid(
            &child(path, "type"),
            BadValue::str(
                schema
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            ),
            "must be object if x-kubernetes-embedded-resource is true",
        ));
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some(additional) = schema.get("additionalProperties") {
        if properties.is_some_and(|p| !p.is_empty())
            && (additional == &Value::Bool(false) || additional.is_object())
        {
            errors.push(FieldError::forbidden(
                &child(path, "additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if let Some(additional) = additional.as_object() {
            check_typed(
                additional,
                &child(path, "additionalProperties"),
                "must not be empty for specified object fields",
                errors,
            );
            validate_structural(
                additional,
                &child(path, "additionalProperties"),
                errors,
                depth + 1,
            );
        }
    }
    if let Some(properties) = properties {
        for (name, property) in properties {
            let property_path = key(&child(path, "properties"), name);
            let Some(property) = property.as_object() else {
                continue;
            };
            check_typed(
                property,
                &property_path,
                "must not be empty for specified object fields",
                errors,
            );
            validate_structural(property, &property_path, errors, depth + 1);
        }
    }
    if let Some(items) = schema.get("items") {
        match items.as_object() {
            Some(items) => {
                check_typed(
                    items,
                    &child(path, "items"),
                    "must not be empty for specified array items",
                    errors,
                );
                validate_structural(items, &child(path, "items"), errors, depth + 1);
            }
            None => errors.push(FieldError::forbidden(
                &child(path, "items"),
                "items must be a schema object and not an array",
            )),
        }
    }
}

/// A specified field needs a `type` (unless int-or-string or preserving unknown fields).
fn check_typed(schema: &Map<String, Value>, path: &str, detail: &str, errors: &mut FieldErrors) {
    let typed = schema
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| !t.is_empty());
    if !typed
        && !is_true(schema, "x-kubernetes-int-or-string")
        && !is_true(schema, "x-kubernetes-preserve-unknown-fields")
    {
        errors.push(FieldError::required(&child(path, "type"), detail));
    }
}

/// The checks of a CRD update: everything [`validate_crd`] checks, plus
/// group and plural never change, and scope and kind not once established.
pub(crate) fn validate_crd_update(old: &Value, new: &Value, errors: &mut FieldErrors) {
    validate_crd(new, errors);
    let established = array_of(old.get("status").unwrap_or(&Value::Null), "conditions")
        .iter()
        .any(|c| str_of(c, "type") == "Established" && str_of(c, "status") == "True");
    let mut immutable = vec![
        ("spec.group", "/spec/group"),
        ("spec.names.plural", "/spec/names/plural"),
    ];
    if established {
        immutable.insert(0, ("spec.names.kind", "/spec/names/kind"));
        immutable.insert(0, ("spec.scope", "/spec/scope"));
    }
    for (field, pointer) in immutable {
        let before = old
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default();
        let after = new
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default();
        if before != after {
            errors.push(FieldError::invalid(
                field,
                BadValue::str(after),
                "field is immutable",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(name: &str, spec: Value) -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name}, "spec": spec})
    }

    fn good_spec() -> Value {
        json!({"group": "example.com", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                "additionalPrinterColumns": [{"name": "Size", "type": "string", "jsonPath": ".spec.size"}],
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "string"}, "replicas": {"type": "integer"},
                        "port": {"x-kubernetes-int-or-string": true},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "list": {"type": "array", "items": {"type": "string"}}}},
                    "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}}}]})
    }

    fn rendered(object: &Value) -> Vec<String> {
        let mut errors = FieldErrors::new();
        validate_crd(object, &mut errors);
        errors.iter().map(|e| e.rendered()).collect()
    }

    #[test]
    fn a_well_formed_crd_passes() {
        assert_eq!(
            rendered(&crd("widgets.example.com", good_spec())),
            Vec::<String>::new()
        );
    }

    #[test]
    fn crd_violations_are_worded_as_kube_words_them() {
        let with = |pointer: &str, value: Value| {
            let mut spec = good_spec();
            if let Some(slot) = spec.pointer_mut(pointer) {
                *slot = value;
            }
            spec
        };
        let cases = [
            (
                "nos.example.com",
                json!({"group": "example.com", "names": {"kind": "No", "plural": "nos"}, "scope": "Namespaced",
                    "versions": [{"name": "v1", "served": true, "storage": true}]}),
                "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required",
            ),
            (
                "widgets.other.com",
                good_spec(),
                "metadata.name: Invalid value: \"widgets.other.com\": must be spec.names.plural+\".\"+spec.group",
            ),
            (
                "widgets.example",
                with("/group", json!("example")),
                "spec.group: Invalid value: \"example\": should be a domain with at least one dot",
            ),
            (
                "widgets.example.com",
                with("/scope", json!("Global")),
                "spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\"",
            ),
            (
                "widgets.example.com",
                with("/versions/0/storage", json!(false)),
                "spec.versions: Invalid value: ...: must have exactly one version marked as storage version",
            ),
            (
                "widgets.example.com",
                with(
                    "/versions/0/additionalPrinterColumns/0/jsonPath",
                    json!("spec.size"),
                ),
                "spec.versions[0].additionalPrinterColumns[0].jsonPath: Invalid value: \"spec.size\": must be a simple json path starting with .",
            ),
            (
                "widgets.example.com",
                with("/versions/0/additionalPrinterColumns/0/type", json!("text")),
                "spec.versions[0].additionalPrinterColumns[0].type: Invalid value: \"text\": must be one of boolean,date,integer,number,string",
            ),
            (
                "widgets.example.com",
                with(
                    "/versions/0/schema/openAPIV3Schema/properties/spec/properties/size",
                    json!({"description": "no type"}),
                ),
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[size].type: Required value: must not be empty for specified object fields",
            ),
            (
                "widgets.example.com",
                with("/versions/0/schema/openAPIV3Schema/type", json!("string")),
                "spec.versions[0].schema.openAPIV3Schema.type: Invalid value: \"string\": must be object at the root",
            ),
            (
                "widgets.example.com",
                with(
                    "/versions/0/schema/openAPIV3Schema/properties/spec/properties/list",
                    json!({"type": "array"}),
                ),
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[list].items: Required value: must be specified",
            ),
            (
                "widgets.example.com",
                with(
                    "/versions/0/subresources/scale/specReplicasPath",
                    json!(".status.replicas"),
                ),
                "spec.versions[0].subresources.scale.specReplicasPath: Invalid value: \".status.replicas\": should be a json path under .spec",
            ),
            (
                "widgets.example.com",
                with("/names/kind", json!("Bad_Kind")),
                "spec.names.kind: Invalid value: \"Bad_Kind\": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            ),
        ];
        for (name, spec, want) in cases {
            let errors = rendered(&crd(name, spec));
            assert!(
                errors.iter().any(|e| e == want),
                "{name}: want {want}, got {errors:#?}"
            );
        }
    }

    #[test]
    fn updates_keep_group_and_plural_and_once_established_scope_and_kind() {
        let old = json!({"metadata": {"name": "widgets.example.com"}, "spec": good_spec(),
            "status": {"conditions": [{"type": "Established", "status": "True"}]}});
        let mut new = old.clone();
        new["spec"]["scope"] = json!("Cluster");
        let mut errors = FieldErrors::new();
        validate_crd_update(&old, &new, &mut errors);
        let rendered: Vec<String> = errors.iter().map(|e| e.rendered()).collect();
        assert_eq!(
            rendered,
            vec!["spec.scope: Invalid value: \"Cluster\": field is immutable".to_string()]
        );
    }
}
