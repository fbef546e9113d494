//! End-to-end: `ksim deschedule` against `ksim create cluster` (kubelet
//! simulator, controllers and scheduler running), driven and checked with
//! the real kubectl: a node tainted NoSchedule after its pods started loses
//! them, the ReplicaSet recreates them and the scheduler places them on the
//! other node; a Deployment with ScheduleAnyway spread skewed 3/1 is
//! rebalanced to 2/2; `--dry-run -o json` lists without evicting; a bad
//! policy is one line and exit 1.

use std::path::Path;

use ksim_testutils::TestCluster;
use ksim_testutils::component::TAINTS_POLICY;

fn all_running(rows: &[(String, String, String)], count: usize) -> bool {
    rows.len() == count && rows.iter().all(|(_, status, _)| status == "Running")
}

#[test]
fn pods_on_a_node_tainted_after_they_started_are_moved_by_ksim_deschedule() {
    let cluster = TestCluster::start(Path::new(env!("CARGO_BIN_EXE_ksim")));
    cluster.scale_nodes(2);
    cluster
        .kubectl(&[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=4",
        ])
        .success();
    let rows = cluster.pods_until("4 running pods", |rows| all_running(rows, 4));
    // The nodes are equal: make sure some pods run on node-000000 by
    // tainting the node that has the most.
    let on = |rows: &[(String, String, String)], node: &str| {
        rows.iter().filter(|(_, _, n)| n == node).count()
    };
    let (tainted, other) = if on(&rows, "node-000000") >= on(&rows, "node-000001") {
        ("node-000000", "node-000001")
    } else {
        ("node-000001", "node-000000")
    };
    let doomed: Vec<String> = rows
        .iter()
        .filter(|(_, _, node)| node == tainted)
        .map(|(name, _, _)| name.clone())
        .collect();
    assert!(!doomed.is_empty(), "{rows:?}");
    cluster
        .kubectl(&["taint", "node", tainted, "maintenance=true:NoSchedule"])
        .success();
    let policy = cluster.write_file("policy.yaml", TAINTS_POLICY);
    let policy = policy.to_str().expect("utf-8 path");

    // Dry run: the pods on the tainted node are listed, nothing is evicted.
    let dry = cluster.ksim(&["deschedule", "--policy", policy, "--dry-run", "-o", "json"]);
    assert!(dry.status.success(), "{dry:?}");
    let report: serde_json::Value =
        serde_json::from_slice(&dry.stdout).expect("the dry run prints JSON");
    assert_eq!(report["dryRun"], true, "{report}");
    let mut listed: Vec<String> = report["evictions"]
        .as_array()
        .expect("evictions")
        .iter()
        .map(|e| {
            assert_eq!(e["plugin"], "RemovePodsViolatingNodeTaints");
            assert_eq!(e["node"], tainted);
            assert_eq!(e["result"], "DryRun");
            e["pod"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    listed.sort();
    let mut expected = doomed.clone();
    expected.sort();
    assert_eq!(listed, expected);
    let table = cluster.ksim(&["deschedule", "--policy", policy, "--dry-run"]);
    let table = String::from_utf8_lossy(&table.stdout).to_string();
    assert!(
        table.starts_with("PROFILE   PLUGIN"),
        "the dry-run table has a header: {table}"
    );
    assert_eq!(table.lines().count(), doomed.len() + 1, "{table}");
    let still = cluster.pods_until("nothing evicted", |rows| all_running(rows, 4));
    assert_eq!(on(&still, tainted), doomed.len(), "{still:?}");

    // The real run evicts them; the ReplicaSet and the scheduler put them
    // back on the other node.
    let run = cluster.ksim(&["deschedule", "--policy", policy]);
    assert!(run.status.success(), "{run:?}");
    let printed = String::from_utf8_lossy(&run.stdout).to_string();
    for pod in &doomed {
        assert!(
            printed
                .lines()
                .any(|l| l.contains(pod) && l.ends_with("Evicted")),
            "{printed}"
        );
    }
    let logs = String::from_utf8_lossy(&run.stderr).to_string();
    assert!(logs.contains("Evicted pod"), "{logs}");
    assert!(logs.contains("Number of evictions/requests"), "{logs}");
    let moved = cluster.pods_until("every pod on the untainted node", |rows| {
        all_running(rows, 4) && on(rows, other) == 4
    });
    for pod in &doomed {
        assert!(moved.iter().all(|(name, _, _)| name != pod), "{moved:?}");
    }
    // The Normal event upstream records (events.k8s.io) is written before
    // the one-shot command exits: no polling.
    let output = cluster.kubectl(&["get", "events.v1.events.k8s.io", "-o", "json"]);
    output.success();
    let events: serde_json::Value = serde_json::from_str(&output.stdout).expect("events json");
    let items = events["items"].as_array().cloned().unwrap_or_default();
    let note = format!("pod eviction from {tainted} node by sigs.k8s.io/descheduler");
    assert!(
        items.iter().any(|e| {
            e["regarding"]["name"] == doomed[0].as_str()
                && e["reason"] == "RemovePodsViolatingNodeTaints"
                && e["type"] == "Normal"
                && e["note"] == note.as_str()
        }),
        "no eviction event for {}: {events:#}",
        doomed[0]
    );
}

const SPREAD_POLICY: &str = r#"
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: spread
  pluginConfig:
  - name: DefaultEvictor
  - name: RemovePodsViolatingTopologySpreadConstraint
    args:
      constraints: [DoNotSchedule, ScheduleAnyway]
  plugins:
    balance:
      enabled: [RemovePodsViolatingTopologySpreadConstraint]
"#;

const SPREAD_DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: spread
spec:
  replicas: 3
  selector:
    matchLabels: {app: spread}
  template:
    metadata:
      labels: {app: spread}
    spec:
      containers:
      - name: c
        image: nginx
        resources:
          requests: {cpu: 100m, memory: 64Mi}
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: kubernetes.io/hostname
        whenUnsatisfiable: ScheduleAnyway
        labelSelector:
          matchLabels: {app: spread}
"#;

#[test]
fn a_deployment_skewed_3_to_1_with_schedule_anyway_spread_is_rebalanced_to_2_to_2() {
    let cluster = TestCluster::start(Path::new(env!("CARGO_BIN_EXE_ksim")));
    cluster.scale_nodes(2);
    let on = |rows: &[(String, String, String)], node: &str| {
        rows.iter().filter(|(_, _, n)| n == node).count()
    };
    // Three replicas while node-000001 is cordoned, then a fourth once it
    // is back: the scheduler puts it on the empty node, 3/1.
    cluster.kubectl(&["cordon", "node-000001"]).success();
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], SPREAD_DEPLOYMENT)
        .success();
    cluster.pods_until("3 running pods on node-000000", |rows| {
        all_running(rows, 3) && on(rows, "node-000000") == 3
    });
    cluster.kubectl(&["uncordon", "node-000001"]).success();
    cluster
        .kubectl(&["scale", "deployment", "spread", "--replicas=4"])
        .success();
    let skewed = cluster.pods_until("4 running pods", |rows| all_running(rows, 4));
    assert_eq!(
        (on(&skewed, "node-000000"), on(&skewed, "node-000001")),
        (3, 1),
        "{skewed:?}"
    );

    let policy = cluster.write_file("policy.yaml", SPREAD_POLICY);
    let run = cluster.ksim(&["deschedule", "--policy", policy.to_str().expect("utf-8")]);
    assert!(run.status.success(), "{run:?}");
    let logs = String::from_utf8_lossy(&run.stderr).to_string();
    let evicted: Vec<&str> = logs.lines().filter(|l| l.contains("Evicted pod")).collect();
    assert_eq!(evicted.len(), 1, "one pod moves: {logs}");
    assert!(
        evicted[0].contains("strategy=\"RemovePodsViolatingTopologySpreadConstraint\"")
            && evicted[0].contains("node=\"node-000000\"")
            && evicted[0].contains("profile=\"spread\""),
        "{logs}"
    );
    assert!(logs.contains("totalEvicted=1"), "{logs}");

    // The ReplicaSet recreates the pod, the scheduler places it on
    // node-000001, and `kubectl get pods -o wide` shows 2/2.
    let balanced = cluster.pods_until("2 running pods on each node", |rows| {
        all_running(rows, 4) && on(rows, "node-000000") == 2 && on(rows, "node-000001") == 2
    });
    assert_eq!(balanced.len(), 4);
}

#[test]
fn a_bad_policy_is_one_line_and_exit_1() {
    let cluster = TestCluster::start_api_only(Path::new(env!("CARGO_BIN_EXE_ksim")));
    let policy = cluster.write_file("policy.yaml", "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n  plugins:\n    balance:\n      enabled: [Nope]\n",
    );
    let output = cluster.ksim(&["deschedule", "--policy", policy.to_str().expect("utf-8")]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("profiles[0].plugins.balance.enabled[0]"),
        "{stderr}"
    );
}

#[test]
fn a_cluster_created_with_a_policy_deschedules_on_its_own() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, TAINTS_POLICY).expect("write policy");
    let cluster = TestCluster::start_with(
        Path::new(env!("CARGO_BIN_EXE_ksim")),
        "desched",
        &[
            "--descheduler-policy",
            policy.to_str().expect("utf-8 path"),
            "--descheduling-interval",
            "1s",
        ],
    );
    cluster.scale_nodes(2);
    // Pods can only start on node-000000 until it is tainted.
    cluster.kubectl(&["cordon", "node-000001"]).success();
    cluster
        .kubectl(&[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=2",
        ])
        .success();
    cluster.pods_until("2 running pods on node-000000", |rows| {
        all_running(rows, 2) && rows.iter().all(|(_, _, node)| node == "node-000000")
    });
    cluster.kubectl(&["uncordon", "node-000001"]).success();
    cluster
        .kubectl(&[
            "taint",
            "node",
            "node-000000",
            "maintenance=true:NoSchedule",
        ])
        .success();
    cluster.pods_until("the in-cluster descheduler to move the pods", |rows| {
        all_running(rows, 2) && rows.iter().all(|(_, _, node)| node == "node-000001")
    });
}

