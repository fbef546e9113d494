//! End to end: `ksim record` and `ksim replay` through a kubeconfig over
//! HTTP against an in-process ksim API server behind a front that behaves
//! as a real kube-apiserver may: a watch whose revision left the server's
//! history expires (410 Gone) after a gap in which the recorder saw
//! nothing; the watch of a kind whose definition is deleted never tells
//! its objects' deletions; a definition created (again) is served a moment
//! after discovery shows it (its group's resources answer 404 until then).
//! kubectl (through the same kubeconfig) makes the changes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;
use ksim_testutils::fixtures::{
    WIDGET_CRD_NAME, widget, widget_crd, widget_crd_created_again, widget_crd_manifest,
};
use ksim_testutils::{KsimEnv, KubectlOutput, poll_until};
use serde_json::{Value, json};

fn ksim_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ksim"))
}

/// What the front does to requests that are not kubectl's.
#[derive(Default)]
struct Faults {
    /// Path prefixes whose watches are held while `holding`.
    held: Mutex<Vec<String>>,
    /// While true, the open watches of held paths end and new ones wait;
    /// once false again, those that waited answer 410 Expired.
    holding: Option<tokio::sync::watch::Sender<bool>>,
    /// Watches waiting.
    waiting: AtomicUsize,
    /// How many requests to a group's resources answer 404 after each
    /// creation of a CustomResourceDefinition, by group.
    unserved_after_definition: Mutex<HashMap<String, usize>>,
    /// Requests of each group still to answer 404.
    unserved: Mutex<HashMap<String, usize>>,
    /// 404s answered so.
    refused: AtomicUsize,
    /// How many creations of a CustomResourceDefinition deleted by a
    /// client other than kubectl answer 409 AlreadyExists after the
    /// deletion, as while a real server still deletes it (its
    /// finalizer at work); a read of it meanwhile shows it terminating.
    terminating_after_delete: AtomicUsize,
    /// The definition still being deleted, and how many creations are left
    /// to refuse.
    terminating: Mutex<Option<(String, Value, usize)>>,
}

impl Faults {
    fn is_held(&self, path: &str) -> bool {
        self.held
            .lock()
            .expect("not poisoned")
            .iter()
            .any(|p| path.starts_with(p.as_str()))
    }

    fn holding(&self) -> &tokio::sync::watch::Sender<bool> {
        self.holding.as_ref().expect("made by Front::start")
    }
}

/// An in-process API server served over HTTP on a loopback port behind
/// [`Faults`], and a kubeconfig for it.
struct Front {
    faults: Arc<Faults>,
    kubeconfig: PathBuf,
}

/// The group of a path under one of its resources (`/apis/G/V/...`), not
/// its discovery (`/apis/G/V`).
fn resource_group(path: &str) -> Option<&str> {
    let mut parts = path.trim_start_matches('/').split('/');
    let (Some("apis"), Some(group), Some(_version), Some(_resource)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    Some(group)
}

fn json_response(status: u16, body: String) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .expect("a valid response")
}

