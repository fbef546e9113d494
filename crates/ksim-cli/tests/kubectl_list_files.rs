//! End-to-end: `kind: List` files with the real kubectl, which validates a
//! List through `/openapi/v2` (protobuf): a List applies and creates, what
//! `kubectl get -o yaml` saved applies back, `--validate=strict` catches an unknown
//! field inside a List item with kubectl's own message, and `/openapi/v2`
//! answers JSON to `kubectl get --raw`.

use std::path::{Path, PathBuf};

use ksim_testutils::TestCluster;
use ksim_testutils::kubectl::stdout_json;

fn cluster() -> TestCluster {
    TestCluster::start_api_only(Path::new(env!("CARGO_BIN_EXE_ksim")))
}

fn write(cluster: &TestCluster, name: &str, text: &str) -> PathBuf {
    let path = cluster.env().root().join(name);
    std::fs::write(&path, text).expect("write the manifest");
    path
}

const TWO_CONFIGMAPS: &str = "apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: first
  data:
    a: \"1\"
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: second
  data:
    b: \"2\"
";

fn configmap_data(cluster: &TestCluster, name: &str) -> serde_json::Value {
    stdout_json(&cluster.kubectl(&["get", "cm", name, "-o", "json"]))["data"].clone()
}

#[test]
fn kubectl_apply_of_a_list_file_creates_its_items() {
    let cluster = cluster();
    let file = write(&cluster, "two.yaml", TWO_CONFIGMAPS);
    let applied = cluster.kubectl(&["apply", "-f", file.to_str().expect("utf-8 path")]);
    assert_eq!(
        applied.success().stdout,
        "configmap/first created\nconfigmap/second created\n"
    );
    assert_eq!(
        configmap_data(&cluster, "first"),
        serde_json::json!({"a": "1"})
    );
    assert_eq!(
        configmap_data(&cluster, "second"),
        serde_json::json!({"b": "2"})
    );
}

#[test]
fn kubectl_create_of_a_list_file_creates_its_items() {
    let cluster = cluster();
    let file = write(&cluster, "two.yaml", TWO_CONFIGMAPS);
    let created = cluster.kubectl(&["create", "-f", file.to_str().expect("utf-8 path")]);
    assert_eq!(
        created.success().stdout,
        "configmap/first created\nconfigmap/second created\n"
    );
    assert_eq!(
        configmap_data(&cluster, "second"),
        serde_json::json!({"b": "2"})
    );
}

/// Issue 12's report: `kubectl get cm -o yaml > all.yaml`, edit, `kubectl
/// apply -f all.yaml`.
#[test]
fn kubectl_apply_of_what_get_o_yaml_saved_updates_the_items() {
    let cluster = cluster();
    for (name, data) in [("first", "a=1"), ("second", "b=2")] {
        cluster
            .kubectl(&[
                "create",
                "configmap",
                name,
                &format!("--from-literal={data}"),
            ])
            .success();
    }
    let saved = cluster.kubectl(&["get", "cm", "first", "second", "-o", "yaml"]);
    let text = saved.success().stdout.clone();
    assert!(text.starts_with("apiVersion: v1\nitems:\n"), "{text}");
    assert!(text.contains("kind: List"), "{text}");
    let edited = text.replace("a: \"1\"", "a: \"9\"");
    assert_ne!(edited, text);
    let file = write(&cluster, "all.yaml", &edited);
    let applied = cluster.kubectl(&["apply", "-f", file.to_str().expect("utf-8 path")]);
    assert_eq!(
        applied.success().stdout,
        "configmap/first configured\nconfigmap/second configured\n"
    );
    assert_eq!(
        configmap_data(&cluster, "first"),
        serde_json::json!({"a": "9"})
    );
}

