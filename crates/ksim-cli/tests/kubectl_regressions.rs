//! Regression tests for differences from a real cluster that the first
//! end-to-end run found: each pins what kube-apiserver 1.33 with kubectl
//! 1.33 prints (the comment above each test says what ksim did before).

use std::path::Path;

use ksim_testutils::TestCluster;
use ksim_testutils::kubectl::{header_line, stdout_json, table_rows};
use ksim_testutils::poll_until;
use serde_json::json;

fn cluster() -> TestCluster {
    TestCluster::start_api_only(Path::new(env!("CARGO_BIN_EXE_ksim")))
}

// BUG 1 (kubectl_get): a Node created with a status keeps it.
// kube-apiserver's node strategy lets clients set *all* fields, status
// included, on create (pkg/registry/core/node/strategy.go PrepareForCreate:
// "Nodes allow *all* fields, including status, to be set on create."), so
// `kubectl apply -f node.yaml` with a status shows `Ready ... v1.33.0` and the
// INTERNAL-IP. ksim drops the status: `kubectl get node -o json` has no
// `status` at all, the row reads `node-a   Unknown   control-plane   0s` with
// an empty VERSION, and wide shows `<none>` / `<unknown>` for node info.
// Every tool that registers fake nodes with one create (kwok, tests,
// `kubectl apply`) hits this.
#[test]
fn node_created_with_a_status_keeps_it() {
    let cluster = cluster();
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            "apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels:
    node-role.kubernetes.io/control-plane: \"\"
status:
  conditions:
  - type: Ready
    status: \"True\"
  nodeInfo:
    kubeletVersion: v1.33.0
    osImage: Ubuntu 24.04
    kernelVersion: 6.8.0
    containerRuntimeVersion: containerd://1.7.0
  addresses:
  - type: InternalIP
    address: 10.0.0.1
",
        )
        .success();
    let wide = cluster.kubectl(&["get", "nodes", "-o", "wide"]);
    wide.success();
    assert_eq!(
        header_line(&wide),
        "NAME     STATUS   ROLES           AGE   VERSION   INTERNAL-IP   EXTERNAL-IP   OS-IMAGE       KERNEL-VERSION   CONTAINER-RUNTIME"
    );
    let row = &table_rows(&wide)[0];
    assert_eq!(row[..3], ["node-a", "Ready", "control-plane"]);
    assert_eq!(
        row[4..],
        [
            "v1.33.0",
            "10.0.0.1",
            "<none>",
            "Ubuntu",
            "24.04",
            "6.8.0",
            "containerd://1.7.0"
        ]
    );
}

// BUG 2 (kubectl_update): removing the last label/annotation leaves no empty
// map behind. ObjectMeta's labels and annotations are `omitempty`, so after
// `kubectl label cm c team-` and `kubectl annotate cm c note-` a real server's
// `-o json` metadata has neither key. ksim keeps `"labels": {}` and
// `"annotations": {}` (so `-o yaml` prints `labels: {}`).
#[test]
fn removing_the_last_label_and_annotation_leaves_no_empty_maps() {
    let cluster = cluster();
    cluster.kubectl(&["create", "configmap", "c"]).success();
    cluster
        .kubectl(&["label", "configmap", "c", "team=a"])
        .success();
    cluster
        .kubectl(&["annotate", "configmap", "c", "note=x"])
        .success();
    cluster
        .kubectl(&["label", "configmap", "c", "team-"])
        .success();
    cluster
        .kubectl(&["annotate", "configmap", "c", "note-"])
        .success();
    let object = stdout_json(&cluster.kubectl(&["get", "configmap", "c", "-o", "json"]));
    assert!(object["metadata"].get("labels").is_none(), "{object:#}");
    assert!(
        object["metadata"].get("annotations").is_none(),
        "{object:#}"
    );
}

