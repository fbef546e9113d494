//! The scheduler against the API server through the in-process client:
//! placement by each constraint type, spread across labelled domains, the
//! FailedScheduling message, pods placed when room appears, preemption.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use ksim_scheduler::scheduler::{SchedulerOptions, run};
use ksim_testutils::builders::{NodeBuilder, PodBuilder};
use ksim_testutils::in_process::{InProcessCluster, eventually};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use support::{cpu_node, cpu_pod};

/// ksim-testutils' in-process cluster with the scheduler running on it.
struct Cluster(InProcessCluster);

impl std::ops::Deref for Cluster {
    type Target = InProcessCluster;
    fn deref(&self) -> &InProcessCluster {
        &self.0
    }
}

fn start() -> Cluster {
    start_with(SchedulerOptions::default())
}

fn start_with(options: SchedulerOptions) -> Cluster {
    let mut cluster = InProcessCluster::new();
    let client = cluster.new_client();
    cluster.spawn(async move {
        let _ = run(client, options).await;
    });
    Cluster(cluster)
}

impl Cluster {
    async fn add_node(&self, node: NodeBuilder) {
        self.create_node(&node.obj()).await;
    }

    async fn add_pod(&self, pod: PodBuilder) {
        self.create_pod(&pod.obj()).await;
    }

    async fn pod(&self, name: &str) -> Option<Pod> {
        Api::<Pod>::namespaced(self.client.clone(), "default")
            .get_opt(name)
            .await
            .expect("get pod")
    }

    /// Waits until the pod is bound; its node.
    async fn node_of(&self, name: &str) -> String {
        eventually(&format!("pod {name} scheduled"), || async {
            self.pod(name).await.and_then(|p| p.spec?.node_name)
        })
        .await
    }

    async fn events_of(&self, pod: &str, reason: &str) -> Vec<Event> {
        Api::<Event>::namespaced(self.client.clone(), "default")
            .list(&ListParams::default())
            .await
            .expect("list events")
            .items
            .into_iter()
            .filter(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod)
                    && e.reason.as_deref() == Some(reason)
            })
            .collect()
    }

    async fn wait_for_event(&self, pod: &str, reason: &str) -> Event {
        eventually(&format!("a {reason} event for {pod}"), || async {
            self.events_of(pod, reason).await.into_iter().next()
        })
        .await
    }
}

#[tokio::test]
async fn places_pods_by_node_selector_affinity_and_taints() {
    let cluster = start();
    cluster
        .add_node(cpu_node("ssd", "4").label("disk", "ssd"))
        .await;
    cluster
        .add_node(cpu_node("hdd", "4").label("disk", "hdd"))
        .await;
    cluster
        .add_node(
            cpu_node("gpu", "4")
                .label("disk", "hdd")
                .label("gpu", "true")
                .taint("gpu", "true", "NoSchedule"),
        )
        .await;
    cluster
        .add_pod(cpu_pod("selector", "100m").node_selector("disk", "ssd"))
        .await;
    let mut affinity = cpu_pod("affinity", "100m");
    let requirement =
        |key: &str, operator: &str, values: Option<Vec<String>>| NodeSelectorRequirement {
            key: key.to_string(),
            operator: operator.to_string(),
            values,
        };
    affinity.required_node_term(NodeSelectorTerm {
        match_expressions: Some(vec![
            requirement("disk", "In", Some(vec!["hdd".to_string()])),
            requirement("gpu", "DoesNotExist", None),
        ]),
        match_fields: None,
    });
    cluster.add_pod(affinity).await;
    cluster
        .add_pod(
            cpu_pod("tolerating", "100m")
                .node_selector("gpu", "true")
                .toleration("gpu", "Exists", "", "NoSchedule"),
        )
        .await;
    assert_eq!(cluster.node_of("selector").await, "ssd");
    assert_eq!(cluster.node_of("affinity").await, "hdd");
    assert_eq!(cluster.node_of("tolerating").await, "gpu");
    let scheduled = cluster.wait_for_event("selector", "Scheduled").await;
    assert_eq!(
        scheduled.note.as_deref(),
        Some("Successfully assigned default/selector to ssd")
    );
    assert_eq!(scheduled.type_.as_deref(), Some("Normal"));
    assert_eq!(scheduled.action.as_deref(), Some("Binding"));
    assert_eq!(
        scheduled.reporting_controller.as_deref(),
        Some("default-scheduler")
    );
    let bound = cluster.pod("selector").await.expect("pod");
    let condition = bound
        .status
        .and_then(|s| s.conditions)
        .and_then(|c| c.into_iter().find(|c| c.type_ == "PodScheduled"))
        .expect("PodScheduled condition");
    assert_eq!(condition.status, "True");
}

