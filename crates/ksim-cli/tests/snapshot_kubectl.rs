//! End to end: `ksim snapshot save`, `ksim create cluster --snapshot`,
//! `ksim snapshot restore` and `ksim snapshot export` against clusters made
//! by `ksim create cluster`, checked with the real kubectl: pods keep their
//! names, nodes, IPs and phase; the Deployment's ReplicaSet is adopted, not
//! re-created, and scales on from the restored pods; budgets report the
//! same numbers. A failed `--replace` restore puts back the objects it
//! replaced (statuses too) and deletes those it created, by `--name` and by
//! `--kubeconfig`, and points the dependents of an owner it created again
//! (under a new uid) at it.

use std::path::Path;

use ksim_testutils::{KsimEnv, TestCluster};

fn ksim_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ksim"))
}

const WORKLOAD: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 4
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
  minAvailable: 3
  selector:
    matchLabels:
      app: web
---
apiVersion: v1
kind: Secret
metadata:
  name: credentials
stringData:
  password: hunter2
";

/// name node podIP phase, one pod a line, sorted.
const PODS: &[&str] = &[
    "get",
    "pods",
    "-o",
    "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.podIP} {.status.phase}{\"\\n\"}{end}",
];

fn sorted_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

const PDB_NUMBERS: &[&str] = &[
    "get",
    "pdb",
    "web",
    "-o",
    "jsonpath={.status.currentHealthy} {.status.desiredHealthy} {.status.disruptionsAllowed} {.status.expectedPods}",
];

/// A cluster `source` with 3 nodes, a Deployment of 4 Running pods, a
/// budget and a secret; returns its pods, ReplicaSet name and budget numbers.
fn source_cluster() -> (TestCluster, Vec<String>, String, String) {
    let cluster = TestCluster::start_named(ksim_binary(), "source");
    cluster
        .env()
        .ksim_ok(&["scale", "node", "--replicas", "3", "--name", "source"]);
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], WORKLOAD)
        .success();
    cluster
        .kubectl(&["rollout", "status", "deploy/web", "--timeout=60s"])
        .success();
    let pods = cluster.env().wait_for_in("source", PODS, |out| {
        out.lines().count() == 4 && out.lines().all(|l| l.ends_with(" Running"))
    });
    let numbers = cluster
        .env()
        .wait_for_in("source", PDB_NUMBERS, |out| out == "4 3 1 4");
    let rs = cluster.env().kubectl_ok_in(
        "source",
        &["get", "rs", "-o", "jsonpath={.items[*].metadata.name}"],
    );
    (cluster, sorted_lines(&pods), rs, numbers)
}

/// The checks on a copy: same pods, same ReplicaSet adopted (its pods owned
/// by its new uid), same budget numbers; then a scale to 5 adds exactly one
/// pod beside the restored four, in the same ReplicaSet.
fn check_copy(env: &KsimEnv, copy: &str, pods: &[String], rs: &str, numbers: &str) {
    let restored = sorted_lines(&env.kubectl_ok_in(copy, PODS));
    assert_eq!(restored, pods, "the pods, their nodes, IPs and phases");
    assert_eq!(
        env.kubectl_ok_in(
            copy,
            &["get", "rs", "-o", "jsonpath={.items[*].metadata.name}"]
        ),
        rs
    );
    let rs_uid = env.kubectl_ok_in(copy, &["get", "rs", rs, "-o", "jsonpath={.metadata.uid}"]);
    let owners = env.kubectl_ok_in(
        copy,
        &[
            "get",
            "pods",
            "-o",
            "jsonpath={range .items[*]}{.metadata.ownerReferences[0].uid}{\"\\n\"}{end}",
        ],
    );
    assert!(
        owners.lines().count() == 4 && owners.lines().all(|uid| uid == rs_uid),
        "every pod is owned by the restored ReplicaSet {rs_uid}: {owners}"
    );
    let deployment_uid = env.kubectl_ok_in(
        copy,
        &["get", "deploy", "web", "-o", "jsonpath={.metadata.uid}"],
    );
    assert_eq!(
        env.kubectl_ok_in(
            copy,
            &[
                "get",
                "rs",
                rs,
                "-o",
                "jsonpath={.metadata.ownerReferences[0].uid}"
            ]
        ),
        deployment_uid
    );
    assert_eq!(
        env.kubectl_ok_in(copy, PDB_NUMBERS),
        numbers,
        "the budget's numbers"
    );

    // The controllers own the restored objects: a scale adds exactly one pod.
    env.kubectl_ok_in(copy, &["scale", "deploy/web", "--replicas=5"]);
    let after = env.wait_for_in(copy, PODS, |out| {
        out.lines().filter(|l| l.ends_with(" Running")).count() == 5
    });
    let after = sorted_lines(&after);
    assert_eq!(after.len(), 5, "{after:?}");
    for pod in pods {
        assert!(after.contains(pod), "{pod} is still there: {after:?}");
    }
    assert_eq!(
        env.kubectl_ok_in(
            copy,
            &["get", "rs", "-o", "jsonpath={.items[*].metadata.name}"]
        ),
        rs,
        "no roll-out: one ReplicaSet"
    );
    env.wait_for_in(copy, PDB_NUMBERS, |out| out == "5 3 2 5");
}

