//! End-to-end tests of the commands that change a stored object:
//! `kubectl label|annotate` (and removal with `key-`), `kubectl patch` of each
//! type (JSON, merge, strategic merge), `kubectl replace` (and its conflict on
//! a stale resourceVersion), `kubectl edit` with a scripted EDITOR and
//! `kubectl scale`.

use std::path::Path;

use ksim_testutils::TestCluster;
use ksim_testutils::kubectl::{kubectl_with_env, stdout_json};
use serde_json::{Value, json};

fn cluster() -> TestCluster {
    TestCluster::start_api_only(Path::new(env!("CARGO_BIN_EXE_ksim")))
}

fn get_json(cluster: &TestCluster, kind: &str, name: &str) -> Value {
    stdout_json(&cluster.kubectl(&["get", kind, name, "-o", "json"]))
}

/// A cluster holding deployment `web` (container `nginx`, image nginx:1.27).
fn cluster_with_deployment() -> TestCluster {
    let cluster = cluster();
    cluster
        .kubectl(&["create", "deployment", "web", "--image=nginx:1.27"])
        .success();
    cluster
}

fn container_images(deployment: &Value) -> Vec<String> {
    deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .map(|containers| {
            containers
                .iter()
                .map(|c| {
                    format!(
                        "{}={}",
                        c["name"].as_str().unwrap_or(""),
                        c["image"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn label_and_annotate_set_overwrite_and_remove() {
    let cluster = cluster();
    cluster.kubectl(&["create", "configmap", "c"]).success();
    let labeled = cluster.kubectl(&["label", "configmap", "c", "team=a", "tier=web"]);
    assert_eq!(labeled.success().stdout, "configmap/c labeled\n");
    let refused = cluster.kubectl(&["label", "configmap", "c", "team=b"]);
    refused.failure();
    assert_eq!(
        refused.stderr,
        "error: 'team' already has a value (a), and --overwrite is false\n"
    );
    cluster
        .kubectl(&["label", "configmap", "c", "team=b", "--overwrite"])
        .success();
    let annotated = cluster.kubectl(&["annotate", "configmap", "c", "note=hello world"]);
    assert_eq!(annotated.success().stdout, "configmap/c annotated\n");
    let object = get_json(&cluster, "configmap", "c");
    assert_eq!(
        object["metadata"]["labels"],
        json!({"team": "b", "tier": "web"})
    );
    assert_eq!(
        object["metadata"]["annotations"],
        json!({"note": "hello world"})
    );

    let unlabeled = cluster.kubectl(&["label", "configmap", "c", "tier-"]);
    assert_eq!(unlabeled.success().stdout, "configmap/c unlabeled\n");
    cluster
        .kubectl(&["annotate", "configmap", "c", "note-"])
        .success();
    let object = get_json(&cluster, "configmap", "c");
    assert_eq!(object["metadata"]["labels"], json!({"team": "b"}));
    assert!(
        object["metadata"]["annotations"]
            .as_object()
            .is_none_or(|a| a.is_empty()),
        "{object:#}"
    );
}

#[test]
fn label_with_a_selector_labels_every_match() {
    let cluster = cluster();
    for name in ["a", "b", "c"] {
        cluster.kubectl(&["create", "configmap", name]).success();
    }
    cluster
        .kubectl(&["label", "configmap", "a", "pick=yes"])
        .success();
    cluster
        .kubectl(&["label", "configmap", "c", "pick=yes"])
        .success();
    let out = cluster.kubectl(&["label", "configmap", "-l", "pick=yes", "done=true"]);
    assert_eq!(
        out.success().stdout,
        "configmap/a labeled\nconfigmap/c labeled\n"
    );
    let names = cluster.kubectl(&["get", "configmaps", "-l", "done", "-o", "name"]);
    assert_eq!(names.success().stdout, "configmap/a\nconfigmap/c\n");
}

#[test]
fn invalid_label_values_are_refused_with_kubes_message() {
    let cluster = cluster();
    cluster.kubectl(&["create", "configmap", "c"]).success();
    // kubectl label checks values itself; a patch reaches the server's validation.
    let out = cluster.kubectl(&[
        "patch",
        "configmap",
        "c",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"bad":"-nope-"}}}"#,
    ]);
    out.failure();
    assert_eq!(
        out.stderr,
        "The ConfigMap \"c\" is invalid: metadata.labels: Invalid value: \"-nope-\": a valid label \
         must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must \
         start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or \
         '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')\n"
    );
}

#[test]
fn json_patch_replaces_adds_removes_and_tests() {
    let cluster = cluster_with_deployment();
    let patched = cluster.kubectl(&[
        "patch",
        "deployment",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/replicas","value":3},
            {"op":"add","path":"/metadata/labels/extra","value":"yes"},
            {"op":"remove","path":"/spec/template/spec/containers/0/imagePullPolicy"}]"#,
    ]);
    assert_eq!(patched.success().stdout, "deployment.apps/web patched\n");
    let object = get_json(&cluster, "deployment", "web");
    assert_eq!(object["spec"]["replicas"], json!(3));
    assert_eq!(
        object["metadata"]["labels"],
        json!({"app": "web", "extra": "yes"})
    );
    // Defaulting puts a removed defaulted field back.
    assert_eq!(
        object["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
        json!("IfNotPresent")
    );
    assert_eq!(object["metadata"]["generation"], json!(2));

    let failed = cluster.kubectl(&[
        "patch",
        "deployment",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"test","path":"/spec/replicas","value":9},
            {"op":"replace","path":"/spec/replicas","value":9}]"#,
    ]);
    failed.failure();
    let after = get_json(&cluster, "deployment", "web");
    assert_eq!(after["spec"]["replicas"], json!(3));
    assert_eq!(
        after["metadata"]["resourceVersion"],
        object["metadata"]["resourceVersion"]
    );
}

#[test]
fn merge_patch_sets_and_nulls_fields_and_replaces_lists() {
    let cluster = cluster_with_deployment();
    cluster
        .kubectl(&[
            "patch",
            "deployment",
            "web",
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":{"app":null,"owner":"me"}},"spec":{"paused":true}}"#,
        ])
        .success();
    let object = get_json(&cluster, "deployment", "web");
    assert_eq!(object["metadata"]["labels"], json!({"owner": "me"}));
    assert_eq!(object["spec"]["paused"], json!(true));

    cluster
        .kubectl(&[
            "patch",
            "deployment",
            "web",
            "--type=merge",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"only","image":"busybox"}]}}}}"#,
        ])
        .success();
    let object = get_json(&cluster, "deployment", "web");
    assert_eq!(container_images(&object), ["only=busybox"]);
}

