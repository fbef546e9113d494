//! The `components.schemas` of the `/openapi/v3` documents: the built-in
//! definitions with kube's extensions (`x-kubernetes-group-version-kind`,
//! `x-kubernetes-patch-strategy`, `x-kubernetes-patch-merge-key`), the
//! synthesized `<Kind>List` schemas, the schemas CustomResourceDefinitions
//! publish, and the closure of a set of schemas over their `$ref`s.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use ksim_core::patch::field_patch_meta;
use ksim_core::schema::{REF_PREFIX, definitions};
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

/// The extension naming the kind(s) a schema (an array) or an operation (an object) is about.
pub(super) const GVK_EXTENSION: &str = "x-kubernetes-group-version-kind";
pub(super) const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
pub(super) const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
pub(super) const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
pub(super) const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
pub(super) const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
pub(super) const SCALE: &str = "io.k8s.api.autoscaling.v1.Scale";
pub(super) const BINDING: &str = "io.k8s.api.core.v1.Binding";
pub(super) const EVICTION: &str = "io.k8s.api.policy.v1.Eviction";

const API_VERSION_DESCRIPTION: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DESCRIPTION: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA_DESCRIPTION: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const LIST_METADATA_DESCRIPTION: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// The `x-kubernetes-group-version-kind` value of a schema.
pub(super) fn gvk_array(group: &str, version: &str, kind: &str) -> Value {
    json!([{ "group": group, "kind": kind, "version": version }])
}

/// The `$ref` to a component schema.
pub(super) fn reference(definition: &str) -> Value {
    json!({ "$ref": format!("{REF_PREFIX}{definition}") })
}

/// Every built-in definition as published: with kube's extensions, plus the
/// meta types the documents refer to (`Status`, `ListMeta`, `Patch`).
pub(super) fn built_in_schemas() -> &'static BTreeMap<String, Value> {
    static SCHEMAS: LazyLock<BTreeMap<String, Value>> = LazyLock::new(build_built_in_schemas);
    &SCHEMAS
}

fn build_built_in_schemas() -> BTreeMap<String, Value> {
    let definitions = definitions();
    let mut schemas: BTreeMap<String, Value> = definitions
        .iter()
        .map(|(name, schema)| (name.to_string(), schema.clone()))
        .collect();
    let mut generator = SchemaSettings::openapi3()
        .with(|s| s.meta_schema = None)
        .into_generator();
    generator.subschema_for::<meta::Status>();
    generator.subschema_for::<meta::ListMeta>();
    generator.subschema_for::<meta::Patch>();
    for (name, schema) in generator.take_definitions(true) {
        schemas.entry(name).or_insert(schema);
    }
    for schema in schemas.values_mut() {
        drop_metadata_required(schema);
    }
    for (name, schema) in schemas.iter_mut() {
        let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
            continue;
        };
        for (field, property) in properties.iter_mut() {
            let (Some(meta), Some(property)) =
                (field_patch_meta(name, field), property.as_object_mut())
            else {
                continue;
            };
            if let Some(key) = meta.merge_key {
                property.insert("x-kubernetes-patch-merge-key".into(), json!(key));
            }
            property.insert(
                "x-kubernetes-patch-strategy".into(),
                json!(meta.strategy.as_str()),
            );
        }
    }
    let kinds = definitions
        .kinds()
        .iter()
        .map(|k| (k.definition.as_str(), k.group, k.version, k.kind))
        .chain([
            (SCALE, "autoscaling", "v1", "Scale"),
            (STATUS, "", "v1", "Status"),
        ]);
    for (definition, group, version, kind) in kinds {
        if let Some(schema) = schemas.get_mut(definition).and_then(Value::as_object_mut) {
            schema.insert(GVK_EXTENSION.into(), gvk_array(group, version, kind));
        }
    }
    schemas
}

/// Drops `metadata` from a schema's `required` list (and the list if it
/// becomes empty). k8s-openapi marks it required because its Rust field is
/// not an `Option`; in kube's schemas (`omitempty` in Go) it never is.
fn drop_metadata_required(schema: &mut Value) {
    let Some(schema) = schema.as_object_mut() else {
        return;
    };
    let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut) else {
        return;
    };
    required.retain(|field| field.as_str() != Some("metadata"));
    if required.is_empty() {
        schema.remove("required");
    }
}