#[tokio::test]
async fn eleven_replicas_spread_six_five_over_even_and_odd_nodes() {
    let cluster = start();
    for i in 0..10 {
        let parity = if i % 2 == 0 { "even" } else { "odd" };
        cluster
            .add_node(cpu_node(&format!("node-{i}"), "8").label("parity", parity))
            .await;
    }
    for i in 0..11 {
        cluster
            .add_pod(
                cpu_pod(&format!("web-{i}"), "100m")
                    .label("app", "web")
                    .spread(1, "parity", "DoNotSchedule", &[("app", "web")]),
            )
            .await;
    }
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..11 {
        let node = cluster.node_of(&format!("web-{i}")).await;
        let index: usize = node
            .trim_start_matches("node-")
            .parse()
            .expect("node index");
        *counts
            .entry(
                if index.is_multiple_of(2) {
                    "even"
                } else {
                    "odd"
                }
                .to_string(),
            )
            .or_default() += 1;
    }
    let mut sizes: Vec<usize> = counts.into_values().collect();
    sizes.sort();
    assert_eq!(sizes, [5, 6]);
}

#[tokio::test]
async fn failed_scheduling_message_for_cpu_and_spread() {
    let cluster = start();
    cluster
        .add_node(cpu_node("n1", "2").label("zone", "a"))
        .await;
    cluster
        .add_node(cpu_node("n2", "4").label("zone", "b"))
        .await;
    cluster
        .add_node(cpu_node("n3", "4").label("zone", "b"))
        .await;
    cluster
        .add_pod(cpu_pod("db-1", "1").label("app", "db").node("n1"))
        .await;
    cluster
        .add_pod(cpu_pod("web-1", "0").label("app", "web").node("n2"))
        .await;
    cluster
        .add_pod(cpu_pod("web-2", "0").label("app", "web").node("n3"))
        .await;
    cluster
        .add_pod(cpu_pod("web-3", "2").label("app", "web").spread(
            1,
            "zone",
            "DoNotSchedule",
            &[("app", "web")],
        ))
        .await;
    let expected = "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match pod topology spread constraints. \
                    preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod..";
    let event = cluster.wait_for_event("web-3", "FailedScheduling").await;
    assert_eq!(event.note.as_deref(), Some(expected));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.action.as_deref(), Some("Scheduling"));
    let condition = eventually("web-3's PodScheduled condition", || async {
        cluster
            .pod("web-3")
            .await?
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "PodScheduled")
    })
    .await;
    assert_eq!(condition.status, "False");
    assert_eq!(condition.reason.as_deref(), Some("Unschedulable"));
    assert_eq!(condition.message.as_deref(), Some(expected));
}

#[tokio::test]
async fn pending_pod_is_placed_when_a_node_is_added() {
    let cluster = start();
    cluster.add_node(cpu_node("small", "1")).await;
    cluster.add_pod(cpu_pod("big", "2")).await;
    let event = cluster.wait_for_event("big", "FailedScheduling").await;
    assert!(
        event
            .note
            .as_deref()
            .is_some_and(|n| n.starts_with("0/1 nodes are available: 1 Insufficient cpu.")),
        "{:?}",
        event.note
    );
    cluster.add_node(cpu_node("large", "4")).await;
    assert_eq!(cluster.node_of("big").await, "large");
}

