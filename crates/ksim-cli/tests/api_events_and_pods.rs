//! End-to-end: both Event APIs see the same events (as `kubectl describe`
//! needs), and simulated pods answer `kubectl logs/exec` with a clear error.

use std::path::Path;

use ksim_testutils::TestCluster;

fn cluster() -> TestCluster {
    TestCluster::start_api_only(Path::new(env!("CARGO_BIN_EXE_ksim")))
}

#[test]
fn events_written_through_events_k8s_io_show_in_kubectl_describe() {
    let cluster = cluster();
    // Left to no scheduler, so that the only event is the one written here.
    cluster
        .kubectl(&[
            "run",
            "p1",
            "--image=nginx",
            "--overrides={\"spec\": {\"schedulerName\": \"none\"}}",
        ])
        .success();
    let uid = cluster
        .kubectl(&["get", "pod", "p1", "-o", "jsonpath={.metadata.uid}"])
        .success()
        .stdout
        .clone();
    let event = format!(
        r#"{{"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {{"name": "p1.scheduled", "namespace": "default"}},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "regarding": {{"kind": "Pod", "name": "p1", "namespace": "default", "uid": "{uid}", "apiVersion": "v1"}},
            "reason": "Scheduled", "type": "Normal", "action": "Binding",
            "note": "Successfully assigned default/p1 to node-000000",
            "reportingController": "default-scheduler", "reportingInstance": "default-scheduler-ksim"}}"#
    );
    cluster
        .kubectl_stdin(&["create", "-f", "-"], &event)
        .success();

    let core = cluster
        .kubectl(&["get", "events", "-o", "jsonpath={.items[0].message}"])
        .success()
        .stdout
        .clone();
    assert_eq!(core, "Successfully assigned default/p1 to node-000000");

    let described = cluster
        .kubectl(&["describe", "pod", "p1"])
        .success()
        .stdout
        .clone();
    let events = described
        .split("Events:")
        .nth(1)
        .expect("describe prints an Events section");
    assert!(
        events.contains("Normal  Scheduled") && events.contains("default-scheduler"),
        "{events}"
    );
    assert!(events.contains("Successfully assigned default/p1 to node-000000"));

    let filtered = cluster
        .kubectl(&[
            "get",
            "events.v1.events.k8s.io",
            "--field-selector",
            "regarding.name=p1",
            "-o",
            "name",
        ])
        .success()
        .stdout
        .clone();
    assert_eq!(filtered.trim(), "event.events.k8s.io/p1.scheduled");
}

#[test]
fn simulated_pods_refuse_logs_and_exec_with_a_clear_message() {
    let cluster = cluster();
    cluster.kubectl(&["run", "p1", "--image=nginx"]).success();
    let logs = cluster.kubectl(&["logs", "p1"]);
    assert_ne!(logs.status, 0);
    assert_eq!(
        logs.stderr.trim(),
        "Error from server (BadRequest): pod \"p1\" is simulated by ksim: its containers do not run, so it has no logs"
    );
    let exec = cluster.kubectl(&["exec", "p1", "--", "ls"]);
    assert_ne!(exec.status, 0);
    assert!(
        exec.stderr
            .contains("is simulated by ksim: its containers do not run, so it cannot run commands"),
        "{}",
        exec.stderr
    );
}
