//! End-to-end: the scheduler inside `ksim create cluster`, seen through the
//! real kubectl (`get pods -o wide` NODE column, `describe pod` events) and
//! `ksim explain pod`.

use std::path::Path;

use ksim_testutils::{KsimEnv, TestCluster};

fn cluster() -> TestCluster {
    TestCluster::start(Path::new(env!("CARGO_BIN_EXE_ksim")))
}

/// Creates a node with `cpu` allocatable (status set through its subresource).
fn add_node(cluster: &KsimEnv, name: &str, cpu: &str) {
    let node =
        format!(r#"{{"apiVersion": "v1", "kind": "Node", "metadata": {{"name": "{name}"}}}}"#);
    cluster
        .kubectl_stdin(&["create", "-f", "-"], &node)
        .success();
    let status = format!(
        r#"{{"status": {{"allocatable": {{"cpu": "{cpu}", "memory": "8Gi", "pods": "110"}},
                        "capacity": {{"cpu": "{cpu}", "memory": "8Gi", "pods": "110"}}}}}}"#
    );
    cluster
        .kubectl(&[
            "patch",
            "node",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status,
        ])
        .success();
}

fn add_pod(cluster: &KsimEnv, name: &str, cpu: &str, annotations: &str) {
    let pod = format!(
        r#"{{"apiVersion": "v1", "kind": "Pod",
            "metadata": {{"name": "{name}", "annotations": {{{annotations}}}}},
            "spec": {{"containers": [{{"name": "c", "image": "nginx",
                "resources": {{"requests": {{"cpu": "{cpu}"}}}}}}]}}}}"#
    );
    cluster
        .kubectl_stdin(&["create", "-f", "-"], &pod)
        .success();
}

#[test]
fn scheduled_pods_show_their_node_and_scheduled_event() {
    let cluster = cluster();
    add_node(cluster.env(), "n1", "4");
    add_pod(cluster.env(), "web", "500m", "");
    let wide = cluster.wait_for(&["get", "pods", "-o", "wide"], |out| {
        out.lines()
            .any(|l| l.starts_with("web ") && l.contains(" n1 "))
    });
    let header = wide.lines().next().unwrap_or_default();
    assert!(header.contains("NODE"), "{wide}");
    assert!(
        wide.lines()
            .any(|l| l.starts_with("web ") && l.contains(" n1 ")),
        "{wide}"
    );
    let describe = cluster.wait_for(&["describe", "pod", "web"], |out| {
        out.contains("Successfully assigned default/web to n1")
    });
    assert!(
        describe.lines().any(|l| l.contains("Normal")
            && l.contains("Scheduled")
            && l.contains("default-scheduler")
            && l.contains("Successfully assigned default/web to n1")),
        "{describe}"
    );
}

#[test]
fn unschedulable_pods_show_the_failed_scheduling_message() {
    let cluster = cluster();
    add_node(cluster.env(), "n1", "1");
    add_pod(cluster.env(), "big", "2", "");
    let message = "0/1 nodes are available: 1 Insufficient cpu. \
                   preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling..";
    let describe = cluster.wait_for(&["describe", "pod", "big"], |out| out.contains(message));
    assert!(
        describe.lines().any(|l| l.contains("Warning")
            && l.contains("FailedScheduling")
            && l.contains(message)),
        "{describe}"
    );
    let wide = cluster
        .kubectl(&["get", "pod", "big", "-o", "wide"])
        .success()
        .stdout
        .clone();
    assert!(wide.contains("Pending"), "{wide}");
    let reason = cluster
        .kubectl(&[
            "get",
            "pod",
            "big",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].reason}",
        ])
        .success()
        .stdout
        .clone();
    assert_eq!(reason, "Unschedulable");
    // Room appears: the pod is placed.
    add_node(cluster.env(), "n2", "4");
    let wide = cluster.wait_for(&["get", "pods", "-o", "wide"], |out| {
        out.lines()
            .any(|l| l.starts_with("big ") && l.contains(" n2 "))
    });
    assert!(
        wide.lines()
            .any(|l| l.starts_with("big ") && l.contains(" n2 ")),
        "{wide}"
    );
}