#[tokio::test]
async fn higher_priority_pod_preempts_a_lower_priority_one() {
    let cluster = start();
    let class: PriorityClass = serde_json::from_value(json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "high"}, "value": 1000,
    }))
    .expect("class");
    Api::<PriorityClass>::all(cluster.client.clone())
        .create(&PostParams::default(), &class)
        .await
        .expect("create class");
    cluster.add_node(cpu_node("only", "2")).await;
    cluster.add_pod(cpu_pod("low", "2")).await;
    assert_eq!(cluster.node_of("low").await, "only");
    cluster
        .add_pod(cpu_pod("high", "2").priority_class_name("high"))
        .await;
    let failed = cluster.wait_for_event("high", "FailedScheduling").await;
    assert!(
        failed
            .note
            .as_deref()
            .is_some_and(|n| n.starts_with("0/1 nodes are available: 1 Insufficient cpu.")),
        "{:?}",
        failed.note
    );
    // The victim is marked and deleted gracefully; finish the deletion
    // as the kubelet would.
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), "default");
    eventually("the victim marked for deletion", || async {
        match cluster.pod("low").await {
            Some(victim) if victim.metadata.deletion_timestamp.is_some() => {
                let condition = victim
                    .status
                    .and_then(|s| s.conditions)
                    .and_then(|c| c.into_iter().find(|c| c.type_ == "DisruptionTarget"))
                    .expect("DisruptionTarget condition");
                assert_eq!(condition.reason.as_deref(), Some("PreemptionByScheduler"));
                assert_eq!(
                    condition.message.as_deref(),
                    Some("default-scheduler: preempting to accommodate a higher priority pod")
                );
                let _ = pods
                    .delete("low", &DeleteParams::default().grace_period(0))
                    .await;
                Some(())
            }
            Some(_) => None,
            None => Some(()),
        }
    })
    .await;
    let nominated = cluster
        .pod("high")
        .await
        .and_then(|p| p.status)
        .and_then(|s| s.nominated_node_name);
    assert!(matches!(nominated.as_deref(), None | Some("only")));
    assert_eq!(cluster.node_of("high").await, "only");
    assert!(cluster.pod("low").await.is_none(), "the victim is deleted");
    let preempted = cluster.wait_for_event("low", "Preempted").await;
    assert!(
        preempted
            .note
            .as_deref()
            .is_some_and(|n| n.starts_with("Preempted by pod ") && n.ends_with(" on node only"))
    );
}

#[tokio::test]
async fn answers_only_for_its_profiles_scheduler_names() {
    let config = ksim_scheduler::config::from_json(&json!({
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "my-scheduler"}],
    }))
    .expect("valid configuration");
    let mut options = SchedulerOptions::from(config);
    options.record_decisions = true;
    let cluster = start_with(options);
    cluster.add_node(cpu_node("n1", "4")).await;
    // "theirs" comes first: by the time the scheduler has placed "mine"
    // (queued after it, same priority), it has seen "theirs" and left it.
    cluster.add_pod(cpu_pod("theirs", "100m")).await;
    cluster
        .add_pod(cpu_pod("mine", "100m").scheduler_name("my-scheduler"))
        .await;
    assert_eq!(cluster.node_of("mine").await, "n1");
    let event = cluster.wait_for_event("mine", "Scheduled").await;
    assert_eq!(event.reporting_controller.as_deref(), Some("my-scheduler"));
    let recorded = eventually("the recorded decision", || async {
        cluster
            .pod("mine")
            .await?
            .metadata
            .annotations?
            .get(ksim_scheduler::scheduler::SELECTED_NODE)
            .cloned()
    })
    .await;
    assert_eq!(recorded, "n1");
    let theirs = cluster.pod("theirs").await.expect("pod");
    assert!(theirs.spec.and_then(|s| s.node_name).is_none());
    assert!(
        cluster
            .events_of("theirs", "FailedScheduling")
            .await
            .is_empty()
    );
}
