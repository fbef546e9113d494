//! End-to-end: `ksim drain`, kubectl's drain waiting in the cluster's time,
//! run standalone against clusters started by `ksim create cluster` (through
//! the kubeconfig over HTTP, and by `--name`). On a virtual clock a drain
//! refused by a budget retries every 5 s of cluster time and fails at
//! --timeout with kubectl's words, having moved the clock by exactly that
//! much; a drain whose budget recovers while it waits (the evicted pod's
//! replacement turns Ready) succeeds; the evictions are recorded as requested
//! by `ksim drain` (kubectl's own drain shows as `kubectl drain`). On a real
//! clock it evicts and waits for the pods to go; kubectl's filters
//! (local storage, --dry-run=client) print kubectl's messages. Through a
//! kubeconfig over HTTP, --dry-run=server, --disable-eviction and
//! -l/--selector print what the real kubectl drain prints for the same case
//! (run beside it). The real `kubectl drain` refusal is pinned in
//! drain_kubectl.rs.

use std::path::Path;
use std::process::Output;

use ksim_testutils::TestCluster;
use ksim_testutils::kubectl::stdout_json;

const VIRTUAL: &[&str] = &[
    "--clock",
    "virtual",
    "--clock-start",
    "2026-01-01T00:00:00Z",
    "--seed",
    "7",
];

const REFUSAL: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

fn ksim_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ksim"))
}

/// Two ready nodes; node-000000 labelled `pool=a`.
fn with_two_nodes(cluster: &TestCluster) {
    cluster.scale_nodes(2);
    cluster.wait_for(&["get", "nodes", "--no-headers"], |out| {
        out.lines().filter(|l| l.contains(" Ready")).count() == 2
    });
    cluster
        .kubectl(&["label", "node", "node-000000", "pool=a"])
        .success();
}

/// A Deployment of `replicas` pods on the nodes labelled `pool=a`, under a
/// budget with `rule`.
fn workload(name: &str, replicas: usize, rule: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      nodeSelector: {{pool: a}}
      containers: [{{name: c, image: nginx}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: {name}}}
spec: {{{rule}, selector: {{matchLabels: {{app: {name}}}}}}}
"
    )
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The cluster's time (`ksim clock -o json`'s `now`).
fn cluster_now(cluster: &TestCluster) -> String {
    let json: serde_json::Value =
        serde_json::from_str(&cluster.ksim_ok(&["clock", "-o", "json"])).expect("clock JSON");
    json["now"].as_str().expect("now").to_string()
}

/// Waits, moving the virtual clock 5s at a time, until `kubectl <args>`
/// prints `want`.
#[track_caller]
fn advance_until(cluster: &TestCluster, args: &[&str], want: &str) {
    for _ in 0..60 {
        if cluster.kubectl(args).stdout.trim() == want {
            return;
        }
        cluster.ksim_ok(&["clock", "advance", "5s"]);
    }
    panic!("kubectl {args:?} never printed {want:?}");
}

/// Waits (moving a virtual clock) until `app`'s budget reads `want`
/// (`currentHealthy/disruptionsAllowed`).
#[track_caller]
fn wait_budget(cluster: &TestCluster, app: &str, want: &str) {
    advance_until(
        cluster,
        &[
            "get",
            "pdb",
            app,
            "-o",
            "jsonpath={.status.currentHealthy}/{.status.disruptionsAllowed}",
        ],
        want,
    );
}