#[test]
fn a_saved_cluster_is_created_again_with_its_pods_owners_and_budgets() {
    let (source, pods, rs, numbers) = source_cluster();
    let env = source.env();
    let path = env.root().join("snapshot.yaml");
    let path_str = path.to_str().expect("utf-8 path");
    let saved = env.ksim_ok(&["snapshot", "save", "--name", "source", "--path", path_str]);
    assert!(saved.starts_with("Saved "), "{saved}");
    let text = std::fs::read_to_string(&path).expect("the snapshot");
    assert!(!text.contains("\"resourceVersion\""), "no resourceVersion");
    assert!(!text.contains("managedFields"), "no managedFields");

    env.ksim_ok(&[
        "create",
        "cluster",
        "--name",
        "copy",
        "--snapshot",
        path_str,
    ]);
    check_copy(env, "copy", &pods, &rs, &numbers);
}

#[test]
fn a_restore_into_a_running_cluster_keeps_pods_and_refuses_a_second_time() {
    let (source, pods, rs, numbers) = source_cluster();
    let env = source.env();
    let path = env.root().join("snapshot.yaml");
    let path_str = path.to_str().expect("utf-8 path");
    env.ksim_ok(&[
        "snapshot", "save", "--name", "source", "--path", path_str, "--format", "block",
    ]);
    let text = std::fs::read_to_string(&path).expect("the snapshot");
    assert!(text.contains("\nkind: Deployment\n"), "block-style YAML");
    env.ksim_ok(&["create", "cluster", "--name", "target"]);
    let restored = env.ksim_ok(&[
        "snapshot", "restore", "--name", "target", "--path", path_str,
    ]);
    assert!(restored.starts_with("Restored "), "{restored}");
    assert!(restored.contains("Pod: 4"), "{restored}");

    // The cluster now holds objects: a second restore is refused, unless merging.
    let refused = env.ksim_err(&[
        "snapshot", "restore", "--name", "target", "--path", path_str,
    ]);
    assert!(
        refused.starts_with("error: the cluster already holds objects"),
        "{refused}"
    );
    assert_eq!(refused.trim_end().lines().count(), 1, "{refused}");
    let merged = env.ksim_ok(&[
        "snapshot", "restore", "--name", "target", "--path", path_str, "--merge",
    ]);
    assert!(merged.starts_with("Restored 0 objects."), "{merged}");
    assert!(merged.contains("already present, kept."), "{merged}");
    check_copy(env, "target", &pods, &rs, &numbers);
}

#[test]
fn a_malformed_snapshot_fails_with_its_document_and_line() {
    let env = KsimEnv::new(ksim_binary());
    let path = env.root().join("bad.yaml");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: [p\n",
    )
    .expect("written");
    let error = env.ksim_err(&[
        "create",
        "cluster",
        "--snapshot",
        path.to_str().expect("utf-8"),
    ]);
    assert!(error.starts_with("error: "), "{error}");
    assert!(error.contains("document 2 (line "), "{error}");
    assert_eq!(error.trim_end().lines().count(), 1, "{error}");
    // Nothing was started.
    assert!(env.port("ksim").is_none());
}

