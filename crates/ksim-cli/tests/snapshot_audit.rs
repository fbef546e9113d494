//! End to end, what issue 17 names beyond `snapshot_kubectl.rs` and
//! `record_replay_kubectl.rs`, through the `ksim` CLI and the real kubectl
//! against clusters made by `ksim create cluster`, reached through their
//! kubeconfig over HTTP:
//!
//! - a save holds every kind (namespaces with their labels, priority
//!   classes, config maps, CRDs and their custom resources, pods on their
//!   nodes) and events only when asked, and a cluster created from it holds
//!   them again;
//! - a restore makes no controller create, delete or roll anything: no
//!   ReplicaSet or Deployment event is recorded once the controllers have
//!   seen the restored objects, and pods started after it get IPs no
//!   restored pod shows;
//! - `export --context` reads the context named, not the current one; `-n`
//!   and `-l` narrow namespaced objects; service-account tokens never go,
//!   secret data only with `--include-secret-data`;
//! - a source that answers 401 or 403 fails with the API's message, on one
//!   line, and writes nothing;
//! - `record` and `replay` through a kubeconfig alone (no `--name`), each
//!   object's changes replayed in their recorded order at a paced speed;
//! - a recorder killed with SIGKILL while it writes leaves a file whose
//!   complete lines replay, and exactly those;
//! - a virtual cluster is recorded and replayed on its own clock (`--speed`
//!   1, 2 and max move it by the recorded gaps, half of them, not at all);
//! - `--replace` overwrites a running Deployment in place (nothing rolls or
//!   is re-created) and re-created pods keep their saved IPs while the
//!   kubelet runs (the "IP swap");
//! - a recorded CRD and its custom resources replay; `replay --strict`
//!   refuses unserved kinds, naming the line, else they are skipped with a
//!   warning.

use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use ksim_testutils::{KsimEnv, TestCluster, fixtures, poll_until};
use serde_json::Value;

fn ksim_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ksim"))
}

fn eventually(what: &str, check: impl Fn() -> bool) {
    poll_until(what, || check().then_some(()).ok_or_else(String::new));
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// A kubeconfig holding only cluster `name`'s context (`ksim get kubeconfig`).
fn own_kubeconfig(env: &KsimEnv, name: &str) -> PathBuf {
    let text = env.ksim_ok(&["get", "kubeconfig", "--name", name]);
    env.write_file(&format!("{name}.kubeconfig"), &text)
}

const KINDS: &str = "\
apiVersion: v1
kind: Namespace
metadata:
  name: team
  labels:
    owner: platform
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: high
value: 1000
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: team
data:
  mode: fast
---
apiVersion: v1
kind: Pod
metadata:
  name: solo
  namespace: team
  labels:
    app: solo
spec:
  priorityClassName: high
  containers:
  - name: c
    image: nginx
";

#[test]
fn a_save_holds_every_kind_and_events_only_when_asked() {
    let source = TestCluster::start_named(ksim_binary(), "source");
    let env = source.env();
    env.ksim_ok(&["scale", "node", "--replicas", "2", "--name", "source"]);
    source.kubectl_stdin(&["apply", "-f", "-"], KINDS).success();
    source.apply_widget_crd();
    source
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &fixtures::widget("w", "team", 3).to_string(),
        )
        .success();
    let node = env.wait_for_in(
        "source",
        &[
            "get",
            "pod",
            "solo",
            "-n",
            "team",
            "-o",
            "jsonpath={.spec.nodeName} {.status.phase}",
        ],
        |out| out.ends_with(" Running"),
    );
    // The scheduler's event about the pod.
    env.wait_for_in(
        "source",
        &["get", "events", "-n", "team", "-o", "name"],
        |out| !out.is_empty(),
    );

    let plain = save(env, "source", "plain.yaml");
    let text = std::fs::read_to_string(&plain).expect("the snapshot");
    assert!(
        !text.contains("\"kind\":\"Event\""),
        "no events unless asked"
    );
    for kind in [
        "\"kind\":\"Namespace\"",
        "\"kind\":\"PriorityClass\"",
        "\"kind\":\"ConfigMap\"",
        "\"kind\":\"CustomResourceDefinition\"",
        "\"kind\":\"Widget\"",
        "\"kind\":\"Node\"",
        "\"kind\":\"Pod\"",
    ] {
        assert!(text.contains(kind), "{kind} is saved");
    }
    assert!(!text.contains("\"resourceVersion\""));
    assert!(!text.contains("managedFields"));

    let with_events = env.root().join("events.yaml");
    env.ksim_ok(&[
        "snapshot",
        "save",
        "--name",
        "source",
        "--events",
        "--path",
        path_str(&with_events),
    ]);
    let text = std::fs::read_to_string(&with_events).expect("the snapshot");
    assert!(text.contains("\"kind\":\"Event\""), "events when asked");

    env.ksim_ok(&[
        "create",
        "cluster",
        "--name",
        "copy",
        "--snapshot",
        path_str(&plain),
    ]);
    assert_eq!(
        env.kubectl_ok_in(
            "copy",
            &[
                "get",
                "ns",
                "team",
                "-o",
                "jsonpath={.metadata.labels.owner}"
            ]
        ),
        "platform"
    );
    assert_eq!(
        env.kubectl_ok_in(
            "copy",
            &["get", "priorityclass", "high", "-o", "jsonpath={.value}"]
        ),
        "1000"
    );
    assert_eq!(
        env.kubectl_ok_in(
            "copy",
            &[
                "get",
                "cm",
                "settings",
                "-n",
                "team",
                "-o",
                "jsonpath={.data.mode}"
            ]
        ),
        "fast"
    );
    assert_eq!(
        env.kubectl_ok_in(
            "copy",
            &[
                "get",
                "widgets",
                "w",
                "-n",
                "team",
                "-o",
                "jsonpath={.spec.size}"
            ]
        ),
        "3"
    );
    assert_eq!(
        env.kubectl_ok_in(
            "copy",
            &[
                "get",
                "pod",
                "solo",
                "-n",
                "team",
                "-o",
                "jsonpath={.spec.nodeName} {.status.phase} {.spec.priority}"
            ]
        ),
        format!("{node} 1000")
    );
}