#[test]
fn create_cluster_refuses_a_bad_policy_before_starting() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\n",
    )
    .expect("write policy");
    let env = ksim_testutils::KsimEnv::new(Path::new(env!("CARGO_BIN_EXE_ksim")));
    let output = env.ksim(&[
        "create",
        "cluster",
        "--name",
        "badpolicy",
        "--descheduler-policy",
        policy.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(
        stderr.contains("descheduler/v1alpha1 is no longer supported"),
        "{stderr}"
    );
    assert!(env.pid("badpolicy").is_none());
}

const ANTI_AFFINITY_POLICY: &str = r#"
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: anti
  pluginConfig:
  - name: DefaultEvictor
  - name: RemovePodsViolatingInterPodAntiAffinity
  plugins:
    deschedule:
      enabled: [RemovePodsViolatingInterPodAntiAffinity]
"#;

/// A pod in namespace `other` (labelled team=x) and a Deployment's pod in
/// `default` whose anti-affinity selects it through a namespaceSelector,
/// both placed on one node by nodeName (the scheduler would keep them apart).
const ANTI_AFFINITY_OBJECTS: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Namespace
  metadata: {name: other, labels: {team: x}}
- apiVersion: v1
  kind: Pod
  metadata: {name: db, namespace: other, labels: {app: db}}
  spec:
    nodeName: node-000000
    containers: [{name: c, image: nginx}]
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web, namespace: default}
  spec:
    replicas: 1
    selector: {matchLabels: {app: web}}
    template:
      metadata: {labels: {app: web}}
      spec:
        nodeName: node-000000
        containers: [{name: c, image: nginx}]
        affinity:
          podAntiAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: kubernetes.io/hostname
              labelSelector: {matchLabels: {app: db}}
              namespaceSelector: {matchLabels: {team: x}}