#[test]
fn strategic_merge_patch_merges_containers_by_name_and_deletes_with_directive() {
    let cluster = cluster_with_deployment();
    // The default --type is strategic.
    cluster
        .kubectl(&[
            "patch",
            "deployment",
            "web",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox"}]}}}}"#,
        ])
        .success();
    let object = get_json(&cluster, "deployment", "web");
    // A new list item goes before the server-only ones (kube's element order).
    assert_eq!(
        container_images(&object),
        ["sidecar=busybox", "nginx=nginx:1.27"]
    );

    cluster
        .kubectl(&[
            "patch",
            "deployment",
            "web",
            "--type=strategic",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.28"}]}}}}"#,
        ])
        .success();
    let object = get_json(&cluster, "deployment", "web");
    assert_eq!(
        container_images(&object),
        ["sidecar=busybox", "nginx=nginx:1.28"]
    );

    cluster
        .kubectl(&[
            "patch",
            "deployment",
            "web",
            "--type=strategic",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","$patch":"delete"}]}}}}"#,
        ])
        .success();
    let object = get_json(&cluster, "deployment", "web");
    assert_eq!(container_images(&object), ["nginx=nginx:1.28"]);
}

#[test]
fn patch_that_changes_nothing_says_no_change() {
    let cluster = cluster_with_deployment();
    let out = cluster.kubectl(&[
        "patch",
        "deployment",
        "web",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"app":"web"}}}"#,
    ]);
    assert_eq!(
        out.success().stdout,
        "deployment.apps/web patched (no change)\n"
    );
}

#[test]
fn replace_stores_the_edited_object_and_refuses_a_stale_one() {
    let cluster = cluster();
    cluster
        .kubectl(&["create", "configmap", "c", "--from-literal=a=1"])
        .success();
    let yaml = cluster.kubectl(&["get", "configmap", "c", "-o", "yaml"]);
    let edited = yaml.success().stdout.replace("  a: \"1\"", "  a: \"2\"");
    assert_ne!(edited, yaml.stdout, "the edit must change something");
    let replaced = cluster.kubectl_stdin(&["replace", "-f", "-"], &edited);
    assert_eq!(replaced.success().stdout, "configmap/c replaced\n");
    let object = get_json(&cluster, "configmap", "c");
    assert_eq!(object["data"], json!({"a": "2"}));

    // `edited` still carries the resourceVersion the replace just superseded.
    let stale_file = cluster.env().root().join("stale.yaml");
    std::fs::write(&stale_file, edited.replace("  a: \"2\"", "  a: \"3\"")).expect("write");
    let stale_path = stale_file.to_str().expect("a UTF-8 path");
    let stale = cluster.kubectl(&["replace", "-f", stale_path]);
    stale.failure();
    assert_eq!(
        stale.stderr,
        format!(
            "Error from server (Conflict): error when replacing \"{stale_path}\": Operation cannot \
             be fulfilled on configmaps \"c\": the object has been modified; please apply your \
             changes to the latest version and try again\n"
        )
    );
    let object = get_json(&cluster, "configmap", "c");
    assert_eq!(object["data"], json!({"a": "2"}));
}

