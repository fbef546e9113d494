//! End-to-end: every stand-alone component (`ksim kubelet`, `ksim
//! scheduler`, `ksim controllers`, `ksim deschedule`) run as its own process
//! against a `ksim create cluster` that lacks it, through `--kubeconfig` over
//! HTTP (the client every kubeconfig path builds, with client-go's retry
//! rule), checked with the real kubectl.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ksim_testutils::TestCluster;
use ksim_testutils::component::{Component, TAINTS_POLICY};

fn ksim_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ksim"))
}

#[test]
fn the_standalone_scheduler_binds_a_pod_through_a_kubeconfig() {
    let cluster = TestCluster::start_with(ksim_binary(), "ksim", &["--disable", "scheduler"]);
    cluster.scale_nodes(1);
    cluster
        .kubectl(&["run", "web", "--image=nginx", "--restart=Never"])
        .success();
    let scheduler = Component::start(&cluster, &["scheduler"]);
    let node = scheduler.wait_for(
        &cluster,
        &["get", "pod", "web", "-o", "jsonpath={.spec.nodeName}"],
        |out| !out.is_empty(),
    );
    assert_eq!(node, "node-000000");
    let events = scheduler.wait_for(
        &cluster,
        &[
            "get",
            "events",
            "--field-selector=reason=Scheduled",
            "-o",
            "name",
        ],
        |out| !out.is_empty(),
    );
    assert_eq!(events.lines().count(), 1, "{events}");
}

#[test]
fn the_standalone_kubelet_makes_a_node_ready_through_a_kubeconfig() {
    let cluster = TestCluster::start_with(ksim_binary(), "ksim", &["--disable", "kubelet"]);
    cluster
        .kubectl_stdin(
            &["create", "-f", "-"],
            r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "fake-1"}}"#,
        )
        .success();
    let kubelet = Component::start(&cluster, &["kubelet", "--manage-all-nodes"]);
    let ready = kubelet.wait_for(
        &cluster,
        &[
            "get",
            "node",
            "fake-1",
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="Ready")].status}"#,
        ],
        |out| out == "True",
    );
    assert_eq!(ready, "True");
}

#[test]
fn the_standalone_controllers_create_a_deployments_pods_through_a_kubeconfig() {
    let cluster = TestCluster::start_with(ksim_binary(), "ksim", &["--disable", "controllers"]);
    cluster
        .kubectl(&[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=2",
        ])
        .success();
    let controllers = Component::start(&cluster, &["controllers"]);
    let pods = controllers.wait_for(
        &cluster,
        &["get", "pods", "-l", "app=web", "-o", "name"],
        |out| out.lines().count() == 2,
    );
    assert!(pods.lines().all(|p| p.starts_with("pod/web-")), "{pods}");
    let available = controllers.wait_for(
        &cluster,
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.status.replicas}",
        ],
        |out| out == "2",
    );
    assert_eq!(available, "2");
}

/// A cluster with two nodes running a Deployment's two pods, both nodes
/// tainted NoSchedule after the pods started: the taints policy wants both
/// pods out (the descheduler needs at least two nodes to run a cycle).
fn tainted_deployment() -> (TestCluster, PathBuf) {
    let cluster = TestCluster::start(ksim_binary());
    cluster.scale_nodes(2);
    cluster
        .kubectl(&[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=2",
        ])
        .success();
    cluster.wait_for(
        &[
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[*].status.phase}",
        ],
        |out| out == "Running Running",
    );
    cluster
        .kubectl(&["taint", "node", "--all", "maintenance=true:NoSchedule"])
        .success();
    let policy = cluster.write_file("policy.yaml", TAINTS_POLICY);
    (cluster, policy)
}

/// Issue 12: the kubeconfig client retried the budget's 429 for minutes
/// and the descheduler printed nothing; upstream logs the refusal and goes on.
#[test]
fn the_descheduler_through_a_kubeconfig_under_a_refusing_budget_returns_promptly_with_the_log_line()
{
    let (cluster, policy) = tainted_deployment();
    cluster
        .kubectl(&[
            "create",
            "pdb",
            "web",
            "--selector=app=web",
            "--max-unavailable=0",
        ])
        .success();
    // The disruption controller has seen the budget (a budget it has not
    // seen is answered with Retry-After, which client-go does wait on).
    cluster.wait_for(
        &[
            "get",
            "pdb",
            "web",
            "-o",
            "jsonpath={.status.observedGeneration}/{.status.expectedPods}",
        ],
        |out| out == "1/2",
    );
    let policy = policy.to_str().expect("utf-8 path");
    let mut run = Component::start(&cluster, &["deschedule", "--policy", policy, "-o", "json"]);
    // Far above a cycle (well under a second) and far below kube's default
    // back-off (minutes): only a hang reaches it.
    let (status, stdout, logs) = run.wait(Duration::from_secs(60));
    assert!(status.success(), "{status}\n{stdout}\n{logs}");
    let refusals: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("Error evicting pod"))
        .collect();
    assert_eq!(refusals.len(), 2, "{logs}");
    for line in &refusals {
        assert!(
            line.contains(r#"error when evicting pod (ignoring) \"web-"#)
                || line.contains(r#"error when evicting pod (ignoring) "web-"#),
            "{line}"
        );
        assert!(
            line.contains("Cannot evict pod as it would violate the pod's disruption budget."),
            "{line}"
        );
    }
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("a JSON report");
    let results: Vec<&str> = report["evictions"]
        .as_array()
        .expect("evictions")
        .iter()
        .map(|e| e["result"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(results, ["Failed", "Failed"], "{report}");
    let pods = cluster.kubectl(&["get", "pods", "-l", "app=web", "-o", "name"]);
    assert_eq!(pods.success().stdout.lines().count(), 2);
}

#[test]
fn the_standalone_descheduler_evicts_through_a_kubeconfig() {
    let (cluster, policy) = tainted_deployment();
    let before = cluster
        .kubectl(&["get", "pods", "-l", "app=web", "-o", "name"])
        .success()
        .stdout
        .clone();
    let policy = policy.to_str().expect("utf-8 path");
    let mut run = Component::start(&cluster, &["deschedule", "--policy", policy, "-o", "json"]);
    let (status, stdout, logs) = run.wait(Duration::from_secs(60));
    assert!(status.success(), "{status}\n{stdout}\n{logs}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("a JSON report");
    let results: Vec<&str> = report["evictions"]
        .as_array()
        .expect("evictions")
        .iter()
        .map(|e| e["result"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(results, ["Evicted", "Evicted"], "{report}\n{logs}");
    // The evicted pods are gone (the ReplicaSet makes new ones, which stay
    // Pending: every node is tainted).
    cluster.wait_for(&["get", "pods", "-l", "app=web", "-o", "name"], |out| {
        before.lines().all(|pod| !out.lines().any(|l| l == pod))
    });
}

#[test]
fn a_cluster_name_without_a_context_is_one_line_and_exit_1() {
    let cluster = TestCluster::start_api_only(ksim_binary());
    let output = cluster.ksim(&["scale", "node", "--replicas", "1", "--name", "nope"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let kubeconfig = cluster.kubeconfig().display().to_string();
    assert_eq!(
        stderr.trim_end(),
        format!("error: cluster \"nope\" not found: no context \"ksim-nope\" in {kubeconfig}")
    );
}