/// Nesting 10,000 deep (flow sequences and mappings, block sequences, a
/// flow-style object) fails with the document and line in one line, no
/// stack overflow: when creating a cluster from the file and when restoring
/// it into a running one (which is left as it was).
#[test]
fn a_snapshot_nested_very_deep_fails_with_its_document_and_line() {
    let cluster = TestCluster::start_api_only(ksim_binary());
    let env = cluster.env();
    let first =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: default\n---\n";
    let object =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: default\ndata:\n";
    let files = [
        format!(
            "{first}{object}  x: {}1{}\n",
            "[".repeat(10_000),
            "]".repeat(10_000)
        ),
        format!(
            "{first}{object}  x: {}1{}\n",
            "{a: ".repeat(10_000),
            "}".repeat(10_000)
        ),
        format!("{first}{object}  x:\n    {}1\n", "- ".repeat(10_000)),
        format!(
            "{first}{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"b\",\"namespace\":\"default\"}},\"data\":{{\"x\":{}1{}}}}}\n",
            "[".repeat(10_000),
            "]".repeat(10_000)
        ),
    ];
    // The line of the nesting (a flow-style object: of its document).
    let lines = [13, 13, 14, 7];
    for (index, (text, line)) in files.iter().zip(lines).enumerate() {
        let path = env.write_file(&format!("deep-{index}.yaml"), text);
        let path = path.to_str().expect("utf-8");
        for args in [
            vec!["create", "cluster", "--name", "deep", "--snapshot", path],
            vec![
                "snapshot",
                "restore",
                "--name",
                cluster.name(),
                "--path",
                path,
            ],
        ] {
            let error = env.ksim_err(&args);
            assert!(error.starts_with("error: "), "{error}");
            assert!(
                error.contains(&format!("document 2 (line {line})")),
                "{error}"
            );
            assert!(
                error.contains("nested too deeply") || error.contains("recursion limit exceeded"),
                "{error}"
            );
            assert_eq!(error.trim_end().lines().count(), 1, "{error}");
        }
        assert!(env.port("deep").is_none());
        cluster
            .kubectl(&["get", "configmap", "a", "-n", "default"])
            .failure();
    }
}

#[test]
fn a_snapshot_that_does_not_restore_or_is_missing_fails_create_with_one_line() {
    let env = KsimEnv::new(ksim_binary());
    // The file is read once, by the cluster's process: what it says comes
    // back through `create cluster`, in one line, and nothing is left.
    let path = env.root().join("invalid.yaml");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: nowhere\n",
    )
    .expect("written");
    let path = path.to_str().expect("utf-8");
    let error = env.ksim_err(&["create", "cluster", "--snapshot", path]);
    assert!(
        error.starts_with(&format!(
            "error: cannot restore {path}: restore failed: document 2 (line 6), ConfigMap nowhere/b: "
        )),
        "{error}"
    );
    assert!(
        error.contains("namespaces \"nowhere\" not found"),
        "{error}"
    );
    assert_eq!(error.trim_end().lines().count(), 1, "{error}");
    assert!(env.port("ksim").is_none());
    let clusters = env.ksim_ok(&["get", "clusters"]);
    assert!(!clusters.contains("ksim"), "{clusters}");

    let missing = env.root().join("missing.yaml");
    let missing = missing.to_str().expect("utf-8");
    let error = env.ksim_err(&["create", "cluster", "--snapshot", missing]);
    assert!(
        error.starts_with(&format!("error: cannot read {missing}")),
        "{error}"
    );
    assert_eq!(error.trim_end().lines().count(), 1, "{error}");
    assert!(env.port("ksim").is_none());
}

#[test]
fn kinds_the_cluster_does_not_serve_are_skipped_or_fail_under_strict() {
    let cluster = TestCluster::start_api_only(ksim_binary());
    let env = cluster.env();
    let path = env.root().join("widgets.yaml");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\ndata:\n  a: b\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: default\n",
    )
    .expect("written");
    let path = path.to_str().expect("utf-8");
    let error = env.ksim_err(&["snapshot", "restore", "--path", path, "--strict"]);
    assert_eq!(
        error.trim_end(),
        "error: document 2 (line 9): the cluster does not serve example.com/v1 Widget (1 such objects in the file; nothing was applied)"
    );
    cluster.kubectl(&["get", "configmap", "settings"]).failure();

    let output = env.ksim(&["snapshot", "restore", "--path", path]);
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("warning: skipped 1 objects of example.com/v1/Widget"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("ConfigMap: 1"), "{stdout}");
    cluster.kubectl(&["get", "configmap", "settings"]).success();
}

