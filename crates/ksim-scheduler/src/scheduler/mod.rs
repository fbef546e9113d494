//! The scheduler as a Kubernetes API client (upstream `pkg/scheduler`'s
//! `Scheduler`): informers feed one loop that owns the cache and the
//! scheduling queue; each cycle runs [`crate::framework::schedule_one`],
//! assumes the pod on its node and binds it through `pods/binding` in the
//! background, or records why it fits nowhere (PodScheduled=False,
//! FailedScheduling) and preempts for it. Cluster events move waiting
//! pods back to the active queue.

mod api;
mod cache;
mod decisions;
mod handlers;
mod informers;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::time::Instant;

pub use api::{
    ACTION_BINDING, ACTION_SCHEDULING, EventRecorder, EventSink, EventWrite, MAX_QUEUED_EVENTS,
    new_event,
};
pub use cache::Cache;
pub use decisions::{
    FILTER_RESULT, FINAL_SCORE_RESULT, PASSED, RECORD_DECISIONS, SELECTED_NODE, explain,
    failure_annotations, opted_in, success_annotations,
};
pub use informers::{Change, Message};

use crate::config::SchedulerConfig;
use crate::framework::{Profile, ScheduleError, ScheduleState, scheduled_message};
use crate::queue::{PodKey, SchedulingQueue};

/// How often pods unschedulable for too long are retried (upstream 30s).
const LEFTOVER_FLUSH_INTERVAL: Duration = Duration::from_secs(30);
/// The longest the loop sleeps without a message.
const MAX_IDLE: Duration = Duration::from_secs(1);

/// How the scheduler runs.
#[derive(Debug)]
pub struct SchedulerOptions {
    /// The profiles (one per schedulerName); empty means the default profile.
    pub profiles: Vec<Profile>,
    /// Record filter verdicts and scores on every pod (else only on pods
    /// annotated [`RECORD_DECISIONS`]).
    pub record_decisions: bool,
    /// `reportingInstance` of events (default `<schedulerName>-<hostname>`).
    pub instance: Option<String>,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        SchedulerOptions {
            profiles: vec![Profile::default_profile()],
            record_decisions: false,
            instance: None,
        }
    }
}

impl From<SchedulerConfig> for SchedulerOptions {
    fn from(config: SchedulerConfig) -> Self {
        SchedulerOptions {
            profiles: config.profiles,
            ..Default::default()
        }
    }
}

/// Why the scheduler stopped.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    /// Every informer stopped.
    #[error("the scheduler's informers stopped")]
    InformersStopped,
}

/// A finished binding, reported back to the loop.
#[derive(Debug)]
pub struct BindOutcome {
    pod: Arc<Pod>,
    node: String,
    error: Option<String>,
    /// The pod is gone or already bound elsewhere: do not retry.
    permanent: bool,
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "ksim".to_string())
}

/// Runs the scheduler against the API until the client's informers stop.
pub async fn run(client: kube::Client, options: SchedulerOptions) -> Result<(), SchedulerError> {
    let (tx, rx) = unbounded_channel();
    let informers = informers::spawn_all(&client, &tx);
    let mut scheduler = Scheduler::new(client, options, tx);
    let result = scheduler.run(rx).await;
    for informer in informers {
        informer.abort();
    }
    result
}

/// The scheduling loop's state.
struct Scheduler {
    client: kube::Client,
    profiles: HashMap<String, Arc<Profile>>,
    queue: SchedulingQueue,
    cache: Cache,
    state: ScheduleState,
    record_decisions: bool,
    instance: String,
    recorder: EventRecorder,
    events: EventSink,
    tx: UnboundedSender<Message>,
    started: Instant,
    /// Informers that have listed once (one bit each).
    synced: u32,
}

impl Scheduler {
    fn new(client: kube::Client, options: SchedulerOptions, tx: UnboundedSender<Message>) -> Self {
        let mut profiles: Vec<Profile> = options.profiles;
        if profiles.is_empty() {
            profiles.push(Profile::default_profile());
        }
        let profiles: Vec<Arc<Profile>> = profiles.into_iter().map(Arc::new).collect();
        let queue = SchedulingQueue::new(profiles[0].clone());
        let instance = options
            .instance
            .unwrap_or_else(|| format!("{}-{}", profiles[0].scheduler_name, hostname()));
        Scheduler {
            events: EventSink::spawn(client.clone()),
            client,
            profiles: profiles
                .into_iter()
                .map(|p| (p.scheduler_name.clone(), p))
                .collect(),
            queue,
            cache: Cache::default(),
            state: ScheduleState::new(Box::new(
                <rand::rngs::StdRng as rand::SeedableRng>::from_os_rng(),
            )),
            record_decisions: options.record_decisions,
            instance,
            recorder: EventRecorder::default(),
            tx,
            started: Instant::now(),
            synced: 0,
        }
    }

