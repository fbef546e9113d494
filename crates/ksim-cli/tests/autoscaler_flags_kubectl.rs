//! End-to-end on a virtual clock (`ksim create cluster --clock virtual
//! --autoscaler`, `ksim clock advance`): the autoscaler's time flags act as
//! upstream's, checked with kubectl.
//!
//! - `--max-node-provision-time`: nodes still booting past it are removed
//!   (`ScaleUpTimedOut`), the group backs off (`NotTriggerScaleUp ... in
//!   backoff after failed scale-up`, status `Backoff`) and grows again once
//!   the backoff is over.
//! - `--new-pod-scale-up-delay`: a younger pod triggers nothing; once old
//!   enough it does. `--scale-down-delay-after-add`: empty nodes stay for
//!   the delay after that scale-up, then go after the unneeded time.
//! - `--scale-down-utilization-threshold`: nodes at 30% stay under a 0.2
//!   threshold while the empty one goes after `--scale-down-unneeded-time`.

use std::path::Path;

use ksim_testutils::TestCluster;
use ksim_testutils::kubectl::stdout_json;

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/autoscaler/kwok-provider.yaml"
);
const START: &str = "2030-01-01T00:00:00Z";

fn ksim() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ksim"))
}

fn start(flags: &[&str]) -> TestCluster {
    let mut args = vec![
        "--clock",
        "virtual",
        "--clock-start",
        START,
        "--autoscaler",
        "--scan-interval=10s",
    ];
    args.extend_from_slice(flags);
    TestCluster::start_with(ksim(), "ksim", &args)
}