#[test]
fn a_failed_restore_deletes_what_it_created_and_says_so() {
    let cluster = TestCluster::start_api_only(ksim_binary());
    let env = cluster.env();
    let path = env.root().join("invalid.yaml");
    // The second ConfigMap's namespace does not exist: the API refuses it.
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: team\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: nowhere\n",
    )
    .expect("written");
    let error = env.ksim_err(&[
        "snapshot",
        "restore",
        "--path",
        path.to_str().expect("utf-8"),
    ]);
    assert!(
        error.starts_with("error: restore failed: document 3 (line 12), ConfigMap nowhere/b: "),
        "{error}"
    );
    assert!(
        error.contains("namespaces \"nowhere\" not found"),
        "{error}"
    );
    assert!(
        error
            .trim_end()
            .ends_with("objects it had created were deleted again"),
        "{error}"
    );
    cluster
        .kubectl(&["get", "configmap", "a", "-n", "team"])
        .failure();
}

#[test]
fn a_kwokctl_k8s_snapshot_restores() {
    let env = KsimEnv::new(ksim_binary());
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kwokctl-snapshot.yaml");
    env.ksim_ok(&[
        "create",
        "cluster",
        "--snapshot",
        fixture.to_str().expect("utf-8"),
    ]);
    let pods = env.wait_for_in("ksim", PODS, |out| out.lines().count() == 2);
    assert_eq!(
        sorted_lines(&pods),
        [
            "app-6d8f7b5c9-abcde kwok-node-0 10.0.0.2 Running",
            "app-6d8f7b5c9-fghij kwok-node-1 10.0.1.2 Running",
        ]
    );
    let rs_uid = env.kubectl_ok_in(
        "ksim",
        &[
            "get",
            "rs",
            "app-6d8f7b5c9",
            "-o",
            "jsonpath={.metadata.uid}",
        ],
    );
    assert_ne!(rs_uid, "0c6a3a40-7b5e-4c44-9b70-4e2f4f1f0002", "a new uid");
    let owners = env.kubectl_ok_in(
        "ksim",
        &[
            "get",
            "pods",
            "-o",
            "jsonpath={.items[*].metadata.ownerReferences[0].uid}",
        ],
    );
    assert_eq!(owners, format!("{rs_uid} {rs_uid}"));
    // kwok's relative times are resolved.
    let start = env.kubectl_ok_in(
        "ksim",
        &[
            "get",
            "pod",
            "app-6d8f7b5c9-abcde",
            "-o",
            "jsonpath={.status.startTime}",
        ],
    );
    assert!(
        start.ends_with('Z') && !start.contains("time-offset"),
        "{start}"
    );
    env.kubectl_ok_in("ksim", &["scale", "deploy/app", "--replicas=3"]);
    env.wait_for_in("ksim", PODS, |out| {
        out.lines().filter(|l| l.ends_with(" Running")).count() == 3
    });
}

#[test]
fn an_export_over_http_makes_fake_nodes_and_leaves_secrets_out() {
    let (source, pods, rs, numbers) = source_cluster();
    let env = source.env();
    let path = env.root().join("export.yaml");
    let path_str = path.to_str().expect("utf-8 path");
    let kubeconfig = env.kubeconfig().to_str().expect("utf-8 path");
    // The source is reached like any cluster: its kubeconfig context, over HTTP.
    let exported = env.ksim_ok(&[
        "snapshot",
        "export",
        "--kubeconfig",
        kubeconfig,
        "--context",
        "ksim-source",
        "-A",
        "--qps",
        "20",
        "--burst",
        "5",
        "--chunk-size",
        "2",
        "--format",
        "block",
        "--path",
        path_str,
    ]);
    assert!(exported.starts_with("Exported "), "{exported}");
    let text = std::fs::read_to_string(&path).expect("the export");
    assert!(!text.contains("managedFields"));
    assert!(
        !text.contains("hunter2") && !text.contains("aHVudGVyMg"),
        "no secret data"
    );
    assert!(
        text.contains("name: credentials"),
        "the secret itself is kept"
    );
    assert_eq!(
        text.matches("kwok.x-k8s.io/node: fake").count(),
        3,
        "3 fake nodes"
    );
    assert!(
        !text.contains("kind: Stage"),
        "the simulator's own objects are left out"
    );

    env.ksim_ok(&[
        "create",
        "cluster",
        "--name",
        "copy",
        "--snapshot",
        path_str,
    ]);
    check_copy(env, "copy", &pods, &rs, &numbers);

    // An unreachable source fails with the transport's message, on one line.
    let broken = env.root().join("broken-kubeconfig");
    std::fs::write(
        &broken,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:1\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user: {}\ncurrent-context: c\n",
    )
    .expect("written");
    let error = env.ksim_err(&[
        "snapshot",
        "export",
        "--kubeconfig",
        broken.to_str().expect("utf-8"),
        "--path",
        env.root().join("never.yaml").to_str().expect("utf-8"),
    ]);
    assert!(
        error.starts_with("error: cannot export the cluster: "),
        "{error}"
    );
    assert_eq!(error.trim_end().lines().count(), 1, "{error}");
    assert!(!env.root().join("never.yaml").exists(), "nothing written");
}

