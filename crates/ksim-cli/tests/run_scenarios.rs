//! `ksim run` end to end: the binary runs scenario files on clusters of
//! their own (kubectl, ksim, apply, waitFor, assert steps), prints the
//! timeline or JSON, writes JUnit XML, fails with a readable account of what
//! was expected and seen, and refuses bad files in one line before anything
//! runs; and against an existing cluster with `--kubeconfig`, or a running
//! ksim cluster with `--name` (moving its virtual clock through its API).

use std::path::{Path, PathBuf};
use std::process::Output;

use ksim_testutils::{KsimEnv, TestCluster};

fn ksim_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ksim"))
}

fn write(env: &KsimEnv, name: &str, text: &str) -> PathBuf {
    let path = env.root().join(name);
    std::fs::write(&path, text).expect("write the scenario");
    path
}

fn run(env: &KsimEnv, args: &[&str]) -> (Output, String, String) {
    let mut all = vec!["run"];
    all.extend(args);
    let output = env.ksim(&all);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output, stdout, stderr)
}

const PASSING: &str = r#"apiVersion: ksim.io/v1alpha1
kind: Scenario
metadata: {name: spread-by-number}
spec:
  clock: real
  seed: 7
  steps:
  - ksim: scale node --replicas 2
  - kubectl: label nodes node-000000 number=even
  - name: label the odd node
    kubectl: [label, nodes, node-000001, number=odd]
  - apply: {file: nginx.yaml}
  - waitFor: {get: pods -l app=nginx, jq: '[.items[] | select(.status.phase == "Running")] | length == 4', timeout: 1m}
  - kubectl: get pods -l app=nginx -o wide
    expect: {outputContains: [node-000000, node-000001], outputNotContains: Pending}
  - kubectl: get pod does-not-exist
    expect: {exitCode: 1, outputContains: 'pods "does-not-exist" not found'}
  - assert: {get: deploy nginx, jq: '.status.readyReplicas == 4'}
  - assert: {spread: {selector: app=nginx, topologyKey: number, maxSkew: 1}}
  - assert: {placement: {selector: app=nginx, topologyKey: number, counts: {even: 2, odd: 2}}}
  - assert: {events: {reason: Scheduled, count: 4}}
  - assert: {evictions: {count: 0}}
"#;

const NGINX: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: nginx}
spec:
  replicas: 4
  selector: {matchLabels: {app: nginx}}
  template:
    metadata: {labels: {app: nginx}}
    spec:
      containers: [{name: nginx, image: nginx}]
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: number, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: nginx}}}
"#;

#[test]
fn a_passing_scenario_prints_its_timeline_and_writes_junit() {
    let env = KsimEnv::new(ksim_binary());
    write(&env, "nginx.yaml", NGINX);
    let scenario = write(&env, "spread.yaml", PASSING);
    let junit = env.root().join("junit.xml");
    let (output, stdout, stderr) = run(
        &env,
        &[
            scenario.to_str().expect("utf-8"),
            "--junit",
            junit.to_str().expect("utf-8"),
        ],
    );
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.starts_with("scenario spread-by-number ("),
        "{stdout}"
    );
    assert!(
        stdout.contains("1. ksim scale node --replicas 2  ok"),
        "{stdout}"
    );
    assert!(stdout.contains("3. label the odd node  ok"), "{stdout}");
    assert!(stdout.contains("4. apply deployment/nginx  ok"), "{stdout}");
    assert!(
        stdout.contains("9. assert spread of app=nginx by number (maxSkew 1)  ok"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("PASS spread-by-number: 12 passed, 0 failed, 0 skipped\n"),
        "{stdout}"
    );
    let xml = std::fs::read_to_string(&junit).expect("the JUnit file");
    assert!(
        xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"),
        "{xml}"
    );
    assert!(
        xml.contains("<testsuite name=\"spread-by-number\"")
            && xml.contains("tests=\"12\" failures=\"0\""),
        "{xml}"
    );
    assert_eq!(xml.matches("<testcase ").count(), 12, "{xml}");
    // Nothing is left behind: no kubeconfig written, no cluster recorded.
    assert!(!env.kubeconfig().exists());
    assert!(!env.cluster_dir("ksim").exists());
}

const FAILING: &str = r#"apiVersion: ksim.io/v1alpha1
kind: Scenario
metadata: {name: unschedulable}
spec:
  clock: real
  steps:
  - ksim: scale node --replicas 1 --param '.allocatable.cpu="1"'
  - apply: |
      apiVersion: v1
      kind: Pod
      metadata: {name: big}
      spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "2"}}}]}
  - waitFor: {pending: {count: 1, message: 0/1 nodes are available}, timeout: 30s}
  - assert: {get: pod big, jq: '.status.phase == "Running"'}
  - assert: {pending: {count: 1, message: Insufficient memory}}
  - kubectl: delete pod nothing-here
  - assert: {get: pods, jq: 'true'}
