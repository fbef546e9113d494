//! End-to-end tests of bad input: each must get the error line kubectl
//! prints against kube-apiserver 1.33 (invalid manifests, unknown fields,
//! stale resourceVersions, malformed YAML, missing namespaces and objects,
//! unknown resource types, oversized bodies), and leave nothing stored.

use std::path::Path;

use ksim_testutils::TestCluster;

fn cluster() -> TestCluster {
    TestCluster::start_api_only(Path::new(env!("CARGO_BIN_EXE_ksim")))
}

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Runs kubectl, expects it to fail, and returns its stderr.
#[track_caller]
fn stderr_of_failure(cluster: &TestCluster, args: &[&str]) -> String {
    let out = cluster.kubectl(args);
    out.failure();
    out.stderr.clone()
}

#[test]
fn invalid_manifest_selector_not_matching_labels() {
    let cluster = cluster();
    let expected = "The Deployment \"bad\" is invalid: spec.template.metadata.labels: Invalid value: \
                    map[string]string{\"app\":\"b\"}: `selector` does not match template `labels`\n";
    let file = fixture("deployment-bad-selector.yaml");
    for verb in ["apply", "create"] {
        assert_eq!(
            stderr_of_failure(&cluster, &[verb, "-f", &file]),
            expected,
            "{verb}"
        );
    }
    let missing = cluster.kubectl(&["get", "deployment", "bad"]);
    assert_eq!(
        missing.stderr,
        "Error from server (NotFound): deployments.apps \"bad\" not found\n"
    );
}

#[test]
fn invalid_manifest_required_value_and_invalid_name() {
    let cluster = cluster();
    let no_containers = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: empty
spec:
  selector:
    matchLabels:
      a: b
  template:
    metadata:
      labels:
        a: b
    spec:
      containers: []
";
    let out = cluster.kubectl_stdin(&["create", "-f", "-"], no_containers);
    out.failure();
    assert_eq!(
        out.stderr,
        "The Deployment \"empty\" is invalid: spec.template.spec.containers: Required value\n"
    );
    assert_eq!(
        stderr_of_failure(&cluster, &["create", "configmap", "Bad_Name"]),
        "error: failed to create configmap: ConfigMap \"Bad_Name\" is invalid: metadata.name: \
         Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case \
         alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character \
         (e.g. 'example.com', regex used for validation is \
         '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')\n"
    );
}

#[test]
fn unknown_field_is_a_strict_decoding_error() {
    let cluster = cluster();
    let file = fixture("deployment-unknown-field.yaml");
    let expected = format!(
        "Error from server (BadRequest): error when creating \"{file}\": Deployment in version \
         \"v1\" cannot be handled as a Deployment: strict decoding error: unknown field \"spec.bogus\"\n"
    );
    for verb in ["apply", "create"] {
        assert_eq!(
            stderr_of_failure(&cluster, &[verb, "-f", &file]),
            expected,
            "{verb}"
        );
    }
    // With validation off the object is stored.
    let lax = cluster.kubectl(&["create", "--validate=false", "-f", &file]);
    assert_eq!(lax.success().stdout, "deployment.apps/unknown created\n");
    // With --validate=warn the server warns and stores.
    cluster
        .kubectl(&["delete", "deployment", "unknown"])
        .success();
    let warned = cluster.kubectl(&["create", "--validate=warn", "-f", &file]);
    assert_eq!(warned.success().stdout, "deployment.apps/unknown created\n");
    assert_eq!(warned.stderr, "Warning: unknown field \"spec.bogus\"\n");
}

#[test]
fn wrong_resource_version_is_a_conflict() {
    let cluster = cluster();
    cluster
        .kubectl(&["create", "configmap", "c", "--from-literal=a=1"])
        .success();
    let stale = "apiVersion: v1
kind: ConfigMap
metadata:
  name: c
  resourceVersion: \"1\"
data:
  a: \"2\"
";
    let out = cluster.kubectl_stdin(&["replace", "-f", "-"], stale);
    out.failure();
    assert_eq!(
        out.stderr,
        "Error from server (Conflict): error when replacing \"STDIN\": Operation cannot be fulfilled \
         on configmaps \"c\": the object has been modified; please apply your changes to the latest \
         version and try again\n"
    );
    assert_eq!(
        stderr_of_failure(
            &cluster,
            &[
                "patch",
                "configmap",
                "c",
                "--type=merge",
                "-p",
                r#"{"metadata":{"resourceVersion":"1"},"data":{"a":"3"}}"#,
            ]
        ),
        "Error from server (Conflict): Operation cannot be fulfilled on configmaps \"c\": the \
         object has been modified; please apply your changes to the latest version and try again\n"
    );
    let value = cluster.kubectl(&["get", "configmap", "c", "-o", "jsonpath={.data.a}"]);
    assert_eq!(value.success().stdout, "1");
}

