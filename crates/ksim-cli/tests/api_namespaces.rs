//! End-to-end: namespace termination as kubectl users see it — contents go
//! first, a finalizer on the contents holds the namespace in Terminating,
//! new content is refused meanwhile, and the namespace goes with the last
//! finalizer.

use std::path::Path;

use ksim_testutils::TestCluster;
use ksim_testutils::poll_until;

#[test]
fn terminating_namespace_waits_for_finalized_contents() {
    // The namespace controller empties and finalizes deleted namespaces.
    let cluster = TestCluster::start_with(
        Path::new(env!("CARGO_BIN_EXE_ksim")),
        "ksim",
        &["--disable", "kubelet,scheduler"],
    );
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
    // The cleanup deletes what it can and only marks what a finalizer holds.
    cluster.wait_for(&["get", "configmaps", "-n", "t", "-o", "name"], |left| {
        left.trim() == "configmap/held"
    });

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
    // The namespace goes once its cleanup has run and nothing is left.
    let gone = poll_until("namespace t removed", || {
        let get = cluster.kubectl(&["get", "namespace", "t"]);
        if get.status != 0 {
            Ok(get)
        } else {
            Err(get.stdout)
        }
    });
    assert_eq!(
        gone.stderr.trim(),
        "Error from server (NotFound): namespaces \"t\" not found"
    );
}

#[test]
fn deleting_a_manifest_with_its_namespace_deletes_everything_in_it() {
    let cluster = TestCluster::start_api_only(Path::new(env!("CARGO_BIN_EXE_ksim")));
    let manifest = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: stack\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\n  namespace: stack\n";
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

#[test]
fn system_namespaces_cannot_be_deleted() {
    let cluster = TestCluster::start_api_only(Path::new(env!("CARGO_BIN_EXE_ksim")));
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
