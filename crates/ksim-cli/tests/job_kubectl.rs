//! End-to-end with the real kubectl: Jobs whose pods the kubelet simulator
//! fails with an exit code (a Stage applied with kubectl), judged by their
//! `podFailurePolicy`, and a Job past its `activeDeadlineSeconds`.

use std::path::Path;

use ksim_testutils::TestCluster;
use ksim_testutils::kubectl::table_rows;

/// A full cluster with one simulated node.
fn cluster_with_a_node() -> TestCluster {
    let cluster = TestCluster::start(Path::new(env!("CARGO_BIN_EXE_ksim")));
    cluster.scale_nodes(1);
    cluster
}

/// Running pods labelled `exit-code: "42"` fail with their containers
/// terminated with exit code 42 (weight 1 wins over pod-complete's 0).
const EXIT_42_STAGE: &str = r#"
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-exit-42
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.labels["exit-code"]'
      operator: In
      values: ["42"]
    - key: '.metadata.deletionTimestamp'
      operator: DoesNotExist
    - key: '.status.phase'
      operator: In
      values: [Running]
  weight: 1
  next:
    statusTemplate: |
      {{ $now := Now }}
      containerStatuses:
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: 42
            reason: Error
            startedAt: {{ $now | Quote }}
            finishedAt: {{ $now | Quote }}
      {{ end }}
      phase: Failed
"#;

const FAIL_JOB: &str = "\
apiVersion: batch/v1
kind: Job
metadata:
  name: flaky
spec:
  backoffLimit: 6
  podFailurePolicy:
    rules:
    - action: FailJob
      onExitCodes:
        containerName: main
        operator: In
        values: [42]
  template:
    metadata:
      labels:
        exit-code: \"42\"
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
";

#[test]
fn a_fail_job_rule_fails_the_job_on_its_pods_exit_code() {
    let cluster = cluster_with_a_node();
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], EXIT_42_STAGE)
        .success();
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], FAIL_JOB)
        .success();
    let waited = cluster.kubectl(&[
        "wait",
        "--for=condition=Failed",
        "job/flaky",
        "--timeout=60s",
    ]);
    waited.success();
    assert_eq!(waited.stdout, "job.batch/flaky condition met\n");

    let table = cluster.kubectl(&["get", "job", "flaky"]);
    table.success();
    let rows = table_rows(&table);
    assert!(
        table.stdout.starts_with("NAME    STATUS   COMPLETIONS"),
        "{}",
        table.stdout
    );
    assert_eq!(rows[0][..3], ["flaky", "Failed", "0/1"], "{}", table.stdout);

    let pod = cluster
        .kubectl(&[
            "get",
            "pods",
            "-l",
            "job-name=flaky",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ])
        .success()
        .stdout
        .clone();
    assert!(
        !pod.contains(' '),
        "one pod only, the FailJob rule stops retries: {pod}"
    );
    let conditions = cluster
        .kubectl(&[
            "get",
            "job",
            "flaky",
            "-o",
            "jsonpath={range .status.conditions[*]}{.type}={.reason}: {.message}{\"\\n\"}{end}",
        ])
        .success()
        .stdout
        .clone();
    let message = format!(
        "Container main for pod default/{pod} failed with exit code 42 matching FailJob rule at index 0"
    );
    assert_eq!(
        conditions,
        format!("FailureTarget=PodFailurePolicy: {message}\nFailed=PodFailurePolicy: {message}\n")
    );
    let failed = cluster
        .kubectl(&["get", "job", "flaky", "-o", "jsonpath={.status.failed}"])
        .success()
        .stdout
        .clone();
    assert_eq!(failed, "1");

    // describe shows the failure as its Warning event.
    let described = cluster.wait_for(&["describe", "job", "flaky"], |out| {
        out.contains("PodFailurePolicy")
    });
    let event = described
        .lines()
        .find(|l| l.contains("PodFailurePolicy"))
        .expect("event line");
    assert!(event.trim_start().starts_with("Warning"), "{described}");
    assert!(event.contains(&message), "{described}");
    assert!(described.contains("Pods Statuses:"), "{described}");
}

#[test]
fn a_job_past_its_active_deadline_fails_with_deadline_exceeded() {
    let cluster = cluster_with_a_node();
    // Its pod never runs (no node matches its nodeSelector): only the
    // deadline ends the Job.
    let manifest = "\
apiVersion: batch/v1
kind: Job
metadata:
  name: slow
spec:
  activeDeadlineSeconds: 2
  template:
    spec:
      restartPolicy: Never
      nodeSelector:
        nowhere: \"true\"
      containers:
      - name: main
        image: busybox
";
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], manifest)
        .success();
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Failed",
            "job/slow",
            "--timeout=60s",
        ])
        .success();
    let reasons = cluster
        .kubectl(&[
            "get",
            "job",
            "slow",
            "-o",
            "jsonpath={.status.conditions[*].reason} {.status.failed}",
        ])
        .success()
        .stdout
        .clone();
    assert_eq!(reasons, "DeadlineExceeded DeadlineExceeded 1");
    cluster.wait_for(
        &["get", "pods", "-l", "job-name=slow", "-o", "name"],
        str::is_empty,
    );
}
