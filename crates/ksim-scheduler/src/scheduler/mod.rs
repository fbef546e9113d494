//! The scheduler as a Kubernetes API client (upstream `pkg/scheduler`'s
//! `Scheduler`): informers feed one loop that owns the cache and the
//! scheduling queue; each cycle runs [`crate::framework::schedule_one`],
//! assumes the pod on its node and binds it through `pods/binding` in the
//! background, or records why it fits nowhere (PodScheduled=False,
//! FailedScheduling) and preempts for it. Cluster events move waiting
//! pods back to the active queue.
//!
//! Time comes from the cluster's [`Clock`]: back-offs, the periodic flush
//! of pods unschedulable for too long, condition and event times. Score
//! ties are broken by the clock's random source, so a seeded cluster
//! places pods the same way on every run. The loop holds a busy guard of
//! the clock while it has work (messages to apply, pods ready, bindings
//! and status writes in flight); pods in back-off or unschedulable wait
//! on clock timers, so a virtual cluster settles when nothing is left.

mod api;
mod cache;
mod decisions;
mod handlers;
mod informers;
mod lean_pod;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use ksim_runtime::clock::{Busy, Clock, Instant, Random};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

pub use api::{
    ACTION_BINDING, ACTION_SCHEDULING, EventRecorder, EventSink, EventSource, EventText,
    EventWrite, MAX_QUEUED_EVENTS, new_event,
};
pub use cache::Cache;
pub use decisions::{
    FILTER_RESULT, FINAL_SCORE_RESULT, PASSED, RECORD_DECISIONS, SELECTED_NODE, explain,
    failure_annotations, opted_in, success_annotations,
};
use informers::Envelope;
pub use informers::{Change, Message};

use crate::config::SchedulerConfig;
use crate::framework::{Profile, ScheduleError, ScheduleState, scheduled_message};
use crate::queue::{PodKey, SchedulingQueue};

