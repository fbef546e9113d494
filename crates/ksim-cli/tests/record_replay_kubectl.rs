//! End to end: `ksim record` follows a cluster made by `ksim create
//! cluster` while kubectl changes it; `ksim replay` re-applies the
//! recording into a fresh cluster (API server alone, so the replay is the
//! only writer), which then holds what the source held, pods bound to the
//! same nodes. A recorder that is killed leaves a file that replays up to
//! its last complete line.

use std::path::Path;

use ksim_testutils::{KsimEnv, TestCluster, fixtures, poll_until};

fn ksim_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ksim"))
}

const PODS: &[&str] = &[
    "get",
    "pods",
    "-o",
    "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.phase}{\"\\n\"}{end}",
];

fn pods(env: &KsimEnv, cluster: &str) -> Vec<String> {
    let stdout = env.kubectl_ok_in(cluster, PODS);
    let mut lines: Vec<String> = stdout.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

/// Polls `check` until it holds.
fn eventually(what: &str, check: impl Fn() -> bool) {
    poll_until(what, || check().then_some(()).ok_or_else(String::new));
}

#[test]
fn a_recording_replays_into_a_fresh_cluster() {
    let source = TestCluster::start_named(ksim_binary(), "source");
    let env = source.env();
    env.ksim_ok(&["scale", "node", "--replicas", "2", "--name", "source"]);
    let path = env.root().join("changes.jsonl");
    let path_str = path.to_str().expect("utf-8 path");
    let recorder = env.start_recorder(&["--name", "source"], &path);
    // The recorder has written the initial state (the nodes) before the changes start.
    recorder.wait_for_object("node-000001");
    source
        .kubectl(&[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=3",
        ])
        .success();
    source
        .kubectl(&["rollout", "status", "deploy/web", "--timeout=60s"])
        .success();
    source
        .kubectl(&["scale", "deploy/web", "--replicas=2"])
        .success();
    eventually("two pods are left", || pods(env, "source").len() == 2);
    let expected = pods(env, "source");
    // The last change (the pod's deletion) is in the file.
    eventually("the deletion is recorded", || {
        std::fs::read_to_string(&path).is_ok_and(|t| {
            t.lines()
                .any(|l| l.contains("\"type\":\"DELETED\"") && l.contains("\"kind\":\"Pod\""))
        })
    });
    let stdout = recorder.stop();
    assert!(stdout.starts_with("Recorded "), "{stdout}");
    let text = std::fs::read_to_string(&path).expect("the recording");
    assert!(
        text.starts_with("{\"ksimRecording\":\"v1\""),
        "a versioned header"
    );

    env.ksim_ok(&[
        "create",
        "cluster",
        "--name",
        "replica",
        "--disable",
        "kubelet,controllers,scheduler",
    ]);
    let replayed = env.ksim_ok(&[
        "replay", "--name", "replica", "--path", path_str, "--speed", "max",
    ]);
    assert!(replayed.starts_with("Replayed "), "{replayed}");
    assert_eq!(pods(env, "replica"), expected);
    let replicas = env.kubectl(&[
        "--context=ksim-replica",
        "get",
        "deploy",
        "web",
        "-o",
        "jsonpath={.spec.replicas} {.status.readyReplicas}",
    ]);
    assert_eq!(replicas.stdout, "2 2");
}

#[test]
fn a_killed_recorder_leaves_a_file_that_replays_to_its_last_complete_line() {
    let source = TestCluster::start_named(ksim_binary(), "source");
    let env = source.env();
    let path = env.root().join("changes.jsonl");
    let path_str = path.to_str().expect("utf-8 path");
    let recorder = env.start_recorder(&["--name", "source", "--kinds", "configmaps"], &path);
    eventually("the header is written", || {
        std::fs::read_to_string(&path).is_ok_and(|t| t.ends_with('\n'))
    });
    source
        .kubectl(&["create", "configmap", "settings", "--from-literal=a=b"])
        .success();
    recorder.wait_for_object("settings");
    recorder.kill();
    // What a kill in the middle of a write leaves: a cut last line.
    let mut text = std::fs::read_to_string(&path).expect("the recording");
    text.push_str("{\"t\":99,\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"v1\",\"ki");
    std::fs::write(&path, text).expect("written");

    env.ksim_ok(&[
        "create",
        "cluster",
        "--name",
        "replica",
        "--disable",
        "kubelet,controllers,scheduler",
    ]);
    env.ksim_ok(&[
        "replay", "--name", "replica", "--path", path_str, "--speed", "100",
    ]);
    let data = env.kubectl(&[
        "--context=ksim-replica",
        "get",
        "configmap",
        "settings",
        "-o",
        "jsonpath={.data.a}",
    ]);
    assert_eq!(data.stdout, "b");

    // A broken line before the last one is an error naming it.
    let broken = env.root().join("broken.jsonl");
    std::fs::write(&broken, "{\"ksimRecording\":\"v1\"}\nnot json\n{}\n").expect("written");
    let output = env.ksim(&[
        "replay",
        "--name",
        "replica",
        "--path",
        broken.to_str().expect("utf-8"),
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("error: ") && stderr.contains("broken.jsonl: line 2: "),
        "{stderr}"
    );
}

/// A Widget named `name` of size `size` in the default namespace.
fn widget(name: &str, size: i64) -> String {
    fixtures::widget(name, "default", size).to_string()
}

/// The recording's (type, name) of its Widget changes, in order.
fn widget_changes(path: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|c| c["object"]["kind"] == "Widget")
        .map(|c| {
            (
                c["type"].as_str().unwrap_or_default().to_string(),
                c["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

/// A kind whose CustomResourceDefinition is created while `ksim record`
/// runs is recorded from its first object, even one created and deleted at
/// once, right after the kind is served (a recorder polling discovery once
/// a second misses it), and replays. A second recorder, which finds the
/// definition there, stops watching the kind when the definition is
/// deleted, and follows it again when it is created again.
#[test]
fn a_kind_defined_while_recording_is_recorded_from_its_first_object_until_its_definition_goes() {
    let env = KsimEnv::new(ksim_binary());
    for name in ["source", "replica"] {
        env.ksim_ok(&[
            "create",
            "cluster",
            "--name",
            name,
            "--disable",
            "kubelet,controllers,scheduler",
        ]);
    }
    let source = |args: &[&str]| {
        let mut all = vec!["--context=ksim-source"];
        all.extend_from_slice(args);
        env.kubectl(&all).success();
    };
    let source_stdin = |args: &[&str], stdin: &str| {
        let mut all = vec!["--context=ksim-source"];
        all.extend_from_slice(args);
        env.kubectl_stdin(&all, stdin).success();
    };
    let defined = |round: &str| {
        source_stdin(&["apply", "-f", "-"], &fixtures::widget_crd_manifest());
        source(&[
            "wait",
            "--for=condition=Established",
            "crd/widgets.example.com",
            "--timeout=60s",
        ]);
        poll_until(&format!("widgets served ({round})"), || {
            let listed = env.kubectl(&["--context=ksim-source", "get", "widgets"]);
            (listed.status == 0).then_some(()).ok_or(listed.stderr)
        });
    };

    let path = env.root().join("first.jsonl");
    let recorder = env.start_recorder(&["--name", "source"], &path);
    source(&["create", "configmap", "marker"]);
    recorder.wait_for_object("marker");
    // Created as soon as the definition is served and deleted at once
    // (raw requests: no discovery on the way).
    source_stdin(&["apply", "-f", "-"], &fixtures::widget_crd_manifest());
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    poll_until("the brief widget is created", || {
        let created = env.kubectl_stdin(
            &[
                "--context=ksim-source",
                "create",
                "--raw",
                widgets,
                "-f",
                "-",
            ],
            r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"brief","namespace":"default"},"spec":{"size":1}}"#,
        );
        (created.status == 0).then_some(()).ok_or(created.stderr)
    });
    source(&["delete", "--raw", &format!("{widgets}/brief")]);
    source_stdin(&["create", "-f", "-"], &widget("kept", 2));
    eventually("the kept widget is recorded", || {
        widget_changes(&path).contains(&("ADDED".into(), "kept".into()))
    });
    assert_eq!(
        widget_changes(&path),
        [
            ("ADDED".to_string(), "brief".to_string()),
            ("DELETED".to_string(), "brief".to_string()),
            ("ADDED".to_string(), "kept".to_string()),
        ]
    );
    recorder.stop();
    let output = env.ksim(&[
        "replay",
        "--name",
        "replica",
        "--path",
        path.to_str().expect("utf-8 path"),
        "--speed",
        "max",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("skipped"), "{stderr}");
    let widgets = env.kubectl(&[
        "--context=ksim-replica",
        "get",
        "widgets",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}={.spec.size} {end}",
    ]);
    widgets.success();
    assert_eq!(widgets.stdout.trim_end(), "kept=2");

    let path = env.root().join("second.jsonl");
    let recorder = env.start_recorder(&["--name", "source"], &path);
    eventually("the second recorder lists the kept widget", || {
        widget_changes(&path) == [("ADDED".to_string(), "kept".to_string())]
    });
    // The definition goes (its widgets with it): the kind is no longer watched.
    source(&["delete", "crd", "widgets.example.com"]);
    eventually("the recorder drops the kind", || {
        recorder
            .log()
            .lines()
            .any(|l| l.contains("widgets.example.com") && l.contains("no longer recorded"))
    });
    // Defined again: followed again from its first object.
    defined("second");
    source_stdin(&["create", "-f", "-"], &widget("again", 3));
    eventually("the widget of the second definition is recorded", || {
        widget_changes(&path).contains(&("ADDED".into(), "again".into()))
    });
    recorder.stop();
}

/// A recording in which a definition is deleted and created again while
/// its custom resources change replays in order: the first definition's
/// widget goes with it, the second one's stays.
#[test]
fn a_definition_deleted_and_created_again_replays_its_custom_resources_in_order() {
    let cluster = TestCluster::start_api_only(ksim_binary());
    replay_max(
        &cluster,
        "widgets.jsonl",
        &fixtures::widget_crd_created_again(),
        8,
    );
    assert_eq!(widget_sizes(&cluster), "second=4");
}

/// A recording's initial state may list custom resources before their
/// definition: they wait for it to be served without queueing behind it.
#[test]
fn custom_resources_listed_before_their_definition_replay() {
    let cluster = TestCluster::start_api_only(ksim_binary());
    let definition = fixtures::with_uid(fixtures::widget_crd(), "crd-1");
    let widget = fixtures::with_uid(fixtures::widget("listed", "default", 5), "uid-listed");
    let text = fixtures::recording(&[(0, "ADDED", widget), (0, "ADDED", definition)]);
    replay_max(&cluster, "listed.jsonl", &text, 2);
    assert_eq!(widget_sizes(&cluster), "listed=5");
}

/// Custom resources recorded before their definition after the initial
/// state (a recorder's watch of their kind may tell them before its watch
/// of definitions tells the definition): each waits for the definition to
/// be served on a worker other than the definition's, so none is skipped.
/// (A hundred of them: some hash to the definition's worker.)
#[test]
fn custom_resources_recorded_before_their_definition_replay() {
    let cluster = TestCluster::start_api_only(ksim_binary());
    let mut changes: Vec<(i64, &str, serde_json::Value)> = (0..100)
        .map(|i| {
            let name = format!("early-{i}");
            let widget = fixtures::with_uid(fixtures::widget(&name, "default", 1), &name);
            (1, "ADDED", widget)
        })
        .collect();
    changes.push((
        2,
        "ADDED",
        fixtures::with_uid(fixtures::widget_crd(), "crd-1"),
    ));
    replay_max(&cluster, "early.jsonl", &fixtures::recording(&changes), 101);
    let widgets = cluster.kubectl(&["get", "widgets", "-o", "name"]);
    widgets.success();
    assert_eq!(widgets.stdout.lines().count(), 100, "{}", widgets.stdout);
}

/// Replays `text` (written to `file`) into `cluster` as fast as possible:
/// it succeeds with all `changes` applied and none skipped.
fn replay_max(cluster: &TestCluster, file: &str, text: &str, changes: usize) {
    let env = cluster.env();
    let path = env.write_file(file, text);
    let output = env.ksim(&[
        "replay",
        "--name",
        cluster.name(),
        "--path",
        path.to_str().expect("utf-8"),
        "--speed",
        "max",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.starts_with(&format!("Replayed {changes} of {changes} changes")),
        "{stdout}{stderr}"
    );
    assert!(!stderr.contains("skipped"), "{stderr}");
}

/// `name=size` of each widget of `cluster`.
fn widget_sizes(cluster: &TestCluster) -> String {
    let widgets = cluster.kubectl(&[
        "get",
        "widgets",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}={.spec.size} {end}",
    ]);
    widgets.success();
    widgets.stdout.trim_end().to_string()
}