/// `(pod, outcome, requestedBy)` of every eviction record.
fn eviction_records(cluster: &TestCluster) -> Vec<(String, String, String)> {
    let list = stdout_json(
        cluster
            .kubectl(&["get", "--raw", "/ksim/v1alpha1/evictions"])
            .success(),
    );
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["pod"]["name"].as_str().unwrap_or_default().to_string(),
                r["outcome"].as_str().unwrap_or_default().to_string(),
                r["requestedBy"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn pod_names(cluster: &TestCluster, app: &str) -> Vec<String> {
    let out = cluster.kubectl(&["get", "pods", "-l", &format!("app={app}"), "-o", "name"]);
    out.success()
        .stdout
        .lines()
        .map(|l| l.trim_start_matches("pod/").to_string())
        .collect()
}

#[test]
fn on_a_virtual_clock_a_refused_drain_times_out_in_cluster_time_and_a_recovering_budget_lets_it_finish()
 {
    let cluster = TestCluster::start_with(ksim_binary(), "ksim", VIRTUAL);
    with_two_nodes(&cluster);
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &workload("web", 2, "minAvailable: 2"),
        )
        .success();
    wait_budget(&cluster, "web", "2/0");
    let pods = pod_names(&cluster, "web");
    assert_eq!(pods.len(), 2, "{pods:?}");

    // Refused: tries at 0s, 5s and 10s; at 15s the 12s timeout has passed.
    let before = cluster_now(&cluster);
    let kubeconfig = cluster.kubeconfig().to_string_lossy().into_owned();
    let output: Output = cluster.ksim(&[
        "drain",
        "node-000000",
        "--timeout=12s",
        "--kubeconfig",
        &kubeconfig,
    ]);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    let mut want_stdout = vec!["node/node-000000 cordoned".to_string()];
    for _ in 0..4 {
        for pod in &pods {
            want_stdout.push(format!("evicting pod default/{pod}"));
        }
    }
    assert_eq!(stdout.lines().collect::<Vec<_>>(), want_stdout, "{stdout}");
    let refusals: Vec<&str> = stderr
        .lines()
        .filter(|l| l.ends_with(&format!("(will retry after 5s): {REFUSAL}")))
        .collect();
    assert_eq!(refusals.len(), 6, "{stderr}");
    assert_eq!(
        refusals[0],
        format!(
            "error when evicting pods/{:?} -n \"default\" (will retry after 5s): {REFUSAL}",
            pods[0]
        )
    );
    let timeouts: Vec<String> = pods
        .iter()
        .map(|p| {
            format!("error when evicting pods/{p:?} -n \"default\": global timeout reached: 12s")
        })
        .collect();
    let tail: Vec<&str> = stderr.lines().skip(6).collect();
    let mut want_tail = vec![format!(
        "There are pending pods in node \"node-000000\" when an error occurred: [{}]",
        timeouts.join(", ")
    )];
    want_tail.extend(pods.iter().map(|p| format!("pod/{p}")));
    want_tail.push(format!(
        "error: unable to drain node \"node-000000\" due to error: [{}], continuing command...",
        timeouts.join(", ")
    ));
    want_tail.push("There are pending nodes to be drained:".to_string());
    want_tail.push(" node-000000".to_string());
    want_tail.extend(timeouts.iter().cloned());
    assert_eq!(tail, want_tail, "{stderr}");
    // The drain's waits moved the clock: 15s of cluster time.
    let after = cluster_now(&cluster);
    let elapsed = chrono::DateTime::parse_from_rfc3339(&after).expect("after")
        - chrono::DateTime::parse_from_rfc3339(&before).expect("before");
    assert_eq!(elapsed.num_seconds(), 15, "{before} -> {after}");
    assert_eq!(pod_names(&cluster, "web"), pods);
    let records = eviction_records(&cluster);
    assert_eq!(records.len(), 6, "{records:?}");
    assert!(
        records
            .iter()
            .all(|(_, outcome, by)| outcome == "Refused" && by == "ksim drain"),
        "{records:?}"
    );

    // kubectl's own drain shows as kubectl.
    cluster
        .kubectl(&["drain", "node-000000", "--timeout=1s"])
        .failure();
    let records = eviction_records(&cluster);
    assert!(records.len() > 6, "{records:?}");
    assert!(
        records[6..]
            .iter()
            .all(|(_, outcome, by)| outcome == "Refused" && by == "kubectl drain"),
        "{records:?}"
    );

    // A budget that recovers while the drain waits: one of two pods may go;
    // its replacement lands on node-000001 and turns Ready, and the second
    // is evicted on the retry 5s later.
    cluster.kubectl(&["delete", "deploy,pdb", "web"]).success();
    advance_until(&cluster, &["get", "pods", "-o", "name"], "");
    cluster.kubectl(&["uncordon", "node-000000"]).success();
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &workload("api", 2, "maxUnavailable: 1"),
        )
        .success();
    wait_budget(&cluster, "api", "2/1");
    let pods = pod_names(&cluster, "api");
    cluster
        .kubectl(&["label", "node", "node-000001", "pool=a"])
        .success();
    let before = cluster_now(&cluster);
    let output = cluster.ksim(&["drain", "node-000000", "--timeout=60s", "--name", "ksim"]);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "node/node-000000 cordoned".to_string(),
            format!("evicting pod default/{}", pods[0]),
            format!("evicting pod default/{}", pods[1]),
            format!("pod/{} evicted", pods[0]),
            format!("evicting pod default/{}", pods[1]),
            format!("pod/{} evicted", pods[1]),
            "node/node-000000 drained".to_string(),
        ],
        "{stdout}"
    );
    assert_eq!(
        stderr.trim_end(),
        format!(
            "error when evicting pods/{:?} -n \"default\" (will retry after 5s): {REFUSAL}",
            pods[1]
        )
    );
    let after = cluster_now(&cluster);
    let elapsed = chrono::DateTime::parse_from_rfc3339(&after).expect("after")
        - chrono::DateTime::parse_from_rfc3339(&before).expect("before");
    assert_eq!(elapsed.num_seconds(), 5, "{before} -> {after}");
    let records = eviction_records(&cluster);
    let api: Vec<_> = records
        .iter()
        .filter(|(pod, _, _)| pods.contains(pod))
        .map(|(pod, outcome, by)| (pod.as_str(), outcome.as_str(), by.as_str()))
        .collect();
    assert_eq!(
        api,
        [
            (pods[0].as_str(), "Evicted", "ksim drain"),
            (pods[1].as_str(), "Refused", "ksim drain"),
            (pods[1].as_str(), "Evicted", "ksim drain"),
        ]
    );
}

