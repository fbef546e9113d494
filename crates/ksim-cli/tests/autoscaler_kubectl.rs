//! End-to-end: the cluster autoscaler with the kwok provider ConfigMaps of
//! `examples/autoscaler/`, driven and checked with the real kubectl: the
//! write-up's scale-up (three 2-CPU nodes in one group of max 10, one nearly
//! full, a DoNotSchedule hostname spread: FailedScheduling,
//! TriggeredScaleUp, FailedScheduling on the booting node's not-ready taint,
//! Scheduled; the group grows 3 -> 4), a group at its max
//! (NotTriggerScaleUp with the reason, and `ksim explain pod` saying it),
//! `ksim autoscaler --kubeconfig` alone over HTTP, and scale-down through
//! budgets.

use std::path::Path;

use ksim_testutils::TestCluster;
use ksim_testutils::kubectl::stdout_json;

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/autoscaler/kwok-provider.yaml"
);

fn ksim() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ksim"))
}

/// Names of the workers group's Ready nodes, once there are `count`.
fn ready_workers(cluster: &TestCluster, count: usize) -> Vec<String> {
    let out = cluster.wait_for(
        &[
            "get",
            "nodes",
            "-l",
            "kwok-nodegroup=workers",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type==\"Ready\")].status} {.spec.taints}{\"\\n\"}{end}",
        ],
        |out| {
            let lines: Vec<&str> = out.lines().collect();
            lines.len() == count
                && lines
                    .iter()
                    .all(|l| l.split_whitespace().nth(1) == Some("True") && !l.contains("not-ready"))
        },
    );
    let mut names: Vec<String> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    names.sort();
    names
}