async fn inject(State(faults): State<Arc<Faults>>, request: Request, next: Next) -> Response {
    let from_kubectl = request
        .headers()
        .get("user-agent")
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.starts_with("kubectl"));
    let path = request.uri().path().to_string();
    let watching = request
        .uri()
        .query()
        .unwrap_or_default()
        .split('&')
        .any(|p| p == "watch=true" || p == "watch=1");
    if request.method() == http::Method::POST
        && path == "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    {
        let armed = faults
            .unserved_after_definition
            .lock()
            .expect("not poisoned")
            .clone();
        faults.unserved.lock().expect("not poisoned").extend(armed);
    }
    let definitions = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    if !from_kubectl && path.starts_with(definitions) {
        let mut terminating = faults.terminating.lock().expect("not poisoned");
        if let Some((name, object, left)) = terminating.as_mut() {
            if request.method() == http::Method::GET && path == format!("{definitions}/{name}") {
                return json_response(200, object.to_string());
            }
            if request.method() == http::Method::POST && path == definitions && *left > 0 {
                *left -= 1;
                faults.refused.fetch_add(1, Ordering::SeqCst);
                return json_response(
                    409,
                    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": format!("customresourcedefinitions.apiextensions.k8s.io \"{name}\" already exists"),
                        "reason": "AlreadyExists",
                        "details": {"name": name, "group": "apiextensions.k8s.io", "kind": "customresourcedefinitions"},
                        "code": 409})
                    .to_string(),
                );
            }
        }
    }
    if !from_kubectl
        && request.method() == http::Method::DELETE
        && path.starts_with(&format!("{definitions}/"))
    {
        let refusals = faults.terminating_after_delete.load(Ordering::SeqCst);
        let name = path.rsplit('/').next().unwrap_or_default().to_string();
        let response = next.run(request).await;
        if refusals == 0 || !response.status().is_success() {
            return response;
        }
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX)
            .await
            .expect("the deleted object");
        let mut object: Value = serde_json::from_slice(&bytes).expect("a JSON object");
        object["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        *faults.terminating.lock().expect("not poisoned") = Some((name, object, refusals));
        return Response::from_parts(parts, Body::from(bytes));
    }
    if let Some(group) = resource_group(&path) {
        let mut unserved = faults.unserved.lock().expect("not poisoned");
        if let Some(left) = unserved.get_mut(group).filter(|left| **left > 0) {
            *left -= 1;
            faults.refused.fetch_add(1, Ordering::SeqCst);
            return json_response(
                404,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "the server could not find the requested resource",
                    "reason": "NotFound", "details": {}, "code": 404})
                .to_string(),
            );
        }
    }
    if !watching || from_kubectl {
        return next.run(request).await;
    }
    let mut holding = faults.holding().subscribe();
    if *holding.borrow_and_update() && faults.is_held(&path) {
        faults.waiting.fetch_add(1, Ordering::SeqCst);
        let _ = holding.wait_for(|h| !*h).await;
        faults.waiting.fetch_sub(1, Ordering::SeqCst);
        let expired = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1",
            "metadata": {}, "status": "Failure", "message": "too old resource version",
            "reason": "Expired", "code": 410}});
        return json_response(200, format!("{expired}\n"));
    }
    // An open watch of a held path ends when the holding starts.
    let response = next.run(request).await;
    let (parts, body) = response.into_parts();
    let stream = body.into_data_stream().take_until(async move {
        loop {
            if holding.wait_for(|h| *h).await.is_err() || faults.is_held(&path) {
                return;
            }
            let _ = holding.wait_for(|h| !*h).await;
        }
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

impl Front {
    /// Serves a new in-process API server; its kubeconfig in `env`'s root.
    fn start(env: &KsimEnv, name: &str) -> Self {
        let (holding, _) = tokio::sync::watch::channel(false);
        let faults = Arc::new(Faults {
            holding: Some(holding),
            ..Faults::default()
        });
        let (port_sender, port) = std::sync::mpsc::channel();
        let served = faults.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
                    .await
                    .expect("a loopback port");
                let port = listener.local_addr().expect("an address").port();
                let server = ksim_apiserver::ApiServer::new();
                let router = server
                    .router()
                    .layer(axum::middleware::from_fn_with_state(served, inject));
                port_sender.send(port).expect("the test waits");
                axum::serve(listener, router).await.expect("serves");
            });
        });
        let port = port.recv().expect("the server's port");
        let kubeconfig = env.write_file(
            &format!("{name}.kubeconfig"),
            &format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: http://127.0.0.1:{port}\nusers:\n- name: {name}\n  user: {{}}\ncontexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\ncurrent-context: {name}\n"
            ),
        );
        Front { faults, kubeconfig }
    }

    fn kubeconfig(&self) -> &str {
        self.kubeconfig.to_str().expect("utf-8 path")
    }

    fn kubectl(&self, env: &KsimEnv, args: &[&str]) -> KubectlOutput {
        let mut all = vec!["--kubeconfig", self.kubeconfig()];
        all.extend_from_slice(args);
        env.kubectl(&all)
    }

    fn kubectl_ok(&self, env: &KsimEnv, args: &[&str]) -> KubectlOutput {
        let output = self.kubectl(env, args);
        output.success();
        output
    }

    fn apply(&self, env: &KsimEnv, manifest: &str) {
        env.kubectl_stdin(
            &["--kubeconfig", self.kubeconfig(), "apply", "-f", "-"],
            manifest,
        )
        .success();
    }

    /// Applies a CRD and waits until its kind is served.
    fn define(&self, env: &KsimEnv, manifest: &str, name: &str) {
        self.apply(env, manifest);
        self.kubectl_ok(
            env,
            &[
                "wait",
                "--for=condition=Established",
                &format!("crd/{name}"),
                "--timeout=60s",
            ],
        );
        poll_until(&format!("{name} served"), || {
            let listed = self.kubectl(env, &["get", name]);
            (listed.status == 0).then_some(()).ok_or(listed.stderr)
        });
    }

    /// Holds the watches of paths under `prefixes` (see [`Faults`]) and
    /// waits until `count` of them wait.
    fn hold(&self, prefixes: &[&str], count: usize) {
        *self.faults.held.lock().expect("not poisoned") =
            prefixes.iter().map(|p| (*p).to_string()).collect();
        self.faults.holding().send_replace(true);
        poll_until("the recorder's watches are held", || {
            let waiting = self.faults.waiting.load(Ordering::SeqCst);
            (waiting >= count)
                .then_some(())
                .ok_or(format!("{waiting} waiting"))
        });
    }

    /// Ends the holding: the watches that waited expire.
    fn release(&self) {
        self.faults.holding().send_replace(false);
    }
}