#[test]
fn malformed_yaml_is_refused_before_anything_is_sent() {
    let cluster = cluster();
    let file = fixture("malformed.yaml");
    assert_eq!(
        stderr_of_failure(&cluster, &["apply", "-f", &file]),
        format!(
            "error: error parsing {file}: error converting YAML to JSON: yaml: line 4: did not find \
             expected key\n"
        )
    );
}

#[test]
fn missing_namespace_is_not_found() {
    let cluster = cluster();
    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: nope\n";
    let out = cluster.kubectl_stdin(&["apply", "-f", "-"], manifest);
    out.failure();
    assert_eq!(
        out.stderr,
        "Error from server (NotFound): error when creating \"STDIN\": namespaces \"nope\" not found\n"
    );
    assert_eq!(
        stderr_of_failure(&cluster, &["create", "configmap", "c", "-n", "nope"]),
        "error: failed to create configmap: namespaces \"nope\" not found\n"
    );
    let listed = cluster.kubectl(&["get", "pods", "-n", "nope"]);
    listed.success();
    assert_eq!(listed.stderr, "No resources found in nope namespace.\n");
}

#[test]
fn missing_objects_are_not_found() {
    let cluster = cluster();
    let cases: &[(&[&str], &str)] = &[
        (
            &["get", "pod", "x"],
            "Error from server (NotFound): pods \"x\" not found\n",
        ),
        (
            &["get", "deployment", "x"],
            "Error from server (NotFound): deployments.apps \"x\" not found\n",
        ),
        (
            &["get", "node", "x"],
            "Error from server (NotFound): nodes \"x\" not found\n",
        ),
        (
            &["get", "pdb", "x", "-n", "kube-system"],
            "Error from server (NotFound): poddisruptionbudgets.policy \"x\" not found\n",
        ),
        (
            &["label", "configmap", "x", "a=b"],
            "Error from server (NotFound): configmaps \"x\" not found\n",
        ),
        (
            &["patch", "configmap", "x", "-p", "{}"],
            "Error from server (NotFound): configmaps \"x\" not found\n",
        ),
    ];
    for (args, expected) in cases {
        assert_eq!(stderr_of_failure(&cluster, args), *expected, "{args:?}");
    }
}

#[test]
fn unknown_resource_type() {
    let cluster = cluster();
    assert_eq!(
        stderr_of_failure(&cluster, &["get", "widgets"]),
        "error: the server doesn't have a resource type \"widgets\"\n"
    );
}

#[test]
fn already_exists_from_a_manifest() {
    let cluster = cluster();
    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n";
    cluster
        .kubectl_stdin(&["create", "-f", "-"], manifest)
        .success();
    let out = cluster.kubectl_stdin(&["create", "-f", "-"], manifest);
    out.failure();
    assert_eq!(
        out.stderr,
        "Error from server (AlreadyExists): error when creating \"STDIN\": configmaps \"c\" already exists\n"
    );
}

#[test]
fn pod_spec_is_immutable_except_what_kubernetes_allows() {
    let cluster = cluster();
    cluster.kubectl(&["run", "p", "--image=nginx"]).success();
    let refused = stderr_of_failure(
        &cluster,
        &[
            "patch",
            "pod",
            "p",
            "--type=merge",
            "-p",
            r#"{"spec":{"restartPolicy":"Never"}}"#,
        ],
    );
    assert!(
        refused.starts_with(
            "The Pod \"p\" is invalid: spec: Forbidden: pod updates may not change fields other than \
             `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,\
             `spec.tolerations` (only additions to existing tolerations),\
             `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
        ),
        "{refused}"
    );
    // The image may change.
    cluster
        .kubectl(&["set", "image", "pod/p", "p=nginx:1.29"])
        .success();
    let image = cluster.kubectl(&[
        "get",
        "pod",
        "p",
        "-o",
        "jsonpath={.spec.containers[0].image}",
    ]);
    assert_eq!(image.success().stdout, "nginx:1.29");
}