#[test]
fn replace_overwrites_the_objects_the_snapshot_names_and_merge_keeps_them() {
    let cluster = TestCluster::start_api_only(ksim_binary());
    let env = cluster.env();
    cluster
        .kubectl(&["create", "configmap", "settings", "--from-literal=a=old"])
        .success();
    let path = env.root().join("settings.yaml");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\ndata:\n  a: new\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: default\n",
    )
    .expect("written");
    let path = path.to_str().expect("utf-8");
    let value = || {
        cluster
            .kubectl(&["get", "configmap", "settings", "-o", "jsonpath={.data.a}"])
            .stdout
    };
    let refused = env.ksim_err(&["snapshot", "restore", "--path", path]);
    assert!(
        refused.contains("ConfigMap default/settings"),
        "names an object it found: {refused}"
    );
    let merged = env.ksim_ok(&["snapshot", "restore", "--path", path, "--merge"]);
    assert!(
        merged.starts_with("Restored 1 objects (ConfigMap: 1). 1 already present, kept."),
        "{merged}"
    );
    assert_eq!(value(), "old");
    let replaced = env.ksim_ok(&["snapshot", "restore", "--path", path, "--replace"]);
    assert!(replaced.contains("2 replaced."), "{replaced}");
    assert_eq!(value(), "new");
}

/// The objects a `--replace` restore finds, as the user made them.
const BEFORE: &str = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: default
data:
  mode: A
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 2
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
apiVersion: v1
kind: Pod
metadata:
  name: solo
  namespace: default
  labels:
    content: a
spec:
  containers:
  - name: first
    image: nginx
";

/// A snapshot naming them with other content (the pod's containers differ,
/// a change the API refuses in place, so it is deleted and created), an
/// object of its own, and a pod in a namespace that does not exist, which
/// fails in the same tier as the pod and the Deployment, after they were
/// replaced.
const FAILING_SNAPSHOT: &str = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: default
data:
  mode: B
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: extra
  namespace: default
data:
  mode: B
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 5
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
        image: nginx:1.27
status:
  replicas: 5
  readyReplicas: 5
  availableReplicas: 5
---
apiVersion: v1
kind: Pod
metadata:
  name: solo
  namespace: default
  labels:
    content: b
spec:
  containers:
  - name: second
    image: busybox
---
apiVersion: v1
kind: Pod
metadata:
  name: stray
  namespace: nowhere
spec:
  containers:
  - name: c
    image: nginx
";

/// What kubectl shows of the objects [`BEFORE`] made.
fn replaced_objects(cluster: &TestCluster) -> [String; 3] {
    let get = |args: &[&str]| {
        let output = cluster.kubectl(args);
        output.success();
        output.stdout
    };
    [
        get(&[
            "get",
            "configmap",
            "settings",
            "-o",
            "jsonpath={.data.mode}",
        ]),
        get(&[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image} {.status.readyReplicas}/{.status.availableReplicas}",
        ]),
        get(&[
            "get",
            "pod",
            "solo",
            "-o",
            "jsonpath={.metadata.labels.content} {.spec.containers[0].name} {.status.phase}",
        ]),
    ]
}