fn pod_manifest(name: &str, cpu: &str, node: Option<&str>) -> String {
    let node = node
        .map(|n| format!("  nodeName: {n}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  annotations:\n    cluster-autoscaler.kubernetes.io/safe-to-evict: \"true\"\nspec:\n{node}  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n    resources:\n      requests:\n        cpu: {cpu}\n"
    )
}

const SPREAD: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: kubernetes.io/hostname
        whenUnsatisfiable: DoNotSchedule
        labelSelector:
          matchLabels: {app: web}
      containers:
      - name: web
        image: registry.k8s.io/pause:3.10
        resources:
          requests: {cpu: 500m}
"#;

/// (reason, message) of a pod's events, in `kubectl describe`'s order.
fn described_events(cluster: &TestCluster, pod: &str) -> Vec<(String, String)> {
    let out = cluster.kubectl(&["describe", "pod", pod]);
    out.success();
    let mut events = Vec::new();
    let mut in_events = false;
    for line in out.stdout.lines() {
        if line.starts_with("Events:") {
            in_events = true;
            continue;
        }
        if !in_events
            || line.trim_start().starts_with("Type")
            || line.trim_start().starts_with("----")
        {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 2 {
            continue;
        }
        // Type, Reason, Age (may be "10s (x2 over 12s)"), From, Message.
        let reason = fields[1].to_string();
        let from_at = fields
            .iter()
            .position(|f| *f == "default-scheduler" || *f == "cluster-autoscaler");
        let message = from_at
            .map(|at| fields[at + 1..].join(" "))
            .unwrap_or_default();
        events.push((reason, message));
    }
    events
}

#[test]
fn the_write_up_sequence_scales_a_group_from_3_to_4_and_a_full_group_says_why_not() {
    let cluster = TestCluster::start_with(
        ksim(),
        "ksim",
        &[
            "--autoscaler",
            "--scan-interval=500ms",
            "--node-boot-delay=6s",
            "--scale-down-enabled=false",
        ],
    );
    cluster.kubectl(&["apply", "-f", EXAMPLE]).success();
    let nodes = ready_workers(&cluster, 3);
    // One node nearly full.
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &pod_manifest("filler", "1800m", Some(&nodes[0])),
        )
        .success();
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], SPREAD)
        .success();
    // Two replicas run on the other two nodes; the third waits for a node.
    // The pod the scale-up is for: the one that has a TriggeredScaleUp event.
    let events = cluster.wait_for(
        &[
            "get",
            "events",
            "--field-selector",
            "reason=TriggeredScaleUp",
            "-o",
            "jsonpath={range .items[*]}{.involvedObject.name} {.message}{\"\\n\"}{end}",
        ],
        |out| !out.trim().is_empty(),
    );
    let line = events.lines().next().expect("an event");
    let (pod, message) = line.split_once(' ').expect("name and message");
    assert_eq!(
        message,
        "pod triggered scale-up: [{workers 3->4 (max: 10)}]"
    );
    let group_events = cluster.wait_for(
        &[
            "get",
            "events",
            "-n",
            "kube-system",
            "--field-selector",
            "reason=ScaledUpGroup",
            "-o",
            "jsonpath={range .items[*]}{.involvedObject.name} {.message}{\"\\n\"}{end}",
        ],
        |out| !out.trim().is_empty(),
    );
    assert_eq!(
        group_events.trim(),
        "cluster-autoscaler-status Scale-up: setting group workers size to 4 instead of 3 (max: 10)"
    );
    // It lands on the new node once that node is Ready.
    let node = cluster.wait_for(
        &["get", "pod", pod, "-o", "jsonpath={.spec.nodeName}"],
        |out| !out.is_empty(),
    );
    assert!(
        !nodes.contains(&node),
        "{node} is one of the first three nodes"
    );
    assert!(node.starts_with("workers-"), "{node}");
    let all = ready_workers(&cluster, 4);
    assert!(all.contains(&node));
    // The write-up's sequence in `kubectl describe pod`.
    let events = described_events(&cluster, pod);
    let reasons: Vec<&str> = events.iter().map(|(r, _)| r.as_str()).collect();
    let wanted = [
        (
            "FailedScheduling",
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match pod topology spread constraints.",
        ),
        (
            "TriggeredScaleUp",
            "pod triggered scale-up: [{workers 3->4 (max: 10)}]",
        ),
        (
            "FailedScheduling",
            "0/4 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 2 node(s) didn't match pod topology spread constraints.",
        ),
        ("Scheduled", ""),
    ];
    let mut at = 0;
    for (reason, message) in wanted {
        let found = events[at..]
            .iter()
            .position(|(r, m)| r == reason && m.contains(message))
            .unwrap_or_else(|| panic!("no {reason} {message:?} after {at} in {events:#?}"));
        at += found + 1;
    }
    assert!(reasons.contains(&"Scheduled"));
    // The status ConfigMap says the group's target is 4.
    let status = cluster.wait_for(
        &[
            "get",
            "configmap",
            "-n",
            "kube-system",
            "cluster-autoscaler-status",
            "-o",
            "jsonpath={.data.status}",
        ],
        |out| out.contains("cloudProviderTarget: 4") && out.contains("autoscalerStatus: Running"),
    );
    assert!(status.contains("- name: workers"), "{status}");

    // The group at its max: lower max-count to 4, then ask for a fifth node.
    let templates = cluster.kubectl(&[
        "get",
        "configmap",
        "-n",
        "kube-system",
        "kwok-provider-templates",
        "-o",
        "json",
    ]);
    templates.success();
    let mut map = stdout_json(&templates);
    let text = map["data"]["templates"]
        .as_str()
        .expect("templates")
        .to_string();
    map["data"]["templates"] =
        serde_json::Value::String(text.replace("max-count: \"10\"", "max-count: \"4\""));
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &map.to_string())
        .success();
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &pod_manifest("big", "1900m", None))
        .success();
    let out = cluster.wait_for(
        &[
            "get",
            "events",
            "--field-selector",
            "reason=NotTriggerScaleUp,involvedObject.name=big",
            "-o",
            "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}",
        ],
        |out| out.contains("max node group size reached"),
    );
    assert!(
        out.lines()
            .any(|l| l == "pod didn't trigger scale-up: 1 max node group size reached"),
        "{out}"
    );
    // `ksim explain pod` says why the group cannot help.
    let explained = cluster.ksim(&["explain", "pod", "big"]);
    let text = String::from_utf8_lossy(&explained.stdout);
    assert!(explained.status.success(), "{explained:?}");
    assert!(text.contains("Cluster autoscaler node groups:"), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with("workers"))
        .unwrap_or_else(|| panic!("no workers row in {text}"));
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>().join(" "),
        "workers 4 4 no: max node group size reached"
    );
    let count = cluster.kubectl(&["get", "nodes", "-l", "kwok-nodegroup=workers", "-o", "name"]);
    count.success();
    assert_eq!(count.stdout.lines().count(), 4);
}

#[test]
fn ksim_autoscaler_alone_over_http_creates_the_desired_nodes_then_scales_up_once() {
    let cluster = TestCluster::start(ksim());
    let kubeconfig = cluster.kubeconfig().to_str().expect("utf-8").to_string();
    // Without the provider's ConfigMaps: one line, exit 1.
    let missing = cluster.ksim(&["autoscaler", "--kubeconfig", &kubeconfig, "--once"]);
    assert!(!missing.status.success());
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("kwok-provider-config"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");

    cluster.kubectl(&["apply", "-f", EXAMPLE]).success();
    let first = cluster.ksim(&["autoscaler", "--kubeconfig", &kubeconfig, "--once"]);
    assert!(first.status.success(), "{first:?}");
    let report: serde_json::Value = serde_json::from_slice(&first.stdout).expect("a JSON report");
    assert_eq!(report["groups"][0]["name"], "workers");
    assert_eq!(report["groups"][0]["registered"], 3);
    ready_workers(&cluster, 3);
    // A pod no node fits: the scheduler marks it unschedulable, then one loop scales up.
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &pod_manifest("wide", "1900m", None))
        .success();
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &pod_manifest("wide-2", "1900m", None),
        )
        .success();
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &pod_manifest("wide-3", "1900m", None),
        )
        .success();
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &pod_manifest("wide-4", "1900m", None),
        )
        .success();
    cluster.wait_for(
        &[
            "get",
            "pod",
            "wide-4",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].reason}",
        ],
        |out| out == "Unschedulable",
    );
    let second = cluster.ksim(&[
        "autoscaler",
        "--kubeconfig",
        &kubeconfig,
        "--once",
        "--expander=least-waste",
    ]);
    assert!(second.status.success(), "{second:?}");
    let report: serde_json::Value = serde_json::from_slice(&second.stdout).expect("a JSON report");
    assert_eq!(report["scaled_up"][0], "workers", "{report}");
    assert_eq!(report["scaled_up"][1], 3);
    let grown = report["scaled_up"][2].as_u64().expect("to");
    assert!(grown >= 4, "{report}");
    cluster.wait_for(
        &["get", "pod", "wide-4", "-o", "jsonpath={.spec.nodeName}"],
        |out| out.starts_with("workers-"),
    );
}

