//! The scheduler on a virtual clock, against the API server through the
//! in-process client: a pod left unschedulable is placed as soon as a node
//! appears (no time passes), retried by the unschedulable flush after
//! 5 minutes of cluster time, and retried when its back-off (1 s, then
//! 2 s) ends; the cluster settles between; a seeded clock breaks score
//! ties the same way on every run.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use ksim_runtime::clock::Random;
use ksim_scheduler::scheduler::{SchedulerOptions, run};
use ksim_testutils::in_process::{InProcessCluster, at, start_time};
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use support::{cpu_node, cpu_pod};

/// The cluster (ksim-testutils' in-process one) with the scheduler's helpers.
struct Cluster(InProcessCluster);

impl std::ops::Deref for Cluster {
    type Target = InProcessCluster;
    fn deref(&self) -> &InProcessCluster {
        &self.0
    }
}

impl Cluster {
    /// An API server on a virtual clock standing at [`start_time`].
    fn new(random: Random) -> Self {
        Cluster(InProcessCluster::virtual_with(random))
    }

    /// Starts the scheduler on the cluster's clock and lets it settle.
    async fn start_scheduler(&mut self) {
        let options = SchedulerOptions {
            clock: self.clock.clone(),
            ..Default::default()
        };
        let client = self.new_client();
        self.0.spawn(async move {
            let _ = run(client, options).await;
        });
        self.settle().await;
    }

    /// Creates a node with its status (as a kubelet registers it: one
    /// event).
    async fn add_node(&self, name: &str, cpu: &str) {
        self.create_node(&cpu_node(name, cpu).obj()).await;
    }

    async fn add_pod(&self, name: &str, cpu: &str) {
        self.create_pod(&cpu_pod(name, cpu).obj()).await;
    }

    async fn pod(&self, name: &str) -> Pod {
        Api::<Pod>::namespaced(self.client.clone(), "default")
            .get(name)
            .await
            .expect("get pod")
    }

    async fn node_of(&self, name: &str) -> Option<String> {
        self.pod(name).await.spec.and_then(|s| s.node_name)
    }

    /// Pod name → node of every pod.
    async fn placements(&self) -> BTreeMap<String, Option<String>> {
        Api::<Pod>::namespaced(self.client.clone(), "default")
            .list(&ListParams::default())
            .await
            .expect("list pods")
            .items
            .into_iter()
            .map(|pod| {
                (
                    pod.metadata.name.clone().unwrap_or_default(),
                    pod.spec.and_then(|s| s.node_name),
                )
            })
            .collect()
    }

    /// The scheduler's events about `pod` with `reason`.
    async fn events(&self, pod: &str, reason: &str) -> Vec<Event> {
        Api::<Event>::namespaced(self.client.clone(), "default")
            .list(&ListParams::default())
            .await
            .expect("list events")
            .items
            .into_iter()
            .filter(|event| {
                event.reason.as_deref() == Some(reason)
                    && event.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod)
            })
            .collect()
    }
}

fn event_time(event: &Event) -> Option<Timestamp> {
    event.event_time.as_ref().map(|t| t.0)
}

fn pod_scheduled_condition(pod: &Pod) -> Value {
    let conditions = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let condition = conditions
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .expect("a PodScheduled condition");
    json!({
        "status": condition.status,
        "reason": condition.reason,
        "time": condition.last_transition_time.map(|t| t.0),
    })
}