const WORKLOAD: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 6
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
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
spec:
  maxUnavailable: 1
  selector:
    matchLabels:
      app: web
";

/// name podIP app-label phase, one pod a line, sorted.
const PODS: &[&str] = &[
    "get",
    "pods",
    "-o",
    "jsonpath={range .items[*]}{.metadata.name} {.status.podIP} {.metadata.labels.app} {.status.phase}{\"\\n\"}{end}",
];

fn sorted(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

/// The reasons and counts of the events about `kind` objects in the
/// default namespace (repeats are counted in one event).
fn event_reasons(env: &KsimEnv, cluster: &str, kind: &str) -> Vec<String> {
    let selector = format!("involvedObject.kind={kind}");
    env.kubectl_ok_in(
        cluster,
        &[
            "get",
            "events",
            "--field-selector",
            &selector,
            "-o",
            "jsonpath={range .items[*]}{.reason} {.count}{\"\\n\"}{end}",
        ],
    )
    .lines()
    .map(str::to_string)
    .collect()
}

/// Restored pods keep their IPs, the controllers adopt them without an
/// event (no pod created or deleted, no ReplicaSet scaled), and pods created
/// afterwards get IPs none of the restored pods shows.
fn check_quiet_copy(env: &KsimEnv, copy: &str, pods: &[String], budget: &str) {
    assert_eq!(sorted(&env.kubectl_ok_in(copy, PODS)), pods);
    // The controllers have seen the restored objects: the Deployment's
    // status is observed and the budget counts the pods.
    wait_for_settled_web(env, copy, budget);
    assert_eq!(event_reasons(env, copy, "ReplicaSet"), Vec::<String>::new());
    assert_eq!(event_reasons(env, copy, "Deployment"), Vec::<String>::new());
    assert_eq!(
        sorted(&env.kubectl_ok_in(copy, PODS)),
        pods,
        "the same pods"
    );

    env.kubectl_ok_in(copy, &["scale", "deploy/web", "--replicas=12"]);
    let after = env.wait_for_in(copy, PODS, |out| {
        out.lines()
            .filter(|l| {
                l.ends_with(" Running") && l.split(' ').nth(1).is_some_and(|ip| !ip.is_empty())
            })
            .count()
            == 12
    });
    let after = sorted(&after);
    for pod in pods {
        assert!(after.contains(pod), "{pod} keeps its IP: {after:?}");
    }
    let ips: HashSet<&str> = after.iter().filter_map(|l| l.split(' ').nth(1)).collect();
    assert_eq!(ips.len(), 12, "every pod shows its own IP: {after:?}");
}

/// Saves cluster `cluster` to `file` in the environment's root; its path.
fn save(env: &KsimEnv, cluster: &str, file: &str) -> PathBuf {
    let path = env.root().join(file);
    env.ksim_ok(&[
        "snapshot",
        "save",
        "--name",
        cluster,
        "--path",
        path_str(&path),
    ]);
    path
}

/// `ksim snapshot restore --name <cluster> --path <path> <flags>`; its output.
fn restore(env: &KsimEnv, cluster: &str, path: &Path, flags: &[&str]) -> String {
    let mut args = vec![
        "snapshot",
        "restore",
        "--name",
        cluster,
        "--path",
        path_str(path),
    ];
    args.extend_from_slice(flags);
    env.ksim_ok(&args)
}

/// Waits until the budget `web` of `cluster` reports `budget` (current and
/// desired healthy, disruptions allowed, expected pods); returns it.
fn wait_for_budget(env: &KsimEnv, cluster: &str, budget: &str) -> String {
    env.wait_for_in(
        cluster,
        &[
            "get",
            "pdb",
            "web",
            "-o",
            "jsonpath={.status.currentHealthy} {.status.desiredHealthy} {.status.disruptionsAllowed} {.status.expectedPods}",
        ],
        |out| out == budget,
    )
}

/// Waits until the Deployment `web` of `cluster` is observed with its six
/// replicas updated and ready, and its budget reports `budget`.
fn wait_for_settled_web(env: &KsimEnv, cluster: &str, budget: &str) {
    env.wait_for_in(
        cluster,
        &[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.metadata.generation} {.status.observedGeneration} {.status.updatedReplicas} {.status.readyReplicas}",
        ],
        |out| {
            let f: Vec<&str> = out.split(' ').collect();
            f.len() == 4 && f[0] == f[1] && f[2] == "6" && f[3] == "6"
        },
    );
    wait_for_budget(env, cluster, budget);
}

