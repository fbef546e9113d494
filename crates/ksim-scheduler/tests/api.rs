//! The scheduler against the API server through the in-process client:
//! placement by each constraint type, spread across labelled domains, the
//! FailedScheduling message, pods placed when room appears, preemption.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use ksim_apiserver::ApiServer;
use ksim_scheduler::scheduler::{SchedulerOptions, run};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

struct Cluster {
    client: kube::Client,
    _server: ApiServer,
    scheduler: tokio::task::JoinHandle<()>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.scheduler.abort();
    }
}

fn start() -> Cluster {
    start_with(SchedulerOptions::default())
}

fn start_with(options: SchedulerOptions) -> Cluster {
    let server = ApiServer::new();
    let client = ksim_runtime::client::in_process(&server);
    let scheduler = tokio::spawn({
        let client = client.clone();
        async move {
            let _ = run(client, options).await;
        }
    });
    Cluster {
        client,
        _server: server,
        scheduler,
    }
}

fn node(name: &str, cpu: &str, labels: Value, spec: Value) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {
            "allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"},
            "capacity": {"cpu": cpu, "memory": "32Gi", "pods": "110"},
        },
    }))
    .expect("valid node")
}

fn pod(name: &str, cpu: &str, labels: Value, spec: Value) -> Pod {
    let mut spec = spec;
    spec["containers"] = json!([{"name": "c", "image": "pause",
        "resources": {"requests": {"cpu": cpu}}}]);
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }))
    .expect("valid pod")
}

impl Cluster {
    /// Creates the node, then sets its status (the create drops it).
    async fn add_node(&self, node: Node) {
        let nodes = Api::<Node>::all(self.client.clone());
        let created = nodes
            .create(&PostParams::default(), &node)
            .await
            .expect("create node");
        if created
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .is_none()
        {
            let name = node.metadata.name.clone().expect("named");
            let status = json!({"status": node.status});
            nodes
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .expect("set node status");
        }
    }

    async fn add_pod(&self, pod: Pod) {
        Api::<Pod>::namespaced(self.client.clone(), "default")
            .create(&PostParams::default(), &pod)
            .await
            .expect("create pod");
    }

    async fn pod(&self, name: &str) -> Option<Pod> {
        Api::<Pod>::namespaced(self.client.clone(), "default")
            .get_opt(name)
            .await
            .expect("get pod")
    }