// BUG 4 (kubectl_errors): malformed JSON bodies get kube-apiserver's message.
// Real: `Error from server (BadRequest): couldn't get version/kind; json parse
// error: unexpected end of JSON input`. ksim: `... json parse error: EOF while
// parsing a value at line 1 column 14` (serde_json's wording leaks out).
#[test]
fn truncated_json_body_gets_kubes_parse_error() {
    let cluster = cluster();
    let file = cluster.env().root().join("truncated.json");
    std::fs::write(&file, r#"{"apiVersion":"#).expect("write");
    let out = cluster.kubectl(&[
        "create",
        "--raw",
        "/api/v1/namespaces/default/configmaps",
        "-f",
        file.to_str().expect("UTF-8 path"),
    ]);
    out.failure();
    assert_eq!(
        out.stderr,
        "Error from server (BadRequest): couldn't get version/kind; json parse error: unexpected end of JSON input\n"
    );
}

// BUG 5 (kubectl_delete): an object being deleted takes no new finalizers.
// apimachinery's ValidateObjectMetaUpdate refuses them once
// deletionTimestamp is set; kubectl prints
//   The ConfigMap "held" is invalid: metadata.finalizers: Forbidden: no new
//   finalizers can be added if the object is being deleted, found new
//   finalizers []string{"example.com/late"}
// ksim accepts the patch (`configmap/held patched`), so a terminating object
// can be held forever by a controller that keeps re-adding its finalizer.
#[test]
fn terminating_object_takes_no_new_finalizers() {
    let cluster = cluster();
    cluster
        .kubectl_stdin(
            &["create", "-f", "-"],
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  finalizers:\n  - example.com/hold\n",
        )
        .success();
    cluster
        .kubectl(&["delete", "configmap", "held", "--wait=false"])
        .success();
    let refused = cluster.kubectl(&[
        "patch",
        "configmap",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold","example.com/late"]}}"#,
    ]);
    refused.failure();
    assert_eq!(
        refused.stderr,
        "The ConfigMap \"held\" is invalid: metadata.finalizers: Forbidden: no new finalizers can \
         be added if the object is being deleted, found new finalizers []string{\"example.com/late\"}\n"
    );
    let object = stdout_json(&cluster.kubectl(&["get", "configmap", "held", "-o", "json"]));
    assert_eq!(
        object["metadata"]["finalizers"],
        json!(["example.com/hold"])
    );
}

// BUG 9 (kubectl_get, low): v1 Endpoints carry kube-apiserver 1.33's
// deprecation warning and their ports' protocol default. Real 1.33:
//   $ kubectl get endpoints ep1
//   Warning: v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice
// and a stored port `{port: 80}` reads back `{"port": 80, "protocol": "TCP"}`
// (SetDefaults_EndpointPort). ksim prints no warning and stores no protocol.
#[test]
fn endpoints_are_deprecated_and_port_protocol_defaults() {
    let cluster = cluster();
    let created = cluster.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: Endpoints\nmetadata:\n  name: ep1\nsubsets:\n- addresses: [{ip: 10.0.0.5}]\n  ports: [{port: 80}]\n",
    );
    created.success();
    let out = cluster.kubectl(&["get", "endpoints", "ep1"]);
    out.success();
    assert_eq!(
        out.stderr,
        "Warning: v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice\n"
    );
    let object = stdout_json(&cluster.kubectl(&["get", "endpoints", "ep1", "-o", "json"]));
    assert_eq!(
        object["subsets"][0]["ports"],
        json!([{"port": 80, "protocol": "TCP"}])
    );
}

// BUG 10 (kubectl_delete, DATA LOSS, most important): `dryRun=All` on DELETE
// deletes. Real: `kubectl delete cm keep --dry-run=server` prints
// `configmap "keep" deleted (server dry run)` and the object stays, as does
// every object of `kubectl delete cm --all --dry-run=server`
// (deletecollection). ksim prints the same line but removes the object(s):
// the next `kubectl get cm keep` says NotFound. (Dry-run create, update,
// patch and apply are respected.)
#[test]
fn server_dry_run_delete_keeps_the_object() {
    let cluster = cluster();
    cluster.kubectl(&["create", "configmap", "keep"]).success();
    cluster.kubectl(&["create", "configmap", "also"]).success();
    let out = cluster.kubectl(&["delete", "configmap", "keep", "--dry-run=server"]);
    assert_eq!(
        out.success().stdout,
        "configmap \"keep\" deleted (server dry run)\n"
    );
    let still = cluster.kubectl(&["get", "configmap", "keep", "-o", "name"]);
    assert_eq!(still.success().stdout, "configmap/keep\n");
    cluster
        .kubectl(&["delete", "configmaps", "--all", "--dry-run=server"])
        .success();
    let all = cluster.kubectl(&[
        "get",
        "configmaps",
        "--field-selector=metadata.name!=kube-root-ca.crt",
        "-o",
        "name",
    ]);
    assert_eq!(all.success().stdout, "configmap/also\nconfigmap/keep\n");
}

