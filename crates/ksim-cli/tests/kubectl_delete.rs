//! End-to-end tests of deletion with kubectl: finalizers keep an object
//! (with its deletionTimestamp) until the last one is removed, deleting a
//! namespace takes its content along, the built-in namespaces may not be
//! deleted, and `kubectl wait --for=delete` returns when the object goes.

use std::path::Path;
use std::time::Duration;

use ksim_testutils::TestCluster;
use ksim_testutils::kubectl::{BackgroundKubectl, stdout_json};
use serde_json::json;

fn cluster() -> TestCluster {
    TestCluster::start_api_only(Path::new(env!("CARGO_BIN_EXE_ksim")))
}

const HELD: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: held
  finalizers:
  - example.com/hold
  - example.com/second
data:
  a: \"1\"
";

#[test]
fn finalizers_keep_a_deleted_object_until_the_last_is_removed() {
    let cluster = cluster();
    cluster
        .kubectl_stdin(&["create", "-f", "-"], HELD)
        .success();
    let deleted = cluster.kubectl(&["delete", "configmap", "held", "--wait=false"]);
    assert_eq!(deleted.success().stdout, "configmap \"held\" deleted\n");

    let object = stdout_json(&cluster.kubectl(&["get", "configmap", "held", "-o", "json"]));
    assert!(
        object["metadata"]["deletionTimestamp"].is_string(),
        "{object:#}"
    );
    assert_eq!(object["metadata"]["deletionGracePeriodSeconds"], json!(0));
    assert_eq!(
        object["metadata"]["finalizers"],
        json!(["example.com/hold", "example.com/second"])
    );

    // Removing one finalizer is not enough.
    cluster
        .kubectl(&[
            "patch",
            "configmap",
            "held",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers/0"}]"#,
        ])
        .success();
    let object = stdout_json(&cluster.kubectl(&["get", "configmap", "held", "-o", "json"]));
    assert_eq!(
        object["metadata"]["finalizers"],
        json!(["example.com/second"])
    );

    cluster
        .kubectl(&[
            "patch",
            "configmap",
            "held",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ])
        .success();
    let gone = cluster.kubectl(&["get", "configmap", "held"]);
    gone.failure();
    assert_eq!(
        gone.stderr,
        "Error from server (NotFound): configmaps \"held\" not found\n"
    );
}

#[test]
fn wait_for_delete_returns_when_the_finalizer_goes() {
    let cluster = cluster();
    cluster
        .kubectl_stdin(&["create", "-f", "-"], HELD)
        .success();
    cluster
        .kubectl(&["delete", "configmap", "held", "--wait=false"])
        .success();
    let wait = BackgroundKubectl::spawn(
        cluster.env(),
        &[
            "wait",
            "--for=delete",
            "configmap/held",
            "--timeout=30s",
            "-v=6",
        ],
    );
    // kubectl found the object and watches it (its watch request is logged).
    wait.wait_for_stderr(Duration::from_secs(20), |err| err.contains("watch=true"));
    assert_eq!(wait.stdout(), "", "wait returned while the object exists");
    cluster
        .kubectl(&[
            "patch",
            "configmap",
            "held",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":[]}}"#,
        ])
        .success();
    wait.wait_for_stdout(Duration::from_secs(20), |out| out.contains("condition met"));
    let output = wait.stop();
    assert_eq!(output.stdout, "configmap/held condition met\n");
}

#[test]
fn wait_for_delete_of_a_missing_object_succeeds_at_once() {
    let cluster = cluster();
    let out = cluster.kubectl(&["wait", "--for=delete", "configmap/none", "--timeout=5s"]);
    out.success();
}

#[test]
fn deleting_a_namespace_deletes_its_content() {
    // The namespace controller empties and finalizes deleted namespaces.
    let cluster = TestCluster::start_with(
        Path::new(env!("CARGO_BIN_EXE_ksim")),
        "ksim",
        &["--disable", "kubelet,scheduler"],
    );
    cluster
        .kubectl(&["create", "namespace", "doomed"])
        .success();
    cluster
        .kubectl(&["create", "configmap", "c", "-n", "doomed"])
        .success();
    cluster
        .kubectl(&["create", "deployment", "d", "--image=nginx", "-n", "doomed"])
        .success();
    cluster
        .kubectl(&["create", "configmap", "kept", "-n", "default"])
        .success();
    let deleted = cluster.kubectl(&["delete", "namespace", "doomed"]);
    assert_eq!(deleted.success().stdout, "namespace \"doomed\" deleted\n");
    let gone = cluster.kubectl(&["get", "namespace", "doomed"]);
    gone.failure();
    assert_eq!(
        gone.stderr,
        "Error from server (NotFound): namespaces \"doomed\" not found\n"
    );
    let leftovers = cluster.kubectl(&[
        "get",
        "configmaps,deployments",
        "-A",
        "--field-selector=metadata.namespace=doomed",
        "-o",
        "name",
    ]);
    assert_eq!(leftovers.success().stdout, "");
    let kept = cluster.kubectl(&["get", "configmap", "kept", "-o", "name"]);
    assert_eq!(kept.success().stdout, "configmap/kept\n");
}

#[test]
fn built_in_namespaces_may_not_be_deleted() {
    let cluster = cluster();
    for namespace in ["default", "kube-system", "kube-public"] {
        let out = cluster.kubectl(&["delete", "namespace", namespace]);
        out.failure();
        assert_eq!(
            out.stderr,
            format!(
                "Error from server (Forbidden): namespaces \"{namespace}\" is forbidden: this \
                 namespace may not be deleted\n"
            )
        );
        let still = cluster.kubectl(&["get", "namespace", namespace, "-o", "name"]);
        assert_eq!(still.success().stdout, format!("namespace/{namespace}\n"));
    }
}

#[test]
fn delete_by_label_and_of_a_missing_object() {
    let cluster = cluster();
    for name in ["a", "b", "c"] {
        cluster.kubectl(&["create", "configmap", name]).success();
    }
    cluster
        .kubectl(&["label", "configmap", "a", "x=1"])
        .success();
    cluster
        .kubectl(&["label", "configmap", "b", "x=1"])
        .success();
    let deleted = cluster.kubectl(&["delete", "configmaps", "-l", "x=1"]);
    assert_eq!(
        deleted.success().stdout,
        "configmap \"a\" deleted\nconfigmap \"b\" deleted\n"
    );
    let left = cluster.kubectl(&[
        "get",
        "configmaps",
        "--field-selector=metadata.name!=kube-root-ca.crt",
        "-o",
        "name",
    ]);
    assert_eq!(left.success().stdout, "configmap/c\n");

    let missing = cluster.kubectl(&["delete", "configmap", "nothing"]);
    missing.failure();
    assert_eq!(
        missing.stderr,
        "Error from server (NotFound): configmaps \"nothing\" not found\n"
    );
    let ignored = cluster.kubectl(&["delete", "configmap", "nothing", "--ignore-not-found"]);
    assert_eq!(ignored.success().stdout, "");
}