    fn now(&self) -> Duration {
        self.started.elapsed()
    }

    async fn run(&mut self, mut rx: UnboundedReceiver<Message>) -> Result<(), SchedulerError> {
        let mut last_flush = Duration::ZERO;
        loop {
            // Apply everything that arrived before deciding anything.
            while let Ok(message) = rx.try_recv() {
                self.handle(message);
            }
            if self.all_synced() && self.schedule_next() {
                tokio::task::consume_budget().await;
                continue;
            }
            let now = self.now();
            if now.saturating_sub(last_flush) >= LEFTOVER_FLUSH_INTERVAL {
                self.queue.flush_unschedulable_leftover(now);
                last_flush = now;
                continue;
            }
            let wake = self
                .queue
                .next_backoff_expiry()
                .map(|until| until.saturating_sub(now))
                .unwrap_or(MAX_IDLE)
                .min(MAX_IDLE);
            tokio::select! {
                message = rx.recv() => match message {
                    Some(message) => self.handle(message),
                    None => return Err(SchedulerError::InformersStopped),
                },
                () = tokio::time::sleep(wake) => {}
            }
        }
    }

    /// One scheduling cycle; false when no pod was ready.
    fn schedule_next(&mut self) -> bool {
        let now = self.now();
        let Some(info) = self.queue.pop(now) else {
            return false;
        };
        let pod = info.pod.clone();
        let key = cache::pod_key(&pod);
        let scheduler_name = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or(crate::framework::DEFAULT_SCHEDULER_NAME);
        let Some(profile) = self.profiles.get(scheduler_name).cloned() else {
            self.queue.delete(&key.0, &key.1);
            return true;
        };
        if pod.metadata.deletion_timestamp.is_some() || self.cache.is_assumed(&key) {
            self.queue.delete(&key.0, &key.1);
            return true;
        }
        let record = self.record_decisions || decisions::opted_in(&pod);
        self.state.record_scores = record;
        let outcome =
            crate::framework::schedule_one(&profile, &self.cache.snapshot, &pod, &mut self.state);
        match outcome {
            Ok(result) => {
                let annotations = record.then(|| decisions::success_annotations(&profile, &result));
                self.assume_and_bind(&profile, pod, &result.suggested_host, annotations);
            }
            Err(error) => self.handle_failure(&profile, pod, error, record),
        }
        true
    }

    fn assume_and_bind(
        &mut self,
        profile: &Profile,
        pod: Arc<Pod>,
        node: &str,
        annotations: Option<std::collections::BTreeMap<String, String>>,
    ) {
        let key = cache::pod_key(&pod);
        self.cache.assume((*pod).clone(), node);
        self.queue.delete(&key.0, &key.1);
        let client = self.client.clone();
        let tx = self.tx.clone();
        let events = self.events.clone();
        let node = node.to_string();
        let event = new_event(
            &pod,
            "Normal",
            "Scheduled",
            ACTION_BINDING,
            &scheduled_message(&pod, &node),
            &profile.scheduler_name,
            &self.instance,
        );
        tokio::spawn(async move {
            let result = api::bind(&client, &pod, &node).await;
            let (error, permanent) = match result {
                Ok(()) => {
                    if let Some(annotations) = annotations
                        && let Err(error) = api::annotate(&client, &pod, &annotations).await
                    {
                        tracing::debug!(%error, "cannot record scheduling decisions");
                    }
                    events.send(EventWrite::Create(Box::new(event)));
                    (None, false)
                }
                Err(kube::Error::Api(status)) => {
                    let permanent = status.code == 404 || status.code == 409;
                    (Some(status.message), permanent)
                }
                Err(error) => (Some(error.to_string()), false),
            };
            let _ = tx.send(Message::Bound(BindOutcome {
                pod,
                node,
                error,
                permanent,
            }));
        });
    }

