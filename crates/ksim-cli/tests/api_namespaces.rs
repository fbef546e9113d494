//! End-to-end: namespace termination as kubectl users see it — contents go
//! first, a finalizer on the contents holds the namespace in Terminating,
//! new content is refused meanwhile, and the namespace goes with the last
//! finalizer.

use std::path::Path;

use ksim_testutils::TestCluster;

#[test]
fn terminating_namespace_waits_for_finalized_contents() {
    let cluster = TestCluster::start(Path::new(env!("CARGO_BIN_EXE_ksim")));
    cluster.kubectl(&["create", "namespace", "t"]).success();
    cluster
        .kubectl(&[
            "create",
            "configmap",
            "held",
            "-n",
            "t",
            "--from-literal=a=b",
        ])
        .success();
    cluster
        .kubectl(&[
            "create",
            "configmap",
            "free",
            "-n",
            "t",
            "--from-literal=a=b",
        ])
        .success();
    cluster
        .kubectl(&[
            "patch",
            "configmap",
            "held",
            "-n",
            "t",
            "-p",
            r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
        ])
        .success();

    cluster
        .kubectl(&["delete", "namespace", "t", "--wait=false"])
        .success();
    let status = cluster
        .kubectl(&["get", "namespace", "t", "-o", "jsonpath={.status.phase}"])
        .success()
        .stdout
        .clone();
    assert_eq!(status, "Terminating");
    let left = cluster
        .kubectl(&["get", "configmaps", "-n", "t", "-o", "name"])
        .success()
        .stdout
        .clone();
    assert_eq!(left.trim(), "configmap/held");

    let refused = cluster.kubectl(&[
        "create",
        "configmap",
        "late",
        "-n",
        "t",
        "--from-literal=a=b",
    ]);
    assert_ne!(refused.status, 0);
    assert!(
        refused.stderr.contains(
            "configmaps \"late\" is forbidden: unable to create new content in namespace t because it is being terminated"
        ),
        "{}",
        refused.stderr
    );

    cluster
        .kubectl(&[
            "patch",
            "configmap",
            "held",
            "-n",
            "t",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ])
        .success();
    let gone = cluster.kubectl(&["get", "namespace", "t"]);
    assert_ne!(gone.status, 0);
    assert_eq!(
        gone.stderr.trim(),
        "Error from server (NotFound): namespaces \"t\" not found"
    );
}

#[test]
fn system_namespaces_cannot_be_deleted() {
    let cluster = TestCluster::start(Path::new(env!("CARGO_BIN_EXE_ksim")));
    for namespace in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let refused = cluster.kubectl(&["delete", "namespace", namespace]);
        assert_ne!(refused.status, 0);
        assert_eq!(
            refused.stderr.trim(),
            format!(
                "Error from server (Forbidden): namespaces \"{namespace}\" is forbidden: this namespace may not be deleted"
            )
        );
    }
}
