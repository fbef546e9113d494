//! End-to-end: `create cluster --disable` leaves components out, as
//! `kwokctl create cluster --disable` does.

use std::path::Path;

use ksim_testutils::{KsimEnv, TestCluster};

fn ksim_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ksim"))
}

#[test]
fn a_cluster_without_controllers_only_stores_a_deployment() {
    let cluster = TestCluster::start_with(ksim_binary(), "bare", &["--disable", "controllers"]);
    cluster
        .kubectl(&[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=2",
        ])
        .success();
    // The scheduler has judged a pod created after the Deployment (the
    // cluster's components had time to act since); no controller made a
    // ReplicaSet or observed the Deployment.
    cluster
        .kubectl(&["run", "later", "--image=nginx"])
        .success();
    cluster.wait_for(
        &[
            "get",
            "pod",
            "later",
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="PodScheduled")].status}"#,
        ],
        |out| !out.is_empty(),
    );
    let replica_sets = cluster.kubectl(&["get", "replicasets", "-o", "name"]);
    assert_eq!(replica_sets.success().stdout, "");
    let observed = cluster.kubectl(&[
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.status.observedGeneration}",
    ]);
    assert_eq!(observed.success().stdout, "");
}

#[test]
fn a_full_cluster_runs_the_deployment() {
    let cluster = TestCluster::start(ksim_binary());
    cluster
        .kubectl(&[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=2",
        ])
        .success();
    cluster.wait_for(&["get", "pods", "-l", "app=web", "-o", "name"], |out| {
        out.lines().count() == 2
    });
}

#[test]
fn an_unknown_component_is_refused() {
    let env = KsimEnv::new(ksim_binary());
    let output = env.ksim(&["create", "cluster", "--disable", "etcd"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("invalid value 'etcd' for '--disable"),
        "{stderr}"
    );
}