#[test]
fn oversized_body_is_request_entity_too_large() {
    let cluster = cluster();
    let big = cluster.env().root().join("big.json");
    let body = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"big"}},"data":{{"a":"{}"}}}}"#,
        "x".repeat(4 * 1024 * 1024)
    );
    std::fs::write(&big, body).expect("write");
    let out = cluster.kubectl(&[
        "create",
        "--raw",
        "/api/v1/namespaces/default/configmaps",
        "-f",
        big.to_str().expect("UTF-8 path"),
    ]);
    out.failure();
    assert_eq!(
        out.stderr,
        "Error from server (RequestEntityTooLarge): Request entity too large: limit is 3145728\n"
    );
    let missing = cluster.kubectl(&["get", "configmap", "big"]);
    missing.failure();
}

#[test]
fn immutable_fields_are_refused_with_kubes_messages() {
    let cluster = cluster();
    cluster
        .kubectl(&["create", "deployment", "web", "--image=nginx"])
        .success();
    assert_eq!(
        stderr_of_failure(
            &cluster,
            &[
                "patch",
                "deployment",
                "web",
                "--type=merge",
                "-p",
                r#"{"spec":{"selector":{"matchLabels":{"app":"x"}},"template":{"metadata":{"labels":{"app":"x"}}}}}"#,
            ]
        ),
        "The Deployment \"web\" is invalid: spec.selector: Invalid value: \
         v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"x\"}, \
         MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable\n"
    );
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: frozen\nimmutable: true\ndata:\n  a: b\n",
        )
        .success();
    assert_eq!(
        stderr_of_failure(
            &cluster,
            &[
                "patch",
                "configmap",
                "frozen",
                "--type=merge",
                "-p",
                r#"{"data":{"a":"c"}}"#
            ]
        ),
        "The ConfigMap \"frozen\" is invalid: data: Forbidden: field is immutable when `immutable` is set\n"
    );
}

#[test]
fn invalid_namespace_name_and_missing_image() {
    let cluster = cluster();
    assert_eq!(
        stderr_of_failure(&cluster, &["create", "namespace", "Bad"]),
        "The Namespace \"Bad\" is invalid: metadata.name: \
         Invalid value: \"Bad\": a lowercase RFC 1123 label must consist of lower case \
         alphanumeric characters or '-', and must start and end with an alphanumeric character \
         (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')\n"
    );
    let out = cluster.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: noimg\nspec:\n  containers:\n  - name: c\n",
    );
    out.failure();
    assert_eq!(
        out.stderr,
        "The Pod \"noimg\" is invalid: spec.containers[0].image: Required value\n"
    );
}

#[test]
fn apply_with_a_stale_resource_version_is_a_conflict() {
    let cluster = cluster();
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: \"1\"\n",
        )
        .success();
    let out = cluster.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  resourceVersion: \"1\"\ndata:\n  a: \"2\"\n",
    );
    out.failure();
    assert!(
        out.stderr
            .starts_with("Error from server (Conflict): error when applying patch:\n"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.ends_with(
            "for: \"STDIN\": error when patching \"STDIN\": Operation cannot be fulfilled on \
             configmaps \"c\": the object has been modified; please apply your changes to the \
             latest version and try again\n"
        ),
        "{}",
        out.stderr
    );
    let value = cluster.kubectl(&["get", "configmap", "c", "-o", "jsonpath={.data.a}"]);
    assert_eq!(value.success().stdout, "1");
}

#[test]
fn pod_validation_messages() {
    let cluster = cluster();
    let cases: &[(&str, &str)] = &[
        (
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: q2\nspec:\n  containers:\n  - name: c\n    image: nginx\n    resources:\n      requests: {cpu: \"2\"}\n      limits: {cpu: \"1\"}\n",
            "The Pod \"q2\" is invalid: spec.containers[0].resources.requests: Invalid value: \"2\": \
             must be less than or equal to cpu limit of 1\n",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: q3\nspec:\n  containers:\n  - name: c\n    image: nginx\n  - name: c\n    image: nginx\n",
            "The Pod \"q3\" is invalid: spec.containers[1].name: Duplicate value: \"c\"\n",
        ),
    ];
    for (manifest, expected) in cases {
        let out = cluster.kubectl_stdin(&["create", "-f", "-"], manifest);
        out.failure();
        assert_eq!(out.stderr, *expected);
    }
    let none = cluster.kubectl(&["get", "pods", "-o", "name"]);
    assert_eq!(none.success().stdout, "");
}
