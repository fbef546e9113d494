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

/// Each thread of process `pid`: its name and its nice value (fields 2
/// and 19 of `/proc/PID/task/TID/stat`).
fn threads(pid: i32) -> Vec<(String, i64)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the server's threads");
    tasks
        .filter_map(|task| {
            let stat = std::fs::read_to_string(task.ok()?.path().join("stat")).ok()?;
            // The name is in parentheses and may hold spaces; the fields
            // after it are plain.
            let (head, tail) = stat.rsplit_once(')')?;
            let name = head.split_once('(')?.1.to_owned();
            let nice = tail.split_whitespace().nth(16)?.parse().ok()?;
            Some((name, nice))
        })
        .collect()
}

#[test]
fn the_components_run_below_the_api_servers_priority() {
    let cluster = TestCluster::start(ksim_binary());
    // The scheduler has judged a pod (on the components' runtime).
    cluster.kubectl(&["run", "web", "--image=nginx"]).success();
    cluster.wait_for(
        &[
            "get",
            "pod",
            "web",
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="PodScheduled")].status}"#,
        ],
        |out| !out.is_empty(),
    );
    let pid = cluster.env().pid(cluster.name()).expect("the server's pid");
    let threads = threads(pid);
    let own_nice = threads
        .iter()
        .find(|(name, _)| name == "ksim")
        .map(|(_, nice)| *nice)
        .expect("the server's main thread");
    let components: Vec<i64> = threads
        .iter()
        .filter(|(name, _)| name == "ksim-components")
        .map(|(_, nice)| *nice)
        .collect();
    let servers: Vec<i64> = threads
        .iter()
        .filter(|(name, _)| name == "tokio-rt-worker")
        .map(|(_, nice)| *nice)
        .collect();
    assert!(
        !components.is_empty(),
        "no components' threads in {threads:?}"
    );
    assert!(!servers.is_empty(), "no API server threads in {threads:?}");
    assert!(
        components
            .iter()
            .all(|nice| *nice == (own_nice + 5).min(19)),
        "the components' threads are not 5 below the server's {own_nice}: {threads:?}"
    );
    assert!(
        servers.iter().all(|nice| *nice == own_nice),
        "the API server's threads are not at the process's priority: {threads:?}"
    );
}