#[test]
fn explain_pod_prints_recorded_decisions() {
    let cluster = cluster();
    add_node(cluster.env(), "small", "100m");
    add_node(cluster.env(), "large", "4");
    add_pod(
        cluster.env(),
        "rec",
        "500m",
        r#""ksim.io/record-decisions": "true""#,
    );
    cluster.wait_for(
        &[
            "get",
            "pod",
            "rec",
            "-o",
            "jsonpath={.metadata.annotations}",
        ],
        |out| out.contains("selected-node"),
    );
    let output = cluster.ksim(&["explain", "pod", "rec"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("NODE") && lines[0].contains("FILTER"),
        "{stdout}"
    );
    assert!(lines[1].starts_with("large *"), "{stdout}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("small") && l.contains("NodeResourcesFit: Insufficient cpu")),
        "{stdout}"
    );
}

#[test]
fn create_cluster_passes_the_scheduler_configuration() {
    let env = KsimEnv::new(Path::new(env!("CARGO_BIN_EXE_ksim")));
    let bad = env.root().join("bad.yaml");
    std::fs::write(
        &bad,
        "kind: KubeSchedulerConfiguration\npercentageOfNodesToScore: 120\n",
    )
    .expect("write");
    let output = env.ksim(&[
        "create",
        "cluster",
        "--scheduler-config",
        bad.to_str().expect("utf-8"),
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("percentageOfNodesToScore"), "{stderr}");

    let config = env.root().join("scheduler.yaml");
    std::fs::write(
        &config,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: my-scheduler\n",
    )
    .expect("write");
    let output = env.ksim(&[
        "create",
        "cluster",
        "--scheduler-config",
        config.to_str().expect("utf-8"),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    add_node(&env, "n1", "4");
    let pod = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "mine"},
        "spec": {"schedulerName": "my-scheduler", "containers": [{"name": "c", "image": "nginx"}]}}"#;
    env.kubectl_stdin(&["create", "-f", "-"], pod).success();
    let describe = env.wait_for(&["describe", "pod", "mine"], |out| {
        out.contains("Successfully assigned default/mine to n1")
    });
    assert!(
        describe
            .lines()
            .any(|l| l.contains("my-scheduler") && l.contains("Successfully assigned")),
        "{describe}"
    );
}

/// The priority a pod gets from its PriorityClass (set by the API server's
/// Priority admission, the one place classes resolve) is what the scheduler
/// preempts by: on a full node, a pod of class `high` makes the scheduler
/// preempt the running pod of the globalDefault class `low`, then runs there.
#[test]
fn a_pod_of_a_higher_priority_class_preempts_a_pod_of_the_default_class() {
    let cluster = cluster();
    let classes = r#"
apiVersion: v1
kind: List
items:
- apiVersion: scheduling.k8s.io/v1
  kind: PriorityClass
  metadata: {name: low}
  value: 10
  globalDefault: true
- apiVersion: scheduling.k8s.io/v1
  kind: PriorityClass
  metadata: {name: high}
  value: 1000
"#;
    cluster
        .kubectl_stdin(&["create", "-f", "-"], classes)
        .success();
    cluster.ksim_ok(&[
        "scale",
        "node",
        "--replicas",
        "1",
        "--param",
        ".allocatable.cpu=1",
        "--name",
        cluster.name(),
    ]);
    add_pod(cluster.env(), "victim", "1", "");
    let victim = cluster.wait_for(
        &[
            "get",
            "pod",
            "victim",
            "-o",
            "jsonpath={.spec.priority} {.status.phase}",
        ],
        |out| out == "10 Running",
    );
    assert_eq!(victim, "10 Running");
    let preemptor = r#"{"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "preemptor"},
        "spec": {"priorityClassName": "high", "containers": [{"name": "c", "image": "nginx",
            "resources": {"requests": {"cpu": "1"}}}]}}"#;
    cluster
        .kubectl_stdin(&["create", "-f", "-"], preemptor)
        .success();
    let placed = cluster.wait_for(
        &[
            "get",
            "pod",
            "preemptor",
            "-o",
            "jsonpath={.spec.priority} {.spec.nodeName} {.status.phase}",
        ],
        |out| out == "1000 node-000000 Running",
    );
    assert_eq!(placed, "1000 node-000000 Running");
    cluster.wait_for(&["get", "pods", "-o", "name"], |out| {
        out.trim() == "pod/preemptor"
    });
}
