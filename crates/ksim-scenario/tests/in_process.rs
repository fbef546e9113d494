//! ksim-scenario against an API server in process (no components): `get:`
//! through discovery, `apply:` and `delete:`, and each built-in assertion's
//! verdict and readable failure, through [`ksim_scenario::run`].

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use ksim_scenario::{GetArgs, Outcome, Report, Resolver, Scenario, Target};
use ksim_testutils::builders;
use ksim_testutils::in_process::InProcessCluster;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// ksim-testutils' in-process cluster (the API server alone), with the
/// objects and scenario runs these tests need.
struct Cluster(InProcessCluster);

impl std::ops::Deref for Cluster {
    type Target = InProcessCluster;
    fn deref(&self) -> &InProcessCluster {
        &self.0
    }
}

impl Cluster {
    fn start() -> Self {
        Cluster(InProcessCluster::new())
    }

    fn target(&self) -> Target {
        Target {
            client: self.client.clone(),
            kubeconfig: PathBuf::from("/nonexistent/kubeconfig"),
            env: Vec::new(),
            ksim: PathBuf::from("/nonexistent/ksim"),
            kubectl: PathBuf::from("/nonexistent/kubectl"),
            clock: ksim_runtime::Clock::real().into(),
        }
    }

    /// A node labelled `zone` (and, by the builder, its hostname), with no
    /// status.
    async fn node(&self, name: &str, zone: &str) {
        let mut node = builders::node(name).label("zone", zone).obj();
        node.status = None;
        self.create_node(&node).await;
    }

    async fn pod(&self, name: &str, node: Option<&str>) {
        let mut pod = builders::pod(name).image("x").label("app", "web");
        if let Some(node) = node {
            pod = pod.node(node);
        }
        self.create_pod(&pod.obj()).await;
    }

    async fn run(&self, steps: &str) -> Report {
        let text = format!(
            "apiVersion: ksim.io/v1alpha1\nkind: Scenario\nmetadata: {{name: t}}\nspec:\n  clock: real\n  steps:\n{steps}"
        );
        let scenario = Scenario::parse(Path::new("t.yaml"), &text).expect("valid scenario");
        ksim_scenario::run(&scenario, &self.target()).await
    }
}

fn outcomes(report: &Report) -> Vec<Outcome> {
    report.steps.iter().map(|s| s.outcome).collect()
}

#[tokio::test]
async fn get_answers_what_kubectl_get_o_json_prints() {
    let cluster = Cluster::start();
    cluster.node("n1", "a").await;
    cluster.pod("p1", Some("n1")).await;
    let resolver = Resolver::new(cluster.client.clone());
    let get = |line: &str| GetArgs::parse(line).expect("args");

    let list = resolver.get(&get("po -l app=web")).await.expect("list");
    assert_eq!(list["kind"], "List");
    assert_eq!(list["apiVersion"], "v1");
    assert_eq!(list["metadata"], json!({"resourceVersion": ""}));
    assert_eq!(list["items"][0]["kind"], "Pod");
    assert_eq!(list["items"][0]["apiVersion"], "v1");
    assert_eq!(list["items"][0]["metadata"]["name"], "p1");

    let none = resolver.get(&get("pods -l app=other")).await.expect("list");
    assert_eq!(none["items"], json!([]));

    let pod = resolver.get(&get("pod p1")).await.expect("object");
    assert_eq!(pod["kind"], "Pod");
    assert_eq!(pod["metadata"]["name"], "p1");
    let node = resolver.get(&get("node/n1")).await.expect("object");
    assert_eq!(node["metadata"]["labels"]["zone"], "a");

    let both = resolver.get(&get("pod/p1 no/n1")).await.expect("list");
    assert_eq!(both["items"].as_array().map(Vec::len), Some(2));

    let budgets = resolver
        .get(&get("pdb -A"))
        .await
        .expect("short name of a group");
    assert_eq!(budgets["kind"], "List");

    let missing = resolver
        .get(&get("deploy/web"))
        .await
        .expect_err("not found");
    assert_eq!(
        missing,
        "Error from server (NotFound): deployments.apps \"web\" not found"
    );
    let unknown = resolver
        .get(&get("widgets"))
        .await
        .expect_err("no such type");
    assert_eq!(
        unknown,
        "error: the server doesn't have a resource type \"widgets\""
    );
}