// BUG 11 (kubectl_errors, important): unknown fields are dropped, never
// stored. With fieldValidation Warn (the server default, and what kubectl
// patch / create --raw get) or Ignore (`--validate=false`), kube-apiserver
// decodes into the typed object, so unknown fields vanish: real
//   $ kubectl create --validate=false -f deployment-unknown-field.yaml
//   $ kubectl get deploy unknown -o jsonpath='{.spec.bogus}'    -> (empty)
//   $ kubectl patch deploy unknown --type=merge -p '{"spec":{"bogus2":1}}'
//   Warning: unknown field "spec.bogus2"
//   deployment.apps/unknown patched (no change)
// ksim stores `spec.bogus: 1` (and `bogus`/`metadata.bogusMeta` at any depth,
// with managedFields entries `f:bogus`), bumps generation for it, and the
// patch path prints no warning at all. Clients then read objects that no
// Kubernetes server would hold.
#[test]
fn unknown_fields_are_dropped_under_warn_and_ignore() {
    let cluster = cluster();
    let file = format!(
        "{}/tests/fixtures/deployment-unknown-field.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    cluster
        .kubectl(&["create", "--validate=false", "-f", &file])
        .success();
    let object = stdout_json(&cluster.kubectl(&["get", "deployment", "unknown", "-o", "json"]));
    assert!(object["spec"].get("bogus").is_none(), "{object:#}");

    let patched = cluster.kubectl(&[
        "patch",
        "deployment",
        "unknown",
        "--type=merge",
        "-p",
        r#"{"spec":{"bogus2":1}}"#,
    ]);
    patched.success();
    assert_eq!(patched.stderr, "Warning: unknown field \"spec.bogus2\"\n");
    assert_eq!(
        patched.stdout,
        "deployment.apps/unknown patched (no change)\n"
    );
    let object = stdout_json(&cluster.kubectl(&["get", "deployment", "unknown", "-o", "json"]));
    assert!(object["spec"].get("bogus2").is_none(), "{object:#}");
    assert_eq!(object["metadata"]["generation"], json!(1));
}

// BUG 12b (kubectl_delete, user-visible consequence of BUG 12): `kubectl
// delete -f` of a manifest holding a namespace and objects in it succeeds on
// a real cluster (the namespace is still Terminating when kubectl deletes the
// objects after it):
//   namespace "stack" deleted
//   configmap "conf" deleted
// ksim prints `namespace "stack" deleted`, then `Error from server
// (NotFound): error when deleting "...": configmaps "conf" not found` and
// exits 1.
#[test]
fn delete_of_a_manifest_with_its_namespace_succeeds() {
    let cluster = cluster();
    let manifest = "apiVersion: v1
kind: Namespace
metadata:
  name: stack
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: conf
  namespace: stack
";
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], manifest)
        .success();
    let deleted = cluster.kubectl_stdin(&["delete", "--wait=false", "-f", "-"], manifest);
    deleted.success();
    assert_eq!(
        deleted.stdout,
        "namespace \"stack\" deleted\nconfigmap \"conf\" deleted\n"
    );
}

// Pods run as the namespace's `default` ServiceAccount, which every
// namespace gets (the serviceaccount controller's job in a real cluster);
// naming a missing account is refused by the ServiceAccount admission.
#[test]
fn pods_run_as_the_default_service_account_of_their_namespace() {
    let cluster = cluster();
    cluster.kubectl(&["create", "namespace", "team"]).success();
    let accounts = cluster
        .kubectl(&["get", "serviceaccounts", "-n", "team", "-o", "name"])
        .success()
        .stdout
        .clone();
    assert_eq!(accounts, "serviceaccount/default\n");
    cluster
        .kubectl(&["run", "p1", "-n", "team", "--image=nginx"])
        .success();
    let pod = stdout_json(&cluster.kubectl(&["get", "pod", "p1", "-n", "team", "-o", "json"]));
    assert_eq!(pod["spec"]["serviceAccountName"], json!("default"));
    let refused = cluster.kubectl(&[
        "run",
        "p2",
        "-n",
        "team",
        "--image=nginx",
        "--overrides={\"spec\":{\"serviceAccountName\":\"robot\"}}",
    ]);
    refused.failure();
    assert_eq!(
        refused.stderr,
        "Error from server (Forbidden): pods \"p2\" is forbidden: error looking up service account team/robot: serviceaccount \"robot\" not found\n"
    );
}

// `kubectl auth can-i` and `kubectl auth whoami` create reviews (the first
// run got 404): ksim has no authorization, so everything is allowed, for
// the cluster administrator.
#[test]
fn auth_reviews_allow_the_administrator_everything() {
    let cluster = cluster();
    let can = cluster.kubectl(&["auth", "can-i", "delete", "nodes"]);
    assert_eq!(can.success().stdout, "yes\n");
    let whoami = cluster.kubectl(&["auth", "whoami"]);
    let text = whoami.success().stdout.clone();
    assert!(text.contains("Username    kubernetes-admin"), "{text}");
    let listed = cluster.kubectl(&["get", "selfsubjectaccessreviews"]);
    listed.failure();
    assert!(
        listed.stderr.contains("(MethodNotAllowed)"),
        "{}",
        listed.stderr
    );
}