/// The schema of `<Kind>List`, as kube-apiserver publishes it.
pub(super) fn list_schema(group: &str, version: &str, kind: &str, item_definition: &str) -> Value {
    json!({
        "description": format!("{kind}List is a list of {kind}."),
        "type": "object",
        "properties": {
            "apiVersion": { "description": API_VERSION_DESCRIPTION, "type": "string" },
            "items": {
                "description": format!("List of {kind}."),
                "type": "array",
                "items": { "allOf": [reference(item_definition)], "default": {} },
            },
            "kind": { "description": KIND_DESCRIPTION, "type": "string" },
            "metadata": {
                "description": LIST_METADATA_DESCRIPTION,
                "allOf": [reference(LIST_META)],
                "default": {},
            },
        },
        "required": ["items"],
        GVK_EXTENSION: gvk_array(group, version, &format!("{kind}List")),
    })
}

/// One served version of a CustomResourceDefinition.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct CrdVersion {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
    /// `status` and/or `scale`.
    pub subresources: Vec<String>,
    /// `openAPIV3Schema`, if the version has one.
    pub schema: Option<Value>,
}

impl CrdVersion {
    /// `apis/<group>/<version>`.
    pub fn document_path(&self) -> String {
        format!("apis/{}/{}", self.group, self.version)
    }

    /// The component name of its schema: the group reversed, then version and
    /// kind (`stable.example.com`, `v1`, `CronTab` gives `com.example.stable.v1.CronTab`).
    pub fn definition(&self) -> String {
        let reversed: Vec<&str> = self.group.split('.').rev().collect();
        format!("{}.{}.{}", reversed.join("."), self.version, self.kind)
    }
}

/// The served versions of a CustomResourceDefinition (JSON). Malformed
/// definitions give no versions.
pub(super) fn crd_versions(crd: &Value) -> Vec<CrdVersion> {
    let spec = &crd["spec"];
    let (Some(group), Some(kind), Some(plural)) = (
        spec["group"].as_str(),
        spec["names"]["kind"].as_str(),
        spec["names"]["plural"].as_str(),
    ) else {
        return Vec::new();
    };
    let namespaced = spec["scope"].as_str() != Some("Cluster");
    let Some(versions) = spec["versions"].as_array() else {
        return Vec::new();
    };
    versions
        .iter()
        .filter(|v| v["served"].as_bool().unwrap_or(true))
        .filter_map(|v| {
            let version = v["name"].as_str()?;
            let subresources = ["status", "scale"]
                .into_iter()
                .filter(|s| v["subresources"].get(s).is_some_and(|x| !x.is_null()))
                .map(str::to_string)
                .collect();
            let schema = v["schema"]["openAPIV3Schema"].clone();
            Some(CrdVersion {
                group: group.to_string(),
                version: version.to_string(),
                kind: kind.to_string(),
                plural: plural.to_string(),
                namespaced,
                subresources,
                schema: (!schema.is_null()).then_some(schema),
            })
        })
        .collect()
}

/// The schema a CRD version publishes: its `openAPIV3Schema` with
/// `apiVersion`, `kind` and `metadata` properties and the GVK extension.
pub(super) fn published_crd_schema(crd: &CrdVersion) -> Value {
    let mut schema = match &crd.schema {
        Some(Value::Object(schema)) => schema.clone(),
        _ => {
            let mut schema = Map::new();
            schema.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
            schema
        }
    };
    schema.insert("type".into(), json!("object"));
    let properties = schema
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if !properties.is_object() {
        *properties = Value::Object(Map::new());
    }
    if let Some(properties) = properties.as_object_mut() {
        properties
            .entry("apiVersion")
            .or_insert_with(|| json!({ "description": API_VERSION_DESCRIPTION, "type": "string" }));
        properties
            .entry("kind")
            .or_insert_with(|| json!({ "description": KIND_DESCRIPTION, "type": "string" }));
        properties.insert(
            "metadata".into(),
            json!({ "description": METADATA_DESCRIPTION, "allOf": [reference(OBJECT_META)] }),
        );
    }
    schema.insert(
        GVK_EXTENSION.into(),
        gvk_array(&crd.group, &crd.version, &crd.kind),
    );
    Value::Object(schema)
}