#[tokio::test]
async fn apply_delete_and_jq_steps() {
    let cluster = Cluster::start();
    let report = cluster
        .run(
            r#"  - apply: |
      apiVersion: v1
      kind: ConfigMap
      metadata: {name: settings}
      data: {mode: fast}
      ---
      apiVersion: policy/v1
      kind: PodDisruptionBudget
      metadata: {name: budget}
      spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}
  - assert: {get: cm settings, jq: '.data.mode == "fast"'}
  - assert: {get: pdb, jq: '.items | map(.metadata.name) == ["budget"]'}
  - apply: |
      apiVersion: v1
      kind: ConfigMap
      metadata: {name: settings}
      data: {mode: slow}
  - assert: {get: cm settings, jq: '.data.mode == "slow"'}
  - delete: cm settings
  - delete: cm settings --ignore-not-found
  - assert: {get: cm, jq: '.items | length == 0'}
  - assert: {get: cm settings, jq: 'true'}
  - delete: pdb nothing-here
  - assert: {get: pdb, jq: 'true'}
"#,
        )
        .await;
    use Outcome::*;
    assert_eq!(
        outcomes(&report),
        [
            Passed, Passed, Passed, Passed, Passed, Passed, Passed, Passed, Failed, Failed, Skipped
        ],
        "{}",
        report.timeline()
    );
    assert_eq!(
        report.steps[8].seen.as_deref(),
        Some("Error from server (NotFound): configmaps \"settings\" not found")
    );
    assert!(!report.passed);
}

#[tokio::test]
async fn spread_and_placement_count_bound_pods_per_domain() {
    let cluster = Cluster::start();
    for (node, zone) in [("n1", "a"), ("n2", "a"), ("n3", "b")] {
        cluster.node(node, zone).await;
    }
    cluster.pod("p1", Some("n1")).await;
    cluster.pod("p2", Some("n2")).await;
    cluster.pod("p3", Some("n1")).await;
    cluster.pod("p4", None).await;
    let report = cluster
        .run(
            "  - assert: {spread: {selector: app=web, topologyKey: zone, maxSkew: 3}}
  - assert: {spread: {selector: app=web, topologyKey: zone, maxSkew: 2}}
  - assert: {spread: {selector: app=web, topologyKey: zone, maxSkew: 1}}
  - assert: {placement: {selector: app=web, counts: {n1: 2, n2: 1, n3: 0}}}
  - assert: {placement: {selector: app=web, topologyKey: zone, counts: {a: 3, b: 0}}}
  - assert: {placement: {selector: app=web, topologyKey: zone, counts: {a: 2}}}
",
        )
        .await;
    use Outcome::*;
    assert_eq!(
        outcomes(&report),
        [Passed, Failed, Failed, Passed, Passed, Failed],
        "{}",
        report.timeline()
    );
    assert_eq!(report.steps[2].seen.as_deref(), Some("skew 3: a=3, b=0"));
    assert_eq!(
        report.steps[2].expected.as_deref(),
        Some("pods app=web spread by zone with skew at most 1")
    );
    assert_eq!(report.steps[5].seen.as_deref(), Some("a=3"));
    assert_eq!(
        report.steps[5].expected.as_deref(),
        Some("pods app=web by zone: a=2")
    );
}

#[tokio::test]
async fn pending_reads_the_scheduler_message() {
    let cluster = Cluster::start();
    cluster.node("n1", "a").await;
    cluster.pod("bound", Some("n1")).await;
    cluster.pod("waiting", None).await;
    let message = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.";
    Api::<Pod>::namespaced(cluster.client.clone(), "default")
        .patch_status(
            "waiting",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Pending", "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
            }]}})),
        )
        .await
        .expect("status");
    let report = cluster
        .run(
            "  - assert: {pending: {count: 1, message: '0/1 nodes are available: 1 Insufficient cpu.'}}
  - assert: {pending: {}}
  - assert: {pending: {count: 2}}
  - assert: {pending: {message: Insufficient memory}}
",
        )
        .await;
    use Outcome::*;
    assert_eq!(
        outcomes(&report),
        [Passed, Passed, Failed, Failed],
        "{}",
        report.timeline()
    );
    assert_eq!(
        report.steps[2].seen.as_deref(),
        Some(format!("1 pending pod; 1: {message}").as_str())
    );
    assert_eq!(
        report.steps[3].expected.as_deref(),
        Some("a pending pod with the scheduler's message containing \"Insufficient memory\"")
    );
}