#[test]
fn edit_with_a_scripted_editor_saves_the_change() {
    let cluster = cluster_with_deployment();
    let edited = kubectl_with_env(
        cluster.env(),
        &[("EDITOR", "sed -i s/nginx:1.27/nginx:1.29/")],
        &["edit", "deployment", "web"],
    );
    assert_eq!(edited.success().stdout, "deployment.apps/web edited\n");
    let object = get_json(&cluster, "deployment", "web");
    assert_eq!(container_images(&object), ["nginx=nginx:1.29"]);
    assert_eq!(object["metadata"]["generation"], json!(2));

    let untouched = kubectl_with_env(
        cluster.env(),
        &[("EDITOR", "true")],
        &["edit", "deployment", "web"],
    );
    untouched.success();
    assert_eq!(untouched.stderr, "Edit cancelled, no changes made.\n");
}

#[test]
fn scale_sets_replicas_through_the_scale_subresource() {
    let cluster = cluster_with_deployment();
    let scaled = cluster.kubectl(&["scale", "deployment", "web", "--replicas=5"]);
    assert_eq!(scaled.success().stdout, "deployment.apps/web scaled\n");
    let object = get_json(&cluster, "deployment", "web");
    assert_eq!(object["spec"]["replicas"], json!(5));
    assert_eq!(object["metadata"]["generation"], json!(2));

    let guarded = cluster.kubectl(&[
        "scale",
        "deployment",
        "web",
        "--current-replicas=2",
        "--replicas=7",
    ]);
    guarded.failure();
    assert_eq!(guarded.stderr, "error: Expected replicas to be 2, was 5\n");

    let scale = stdout_json(&cluster.kubectl(&[
        "get",
        "--raw",
        "/apis/apps/v1/namespaces/default/deployments/web/scale",
    ]));
    assert_eq!(scale["kind"], json!("Scale"));
    assert_eq!(scale["apiVersion"], json!("autoscaling/v1"));
    assert_eq!(scale["spec"], json!({"replicas": 5}));
    assert_eq!(scale["status"]["selector"], json!("app=web"));
}

#[test]
fn status_of_built_in_kinds_changes_only_through_the_status_subresource() {
    let cluster = cluster();
    cluster
        .kubectl(&[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=3",
        ])
        .success();
    cluster
        .kubectl(&[
            "patch",
            "deployment",
            "web",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"replicas":3,"readyReplicas":2,"updatedReplicas":3,"availableReplicas":2,"observedGeneration":1}}"#,
        ])
        .success();
    let table = cluster.kubectl(&["get", "deployment", "web"]);
    let row = &ksim_testutils::kubectl::table_rows(table.success())[0];
    assert_eq!(row[..4], ["web", "2/3", "3", "2"]);
    let ignored = cluster.kubectl(&[
        "patch",
        "deployment",
        "web",
        "--type=merge",
        "-p",
        r#"{"status":{"readyReplicas":3}}"#,
    ]);
    assert_eq!(
        ignored.success().stdout,
        "deployment.apps/web patched (no change)\n"
    );
    let object = get_json(&cluster, "deployment", "web");
    assert_eq!(object["status"]["readyReplicas"], json!(2));
    assert_eq!(object["metadata"]["generation"], json!(1));

    cluster
        .kubectl(&[
            "create",
            "pdb",
            "web",
            "--selector=app=web",
            "--min-available=1",
        ])
        .success();
    cluster
        .kubectl(&[
            "patch",
            "pdb",
            "web",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"disruptionsAllowed":1,"currentHealthy":2,"desiredHealthy":1,"expectedPods":2}}"#,
        ])
        .success();
    let pdbs = cluster.kubectl(&["get", "pdb", "web"]);
    let row = &ksim_testutils::kubectl::table_rows(pdbs.success())[0];
    assert_eq!(row[..4], ["web", "1", "N/A", "1"]);
}