const BUDGETED: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
spec:
  replicas: 1
  selector:
    matchLabels: {app: api}
  template:
    metadata:
      labels: {app: api}
    spec:
      containers:
      - name: api
        image: registry.k8s.io/pause:3.10
        resources:
          requests: {cpu: 100m}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: api
spec:
  minAvailable: 1
  selector:
    matchLabels: {app: api}
"#;

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

#[test]
fn scale_down_waits_for_the_budget_and_skips_disabled_nodes_down_to_min_size() {
    let cluster = TestCluster::start_with(
        ksim(),
        "ksim",
        &[
            "--autoscaler",
            "--scan-interval=500ms",
            "--node-boot-delay=0s",
            "--scale-down-unneeded-time=1s",
            "--scale-down-delay-after-add=0s",
        ],
    );
    // The group's nodes start annotated scale-down-disabled (from the
    // template), so nothing goes until the test says which may.
    let example = std::fs::read_to_string(EXAMPLE).expect("example");
    let desired = "cluster-autoscaler.kwok.nodegroup/desired-count: \"3\"\n";
    let disabled = format!(
        "{desired}          cluster-autoscaler.kubernetes.io/scale-down-disabled: \"true\"\n"
    );
    assert!(example.contains(desired));
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &example.replace(desired, &disabled))
        .success();
    let nodes = ready_workers(&cluster, 3);
    // A budgeted pod: no disruption allowed while it is the only replica.
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], BUDGETED)
        .success();
    let pod_node = cluster.wait_for(
        &[
            "get",
            "pods",
            "-l",
            "app=api",
            "-o",
            "jsonpath={.items[0].spec.nodeName}",
        ],
        |out| !out.is_empty(),
    );
    cluster.wait_for(
        &[
            "get",
            "pdb",
            "api",
            "-o",
            "jsonpath={.status.currentHealthy}",
        ],
        |out| out == "1",
    );
    let others: Vec<&String> = nodes.iter().filter(|n| **n != pod_node).collect();
    let (kept, empty) = (others[0].clone(), others[1].clone());
    // The budgeted node and an empty node may go; `kept` stays disabled.
    for node in [&pod_node, &empty] {
        cluster
            .kubectl(&[
                "annotate",
                "node",
                node,
                "cluster-autoscaler.kubernetes.io/scale-down-disabled-",
            ])
            .success();
    }
    // The empty node goes after the unneeded time; the budgeted node, seen
    // in the same loops, stays: its pod may not be disrupted.
    cluster.wait_for(&["get", "nodes", "-o", "name"], |out| {
        !out.contains(&format!("node/{empty}"))
    });
    assert!(workers(&cluster).contains(&pod_node));
    // Two replicas: the budget allows one disruption; the node is tainted,
    // drained through the eviction API and deleted, its pod recreated on
    // the node that stays.
    cluster
        .kubectl(&["scale", "deployment", "api", "--replicas=2"])
        .success();
    cluster.wait_for(&["get", "nodes", "-o", "name"], |out| {
        !out.contains(&format!("node/{pod_node}"))
    });
    let events = cluster.wait_for(
        &[
            "get",
            "events",
            "--field-selector",
            "reason=ScaleDown",
            "-o",
            "jsonpath={range .items[*]}{.involvedObject.kind} {.involvedObject.name} {.message}{\"\\n\"}{end}",
        ],
        |out| out.contains("deleting pod for node scale down"),
    );
    assert!(
        events.contains(&format!(
            "Node {pod_node} marked the node as toBeDeleted/unschedulable"
        )),
        "{events}"
    );
    cluster.wait_for(
        &[
            "get",
            "pods",
            "-l",
            "app=api",
            "-o",
            "jsonpath={range .items[*]}{.spec.nodeName} {.status.phase}{\"\\n\"}{end}",
        ],
        |out| out.lines().count() == 2 && out.lines().all(|l| l == format!("{kept} Running")),
    );
    // min-count 1: the disabled node is the one left.
    assert_eq!(workers(&cluster), [kept]);
}