fn quiet_source() -> (TestCluster, Vec<String>, String) {
    let source = TestCluster::start_named(ksim_binary(), "source");
    source
        .env()
        .ksim_ok(&["scale", "node", "--replicas", "2", "--name", "source"]);
    source
        .kubectl_stdin(&["apply", "-f", "-"], WORKLOAD)
        .success();
    source
        .kubectl(&["rollout", "status", "deploy/web", "--timeout=60s"])
        .success();
    let pods = source.env().wait_for_in("source", PODS, |out| {
        out.lines().count() == 6 && out.lines().all(|l| l.ends_with(" Running"))
    });
    let budget = wait_for_budget(source.env(), "source", "6 5 1 6");
    (source, sorted(&pods), budget)
}

#[test]
fn a_cluster_created_from_a_snapshot_adopts_quietly_and_hands_out_new_ips() {
    let (source, pods, budget) = quiet_source();
    let env = source.env();
    let path = save(env, "source", "snapshot.yaml");
    env.ksim_ok(&[
        "create",
        "cluster",
        "--name",
        "copy",
        "--snapshot",
        path_str(&path),
    ]);
    check_quiet_copy(env, "copy", &pods, &budget);
}

#[test]
fn a_restore_into_a_running_cluster_adopts_quietly_and_hands_out_new_ips() {
    let (source, pods, budget) = quiet_source();
    let env = source.env();
    let path = save(env, "source", "snapshot.yaml");
    env.ksim_ok(&["create", "cluster", "--name", "target"]);
    env.ksim_ok(&["scale", "node", "--replicas", "0", "--name", "target"]);
    restore(env, "target", &path, &[]);
    check_quiet_copy(env, "target", &pods, &budget);
}

const NARROWED: &str = "\
apiVersion: v1
kind: Namespace
metadata:
  name: a
  labels:
    team: web
---
apiVersion: v1
kind: Namespace
metadata:
  name: b
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-settings
  namespace: a
  labels:
    tier: web
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: db-settings
  namespace: a
  labels:
    tier: db
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: other-namespace
  namespace: b
  labels:
    tier: web
---
apiVersion: v1
kind: Secret
metadata:
  name: web-password
  namespace: a
  labels:
    tier: web
stringData:
  password: hunter2
---
apiVersion: v1
kind: Secret
metadata:
  name: web-token
  namespace: a
  labels:
    tier: web
  annotations:
    kubernetes.io/service-account.name: default
type: kubernetes.io/service-account-token
";