"#;

#[test]
fn a_failing_scenario_says_what_was_expected_and_seen_and_exits_non_zero() {
    let env = KsimEnv::new(ksim_binary());
    let scenario = write(&env, "fail.yaml", FAILING);
    let junit = env.root().join("junit.xml");
    let (output, stdout, stderr) = run(
        &env,
        &[
            scenario.to_str().expect("utf-8"),
            "--junit",
            junit.to_str().expect("utf-8"),
        ],
    );
    assert!(
        !output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains("3. waitFor pending pods (timeout 30s)  ok"),
        "{stdout}"
    );
    assert!(
        stdout.contains("4. assert get pod big: .status.phase == \"Running\"  FAILED"),
        "{stdout}"
    );
    assert!(
        stdout.contains("expected: .status.phase == \"Running\" to yield true"),
        "{stdout}"
    );
    assert!(stdout.contains("seen:     false"), "{stdout}");
    // Assertions go on after a failure; a failed command stops the run.
    assert!(
        stdout.contains("expected: 1 pending pod with the scheduler's message containing \"Insufficient memory\""),
        "{stdout}"
    );
    assert!(stdout.contains("Insufficient cpu"), "{stdout}");
    assert!(
        stdout.contains("6. kubectl delete pod nothing-here  FAILED"),
        "{stdout}"
    );
    assert!(
        stdout.contains("seen:     exit code 1; output: Error from server (NotFound): pods \"nothing-here\" not found"),
        "{stdout}"
    );
    assert!(
        stdout.contains("7. assert get pods: true  skipped"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("FAIL unschedulable: 3 passed, 3 failed, 1 skipped\n"),
        "{stdout}"
    );
    assert_eq!(stderr, "error: 1 of 1 scenario failed: unschedulable\n");
    let xml = std::fs::read_to_string(&junit).expect("the JUnit file");
    assert!(
        xml.contains("tests=\"7\" failures=\"3\" skipped=\"1\""),
        "{xml}"
    );
    assert_eq!(xml.matches("<failure ").count(), 3, "{xml}");
    assert_eq!(xml.matches("<skipped ").count(), 1, "{xml}");
}

#[test]
fn json_output_has_every_step() {
    let env = KsimEnv::new(ksim_binary());
    let scenario = write(&env, "fail.yaml", FAILING);
    let (output, stdout, _) = run(&env, &[scenario.to_str().expect("utf-8"), "-o", "json"]);
    assert!(!output.status.success());
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON document");
    assert_eq!(report["passed"], false);
    let steps = report["scenarios"][0]["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 7);
    assert_eq!(steps[3]["outcome"], "failed");
    assert_eq!(steps[3]["seen"], "false");
    assert_eq!(steps[6]["outcome"], "skipped");
    assert_eq!(report["scenarios"][0]["name"], "unschedulable");
}

#[test]
fn bad_files_are_one_line_errors_before_anything_runs() {
    let env = KsimEnv::new(ksim_binary());
    let head = "apiVersion: ksim.io/v1alpha1\nkind: Scenario\nmetadata: {name: bad}\nspec:\n  clock: real\n  steps:\n  - ksim: scale node --replicas 1\n";
    let good = write(&env, "good.yaml", PASSING);
    write(&env, "nginx.yaml", NGINX);
    for (name, steps, want) in [
        (
            "unknown-step.yaml",
            "  - kubctl: get pods\n",
            "step 2: kubctl: unknown field \"kubctl\"",
        ),
        (
            "bad-jq.yaml",
            "  - assert: {get: pods, jq: '.items[] |'}\n",
            "step 2: assert.jq: ",
        ),
        (
            "bad-duration.yaml",
            "  - waitFor: {get: pods, jq: 'true', timeout: 2 minutes}\n",
            "step 2: waitFor.timeout: time: ",
        ),
        (
            "missing-file.yaml",
            "  - apply: {file: nowhere.yaml}\n",
            "step 2: apply.file: cannot read ",
        ),
        (
            "unknown-field.yaml",
            "  - assert: {spread: {selector: app=a, topologyKey: k, maxSkew: 1, min: 2}}\n",
            "step 2: assert.spread.min: unknown field `min`",
        ),
    ] {
        let path = write(&env, name, &format!("{head}{steps}"));
        // The good file first: nothing of it may run when another is bad.
        let (output, stdout, stderr) = run(
            &env,
            &[good.to_str().expect("utf-8"), path.to_str().expect("utf-8")],
        );
        assert!(!output.status.success(), "{name}: {stdout}");
        assert_eq!(stdout, "", "{name}: nothing runs");
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
        assert!(
            stderr.starts_with(&format!("error: {}: ", path.display())) && stderr.contains(want),
            "{name}: {stderr}\nwant: {want}"
        );
    }
    let missing = env.root().join("no-such-scenario.yaml");
    let (output, _, stderr) = run(&env, &[missing.to_str().expect("utf-8")]);
    assert!(!output.status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("no-such-scenario.yaml: cannot read the scenario"),
        "{stderr}"
    );
}

#[test]
fn runs_against_an_existing_cluster_with_kubeconfig() {
    let cluster = TestCluster::start(ksim_binary());
    let scenario = write(
        cluster.env(),
        "existing.yaml",
        r#"apiVersion: ksim.io/v1alpha1
kind: Scenario
metadata: {name: existing}
spec:
  clock: real
  steps:
  - apply: |
      apiVersion: v1
      kind: ConfigMap
      metadata: {name: marker}
      data: {from: scenario}
  - kubectl: get configmap marker -o jsonpath={.data.from}
    expect: {outputContains: scenario}
  - waitFor: {get: cm marker, jq: '.data.from == "scenario"', timeout: 10s}
"#,
    );
    let output = cluster.ksim(&[
        "run",
        scenario.to_str().expect("utf-8"),
        "--kubeconfig",
        cluster.kubeconfig().to_str().expect("utf-8"),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.ends_with("PASS existing: 3 passed, 0 failed, 0 skipped\n"),
        "{stdout}"
    );
    // The object is in the cluster the kubeconfig names.
    let marker = cluster.kubectl(&["get", "configmap", "marker", "-o", "jsonpath={.data.from}"]);
    assert_eq!(marker.success().stdout, "scenario");
}

/// Deletes a second cluster of a test's environment when the test ends.
struct Delete<'a>(&'a KsimEnv, &'a str);

impl Drop for Delete<'_> {
    fn drop(&mut self) {
        let _ = self.0.ksim(&["delete", "cluster", "--name", self.1]);
    }
}

#[test]
fn runs_against_a_named_cluster_on_its_virtual_clock() {
    let cluster = TestCluster::start_with(
        ksim_binary(),
        "lab",
        &[
            "--clock",
            "virtual",
            "--clock-start",
            "2026-01-01T00:00:00Z",
            "--seed",
            "3",
        ],
    );
    // A second cluster, named as ksim's default and now the current
    // context: neither kubectl nor ksim steps may reach it.
    let env = cluster.env();
    let decoy = env.ksim(&["create", "cluster"]);
    assert!(
        decoy.status.success(),
        "{}",
        String::from_utf8_lossy(&decoy.stderr)
    );
    let _decoy = Delete(env, "ksim");
    let scenario = write(
        env,
        "named.yaml",
        r#"apiVersion: ksim.io/v1alpha1
kind: Scenario
metadata: {name: named}
spec:
  steps:
  - ksim: scale node --replicas 2
  - kubectl: get nodes -o name
    expect: {outputContains: node/node-000001}
  - name: the nodes' leases, renewed on the cluster's clock
    waitFor: {get: leases -n kube-node-lease, jq: '.items | length == 2', timeout: 1m}
  - advance: 10m
  - ksim: clock
    expect: {outputContains: "2026-01-01T00:10:00Z (virtual clock, seed 3"}
  - assert: {get: lease node-000000 -n kube-node-lease, jq: '.spec.renewTime >= "2026-01-01T00:09:50"'}
"#,
    );
    let output = env.ksim(&["run", scenario.to_str().expect("utf-8"), "--name", "lab"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("clock virtual"), "{stdout}");
    let clock_step = stdout
        .lines()
        .find(|line| line.contains("5. ksim clock"))
        .expect("the clock step's line");
    assert!(clock_step.trim_start().starts_with("10m0s"), "{stdout}");
    assert!(
        stdout.ends_with("PASS named: 6 passed, 0 failed, 0 skipped\n"),
        "{stdout}"
    );
    // The steps reached cluster lab, whose clock moved; the decoy has no nodes.
    let clock = env.ksim(&["clock", "--name", "lab"]);
    assert!(
        String::from_utf8_lossy(&clock.stdout).starts_with("2026-01-01T00:10:00Z"),
        "{}",
        String::from_utf8_lossy(&clock.stdout)
    );
    let lab = env.kubectl(&["--context", "ksim-lab", "get", "nodes", "-o", "name"]);
    assert_eq!(lab.success().stdout, "node/node-000000\nnode/node-000001\n");
    let other = env.kubectl(&["--context", "ksim-ksim", "get", "nodes", "-o", "name"]);
    assert_eq!(other.success().stdout, "");
}

#[test]
fn a_named_cluster_on_the_real_clock_refuses_advance_before_anything_runs() {
    let cluster = TestCluster::start_api_only(ksim_binary());
    let scenario = write(
        cluster.env(),
        "advance.yaml",
        r#"apiVersion: ksim.io/v1alpha1
kind: Scenario
metadata: {name: advance}
spec:
  steps:
  - apply: |
      apiVersion: v1
      kind: ConfigMap
      metadata: {name: marker}
  - advance: 10m
"#,
    );
    let output = cluster.ksim(&["run", scenario.to_str().expect("utf-8"), "--name", "ksim"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.lines().collect::<Vec<_>>(),
        [format!(
            "error: {}: step 2: advance: cluster \"ksim\" runs on the real clock; only a virtual clock can be advanced",
            scenario.display()
        )],
        "{stderr}"
    );
    // Nothing ran.
    let marker = cluster.kubectl(&["get", "configmap", "marker"]);
    assert!(marker.failure().stderr.contains("not found"));
    // A cluster that is not running is named as missing.
    let output = cluster.ksim(&["run", scenario.to_str().expect("utf-8"), "--name", "nope"]);
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "error: cluster \"nope\" does not exist\n"
    );
}

/// Two runs of a scenario with a seed print the same report, byte for byte.
#[test]
fn two_runs_with_a_seed_print_identical_reports() {
    let env = KsimEnv::new(ksim_binary());
    write(&env, "nginx.yaml", NGINX);
    let scenario = write(
        &env,
        "virtual.yaml",
        &PASSING.replace("clock: real", "clock: virtual").replace(
            "  - assert: {evictions: {count: 0}}\n",
            "  - advance: 10m\n  - assert: {evictions: {count: 0}}\n",
        ),
    );
    let path = scenario.to_str().expect("utf-8");
    let (first, text, stderr) = run(&env, &[path]);
    assert!(first.status.success(), "{text}\n{stderr}");
    assert!(text.contains("clock virtual, seed 7"), "{text}");
    assert!(text.contains("10m0s   12. advance 10m0s  ok"), "{text}");
    let (_, again, _) = run(&env, &[path]);
    assert_eq!(text, again);
    let (_, json, _) = run(&env, &[path, "-o", "json"]);
    let (_, json_again, _) = run(&env, &[path, "-o", "json"]);
    assert_eq!(json, json_again);
}

#[test]
fn the_cluster_spec_is_checked_before_anything_runs_and_applied() {
    let env = KsimEnv::new(ksim_binary());
    let head =
        "apiVersion: ksim.io/v1alpha1\nkind: Scenario\nmetadata: {name: c}\nspec:\n  clock: real\n";
    let bad = write(
        &env,
        "bad-autoscaler.yaml",
        &format!("{head}  cluster: {{autoscaler: {{scanIntervl: 10s}}}}\n  steps: []\n"),
    );
    let (output, stdout, stderr) = run(&env, &[bad.to_str().expect("utf-8")]);
    assert!(!output.status.success());
    assert_eq!(stdout, "");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(
            "bad-autoscaler.yaml: spec.cluster.autoscaler: unexpected argument '--scan-intervl"
        ),
        "{stderr}"
    );
    let no_scheduler = write(
        &env,
        "no-scheduler.yaml",
        &format!(
            r#"{head}  cluster: {{disable: [scheduler, dpdb]}}
  steps:
  - ksim: scale node --replicas 1
  - apply: |
      apiVersion: v1
      kind: Pod
      metadata: {{name: lonely}}
      spec: {{containers: [{{name: c, image: x}}]}}
  - waitFor: {{get: node node-000000, jq: '.status.conditions[] | select(.type == "Ready") | .status == "True"', timeout: 30s}}
  - assert: {{pending: {{count: 1}}}}
  - assert: {{events: {{reason: Scheduled, count: 0}}}}
"#
        ),
    );
    let (output, stdout, stderr) = run(&env, &[no_scheduler.to_str().expect("utf-8")]);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.ends_with("PASS c: 5 passed, 0 failed, 0 skipped\n"),
        "{stdout}"
    );
}