#[test]
fn on_a_real_clock_the_drain_evicts_and_waits_and_applies_kubectls_filters() {
    let cluster = TestCluster::start(ksim_binary());
    with_two_nodes(&cluster);
    cluster
        .kubectl(&["label", "node", "node-000001", "pool=a"])
        .success();
    let bare = "apiVersion: v1
kind: Pod
metadata: {name: bare, labels: {app: bare}}
spec:
  nodeName: node-000000
  containers: [{name: c, image: nginx}]
  volumes: [{name: scratch, emptyDir: {}}]
";
    cluster.kubectl_stdin(&["apply", "-f", "-"], bare).success();
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &workload("web", 1, "maxUnavailable: 1"),
        )
        .success();
    cluster.wait_for(
        &["get", "pods", "-o", "jsonpath={.items[*].status.phase}"],
        |out| out == "Running Running",
    );

    // A pod with local data and no controller blocks the drain, with kubectl's words.
    let output = cluster.ksim(&["drain", "node-000000"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "cannot delete Pods with local storage (use --delete-emptydir-data to override): default/bare"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("error: unable to drain node \"node-000000\" due to error: "),
        "{stderr}"
    );

    // --dry-run=client only says what it would do.
    let output = cluster.ksim(&[
        "drain",
        "node-000000",
        "--force",
        "--delete-emptydir-data",
        "--dry-run=client",
    ]);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("node/node-000000 already cordoned (dry run)")
            && stdout.contains("evicting pod default/bare (dry run)")
            && stdout.contains("node/node-000000 drained (dry run)"),
        "{stdout}"
    );
    assert_eq!(pod_names(&cluster, "bare"), ["bare"]);

    // The drain itself: every pod evicted and waited for.
    let output = cluster.ksim(&[
        "drain",
        "node-000000",
        "--force",
        "--delete-emptydir-data",
        "--ignore-daemonsets",
        "--timeout=60s",
    ]);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("pod/bare evicted"), "{stdout}");
    assert!(stdout.ends_with("node/node-000000 drained\n"), "{stdout}");
    assert!(
        stderr.starts_with("Warning: deleting Pods that declare no controller: default/bare"),
        "{stderr}"
    );
    assert!(pod_names(&cluster, "bare").is_empty());
    cluster.wait_for(
        &[
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[*].spec.nodeName}",
        ],
        |out| out == "node-000001",
    );
    let records = eviction_records(&cluster);
    assert!(
        records
            .iter()
            .any(|(pod, outcome, by)| pod == "bare" && outcome == "Evicted" && by == "ksim drain"),
        "{records:?}"
    );

    // A node that does not exist: the API's error, exit code 1.
    let output = cluster.ksim(&["drain", "node-9"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        text(&output.stderr).trim_end(),
        "Error from server (NotFound): nodes \"node-9\" not found"
    );
}

/// Three ready nodes; node-000000 and node-000001 labelled `pool=a`.
fn with_three_nodes(cluster: &TestCluster) {
    cluster.scale_nodes(3);
    cluster.wait_for(&["get", "nodes", "--no-headers"], |out| {
        out.lines().filter(|l| l.contains(" Ready")).count() == 3
    });
    cluster
        .kubectl(&["label", "node", "node-000000", "node-000001", "pool=a"])
        .success();
}