/// A `--replace` restore that fails after replacing objects puts them back
/// and deletes what it created; `connection` says how ksim reaches the cluster.
fn a_failed_replace_restore_puts_back(cluster: &TestCluster, connection: &[&str]) {
    let env = cluster.env();
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], BEFORE)
        .success();
    let uid = |kind: &str, name: &str| {
        let output = cluster.kubectl(&["get", kind, name, "-o", "jsonpath={.metadata.uid}"]);
        output.success();
        output.stdout
    };
    // Statuses of their own (as a kubelet and a controller would write).
    let status = |kind: &str, name: &str, patch: &str| {
        cluster
            .kubectl(&[
                "patch",
                kind,
                name,
                "--subresource=status",
                "--type=merge",
                "-p",
                patch,
            ])
            .success();
    };
    status("pod", "solo", r#"{"status":{"phase":"Running"}}"#);
    status(
        "deployment",
        "web",
        r#"{"status":{"replicas":2,"readyReplicas":2}}"#,
    );
    let uids = (uid("configmap", "settings"), uid("pod", "solo"));
    let before = replaced_objects(cluster);
    assert_eq!(before[0], "A");
    assert_eq!(before[1], "2 nginx 2/");
    assert_eq!(before[2], "a first Running");
    let path = env.write_file("failing.yaml", FAILING_SNAPSHOT);
    let mut args = vec![
        "snapshot",
        "restore",
        "--path",
        path.to_str().expect("utf-8"),
        "--replace",
    ];
    args.extend_from_slice(connection);
    let error = env.ksim_err(&args);
    assert!(
        error.starts_with("error: restore failed: document 5 (line "),
        "{error}"
    );
    assert!(error.contains("Pod nowhere/stray: "), "{error}");
    assert!(
        error.contains("namespaces \"nowhere\" not found"),
        "{error}"
    );
    assert!(
        error.trim_end().ends_with(
            "; the 1 object it had created was deleted again and the 3 it had replaced were put back"
        ),
        "{error}"
    );
    assert_eq!(error.trim_end().lines().count(), 1, "{error}");
    assert_eq!(replaced_objects(cluster), before);
    // The ConfigMap was put back in place; the pod, which the API cannot
    // change in place, was created again.
    assert_eq!(uid("configmap", "settings"), uids.0);
    assert_ne!(uid("pod", "solo"), uids.1);
    cluster.kubectl(&["get", "configmap", "extra"]).failure();
}

#[test]
fn a_failed_replace_restore_puts_back_what_it_replaced_and_says_so() {
    let cluster = TestCluster::start_api_only(ksim_binary());
    a_failed_replace_restore_puts_back(&cluster, &[]);
}

#[test]
fn a_failed_replace_restore_through_a_kubeconfig_puts_back_what_it_replaced() {
    let cluster = TestCluster::start_api_only(ksim_binary());
    let env = cluster.env();
    let text = env.ksim_ok(&["get", "kubeconfig", "--name", cluster.name()]);
    let kubeconfig = env.write_file("own.kubeconfig", &text);
    a_failed_replace_restore_puts_back(
        &cluster,
        &["--kubeconfig", kubeconfig.to_str().expect("utf-8")],
    );
}

#[test]
fn an_object_whose_replacement_fails_half_way_is_put_back_at_once() {
    let cluster = TestCluster::start_api_only(ksim_binary());
    let env = cluster.env();
    cluster.apply_widget_crd();
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: default\nspec:\n  size: 1\n",
        )
        .success();
    cluster
        .kubectl(&[
            "patch",
            "widget",
            "w",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"count":1}}"#,
        ])
        .success();
    let widget = || {
        let output = cluster.kubectl(&[
            "get",
            "widget",
            "w",
            "-o",
            "jsonpath={.spec.size} {.status.count}",
        ]);
        output.success();
        output.stdout
    };
    assert_eq!(widget(), "1 1");
    // The spec is replaced in place; the status the snapshot holds breaks
    // the schema, so writing it back fails after the spec was replaced.
    let path = env.write_file(
        "widget.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: default\nspec:\n  size: 2\nstatus:\n  count: many\n",
    );
    let error = env.ksim_err(&[
        "snapshot",
        "restore",
        "--path",
        path.to_str().expect("utf-8"),
        "--replace",
    ]);
    assert!(
        error.starts_with(
            "error: restore failed: document 1 (line 1), Widget.example.com default/w: "
        ),
        "{error}"
    );
    assert!(error.contains("status.count"), "{error}");
    assert!(
        error.trim_end().ends_with("; nothing was applied"),
        "{error}"
    );
    assert_eq!(widget(), "1 1");
}

