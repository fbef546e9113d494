//! End-to-end with the real kubectl: the controllers running inside
//! `ksim create cluster` turn a Deployment into a ReplicaSet and pods,
//! follow `kubectl scale`, finish `kubectl rollout status`, and clean up
//! after `kubectl delete deploy` (garbage collector).

use std::path::Path;
use std::time::{Duration, Instant};

use ksim_testutils::TestCluster;

fn cluster() -> TestCluster {
    TestCluster::start(Path::new(env!("CARGO_BIN_EXE_ksim")))
}

/// Polls `kubectl <args>` until its stdout satisfies `done` (30 s at most).
#[track_caller]
fn wait_for(cluster: &TestCluster, args: &[&str], done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let output = cluster.kubectl(args);
        if output.status == 0 && done(&output.stdout) {
            return output.stdout;
        }
        assert!(
            Instant::now() < deadline,
            "timed out: kubectl {args:?}\nstdout:\n{}\nstderr:\n{}",
            output.stdout,
            output.stderr
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn pod_names(cluster: &TestCluster) -> Vec<String> {
    cluster
        .kubectl(&["get", "pods", "-o", "name"])
        .success()
        .stdout
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn kubectl_drives_a_deployment_through_create_scale_rollout_and_delete() {
    let cluster = cluster();
    cluster
        .kubectl(&[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=3",
        ])
        .success();
    let listed = wait_for(&cluster, &["get", "rs,pods", "--no-headers"], |out| {
        out.lines().filter(|l| l.starts_with("pod/web-")).count() == 3
    });
    let rs_line = listed
        .lines()
        .find(|l| l.starts_with("replicaset.apps/web-"))
        .unwrap_or_else(|| panic!("no replica set in:\n{listed}"));
    let rs_name = rs_line
        .split_whitespace()
        .next()
        .expect("name")
        .trim_start_matches("replicaset.apps/");
    for pod in pod_names(&cluster) {
        let pod = pod.trim_start_matches("pod/");
        let suffix = pod
            .strip_prefix(&format!("{rs_name}-"))
            .expect("pods named after the rs");
        assert_eq!(suffix.len(), 5, "{pod}");
    }

    cluster
        .kubectl(&["scale", "deploy", "web", "--replicas=5"])
        .success();
    wait_for(&cluster, &["get", "pods", "-o", "name"], |out| {
        out.lines().count() == 5
    });

    // Without a kubelet, mark the pods Ready the way one would.
    for pod in pod_names(&cluster) {
        cluster
            .kubectl(&[
                "patch",
                &pod,
                "--subresource=status",
                "--type=merge",
                "-p",
                r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#,
            ])
            .success();
    }
    let rollout = cluster
        .kubectl(&["rollout", "status", "deploy/web", "--timeout=30s"])
        .success()
        .stdout
        .clone();
    assert_eq!(rollout.trim(), "deployment \"web\" successfully rolled out");
    let ready = cluster
        .kubectl(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.status.readyReplicas}/{.status.availableReplicas}",
        ])
        .success()
        .stdout
        .clone();
    assert_eq!(ready, "5/5");

    cluster.kubectl(&["delete", "deploy", "web"]).success();
    let nothing = cluster.kubectl(&["get", "rs,pods"]);
    let gone = wait_for(&cluster, &["get", "rs,pods", "-o", "name"], |out| {
        out.trim().is_empty()
    });
    assert!(gone.trim().is_empty(), "{gone} / {}", nothing.stdout);
}