/// The `kind namespace/name` of every object in an export.
fn exported(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("the export");
    let mut names: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| {
            let o: Value = serde_json::from_str(l).expect("one object a line");
            format!(
                "{} {}/{}",
                o["kind"].as_str().unwrap_or_default(),
                o["metadata"]["namespace"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect();
    names.sort();
    names
}

#[test]
fn export_reads_the_context_named_narrowed_by_namespace_and_selector() {
    let source = TestCluster::start_named(ksim_binary(), "source");
    let env = source.env();
    env.ksim_ok(&["scale", "node", "--replicas", "1", "--name", "source"]);
    env.kubectl_stdin_in("source", &["apply", "-f", "-"], NARROWED)
        .success();
    // stringData is stored as data, as kube-apiserver does.
    let secret = env.kubectl_ok_in(
        "source",
        &["get", "secret", "web-password", "-n", "a", "-o", "json"],
    );
    assert!(
        secret.contains("\"password\": \"aHVudGVyMg==\""),
        "{secret}"
    );
    assert!(!secret.contains("\"stringData\""), "{secret}");
    env.kubectl_ok_in("source", &["label", "node", "node-000000", "zone=z1"]);
    env.kubectl_ok_in(
        "source",
        &["taint", "node", "node-000000", "dedicated=db:NoSchedule"],
    );
    // Another cluster, now the kubeconfig's current context.
    env.ksim_ok(&["create", "cluster", "--name", "other"]);
    env.kubectl_ok_in("other", &["create", "configmap", "only-in-other"]);
    let current = env.kubectl(&["config", "current-context"]);
    assert_eq!(current.stdout.trim(), "ksim-other");

    let path = env.root().join("export.yaml");
    let kubeconfig = path_str(env.kubeconfig());
    let said = env.ksim_ok(&[
        "snapshot",
        "export",
        "--kubeconfig",
        kubeconfig,
        "--context",
        "ksim-source",
        "-n",
        "a",
        "-l",
        "tier=web",
        "--chunk-size",
        "1",
        "--path",
        path_str(&path),
    ]);
    assert!(said.starts_with("Exported "), "{said}");
    let objects = exported(&path);
    let namespaced: Vec<&String> = objects.iter().filter(|o| !o.contains(" /")).collect();
    assert_eq!(
        namespaced,
        ["ConfigMap a/web-settings", "Secret a/web-password"],
        "only namespace a's objects labelled tier=web, no token: {objects:?}"
    );
    assert!(
        objects.contains(&"Node /node-000000".to_string()),
        "cluster-scoped objects are all kept: {objects:?}"
    );
    let text = std::fs::read_to_string(&path).expect("the export");
    assert!(
        !text.contains("aHVudGVyMg") && !text.contains("hunter2"),
        "no secret data"
    );
    let object = |kind: &str, name: &str| -> Value {
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{kind} {name} is exported"))
    };
    assert_eq!(
        object("Namespace", "a")["metadata"]["labels"]["team"],
        "web"
    );
    let node = object("Node", "node-000000");
    assert_eq!(
        node["metadata"]["annotations"]["kwok.x-k8s.io/node"],
        "fake"
    );
    assert_eq!(node["metadata"]["labels"]["zone"], "z1");
    assert_eq!(node["spec"]["taints"][0]["key"], "dedicated", "{node}");
    for field in ["capacity", "allocatable", "conditions"] {
        assert!(
            node["status"][field].is_object() || node["status"][field].is_array(),
            "{field}: {node}"
        );
    }

    // The current context (the other cluster) is read when none is named.
    let current = env.root().join("current.yaml");
    env.ksim_ok(&[
        "snapshot",
        "export",
        "--kubeconfig",
        kubeconfig,
        "--path",
        path_str(&current),
    ]);
    let objects = exported(&current);
    assert!(
        objects.contains(&"ConfigMap default/only-in-other".to_string()),
        "{objects:?}"
    );
    assert!(!objects.iter().any(|o| o.contains("web-settings")));

    // Secret data only when asked; tokens never.
    let with_data = env.root().join("with-data.yaml");
    env.ksim_ok(&[
        "snapshot",
        "export",
        "--kubeconfig",
        kubeconfig,
        "--context",
        "ksim-source",
        "-n",
        "a",
        "--include-secret-data",
        "--path",
        path_str(&with_data),
    ]);
    let text = std::fs::read_to_string(&with_data).expect("the export");
    assert!(text.contains("aHVudGVyMg"), "the secret's data when asked");
    assert!(!text.contains("web-token"), "no service-account token");
    assert!(!text.contains("managedFields"));
}

/// A server answering every request with `code` and a Status whose message
/// is `message`, as kube-apiserver does to a client it does not admit.
fn refusing_server(code: u16, reason: &str, message: &str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let address = listener.local_addr().expect("bound");
    let body = serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code})
    .to_string();
    let phrase = if code == 401 {
        "Unauthorized"
    } else {
        "Forbidden"
    };
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut buffer = [0u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buffer[..n]),
                }
            }
            let response = format!(
                "HTTP/1.1 {code} {phrase}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: prod\n  cluster:\n    server: http://{address}\ncontexts:\n- name: prod\n  context:\n    cluster: prod\n    user: u\nusers:\n- name: u\n  user:\n    token: not-a-valid-token\ncurrent-context: prod\n"
    );
    kubeconfig
}

#[test]
fn a_source_that_refuses_fails_with_the_apis_message() {
    let env = KsimEnv::new(ksim_binary());
    // A rate that is no rate is refused before anything is read.
    for qps in ["nan", "-1", "inf"] {
        let flag = format!("--qps={qps}");
        let output = env.ksim(&[
            "snapshot",
            "export",
            "--kubeconfig",
            "unused",
            &flag,
            "--path",
            "unused.yaml",
        ]);
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.starts_with(&format!("error: invalid value '{qps}' for '--qps <QPS>'")),
            "{stderr}"
        );
    }
    for (code, reason, message) in [
        (401, "Unauthorized", "Unauthorized"),
        (
            403,
            "Forbidden",
            "forbidden: User \"system:anonymous\" cannot get path \"/api\"",
        ),
    ] {
        let kubeconfig = env.write_file(
            &format!("refusing-{code}.kubeconfig"),
            &refusing_server(code, reason, message),
        );
        let kubeconfig = path_str(&kubeconfig);
        let never = env.root().join("never.yaml");
        let error = env.ksim_err(&[
            "snapshot",
            "export",
            "--kubeconfig",
            kubeconfig,
            "--path",
            path_str(&never),
        ]);
        assert!(
            error.starts_with("error: cannot export the cluster: ") && error.contains(message),
            "{code}: {error}"
        );
        assert_eq!(error.trim_end().lines().count(), 1, "{error}");
        assert!(!never.exists(), "nothing written");

        let recording = env.root().join("never.jsonl");
        let error = env.ksim_err(&[
            "record",
            "--kubeconfig",
            kubeconfig,
            "--path",
            path_str(&recording),
        ]);
        assert!(
            error.starts_with("error: ") && error.contains(message),
            "{code}: {error}"
        );
        assert_eq!(error.trim_end().lines().count(), 1, "{error}");

        let replay = env.write_file(
            "one.jsonl",
            "{\"ksimRecording\":\"v1\",\"startTime\":\"2026-01-01T00:00:00Z\"}\n{\"t\":0,\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\",\"namespace\":\"default\"}}}\n",
        );
        let error = env.ksim_err(&[
            "replay",
            "--kubeconfig",
            kubeconfig,
            "--path",
            path_str(&replay),
        ]);
        assert!(
            error.starts_with("error: ") && error.contains(message),
            "{code}: {error}"
        );
        assert_eq!(error.trim_end().lines().count(), 1, "{error}");
    }
}