// BUG 3 (kubectl_errors): a body whose field has the wrong JSON type is
// refused. ConfigMap.data is map[string]string; a real server answers 400:
//   Error from server (BadRequest): ConfigMap in version "v1" cannot be
//   handled as a ConfigMap: json: cannot unmarshal number into Go struct field
//   ConfigMap.data of type string
// ksim stores `"data": {"a": 1}` and answers 201; every later reader that
// decodes a ConfigMap (kube-rs, client-go) then fails on the stored object.
// Realistic trigger: kubectl's YAML is YAML 1.1, so `env: [{name: Y, value:
// "2"}]` reaches the server as `"name": true`; kube-apiserver answers
//   Error from server (BadRequest): error when creating "STDIN": Pod in
//   version "v1" cannot be handled as a Pod: json: cannot unmarshal bool into
//   Go struct field EnvVar.spec.containers.env.name of type string
// while ksim stores a Pod whose env var is named `true`.
#[test]
fn wrongly_typed_field_is_a_bad_request() {
    let cluster = cluster();
    let file = cluster.env().root().join("typed.json");
    std::fs::write(
        &file,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"typed"},"data":{"a":1}}"#,
    )
    .expect("write");
    let out = cluster.kubectl(&[
        "create",
        "--raw",
        "/api/v1/namespaces/default/configmaps",
        "-f",
        file.to_str().expect("UTF-8 path"),
    ]);
    out.failure();
    assert!(
        out.stderr.starts_with(
            "Error from server (BadRequest): ConfigMap in version \"v1\" cannot be handled as a \
             ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
        ),
        "{}",
        out.stderr
    );
    let stored = cluster.kubectl(&["get", "configmap", "typed"]);
    stored.failure();

    let pod = cluster.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: envpod\nspec:\n  containers:\n  - name: c\n    image: nginx\n    env:\n    - {name: Y, value: \"2\"}\n",
    );
    pod.failure();
    assert_eq!(
        pod.stderr,
        "Error from server (BadRequest): error when creating \"STDIN\": Pod in version \"v1\" \
         cannot be handled as a Pod: json: cannot unmarshal bool into Go struct field \
         EnvVar.spec.containers.env.name of type string\n"
    );
}

// BUG 6 (kubectl_explain): a kind's top-level `metadata` is not required.
// Real `kubectl explain pdb` lists `  metadata\t<ObjectMeta>`; ksim's OpenAPI
// v3 schema marks it required (k8s-openapi's schemars output has `metadata`
// in `required` because the Rust field is not an Option), so kubectl prints
// `  metadata\t<ObjectMeta> -required-` for every built-in kind.
#[test]
fn explain_a_kind_does_not_mark_metadata_required() {
    let cluster = cluster();
    let out = cluster.kubectl(&["explain", "pdb"]);
    out.success();
    assert!(
        out.stdout.contains("\n  metadata\t<ObjectMeta>\n"),
        "{}",
        out.stdout
    );
}

/// A cluster with the Widget CRD of tests/fixtures/crd-widgets.yaml served.
fn cluster_with_widget_crd() -> TestCluster {
    let cluster = cluster();
    let crd = format!(
        "{}/tests/fixtures/crd-widgets.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    cluster.apply_crd(std::path::Path::new(&crd), "widgets.example.com");
    cluster
}

// BUG 13 (kubectl_crd, important): custom resources are validated against
// the CRD's openAPIV3Schema. Real, for `spec.replicas: many` where the schema
// says integer:
//   The Widget "bad1" is invalid: spec.replicas: Invalid value: "string":
//   spec.replicas in body must be of type integer: "string"
// ksim stores it (`widget.example.com/bad1 created`), so the printer column
// and the scale subresource then read a string.
#[test]
fn custom_resources_are_validated_against_the_crd_schema() {
    let cluster = cluster_with_widget_crd();
    let out = cluster.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: bad1\nspec:\n  replicas: many\n",
    );
    out.failure();
    assert_eq!(
        out.stderr,
        "The Widget \"bad1\" is invalid: spec.replicas: Invalid value: \"string\": spec.replicas in \
         body must be of type integer: \"string\"\n"
    );
}

