//! `ksim node stop|start` with the `ksim` binary and the real kubectl: a
//! stopped node's kubelet renews its Lease no more, so the node lifecycle
//! controller marks the node NotReady (Unknown) and taints it unreachable;
//! removing the annotation with kubectl brings it back Ready. An unknown
//! node is a one-line error.
//!
//! The cluster runs on the real clock (a virtual one cannot be advanced from
//! the command line yet), so the test waits for the node-monitor grace
//! period (40 s) to pass: it waits for the positive sign, bounded by
//! `WAIT`.

use std::path::Path;
use std::time::{Duration, Instant};

use ksim_testutils::TestCluster;
use serde_json::Value;

/// Longer than the node-monitor grace period (40 s) and a few monitor periods.
const WAIT: Duration = Duration::from_secs(150);

fn ksim_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ksim"))
}

fn node(cluster: &TestCluster, name: &str) -> Value {
    let output = cluster.kubectl(&["get", "node", name, "-o", "json"]);
    output.success();
    serde_json::from_str(&output.stdout).expect("kubectl prints JSON")
}

fn ready_status(node: &Value) -> Option<String> {
    node["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")
        .and_then(|c| c["status"].as_str())
        .map(str::to_owned)
}

fn taint_keys(node: &Value) -> Vec<String> {
    node["spec"]["taints"]
        .as_array()
        .map(|taints| {
            taints
                .iter()
                .filter_map(|t| t["key"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn renew_time(cluster: &TestCluster, name: &str) -> chrono::DateTime<chrono::Utc> {
    let output = cluster.kubectl(&[
        "get",
        "lease",
        "-n",
        "kube-node-lease",
        name,
        "-o",
        "jsonpath={.spec.renewTime}",
    ]);
    output.success();
    chrono::DateTime::parse_from_rfc3339(output.stdout.trim())
        .expect("renewTime is RFC 3339")
        .to_utc()
}

/// Polls `node` until `done` holds, for at most `WAIT`.
#[track_caller]
fn wait_for_node(cluster: &TestCluster, name: &str, what: &str, done: impl Fn(&Value) -> bool) {
    let deadline = Instant::now() + WAIT;
    loop {
        let node = node(cluster, name);
        if done(&node) {
            return;
        }
        assert!(Instant::now() < deadline, "timed out: {what}\n{node:#}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[track_caller]
fn ksim_ok(cluster: &TestCluster, args: &[&str]) -> String {
    let output = cluster.ksim(args);
    assert!(
        output.status.success(),
        "ksim {args:?} failed\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn a_stopped_kubelet_makes_its_node_not_ready_until_started_again() {
    let cluster = TestCluster::start(ksim_binary());
    ksim_ok(&cluster, &["scale", "node", "--replicas", "2"]);
    for name in ["node-000000", "node-000001"] {
        wait_for_node(&cluster, name, "node Ready", |n| {
            ready_status(n).as_deref() == Some("True")
        });
    }

    // Through --kubeconfig: the kubeconfig's current context, over HTTP.
    let kubeconfig = cluster.kubeconfig().to_str().expect("UTF-8 path");
    let out = ksim_ok(
        &cluster,
        &["node", "stop", "node-000000", "--kubeconfig", kubeconfig],
    );
    assert_eq!(out.trim(), "node/node-000000 kubelet stopped");
    let annotation = cluster
        .kubectl(&[
            "get",
            "node",
            "node-000000",
            "-o",
            r"jsonpath={.metadata.annotations.ksim\.io/kubelet}",
        ])
        .success()
        .stdout
        .clone();
    assert_eq!(annotation, "stopped");
    let again = ksim_ok(&cluster, &["node", "stop", "node-000000", "--name", "ksim"]);
    assert_eq!(again.trim(), "node/node-000000 kubelet already stopped");

    // Real clock: the lifecycle controller waits out its grace period.
    wait_for_node(
        &cluster,
        "node-000000",
        "stopped node NotReady (Unknown) and tainted unreachable",
        |n| {
            ready_status(n).as_deref() == Some("Unknown")
                && taint_keys(n)
                    .iter()
                    .any(|k| k == "node.kubernetes.io/unreachable")
        },
    );
    let stale = node(&cluster, "node-000000");
    let marked = stale["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .and_then(|c| c["lastTransitionTime"].as_str())
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .expect("Ready's lastTransitionTime")
        .to_utc();
    let renewed = renew_time(&cluster, "node-000000");
    assert!(
        marked - renewed >= chrono::TimeDelta::seconds(40),
        "the lease stopped being renewed: last renewed {renewed}, marked Unknown {marked}"
    );
    // The other node's kubelet runs on.
    let other = node(&cluster, "node-000001");
    assert_eq!(ready_status(&other).as_deref(), Some("True"), "{other:#}");
    assert!(renew_time(&cluster, "node-000001") > renewed);

    // kubectl alone resumes it.
    cluster
        .kubectl(&["annotate", "node", "node-000000", "ksim.io/kubelet-"])
        .success();
    wait_for_node(
        &cluster,
        "node-000000",
        "resumed node Ready, untainted",
        |n| {
            ready_status(n).as_deref() == Some("True")
                && !taint_keys(n)
                    .iter()
                    .any(|k| k == "node.kubernetes.io/unreachable")
        },
    );
    assert!(renew_time(&cluster, "node-000000") > marked);
    let started = ksim_ok(
        &cluster,
        &["node", "start", "node-000000", "--name", "ksim"],
    );
    assert_eq!(started.trim(), "node/node-000000 kubelet already running");
}

#[test]
fn stop_and_start_round_trip_and_unknown_nodes_are_one_line_errors() {
    let cluster = TestCluster::start_api_only(ksim_binary());
    cluster
        .kubectl_stdin(
            &["create", "-f", "-"],
            r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}"#,
        )
        .success();

    let out = ksim_ok(&cluster, &["node", "stop", "n1", "--name", "ksim"]);
    assert_eq!(out.trim(), "node/n1 kubelet stopped");
    let out = ksim_ok(&cluster, &["node", "resume", "n1", "--name", "ksim"]);
    assert_eq!(out.trim(), "node/n1 kubelet started");
    let annotations = cluster
        .kubectl(&[
            "get",
            "node",
            "n1",
            "-o",
            "jsonpath={.metadata.annotations}",
        ])
        .success()
        .stdout
        .clone();
    assert!(!annotations.contains("ksim.io/kubelet"), "{annotations}");

    for verb in ["stop", "start"] {
        let output = cluster.ksim(&["node", verb, "n1", "nope", "--name", "ksim"]);
        assert!(!output.status.success(), "ksim node {verb} nope succeeded");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            stderr.trim(),
            r#"error: nodes "nope" not found"#,
            "ksim node {verb}"
        );
        // The node that exists was still handled.
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.starts_with("node/n1 kubelet "), "{stdout}");
    }
    let output = cluster.ksim(&["node", "stop"]);
    assert!(!output.status.success(), "no node named");
}