/// The changes of a recording to objects named `prefix*`: per object, its
/// (type, data.v) in the recorded order.
fn changes_by_object(path: &Path, prefix: &str) -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut changes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines().skip(1) {
        let Ok(change) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let name = change["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or_default();
        if name.starts_with(prefix) {
            changes.entry(name.to_string()).or_default().push(format!(
                "{} {}",
                change["type"].as_str().unwrap_or_default(),
                change["object"]["data"]["v"].as_str().unwrap_or_default()
            ));
        }
    }
    changes
}

#[test]
fn record_and_replay_through_a_kubeconfig_keep_each_objects_order() {
    let source = TestCluster::start_named(ksim_binary(), "source");
    let env = source.env();
    let source_kubeconfig = own_kubeconfig(env, "source");
    let recording = env.root().join("changes.jsonl");
    let recorder = env.start_recorder(
        &[
            "--kubeconfig",
            path_str(&source_kubeconfig),
            "--kinds",
            "configmaps",
        ],
        &recording,
    );
    env.kubectl_ok_in("source", &["create", "configmap", "marker"]);
    recorder.wait_for_object("marker");
    env.kubectl_ok_in(
        "source",
        &["create", "configmap", "step-settings", "--from-literal=v=1"],
    );
    for v in 2..=4 {
        env.kubectl_ok_in(
            "source",
            &[
                "patch",
                "configmap",
                "step-settings",
                "--type=merge",
                "-p",
                &format!("{{\"data\":{{\"v\":\"{v}\"}}}}"),
            ],
        );
    }
    env.kubectl_ok_in(
        "source",
        &["create", "configmap", "step-temp", "--from-literal=v=t"],
    );
    env.kubectl_ok_in("source", &["delete", "configmap", "step-temp"]);
    eventually("the deletion is recorded", || {
        changes_by_object(&recording, "step-")
            .get("step-temp")
            .is_some_and(|c| c.len() == 2)
    });
    recorder.stop();
    let recorded = changes_by_object(&recording, "step-");
    assert_eq!(
        recorded["step-settings"],
        ["ADDED 1", "MODIFIED 2", "MODIFIED 3", "MODIFIED 4"]
    );
    assert_eq!(recorded["step-temp"], ["ADDED t", "DELETED t"]);

    // The replica is followed by a second recorder while the replay runs.
    env.ksim_ok(&[
        "create",
        "cluster",
        "--name",
        "replica",
        "--disable",
        "kubelet,controllers,scheduler",
    ]);
    let replica_kubeconfig = own_kubeconfig(env, "replica");
    let followed = env.root().join("replica.jsonl");
    let follower = env.start_recorder(&["--name", "replica", "--kinds", "configmaps"], &followed);
    env.kubectl_ok_in("replica", &["create", "configmap", "replica-marker"]);
    follower.wait_for_object("replica-marker");
    let replayed = env.ksim_ok(&[
        "replay",
        "--kubeconfig",
        path_str(&replica_kubeconfig),
        "--path",
        path_str(&recording),
        "--speed",
        "20",
    ]);
    assert!(replayed.starts_with("Replayed "), "{replayed}");
    eventually("the replay's last change is followed", || {
        changes_by_object(&followed, "step-")
            .get("step-temp")
            .is_some_and(|c| c.len() == 2)
    });
    follower.stop();
    assert_eq!(changes_by_object(&followed, "step-"), recorded);
}