#[tokio::test]
async fn evictions_count_what_the_api_server_recorded_and_no_event_is_recorded() {
    let cluster = Cluster::start();
    cluster.node("n1", "a").await;
    cluster.pod("p1", Some("n1")).await;
    cluster.pod("p2", Some("n1")).await;
    let evict = |name: &'static str, by: &'static str| {
        let client = cluster.client.clone();
        async move {
            let body = json!({
                "apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": "default", "annotations": {"requested-by": by}},
            });
            let request =
                http::Request::post(format!("/api/v1/namespaces/default/pods/{name}/eviction"))
                    .header("Content-Type", "application/json")
                    .body(serde_json::to_vec(&body).expect("json"))
                    .expect("request");
            client
                .request::<serde_json::Value>(request)
                .await
                .expect("evicted");
        }
    };
    evict("p1", "sigs.k8s.io/descheduler").await;
    evict("p2", "kubectl drain").await;
    let report = cluster
        .run(
            "  - assert: {evictions: {count: 2}}
  - assert: {evictions: {count: 1, by: descheduler}}
  - assert: {evictions: {count: 1, by: drain, pod: p2}}
  - assert: {evictions: {count: 0, refused: 0}}
  - assert: {events: {reason: Evicted, count: 0}}
  - assert: {evictions: {count: 1, by: sigs.k8s.io/descheduler, pod: p1}}
  - assert: {evictions: {atLeast: 5}}
  - assert: {events: {reason: NodeNotReady}}
",
        )
        .await;
    use Outcome::*;
    assert_eq!(
        outcomes(&report),
        [
            Passed, Passed, Passed, Failed, Passed, Passed, Failed, Failed
        ],
        "{}",
        report.timeline()
    );
    assert_eq!(
        report.steps[3].seen.as_deref(),
        Some("2 evictions (descheduler=1, drain=1), 0 refused")
    );
    assert_eq!(
        report.steps[3].expected.as_deref(),
        Some("0 evictions and 0 refusals")
    );
    assert_eq!(
        report.steps[6].seen.as_deref(),
        Some("2 evictions (descheduler=1, drain=1)")
    );
    assert_eq!(
        report.steps[7].seen.as_deref(),
        Some("0 matching; no NodeNotReady event at all")
    );
}

/// A scenario on a virtual clock standing at 2026-01-01T00:00:00Z, with a
/// task that creates ConfigMap `late` 5 minutes (cluster time) in.
async fn run_virtual(steps: &str) -> Report {
    let mut cluster = Cluster::start();
    let start = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .expect("time")
        .with_timezone(&chrono::Utc);
    let clock = ksim_runtime::Clock::virtual_at(start);
    let timer = clock.clone();
    let client = cluster.client.clone();
    cluster.0.spawn(async move {
        timer.sleep(std::time::Duration::from_secs(300)).await;
        let _busy = timer.busy();
        let cm: k8s_openapi::api::core::v1::ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": "late"}})).expect("cm");
        Api::namespaced(client, "default")
            .create(&PostParams::default(), &cm)
            .await
            .expect("create");
    });
    let text = format!(
        "apiVersion: ksim.io/v1alpha1\nkind: Scenario\nmetadata: {{name: v}}\nspec:\n  steps:\n{steps}"
    );
    let scenario = Scenario::parse(Path::new("v.yaml"), &text).expect("valid scenario");
    let target = Target {
        clock: clock.into(),
        ..cluster.target()
    };
    ksim_scenario::run(&scenario, &target).await
}

fn times(report: &Report) -> Vec<&str> {
    report.steps.iter().map(|s| s.at.as_str()).collect()
}

