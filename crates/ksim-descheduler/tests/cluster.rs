//! In-process cluster tests: the descheduler against ksim's API server
//! through the in-process client. Most run the API server alone (pods are
//! owned by a ReplicaSet that does not exist, so evicted pods simply go
//! away); the topology-spread rebalancing runs the whole cluster in process
//! (kubelet simulator, controllers, scheduler) so that evicted pods come
//! back and are placed again.

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use ksim_descheduler::evictor::EvictionResult;
use ksim_descheduler::{CycleReport, Descheduler, DeschedulerPolicy};
use ksim_testutils::builders::{NodeBuilder, PodBuilder};
use ksim_testutils::in_process::{InProcessCluster, eventually};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{roomy_node, web_pod};

/// Everything logged by the tests of this binary (they run in parallel:
/// each looks for its own pod names).
fn logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = Arc::clone(&buffer);
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || LogWriter(Arc::clone(&writer)))
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        buffer
    })
    .clone()
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn log_lines_with(needle: &str) -> Vec<String> {
    let logs = logs();
    let text = String::from_utf8_lossy(&logs.lock().expect("log lock")).to_string();
    text.lines()
        .filter(|line| line.contains(needle))
        .map(str::to_string)
        .collect()
}

/// ksim-testutils' in-process cluster, with the objects and descheduling
/// cycles these tests need.
struct Cluster(InProcessCluster);

impl std::ops::Deref for Cluster {
    type Target = InProcessCluster;
    fn deref(&self) -> &InProcessCluster {
        &self.0
    }
}

impl Cluster {
    fn start() -> Self {
        logs();
        Cluster(InProcessCluster::new())
    }

    /// A cluster whose kubelet simulator, controllers and scheduler run in
    /// process as clients of the API server, as `ksim serve` wires them.
    fn start_with_components() -> Self {
        let mut cluster = Self::start();
        let kubelet = ksim_kubelet::KubeletSimulator::new(
            cluster.new_client(),
            ksim_kubelet::KubeletOptions::default(),
        );
        cluster.0.spawn(async move {
            if let Err(error) = kubelet.run().await {
                tracing::error!(%error, "the kubelet simulator stopped");
            }
        });
        cluster.0.spawn(ksim_controllers::run_controllers(
            cluster.new_client(),
            ksim_controllers::ALL_CONTROLLERS,
        ));
        let client = cluster.new_client();
        cluster.0.spawn(async move {
            let options = ksim_scheduler::scheduler::SchedulerOptions::default();
            if let Err(error) = ksim_scheduler::scheduler::run(client, options).await {
                tracing::error!(%error, "the scheduler stopped");
            }
        });
        cluster
    }

    async fn node(&self, node: NodeBuilder) {
        self.create_node(&node.obj()).await;
    }

    async fn patch_node(&self, name: &str, patch: serde_json::Value) {
        let api: Api<Node> = Api::all(self.client.clone());
        api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("patch node");
    }

    async fn pod(&self, pod: PodBuilder) {
        self.create_pod(&pod.obj()).await;
    }

    /// The nodes of the live (not terminating) Running pods labelled
    /// `app=<app>`, polled until `done` holds.
    async fn running_pod_nodes_until(
        &self,
        app: &str,
        what: &str,
        done: impl Fn(&[String]) -> bool,
    ) -> Vec<String> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), "default");
        let params = ListParams::default().labels(&format!("app={app}"));
        eventually(what, || async {
            let mut nodes: Vec<String> = api
                .list(&params)
                .await
                .expect("list pods")
                .items
                .into_iter()
                .filter(|pod| pod.metadata.deletion_timestamp.is_none())
                .filter(|pod| {
                    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                })
                .filter_map(|pod| pod.spec.and_then(|spec| spec.node_name))
                .collect();
            nodes.sort();
            done(&nodes).then_some(nodes)
        })
        .await
    }

    async fn pod_names(&self) -> Vec<String> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), "default");
        let mut names: Vec<String> = api
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .into_iter()
            .filter(|pod| pod.metadata.deletion_timestamp.is_none())
            .filter_map(|pod| pod.metadata.name)
            .collect();
        names.sort();
        names
    }

    async fn deschedule(&self, policy: &str) -> CycleReport {
        let policy = DeschedulerPolicy::parse(policy).expect("valid policy");
        Descheduler::new(self.client.clone(), policy, false)
            .await
            .expect("descheduler")
            .run_once()
            .await
            .expect("cycle")
    }
}

