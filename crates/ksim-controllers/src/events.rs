//! Events the controllers record about the objects they act on (what
//! `kubectl describe` shows), through events.k8s.io as client-go's event
//! recorder writes them: the same event again within 6 minutes becomes a
//! series (its count and last time patched) rather than a new object.
//! Times are the cluster's clock, names `<object>.<16 hex digits>` from its
//! random source. Recording never fails or slows a sync: the write runs in
//! its own task (holding the clock busy). As client-go's
//! `EventSourceObjectSpamFilter`, each object gets a burst of 25 events,
//! then one more every 5 minutes; the rest are dropped. As client-go's
//! broadcaster (a queue of 1000 events, dropping when full), at most 1000
//! events of one recorder wait to be written: a burst beyond that (the
//! node controller registering 10,000 restored nodes at once) loses the
//! rest, before the spam filter or a series sees them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ksim_runtime::clock::{Clock, Instant};
use tokio::sync::Semaphore;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::SignedDuration;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};

/// How long a recorded event may still become a series.
const SERIES_WINDOW: SignedDuration = SignedDuration::from_mins(6);

/// Normal or Warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum EventType {
    Normal,
    Warning,
}

/// What makes two events the same (client-go's `eventKey`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct EventKey {
    type_: EventType,
    action: String,
    reason: String,
    /// The regarding object: apiVersion, kind, namespace, name, uid.
    regarding: [Option<String>; 5],
}

/// The events recorded lately. Those past the series window are swept out
/// when the map has doubled since the last sweep (a sweep per event would
/// cost a walk over every recent event each time); until then a lookup
/// ignores them.
#[derive(Default)]
struct Recorded {
    events: HashMap<EventKey, Event>,
    /// The size at which the next sweep runs.
    sweep_at: usize,
}

/// When an event was last seen.
fn last_seen(event: &Event) -> Option<k8s_openapi::jiff::Timestamp> {
    event
        .series
        .as_ref()
        .map(|s| s.last_observed_time.0)
        .or(event.event_time.as_ref().map(|t| t.0))
}

/// A recorder for one controller (`replicaset-controller`, ...).
#[derive(Clone)]
pub(crate) struct Events {
    client: Client,
    controller: String,
    /// The events recorded lately, for series.
    recorded: Arc<Mutex<Recorded>>,
    clock: Clock,
    budgets: Arc<Mutex<HashMap<String, TokenBucket>>>,
    /// The number of budgets at which the next sweep runs.
    sweep_budgets_at: Arc<std::sync::atomic::AtomicUsize>,
    /// One permit per event that may wait to be written.
    queue: Arc<Semaphore>,
}

/// Events of one recorder that may wait to be written at once (client-go's
/// `maxQueuedEvents`).
const MAX_QUEUED_EVENTS: usize = 1000;

/// Events allowed at once per object.
const BURST: f64 = 25.0;
/// One more event allowed per this long.
const REFILL: Duration = Duration::from_secs(300);

/// A token bucket (client-go's spam filter for one object).
#[derive(Debug, Clone, Copy)]
struct TokenBucket {
    tokens: f64,
    updated: Instant,
}

impl TokenBucket {
    fn full(now: Instant) -> Self {
        TokenBucket {
            tokens: BURST,
            updated: now,
        }
    }

    /// Takes a token if there is one.
    fn take(&mut self, now: Instant) -> bool {
        let refill =
            now.saturating_duration_since(self.updated).as_secs_f64() / REFILL.as_secs_f64();
        self.tokens = (self.tokens + refill).min(BURST);
        self.updated = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl Events {
    pub(crate) fn new(client: Client, controller: &str, clock: &Clock) -> Self {
        Events {
            clock: clock.clone(),
            client,
            controller: controller.to_string(),
            recorded: Arc::default(),
            budgets: Arc::default(),
            sweep_budgets_at: Arc::new(std::sync::atomic::AtomicUsize::new(10_000)),
            queue: Arc::new(Semaphore::new(MAX_QUEUED_EVENTS)),
        }
    }

    fn publish(
        &self,
        type_: EventType,
        regarding: ObjectReference,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let Ok(queued) = Arc::clone(&self.queue).try_acquire_owned() else {
            tracing::debug!(
                controller = %self.controller,
                reason,
                "event queue full: dropping the event"
            );
            return;
        };
        if !self.allowed(regarding.uid.as_deref().unwrap_or_default()) {
            return;
        }
        let key = EventKey {
            type_,
            action: action.to_string(),
            reason: reason.to_string(),
            regarding: [
                regarding.api_version.clone(),
                regarding.kind.clone(),
                regarding.namespace.clone(),
                regarding.name.clone(),
                regarding.uid.clone(),
            ],
        };
        let now = self.clock.timestamp();
        let (event, series) = {
            let mut recorded = self
                .recorded
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let live = |event: &Event| last_seen(event).is_none_or(|t| t + SERIES_WINDOW > now);
            if recorded.events.len() >= recorded.sweep_at {
                recorded.events.retain(|_, event| live(event));
                recorded.sweep_at = (recorded.events.len() * 2).max(64);
            }
            match recorded.events.get_mut(&key).filter(|event| live(event)) {
                Some(event) => {
                    let count = event.series.as_ref().map_or(2, |s| s.count + 1);
                    event.series = Some(EventSeries {
                        count,
                        last_observed_time: MicroTime(now),
                    });
                    (event.clone(), true)
                }
                None => {
                    let event = self.new_event(type_, &regarding, reason, action, note, now);
                    recorded.events.insert(key, event.clone());
                    (event, false)
                }
            }
        };
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        // A virtual cluster is not settled while an event is on its way.
        let busy = self.clock.busy();
        tokio::spawn(async move {
            let _busy = busy;
            let _queued = queued;
            let name = event.metadata.name.clone().unwrap_or_default();
            let written = if series {
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&event))
                    .await
            } else {
                api.create(&PostParams::default(), &event).await
            };
            if let Err(e) = written {
                tracing::debug!(error = %e, "cannot record an event");
            }
        });
    }

