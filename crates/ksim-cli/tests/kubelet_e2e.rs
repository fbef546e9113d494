//! End-to-end tests of the kubelet simulator with the `ksim` binary and the
//! real kubectl: `ksim scale node` makes Ready agent nodes and scales them
//! down declaratively; a hand-written KWOK Node becomes Ready; bound pods run.

use std::path::Path;

use ksim_testutils::TestCluster;
use ksim_testutils::poll_until;

fn ksim_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ksim"))
}

fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

#[test]
fn scale_node_makes_ready_agent_nodes_and_scales_down_declaratively() {
    let cluster = TestCluster::start(ksim_binary());
    let summary = cluster.ksim_ok(&["scale", "node", "--replicas", "10"]);
    assert_eq!(summary.trim(), "nodes scaled to 10: 10 created, 0 deleted");
    let table = cluster.wait_for(&["get", "nodes"], |out| {
        let rows = rows(out);
        rows.len() == 10 && rows.iter().all(|r| r[1] == "Ready")
    });
    assert!(table.starts_with("NAME"), "{table}");
    let rows = rows(&table);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row[0], format!("node-{i:06}"));
        assert_eq!(row[2], "agent", "{table}");
        assert!(row[4].starts_with("ksim-v"), "{table}");
    }
    let cidr = cluster
        .kubectl(&[
            "get",
            "node",
            "node-000004",
            "-o",
            "jsonpath={.spec.podCIDR}",
        ])
        .success()
        .stdout
        .clone();
    assert_eq!(cidr, "10.0.4.0/24");
    let leases = cluster.wait_for(
        &["get", "leases", "-n", "kube-node-lease", "-o", "name"],
        |out| out.lines().count() == 10,
    );
    assert!(
        leases.contains("lease.coordination.k8s.io/node-000009"),
        "{leases}"
    );

    let summary = cluster.ksim_ok(&["scale", "node", "--replicas", "3"]);
    assert_eq!(summary.trim(), "nodes scaled to 3: 0 created, 7 deleted");
    let names = cluster
        .kubectl(&["get", "nodes", "-o", "name"])
        .success()
        .stdout
        .clone();
    assert_eq!(
        names,
        "node/node-000000\nnode/node-000001\nnode/node-000002\n"
    );
}

/// `spec.renewTime` of the lease of `node`.
fn renew_time(cluster: &TestCluster, node: &str) -> String {
    cluster
        .kubectl(&[
            "get",
            "lease",
            node,
            "-n",
            "kube-node-lease",
            "-o",
            "jsonpath={.spec.renewTime}",
        ])
        .success()
        .stdout
        .clone()
}

#[test]
fn leases_of_deleted_nodes_go_and_are_not_recreated() {
    let cluster = TestCluster::start(ksim_binary());
    cluster.ksim_ok(&["scale", "node", "--replicas", "3"]);
    let lease_names = ["get", "leases", "-n", "kube-node-lease", "-o", "name"];
    cluster.wait_for(&lease_names, |out| out.lines().count() == 3);

    cluster.ksim_ok(&["scale", "node", "--replicas", "1"]);
    // The garbage collector removes the leases of the deleted nodes (their owner).
    cluster.wait_for(&lease_names, |out| {
        out == "lease.coordination.k8s.io/node-000000\n"
    });
    // A renewal round of the remaining node later, no lease came back.
    let before = renew_time(&cluster, "node-000000");
    poll_until("the lease of node-000000 renewed", || {
        let renewed = renew_time(&cluster, "node-000000");
        if renewed == before {
            Err(format!("still {renewed}"))
        } else {
            Ok(())
        }
    });
    let leases = cluster.kubectl(&lease_names).success().stdout.clone();
    assert_eq!(leases, "lease.coordination.k8s.io/node-000000\n");
}