/// The recorded changes of each object (`Kind/name`, objects in the
/// `default` namespace or cluster-scoped), in order.
fn recorded(path: &Path) -> HashMap<String, Vec<String>> {
    let mut changes: HashMap<String, Vec<String>> = HashMap::new();
    for line in std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .skip(1)
    {
        let Ok(change) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let object = &change["object"];
        if object["metadata"]["namespace"]
            .as_str()
            .is_some_and(|n| n != "default")
        {
            continue;
        }
        let id = format!(
            "{}/{}",
            object["kind"].as_str().unwrap_or_default(),
            object["metadata"]["name"].as_str().unwrap_or_default()
        );
        changes
            .entry(id)
            .or_default()
            .push(change["type"].as_str().unwrap_or_default().to_string());
    }
    changes
}

fn changes_of<'a>(all: &'a HashMap<String, Vec<String>>, id: &str) -> Vec<&'a str> {
    all.get(id)
        .map(|c| c.iter().map(String::as_str).collect())
        .unwrap_or_default()
}

/// A second CRD, of another group (its watches are not held).
fn gadget_crd() -> String {
    let mut crd = widget_crd();
    crd["metadata"]["name"] = json!("gadgets.example.org");
    crd["spec"]["group"] = json!("example.org");
    crd["spec"]["names"] = json!({"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"});
    crd.to_string()
}

