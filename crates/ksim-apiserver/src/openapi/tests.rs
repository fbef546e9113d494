//! Tests of [`OpenApi`]: the index, the group-version documents and field
//! validation of built-in and custom resources.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::resources::built_in_resources;

fn crontab_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com",
            "scope": "Namespaced",
            "names": {"kind": "CronTab", "plural": "crontabs", "singular": "crontab", "listKind": "CronTabList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {
                            "cronSpec": {"type": "string"},
                            "replicas": {"type": "integer"},
                            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        }},
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    }
                }}
            }]
        }
    })
}

fn open_api() -> OpenApi {
    OpenApi::new(&built_in_resources(), &[crontab_crd()])
}

fn document(open_api: &OpenApi, path: &str) -> Value {
    let (bytes, _) = open_api.document(path).expect("document exists");
    serde_json::from_slice(&bytes).expect("document is JSON")
}

fn resource(kind: &str) -> Arc<ResourceInfo> {
    built_in_resources()
        .into_iter()
        .find(|r| r.kind == kind)
        .expect("kind is built in")
}

fn crontab_resource() -> ResourceInfo {
    ResourceInfo {
        group: "stable.example.com".into(),
        version: "v1".into(),
        kind: "CronTab".into(),
        plural: "crontabs".into(),
        singular: "crontab".into(),
        namespaced: true,
        short_names: vec![],
        categories: vec![],
        subresources: vec!["status".into()],
        custom: true,
    }
}

#[test]
fn index_lists_every_group_version_with_its_hash() {
    let open_api = open_api();
    let index: Value = serde_json::from_slice(&open_api.index()).expect("index is JSON");
    for path in [
        "api/v1",
        "apis/apps/v1",
        "apis/policy/v1",
        "apis/stable.example.com/v1",
    ] {
        let url = index["paths"][path]["serverRelativeURL"]
            .as_str()
            .unwrap_or_else(|| panic!("{path} missing from the index"));
        let (_, hash) = open_api.document(path).expect("listed documents exist");
        assert_eq!(url, format!("/openapi/v3/{path}?hash={hash}"));
    }
    assert!(open_api.document("apis/nope/v1").is_none());
}

#[test]
fn apps_document_has_deployment_schema_with_gvk_and_patch_metadata() {
    let doc = document(&open_api(), "apis/apps/v1");
    assert_eq!(doc["openapi"], "3.0.0");
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"],
        json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
    );
    let containers = &schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
    assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
    for name in [
        "io.k8s.api.apps.v1.DeploymentList",
        "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
        "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "io.k8s.api.autoscaling.v1.Scale",
    ] {
        assert!(schemas.get(name).is_some(), "{name} missing");
    }
    assert!(schemas.get("io.k8s.api.core.v1.Node").is_none());
}

#[test]
fn every_deployment_patch_operation_has_gvk_field_validation_and_strategic_merge() {
    let doc = document(&open_api(), "apis/apps/v1");
    let paths = doc["paths"].as_object().expect("paths");
    let deployment_patches: Vec<&Value> = paths
        .values()
        .filter_map(|p| p.get("patch"))
        .filter(|op| op["x-kubernetes-group-version-kind"]["kind"] == "Deployment")
        .collect();
    assert_eq!(deployment_patches.len(), 2, "item and status");
    for op in deployment_patches {
        assert_eq!(
            op["x-kubernetes-group-version-kind"],
            json!({"group": "apps", "kind": "Deployment", "version": "v1"})
        );
        let names: Vec<&str> = op["parameters"]
            .as_array()
            .expect("parameters")
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert!(names.contains(&"fieldValidation"), "{names:?}");
        assert!(names.contains(&"force"), "{names:?}");
        assert!(op["requestBody"]["content"]["application/strategic-merge-patch+json"].is_object());
    }
}