    /// A new event named `<object>.<16 hex digits>`.
    fn new_event(
        &self,
        type_: EventType,
        regarding: &ObjectReference,
        reason: &str,
        action: &str,
        note: String,
        now: k8s_openapi::jiff::Timestamp,
    ) -> Event {
        let object = regarding.name.as_deref().unwrap_or(&self.controller);
        Event {
            action: Some(action.to_string()),
            reason: Some(reason.to_string()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            note: Some(note),
            metadata: ObjectMeta {
                namespace: regarding.namespace.clone(),
                name: Some(format!(
                    "{object}.{:016x}",
                    self.clock
                        .random()
                        .keyed(&format!(
                            "event:{}/{object}",
                            regarding.namespace.as_deref().unwrap_or_default()
                        ))
                        .next_u64()
                )),
                ..ObjectMeta::default()
            },
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.controller.clone()),
            type_: Some(
                match type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_string(),
            ),
            ..Event::default()
        }
    }

    /// Whether the spam filter lets one more event about `uid` through.
    fn allowed(&self, uid: &str) -> bool {
        let now = self.clock.instant();
        let mut budgets = self
            .budgets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Full buckets of objects quiet for long are forgotten, swept when
        // the map has doubled since the last sweep (not on every event).
        let sweep_at = self
            .sweep_budgets_at
            .load(std::sync::atomic::Ordering::Relaxed);
        if budgets.len() > sweep_at {
            budgets.retain(|_, b| now.saturating_duration_since(b.updated) < REFILL * 25);
            self.sweep_budgets_at.store(
                (budgets.len() * 2).max(10_000),
                std::sync::atomic::Ordering::Relaxed,
            );
        }
        budgets
            .entry(uid.to_string())
            .or_insert_with(|| TokenBucket::full(now))
            .take(now)
    }

    /// A Normal event.
    pub(crate) fn normal(
        &self,
        regarding: ObjectReference,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.publish(EventType::Normal, regarding, reason, action, note);
    }

    /// A Warning event.
    pub(crate) fn warning(
        &self,
        regarding: ObjectReference,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.publish(EventType::Warning, regarding, reason, action, note);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some("default".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..ObjectReference::default()
        }
    }

    fn series_count(events: &Events, name: &str) -> Option<i32> {
        let recorded = events.recorded.lock().expect("lock");
        let event = recorded
            .events
            .iter()
            .find(|(key, _)| key.regarding[3].as_deref() == Some(name))
            .map(|(_, event)| event)?;
        Some(event.series.as_ref().map_or(1, |s| s.count))
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_same_event_within_the_window_is_a_series_and_after_it_a_new_event() {
        let clock = Clock::virtual_at("2026-01-01T00:00:00Z".parse().expect("time"));
        let cluster = ksim_testutils::in_process::InProcessCluster::with_clock(clock.clone());
        let events = Events::new(cluster.client.clone(), "test", &clock);
        // Many distinct events: none of them is swept while within the window.
        for i in 0..200 {
            events.normal(pod(&format!("p{i}")), "Created", "Create", "made".into());
        }
        events.normal(pod("p7"), "Created", "Create", "made".into());
        assert_eq!(series_count(&events, "p7"), Some(2));
        assert_eq!(events.recorded.lock().expect("lock").events.len(), 200);
        clock
            .jump(Duration::from_secs(7 * 60))
            .expect("a virtual clock");
        events.normal(pod("p7"), "Created", "Create", "made".into());
        assert_eq!(
            series_count(&events, "p7"),
            Some(1),
            "a new event, not a series"
        );
    }

    /// Waits until the cluster holds `count` events in `default`, and returns how many
    /// it holds then.
    async fn events_reach(client: &Client, count: usize) -> usize {
        let api: Api<Event> = Api::namespaced(client.clone(), "default");
        for _ in 0..2_000 {
            let listed = api.list(&Default::default()).await.expect("list events");
            if listed.items.len() >= count {
                return listed.items.len();
            }
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("fewer than {count} events were written");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_burst_beyond_the_queue_is_dropped_and_later_events_are_written() {
        let cluster = ksim_testutils::in_process::InProcessCluster::new();
        let events = Events::new(cluster.client.clone(), "test", &Clock::real());
        // Recorded in one go, as the node controller registers restored nodes: no
        // write runs meanwhile, so the queue takes the first 1000 and drops the rest.
        for i in 0..1_500 {
            events.normal(pod(&format!("p{i}")), "Created", "Create", "made".into());
        }
        assert_eq!(events.recorded.lock().expect("lock").events.len(), 1_000);
        assert_eq!(events_reach(&cluster.client, 1_000).await, 1_000);
        // Once written, the queue takes events again.
        while events.queue.available_permits() < MAX_QUEUED_EVENTS {
            tokio::task::yield_now().await;
        }
        events.normal(pod("later"), "Created", "Create", "made".into());
        assert_eq!(events_reach(&cluster.client, 1_001).await, 1_001);
    }

    #[test]
    fn an_object_gets_a_burst_of_25_events_then_one_per_5_minutes() {
        let start = Instant::default();
        let mut bucket = TokenBucket::full(start);
        let allowed = (0..40).filter(|_| bucket.take(start)).count();
        assert_eq!(allowed, 25);
        assert!(!bucket.take(start + Duration::from_secs(60)));
        assert!(bucket.take(start + Duration::from_secs(301)));
        assert!(!bucket.take(start + Duration::from_secs(302)));
    }
}