fn replay(env: &KsimEnv, front: &Front, path: &Path) -> String {
    let output = env.ksim(&[
        "replay",
        "--kubeconfig",
        front.kubeconfig(),
        "--path",
        path.to_str().expect("utf-8 path"),
        "--speed",
        "max",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(!stderr.contains("skipped"), "{stderr}");
    stdout
}

/// The recorder's watches expire after a gap in which configmaps were
/// deleted, changed and created, a definition was deleted (its widget with
/// it) and another created with a custom resource: the lists made then
/// record exactly what changed, as kube's watcher tells it, and the
/// recording replays to what the cluster holds.
#[test]
fn a_recorder_whose_watches_expire_records_what_changed_meanwhile() {
    let env = KsimEnv::new(ksim_binary());
    let source = Front::start(&env, "source");
    for name in ["kept", "changed", "gone"] {
        source.kubectl_ok(&env, &["create", "configmap", name, "--from-literal=v=1"]);
    }
    source.define(&env, &widget_crd_manifest(), WIDGET_CRD_NAME);
    source.apply(&env, &widget("w1", "default", 1).to_string());
    let path = env.root().join("changes.jsonl");
    let recorder = env.start_recorder(&["--kubeconfig", source.kubeconfig()], &path);
    poll_until("the initial state is recorded", || {
        let all = recorded(&path);
        (all.contains_key("Widget/w1") && all.contains_key("ConfigMap/gone"))
            .then_some(())
            .ok_or(format!("{all:?}"))
    });
    // The recorder's watches of configmaps, of the definitions (its own
    // and its follower's) and of widgets.
    source.hold(
        &[
            "/api/v1/configmaps",
            "/apis/apiextensions.k8s.io/",
            "/apis/example.com/",
        ],
        4,
    );
    source.kubectl_ok(&env, &["delete", "configmap", "gone"]);
    source.kubectl_ok(
        &env,
        &[
            "patch",
            "configmap",
            "changed",
            "-p",
            r#"{"data":{"v":"2"}}"#,
        ],
    );
    source.kubectl_ok(&env, &["create", "configmap", "new", "--from-literal=v=1"]);
    source.kubectl_ok(&env, &["delete", "crd", WIDGET_CRD_NAME]);
    source.define(&env, &gadget_crd(), "gadgets.example.org");
    source.apply(
        &env,
        &json!({"apiVersion": "example.org/v1", "kind": "Gadget",
            "metadata": {"name": "g1", "namespace": "default"}, "spec": {"size": 7}})
        .to_string(),
    );
    source.release();
    // Recorded however the lists go: the new configmap, the new definition
    // and its gadget.
    poll_until("the lists are recorded", || {
        let all = recorded(&path);
        (all.contains_key("ConfigMap/new")
            && all.contains_key("CustomResourceDefinition/gadgets.example.org")
            && all.contains_key("Gadget/g1"))
        .then_some(())
        .ok_or(format!("{all:?}"))
    });
    recorder.stop();
    let all = recorded(&path);
    assert_eq!(changes_of(&all, "ConfigMap/kept"), ["ADDED"], "{all:?}");
    assert_eq!(
        changes_of(&all, "ConfigMap/changed"),
        ["ADDED", "MODIFIED"],
        "{all:?}"
    );
    assert_eq!(
        changes_of(&all, "ConfigMap/gone"),
        ["ADDED", "DELETED"],
        "{all:?}"
    );
    assert_eq!(changes_of(&all, "ConfigMap/new"), ["ADDED"], "{all:?}");
    assert_eq!(
        changes_of(&all, &format!("CustomResourceDefinition/{WIDGET_CRD_NAME}")),
        ["ADDED", "DELETED"],
        "{all:?}"
    );
    assert_eq!(
        changes_of(&all, "Widget/w1"),
        ["ADDED", "DELETED"],
        "{all:?}"
    );
    assert_eq!(
        changes_of(&all, "CustomResourceDefinition/gadgets.example.org"),
        ["ADDED"],
        "{all:?}"
    );
    assert_eq!(changes_of(&all, "Gadget/g1"), ["ADDED"], "{all:?}");

    let replica = Front::start(&env, "replica");
    let replayed = replay(&env, &replica, &path);
    assert!(replayed.starts_with("Replayed "), "{replayed}");
    let configmaps = replica.kubectl_ok(
        &env,
        &[
            "get",
            "configmaps",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.data.v} {end}",
        ],
    );
    let ours: Vec<&str> = configmaps
        .stdout
        .split_whitespace()
        .filter(|c| {
            ["kept=", "changed=", "gone=", "new="]
                .iter()
                .any(|p| c.starts_with(p))
        })
        .collect();
    assert_eq!(
        ours,
        ["changed=2", "kept=1", "new=1"],
        "{}",
        configmaps.stdout
    );
    replica
        .kubectl(&env, &["get", "crd", WIDGET_CRD_NAME])
        .failure();
    let gadgets = replica.kubectl_ok(
        &env,
        &[
            "get",
            "gadgets",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.spec.size} {end}",
        ],
    );
    assert_eq!(gadgets.stdout.trim_end(), "g1=7");
}