#[test]
fn crd_schema_and_paths_appear_in_its_group_version_document() {
    let doc = document(&open_api(), "apis/stable.example.com/v1");
    let schema = &doc["components"]["schemas"]["com.example.stable.v1.CronTab"];
    assert_eq!(
        schema["x-kubernetes-group-version-kind"],
        json!([{"group": "stable.example.com", "kind": "CronTab", "version": "v1"}])
    );
    assert_eq!(
        schema["properties"]["spec"]["properties"]["cronSpec"]["type"],
        "string"
    );
    assert!(schema["properties"]["metadata"]["allOf"].is_array());
    assert!(
        doc["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object()
    );
    let item = &doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}"];
    assert_eq!(
        item["patch"]["x-kubernetes-group-version-kind"]["kind"],
        "CronTab"
    );
    let content = item["patch"]["requestBody"]["content"]
        .as_object()
        .expect("content");
    assert!(content.contains_key("application/merge-patch+json"));
    assert!(!content.contains_key("application/strategic-merge-patch+json"));
    assert!(
        doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}/status"]
            .is_object()
    );
}

#[test]
fn rebuilding_with_other_crds_shares_built_in_documents() {
    let first = open_api();
    let second = first.with_crds(&[]);
    assert!(second.document("apis/stable.example.com/v1").is_none());
    let (a, hash_a) = first.document("api/v1").expect("core document");
    let (b, hash_b) = second.document("api/v1").expect("core document");
    assert_eq!(hash_a, hash_b);
    assert_eq!(a.as_ptr(), b.as_ptr(), "the built-in bytes are shared");
    let third = OpenApi::new(&built_in_resources(), &[]);
    assert_eq!(
        third.document("api/v1").expect("core").0.as_ptr(),
        a.as_ptr()
    );
}

#[test]
fn caching_follows_the_requested_hash() {
    assert_eq!(
        OpenApi::caching("api/v1", Some("H"), "H"),
        DocumentCaching::Immutable
    );
    assert_eq!(
        OpenApi::caching("api/v1", None, "H"),
        DocumentCaching::NoCache
    );
    assert_eq!(
        OpenApi::caching("api/v1", Some("OLD"), "H"),
        DocumentCaching::Redirect("/openapi/v3/api/v1?hash=H".into())
    );
    assert_eq!(
        DocumentCaching::Immutable.cache_control(),
        Some("public, immutable")
    );
}

fn deployment(extra_spec: Value, container: Value) -> Value {
    let mut object = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}, "annotations": {"a": "b"},
            "creationTimestamp": null, "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [container],
                    "tolerations": [{"key": "k", "operator": "Exists"}]}
            }
        }
    });
    if let (Some(spec), Value::Object(extra)) = (object["spec"].as_object_mut(), extra_spec) {
        spec.extend(extra);
    }
    object
}

#[test]
fn unknown_fields_of_built_in_kinds() {
    let open_api = open_api();
    let deployments = resource("Deployment");
    let valid_container = json!({"name": "web", "image": "nginx", "imagePullPolicy": "Always",
        "resources": {"requests": {"cpu": "1"}}, "ports": [{"containerPort": 80}]});
    let cases = [
        (
            "valid",
            deployment(json!({}), valid_container.clone()),
            vec![],
        ),
        (
            "unknown spec field",
            deployment(json!({"foo": 1}), valid_container.clone()),
            vec![r#"unknown field "spec.foo""#],
        ),
        (
            "misspelt container field",
            deployment(
                json!({}),
                json!({"name": "web", "image": "nginx", "imagePullPolcy": "Always"}),
            ),
            vec![r#"unknown field "spec.template.spec.containers[0].imagePullPolcy""#],
        ),
        (
            "unknown field nested in a port",
            deployment(
                json!({}),
                json!({"name": "web", "ports": [{"containerPort": 80, "hostPrt": 1}]}),
            ),
            vec![r#"unknown field "spec.template.spec.containers[0].ports[0].hostPrt""#],
        ),
    ];
    for (name, object, expected) in cases {
        assert_eq!(
            open_api.unknown_fields(&deployments, &object),
            expected,
            "{name}"
        );
    }
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "bogus": 1},
        "spec": {"containers": [{"name": "c"}]}, "top": true});
    assert_eq!(
        open_api.unknown_fields(&resource("Pod"), &pod),
        vec![
            r#"unknown field "metadata.bogus""#,
            r#"unknown field "top""#
        ]
    );
}

#[test]
fn unknown_fields_of_custom_resources_honour_preserve_unknown_fields() {
    let open_api = open_api();
    let crontabs = crontab_resource();
    let valid = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "c", "labels": {"a": "b"}},
        "spec": {"cronSpec": "* * * * *", "extra": {"anything": {"nested": [1, 2]}}},
        "status": {"whatever": true}});
    assert!(open_api.unknown_fields(&crontabs, &valid).is_empty());
    let invalid = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "c"}, "spec": {"cronSpec": "x", "foo": 1}});
    assert_eq!(
        open_api.unknown_fields(&crontabs, &invalid),
        vec![r#"unknown field "spec.foo""#]
    );
    let unknown_kind = ResourceInfo {
        kind: "Other".into(),
        ..crontab_resource()
    };
    assert!(open_api.unknown_fields(&unknown_kind, &invalid).is_empty());
}