/// A ReplicaSet a `--replace` restore must delete and create again (the
/// snapshot changes its selector, which the API refuses in place).
const KEEPER: &str = "\
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: keeper
  namespace: default
spec:
  replicas: 2
  selector:
    matchLabels:
      app: keeper
  template:
    metadata:
      labels:
        app: keeper
    spec:
      containers:
      - name: nginx
        image: nginx
";

/// A pod of the ReplicaSet `keeper` (uid `{uid}`) named `{name}` with a
/// container named `{container}`.
fn keeper_pod(name: &str, uid: &str, container: &str) -> String {
    format!(
        "\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  labels:
    app: keeper
  ownerReferences:
  - apiVersion: apps/v1
    kind: ReplicaSet
    name: keeper
    uid: {uid}
    controller: true
    blockOwnerDeletion: true
spec:
  containers:
  - name: {container}
    image: nginx
"
    )
}

/// The snapshot: `keeper` with another selector, its pod `keeper-b` with
/// another container and no owner (both are deleted and created again), and
/// a pod in a namespace that does not exist, which fails in their tier.
const KEEPER_SNAPSHOT: &str = "\
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: keeper
  namespace: default
spec:
  replicas: 2
  selector:
    matchLabels:
      app: other
  template:
    metadata:
      labels:
        app: other
    spec:
      containers:
      - name: nginx
        image: nginx
---
apiVersion: v1
kind: Pod
metadata:
  name: keeper-b
  namespace: default
spec:
  containers:
  - name: replaced
    image: busybox
---
apiVersion: v1
kind: Pod
metadata:
  name: stray
  namespace: nowhere
spec:
  containers:
  - name: c
    image: nginx
";

#[test]
fn a_failed_replace_restore_points_the_dependents_of_an_owner_it_created_again_at_it() {
    let cluster = TestCluster::start_api_only(ksim_binary());
    let env = cluster.env();
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], KEEPER)
        .success();
    let uid = |kind: &str, name: &str| {
        let output = cluster.kubectl(&["get", kind, name, "-o", "jsonpath={.metadata.uid}"]);
        output.success();
        output.stdout
    };
    let old = uid("replicaset", "keeper");
    // keeper-a: a pod the snapshot does not name; keeper-b: one it replaces.
    for (pod, container) in [("keeper-a", "nginx"), ("keeper-b", "nginx")] {
        cluster
            .kubectl_stdin(&["apply", "-f", "-"], &keeper_pod(pod, &old, container))
            .success();
    }
    let path = env.write_file("keeper.yaml", KEEPER_SNAPSHOT);
    let error = env.ksim_err(&[
        "snapshot",
        "restore",
        "--path",
        path.to_str().expect("utf-8"),
        "--replace",
    ]);
    assert!(
        error.starts_with("error: restore failed: document 3 (line "),
        "{error}"
    );
    // The ReplicaSet is back as it was, under a new uid (it was created again).
    let selector = cluster.kubectl(&[
        "get",
        "replicaset",
        "keeper",
        "-o",
        "jsonpath={.spec.selector.matchLabels.app}",
    ]);
    selector.success();
    assert_eq!(selector.stdout, "keeper");
    let new = uid("replicaset", "keeper");
    assert_ne!(new, old);
    // Both pods, the one the restore did not touch and the one it put
    // back, are owned by it, not by a uid that no longer exists (which the
    // garbage collector would delete them for).
    for pod in ["keeper-a", "keeper-b"] {
        let owners = cluster.kubectl(&[
            "get",
            "pod",
            pod,
            "-o",
            "jsonpath={.metadata.ownerReferences[*].name} {.metadata.ownerReferences[*].uid} {.metadata.ownerReferences[*].controller} {.spec.containers[0].name}",
        ]);
        owners.success();
        assert_eq!(owners.stdout, format!("keeper {new} true nginx"), "{pod}");
    }
    assert!(
        error.trim_end().ends_with(
            "; the 2 objects it had replaced were put back; the owner references of 2 objects now name the new uid of the 1 object put back by creating it again"
        ),
        "{error}"
    );
    assert_eq!(error.trim_end().lines().count(), 1, "{error}");
}