"#;

#[test]
fn inter_pod_anti_affinity_honours_the_namespace_selector() {
    let cluster = TestCluster::start(Path::new(env!("CARGO_BIN_EXE_ksim")));
    cluster.scale_nodes(2);
    cluster
        .kubectl_stdin(&["create", "-f", "-"], ANTI_AFFINITY_OBJECTS)
        .success();
    cluster.pods_until("the web pod running", |rows| all_running(rows, 1));
    cluster.wait_for(
        &[
            "get",
            "pod",
            "db",
            "-n",
            "other",
            "-o",
            "jsonpath={.status.phase}",
        ],
        |phase| phase == "Running",
    );
    let policy = cluster.write_file("policy.yaml", ANTI_AFFINITY_POLICY);
    let policy = policy.to_str().expect("utf-8 path");
    let dry = cluster.ksim(&["deschedule", "--policy", policy, "--dry-run", "-o", "json"]);
    assert!(dry.status.success(), "{dry:?}");
    let report: serde_json::Value =
        serde_json::from_slice(&dry.stdout).expect("the dry run prints JSON");
    let evictions = report["evictions"].as_array().expect("evictions");
    assert_eq!(evictions.len(), 1, "{report}");
    assert_eq!(
        evictions[0]["plugin"],
        "RemovePodsViolatingInterPodAntiAffinity"
    );
    assert!(
        evictions[0]["pod"]
            .as_str()
            .is_some_and(|pod| pod.starts_with("web-")),
        "{report}"
    );
}