fn collect_refs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("$ref", Value::String(target)) => out.push(target),
                    _ => collect_refs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

#[test]
fn every_reference_in_every_document_resolves_within_it() {
    let open_api = open_api();
    let index: Value = serde_json::from_slice(&open_api.index()).expect("index is JSON");
    let paths = index["paths"].as_object().expect("paths");
    assert!(paths.len() >= 10, "{:?}", paths.keys());
    for path in paths.keys() {
        let doc = document(&open_api, path);
        let mut refs = Vec::new();
        collect_refs(&doc, &mut refs);
        assert!(!refs.is_empty());
        for target in refs {
            let name = target
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("{path}: foreign reference {target}"));
            assert!(
                doc["components"]["schemas"].get(name).is_some(),
                "{path}: {name} referenced but missing"
            );
        }
    }
}

#[test]
fn decode_errors_are_bad_requests_naming_kind_and_version() {
    let open_api = open_api();
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "typed"}, "data": {"a": 1}});
    let error = open_api
        .decode_errors(&resource("ConfigMap"), &config_map)
        .expect("a number is no string");
    assert_eq!(error.code, 400);
    assert_eq!(error.reason, "BadRequest");
    assert_eq!(
        error.message,
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
    );
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "q"},
        "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "abc"}}}]}});
    assert_eq!(
        open_api
            .decode_errors(&resource("Pod"), &pod)
            .map(|e| e.message),
        Some("Pod in version \"v1\" cannot be handled as a Pod: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'".to_string())
    );
    let typed = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "typed"}, "data": {"a": "1"}, "bogus": 1});
    let check = open_api.check_fields(&resource("ConfigMap"), &typed);
    assert!(check.decode_error.is_none());
    assert_eq!(check.unknown, vec![r#"unknown field "bogus""#]);
    // Custom resources decode as unstructured JSON: their schema validates them.
    let crontab = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "c"}, "spec": {"replicas": "many"}});
    assert!(
        open_api
            .decode_errors(&crontab_resource(), &crontab)
            .is_none()
    );
    assert!(open_api.crd_schema(&crontab_resource()).is_some());
}

/// The Widget CRD of the kubectl end-to-end tests (crd-widgets.yaml).
fn widget_crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "string"}, "replicas": {"type": "integer"},
                        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                            "x-kubernetes-preserve-unknown-fields": true}}},
                    "status": {"type": "object", "properties": {
                        "replicas": {"type": "integer"}, "phase": {"type": "string"}}}}}}}]}})
}

#[test]
fn unknown_fields_of_custom_resources_are_what_pruning_drops() {
    let open_api = OpenApi::new(&built_in_resources(), &[widget_crd()]);
    let widgets = ResourceInfo {
        group: "example.com".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
        singular: "widget".into(),
        subresources: vec!["status".into(), "scale".into()],
        ..crontab_resource()
    };
    let object = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "bad3", "bogus": 1},
        "spec": {"color": "red", "template": {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "junk": true}, "spec": {"anything": 1}}},
        "status": {"replicas": 1, "extra": 2}, "top": 1});
    assert_eq!(
        open_api.unknown_fields(&widgets, &object),
        vec![
            r#"unknown field "metadata.bogus""#,
            r#"unknown field "spec.color""#,
            r#"unknown field "spec.template.metadata.junk""#,
            r#"unknown field "status.extra""#,
            r#"unknown field "top""#,
        ]
    );
}

#[test]
fn crds_themselves_decode_cleanly() {
    let open_api = open_api();
    let mut crd = widget_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"] = json!({"type": "string", "default": "small", "enum": ["small", 1],
            "items": [{"type": "string"}], "additionalProperties": false});
    let check = open_api.check_fields(&resource("CustomResourceDefinition"), &crd);
    assert!(check.decode_error.is_none(), "{:?}", check.decode_error);
    assert!(check.unknown.is_empty(), "{:?}", check.unknown);
}