    /// Waits until the pod is bound; its node.
    async fn node_of(&self, name: &str) -> String {
        for _ in 0..200 {
            if let Some(node) = self
                .pod(name)
                .await
                .and_then(|p| p.spec.and_then(|s| s.node_name))
            {
                return node;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("pod {name} was not scheduled");
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
        for _ in 0..200 {
            if let Some(event) = self.events_of(pod, reason).await.into_iter().next() {
                return event;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("no {reason} event for {pod}");
    }
}

#[tokio::test]
async fn places_pods_by_node_selector_affinity_and_taints() {
    let cluster = start();
    cluster
        .add_node(node("ssd", "4", json!({"disk": "ssd"}), json!({})))
        .await;
    cluster
        .add_node(node("hdd", "4", json!({"disk": "hdd"}), json!({})))
        .await;
    cluster
        .add_node(node(
            "gpu",
            "4",
            json!({"disk": "hdd", "gpu": "true"}),
            json!({"taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]}),
        ))
        .await;
    cluster
        .add_pod(pod(
            "selector",
            "100m",
            json!({}),
            json!({"nodeSelector": {"disk": "ssd"}}),
        ))
        .await;
    cluster
        .add_pod(pod(
            "affinity",
            "100m",
            json!({}),
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "disk", "operator": "In", "values": ["hdd"]},
                    {"key": "gpu", "operator": "DoesNotExist"}]}]}}}}),
        ))
        .await;
    cluster
        .add_pod(pod(
            "tolerating",
            "100m",
            json!({}),
            json!({"nodeSelector": {"gpu": "true"},
                   "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]}),
        ))
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
            .add_node(node(
                &format!("node-{i}"),
                "8",
                json!({"parity": parity}),
                json!({}),
            ))
            .await;
    }
    for i in 0..11 {
        cluster
            .add_pod(pod(
                &format!("web-{i}"),
                "100m",
                json!({"app": "web"}),
                json!({"topologySpreadConstraints": [{
                    "maxSkew": 1, "topologyKey": "parity", "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}}}]}),
            ))
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
    let zone = |z: &str| json!({"zone": z});
    cluster
        .add_node(node("n1", "2", zone("a"), json!({})))
        .await;
    cluster
        .add_node(node("n2", "4", zone("b"), json!({})))
        .await;
    cluster
        .add_node(node("n3", "4", zone("b"), json!({})))
        .await;
    cluster
        .add_pod(pod(
            "db-1",
            "1",
            json!({"app": "db"}),
            json!({"nodeName": "n1"}),
        ))
        .await;
    cluster
        .add_pod(pod(
            "web-1",
            "0",
            json!({"app": "web"}),
            json!({"nodeName": "n2"}),
        ))
        .await;
    cluster
        .add_pod(pod(
            "web-2",
            "0",
            json!({"app": "web"}),
            json!({"nodeName": "n3"}),
        ))
        .await;
    cluster
        .add_pod(pod(
            "web-3",
            "2",
            json!({"app": "web"}),
            json!({"topologySpreadConstraints": [{
                "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}}}]}),
        ))
        .await;
    let expected = "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match pod topology spread constraints. \
                    preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod..";
    let event = cluster.wait_for_event("web-3", "FailedScheduling").await;
    assert_eq!(event.note.as_deref(), Some(expected));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.action.as_deref(), Some("Scheduling"));
    let mut condition = None;
    for _ in 0..200 {
        condition = cluster
            .pod("web-3")
            .await
            .and_then(|p| p.status)
            .and_then(|s| s.conditions)
            .and_then(|c| c.into_iter().find(|c| c.type_ == "PodScheduled"));
        if condition.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let condition = condition.expect("PodScheduled condition");
    assert_eq!(condition.status, "False");
    assert_eq!(condition.reason.as_deref(), Some("Unschedulable"));
    assert_eq!(condition.message.as_deref(), Some(expected));
}

#[tokio::test]
async fn pending_pod_is_placed_when_a_node_is_added() {
    let cluster = start();
    cluster
        .add_node(node("small", "1", json!({}), json!({})))
        .await;
    cluster.add_pod(pod("big", "2", json!({}), json!({}))).await;
    let event = cluster.wait_for_event("big", "FailedScheduling").await;
    assert!(
        event
            .note
            .as_deref()
            .is_some_and(|n| n.starts_with("0/1 nodes are available: 1 Insufficient cpu.")),
        "{:?}",
        event.note
    );
    cluster
        .add_node(node("large", "4", json!({}), json!({})))
        .await;
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
    cluster
        .add_node(node("only", "2", json!({}), json!({})))
        .await;
    cluster.add_pod(pod("low", "2", json!({}), json!({}))).await;
    assert_eq!(cluster.node_of("low").await, "only");
    cluster
        .add_pod(pod(
            "high",
            "2",
            json!({}),
            json!({"priorityClassName": "high"}),
        ))
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
    let mut marked = false;
    for _ in 0..200 {
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
                marked = true;
                break;
            }
            Some(_) => tokio::time::sleep(Duration::from_millis(25)).await,
            None => {
                marked = true;
                break;
            }
        }
    }
    assert!(marked, "the victim was not deleted");
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
    cluster
        .add_node(node("n1", "4", json!({}), json!({})))
        .await;
    cluster
        .add_pod(pod(
            "mine",
            "100m",
            json!({}),
            json!({"schedulerName": "my-scheduler"}),
        ))
        .await;
    cluster
        .add_pod(pod("theirs", "100m", json!({}), json!({})))
        .await;
    assert_eq!(cluster.node_of("mine").await, "n1");
    let event = cluster.wait_for_event("mine", "Scheduled").await;
    assert_eq!(event.reporting_controller.as_deref(), Some("my-scheduler"));
    let mut recorded = None;
    for _ in 0..200 {
        recorded = cluster
            .pod("mine")
            .await
            .and_then(|p| p.metadata.annotations)
            .and_then(|a| a.get(ksim_scheduler::scheduler::SELECTED_NODE).cloned());
        if recorded.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(recorded.as_deref(), Some("n1"));
    let theirs = cluster.pod("theirs").await.expect("pod");
    assert!(theirs.spec.and_then(|s| s.node_name).is_none());
    assert!(
        cluster
            .events_of("theirs", "FailedScheduling")
            .await
            .is_empty()
    );
}