#[tokio::test(flavor = "current_thread")]
async fn an_unschedulable_pod_is_placed_when_a_node_appears_without_time_passing() {
    let mut cluster = Cluster::new(Random::seeded(1));
    cluster.add_node("small", "1").await;
    cluster.add_pod("big", "2").await;
    cluster.start_scheduler().await;

    // Settled: the pod was tried once and waits for a cluster event.
    let pod = cluster.pod("big").await;
    assert_eq!(pod.spec.as_ref().and_then(|s| s.node_name.clone()), None);
    assert_eq!(
        pod_scheduled_condition(&pod),
        json!({"status": "False", "reason": "Unschedulable", "time": at(0)})
    );
    let failed = cluster.events("big", "FailedScheduling").await;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0]
            .note
            .as_deref()
            .is_some_and(|n| n.starts_with("0/1 nodes are available: 1 Insufficient cpu.")),
        "{failed:?}"
    );
    assert_eq!(event_time(&failed[0]), Some(at(0)));

    // Ten quiet seconds (its 1 s back-off is long over), then a node that
    // fits appears: the pod is placed without the clock moving.
    cluster.advance(10).await;
    assert_eq!(cluster.node_of("big").await, None);
    cluster.add_node("large", "4").await;
    cluster.settle().await;
    assert_eq!(cluster.node_of("big").await.as_deref(), Some("large"));
    assert_eq!(
        cluster.clock.now(),
        start_time() + chrono::Duration::seconds(10)
    );
    let scheduled = cluster.events("big", "Scheduled").await;
    assert_eq!(scheduled.len(), 1, "{scheduled:?}");
    assert_eq!(event_time(&scheduled[0]), Some(at(10)));
    assert_eq!(
        scheduled[0].note.as_deref(),
        Some("Successfully assigned default/big to large")
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_pod_moved_by_an_event_waits_out_its_back_off_of_1s_then_2s() {
    let mut cluster = Cluster::new(Random::seeded(1));
    cluster.add_node("small", "1").await;
    cluster.add_pod("big", "2").await;
    cluster.start_scheduler().await;
    assert_eq!(cluster.events("big", "FailedScheduling").await.len(), 1);

    // A node appears at once: the pod leaves the unschedulable pool for
    // the back-off queue (first attempt: 1 s).
    cluster.add_node("medium", "1500m").await;
    cluster.settle().await;
    assert_eq!(
        cluster.clock.next_timer(),
        Some(start_time() + chrono::Duration::seconds(1))
    );
    cluster.advance(1).await;
    let failed = cluster.events("big", "FailedScheduling").await;
    let second = failed
        .iter()
        .find(|e| {
            e.note
                .as_deref()
                .is_some_and(|n| n.starts_with("0/2 nodes are available: 2 Insufficient cpu."))
        })
        .unwrap_or_else(|| panic!("retried at 1 s: {failed:?}"));
    assert_eq!(event_time(second), Some(at(1)));

    // Room appears at 1 s; the second back-off (2 s) ends at 3 s.
    cluster.add_node("large", "4").await;
    cluster.settle().await;
    assert_eq!(cluster.node_of("big").await, None, "still backing off");
    assert_eq!(
        cluster.clock.next_timer(),
        Some(start_time() + chrono::Duration::seconds(3))
    );
    cluster.advance(2).await;
    assert_eq!(cluster.node_of("big").await.as_deref(), Some("large"));
    let scheduled = cluster.events("big", "Scheduled").await;
    assert_eq!(scheduled.len(), 1, "{scheduled:?}");
    assert_eq!(event_time(&scheduled[0]), Some(at(3)));
}

#[tokio::test(flavor = "current_thread")]
async fn a_pod_unschedulable_for_five_minutes_is_retried_by_the_flush() {
    let mut cluster = Cluster::new(Random::seeded(1));
    cluster.add_node("small", "1").await;
    cluster.add_pod("big", "2").await;
    cluster.start_scheduler().await;

    // No cluster event: the pod waits in the unschedulable pool for
    // 5 minutes, then the next 30 s flush retries it.
    cluster.advance(300).await;
    let failed = cluster.events("big", "FailedScheduling").await;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].series.is_none(), "not retried yet: {failed:?}");
    cluster.advance(30).await;
    let failed = cluster.events("big", "FailedScheduling").await;
    assert_eq!(failed.len(), 1, "a repeat counts in the series: {failed:?}");
    let series = failed[0].series.as_ref().expect("retried once");
    assert_eq!(series.count, 2);
    assert_eq!(series.last_observed_time.0, at(330));
}

/// What a run shows: pod → node, and the scheduler's events (name,
/// reason, pod, note) in name order.
type Outcome = (
    BTreeMap<String, Option<String>>,
    Vec<(String, String, String, String)>,
);

/// Where the scheduler puts 12 pods on 5 identical nodes (many score ties)
/// with a clock seeded by `seed`; the pods exist before the scheduler
/// starts, or are created one by one while it runs.
async fn outcome_with(seed: u64, pods_first: bool) -> Outcome {
    let mut cluster = Cluster::new(Random::seeded(seed));
    for node in 0..5 {
        cluster.add_node(&format!("node-{node}"), "8").await;
    }
    if !pods_first {
        cluster.start_scheduler().await;
    }
    for pod in 0..12 {
        cluster.add_pod(&format!("pod-{pod:02}"), "100m").await;
    }
    if pods_first {
        cluster.start_scheduler().await;
    }
    cluster.settle().await;
    let placements = cluster.placements().await;
    assert!(
        placements.values().all(Option::is_some),
        "every pod placed: {placements:?}"
    );
    let mut events: Vec<(String, String, String, String)> =
        Api::<Event>::namespaced(cluster.client.clone(), "default")
            .list(&ListParams::default())
            .await
            .expect("list events")
            .items
            .into_iter()
            .map(|event| {
                (
                    event.metadata.name.unwrap_or_default(),
                    event.reason.unwrap_or_default(),
                    event.regarding.and_then(|r| r.name).unwrap_or_default(),
                    event.note.unwrap_or_default(),
                )
            })
            .collect();
    events.sort();
    assert_eq!(events.len(), 12, "one Scheduled event per pod: {events:?}");
    (placements, events)
}

#[tokio::test(flavor = "current_thread")]
async fn the_same_seed_gives_the_same_placements_and_events() {
    let first = outcome_with(7, true).await;
    assert_eq!(first, outcome_with(7, true).await);
    // A different seed may or may not differ: only that it places them all.
    outcome_with(8, true).await;
}

#[tokio::test(flavor = "current_thread")]
async fn pods_created_while_the_scheduler_runs_land_the_same_way_every_run() {
    let first = outcome_with(7, false).await;
    assert_eq!(first, outcome_with(7, false).await);
}