    fn bound(&mut self, outcome: BindOutcome) {
        let Some(error) = outcome.error else {
            return;
        };
        let key = cache::pod_key(&outcome.pod);
        tracing::debug!(pod = ?key, node = outcome.node, %error, "binding failed");
        self.cache.forget(&key);
        // Room the pod held is free again.
        self.queue.move_all_to_active_or_backoff(self.now());
        if outcome.permanent {
            return;
        }
        let now = self.now();
        self.queue.add_or_update((*outcome.pod).clone(), now);
        self.queue.add_unschedulable(&outcome.pod, true, now);
        self.report_failure(
            &outcome.pod,
            "SchedulerError",
            &format!("binding rejected: running Bind plugin \"DefaultBinder\": {error}"),
            None,
            None,
        );
    }

    fn handle_failure(
        &mut self,
        profile: &Profile,
        pod: Arc<Pod>,
        error: ScheduleError,
        record: bool,
    ) {
        let now = self.now();
        let (reason, message, mut nominated, annotations, retry_soon) = match &error {
            ScheduleError::Unschedulable(fit) => {
                let annotations = record
                    .then(|| decisions::failure_annotations(profile, &self.cache.snapshot, fit));
                let nominated = fit.post_filter_result.as_ref().and_then(|result| {
                    result
                        .nominated_node_name
                        .clone()
                        .map(|node| (node, result.victims.clone()))
                });
                (
                    "Unschedulable",
                    fit.message(),
                    nominated,
                    annotations,
                    false,
                )
            }
            ScheduleError::NoNodesAvailable => {
                ("Unschedulable", error.to_string(), None, None, false)
            }
            ScheduleError::Internal(message) => {
                ("SchedulerError", message.clone(), None, None, true)
            }
        };
        let mut nominated_node = None;
        if let Some((node, _)) = nominated.as_ref().filter(|(node, _)| node.is_empty()) {
            // Preemption found nothing: forget an earlier nomination.
            let key = cache::pod_key(&pod);
            self.cache.snapshot.clear_nomination(&key.0, &key.1);
            nominated_node = Some(node.clone());
            nominated = None;
        }
        if let Some((node, victims)) = nominated.take() {
            self.cache.snapshot.nominate((*pod).clone(), &node);
            let client = self.client.clone();
            let scheduler_name = profile.scheduler_name.clone();
            let sink = self.events.clone();
            let events: Vec<Box<_>> = victims
                .iter()
                .map(|victim| {
                    Box::new(new_event(
                        victim,
                        "Normal",
                        "Preempted",
                        "Preempting",
                        &format!(
                            "Preempted by pod {} on node {node}",
                            pod.metadata.uid.as_deref().unwrap_or_default()
                        ),
                        &scheduler_name,
                        &self.instance,
                    ))
                })
                .collect();
            tokio::spawn(async move {
                for (victim, event) in victims.iter().zip(events) {
                    match api::preempt(&client, victim, &scheduler_name).await {
                        Ok(()) => sink.send(EventWrite::Create(event)),
                        Err(error) => tracing::warn!(%error, "preempting a victim failed"),
                    }
                }
            });
            nominated_node = Some(node);
        }
        self.queue.add_unschedulable(&pod, retry_soon, now);
        self.report_failure(
            &pod,
            reason,
            &message,
            nominated_node.as_deref(),
            annotations,
        );
    }

    /// PodScheduled=False (and nominatedNodeName), a FailedScheduling
    /// event and, when recording, the decisions.
    fn report_failure(
        &mut self,
        pod: &Arc<Pod>,
        reason: &str,
        message: &str,
        nominated_node: Option<&str>,
        annotations: Option<std::collections::BTreeMap<String, String>>,
    ) {
        let patch = api::unschedulable_status_patch(pod, reason, message, nominated_node);
        let event = new_event(
            pod,
            "Warning",
            "FailedScheduling",
            ACTION_SCHEDULING,
            message,
            pod.spec
                .as_ref()
                .and_then(|s| s.scheduler_name.as_deref())
                .unwrap_or(crate::framework::DEFAULT_SCHEDULER_NAME),
            &self.instance,
        );
        let write = self.recorder.record(event, std::time::Instant::now());
        self.events.send(write);
        let client = self.client.clone();
        let pod = pod.clone();
        tokio::spawn(async move {
            if let Some(annotations) = annotations
                && let Err(error) = api::annotate(&client, &pod, &annotations).await
            {
                tracing::debug!(%error, "cannot record scheduling decisions");
            }
            if let Some(patch) = patch
                && let Err(error) = api::patch_status(&client, &pod, &patch).await
            {
                tracing::debug!(%error, "cannot update the PodScheduled condition");
            }
        });
    }

    fn forget_pod(&mut self, key: &PodKey) {
        self.recorder.forget_pod(&key.0, &key.1);
    }
}