/// `ksim deschedule --policy POLICY --dry-run -o json`, which must succeed,
/// as JSON.
#[track_caller]
fn dry_run(cluster: &TestCluster, policy: &str) -> serde_json::Value {
    let policy = cluster.write_file("policy.yaml", policy);
    let policy = policy.to_str().expect("utf-8 path");
    let dry = cluster.ksim(&["deschedule", "--policy", policy, "--dry-run", "-o", "json"]);
    assert!(dry.status.success(), "{dry:?}");
    serde_json::from_slice(&dry.stdout).expect("the dry run prints JSON")
}

const INCLUSION_POLICY: &str = r#"
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: spread
  pluginConfig:
  - name: DefaultEvictor
  - name: RemovePodsViolatingTopologySpreadConstraint
    args:
      topologyBalanceNodeFit: false
  plugins:
    balance:
      enabled: [RemovePodsViolatingTopologySpreadConstraint]
"#;

/// Two Deployments spread by hostname (maxSkew 1, DoNotSchedule) that
/// node-000002 must not count for: `tainted` says nodeTaintsPolicy Honor
/// and does not tolerate the node's taint; `affine` requires pool=a, which
/// the node lacks, under the default nodeAffinityPolicy (Honor).
const INCLUSION_DEPLOYMENTS: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: tainted}
  spec:
    replicas: 4
    selector: {matchLabels: {app: tainted}}
    template:
      metadata: {labels: {app: tainted}}
      spec:
        containers: [{name: c, image: nginx}]
        topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: kubernetes.io/hostname
          whenUnsatisfiable: DoNotSchedule
          nodeTaintsPolicy: Honor
          labelSelector: {matchLabels: {app: tainted}}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: affine}
  spec:
    replicas: 4
    selector: {matchLabels: {app: affine}}
    template:
      metadata: {labels: {app: affine}}
      spec:
        containers: [{name: c, image: nginx}]
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
              - matchExpressions: [{key: pool, operator: In, values: [a]}]
        topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: kubernetes.io/hostname
          whenUnsatisfiable: DoNotSchedule
          labelSelector: {matchLabels: {app: affine}}
"#;

/// The scheduler and the descheduler count the same nodes under the node
/// inclusion policies: a node the pods cannot go to (untolerated taint with
/// nodeTaintsPolicy Honor, or outside the required node affinity under the
/// default Honor) is no empty domain to either. The scheduler places each
/// Deployment 2/2 on the two other nodes (counting the third as an empty
/// domain would leave pods Pending at skew 1), and `ksim deschedule` finds
/// no violation (counting it would evict: node fit is off in the policy).
#[test]
fn scheduler_and_descheduler_agree_on_node_inclusion_policies() {
    let cluster = TestCluster::start(Path::new(env!("CARGO_BIN_EXE_ksim")));
    cluster.scale_nodes(3);
    cluster
        .kubectl(&["taint", "node", "node-000002", "dedicated=infra:NoSchedule"])
        .success();
    cluster
        .kubectl(&["label", "node", "node-000000", "node-000001", "pool=a"])
        .success();
    cluster
        .kubectl_stdin(&["create", "-f", "-"], INCLUSION_DEPLOYMENTS)
        .success();
    let rows = cluster.pods_until("8 running pods", |rows| all_running(rows, 8));
    for app in ["tainted", "affine"] {
        let on = |node: &str| {
            rows.iter()
                .filter(|(name, _, n)| name.starts_with(&format!("{app}-")) && n == node)
                .count()
        };
        assert_eq!(
            (on("node-000000"), on("node-000001"), on("node-000002")),
            (2, 2, 0),
            "{app}: {rows:?}"
        );
    }

    let report = dry_run(&cluster, INCLUSION_POLICY);
    assert_eq!(report["dryRun"], true, "{report}");
    assert_eq!(
        report["evictions"].as_array().map(Vec::len),
        Some(0),
        "{report}"
    );
}