/// How often pods unschedulable for too long are retried (upstream 30s).
const LEFTOVER_FLUSH_INTERVAL: Duration = Duration::from_secs(30);

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
    /// The cluster's clock (time, timers, busy accounting, and the random
    /// source that breaks score ties).
    pub clock: Clock,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        SchedulerOptions {
            profiles: vec![Profile::default_profile()],
            record_decisions: false,
            instance: None,
            clock: Clock::real(),
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

/// Breaks score ties with the cluster's random source.
struct ClockRng(Random);

impl rand::RngCore for ClockRng {
    fn next_u32(&mut self) -> u32 {
        (self.0.next_u64() >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        self.0.fill(dst);
    }
}

/// Runs the scheduler against the API until the client's informers stop.
pub async fn run(client: kube::Client, options: SchedulerOptions) -> Result<(), SchedulerError> {
    let (tx, rx) = unbounded_channel();
    let informers = informers::spawn_all(&client, &options.clock, &tx);
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
    tx: UnboundedSender<Envelope>,
    clock: Clock,
    /// The nanoseconds the last event's name carried (names stay unique
    /// when events share an instant of a virtual clock).
    last_event_nanos: u64,
    /// Informers that have listed once (one bit each).
    synced: u32,
}

impl Scheduler {
    fn new(client: kube::Client, options: SchedulerOptions, tx: UnboundedSender<Envelope>) -> Self {
        let clock = options.clock;
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
            events: EventSink::spawn_with_clock(client.clone(), clock.clone()),
            client,
            profiles: profiles
                .into_iter()
                .map(|p| (p.scheduler_name.clone(), p))
                .collect(),
            queue,
            cache: Cache::default(),
            state: ScheduleState::new(Box::new(ClockRng(clock.random().clone()))),
            record_decisions: options.record_decisions,
            instance,
            recorder: EventRecorder::default(),
            tx,
            clock,
            last_event_nanos: 0,
            synced: 0,
        }
    }

    /// The time on the clock's monotonic timeline (what the queue counts in).
    fn now(&self) -> Duration {
        self.clock
            .instant()
            .saturating_duration_since(Instant::default())
    }

    /// The time the API sees.
    fn timestamp(&self) -> Timestamp {
        self.clock.timestamp()
    }

    /// The time of an event written now, and the nanoseconds its name
    /// carries (unique among this scheduler's events).
    fn event_time(&mut self) -> (Timestamp, u64) {
        let now = self.timestamp();
        let nanos = u64::try_from(now.as_nanosecond()).unwrap_or_default();
        let nanos = nanos.max(self.last_event_nanos.saturating_add(1));
        self.last_event_nanos = nanos;
        (now, nanos)
    }

    /// A new event about `pod`, at the clock's time.
    fn event(
        &mut self,
        pod: &Pod,
        text: EventText<'_>,
        scheduler_name: &str,
    ) -> k8s_openapi::api::events::v1::Event {
        let (now, name_nanos) = self.event_time();
        new_event(
            pod,
            text,
            EventSource {
                reporting_controller: scheduler_name,
                reporting_instance: &self.instance,
                now,
                name_nanos,
            },
        )
    }

    async fn run(&mut self, mut rx: UnboundedReceiver<Envelope>) -> Result<(), SchedulerError> {
        let mut next_flush = self.now() + LEFTOVER_FLUSH_INTERVAL;
        // Held while the loop has work; dropped only to wait.
        let mut working: Option<Busy> = None;
        loop {
            if working.is_none() {
                working = Some(self.clock.busy());
            }
            // Apply everything that arrived before deciding anything.
            while let Ok((message, _arrived)) = rx.try_recv() {
                self.handle(message);
            }
            if self.all_synced() && self.schedule_next() {
                tokio::task::consume_budget().await;
                continue;
            }
            let now = self.now();
            if now >= next_flush {
                self.queue.flush_unschedulable_leftover(now);
                next_flush = now + LEFTOVER_FLUSH_INTERVAL;
                continue;
            }
            // Wake for the next back-off to end, and for the periodic flush
            // only while pods wait in the unschedulable pool.
            let backoff = self.queue.next_backoff_expiry();
            let flush = self.queue.has_unschedulable().then_some(next_flush);
            let wake = match (backoff, flush) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
            .map(|at| self.clock.sleep_until(Instant::default() + at));
            working = None;
            tokio::select! {
                // Messages first, so runs repeat (no random branch order).
                biased;
                message = rx.recv() => match message {
                    Some((message, _arrived)) => {
                        working = Some(self.clock.busy());
                        self.handle(message);
                    }
                    None => return Err(SchedulerError::InformersStopped),
                },
                () = async {
                    match wake {
                        Some(sleep) => sleep.await,
                        None => std::future::pending().await,
                    }
                } => {}
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
        if self.clock.random().seed().is_some() {
            let random = self
                .clock
                .random()
                .keyed(&format!("schedule:{}/{}", key.0, key.1));
            self.state.set_rng(Box::new(ClockRng(random)));
        }
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
        let event = self.event(
            &pod,
            EventText {
                type_: "Normal",
                reason: "Scheduled",
                action: ACTION_BINDING,
                note: &scheduled_message(&pod, &node),
            },
            &profile.scheduler_name,
        );
        // The binding keeps the cluster busy until the loop has its outcome.
        let busy = self.clock.busy();
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
            let _ = tx.send((
                Message::Bound(BindOutcome {
                    pod,
                    node,
                    error,
                    permanent,
                }),
                busy,
            ));
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
        self.queue.add_or_update(outcome.pod.clone(), now);
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
            self.cache.snapshot.nominate(pod.clone(), &node);
            let client = self.client.clone();
            let scheduler_name = profile.scheduler_name.clone();
            let sink = self.events.clone();
            let note = format!(
                "Preempted by pod {} on node {node}",
                pod.metadata.uid.as_deref().unwrap_or_default()
            );
            let events: Vec<Box<_>> = victims
                .iter()
                .map(|victim| {
                    Box::new(self.event(
                        victim,
                        EventText {
                            type_: "Normal",
                            reason: "Preempted",
                            action: "Preempting",
                            note: &note,
                        },
                        &scheduler_name,
                    ))
                })
                .collect();
            let now = self.timestamp();
            let busy = self.clock.busy();
            tokio::spawn(async move {
                let _busy = busy;
                for (victim, event) in victims.iter().zip(events) {
                    match api::preempt(&client, victim, &scheduler_name, now).await {
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
        let patch =
            api::unschedulable_status_patch(pod, reason, message, nominated_node, self.timestamp());
        let scheduler_name = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or(crate::framework::DEFAULT_SCHEDULER_NAME);
        let event = self.event(
            pod,
            EventText {
                type_: "Warning",
                reason: "FailedScheduling",
                action: ACTION_SCHEDULING,
                note: message,
            },
            scheduler_name,
        );
        let write = self.recorder.record(event, self.clock.instant());
        self.events.send(write);
        if annotations.is_none() && patch.is_none() {
            return;
        }
        let client = self.client.clone();
        let pod = pod.clone();
        let busy = self.clock.busy();
        tokio::spawn(async move {
            let _busy = busy;
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