#[tokio::test]
async fn wait_for_on_a_virtual_clock_fires_timers_until_the_check_holds() {
    let report = run_virtual(
        "  - waitFor: {get: ns default, jq: '.metadata.name == \"default\"', timeout: 1h}
  - waitFor: {get: cm late, jq: 'true', timeout: 10m}
  - advance: 1h30m
  - assert: {get: cm late, jq: '.metadata.name == \"late\"'}
",
    )
    .await;
    assert!(report.passed, "{}", report.timeline());
    assert_eq!(report.clock, "virtual");
    // No timer needed: the clock stays; then it moves to the 5-minute timer.
    assert_eq!(times(&report), ["0s", "5m0s", "1h35m0s", "1h35m0s"]);
}

#[tokio::test]
async fn wait_for_fails_at_once_when_no_timer_falls_due_before_its_timeout() {
    let report = run_virtual(
        "  - waitFor: {get: cm late, jq: 'true', timeout: 2m}
  - advance: 1m
",
    )
    .await;
    assert_eq!(outcomes(&report), [Outcome::Failed, Outcome::Skipped]);
    assert_eq!(times(&report), ["0s", "0s"]);
    assert_eq!(
        report.steps[0].expected.as_deref(),
        Some("true to yield true within 2m0s")
    );
    assert_eq!(
        report.steps[0].seen.as_deref(),
        Some(
            "Error from server (NotFound): configmaps \"late\" not found (no timer falls due within 2m0s of cluster time to change it)"
        )
    );
}

#[tokio::test]
async fn virtual_runs_report_the_same_timeline_every_time() {
    let steps = "  - waitFor: {get: cm late, jq: 'true', timeout: 10m}
  - advance: 10m
  - assert: {get: cm, jq: '.items | length == 2'}
";
    let first = run_virtual(steps).await;
    let second = run_virtual(steps).await;
    assert!(!first.passed, "one ConfigMap exists: {}", first.timeline());
    assert_eq!(first.timeline(), second.timeline());
    assert_eq!(
        ksim_scenario::reports_json(&[first]),
        ksim_scenario::reports_json(&[second])
    );
}

#[tokio::test]
async fn advance_on_a_real_clock_fails_the_step() {
    let cluster = Cluster::start();
    let text = "apiVersion: ksim.io/v1alpha1\nkind: Scenario\nmetadata: {name: r}\nspec:\n  steps:\n  - advance: 1m\n";
    let scenario = Scenario::parse(Path::new("r.yaml"), text).expect("virtual by default");
    let report = ksim_scenario::run(&scenario, &cluster.target()).await;
    assert_eq!(report.clock, "real");
    assert_eq!(outcomes(&report), [Outcome::Failed]);
    assert_eq!(
        report.steps[0].seen.as_deref(),
        Some("the cluster's clock is real; only a virtual clock can be advanced")
    );
}

#[tokio::test]
async fn advance_with_always_checks_after_every_timer() {
    let report = run_virtual(
        "  - advance: {by: 10m, always: {get: ns default, jq: '.metadata.name == \"default\"'}}
  - advance: {by: 10m, always: {get: cm never, jq: 'true'}}
",
    )
    .await;
    assert_eq!(
        outcomes(&report),
        [Outcome::Passed, Outcome::Failed],
        "{}",
        report.timeline()
    );
    assert_eq!(times(&report), ["10m0s", "10m0s"]);
    let report = run_virtual(
        "  - advance: {by: 10m, always: {get: cm, jq: '.items | map(select(.metadata.name == \"late\")) | length == 0'}}
",
    )
    .await;
    assert_eq!(
        outcomes(&report),
        [Outcome::Failed],
        "{}",
        report.timeline()
    );
    assert_eq!(times(&report), ["5m0s"]);
    assert_eq!(
        report.steps[0].expected.as_deref(),
        Some(
            ".items | map(select(.metadata.name == \"late\")) | length == 0 to yield true throughout 10m0s"
        )
    );
    assert!(
        report.steps[0]
            .seen
            .as_deref()
            .is_some_and(|s| s.starts_with("after 5m0s: ")),
        "{:?}",
        report.steps[0].seen
    );
}
