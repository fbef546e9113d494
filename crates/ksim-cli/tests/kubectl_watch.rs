//! End-to-end tests of `kubectl get -w`: a watch run in the background sees
//! the initial list, then ADDED, MODIFIED and DELETED events as they happen,
//! printed as Table rows like against kube-apiserver.

use std::path::Path;
use std::time::Duration;

use ksim_testutils::TestCluster;
use ksim_testutils::kubectl::BackgroundKubectl;
use ksim_testutils::poll_until;

fn cluster() -> TestCluster {
    TestCluster::start_api_only(Path::new(env!("CARGO_BIN_EXE_ksim")))
}

const WAIT: Duration = Duration::from_secs(20);

/// The (event, name) pairs of a `--output-watch-events` table.
fn events(stdout: &str) -> Vec<(String, String)> {
    stdout
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut cells = line.split_whitespace();
            Some((cells.next()?.to_string(), cells.next()?.to_string()))
        })
        .collect()
}

fn pair(event: &str, name: &str) -> (String, String) {
    (event.to_string(), name.to_string())
}

#[test]
fn watch_with_events_sees_added_modified_deleted() {
    let cluster = cluster();
    cluster
        .kubectl(&["create", "configmap", "before", "--from-literal=a=1"])
        .success();
    let watch = BackgroundKubectl::spawn(
        cluster.env(),
        &["get", "configmaps", "-w", "--output-watch-events"],
    );
    watch.wait_for_stdout(WAIT, |out| out.contains("before"));

    cluster
        .kubectl(&["create", "configmap", "live", "--from-literal=a=1"])
        .success();
    cluster
        .kubectl(&["label", "configmap", "live", "stage=two"])
        .success();
    cluster.kubectl(&["delete", "configmap", "live"]).success();
    watch.wait_for_stdout(WAIT, |out| out.contains("DELETED"));
    let output = watch.stop();

    assert_eq!(
        output.stdout.lines().next(),
        Some("EVENT      NAME     DATA   AGE"),
        "{}",
        output.stdout
    );
    assert_eq!(
        events(&output.stdout),
        vec![
            pair("ADDED", "before"),
            pair("ADDED", "live"),
            pair("MODIFIED", "live"),
            pair("DELETED", "live"),
        ],
        "{}",
        output.stdout
    );
}

#[test]
fn watch_of_pods_prints_table_rows_for_each_change() {
    let cluster = cluster();
    let watch = BackgroundKubectl::spawn(cluster.env(), &["get", "pods", "-w"]);
    // No pods yet: kubectl prints nothing and keeps watching. Whether the
    // pod comes in the initial list or as an event, it prints the same row.
    std::thread::sleep(Duration::from_millis(300));
    cluster.kubectl(&["run", "web", "--image=nginx"]).success();
    watch.wait_for_stdout(WAIT, |out| out.contains("web"));
    cluster
        .kubectl(&["annotate", "pod", "web", "note=hello"])
        .success();
    watch.wait_for_stdout(WAIT, |out| out.matches("web").count() >= 2);
    let output = watch.stop();
    let lines: Vec<&str> = output.stdout.lines().collect();
    assert_eq!(
        lines[0], "NAME   READY   STATUS    RESTARTS   AGE",
        "{}",
        output.stdout
    );
    for line in &lines[1..] {
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cells[..4], ["web", "0/1", "Pending", "0"], "{line}");
    }
}

#[test]
fn watch_of_one_object_by_name_sees_only_it() {
    let cluster = cluster();
    cluster.kubectl(&["create", "configmap", "mine"]).success();
    cluster
        .kubectl(&["create", "configmap", "theirs"])
        .success();
    let watch = BackgroundKubectl::spawn(
        cluster.env(),
        &["get", "configmap", "mine", "-w", "--output-watch-events"],
    );
    watch.wait_for_stdout(WAIT, |out| out.contains("mine"));
    cluster
        .kubectl(&["label", "configmap", "theirs", "x=1"])
        .success();
    cluster
        .kubectl(&["label", "configmap", "mine", "x=1"])
        .success();
    watch.wait_for_stdout(WAIT, |out| out.contains("MODIFIED"));
    let output = watch.stop();
    assert_eq!(
        events(&output.stdout),
        vec![pair("ADDED", "mine"), pair("MODIFIED", "mine")],
        "{}",
        output.stdout
    );
}

#[test]
fn watch_sees_a_finalized_delete_as_modified_then_deleted() {
    let cluster = cluster();
    // A first object: once kubectl prints it, the list is done and the watch
    // continues from the list's resourceVersion, so no later event is missed.
    cluster
        .kubectl(&["create", "configmap", "sentinel"])
        .success();
    let watch = BackgroundKubectl::spawn(
        cluster.env(),
        &["get", "configmaps", "-w", "--output-watch-events"],
    );
    watch.wait_for_stdout(WAIT, |out| out.contains("sentinel"));
    cluster
        .kubectl_stdin(
            &["create", "-f", "-"],
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  finalizers: [example.com/hold]\n",
        )
        .success();
    cluster
        .kubectl(&["delete", "configmap", "held", "--wait=false"])
        .success();
    cluster
        .kubectl(&[
            "patch",
            "configmap",
            "held",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ])
        .success();
    watch.wait_for_stdout(WAIT, |out| out.contains("DELETED"));
    let output = watch.stop();
    // The finalizer's removal deletes the object: no MODIFIED for it.
    let held: Vec<(String, String)> = events(&output.stdout)
        .into_iter()
        .filter(|(_, name)| name == "held")
        .collect();
    assert_eq!(
        held,
        vec![
            pair("ADDED", "held"),
            pair("MODIFIED", "held"),
            pair("DELETED", "held"),
        ],
        "{}",
        output.stdout
    );
}

#[test]
fn watch_of_custom_resources_prints_printer_columns() {
    let cluster = cluster();
    let crd = format!(
        "{}/tests/fixtures/crd-widgets.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    cluster.kubectl(&["apply", "-f", &crd]).success();
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/widgets.example.com",
            "--timeout=20s",
        ])
        .success();
    let widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: small\n  replicas: 1\n";
    poll_until("widgets served", || {
        let applied = cluster.kubectl_stdin(&["apply", "-f", "-"], widget);
        if applied.status == 0 {
            Ok(())
        } else {
            Err(applied.stderr)
        }
    });
    let watch = BackgroundKubectl::spawn(
        cluster.env(),
        &["get", "widgets", "-w", "--output-watch-events"],
    );
    watch.wait_for_stdout(WAIT, |out| out.contains("w1"));
    cluster
        .kubectl(&[
            "patch",
            "widget",
            "w1",
            "--type=merge",
            "-p",
            r#"{"spec":{"size":"large"}}"#,
        ])
        .success();
    cluster.kubectl(&["delete", "widget", "w1"]).success();
    watch.wait_for_stdout(WAIT, |out| out.contains("DELETED"));
    let output = watch.stop();
    let lines: Vec<Vec<&str>> = output
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        ["EVENT", "NAME", "SIZE", "REPLICAS", "AGE"],
        "{}",
        output.stdout
    );
    let cells: Vec<&[&str]> = lines[1..].iter().map(|l| &l[..4]).collect();
    assert_eq!(
        cells,
        [
            &["ADDED", "w1", "small", "1"][..],
            &["MODIFIED", "w1", "large", "1"][..],
            &["DELETED", "w1", "large", "1"][..],
        ],
        "{}",
        output.stdout
    );
}