// BUG 14 (kubectl_crd): unknown fields of custom resources are pruned (the
// CRD schema is structural, without x-kubernetes-preserve-unknown-fields).
// Real: `kubectl create --validate=false` of a Widget with `spec.color: red`
// stores `spec: {}`. ksim stores `{"color":"red"}`. (Strict validation does
// refuse it, with kube's message.)
#[test]
fn unknown_fields_of_custom_resources_are_pruned() {
    let cluster = cluster_with_widget_crd();
    cluster
        .kubectl_stdin(
            &["create", "--validate=false", "-f", "-"],
            "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: bad3\nspec:\n  color: red\n",
        )
        .success();
    let object = stdout_json(&cluster.kubectl(&["get", "widget", "bad3", "-o", "json"]));
    assert_eq!(object["spec"], json!({}), "{object:#}");
}

const GADGET_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  names: {kind: Gadget, plural: gadgets}
  scope: Cluster
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
              mode: {type: string, default: auto}
              count: {type: integer, minimum: 1}
";

// BUG 15 (kubectl_crd): CRD schema defaults are applied. Real: a Gadget
// created with `spec: {}` reads back `spec: {mode: auto}` (structural
// defaulting on create and on read). ksim stores and returns `spec: {}`.
#[test]
fn crd_schema_defaults_are_applied() {
    let cluster = cluster();
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], GADGET_CRD)
        .success();
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/gadgets.example.com",
            "--timeout=20s",
        ])
        .success();
    let gadget = "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g1\nspec: {}\n";
    poll_until("gadgets served", || {
        let applied = cluster.kubectl_stdin(&["apply", "-f", "-"], gadget);
        if applied.status == 0 {
            Ok(())
        } else {
            Err(applied.stderr)
        }
    });
    let object = stdout_json(&cluster.kubectl(&["get", "gadget", "g1", "-o", "json"]));
    assert_eq!(object["spec"], json!({"mode": "auto"}), "{object:#}");
}

// BUG 16 (kubectl_crd): CustomResourceDefinitions are validated (kind quoted:
// YAML 1.1 reads a bare No as false). Real, for a
// v1 CRD version without a schema:
//   The CustomResourceDefinition "nos.example.com" is invalid:
//   spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required
// ksim creates it.
#[test]
fn crd_without_a_schema_is_invalid() {
    let cluster = cluster();
    let out = cluster.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: nos.example.com
spec:
  group: example.com
  names: {kind: 'No', plural: nos}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
",
    );
    out.failure();
    assert_eq!(
        out.stderr,
        "The CustomResourceDefinition \"nos.example.com\" is invalid: \
         spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required\n"
    );
}

// BUG 17 (kubectl_errors, low; same family as BUG 3): a malformed quantity is
// a decoding error (400), not a validation error (422). kube-apiserver fails
// while unmarshalling resource.Quantity:
//   Error from server (BadRequest): error when creating "STDIN": Pod in
//   version "v1" cannot be handled as a Pod: quantities must match the regular
//   expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'
// ksim: `The Pod "q" is invalid: spec.containers[0].resources.requests[cpu]:
// Invalid value: "abc": quantities must match the regular expression ...`.
#[test]
fn malformed_quantity_is_a_decoding_error() {
    let cluster = cluster();
    let out = cluster.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: q\nspec:\n  containers:\n  - name: c\n    image: nginx\n    resources:\n      requests: {cpu: abc}\n",
    );
    out.failure();
    assert_eq!(
        out.stderr,
        "Error from server (BadRequest): error when creating \"STDIN\": Pod in version \"v1\" \
         cannot be handled as a Pod: quantities must match the regular expression \
         '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'\n"
    );
}

// BUG 18 (drain): `kubectl drain --disable-eviction` deletes pods with a
// DeleteOptions body in protobuf whose envelope says apiVersion "v1" (kube
// registers DeleteOptions into every group version). ksim answered 400
// `kind "DeleteOptions" of apiVersion "v1" cannot be sent as protobuf`, and
// before that read DELETE bodies as JSON only.
#[test]
fn drain_without_eviction_deletes_with_protobuf_delete_options() {
    let cluster = cluster();
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata:\n  name: p1\n  namespace: default\n\
             spec:\n  nodeName: n1\n  containers:\n  - name: c\n    image: nginx\n",
        )
        .success();
    let out = cluster.kubectl(&[
        "drain",
        "n1",
        "--disable-eviction",
        "--force",
        "--grace-period=0",
        "--timeout=30s",
    ]);
    out.success();
    assert!(out.stdout.contains("pod/p1 deleted\n"), "{}", out.stdout);
    assert!(out.stdout.ends_with("node/n1 drained\n"), "{}", out.stdout);
    let pods = cluster.kubectl(&["get", "pods", "-o", "name"]);
    assert_eq!(pods.success().stdout, "");
}
