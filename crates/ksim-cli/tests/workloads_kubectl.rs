//! End-to-end with the real kubectl: the StatefulSet, DaemonSet, Job and
//! namespace controllers running inside `ksim create cluster`, with the
//! kubelet simulator making pods Running and Ready (and completing Job
//! pods) on nodes made by `ksim scale node`.

use std::path::Path;

use ksim_testutils::TestCluster;

/// A full cluster with `nodes` simulated nodes.
fn cluster_with_nodes(nodes: usize) -> TestCluster {
    let cluster = TestCluster::start(Path::new(env!("CARGO_BIN_EXE_ksim")));
    cluster.scale_nodes(nodes);
    cluster
}

#[test]
fn a_stateful_set_of_three_runs_web_0_to_web_2_and_rolls_out() {
    let cluster = cluster_with_nodes(2);
    let manifest = "\
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  replicas: 3
  serviceName: web
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: nginx
        image: nginx
";
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], manifest)
        .success();
    let rollout = cluster.kubectl(&["rollout", "status", "sts/web", "--timeout=60s"]);
    rollout.success();
    // The API server defaults the partition to 0, so kubectl 1.33 reports
    // a partitioned roll-out, as against a real cluster.
    assert_eq!(
        rollout.stdout.trim_end().lines().last(),
        Some("partitioned roll out complete: 3 new pods have been updated..."),
        "{}",
        rollout.stdout
    );
    let pods = cluster
        .kubectl(&[
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "custom-columns=NAME:.metadata.name,PHASE:.status.phase",
            "--no-headers",
        ])
        .success()
        .stdout
        .clone();
    let rows: Vec<Vec<&str>> = pods
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            ["web-0", "Running"],
            ["web-1", "Running"],
            ["web-2", "Running"]
        ]
    );
    let ready = cluster
        .kubectl(&["get", "sts", "web", "--no-headers"])
        .success()
        .stdout
        .clone();
    assert!(ready.starts_with("web   3/3"), "{ready}");
}

#[test]
fn a_daemon_set_runs_one_pod_on_each_of_three_nodes() {
    let cluster = cluster_with_nodes(3);
    let manifest = "\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels:
      app: agent
  template:
    metadata:
      labels:
        app: agent
    spec:
      containers:
      - name: agent
        image: agent
";
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], manifest)
        .success();
    let rollout = cluster.kubectl(&["rollout", "status", "ds/agent", "--timeout=60s"]);
    rollout.success();
    assert_eq!(
        rollout.stdout.trim_end().lines().last(),
        Some("daemon set \"agent\" successfully rolled out"),
        "{}",
        rollout.stdout
    );
    let placed = cluster.wait_for(
        &[
            "get",
            "pods",
            "-l",
            "app=agent",
            "-o",
            "custom-columns=NODE:.spec.nodeName,PHASE:.status.phase",
            "--no-headers",
        ],
        |out| out.lines().count() == 3 && out.lines().all(|l| l.ends_with("Running")),
    );
    let mut nodes: Vec<&str> = placed
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    nodes.sort_unstable();
    assert_eq!(nodes, ["node-000000", "node-000001", "node-000002"]);
    let status = cluster
        .kubectl(&[
            "get",
            "ds",
            "agent",
            "-o",
            "jsonpath={.status.desiredNumberScheduled} {.status.numberReady} {.status.updatedNumberScheduled}",
        ])
        .success()
        .stdout
        .clone();
    assert_eq!(status, "3 3 3");
}

#[test]
fn a_job_of_three_completions_ends_complete() {
    let cluster = cluster_with_nodes(2);
    let manifest = "\
apiVersion: batch/v1
kind: Job
metadata:
  name: pi
spec:
  completions: 3
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: pi
        image: perl
";
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], manifest)
        .success();
    let waited = cluster.kubectl(&[
        "wait",
        "--for=condition=Complete",
        "job/pi",
        "--timeout=60s",
    ]);
    waited.success();
    assert_eq!(waited.stdout, "job.batch/pi condition met\n");
    let status = cluster
        .kubectl(&[
            "get",
            "job",
            "pi",
            "-o",
            "jsonpath={.status.succeeded} {.status.conditions[*].type}",
        ])
        .success()
        .stdout
        .clone();
    assert_eq!(status, "3 SuccessCriteriaMet Complete");
    let pods = cluster
        .kubectl(&[
            "get",
            "pods",
            "-l",
            "job-name=pi",
            "-o",
            "jsonpath={.items[*].status.phase}",
        ])
        .success()
        .stdout
        .clone();
    assert_eq!(pods, "Succeeded Succeeded Succeeded");
}

#[test]
fn deleting_a_namespace_removes_its_deployment_and_config_map() {
    let cluster = cluster_with_nodes(1);
    cluster.kubectl(&["create", "namespace", "x"]).success();
    cluster
        .kubectl(&[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=2",
            "-n",
            "x",
        ])
        .success();
    cluster
        .kubectl(&[
            "create",
            "configmap",
            "conf",
            "-n",
            "x",
            "--from-literal=a=b",
        ])
        .success();
    cluster.wait_for(&["get", "pods", "-n", "x", "--no-headers"], |out| {
        out.lines().filter(|l| l.contains("Running")).count() == 2
    });
    let deleted = cluster.kubectl(&["delete", "ns", "x", "--timeout=60s"]);
    assert_eq!(deleted.success().stdout, "namespace \"x\" deleted\n");
    let gone = cluster.kubectl(&["get", "namespace", "x"]);
    gone.failure();
    assert_eq!(
        gone.stderr,
        "Error from server (NotFound): namespaces \"x\" not found\n"
    );
    let leftovers = cluster
        .kubectl(&[
            "get",
            "deployments,replicasets,pods,configmaps",
            "-A",
            "--field-selector=metadata.namespace=x",
            "-o",
            "name",
        ])
        .success()
        .stdout
        .clone();
    assert_eq!(leftovers, "");
}