/// A one-pod Deployment `name` on `node`, with a budget of `rule` when given.
fn pinned(name: &str, node: &str, rule: Option<&str>) -> String {
    let mut text = format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      nodeSelector: {{kubernetes.io/hostname: {node}}}
      containers: [{{name: c, image: nginx}}]
"
    );
    if let Some(rule) = rule {
        text.push_str(&format!(
            "---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: {name}}}
spec: {{{rule}, selector: {{matchLabels: {{app: {name}}}}}}}
"
        ));
    }
    text
}

/// The one Running pod of `app`, once there is one.
fn running_pod(cluster: &TestCluster, app: &str) -> String {
    let selector = format!("app={app}");
    cluster
        .wait_for(
            &[
                "get",
                "pods",
                "-l",
                &selector,
                "--field-selector=status.phase=Running",
                "-o",
                "jsonpath={.items[*].metadata.name}",
            ],
            |out| !out.is_empty() && !out.contains(' '),
        )
        .trim()
        .to_string()
}

/// `kubectl drain <args>` and `ksim drain <args> --kubeconfig K`: (exit
/// code, stdout, stderr) of each.
fn drain_both(cluster: &TestCluster, args: &[&str]) -> [(i32, String, String); 2] {
    let mut kubectl_args = vec!["drain"];
    kubectl_args.extend_from_slice(args);
    let kubectl = cluster.kubectl(&kubectl_args);
    let kubeconfig = cluster.kubeconfig().to_string_lossy().into_owned();
    let mut ksim_args = kubectl_args.clone();
    ksim_args.extend_from_slice(&["--kubeconfig", &kubeconfig]);
    let ksim = cluster.ksim(&ksim_args);
    [
        (kubectl.status, kubectl.stdout, kubectl.stderr),
        (
            ksim.status.code().unwrap_or(-1),
            text(&ksim.stdout),
            text(&ksim.stderr),
        ),
    ]
}

#[test]
fn through_a_kubeconfig_server_dry_run_and_disable_eviction_print_what_kubectl_prints() {
    let cluster = TestCluster::start(ksim_binary());
    with_three_nodes(&cluster);
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &pinned("web", "node-000000", Some("maxUnavailable: 1")),
        )
        .success();
    let web = running_pod(&cluster, "web");
    cluster.wait_for(
        &[
            "get",
            "pdb",
            "web",
            "-o",
            "jsonpath={.status.currentHealthy}/{.status.disruptionsAllowed}",
        ],
        |out| out == "1/1",
    );

    // --dry-run=server: the server is asked (the cordon and the eviction
    // are dry runs) and nothing changes; kubectl prints the same, word for word.
    let [kubectl, ksim] = drain_both(
        &cluster,
        &["node-000000", "--dry-run=server", "--timeout=60s"],
    );
    assert_eq!(ksim, kubectl);
    assert_eq!(ksim.0, 0, "{ksim:?}");
    assert_eq!(
        ksim.1.lines().collect::<Vec<_>>(),
        [
            "node/node-000000 cordoned (server dry run)".to_string(),
            format!("evicting pod default/{web} (server dry run)"),
            "node/node-000000 drained (server dry run)".to_string(),
        ]
    );
    assert_eq!(ksim.2, "");
    assert_eq!(
        cluster
            .kubectl(&[
                "get",
                "node",
                "node-000000",
                "-o",
                "jsonpath={.spec.unschedulable}"
            ])
            .success()
            .stdout,
        ""
    );
    assert!(
        eviction_records(&cluster).is_empty(),
        "{:?}",
        eviction_records(&cluster)
    );

    // Both: the deletion is a dry run, so the pod never goes and the wait
    // for it ends at --timeout, as kubectl's does.
    let [kubectl, ksim] = drain_both(
        &cluster,
        &[
            "node-000000",
            "--disable-eviction",
            "--dry-run=server",
            "--timeout=1s",
        ],
    );
    assert_eq!(ksim, kubectl);
    assert_eq!(ksim.0, 1, "{ksim:?}");
    assert_eq!(ksim.1, "node/node-000000 cordoned (server dry run)\n");
    assert_eq!(
        ksim.2.lines().last(),
        Some("error: context deadline exceeded")
    );
    assert_eq!(pod_names(&cluster, "web"), std::slice::from_ref(&web));

    // --disable-eviction: pods are deleted, the budget (which now allows no
    // disruption) is not consulted. kubectl drains node-000001 the same way.
    cluster
        .kubectl(&[
            "patch",
            "pdb",
            "web",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/spec/maxUnavailable"},{"op":"add","path":"/spec/minAvailable","value":1}]"#,
        ])
        .success();
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &pinned("api", "node-000001", Some("minAvailable: 1")),
        )
        .success();
    let api = running_pod(&cluster, "api");
    for app in ["web", "api"] {
        cluster.wait_for(
            &[
                "get",
                "pdb",
                app,
                "-o",
                "jsonpath={.status.currentHealthy}/{.status.disruptionsAllowed}",
            ],
            |out| out == "1/0",
        );
    }
    let kubectl = cluster.kubectl(&[
        "drain",
        "node-000001",
        "--disable-eviction",
        "--timeout=60s",
    ]);
    let kubeconfig = cluster.kubeconfig().to_string_lossy().into_owned();
    let output = cluster.ksim(&[
        "drain",
        "node-000000",
        "--disable-eviction",
        "--timeout=60s",
        "--kubeconfig",
        &kubeconfig,
    ]);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "node/node-000000 cordoned".to_string(),
            format!("pod/{web} deleted"),
            "node/node-000000 drained".to_string(),
        ]
    );
    assert_eq!(stderr, "");
    let same = |out: &str| out.replace(&api, "<pod>").replace("node-000001", "<node>");
    assert_eq!(
        (
            0,
            stdout
                .replace(&web, "<pod>")
                .replace("node-000000", "<node>"),
            stderr
        ),
        (kubectl.status, same(&kubectl.stdout), same(&kubectl.stderr))
    );
    assert!(!pod_names(&cluster, "web").contains(&web));
    assert!(
        eviction_records(&cluster).is_empty(),
        "{:?}",
        eviction_records(&cluster)
    );
}