/// Every definition named by a `$ref` anywhere in `schema`.
fn references<'a>(schema: &'a Value, out: &mut Vec<&'a str>) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("$ref", Value::String(target)) => {
                        if let Some(name) = target.strip_prefix(REF_PREFIX) {
                            out.push(name);
                        }
                    }
                    _ => references(value, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| references(item, out)),
        _ => {}
    }
}

/// The schemas reachable from `roots`, looked up first in `local` and then
/// among the built-in schemas, sorted by name. Unknown names are skipped.
pub(super) fn closure(
    roots: &BTreeSet<String>,
    local: &BTreeMap<String, Value>,
) -> Map<String, Value> {
    let lookup = |name: &str| local.get(name).or_else(|| built_in_schemas().get(name));
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut pending: Vec<String> = roots.iter().cloned().collect();
    while let Some(name) = pending.pop() {
        if seen.contains(&name) {
            continue;
        }
        let Some(schema) = lookup(&name) else {
            continue;
        };
        seen.insert(name);
        let mut found = Vec::new();
        references(schema, &mut found);
        pending.extend(
            found
                .into_iter()
                .filter(|n| !seen.contains(*n))
                .map(str::to_string),
        );
    }
    seen.into_iter()
        .filter_map(|name| lookup(&name).cloned().map(|schema| (name, schema)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_spec_containers_carry_patch_merge_key() {
        let containers =
            &built_in_schemas()["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], json!("name"));
        assert_eq!(containers["x-kubernetes-patch-strategy"], json!("merge"));
    }

    #[test]
    fn kinds_and_meta_types_carry_group_version_kind() {
        let schemas = built_in_schemas();
        assert_eq!(
            schemas["io.k8s.api.apps.v1.Deployment"][GVK_EXTENSION],
            gvk_array("apps", "v1", "Deployment")
        );
        assert_eq!(
            schemas[STATUS][GVK_EXTENSION],
            gvk_array("", "v1", "Status")
        );
        assert!(schemas.contains_key(LIST_META));
        assert!(schemas.contains_key(PATCH));
    }

    #[test]
    fn metadata_is_never_required_but_other_required_fields_stay() {
        let schemas = built_in_schemas();
        for (name, schema) in schemas {
            let required = schema["required"].as_array();
            assert!(
                !required.is_some_and(|r| r.iter().any(|f| f == "metadata")),
                "{name} requires metadata"
            );
            assert!(
                !required.is_some_and(|r| r.is_empty()),
                "{name} has an empty required list"
            );
        }
        assert!(
            schemas["io.k8s.api.policy.v1.PodDisruptionBudget"]
                .get("required")
                .is_none()
        );
        assert_eq!(
            schemas["io.k8s.api.apps.v1.DeploymentSpec"]["required"],
            json!(["selector", "template"])
        );
        assert_eq!(
            schemas["io.k8s.api.scheduling.v1.PriorityClass"]["required"],
            json!(["value"])
        );
        assert_eq!(
            schemas["io.k8s.api.core.v1.Container"]["required"],
            json!(["name"])
        );
    }

    #[test]
    fn closure_reaches_nested_definitions() {
        let roots = BTreeSet::from(["io.k8s.api.apps.v1.Deployment".to_string()]);
        let schemas = closure(&roots, &BTreeMap::new());
        for name in [
            "io.k8s.api.core.v1.Container",
            OBJECT_META,
            "io.k8s.apimachinery.pkg.api.resource.Quantity",
        ] {
            assert!(schemas.contains_key(name), "{name} missing");
        }
        assert!(!schemas.contains_key("io.k8s.api.core.v1.Node"));
    }

    #[test]
    fn crd_definition_name_reverses_group() {
        let crd = json!({"spec": {"group": "stable.example.com", "scope": "Namespaced",
            "names": {"kind": "CronTab", "plural": "crontabs"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object"}}},
                {"name": "v2", "served": false}]}});
        let versions = crd_versions(&crd);
        assert_eq!(versions.len(), 1);
        assert_eq!(versions[0].definition(), "com.example.stable.v1.CronTab");
        assert_eq!(versions[0].subresources, vec!["status".to_string()]);
        let published = published_crd_schema(&versions[0]);
        assert_eq!(
            published[GVK_EXTENSION],
            gvk_array("stable.example.com", "v1", "CronTab")
        );
        assert!(published["properties"]["metadata"]["allOf"].is_array());
    }
}