#[test]
fn a_recorder_killed_while_writing_leaves_its_complete_lines_to_replay() {
    let source = TestCluster::start_named(ksim_binary(), "source");
    let env = source.env();
    let recording = env.root().join("changes.jsonl");
    let recorder = env.start_recorder(&["--name", "source", "--kinds", "configmaps"], &recording);
    env.kubectl_ok_in("source", &["create", "configmap", "marker"]);
    recorder.wait_for_object("marker");
    // Many large config maps at once: the recorder is writing when killed.
    let filler = "x".repeat(20_000);
    let manifest: String = (0..150)
        .map(|i| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: load-{i:03}\n  namespace: default\ndata:\n  filler: {filler}\n---\n"
            )
        })
        .collect();
    let mut apply = std::process::Command::new("kubectl")
        .env("KUBECONFIG", env.kubeconfig())
        .env("HOME", env.home())
        .args(["--context=ksim-source", "apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl starts");
    apply
        .stdin
        .take()
        .expect("piped")
        .write_all(manifest.as_bytes())
        .expect("written");
    eventually("some of the load is recorded", || {
        std::fs::read_to_string(&recording)
            .is_ok_and(|t| t.matches("\"name\":\"load-").count() >= 20)
    });
    recorder.kill();
    assert!(apply.wait().expect("kubectl ends").success());

    let text = std::fs::read_to_string(&recording).expect("the recording");
    // What the file holds whole: the lines that end with a newline.
    let complete: HashSet<String> = text
        .split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|c| c["object"]["metadata"]["name"].as_str().map(str::to_string))
        .filter(|n| n.starts_with("load-"))
        .collect();
    assert!(!complete.is_empty());

    env.ksim_ok(&[
        "create",
        "cluster",
        "--name",
        "replica",
        "--disable",
        "kubelet,controllers,scheduler",
    ]);
    env.ksim_ok(&[
        "replay",
        "--name",
        "replica",
        "--path",
        path_str(&recording),
        "--speed",
        "max",
    ]);
    let replayed: HashSet<String> = env
        .kubectl_ok_in(
            "replica",
            &[
                "get",
                "configmaps",
                "-o",
                "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}",
            ],
        )
        .lines()
        .filter(|n| n.starts_with("load-"))
        .map(str::to_string)
        .collect();
    assert_eq!(replayed, complete, "exactly the complete lines replay");
}

/// `ksim create cluster --name <name>` on a virtual clock starting at
/// 2026-01-01T00:00:00Z, API server alone.
fn virtual_cluster(env: &KsimEnv, name: &str) {
    env.ksim_ok(&[
        "create",
        "cluster",
        "--name",
        name,
        "--clock",
        "virtual",
        "--clock-start",
        "2026-01-01T00:00:00Z",
        "--disable",
        "kubelet,controllers,scheduler",
    ]);
}

/// The `t` of the recorded changes to objects named `prefix*`, by `type name`.
fn recorded_times(path: &Path, prefix: &str) -> BTreeMap<String, i64> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .skip(1)
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|change| {
            let name = change["object"]["metadata"]["name"].as_str()?;
            name.starts_with(prefix).then(|| {
                (
                    format!("{} {name}", change["type"].as_str().unwrap_or_default()),
                    change["t"].as_i64().unwrap_or(-1),
                )
            })
        })
        .collect()
}

#[test]
fn a_virtual_cluster_is_recorded_and_replayed_on_its_own_clock() {
    let env = KsimEnv::new(ksim_binary());
    virtual_cluster(&env, "source");
    let recording = env.root().join("changes.jsonl");
    let recorder = env.start_recorder(&["--name", "source", "--kinds", "configmaps"], &recording);
    env.kubectl_ok_in(
        "source",
        &["create", "configmap", "paced-first", "--from-literal=v=1"],
    );
    eventually("the first change is recorded", || {
        recorded_times(&recording, "paced-").contains_key("ADDED paced-first")
    });
    env.ksim_ok(&["clock", "--name", "source", "advance", "90s"]);
    env.kubectl_ok_in("source", &["create", "configmap", "paced-second"]);
    eventually("the second change is recorded", || {
        recorded_times(&recording, "paced-").contains_key("ADDED paced-second")
    });
    env.ksim_ok(&["clock", "--name", "source", "advance", "30s"]);
    env.kubectl_ok_in(
        "source",
        &[
            "patch",
            "configmap",
            "paced-first",
            "--type=merge",
            "-p",
            "{\"data\":{\"v\":\"2\"}}",
        ],
    );
    eventually("the third change is recorded", || {
        recorded_times(&recording, "paced-").contains_key("MODIFIED paced-first")
    });
    recorder.stop();
    let text = std::fs::read_to_string(&recording).expect("the recording");
    assert!(
        text.starts_with("{\"ksimRecording\":\"v1\",\"startTime\":\"2026-01-01T00:00:00"),
        "the header names the cluster's time: {text}"
    );
    // Times on the cluster's clock, which moved only when advanced.
    assert_eq!(
        recorded_times(&recording, "paced-"),
        BTreeMap::from([
            ("ADDED paced-first".to_string(), 0),
            ("ADDED paced-second".to_string(), 90_000_000_000),
            ("MODIFIED paced-first".to_string(), 120_000_000_000),
        ])
    );

    // Replayed twice as fast into another virtual cluster: its clock moves
    // 45 s between the first two changes and 60 s in all.
    virtual_cluster(&env, "replica");
    let replayed = env.ksim_ok(&[
        "replay",
        "--name",
        "replica",
        "--path",
        path_str(&recording),
        "--speed",
        "2",
    ]);
    assert!(replayed.starts_with("Replayed "), "{replayed}");
    let created = |name: &str| {
        env.kubectl_ok_in(
            "replica",
            &[
                "get",
                "configmap",
                name,
                "-o",
                "jsonpath={.metadata.creationTimestamp} {.data.v}",
            ],
        )
    };
    assert_eq!(created("paced-first"), "2026-01-01T00:00:00Z 2");
    assert_eq!(created("paced-second"), "2026-01-01T00:00:45Z ");
    let clock = env.ksim_ok(&["clock", "--name", "replica"]);
    assert!(
        clock.starts_with("2026-01-01T00:01:00Z (virtual clock"),
        "{clock}"
    );

    // At the recorded pace: 90 s, then 120 s in all.
    virtual_cluster(&env, "paced");
    env.ksim_ok(&[
        "replay",
        "--name",
        "paced",
        "--path",
        path_str(&recording),
        "--speed",
        "1",
    ]);
    assert_eq!(
        env.kubectl_ok_in(
            "paced",
            &[
                "get",
                "configmap",
                "paced-second",
                "-o",
                "jsonpath={.metadata.creationTimestamp}"
            ],
        ),
        "2026-01-01T00:01:30Z"
    );
    let clock = env.ksim_ok(&["clock", "--name", "paced"]);
    assert!(
        clock.starts_with("2026-01-01T00:02:00Z (virtual clock"),
        "{clock}"
    );

    // As fast as possible: the clock does not move.
    virtual_cluster(&env, "fastest");
    env.ksim_ok(&[
        "replay",
        "--name",
        "fastest",
        "--path",
        path_str(&recording),
        "--speed",
        "max",
    ]);
    let clock = env.ksim_ok(&["clock", "--name", "fastest"]);
    assert!(
        clock.starts_with("2026-01-01T00:00:00Z (virtual clock"),
        "{clock}"
    );
}