const NODE_FIT_POLICY: &str = r#"
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: taints
  pluginConfig:
  - name: DefaultEvictor
    args:
      nodeFit: true
  - name: RemovePodsViolatingNodeTaints
  plugins:
    deschedule:
      enabled: [RemovePodsViolatingNodeTaints]
"#;

/// On nodes of 1 cpu: `filler` (500100u, 501m as the scheduler counts:
/// milli-cpu rounded up) on node-000001 and a Deployment's pod `mover`
/// (499900u, 500m) on node-000000.
const NODE_FIT_OBJECTS: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: filler, labels: {app: filler}}
  spec:
    nodeName: node-000001
    containers: [{name: c, image: nginx, resources: {requests: {cpu: 500100u}}}]
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: mover}
  spec:
    replicas: 1
    selector: {matchLabels: {app: mover}}
    template:
      metadata: {labels: {app: mover}}
      spec:
        nodeName: node-000000
        containers: [{name: c, image: nginx, resources: {requests: {cpu: 499900u}}}]
"#;

/// The descheduler's nodeFit counts requests as the scheduler does (cpu
/// in milli-cpu, each pod's rounded up): a pod on a tainted node is not
/// evicted when it would fit elsewhere only by exact sums (500.1m + 499.9m
/// of 1000m) but not by the scheduler's (501m + 500m), where the scheduler
/// leaves a like pod Pending; once room is made, the same run evicts it.
#[test]
fn descheduler_node_fit_counts_cpu_as_the_scheduler_does() {
    let cluster = TestCluster::start(Path::new(env!("CARGO_BIN_EXE_ksim")));
    cluster.ksim_ok(&[
        "scale",
        "node",
        "--replicas",
        "2",
        "--param",
        ".allocatable.cpu=1",
        "--name",
        cluster.name(),
    ]);
    cluster
        .kubectl_stdin(&["create", "-f", "-"], NODE_FIT_OBJECTS)
        .success();
    cluster.pods_until("filler and mover running", |rows| all_running(rows, 2));
    cluster
        .kubectl(&[
            "taint",
            "node",
            "node-000000",
            "maintenance=true:NoSchedule",
        ])
        .success();

    // The scheduler: a pod like mover fits neither node.
    cluster
        .kubectl(&[
            "run",
            "probe",
            "--image=nginx",
            "--overrides",
            r#"{"spec":{"containers":[{"name":"probe","image":"nginx","resources":{"requests":{"cpu":"499900u"}}}]}}"#,
        ])
        .success();
    cluster.wait_for(
        &[
            "get",
            "pod",
            "probe",
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="PodScheduled")].reason}"#,
        ],
        |reason| reason == "Unschedulable",
    );
    cluster.kubectl(&["delete", "pod", "probe"]).success();

    // The descheduler agrees: mover stays.
    let report = dry_run(&cluster, NODE_FIT_POLICY);
    assert_eq!(
        report["evictions"].as_array().map(Vec::len),
        Some(0),
        "{report}"
    );

    // With filler gone mover fits node-000001, and is evicted.
    cluster
        .kubectl(&["delete", "pod", "filler", "--grace-period=0", "--force"])
        .success();
    cluster.wait_for(&["get", "pods", "-l", "app=filler", "-o", "name"], |out| {
        out.trim().is_empty()
    });
    let report = dry_run(&cluster, NODE_FIT_POLICY);
    let evictions = report["evictions"].as_array().expect("evictions");
    assert_eq!(evictions.len(), 1, "{report}");
    assert_eq!(evictions[0]["node"], "node-000000", "{report}");
    assert!(
        evictions[0]["pod"]
            .as_str()
            .is_some_and(|pod| pod.starts_with("mover-")),
        "{report}"
    );
}