#[test]
fn through_a_kubeconfig_a_selector_drains_only_the_nodes_it_selects() {
    let cluster = TestCluster::start(ksim_binary());
    with_three_nodes(&cluster);
    for (app, node) in [
        ("a0", "node-000000"),
        ("a1", "node-000001"),
        ("b", "node-000002"),
    ] {
        cluster
            .kubectl_stdin(&["apply", "-f", "-"], &pinned(app, node, None))
            .success();
    }
    let [a0, a1, b] = ["a0", "a1", "b"].map(|app| running_pod(&cluster, app));

    // What kubectl says of a selector that does not parse, of one that
    // selects nothing, and of a selector beside node names.
    let [kubectl, ksim] = drain_both(&cluster, &["-l", "pool in (a"]);
    assert_eq!(ksim, kubectl);
    assert_eq!(ksim.0, 1);
    assert!(
        ksim.2.starts_with(
            "Error from server (BadRequest): Unable to find \"/v1, Resource=nodes\" that match label selector \"pool in (a\", field selector \"\": "
        ),
        "{}",
        ksim.2
    );
    let [kubectl, ksim] = drain_both(&cluster, &["--selector=pool=b"]);
    assert_eq!(ksim, kubectl);
    assert_eq!(ksim, (0, String::new(), String::new()));
    let [kubectl, ksim] = drain_both(&cluster, &["node-000000", "-l", "pool=a"]);
    assert_eq!((ksim.0, ksim.1.as_str()), (kubectl.0, kubectl.1.as_str()));
    assert_eq!(
        ksim.2.lines().next(),
        Some("error: cannot specify both a node name and a --selector option")
    );
    assert_eq!(ksim.2.lines().next(), kubectl.2.lines().next());

    // The drain: both pool=a nodes cordoned first, then drained in turn;
    // node-000002 and its pod are left alone.
    let kubeconfig = cluster.kubeconfig().to_string_lossy().into_owned();
    let output = cluster.ksim(&[
        "drain",
        "-l",
        "pool=a",
        "--timeout=60s",
        "--kubeconfig",
        &kubeconfig,
    ]);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "node/node-000000 cordoned".to_string(),
            "node/node-000001 cordoned".to_string(),
            format!("evicting pod default/{a0}"),
            format!("pod/{a0} evicted"),
            "node/node-000000 drained".to_string(),
            format!("evicting pod default/{a1}"),
            format!("pod/{a1} evicted"),
            "node/node-000001 drained".to_string(),
        ]
    );
    assert_eq!(stderr, "");
    let unschedulable = cluster
        .kubectl(&[
            "get",
            "nodes",
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name}={.spec.unschedulable} {end}"#,
        ])
        .success()
        .stdout
        .clone();
    assert_eq!(
        unschedulable.trim_end(),
        "node-000000=true node-000001=true node-000002="
    );
    assert_eq!(pod_names(&cluster, "b"), [b]);
}