/// A replacing restore into a cluster whose kubelet runs: the pods are
/// deleted and created again, and each shows its saved IP once more (the
/// kubelet starting a re-created pod must not write an IP of its own over
/// the restored one).
#[test]
fn a_replacing_restore_keeps_each_pods_ip_while_the_kubelet_runs() {
    let source = TestCluster::start_named(ksim_binary(), "source");
    let env = source.env();
    env.ksim_ok(&["scale", "node", "--replicas", "2", "--name", "source"]);
    let manifest: String = (0..12)
        .map(|i| {
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bare-{i:02}\nspec:\n  containers:\n  - name: c\n    image: nginx\n---\n"
            )
        })
        .collect();
    source
        .kubectl_stdin(&["apply", "-f", "-"], &manifest)
        .success();
    let pods = env.wait_for_in("source", PODS, |out| {
        out.lines().count() == 12 && out.lines().all(|l| l.ends_with(" Running"))
    });
    let path = save(env, "source", "snapshot.yaml");
    // The pods are made again in reverse order (other IPs) with a container
    // of another name, which a pod's update may not change: the restore
    // deletes each and creates it again, and the kubelet starts it meanwhile.
    source
        .kubectl(&["delete", "pods", "--all", "--wait=true"])
        .success();
    let changed: String = (0..12)
        .rev()
        .map(|i| {
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bare-{i:02}\nspec:\n  containers:\n  - name: other\n    image: nginx\n---\n"
            )
        })
        .collect();
    source
        .kubectl_stdin(&["apply", "-f", "-"], &changed)
        .success();
    env.wait_for_in("source", PODS, |out| {
        out.lines().count() == 12 && out.lines().all(|l| l.ends_with(" Running"))
    });
    let replaced = restore(env, "source", &path, &["--replace"]);
    assert!(replaced.contains(" replaced."), "{replaced}");
    let after = env.wait_for_in("source", PODS, |out| {
        out.lines().count() == 12 && out.lines().all(|l| l.ends_with(" Running"))
    });
    assert_eq!(
        sorted(&after),
        sorted(&pods),
        "every pod shows its saved IP"
    );
    assert_eq!(
        env.kubectl_ok_in(
            "source",
            &[
                "get",
                "pods",
                "-o",
                "jsonpath={.items[*].spec.containers[0].name}"
            ]
        ),
        ["c"; 12].join(" "),
        "the pods are the snapshot's"
    );
    // And the kubelet knows them all: a new pod gets an IP none of them shows.
    source
        .kubectl(&["run", "newcomer", "--image=nginx"])
        .success();
    let with_new = env.wait_for_in("source", PODS, |out| {
        out.lines().count() == 13 && out.lines().all(|l| l.ends_with(" Running"))
    });
    let ips: HashSet<&str> = with_new
        .lines()
        .filter_map(|l| l.split(' ').nth(1))
        .collect();
    assert_eq!(ips.len(), 13, "{with_new}");
}

