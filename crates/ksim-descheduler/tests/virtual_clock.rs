//! The in-cluster descheduling loop on a virtual clock, against the API
//! server through the in-process client: a cycle at start and then one
//! every interval of cluster time (the cluster settles between, a cycle in
//! progress keeps it busy), and PodLifeTime evicting a pod at the first
//! cycle after maxPodLifeTimeSeconds of cluster time, with its event at
//! that time.

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use ksim_descheduler::{Descheduler, DeschedulerPolicy};
use ksim_testutils::in_process::InProcessCluster;
use kube::api::{Api, ListParams};
use support::{roomy_node, web_pod};

/// ksim-testutils' in-process cluster on a virtual clock, with the
/// objects and the descheduler these tests need.
struct Cluster(InProcessCluster);

impl std::ops::Deref for Cluster {
    type Target = InProcessCluster;
    fn deref(&self) -> &InProcessCluster {
        &self.0
    }
}

impl Cluster {
    fn new() -> Self {
        Cluster(InProcessCluster::virtual_clock())
    }

    fn at(&self, seconds: i64) -> Timestamp {
        ksim_testutils::in_process::at(seconds)
    }

    async fn node(&self, name: &str) {
        self.create_node(&roomy_node(name).obj()).await;
    }

    async fn pod(&self, name: &str, node: &str) {
        self.create_pod(&web_pod(name, node).obj()).await;
    }

    /// Whether the pod is still there and not terminating.
    async fn live(&self, name: &str) -> bool {
        Api::<Pod>::namespaced(self.client.clone(), "default")
            .get_opt(name)
            .await
            .expect("get pod")
            .is_some_and(|pod| pod.metadata.deletion_timestamp.is_none())
    }

    /// Starts the in-cluster loop on the cluster's clock; returns its
    /// cycle counter once the first cycle is over.
    async fn start_descheduler(
        &mut self,
        policy: &str,
        interval: Duration,
    ) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
        let policy = DeschedulerPolicy::parse(policy).expect("valid policy");
        let descheduler = Descheduler::new(self.client.clone(), policy, false)
            .await
            .expect("descheduler")
            .with_clock(self.clock.clone());
        let cycles = descheduler.cycles();
        self.0.spawn(async move {
            descheduler.run(interval).await;
        });
        self.settle().await;
        cycles
    }

    /// The descheduler's events about `pod`.
    async fn descheduler_events(&self, pod: &str) -> Vec<Event> {
        Api::<Event>::namespaced(self.client.clone(), "default")
            .list(&ListParams::default())
            .await
            .expect("list events")
            .items
            .into_iter()
            .filter(|event| {
                event.reporting_controller.as_deref() == Some("sigs.k8s.io/descheduler")
                    && event.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod)
            })
            .collect()
    }
}

fn lifetime_policy(seconds: u64) -> String {
    format!(
        r#"
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: lifetime
  pluginConfig:
  - name: PodLifeTime
    args: {{maxPodLifeTimeSeconds: {seconds}}}
  plugins:
    deschedule: {{enabled: [PodLifeTime]}}
"#
    )
}

#[tokio::test(flavor = "current_thread")]
async fn cycles_run_at_start_and_then_every_interval_of_cluster_time() {
    let mut cluster = Cluster::new();
    cluster.node("a").await;
    cluster.node("b").await;
    let cycles = cluster
        .start_descheduler(&lifetime_policy(86_400), Duration::from_secs(300))
        .await;
    assert_eq!(cycles.load(Ordering::SeqCst), 1, "the first cycle at start");
    assert_eq!(
        cluster.clock.next_timer(),
        Some(ksim_testutils::in_process::start_time() + chrono::Duration::minutes(5))
    );
    cluster.advance(15 * 60).await;
    assert_eq!(
        cycles.load(Ordering::SeqCst),
        4,
        "one more at 5, 10 and 15 minutes"
    );
    assert_eq!(
        cluster.clock.next_timer(),
        Some(ksim_testutils::in_process::start_time() + chrono::Duration::minutes(20))
    );
    cluster.advance(4 * 60).await;
    assert_eq!(cycles.load(Ordering::SeqCst), 4, "the next is due at 20");
}

#[tokio::test(flavor = "current_thread")]
async fn pod_lifetime_evicts_a_pod_once_its_lifetime_of_cluster_time_has_passed() {
    let mut cluster = Cluster::new();
    cluster.node("a").await;
    cluster.node("b").await;
    cluster.pod("old", "a").await;
    let cycles = cluster
        .start_descheduler(&lifetime_policy(300), Duration::from_secs(60))
        .await;

    // Cycles at 0..=5 minutes: the pod is at most 300 s old, which is
    // not more than maxPodLifeTimeSeconds.
    cluster.advance(300).await;
    assert_eq!(cycles.load(Ordering::SeqCst), 6);
    assert!(cluster.live("old").await, "not evicted at 300 s");
    assert!(cluster.descheduler_events("old").await.is_empty());

    // The cycle at 6 minutes evicts it, and says so at that time.
    cluster.advance(60).await;
    assert_eq!(cycles.load(Ordering::SeqCst), 7);
    assert!(!cluster.live("old").await, "evicted at 360 s");
    let events = cluster.descheduler_events("old").await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].reason.as_deref(), Some("PodLifeTime"));
    assert_eq!(events[0].action.as_deref(), Some("Descheduled"));
    assert_eq!(events[0].type_.as_deref(), Some("Normal"));
    assert_eq!(
        events[0].event_time.as_ref().map(|t| t.0),
        Some(cluster.at(360))
    );
}