#[track_caller]
fn advance(cluster: &TestCluster, by: &str) {
    let output = cluster.ksim(&["clock", "advance", by, "--name", "ksim"]);
    assert!(
        output.status.success(),
        "ksim clock advance {by}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The cluster time `seconds` after the start, as the status stamps it.
fn at(seconds: i64) -> String {
    let start: chrono::DateTime<chrono::Utc> = START.parse().expect("time");
    (start + chrono::TimeDelta::seconds(seconds)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Waits until the autoscaler has written its status at `seconds` after
/// the start or later (a loop ran then), and returns the status text.
fn status_since(cluster: &TestCluster, seconds: i64) -> String {
    let wanted = at(seconds);
    cluster.wait_for(
        &[
            "get",
            "configmap",
            "-n",
            "kube-system",
            "cluster-autoscaler-status",
            "-o",
            r"jsonpath={.metadata.annotations.cluster-autoscaler\.kubernetes\.io/last-updated}",
        ],
        |stamp| !stamp.is_empty() && stamp >= wanted.as_str(),
    );
    cluster
        .kubectl(&[
            "get",
            "configmap",
            "-n",
            "kube-system",
            "cluster-autoscaler-status",
            "-o",
            "jsonpath={.data.status}",
        ])
        .success()
        .stdout
        .clone()
}

/// The workers group's part of the status text.
fn group_status(status: &str) -> String {
    status
        .split("nodeGroups:")
        .nth(1)
        .unwrap_or_default()
        .to_string()
}

fn pod_manifest(name: &str, cpu: &str, node: Option<&str>) -> String {
    let node = node
        .map(|n| format!("  nodeName: {n}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  annotations:\n    cluster-autoscaler.kubernetes.io/safe-to-evict: \"true\"\nspec:\n{node}  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n    resources:\n      requests:\n        cpu: {cpu}\n"
    )
}

/// The workers group's node names.
fn workers(cluster: &TestCluster) -> Vec<String> {
    let out = cluster.kubectl(&["get", "nodes", "-l", "kwok-nodegroup=workers", "-o", "name"]);
    out.success();
    let mut names: Vec<String> = out
        .stdout
        .lines()
        .map(|l| l.trim_start_matches("node/").to_string())
        .collect();
    names.sort();
    names
}

/// Waits until the group has `count` nodes, all Ready.
fn wait_ready_workers(cluster: &TestCluster, count: usize) -> Vec<String> {
    cluster.wait_for(
        &[
            "get",
            "nodes",
            "-l",
            "kwok-nodegroup=workers",
            "-o",
            r#"jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}"#,
        ],
        |out| out.lines().count() == count && out.lines().all(|l| l == "True"),
    );
    workers(cluster)
}

/// Waits until the group has `count` nodes.
fn wait_workers(cluster: &TestCluster, count: usize) -> Vec<String> {
    cluster.wait_for(
        &["get", "nodes", "-l", "kwok-nodegroup=workers", "-o", "name"],
        |out| out.lines().count() == count,
    );
    workers(cluster)
}

/// (reason, regarding object's name, message) of the events in `namespace`.
fn events(cluster: &TestCluster, namespace: &str) -> Vec<(String, String, String)> {
    let out = cluster.kubectl(&["get", "events", "-n", namespace, "-o", "json"]);
    out.success();
    let list = stdout_json(&out);
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or_default().to_string(),
                e["involvedObject"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                e["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Waits for an event with `reason` about `object`; returns its message.
fn wait_event(cluster: &TestCluster, namespace: &str, reason: &str, object: &str) -> String {
    cluster.wait_for(
        &[
            "get",
            "events",
            "-n",
            namespace,
            "-o",
            r#"jsonpath={range .items[*]}{.reason} {.involvedObject.name}{"\n"}{end}"#,
        ],
        |out| out.lines().any(|l| l == format!("{reason} {object}")),
    );
    events(cluster, namespace)
        .into_iter()
        .find(|(r, o, _)| r == reason && o == object)
        .map(|(_, _, message)| message)
        .unwrap_or_default()
}

fn wait_unschedulable(cluster: &TestCluster, pod: &str) {
    cluster.wait_for(
        &[
            "get",
            "pod",
            pod,
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="PodScheduled")].reason}"#,
        ],
        |out| out == "Unschedulable",
    );
}

#[test]
fn nodes_not_up_within_the_max_node_provision_time_go_and_their_group_backs_off() {
    let cluster = start(&[
        "--node-boot-delay=20m",
        "--max-node-provision-time=1m",
        "--scale-down-enabled=false",
    ]);
    cluster.kubectl(&["apply", "-f", EXAMPLE]).success();
    // The scan at 10 s makes the desired three nodes; they boot for 20 m.
    advance(&cluster, "10s");
    wait_workers(&cluster, 3);
    // A minute later they have not come up: removed, and the group backs off.
    advance(&cluster, "1m");
    wait_workers(&cluster, 0);
    let message = wait_event(
        &cluster,
        "kube-system",
        "ScaleUpTimedOut",
        "cluster-autoscaler-status",
    );
    assert_eq!(
        message,
        "Nodes added to group workers failed to register within 1m0s"
    );
    let status = group_status(&status_since(&cluster, 70));
    assert!(status.contains("scaleUp:\n    status: Backoff"), "{status}");

    // A pod no node hosts: the group backing off does not grow for it.
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &pod_manifest("wide", "1500m", None))
        .success();
    wait_unschedulable(&cluster, "wide");
    advance(&cluster, "10s");
    let message = wait_event(&cluster, "default", "NotTriggerScaleUp", "wide");
    assert_eq!(
        message,
        "pod didn't trigger scale-up: 1 in backoff after failed scale-up"
    );
    assert!(workers(&cluster).is_empty());

    // The first backoff is 5 minutes; then the group grows again.
    advance(&cluster, "5m");
    let message = wait_event(&cluster, "default", "TriggeredScaleUp", "wide");
    assert_eq!(
        message,
        "pod triggered scale-up: [{workers 0->1 (max: 10)}]"
    );
    wait_workers(&cluster, 1);
}

#[test]
fn young_pods_wait_for_the_new_pod_delay_and_scale_down_waits_for_the_delay_after_add() {
    let cluster = start(&[
        "--new-pod-scale-up-delay=1m",
        "--scale-down-delay-after-add=5m",
        "--scale-down-unneeded-time=1m",
    ]);
    cluster.kubectl(&["apply", "-f", EXAMPLE]).success();
    advance(&cluster, "10s");
    advance(&cluster, "10s");
    let nodes = wait_ready_workers(&cluster, 3);
    // Three pods fill the three nodes; the fourth fits none.
    for (index, node) in nodes.iter().enumerate() {
        let name = format!("wide-{index}");
        cluster
            .kubectl_stdin(
                &["apply", "-f", "-"],
                &pod_manifest(&name, "1900m", Some(node)),
            )
            .success();
    }
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &pod_manifest("late", "1900m", None))
        .success();
    wait_unschedulable(&cluster, "late");
    // 30 s old: scans ran, none considered it.
    advance(&cluster, "30s");
    status_since(&cluster, 50);
    assert!(
        !events(&cluster, "default")
            .iter()
            .any(|(reason, object, _)| object == "late" && reason.contains("ScaleUp")),
        "{:?}",
        events(&cluster, "default")
    );
    assert_eq!(workers(&cluster).len(), 3);
    // A minute old: it triggers the scale-up.
    advance(&cluster, "40s");
    let message = wait_event(&cluster, "default", "TriggeredScaleUp", "late");
    assert_eq!(
        message,
        "pod triggered scale-up: [{workers 3->4 (max: 10)}]"
    );
    advance(&cluster, "10s");
    wait_ready_workers(&cluster, 4);

    // Every node empty: none goes within 5 minutes of the scale-up.
    for name in ["wide-0", "wide-1", "wide-2", "late"] {
        cluster
            .kubectl(&["delete", "pod", name, "--wait=false"])
            .success();
    }
    cluster.wait_for(&["get", "pods", "-o", "name"], |out| out.is_empty());
    advance(&cluster, "2m");
    let status = status_since(&cluster, 220);
    assert!(
        group_status(&status).contains("scaleDown:\n    status: NoCandidates"),
        "{status}"
    );
    assert_eq!(workers(&cluster).len(), 4);
    // After it, unneeded for a minute: down to the group's minimum.
    advance(&cluster, "5m");
    wait_workers(&cluster, 1);
}

#[test]
fn nodes_above_the_utilization_threshold_stay_while_the_empty_one_goes() {
    let cluster = start(&[
        "--scale-down-utilization-threshold=0.2",
        "--scale-down-unneeded-time=1m",
    ]);
    cluster.kubectl(&["apply", "-f", EXAMPLE]).success();
    advance(&cluster, "10s");
    advance(&cluster, "10s");
    let nodes = wait_ready_workers(&cluster, 3);
    // 30% of two nodes requested; the third empty.
    for (index, node) in nodes.iter().take(2).enumerate() {
        cluster
            .kubectl_stdin(
                &["apply", "-f", "-"],
                &pod_manifest(&format!("p{index}"), "600m", Some(node)),
            )
            .success();
    }
    advance(&cluster, "2m");
    let left = wait_workers(&cluster, 2);
    assert_eq!(left, nodes[..2].to_vec());
    // Under the default 0.5 they would be unneeded too (either one's pod
    // fits the other); under 0.2 neither is.
    advance(&cluster, "2m");
    let status = group_status(&status_since(&cluster, 260));
    assert!(
        status.contains("scaleDown:\n    status: NoCandidates\n    candidates: 0"),
        "{status}"
    );
    assert_eq!(workers(&cluster), nodes[..2].to_vec());
}