/// A replacing restore into a cluster whose Deployment runs overwrites the
/// objects in place: the Deployment, its ReplicaSet and pods keep their
/// names, uids and IPs (no controller creates or deletes anything, no
/// roll-out), and the budget reports the same numbers.
#[test]
fn a_replacing_restore_of_a_running_deployment_changes_nothing_it_runs() {
    let (source, pods, budget) = quiet_source();
    let env = source.env();
    let path = save(env, "source", "snapshot.yaml");
    let replica_sets = || {
        env.kubectl_ok_in(
            "source",
            &["get", "rs", "-o", "jsonpath={.items[*].metadata.name}"],
        )
    };
    let before_rs = replica_sets();
    // Which pods and ReplicaSet exist, by uid, and the Deployment's revision.
    let identities = || {
        env.kubectl_ok_in("source",
            &[
                "get",
                "pods,rs,deploy",
                "-o",
                "jsonpath={range .items[*]}{.kind} {.metadata.name} {.metadata.uid} {.metadata.annotations.deployment\\.kubernetes\\.io/revision}{\"\\n\"}{end}",
            ],
        )
    };
    let before = sorted(&identities());
    assert_eq!(
        before.len(),
        8,
        "six pods, a ReplicaSet, a Deployment: {before:?}"
    );
    let replaced = restore(env, "source", &path, &["--replace"]);
    assert!(replaced.contains(" replaced."), "{replaced}");
    wait_for_settled_web(env, "source", &budget);
    let rs_uid = env.kubectl_ok_in(
        "source",
        &["get", "rs", &before_rs, "-o", "jsonpath={.metadata.uid}"],
    );
    env.wait_for_in(
        "source",
        &[
            "get",
            "pods",
            "-o",
            "jsonpath={range .items[*]}{.metadata.ownerReferences[0].uid}{\"\\n\"}{end}",
        ],
        |out| out.lines().count() == 6 && out.lines().all(|uid| uid == rs_uid),
    );
    assert_eq!(replica_sets(), before_rs, "the same ReplicaSet");
    assert_eq!(
        sorted(&env.kubectl_ok_in("source", PODS)),
        pods,
        "the same pods and IPs"
    );
    assert_eq!(
        sorted(&identities()),
        before,
        "the same objects, overwritten in place; no roll-out"
    );
}

/// A recording holding a CustomResourceDefinition and its custom
/// resources replays both: the custom resources wait until the replayed
/// definition is served instead of being skipped as of an unserved kind.
#[test]
fn a_recorded_definition_and_its_custom_resources_replay() {
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
    let recording = env.root().join("changes.jsonl");
    let recorder = env.start_recorder(&["--name", "source"], &recording);
    env.kubectl_ok_in("source", &["create", "configmap", "marker"]);
    recorder.wait_for_object("marker");
    env.kubectl_stdin_in(
        "source",
        &["apply", "-f", "-"],
        &fixtures::widget_crd_manifest(),
    )
    .success();
    env.kubectl_ok_in(
        "source",
        &[
            "wait",
            "--for=condition=Established",
            "crd/widgets.example.com",
            "--timeout=60s",
        ],
    );
    let widget = fixtures::widget("w", "default", 3).to_string();
    env.wait_for_in("source", &["get", "widgets"], |_| true);
    env.kubectl_stdin_in("source", &["apply", "-f", "-"], &widget)
        .success();
    eventually("the widget is recorded", || {
        std::fs::read_to_string(&recording).is_ok_and(|t| {
            t.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .any(|c| c["object"]["kind"] == "Widget")
        })
    });
    recorder.stop();

    let output = env.ksim(&[
        "replay",
        "--name",
        "replica",
        "--path",
        path_str(&recording),
        "--speed",
        "max",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("skipped"), "{stderr}");
    assert_eq!(
        env.kubectl_ok_in(
            "replica",
            &["get", "widgets", "w", "-o", "jsonpath={.spec.size}"]
        ),
        "3"
    );
}

/// Changes of kinds the cluster does not serve are skipped with a warning,
/// or, under `--strict`, refused before anything is applied, naming the
/// line of the first one.
#[test]
fn a_replay_skips_unserved_kinds_with_a_warning_or_fails_under_strict() {
    let env = KsimEnv::new(ksim_binary());
    env.ksim_ok(&[
        "create",
        "cluster",
        "--name",
        "replica",
        "--disable",
        "kubelet,controllers,scheduler",
    ]);
    let recording = env.write_file(
        "widgets.jsonl",
        "{\"ksimRecording\":\"v1\",\"startTime\":\"2026-01-01T00:00:00Z\"}\n\
         {\"t\":0,\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"settings\",\"namespace\":\"default\"}}}\n\
         \n\
         {\"t\":1,\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"example.com/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"w\",\"namespace\":\"default\"}}}\n\
         {\"t\":2,\"type\":\"MODIFIED\",\"object\":{\"apiVersion\":\"example.com/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"w\",\"namespace\":\"default\"}}}\n",
    );
    let error = env.ksim_err(&[
        "replay",
        "--name",
        "replica",
        "--path",
        path_str(&recording),
        "--strict",
    ]);
    assert_eq!(
        error.trim_end(),
        format!(
            "error: {}: line 4: the cluster does not serve example.com/v1 Widget (2 such changes in the recording; nothing was applied)",
            recording.display()
        )
    );
    env.kubectl(&["--context=ksim-replica", "get", "configmap", "settings"])
        .failure();

    let output = env.ksim(&[
        "replay",
        "--name",
        "replica",
        "--path",
        path_str(&recording),
        "--speed",
        "max",
    ]);
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("warning: skipped 2 changes of kinds the cluster does not serve"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.starts_with("Replayed 1 of 3 changes"), "{stdout}");
    env.kubectl_ok_in("replica", &["get", "configmap", "settings"]);
}
