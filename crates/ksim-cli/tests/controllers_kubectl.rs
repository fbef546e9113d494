//! End-to-end with the real kubectl: the controllers running inside
//! `ksim create cluster` turn a Deployment into a ReplicaSet and pods,
//! follow `kubectl scale`, finish `kubectl rollout status`, and clean up
//! after `kubectl delete deploy` (garbage collector).

use std::path::Path;

use ksim_testutils::TestCluster;

fn cluster() -> TestCluster {
    TestCluster::start(Path::new(env!("CARGO_BIN_EXE_ksim")))
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
    let listed = cluster.wait_for(&["get", "rs,pods", "--no-headers"], |out| {
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
    cluster.wait_for(&["get", "pods", "-o", "name"], |out| {
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
    let described = cluster
        .kubectl(&["describe", "deploy", "web"])
        .success()
        .stdout
        .clone();
    assert!(
        described.contains(&format!("Scaled up replica set {rs_name} from 0 to 3")),
        "{described}"
    );

    // rollout restart changes the template: a second ReplicaSet, revision 2.
    cluster
        .kubectl(&["rollout", "restart", "deploy/web"])
        .success();
    cluster.wait_for(&["get", "rs", "-o", "name"], |out| out.lines().count() == 2);
    let history = cluster
        .kubectl(&["rollout", "history", "deploy/web"])
        .success()
        .stdout
        .clone();
    assert!(history.lines().any(|l| l.starts_with("2 ")), "{history}");

    // undo goes back to the first template: its ReplicaSet becomes revision 3.
    cluster
        .kubectl(&["rollout", "undo", "deploy/web"])
        .success();
    let revision = cluster.wait_for(
        &[
            "get",
            "rs",
            rs_name,
            "-o",
            "jsonpath={.metadata.annotations.deployment\\.kubernetes\\.io/revision}",
        ],
        |out| out == "3",
    );
    assert_eq!(revision, "3");
    assert_eq!(
        cluster
            .kubectl(&["get", "rs", "-o", "name"])
            .success()
            .stdout
            .lines()
            .count(),
        2
    );

    cluster.kubectl(&["delete", "deploy", "web"]).success();
    let nothing = cluster.kubectl(&["get", "rs,pods"]);
    let gone = cluster.wait_for(&["get", "rs,pods", "-o", "name"], |out| {
        out.trim().is_empty()
    });
    assert!(gone.trim().is_empty(), "{gone} / {}", nothing.stdout);
}

fn mark_ready(cluster: &TestCluster) {
    for pod in pod_names(cluster) {
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
}

#[test]
fn kubectl_get_pdb_shows_the_disruption_controllers_status() {
    let cluster = cluster();
    cluster
        .kubectl(&[
            "create",
            "deployment",
            "db",
            "--image=nginx",
            "--replicas=3",
        ])
        .success();
    cluster
        .kubectl(&[
            "create",
            "pdb",
            "db",
            "--selector=app=db",
            "--min-available=2",
        ])
        .success();
    cluster.wait_for(&["get", "pods", "-o", "name"], |out| {
        out.lines().count() == 3
    });
    let before = cluster.wait_for(
        &["get", "pdb", "db", "-o", "jsonpath={.status.expectedPods}"],
        |out| out == "3",
    );
    assert_eq!(before, "3");
    mark_ready(&cluster);
    let table = cluster.wait_for(&["get", "pdb", "db"], |out| {
        out.lines()
            .nth(1)
            .is_some_and(|l| l.split_whitespace().nth(3) == Some("1"))
    });
    let header: Vec<&str> = table
        .lines()
        .next()
        .expect("header")
        .split("  ")
        .filter(|s| !s.is_empty())
        .map(str::trim)
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "MIN AVAILABLE",
            "MAX UNAVAILABLE",
            "ALLOWED DISRUPTIONS",
            "AGE"
        ]
    );
    let row: Vec<&str> = table
        .lines()
        .nth(1)
        .expect("row")
        .split_whitespace()
        .collect();
    assert_eq!(&row[..4], ["db", "2", "N/A", "1"]);
}

#[test]
fn ksim_controllers_refuses_unknown_controller_names() {
    let env = ksim_testutils::KsimEnv::new(Path::new(env!("CARGO_BIN_EXE_ksim")));
    let output = env.ksim(&["controllers", "--controllers", "replicaset,bogus"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim(),
        "error: \"bogus\" is not in the list of known controllers: replicaset, deployment, garbagecollector, disruption, statefulset, daemonset, job, namespace, nodelifecycle, ttl-after-finished"
    );
}
