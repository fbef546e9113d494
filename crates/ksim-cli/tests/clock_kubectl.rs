//! End-to-end: a cluster on a virtual clock (`ksim create cluster --clock
//! virtual --clock-start T --seed 7`), seen with the real kubectl and moved
//! with `ksim clock advance`: objects are created at the clock's time,
//! kubectl's AGE counts on it, `ksim clock` answers by `--name` and by
//! `--kubeconfig`, a real clock and a bad duration are refused with one
//! line, and the same seed gives the same generated names and uids.

use std::path::Path;
use std::process::Output;

use ksim_testutils::TestCluster;
use ksim_testutils::kubectl::{stdout_json, table_rows};

const START: &str = "2026-01-01T00:00:00Z";

const VIRTUAL: &[&str] = &["--clock", "virtual", "--clock-start", START, "--seed", "7"];

const API_ONLY: &[&str] = &["--disable", "kubelet,controllers,scheduler"];

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: clocked}
spec:
  containers: [{name: app, image: nginx}]
"#;

const GENERATED_POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {generateName: web-}
spec:
  containers: [{name: app, image: nginx}]
"#;

fn ksim_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ksim"))
}

fn virtual_cluster(extra: &[&str]) -> TestCluster {
    let mut args = VIRTUAL.to_vec();
    args.extend_from_slice(extra);
    TestCluster::start_with(ksim_binary(), "ksim", &args)
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `ksim <args>`, which must fail with one `error: ...` line; that line.
#[track_caller]
fn ksim_refused(cluster: &TestCluster, args: &[&str]) -> String {
    let output = cluster.ksim(args);
    assert_eq!(
        output.status.code(),
        Some(1),
        "ksim {args:?} did not fail\nstdout:\n{}\nstderr:\n{}",
        stdout(&output),
        stderr(&output)
    );
    let error = stderr(&output);
    assert_eq!(error.lines().count(), 1, "not one line: {error}");
    assert!(error.starts_with("error: "), "{error}");
    error.trim_end().to_string()
}

#[test]
fn objects_are_created_and_aged_on_the_virtual_clock() {
    let cluster = virtual_cluster(API_ONLY);
    cluster.kubectl_stdin(&["create", "-f", "-"], POD).success();
    let created = cluster.kubectl(&[
        "get",
        "pod",
        "clocked",
        "-o",
        "jsonpath={.metadata.creationTimestamp}",
    ]);
    assert_eq!(created.success().stdout, START);

    let shown = cluster.ksim_ok(&["clock", "--name", "ksim"]);
    assert!(
        shown.starts_with("2026-01-01T00:00:00Z (virtual clock, seed 7"),
        "{shown}"
    );
    let advanced = cluster.ksim_ok(&["clock", "advance", "10m"]);
    assert!(
        advanced.starts_with("2026-01-01T00:10:00Z (virtual clock"),
        "{advanced}"
    );

    let table = cluster.kubectl(&["get", "pod", "clocked"]);
    let header: Vec<&str> = table
        .success()
        .stdout
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let age = header
        .iter()
        .position(|c| *c == "AGE")
        .expect("an AGE column");
    let rows = table_rows(&table);
    assert_eq!(rows[0][0], "clocked");
    assert_eq!(rows[0][age], "10m");

    // The same clock through the kubeconfig's current context, as JSON, and
    // as kubectl reaches the raw path.
    let kubeconfig = cluster.kubeconfig().display().to_string();
    let shown: serde_json::Value = serde_json::from_str(&cluster.ksim_ok(&[
        "clock",
        "--kubeconfig",
        &kubeconfig,
        "-o",
        "json",
    ]))
    .expect("ksim clock -o json prints JSON");
    assert_eq!(shown["mode"], "virtual");
    assert_eq!(shown["now"], "2026-01-01T00:10:00Z");
    let raw = cluster.kubectl(&["get", "--raw", "/ksim/v1alpha1/clock"]);
    assert_eq!(stdout_json(raw.success())["now"], "2026-01-01T00:10:00Z");

    // A later pod is created at the later time.
    cluster
        .kubectl_stdin(&["create", "-f", "-"], &POD.replace("clocked", "later"))
        .success();
    let later = cluster.kubectl(&[
        "get",
        "pod",
        "later",
        "-o",
        "jsonpath={.metadata.creationTimestamp}",
    ]);
    assert_eq!(later.success().stdout, "2026-01-01T00:10:00Z");

    // kubectl can advance it too, through the raw path.
    let advanced = cluster.kubectl_stdin(
        &["create", "--raw", "/ksim/v1alpha1/clock/advance", "-f", "-"],
        r#"{"by": "1m"}"#,
    );
    assert_eq!(
        stdout_json(advanced.success())["now"],
        "2026-01-01T00:11:00Z"
    );
}

#[test]
fn a_bad_duration_is_refused_and_the_clock_stays() {
    let cluster = virtual_cluster(API_ONLY);
    let error = ksim_refused(&cluster, &["clock", "advance", "soon"]);
    assert_eq!(
        error,
        r#"error: by: Invalid value: "soon": time: invalid duration "soon""#
    );
    let error = ksim_refused(&cluster, &["clock", "advance", "10"]);
    assert!(error.contains("missing unit"), "{error}");
    assert!(
        cluster.ksim_ok(&["clock"]).starts_with(START),
        "the clock moved"
    );
}

#[test]
fn a_real_clock_is_shown_but_not_advanced() {
    let cluster = TestCluster::start_api_only(ksim_binary());
    let shown = cluster.ksim_ok(&["clock"]);
    assert!(shown.trim_end().ends_with("(real clock)"), "{shown}");
    let error = ksim_refused(&cluster, &["clock", "advance", "10m"]);
    assert_eq!(
        error,
        "error: the cluster's clock is real; only a virtual clock (--clock virtual) can be advanced"
    );
}

/// The names and uids of three pods created with generateName.
fn generated_pods(cluster: &TestCluster) -> Vec<(String, String)> {
    for _ in 0..3 {
        cluster
            .kubectl_stdin(&["create", "-f", "-"], GENERATED_POD)
            .success();
    }
    let list = cluster.kubectl(&["get", "pods", "-o", "json"]);
    let list = stdout_json(list.success());
    let mut pods: Vec<(String, String)> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|pod| {
            (
                pod["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                pod["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    pods.sort();
    pods
}

#[test]
fn the_same_seed_gives_the_same_generated_names_and_uids() {
    let first = generated_pods(&virtual_cluster(API_ONLY));
    assert_eq!(first.len(), 3);
    assert!(
        first.iter().all(|(name, _)| name.starts_with("web-")),
        "{first:?}"
    );
    let second = generated_pods(&virtual_cluster(API_ONLY));
    assert_eq!(first, second);
}

#[test]
fn the_same_seed_gives_the_same_deployment_pod_names() {
    let names = || {
        let cluster = virtual_cluster(&[]);
        cluster
            .kubectl(&[
                "create",
                "deployment",
                "web",
                "--image=nginx",
                "--replicas=3",
            ])
            .success();
        let listed = cluster.wait_for(
            &[
                "get",
                "pods",
                "-l",
                "app=web",
                "-o",
                "jsonpath={.items[*].metadata.name}",
            ],
            |out| out.split_whitespace().count() == 3,
        );
        let mut names: Vec<String> = listed.split_whitespace().map(str::to_string).collect();
        names.sort();
        // The whole cluster (controllers, scheduler, kubelet) settles
        // through an advance.
        let advanced = cluster.ksim_ok(&["clock", "advance", "5m"]);
        assert!(advanced.starts_with("2026-01-01T00:05:00Z"), "{advanced}");
        names
    };
    let first = names();
    assert!(first.iter().all(|n| n.starts_with("web-")), "{first:?}");
    assert_eq!(first, names());
}
