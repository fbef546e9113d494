//! End-to-end tests of DistributedPodDisruptionBudgets with the real
//! kubectl and several ksim clusters side by side in one KSIM_HOME: the
//! ring demonstration of issue 13 over red, blue and green; bad input (422s
//! from the CRD's schema, FederationValid=False from the controller); a
//! deleted member cluster (Unreachable, budgets closed) and its return;
//! `ksim dpdb-controller --kubeconfig` over HTTP against a cluster that
//! runs no DPDB controller of its own.

use std::path::Path;
use std::process::{Child, Stdio};

use ksim_testutils::KsimEnv;
use ksim_testutils::kubectl::{stdout_json, table_rows};
use ksim_testutils::poll_until;

const RING: [&str; 9] = [
    "00-10-20", "10-20-30", "20-30-40", "30-40-50", "40-50-60", "50-60-70", "60-70-80", "70-80-00",
    "80-00-10",
];
const CLUSTERS: [&str; 3] = ["red", "blue", "green"];

fn env() -> KsimEnv {
    KsimEnv::new(Path::new(env!("CARGO_BIN_EXE_ksim")))
}

/// Creates cluster `name` with one Ready node.
fn create(env: &KsimEnv, name: &str, extra: &[&str]) {
    let mut args = vec!["create", "cluster", "--name", name];
    args.extend_from_slice(extra);
    env.ksim_ok(&args);
    env.ksim_ok(&["scale", "node", "--replicas", "1", "--name", name]);
}

fn context(cluster: &str) -> String {
    format!("ksim-{cluster}")
}

fn apply(env: &KsimEnv, cluster: &str, manifest: &str) {
    env.kubectl_stdin(
        &["--context", &context(cluster), "apply", "-f", "-"],
        manifest,
    )
    .success();
}

fn pod(name: &str, ring: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {{app: database, ring: \"{ring}\"}}}}\nspec: {{containers: [{{name: db, image: db}}]}}\n"
    )
}

fn dpdb(name: &str, ring: &str, min: &str, members: &[(String, String)]) -> String {
    let federation: String = members
        .iter()
        .map(|(cluster, member)| format!("  - {{cluster: \"{cluster}\", name: {member}}}\n"))
        .collect();
    format!(
        "apiVersion: policy.ksim.io/v1alpha1\nkind: DistributedPodDisruptionBudget\nmetadata: {{name: {name}}}\nspec:\n  selector: {{matchLabels: {{ring: \"{ring}\"}}}}\n  minAvailable: {min}\n  federation:\n{federation}"
    )
}

fn cluster_of(i: usize) -> &'static str {
    CLUSTERS[i % 3]
}

/// `name -> ALLOWED DISRUPTIONS` of `kubectl get <kind>` (column `column`).
fn allowed(env: &KsimEnv, cluster: &str, kind: &str) -> Vec<(String, String)> {
    let output = env.kubectl(&["--context", &context(cluster), "get", kind]);
    output.success();
    let header = output.stdout.lines().next().unwrap_or_default().to_string();
    let at = header
        .find("ALLOWED DISRUPTIONS")
        .expect("an ALLOWED DISRUPTIONS column");
    let mut rows: Vec<(String, String)> = output
        .stdout
        .lines()
        .skip(1)
        .map(|line| {
            let name = line
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
            let cell = line
                .get(at..)
                .and_then(|rest| rest.split_whitespace().next())
                .unwrap_or_default()
                .to_string();
            (name, cell)
        })
        .collect();
    rows.sort();
    rows
}

/// Waits until every cluster's DPDBs and PDBs show `want(name)` allowed.
fn wait_allowed(env: &KsimEnv, want: impl Fn(&str) -> &'static str) {
    poll_until("every budget's allowed disruptions", || {
        let mut mismatch = None;
        for cluster in CLUSTERS {
            for kind in ["dpdb", "pdb"] {
                for (name, got) in allowed(env, cluster, kind) {
                    let expected = want(name.trim_start_matches("database-"));
                    if got != expected {
                        mismatch = Some(format!("{cluster} {kind} {name}: {got}, want {expected}"));
                    }
                }
            }
        }
        mismatch.map_or(Ok(()), Err)
    });
}