#[test]
fn scale_node_params_override_the_template() {
    let cluster = TestCluster::start(ksim_binary());
    cluster.ksim_ok(&[
        "scale",
        "node",
        "--replicas",
        "1",
        "--param",
        ".allocatable.cpu=\"4\"",
        "--param",
        ".labels.zone=a",
    ]);
    let out = cluster.wait_for(&[
            "get",
            "node",
            "node-000000",
            "-o",
            "jsonpath={.status.allocatable.cpu} {.metadata.labels.zone} {.status.conditions[?(@.type==\"Ready\")].status}",
        ],
        |out| out.ends_with("True"),
    );
    assert_eq!(out, "4 a True");
    let bad = cluster.ksim(&["scale", "node", "--replicas", "1", "--param", "cpu=4"]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("invalid param path"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

/// The Node of KWOK's getting-started guide.
const KWOK_NODE: &str = r#"
apiVersion: v1
kind: Node
metadata:
  annotations:
    node.alpha.kubernetes.io/ttl: "0"
    kwok.x-k8s.io/node: fake
  labels:
    beta.kubernetes.io/arch: amd64
    beta.kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: kwok-node-0
    kubernetes.io/os: linux
    kubernetes.io/role: agent
    node-role.kubernetes.io/agent: ""
    type: kwok
  name: kwok-node-0
spec:
  taints:
  - effect: NoSchedule
    key: kwok.x-k8s.io/node
    value: fake
status:
  allocatable:
    cpu: 32
    memory: 256Gi
    pods: 110
  capacity:
    cpu: 32
    memory: 256Gi
    pods: 110
  nodeInfo:
    architecture: amd64
    bootID: ""
    containerRuntimeVersion: ""
    kernelVersion: ""
    kubeProxyVersion: fake
    kubeletVersion: fake
    machineID: ""
    operatingSystem: linux
    osImage: ""
    systemUUID: ""
  phase: Running
"#;

#[test]
fn kwok_getting_started_node_becomes_ready_and_runs_bound_pods() {
    let cluster = TestCluster::start(ksim_binary());
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], KWOK_NODE)
        .success();
    let table = cluster.wait_for(&["get", "node", "kwok-node-0"], |out| {
        rows(out).first().is_some_and(|r| r[1] == "Ready")
    });
    assert_eq!(rows(&table)[0][2], "agent", "{table}");

    let pod = r#"{"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {"nodeName": "kwok-node-0",
                 "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
                 "containers": [{"name": "c", "image": "nginx"}]}}"#;
    cluster.kubectl_stdin(&["apply", "-f", "-"], pod).success();
    let out = cluster.wait_for(
        &[
            "get",
            "pod",
            "web",
            "-o",
            "jsonpath={.status.phase} {.status.podIP}",
        ],
        |out| out.starts_with("Running "),
    );
    assert!(out.len() > "Running ".len(), "pod has an IP: {out}");
    cluster.kubectl(&["delete", "pod", "web"]).success();
    cluster.kubectl(&["get", "pod", "web"]).failure();
}

const FAIL_STAGE: &str = r#"
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-fail-after-a-while
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchLabels:
      fail: "true"
    matchExpressions:
    - key: '.status.phase'
      operator: In
      values: [Running]
  delay:
    durationMilliseconds: 1000
    jitterDurationMilliseconds: 1500
  next:
    statusTemplate: |
      phase: Failed
"#;

#[test]
fn stage_applied_with_kubectl_takes_effect() {
    let cluster = TestCluster::start(ksim_binary());
    cluster.ksim_ok(&["scale", "node", "--replicas", "1"]);
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], FAIL_STAGE)
        .success();
    cluster
        .kubectl(&[
            "run",
            "doomed",
            "--image=nginx",
            "--labels=fail=true",
            "--overrides={\"spec\":{\"nodeName\":\"node-000000\"}}",
        ])
        .success();
    cluster.wait_for(
        &["get", "pod", "doomed", "-o", "jsonpath={.status.phase}"],
        |out| out == "Failed",
    );
    // Default stages installed by ksim can be replaced with kubectl apply without warnings.
    let stage = cluster
        .kubectl(&["get", "stage", "pod-ready", "-o", "yaml"])
        .success()
        .stdout
        .clone();
    let applied = cluster.kubectl_stdin(&["apply", "-f", "-"], &stage);
    applied.success();
    assert!(!applied.stderr.contains("Warning"), "{}", applied.stderr);
}
