//! End-to-end with the real kubectl: `kubectl drain` against a ksim cluster.
//! The walk-through (a drain blocked by a 95% budget keeps printing
//! kube's refusal and fails at --timeout; uncordon; scale; rollout status), a
//! drain that completes because the pods have room elsewhere, and drain's
//! flags (--pod-selector, --force, --delete-emptydir-data, --ignore-daemonsets),
//! plus `kubectl cordon/uncordon`; `--disable-eviction` is pinned in
//! kubectl_regressions.rs.

use std::path::Path;

use ksim_testutils::TestCluster;
use ksim_testutils::kubectl::{stdout_json, table_rows};
use ksim_testutils::poll_until;

fn cluster_with_nodes(nodes: usize) -> TestCluster {
    let cluster = TestCluster::start(Path::new(env!("CARGO_BIN_EXE_ksim")));
    cluster.scale_nodes(nodes);
    cluster.wait_for(&["get", "nodes", "--no-headers"], |out| {
        out.lines().filter(|l| l.contains(" Ready")).count() == nodes
    });
    cluster
}

/// `(name, node, phase)` of the pods labelled `app=<app>`, terminating ones excluded.
fn pods_of(cluster: &TestCluster, app: &str) -> Vec<(String, String, String)> {
    let output = cluster.kubectl(&["get", "pods", "-l", &format!("app={app}"), "-o", "json"]);
    let list = stdout_json(output.success());
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| {
            (
                p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                p["spec"]["nodeName"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                p["status"]["phase"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

#[track_caller]
fn wait_running(cluster: &TestCluster, app: &str, count: usize) -> Vec<(String, String, String)> {
    poll_until(&format!("{count} running {app} pods"), || {
        let pods = pods_of(cluster, app);
        if pods.len() == count
            && pods
                .iter()
                .all(|(_, node, phase)| !node.is_empty() && phase == "Running")
        {
            Ok(pods)
        } else {
            Err(format!("{pods:?}"))
        }
    })
}

fn deployment(name: &str, replicas: usize, node: Option<&str>) -> String {
    let selector = node
        .map(|n| format!("      nodeSelector:\n        kubernetes.io/hostname: {n}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
    spec:
{selector}      containers:
      - name: {name}
        image: nginx
"
    )
}

fn budget(name: &str, rule: &str) -> String {
    format!(
        "apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {name}
spec:
  {rule}
  selector:
    matchLabels:
      app: {name}
"
    )
}

#[test]
fn drain_blocked_by_a_95_percent_budget_then_uncordon_and_scale() {
    // The walk-through: `ksim scale node --replicas 10`.
    let cluster = cluster_with_nodes(10);
    let nodes = table_rows(cluster.kubectl(&["get", "nodes"]).success());
    assert_eq!(nodes.len(), 10, "{nodes:?}");
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &deployment("nginx", 10, Some("node-000000")),
        )
        .success();
    let pods = wait_running(&cluster, "nginx", 10);
    assert!(
        pods.iter().all(|(_, node, _)| node == "node-000000"),
        "{pods:?}"
    );
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &budget("nginx", "minAvailable: 95%"))
        .success();
    cluster.wait_for(
        &[
            "get",
            "pdb",
            "nginx",
            "-o",
            "jsonpath={.status.currentHealthy}/{.status.expectedPods}",
        ],
        |out| out == "10/10",
    );
    let rows = table_rows(cluster.kubectl(&["get", "pdb"]).success());
    assert_eq!(rows[0][..4], ["nginx", "95%", "N/A", "0"], "{rows:?}");

    let drain = cluster.kubectl(&["drain", "node-000000", "--timeout", "15s"]);
    drain.failure();
    let all = format!("{}{}", drain.stdout, drain.stderr);
    assert!(all.contains("node/node-000000 cordoned"), "{all}");
    let refusal = all
        .lines()
        .find(|l| l.starts_with("error when evicting pods/\"nginx-"))
        .unwrap_or_else(|| panic!("no eviction refusal in:\n{all}"));
    assert!(
        refusal.ends_with(
            "\" -n \"default\" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget."
        ),
        "{refusal}"
    );
    assert!(
        all.lines()
            .filter(|l| l.starts_with("error when evicting"))
            .count()
            >= 2,
        "drain retries: {all}"
    );
    // Nothing was evicted.
    let pods = pods_of(&cluster, "nginx");
    assert_eq!(pods.len(), 10);
    assert!(pods.iter().all(|(_, node, _)| node == "node-000000"));
    let node = stdout_json(
        cluster
            .kubectl(&["get", "node", "node-000000", "-o", "json"])
            .success(),
    );
    assert_eq!(node["spec"]["unschedulable"], true);

    cluster.kubectl(&["uncordon", "node-000000"]).success();
    cluster
        .kubectl(&["scale", "deploy", "nginx", "--replicas", "11"])
        .success();
    cluster
        .kubectl(&["rollout", "status", "deploy/nginx", "--timeout", "60s"])
        .success();
    let pods = wait_running(&cluster, "nginx", 11);
    assert!(
        pods.iter().all(|(_, node, _)| node == "node-000000"),
        "{pods:?}"
    );

    // Its ReplicaSet and pods go with the Deployment.
    cluster.kubectl(&["delete", "deploy", "nginx"]).success();
    cluster.wait_for(
        &["get", "rs,pods", "-l", "app=nginx", "-o", "name"],
        |out| out.is_empty(),
    );
}

#[test]
fn drain_with_room_elsewhere_completes_and_pods_move() {
    let cluster = cluster_with_nodes(3);
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &deployment("web", 4, None))
        .success();
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &budget("web", "maxUnavailable: 1"))
        .success();
    let pods = wait_running(&cluster, "web", 4);
    let target = pods[0].1.clone();
    cluster.wait_for(
        &[
            "get",
            "pdb",
            "web",
            "-o",
            "jsonpath={.status.disruptionsAllowed}",
        ],
        |out| out == "1",
    );
    let drain = cluster.kubectl(&["drain", &target, "--timeout", "90s"]);
    drain.success();
    assert!(
        drain.stdout.contains(&format!("node/{target} cordoned")),
        "{}",
        drain.stdout
    );
    assert!(
        drain.stdout.contains(&format!("node/{target} drained")),
        "{}",
        drain.stdout
    );
    assert!(drain.stdout.contains("evicted"), "{}", drain.stdout);
    let pods = wait_running(&cluster, "web", 4);
    assert!(pods.iter().all(|(_, node, _)| *node != target), "{pods:?}");
    let rows = table_rows(cluster.kubectl(&["get", "node", &target]).success());
    assert!(rows[0][1].contains("SchedulingDisabled"), "{rows:?}");
    cluster.kubectl(&["uncordon", &target]).success();
    let rows = table_rows(cluster.kubectl(&["get", "node", &target]).success());
    assert_eq!(rows[0][1], "Ready", "{rows:?}");
}

#[test]
fn drain_flags_select_force_and_skip_eviction() {
    let cluster = cluster_with_nodes(2);
    let bare = "apiVersion: v1
kind: Pod
metadata:
  name: bare
  labels:
    app: bare
spec:
  nodeSelector:
    kubernetes.io/hostname: node-000000
  containers:
  - name: c
    image: nginx
  volumes:
  - name: scratch
    emptyDir: {}
";
    cluster.kubectl_stdin(&["apply", "-f", "-"], bare).success();
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &deployment("kept", 1, Some("node-000000")),
        )
        .success();
    wait_running(&cluster, "bare", 1);
    wait_running(&cluster, "kept", 1);

    // A pod with local data (and no controller) blocks a plain drain.
    let refused = cluster.kubectl(&["drain", "node-000000", "--timeout", "20s"]);
    refused.failure();
    assert!(
        refused.stderr.contains(
            "cannot delete Pods with local storage (use --delete-emptydir-data to override): default/bare"
        ),
        "{}",
        refused.stderr
    );

    // --pod-selector limits the drain to the selected pods.
    let drain = cluster.kubectl(&[
        "drain",
        "node-000000",
        "--pod-selector",
        "app=bare",
        "--force",
        "--delete-emptydir-data",
        "--ignore-daemonsets",
        "--timeout",
        "60s",
    ]);
    drain.success();
    assert!(
        drain.stdout.contains("pod/bare evicted"),
        "{}",
        drain.stdout
    );
    assert!(pods_of(&cluster, "bare").is_empty());
    let kept = pods_of(&cluster, "kept");
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].1, "node-000000");

    cluster.kubectl(&["uncordon", "node-000000"]).success();
    let cordon = cluster.kubectl(&["cordon", "node-000001"]);
    cordon.success();
    assert_eq!(cordon.stdout.trim(), "node/node-000001 cordoned");
    cluster.wait_for(
        &[
            "get",
            "node",
            "node-000001",
            "-o",
            "jsonpath={.spec.taints[*].key}",
        ],
        |out| out == "node.kubernetes.io/unschedulable",
    );
    let uncordon = cluster.kubectl(&["uncordon", "node-000001"]);
    assert_eq!(
        uncordon.success().stdout.trim(),
        "node/node-000001 uncordoned"
    );
    cluster.wait_for(
        &[
            "get",
            "node",
            "node-000001",
            "-o",
            "jsonpath={.spec.taints}",
        ],
        str::is_empty,
    );
}
