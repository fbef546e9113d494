//! `ksim node stop|start` with the `ksim` binary and the real kubectl: a
//! stopped node's kubelet renews its Lease no more, so the node lifecycle
//! controller marks the node NotReady (Unknown) and taints it unreachable;
//! removing the annotation with kubectl brings it back Ready. An unknown
//! node is a one-line error.
//!
//! The cluster runs on a virtual clock (`ksim create cluster --clock
//! virtual`): `ksim clock advance 1m` passes the node-monitor grace period
//! (40 s) at once.

use std::path::Path;

use ksim_testutils::TestCluster;
use ksim_testutils::poll_until;
use serde_json::Value;

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

/// Polls `node` until `done` holds.
#[track_caller]
fn wait_for_node(cluster: &TestCluster, name: &str, what: &str, done: impl Fn(&Value) -> bool) {
    poll_until(what, || {
        let node = node(cluster, name);
        if done(&node) {
            Ok(())
        } else {
            Err(format!("\n{node:#}"))
        }
    });
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

    let out = cluster.ksim_ok(&["node", "stop", "n1", "--name", "ksim"]);
    assert_eq!(out.trim(), "node/n1 kubelet stopped");
    let out = cluster.ksim_ok(&["node", "resume", "n1", "--name", "ksim"]);
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

#[track_caller]
fn advance(cluster: &TestCluster, by: &str) {
    cluster.ksim_ok(&["clock", "advance", by, "--name", "ksim"]);
}

#[test]
fn on_a_virtual_clock_a_stopped_node_is_not_ready_one_minute_later() {
    let cluster = TestCluster::start_with(
        ksim_binary(),
        "ksim",
        &[
            "--clock",
            "virtual",
            "--clock-start",
            "2030-01-01T00:00:00Z",
        ],
    );
    cluster.ksim_ok(&["scale", "node", "--replicas", "2"]);
    for name in ["node-000000", "node-000001"] {
        wait_for_node(&cluster, name, "node Ready", |n| {
            ready_status(n).as_deref() == Some("True")
        });
    }
    advance(&cluster, "15s");
    let before = renew_time(&cluster, "node-000000");
    let kubeconfig = cluster.kubeconfig().to_str().expect("UTF-8 path");
    let out = cluster.ksim_ok(&["node", "stop", "node-000000", "--kubeconfig", kubeconfig]);
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
    let again = cluster.ksim_ok(&["node", "stop", "node-000000", "--name", "ksim"]);
    assert_eq!(again.trim(), "node/node-000000 kubelet already stopped");

    // Past the node-monitor grace period (40 s).
    advance(&cluster, "1m");
    let stale = node(&cluster, "node-000000");
    assert_eq!(
        ready_status(&stale).as_deref(),
        Some("Unknown"),
        "{stale:#}"
    );
    assert!(
        taint_keys(&stale)
            .iter()
            .any(|k| k == "node.kubernetes.io/unreachable"),
        "{stale:#}"
    );
    assert_eq!(
        renew_time(&cluster, "node-000000"),
        before,
        "the stopped node's lease was not renewed in a minute of cluster time"
    );
    let other = node(&cluster, "node-000001");
    assert_eq!(ready_status(&other).as_deref(), Some("True"), "{other:#}");
    // The other node's kubelet renewed its lease all along.
    assert!(renew_time(&cluster, "node-000001") > before + chrono::TimeDelta::seconds(40));

    cluster
        .kubectl(&["annotate", "node", "node-000000", "ksim.io/kubelet-"])
        .success();
    advance(&cluster, "10s");
    let back = node(&cluster, "node-000000");
    assert_eq!(ready_status(&back).as_deref(), Some("True"), "{back:#}");
    assert!(
        !taint_keys(&back)
            .iter()
            .any(|k| k == "node.kubernetes.io/unreachable"),
        "{back:#}"
    );
    assert!(renew_time(&cluster, "node-000000") > before);
    let started = cluster.ksim_ok(&["node", "start", "node-000000", "--name", "ksim"]);
    assert_eq!(started.trim(), "node/node-000000 kubelet already running");
}