fn taints_policy(extra: &str) -> String {
    format!(
        r#"
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
{extra}
profiles:
- name: taints
  pluginConfig:
  - name: RemovePodsViolatingNodeTaints
  plugins:
    deschedule:
      enabled: [RemovePodsViolatingNodeTaints]
"#
    )
}

fn evicted(report: &CycleReport) -> Vec<String> {
    let mut names: Vec<String> = report
        .evictions
        .iter()
        .filter(|r| r.result == EvictionResult::Evicted)
        .map(|r| r.pod.clone())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdb_at_its_minimum_blocks_every_eviction_and_the_log_says_why() {
    let cluster = Cluster::start();
    cluster
        .node(roomy_node("pdb-a").taint("maintenance", "", "NoSchedule"))
        .await;
    cluster.node(roomy_node("pdb-b")).await;
    for name in ["pdb-web-1", "pdb-web-2", "pdb-web-3"] {
        cluster.pod(web_pod(name, "pdb-a")).await;
    }
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(cluster.client.clone(), "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "web"}}},
    }))
    .expect("pdb");
    let created = pdbs
        .create(&PostParams::default(), &pdb)
        .await
        .expect("create pdb");
    pdbs.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "observedGeneration": created.metadata.generation,
            "disruptionsAllowed": 0, "currentHealthy": 3, "desiredHealthy": 3, "expectedPods": 3,
        }})),
    )
    .await
    .expect("pdb status");

    let report = cluster.deschedule(&taints_policy("")).await;

    assert_eq!(report.total_evicted, 0);
    assert_eq!(report.failed, 3, "{report:?}");
    assert_eq!(report.evictions.len(), 3, "{report:?}");
    for record in &report.evictions {
        assert_eq!(record.result, EvictionResult::Failed);
        let error = record.error.as_deref().unwrap_or_default();
        assert!(
            error.contains("Cannot evict pod as it would violate the pod's disruption budget."),
            "{error}"
        );
    }
    assert_eq!(
        cluster.pod_names().await,
        ["pdb-web-1", "pdb-web-2", "pdb-web-3"]
    );
    let lines = log_lines_with("pdb-web-1");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("Error evicting pod") && l.contains("disruption budget")),
        "{lines:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_node_and_total_limits_bound_the_evictions() {
    let cluster = Cluster::start();
    for name in ["lim-a", "lim-b"] {
        cluster
            .node(roomy_node(name).taint("maintenance", "", "NoSchedule"))
            .await;
    }
    cluster.node(roomy_node("lim-c")).await;
    for node in ["lim-a", "lim-b"] {
        for index in 0..3 {
            cluster.pod(web_pod(&format!("{node}-{index}"), node)).await;
        }
    }

    let report = cluster
        .deschedule(&taints_policy("maxNoOfPodsToEvictPerNode: 2"))
        .await;
    assert_eq!(report.total_evicted, 4, "{report:?}");
    assert_eq!(
        evicted(&report),
        ["lim-a-0", "lim-a-1", "lim-b-0", "lim-b-1"]
    );
    assert_eq!(cluster.pod_names().await, ["lim-a-2", "lim-b-2"]);

    let report = cluster
        .deschedule(&taints_policy("maxNoOfPodsToEvictTotal: 1"))
        .await;
    assert_eq!(report.total_evicted, 1, "{report:?}");
    assert_eq!(cluster.pod_names().await.len(), 1);
    let lines = log_lines_with("Number of evictions/requests");
    assert!(
        lines.iter().any(|l| l.contains("totalEvicted=1")),
        "{lines:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_loses_its_label_has_its_affine_pods_evicted_with_an_event() {
    let cluster = Cluster::start();
    cluster.node(roomy_node("aff-a").label("zone", "x")).await;
    cluster.node(roomy_node("aff-b").label("zone", "y")).await;
    cluster
        .pod(web_pod("aff-web", "aff-a").node_affinity_in("zone", &["x"]))
        .await;
    let policy = r#"
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: affinity
  pluginConfig:
  - name: RemovePodsViolatingNodeAffinity
    args:
      nodeAffinityType: [requiredDuringSchedulingIgnoredDuringExecution]
  plugins:
    deschedule:
      enabled: [RemovePodsViolatingNodeAffinity]
"#;
    let report = cluster.deschedule(policy).await;
    assert_eq!(report.total_evicted, 0, "the pod's node still matches");

    // The labels move: aff-a is no longer in zone x, aff-b is.
    cluster
        .patch_node("aff-a", json!({"metadata": {"labels": {"zone": "y"}}}))
        .await;
    cluster
        .patch_node("aff-b", json!({"metadata": {"labels": {"zone": "x"}}}))
        .await;
    let report = cluster.deschedule(policy).await;
    assert_eq!(evicted(&report), ["aff-web"]);
    assert!(cluster.pod_names().await.is_empty());
    let lines = log_lines_with("aff-web");
    assert!(
        lines.iter().any(|l| l.contains("Evicted pod")
            && l.contains("strategy=\"RemovePodsViolatingNodeAffinity\"")
            && l.contains("pod=\"default/aff-web\"")
            && l.contains("node=\"aff-a\"")
            && l.contains("profile=\"affinity\"")),
        "{lines:?}"
    );

    let events: Api<Event> = Api::namespaced(cluster.client.clone(), "default");
    // The descheduler's own event (action Descheduled) on the pod.
    let event = eventually("the descheduler's event", || async {
        let list = events.list(&ListParams::default()).await.expect("events");
        list.items.into_iter().find(|event| {
            event.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("aff-web")
                && event.action.as_deref() == Some("Descheduled")
        })
    })
    .await;
    assert_eq!(event.type_.as_deref(), Some("Normal"));
    assert_eq!(
        event.reason.as_deref(),
        Some("RemovePodsViolatingNodeAffinity")
    );
    assert_eq!(event.action.as_deref(), Some("Descheduled"));
    assert_eq!(
        event.note.as_deref(),
        Some("pod eviction from aff-a node by sigs.k8s.io/descheduler")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_tainted_after_its_pods_started_loses_the_intolerant_ones() {
    let cluster = Cluster::start();
    cluster.node(roomy_node("taint-a")).await;
    cluster.node(roomy_node("taint-b")).await;
    cluster.pod(web_pod("taint-plain", "taint-a")).await;
    cluster
        .pod(web_pod("taint-tolerant", "taint-a").toleration("gpu", "Exists", "", "NoSchedule"))
        .await;
    assert_eq!(
        cluster.deschedule(&taints_policy("")).await.total_evicted,
        0
    );

    cluster
        .patch_node(
            "taint-a",
            json!({"spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}]}}),
        )
        .await;
    let report = cluster.deschedule(&taints_policy("")).await;
    assert_eq!(evicted(&report), ["taint-plain"]);
    assert_eq!(cluster.pod_names().await, ["taint-tolerant"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_with_one_ready_node_is_skipped_with_upstreams_message() {
    let cluster = Cluster::start();
    cluster
        .node(roomy_node("lonely").taint("k", "", "NoSchedule"))
        .await;
    cluster.pod(web_pod("lonely-web", "lonely")).await;
    let report = cluster.deschedule(&taints_policy("")).await;
    assert!(report.skipped.is_some());
    assert_eq!(cluster.pod_names().await, ["lonely-web"]);
    let lines = log_lines_with("Skipping descheduling cycle: requires >=2 nodes");
    assert!(!lines.is_empty());
}

const SPREAD_POLICY: &str = r#"
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: spread
  pluginConfig:
  - name: RemovePodsViolatingTopologySpreadConstraint
    args:
      constraints: [DoNotSchedule, ScheduleAnyway]
  plugins:
    balance:
      enabled: [RemovePodsViolatingTopologySpreadConstraint]
"#;

fn count_on(nodes: &[String], node: &str) -> usize {
    nodes.iter().filter(|n| *n == node).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_skewed_3_to_1_with_schedule_anyway_spread_ends_2_to_2_after_one_cycle() {
    let cluster = Cluster::start_with_components();
    for name in ["spread-a", "spread-b"] {
        // The builder labels kubernetes.io/hostname.
        cluster.node(roomy_node(name)).await;
    }
    // Pods can only start on spread-a while spread-b is cordoned.
    cluster
        .patch_node("spread-b", json!({"spec": {"unschedulable": true}}))
        .await;
    let deployments: Api<Deployment> = Api::namespaced(cluster.client.clone(), "default");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "spread"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "spread"}},
            "template": {
                "metadata": {"labels": {"app": "spread"}},
                "spec": {
                    "containers": [{"name": "c", "image": "nginx",
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
                    "topologySpreadConstraints": [{
                        "maxSkew": 1,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": {"app": "spread"}},
                    }],
                },
            },
        },
    }))
    .expect("deployment");
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create deployment");
    cluster
        .running_pod_nodes_until("spread", "3 running pods on spread-a", |nodes| {
            nodes.len() == 3 && count_on(nodes, "spread-a") == 3
        })
        .await;
    // Uncordoned, the fourth replica goes to the empty node: 3/1.
    cluster
        .patch_node("spread-b", json!({"spec": {"unschedulable": false}}))
        .await;
    deployments
        .patch(
            "spread",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .expect("scale to 4");
    let skewed = cluster
        .running_pod_nodes_until("spread", "4 running pods", |nodes| nodes.len() == 4)
        .await;
    assert_eq!(
        (count_on(&skewed, "spread-a"), count_on(&skewed, "spread-b")),
        (3, 1),
        "{skewed:?}"
    );

    let report = cluster.deschedule(SPREAD_POLICY).await;

    assert_eq!(report.total_evicted, 1, "{report:?}");
    let record = &report.evictions[0];
    assert_eq!(record.result, EvictionResult::Evicted);
    assert_eq!(record.node, "spread-a");
    assert_eq!(record.profile, "spread");
    assert_eq!(record.plugin, "RemovePodsViolatingTopologySpreadConstraint");
    let lines = log_lines_with(&record.pod);
    assert!(
        lines.iter().any(|l| l.contains("Evicted pod")
            && l.contains("strategy=\"RemovePodsViolatingTopologySpreadConstraint\"")
            && l.contains("node=\"spread-a\"")
            && l.contains("profile=\"spread\"")),
        "{lines:?}"
    );
    // The ReplicaSet recreates the pod and the scheduler places it on the
    // node with fewer replicas: within maxSkew.
    let balanced = cluster
        .running_pod_nodes_until("spread", "2 running pods on each node", |nodes| {
            nodes.len() == 4 && count_on(nodes, "spread-a") == 2 && count_on(nodes, "spread-b") == 2
        })
        .await;
    assert_eq!(balanced.len(), 4);
    // Balanced now: a second cycle evicts nothing.
    assert_eq!(cluster.deschedule(SPREAD_POLICY).await.total_evicted, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_with_claims_of_protected_storage_classes_are_kept() {
    let cluster = Cluster::start();
    cluster.node(roomy_node("pvc-a")).await;
    cluster.node(roomy_node("pvc-b")).await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(cluster.client.clone(), "default");
    for (name, class) in [("fast-data", "fast"), ("slow-data", "slow")] {
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": class,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }))
        .expect("claim");
        claims
            .create(&PostParams::default(), &claim)
            .await
            .expect("create claim");
    }
    for (name, claim) in [
        ("pvc-fast", "fast-data"),
        ("pvc-slow", "slow-data"),
        ("pvc-missing", "no-such-claim"),
    ] {
        cluster
            .pod(web_pod(name, "pvc-a").claim_volume("data", claim))
            .await;
    }
    cluster.pod(web_pod("pvc-none", "pvc-a")).await;
    cluster
        .patch_node(
            "pvc-a",
            json!({"spec": {"taints": [{"key": "retired", "effect": "NoSchedule"}]}}),
        )
        .await;

    let policy = r#"
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: storage
  pluginConfig:
  - name: DefaultEvictor
    args:
      podProtections:
        extraEnabled: [PodsWithPVC]
        config:
          PodsWithPVC:
            protectedStorageClasses:
            - name: fast
  - name: RemovePodsViolatingNodeTaints
  plugins:
    deschedule:
      enabled: [RemovePodsViolatingNodeTaints]
"#;
    let report = cluster.deschedule(policy).await;
    assert_eq!(evicted(&report), ["pvc-none", "pvc-slow"], "{report:?}");
    assert_eq!(cluster.pod_names().await, ["pvc-fast", "pvc-missing"]);
}