#[test]
fn strict_validation_rejects_an_unknown_field_in_a_list_item() {
    let cluster = cluster();
    let file = write(
        &cluster,
        "bad.yaml",
        "apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: good
  data:
    a: \"1\"
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: web
  spec:
    selector:
      matchLabels: {app: web}
    template:
      metadata:
        labels: {app: web}
      spec:
        containers:
        - name: c
          image: nginx
          imagePullPolcy: Always
",
    );
    let file = file.to_str().expect("utf-8 path");
    for verb in ["apply", "create"] {
        let refused = cluster.kubectl(&[verb, "--validate=strict", "-f", file]);
        refused.failure();
        assert_eq!(
            refused.stderr.trim_end(),
            format!(
                "error: error validating \"{file}\": error validating data: \
                 ValidationError(Deployment.spec.template.spec.containers[0]): \
                 unknown field \"imagePullPolcy\" in io.k8s.api.core.v1.Container; \
                 if you choose to ignore these errors, turn validation off with --validate=false"
            ),
            "kubectl {verb}"
        );
    }
    // Nothing of the List was written.
    let configmaps = cluster.kubectl(&["get", "cm", "good", "--ignore-not-found", "-o", "name"]);
    assert_eq!(configmaps.success().stdout, "");
}

#[test]
fn a_list_of_several_kinds_with_quantities_and_int_or_strings_validates() {
    let cluster = cluster();
    let file = write(
        &cluster,
        "mixed.yaml",
        "apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web}
  spec:
    strategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: \"25%\"}}
    selector: {matchLabels: {app: web}}
    template:
      metadata: {labels: {app: web}}
      spec:
        containers:
        - name: c
          image: nginx
          resources: {requests: {cpu: 1, memory: 64Mi}}
          livenessProbe: {httpGet: {path: /, port: 80}}
- apiVersion: v1
  kind: Service
  metadata: {name: web}
  spec:
    selector: {app: web}
    ports: [{port: 80, targetPort: 8080}]
- apiVersion: policy/v1
  kind: PodDisruptionBudget
  metadata: {name: web}
  spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}
",
    );
    let applied = cluster.kubectl(&[
        "apply",
        "--validate=strict",
        "-f",
        file.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(
        applied.success().stdout,
        "deployment.apps/web created\nservice/web created\npoddisruptionbudget.policy/web created\n"
    );
}

#[test]
fn kubectl_get_raw_openapi_v2_is_json() {
    let cluster = cluster();
    let raw = cluster.kubectl(&["get", "--raw", "/openapi/v2"]);
    let document = stdout_json(&raw);
    assert_eq!(document["swagger"], "2.0");
    assert_eq!(document["info"]["title"], "Kubernetes");
    assert_eq!(
        document["definitions"]["io.k8s.api.core.v1.ConfigMap"]["x-kubernetes-group-version-kind"],
        serde_json::json!([{"group": "", "kind": "ConfigMap", "version": "v1"}])
    );
    let list = &document["paths"]["/api/v1/namespaces/{namespace}/configmaps"]["get"];
    assert_eq!(
        list["responses"]["200"]["schema"]["$ref"],
        "#/definitions/io.k8s.api.core.v1.ConfigMapList"
    );
}

#[test]
fn a_list_of_custom_resources_validates_against_the_crds_schema() {
    let cluster = cluster();
    let crd = write(
        &cluster,
        "crd.yaml",
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  names: {kind: Gadget, plural: gadgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              note: {type: string, nullable: true}
              free:
                type: object
                x-kubernetes-preserve-unknown-fields: true
                properties: {known: {type: string}}
",
    );
    cluster.apply_crd(&crd, "gadgets.example.com");
    let good = write(
        &cluster,
        "gadgets.yaml",
        "apiVersion: v1
kind: List
items:
- apiVersion: example.com/v1
  kind: Gadget
  metadata: {name: g1}
  spec: {size: 1, note: null, free: {known: a, other: 1, nested: {x: 1}}}
",
    );
    let applied = cluster.kubectl(&[
        "apply",
        "--validate=strict",
        "-f",
        good.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(applied.success().stdout, "gadget.example.com/g1 created\n");
    let bad = write(
        &cluster,
        "bad-gadgets.yaml",
        "apiVersion: v1
kind: List
items:
- apiVersion: example.com/v1
  kind: Gadget
  metadata: {name: g2}
  spec: {size: 1, colour: red}
",
    );
    let bad = bad.to_str().expect("utf-8 path");
    let refused = cluster.kubectl(&["apply", "--validate=strict", "-f", bad]);
    refused.failure();
    assert_eq!(
        refused.stderr.trim_end(),
        format!(
            "error: error validating \"{bad}\": error validating data: \
             ValidationError(Gadget.spec): unknown field \"colour\" in com.example.v1.Gadget.spec; \
             if you choose to ignore these errors, turn validation off with --validate=false"
        )
    );
}