/// The custom resources that go with their definition are recorded as
/// deleted though their watch never tells (it is held here); the recording
/// replays.
#[test]
fn custom_resources_deleted_with_their_definition_are_recorded_as_deleted() {
    let env = KsimEnv::new(ksim_binary());
    let source = Front::start(&env, "source");
    source.define(&env, &widget_crd_manifest(), WIDGET_CRD_NAME);
    for name in ["w1", "w2"] {
        source.apply(&env, &widget(name, "default", 1).to_string());
    }
    let path = env.root().join("changes.jsonl");
    let recorder = env.start_recorder(&["--kubeconfig", source.kubeconfig()], &path);
    poll_until("the widgets are recorded", || {
        let all = recorded(&path);
        (all.contains_key("Widget/w1") && all.contains_key("Widget/w2"))
            .then_some(())
            .ok_or(format!("{all:?}"))
    });
    source.hold(&["/apis/example.com/"], 1);
    source.kubectl_ok(&env, &["delete", "crd", WIDGET_CRD_NAME]);
    poll_until("the widgets are recorded as deleted", || {
        let all = recorded(&path);
        let deleted = |id: &str| changes_of(&all, id) == ["ADDED", "DELETED"];
        (deleted("Widget/w1") && deleted("Widget/w2"))
            .then_some(())
            .ok_or(format!("{all:?}"))
    });
    source.release();
    recorder.stop();
    let lines: Vec<Value> = std::fs::read_to_string(&path)
        .expect("the recording")
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).expect("a change"))
        .collect();
    let deletion = lines
        .iter()
        .find(|c| c["type"] == "DELETED" && c["object"]["metadata"]["name"] == "w1")
        .expect("recorded");
    assert_eq!(deletion["object"]["apiVersion"], "example.com/v1");
    assert_eq!(deletion["object"]["metadata"]["namespace"], "default");

    let replica = Front::start(&env, "replica");
    let replayed = replay(&env, &replica, &path);
    assert!(replayed.starts_with("Replayed "), "{replayed}");
    replica
        .kubectl(&env, &["get", "crd", WIDGET_CRD_NAME])
        .failure();
}

/// A replay through a kubeconfig into a server that serves a definition's
/// resources a moment after discovery shows it (404 until then): its
/// custom resources wait for it, the first definition's and that of the
/// same definition created again.
#[test]
fn a_replay_waits_for_a_definition_created_again_to_be_served() {
    let env = KsimEnv::new(ksim_binary());
    let target = Front::start(&env, "target");
    target
        .faults
        .unserved_after_definition
        .lock()
        .expect("not poisoned")
        .insert("example.com".into(), 5);
    replay_widget_crd_created_again(&env, &target);
    // Both definitions' widgets met the 404s.
    assert_eq!(target.faults.refused.load(Ordering::SeqCst), 10);
}

/// A replay through a kubeconfig into a server that still deletes a
/// definition (its finalizer at work: it answers 409 AlreadyExists to its
/// creation and shows it terminating) when the recording creates it again:
/// the creation waits for it to go, and the second definition's widgets
/// are created.
#[test]
fn a_replay_waits_for_a_definition_still_being_deleted_to_go() {
    let env = KsimEnv::new(ksim_binary());
    let target = Front::start(&env, "target");
    target
        .faults
        .terminating_after_delete
        .store(3, Ordering::SeqCst);
    replay_widget_crd_created_again(&env, &target);
    assert_eq!(target.faults.refused.load(Ordering::SeqCst), 3);
}

/// Replays [`widget_crd_created_again`] into `target`: all eight changes
/// are applied, and the second definition's widget is there.
fn replay_widget_crd_created_again(env: &KsimEnv, target: &Front) {
    let path = env.write_file("widgets.jsonl", &widget_crd_created_again());
    let replayed = replay(env, target, &path);
    assert!(
        replayed.starts_with("Replayed 8 of 8 changes"),
        "{replayed}"
    );
    let widgets = target.kubectl_ok(
        env,
        &[
            "get",
            "widgets",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.spec.size} {end}",
        ],
    );
    assert_eq!(widgets.stdout.trim_end(), "second=4");
}