fn evict(env: &KsimEnv, cluster: &str, pod: &str) -> ksim_testutils::KubectlOutput {
    let body = format!(
        "{{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":{{\"name\":\"{pod}\",\"namespace\":\"default\"}}}}"
    );
    env.kubectl_stdin(
        &[
            "--context",
            &context(cluster),
            "create",
            "--raw",
            &format!("/api/v1/namespaces/default/pods/{pod}/eviction"),
            "-f",
            "-",
        ],
        &body,
    )
}

#[test]
fn the_ring_demonstration_across_three_clusters() {
    let env = env();
    for cluster in CLUSTERS {
        create(&env, cluster, &[]);
    }
    for (i, ring) in RING.iter().enumerate() {
        let members: Vec<(String, String)> = [7usize, 8, 1, 2]
            .iter()
            .map(|d| {
                let j = (i + d) % 9;
                (cluster_of(j).to_string(), format!("database-{}", RING[j]))
            })
            .collect();
        let name = format!("database-{ring}");
        apply(
            &env,
            cluster_of(i),
            &format!(
                "{}---\n{}",
                pod(&name, ring),
                dpdb(&name, ring, "4", &members)
            ),
        );
    }
    // All nine allow one disruption, with MIN AVAILABLE 4 and 4/4 members.
    wait_allowed(&env, |_| "1");
    for cluster in CLUSTERS {
        let table = env.kubectl(&["--context", &context(cluster), "get", "dpdb"]);
        assert_eq!(
            table
                .stdout
                .lines()
                .next()
                .unwrap_or_default()
                .split_whitespace()
                .collect::<Vec<_>>(),
            [
                "NAME",
                "MIN",
                "AVAILABLE",
                "MAX",
                "UNAVAILABLE",
                "ALLOWED",
                "DISRUPTIONS",
                "MEMBERS",
                "AGE"
            ]
        );
        for row in table_rows(&table) {
            assert_eq!(row[1..4], ["4", "1", "4/4"], "{}", table.stdout);
        }
    }

    // Evict database-30-40-50 in red: it and its four neighbours close.
    evict(&env, "red", "database-30-40-50").success();
    let closed = ["30-40-50", "10-20-30", "40-50-60", "20-30-40", "50-60-70"];
    wait_allowed(&env, |name| if closed.contains(&name) { "0" } else { "1" });
    let refused = evict(&env, "blue", "database-40-50-60");
    assert_ne!(refused.status, 0);
    assert!(
        refused.stderr.contains("(TooManyRequests)")
            && refused
                .stderr
                .contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{}",
        refused.stderr
    );
    // Which status says why, in the DPDB of a neighbour.
    let neighbour = stdout_json(&env.kubectl(&[
        "--context",
        "ksim-green",
        "get",
        "dpdb",
        "database-20-30-40",
        "-o",
        "json",
    ]));
    assert_eq!(neighbour["status"]["currentHealthy"], 4);
    assert_eq!(neighbour["status"]["desiredHealthy"], 4);
    // A bare pod evicted is no longer expected (upstream counts the pods
    // that exist when they have no controller).
    assert_eq!(neighbour["status"]["expectedPods"], 4);

    // The pod back and Ready: all nine allow one again.
    apply(&env, "red", &pod("database-30-40-50", "30-40-50"));
    wait_allowed(&env, |_| "1");
}

#[test]
fn a_deleted_member_cluster_closes_the_budget_and_a_new_one_reopens_it() {
    let env = env();
    create(&env, "red", &[]);
    create(&env, "blue", &[]);
    let blue_objects = format!(
        "{}---\n{}",
        pod("db-b", "b"),
        dpdb("db-b", "b", "1", &[("red".into(), "db-a".into())])
    );
    apply(&env, "blue", &blue_objects);
    apply(
        &env,
        "red",
        &format!(
            "{}---\n{}",
            pod("db-a", "a"),
            dpdb("db-a", "a", "1", &[("blue".into(), "db-b".into())])
        ),
    );
    let allowed_of = |cluster: &str, want: &'static str| {
        env.wait_for_in(cluster, &["get", "dpdb", "--no-headers"], move |out| {
            out.split_whitespace().nth(2) == Some(want)
        })
    };
    allowed_of("red", "1");
    env.ksim_ok(&["delete", "cluster", "--name", "blue"]);
    allowed_of("red", "0");
    let status =
        stdout_json(&env.kubectl(&["--context", "ksim-red", "get", "dpdb", "db-a", "-o", "json"]));
    assert_eq!(status["status"]["members"][0]["state"], "Unreachable");
    assert_eq!(
        status["status"]["members"][0]["expectedPods"], 1,
        "the last known count"
    );
    assert_eq!(status["status"]["membersObserved"], "0/1");
    let conditions = status["status"]["conditions"]
        .as_array()
        .expect("conditions");
    let observed = conditions
        .iter()
        .find(|c| c["type"] == "MembersObserved")
        .expect("MembersObserved");
    assert_eq!(observed["status"], "False");
    assert!(
        observed["message"].as_str().is_some_and(|m| m
            .contains("blue/default/db-b is Unreachable: ")
            && m.contains("\"blue\" is")),
        "{observed}"
    );
    assert_eq!(allowed(&env, "red", "pdb"), [("db-a".into(), "0".into())]);

    create(&env, "blue", &[]);
    apply(&env, "blue", &blue_objects);
    allowed_of("red", "1");
    allowed_of("blue", "1");
}

#[test]
fn bad_budgets_are_refused_with_422_or_closed_with_federation_valid_false() {
    let env = env();
    create(&env, "red", &[]);
    // Served from start: listed by api-resources, explained by explain.
    let resources = env.kubectl(&["api-resources", "--api-group=policy.ksim.io"]);
    assert_eq!(
        resources.success().stdout,
        "NAME                              SHORTNAMES   APIVERSION                NAMESPACED   KIND\n\
         distributedpoddisruptionbudgets   dpdb         policy.ksim.io/v1alpha1   true         DistributedPodDisruptionBudget\n"
    );
    let explained = env.kubectl(&["explain", "dpdb.spec"]);
    for field in [
        "federation\t<[]Object>",
        "selector\t<Object> -required-",
        "coordination\t<string>",
    ] {
        assert!(
            explained.success().stdout.contains(field),
            "{field} in {}",
            explained.stdout
        );
    }
    let head = "apiVersion: policy.ksim.io/v1alpha1\nkind: DistributedPodDisruptionBudget\nmetadata: {name: bad}\nspec:\n";
    for (spec, message) in [
        (
            "  minAvailable: 1\n",
            "The DistributedPodDisruptionBudget \"bad\" is invalid: spec.selector: Required value",
        ),
        (
            "  selector: {}\n  minAvailable: 1\n",
            "spec.selector in body should have at least 1 properties",
        ),
        (
            "  selector: {matchLabels: {a: b}}\n  minAvailable: -1\n",
            "spec.minAvailable: Invalid value: -1: spec.minAvailable in body should be greater than or equal to 0",
        ),
        (
            "  selector: {matchLabels: {a: b}}\n  maxUnavailable: 101%\n",
            "spec.maxUnavailable: Invalid value: \"101%\": spec.maxUnavailable in body should match",
        ),
        (
            "  selector: {matchLabels: {a: b}}\n  minAvailable: 1\n  coordination: Sometimes\n",
            "spec.coordination: Unsupported value: \"Sometimes\"",
        ),
    ] {
        let out = env.kubectl_stdin(&["create", "-f", "-"], &format!("{head}{spec}"));
        assert_ne!(out.status, 0, "{spec}");
        assert!(out.stderr.contains(message), "{spec}: {}", out.stderr);
    }
    apply(&env, "red", &pod("db-a", "a"));
    let member = "  federation: [{cluster: blue, name: other}]\n";
    for (i, (spec, reason)) in [
        ("  minAvailable: 1\n  maxUnavailable: 1\n", "MinAvailableAndMaxUnavailable"),
        ("", "NoBudget"),
        ("  minAvailable: 0\n  federation: [{name: bad-2}]\n", "SelfReference"),
        (
            "  minAvailable: 0\n  federation: [{cluster: blue, name: x}, {cluster: blue, namespace: default, name: x}]\n",
            "DuplicateMember",
        ),
        ("  minAvailable: 0\n  federation: [{cluster: No_Such_Context, name: x}]\n", "UnknownCluster"),
    ]
    .iter()
    .enumerate()
    {
        let name = format!("bad-{i}");
        let spec = if spec.is_empty() { member.to_string() } else { spec.to_string() };
        let manifest = format!(
            "apiVersion: policy.ksim.io/v1alpha1\nkind: DistributedPodDisruptionBudget\nmetadata: {{name: {name}}}\nspec:\n  selector: {{matchLabels: {{ring: a}}}}\n{spec}"
        );
        apply(&env, "red", &manifest);
        let json = env.wait_for_in("red", &["get", "dpdb", &name, "-o", "json"], |out| {
            out.contains("\"FederationValid\"")
        });
        let object: serde_json::Value = serde_json::from_str(&json).expect("json");
        let valid = object["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "FederationValid"))
            .expect("FederationValid")
            .clone();
        assert_eq!((valid["status"].as_str(), valid["reason"].as_str()), (Some("False"), Some(*reason)));
        assert_eq!(object["status"]["disruptionsAllowed"], 0, "{name}");
        // The child never opens: maxUnavailable 0.
        let child = env.wait_for_in("red", &["get", "pdb", &name, "-o", "json"], |_| true);
        let child: serde_json::Value = serde_json::from_str(&child).expect("json");
        assert_eq!(child["spec"]["maxUnavailable"], 0, "{name}");
        env.kubectl(&["--context", "ksim-red", "delete", "dpdb", &name]).success();
    }
}

struct Background(Child);

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_controller_runs_alone_over_a_kubeconfig_with_members_in_other_namespaces() {
    let env = env();
    create(&env, "solo", &["--disable", "dpdb"]);
    // `--print-crd` prints what every ksim cluster serves.
    let printed = env.ksim(&["dpdb-controller", "--print-crd"]);
    assert!(printed.status.success());
    let crd: serde_json::Value = serde_json::from_slice(&printed.stdout).expect("the CRD as JSON");
    assert_eq!(
        crd["metadata"]["name"],
        "distributedpoddisruptionbudgets.policy.ksim.io"
    );

    env.kubectl(&["create", "namespace", "other"]).success();
    apply(&env, "solo", &pod("db-a", "a"));
    env.kubectl_stdin(&["apply", "-n", "other", "-f", "-"], &pod("db-b", "b"))
        .success();
    let plain_budget = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: db-b, namespace: other}\nspec: {minAvailable: 0, selector: {matchLabels: {ring: b}}}\n";
    apply(&env, "solo", plain_budget);
    let budget = "apiVersion: policy.ksim.io/v1alpha1\nkind: DistributedPodDisruptionBudget\nmetadata: {name: db-a}\nspec:\n  selector: {matchLabels: {ring: a}}\n  minAvailable: 2\n  federation: [{namespace: other, name: db-b}]\n";
    apply(&env, "solo", budget);

    let kubeconfig = env.kubeconfig().to_str().expect("UTF-8 path").to_string();
    let _controller = Background(
        env.ksim_command(&[
            "dpdb-controller",
            "--kubeconfig",
            &kubeconfig,
            "--context",
            "ksim-solo",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot start ksim dpdb-controller"),
    );
    // 2 pods, both must stay: the child allows none; minAvailable 1 allows one.
    let json = env.wait_for_in("solo", &["get", "dpdb", "db-a", "-o", "json"], |out| {
        out.contains("\"membersObserved\": \"1/1\"") && out.contains("\"ChildSynced\"")
    });
    let object: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(object["status"]["expectedPods"], 2);
    assert_eq!(object["status"]["disruptionsAllowed"], 0);
    let child = stdout_json(&env.kubectl(&["get", "pdb", "db-a", "-o", "json"]));
    assert_eq!(child["spec"]["minAvailable"], 1);
    assert_eq!(
        child["metadata"]["ownerReferences"][0]["kind"],
        "DistributedPodDisruptionBudget"
    );

    env.kubectl(&[
        "patch",
        "dpdb",
        "db-a",
        "--type=merge",
        "-p",
        "{\"spec\":{\"minAvailable\":1}}",
    ])
    .success();
    env.wait_for_in("solo", &["get", "dpdb", "db-a", "--no-headers"], |out| {
        out.split_whitespace().nth(2) == Some("1")
    });
    // A hand edit of the child is put back.
    env.kubectl(&[
        "patch",
        "pdb",
        "db-a",
        "--type=merge",
        "-p",
        "{\"spec\":{\"minAvailable\":5}}",
    ])
    .success();
    env.wait_for_in(
        "solo",
        &["get", "pdb", "db-a", "-o", "jsonpath={.spec.minAvailable}"],
        |out| out == "0",
    );
}

/// Red and blue, their DPDB controllers seeing each other 2 s late, with
/// one shard of two replicas (db-a in red, db-b in blue, minAvailable 1
/// over both) under `coordination`; returns how many of two concurrent
/// evictions (one per cluster) the eviction API admitted.
fn concurrent_evictions_in_the_window(coordination: &str) -> (KsimEnv, usize, Vec<String>) {
    let env = env();
    for cluster in ["red", "blue"] {
        let output = env
            .ksim_command(&["create", "cluster", "--name", cluster])
            .env("KSIM_DPDB_PROPAGATION_DELAY", "2s")
            .output()
            .expect("cannot run ksim");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        env.ksim_ok(&["scale", "node", "--replicas", "1", "--name", cluster]);
    }
    for (cluster, own, other, other_cluster) in
        [("red", "a", "b", "blue"), ("blue", "b", "a", "red")]
    {
        let name = format!("db-{own}");
        let mut budget = dpdb(
            &name,
            own,
            "1",
            &[(other_cluster.into(), format!("db-{other}"))],
        );
        budget.push_str(&format!("  coordination: {coordination}\n"));
        apply(&env, cluster, &format!("{}---\n{budget}", pod(&name, own)));
    }
    let allowed_now = |cluster: &str| -> i64 {
        allowed(&env, cluster, "pdb")
            .first()
            .and_then(|(_, a)| a.parse().ok())
            .unwrap_or(-1)
    };
    // Settled: Optimistic opens both children, Exclusive exactly one.
    let want_open = if coordination == "Exclusive" { 1 } else { 2 };
    poll_until("the children settled", || {
        let open = [allowed_now("red"), allowed_now("blue")];
        if open.iter().filter(|a| **a == 1).count() == want_open && open.iter().all(|a| *a >= 0) {
            Ok(())
        } else {
            Err(format!("{open:?}"))
        }
    });
    let results: Vec<ksim_testutils::KubectlOutput> = std::thread::scope(|scope| {
        let red = scope.spawn(|| evict(&env, "red", "db-a"));
        let blue = scope.spawn(|| evict(&env, "blue", "db-b"));
        vec![red.join().expect("red"), blue.join().expect("blue")]
    });
    let admitted = results.iter().filter(|r| r.status == 0).count();
    let refusals = results
        .iter()
        .filter(|r| r.status != 0)
        .map(|r| r.stderr.clone())
        .collect();
    (env, admitted, refusals)
}

#[test]
fn optimistic_coordination_admits_two_evictions_of_one_shard_inside_the_window() {
    let (_env, admitted, refusals) = concurrent_evictions_in_the_window("Optimistic");
    assert_eq!(admitted, 2, "{refusals:?}");
}

#[test]
fn exclusive_coordination_admits_exactly_one_eviction_of_one_shard_inside_the_window() {
    let (_env, admitted, refusals) = concurrent_evictions_in_the_window("Exclusive");
    assert_eq!(admitted, 1, "{refusals:?}");
    assert!(
        refusals[0].contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{refusals:?}"
    );
}

/// The `status` condition `type_` of DPDB `name` in red, once present.
fn dpdb_condition(env: &KsimEnv, name: &str, type_: &str) -> serde_json::Value {
    let json = env.wait_for_in("red", &["get", "dpdb", name, "-o", "json"], |out| {
        out.contains(&format!("\"{type_}\""))
    });
    let object: serde_json::Value = serde_json::from_str(&json).expect("json");
    object["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .cloned()
        .expect("the condition")
}

#[test]
fn a_foreign_budget_is_never_overwritten_and_an_overlapping_one_is_reported() {
    let env = env();
    create(&env, "red", &[]);
    apply(
        &env,
        "red",
        &format!("{}---\n{}", pod("db-x", "x"), pod("db-a", "a")),
    );
    // A plain budget that has the DPDB's name.
    apply(
        &env,
        "red",
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: db-x}\nspec: {minAvailable: 0, selector: {matchLabels: {ring: x}}}\n",
    );
    apply(
        &env,
        "red",
        &dpdb("db-x", "x", "1", &[("".into(), "db-a".into())]),
    );
    let synced = dpdb_condition(&env, "db-x", "ChildSynced");
    assert_eq!(
        (synced["status"].as_str(), synced["reason"].as_str()),
        (Some("False"), Some("ChildNotOwned"))
    );
    let foreign = stdout_json(&env.kubectl(&["get", "pdb", "db-x", "-o", "json"]));
    assert_eq!(foreign["spec"]["minAvailable"], 0, "never overwritten");
    assert!(foreign["metadata"]["ownerReferences"].is_null());
    env.wait_for_in(
        "red",
        &[
            "get",
            "dpdb",
            "db-x",
            "-o",
            "jsonpath={.status.disruptionsAllowed}",
        ],
        |out| out == "0",
    );

    // A plain budget selecting the pods of another DPDB.
    apply(
        &env,
        "red",
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: plain}\nspec: {minAvailable: 0, selector: {matchLabels: {app: database}}}\n",
    );
    apply(
        &env,
        "red",
        &dpdb("db-a", "a", "1", &[("".into(), "db-x".into())]),
    );
    let overlap = dpdb_condition(&env, "db-a", "OverlappingBudget");
    assert_eq!(overlap["status"], "True");
    assert!(
        overlap["message"].as_str().is_some_and(|m| m.contains("plain")
            && m.contains("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")),
        "{overlap}"
    );
}

/// The standalone controller of each cluster reaches the other's member
/// through a context of its kubeconfig (as against real clusters): east
/// and west run no DPDB controller of their own; one `ksim dpdb-controller
/// --kubeconfig K --context ksim-<own>` each, with members named by context.
#[test]
fn standalone_controllers_reach_members_in_other_clusters_through_kubeconfig_contexts() {
    let env = env();
    create(&env, "east", &["--disable", "dpdb"]);
    create(&env, "west", &["--disable", "dpdb"]);
    let kubeconfig = env.kubeconfig().to_str().expect("UTF-8 path").to_string();
    let _controllers: Vec<Background> = ["east", "west"]
        .iter()
        .map(|own| {
            Background(
                env.ksim_command(&[
                    "dpdb-controller",
                    "--kubeconfig",
                    &kubeconfig,
                    "--context",
                    &context(own),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("cannot start ksim dpdb-controller"),
            )
        })
        .collect();
    apply(&env, "east", &pod("db-a", "a"));
    apply(&env, "west", &pod("db-b", "b"));
    let member = |cluster: &str, name: &str| vec![(context(cluster), name.to_string())];
    apply(
        &env,
        "east",
        &dpdb("db-a", "a", "1", &member("west", "db-b")),
    );
    apply(
        &env,
        "west",
        &dpdb("db-b", "b", "1", &member("east", "db-a")),
    );

    // Two pods over the federation, one must stay: each side allows one,
    // which needs the other side's member observed through its context.
    for (cluster, name) in [("east", "db-a"), ("west", "db-b")] {
        let json = env.wait_for_in(cluster, &["get", "dpdb", name, "-o", "json"], |out| {
            out.contains("\"membersObserved\": \"1/1\"")
                && out.contains("\"disruptionsAllowed\": 1")
        });
        let object: serde_json::Value = serde_json::from_str(&json).expect("json");
        assert_eq!(object["status"]["expectedPods"], 2, "{cluster}: {json}");
        assert_eq!(object["status"]["members"][0]["state"], "Observed");
        env.wait_for_in(
            cluster,
            &[
                "get",
                "pdb",
                name,
                "-o",
                "jsonpath={.status.disruptionsAllowed}",
            ],
            |out| out == "1",
        );
    }

    // An eviction in east reaches west's budget through the context.
    let evicted = evict(&env, "east", "db-a");
    assert_eq!(evicted.status, 0, "{}", evicted.stderr);
    env.wait_for_in(
        "west",
        &[
            "get",
            "pdb",
            "db-b",
            "-o",
            "jsonpath={.status.disruptionsAllowed}",
        ],
        |out| out == "0",
    );
    let refused = evict(&env, "west", "db-b");
    assert_ne!(refused.status, 0);
    assert!(
        refused
            .stderr
            .contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{}",
        refused.stderr
    );
}
