//! The eviction API as the evictor calls it: a policy/v1 Eviction posted
//! to `pods/<name>/eviction` with the policy's gracePeriodSeconds, and the
//! events.k8s.io events upstream records on evicted pods (at the cluster
//! clock's time; a repeat within 6 minutes counts in the first event's
//! series, as client-go's recorder does).
//!
//! The cycle's plugins run on a blocking thread and call the API
//! synchronously; each call goes to the cluster's runtime ([`EvictionCalls`])
//! and is made there, as any component's request. The two take turns: the
//! runtime waits while the cycle decides, the cycle waits while its request
//! is in flight. On a virtual cluster's one thread, the cycle's evictions
//! therefore come at the same points among the other components' reactions
//! every run, whatever the threads' timing.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, MicroTime, ObjectMeta};
use ksim_runtime::clock::{Clock, Instant};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde_json::json;
use std::sync::mpsc;

use super::podevictor::EvictionApi;
use crate::framework::EvictionRequest;

/// Who requests the evictions and reports the events (upstream's name).
pub const DESCHEDULER_NAME: &str = "sigs.k8s.io/descheduler";

/// How long repeats of an event count in one series (client-go's 6 minutes).
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// Namespace, pod, type, reason and note of an event.
type EventKey = (String, String, String, String, String);

/// The events already written: (namespace, pod, type, reason, note) →
/// (event name, count, first written), and the nanoseconds of the last
/// event name (names stay unique when events share an instant).
#[derive(Debug, Default)]
pub struct EventLog {
    seen: HashMap<EventKey, (String, i32, Instant)>,
    last_nanos: u64,
}

/// What the cycle's thread asks the runtime to do.
enum Call {
    /// Post `eviction` for pod `namespace/name`; the outcome goes back.
    Evict {
        namespace: String,
        name: String,
        eviction: Box<Eviction>,
        reply: mpsc::Sender<Result<(), kube::Error>>,
    },
    /// Write an event (the cluster stays busy until it is written).
    Event(EventWrite, ksim_runtime::clock::Busy),
}

/// The eviction API of a cluster, used from the cycle's blocking thread;
/// its requests are made by [`EvictionCalls::serve`] on the runtime.
pub struct KubeEvictionApi {
    calls: mpsc::Sender<Call>,
    grace_period_seconds: Option<i64>,
    clock: Clock,
    events: Arc<Mutex<EventLog>>,
}

/// The runtime's side of a [`KubeEvictionApi`]: makes its calls.
pub struct EvictionCalls {
    client: Client,
    inbox: mpsc::Receiver<Call>,
}

impl KubeEvictionApi {
    /// An API whose requests go through `client` once [`EvictionCalls::serve`]
    /// runs; its events carry `clock`'s time and keep it busy until written;
    /// `events` remembers them across cycles (for series).
    pub fn with_clock(
        client: Client,
        grace_period_seconds: Option<i64>,
        clock: Clock,
        events: Arc<Mutex<EventLog>>,
    ) -> (Self, EvictionCalls) {
        let (calls, inbox) = mpsc::channel();
        (
            KubeEvictionApi {
                calls,
                grace_period_seconds,
                clock,
                events,
            },
            EvictionCalls { client, inbox },
        )
    }

    /// What to write for an event about `pod` now: a new Event, or a
    /// series update of the same event written less than 6 minutes ago.
    fn event_write(&self, pod: &Pod, type_: &str, reason: &str, note: String) -> EventWrite {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let now = self.clock.timestamp();
        let instant = self.clock.instant();
        let mut log = self.events.lock().unwrap_or_else(|e| e.into_inner());
        if log.seen.len() > 4096 {
            log.seen.retain(|_, (_, _, first)| {
                instant.saturating_duration_since(*first) < SERIES_WINDOW
            });
        }
        let key = (
            namespace.clone(),
            pod.metadata.name.clone().unwrap_or_default(),
            type_.to_string(),
            reason.to_string(),
            note.clone(),
        );
        if let Some((name, count, first)) = log.seen.get_mut(&key)
            && instant.saturating_duration_since(*first) < SERIES_WINDOW
        {
            *count += 1;
            return EventWrite::Series {
                namespace,
                name: name.clone(),
                series: EventSeries {
                    count: *count,
                    last_observed_time: MicroTime(now),
                },
            };
        }
        let nanos = u64::try_from(now.as_nanosecond())
            .unwrap_or_default()
            .max(log.last_nanos.saturating_add(1));
        log.last_nanos = nanos;
        let name = format!("{}.{nanos:x}", key.1);
        log.seen.insert(key, (name.clone(), 1, instant));
        EventWrite::Create(Box::new(Event {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some("Descheduled".to_string()),
            reason: Some(reason.to_string()),
            note: Some(note),
            type_: Some(type_.to_string()),
            regarding: Some(pod.object_ref(&())),
            reporting_controller: Some(DESCHEDULER_NAME.to_string()),
            reporting_instance: Some(DESCHEDULER_NAME.to_string()),
            ..Default::default()
        }))
    }
}

/// One event write.
enum EventWrite {
    Create(Box<Event>),
    Series {
        namespace: String,
        name: String,
        series: EventSeries,
    },
}

async fn send_event(client: Client, write: EventWrite) -> Result<(), kube::Error> {
    match write {
        EventWrite::Create(event) => {
            let namespace = event.metadata.namespace.clone().unwrap_or_default();
            Api::<Event>::namespaced(client, &namespace)
                .create(&PostParams::default(), &event)
                .await
                .map(|_| ())
        }
        EventWrite::Series {
            namespace,
            name,
            series,
        } => Api::<Event>::namespaced(client, &namespace)
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"series": series})),
            )
            .await
            .map(|_| ()),
    }
}

impl EvictionApi for KubeEvictionApi {
    fn evict(&self, pod: &Pod, profile: &str, request: &EvictionRequest<'_>) -> Result<(), String> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let eviction = Eviction {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                annotations: Some(BTreeMap::from([
                    (
                        "reason".to_string(),
                        format!(
                            "triggered by {}/{}: {}",
                            profile, request.strategy, request.reason
                        ),
                    ),
                    ("requested-by".to_string(), DESCHEDULER_NAME.to_string()),
                ])),
                ..Default::default()
            },
            delete_options: Some(DeleteOptions {
                grace_period_seconds: self.grace_period_seconds,
                ..Default::default()
            }),
        };
        let (reply, outcome) = mpsc::channel();
        let sent = self.calls.send(Call::Evict {
            namespace,
            name: name.clone(),
            eviction: Box::new(eviction),
            reply,
        });
        let result = match sent.ok().and_then(|()| outcome.recv().ok()) {
            Some(result) => result,
            None => return Err("the descheduler is stopping".to_string()),
        };
        match result {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 429 => Err(format!(
                "error when evicting pod (ignoring) {name:?}: {}",
                status.message
            )),
            Err(kube::Error::Api(status)) if status.code == 404 => Err(format!(
                "pod not found when evicting {name:?}: {}",
                status.message
            )),
            Err(kube::Error::Api(status)) => Err(status.message),
            Err(error) => Err(error.to_string()),
        }
    }

    fn event(&self, pod: &Pod, warning: bool, reason: &str, note: String) {
        let type_ = if warning { "Warning" } else { "Normal" };
        let write = self.event_write(pod, type_, reason, note);
        // Recording never slows the cycle down; the cluster stays busy
        // until the event is written.
        let busy = self.clock.busy();
        if self.calls.send(Call::Event(write, busy)).is_err() {
            tracing::debug!("cannot record the event: the descheduler is stopping");
        }
    }
}

impl EvictionCalls {
    /// Makes the calls of the cycle's thread until it drops its API (the
    /// cycle is over), then waits for the cycle's events to be written, so
    /// that a cycle's end (and a one-shot `ksim deschedule` exiting) loses
    /// none. Between calls the runtime waits for the cycle's next one (see
    /// the module's doc).
    pub async fn serve(self) {
        let mut events = tokio::task::JoinSet::new();
        while let Some(call) = self.next_call() {
            match call {
                Call::Evict {
                    namespace,
                    name,
                    eviction,
                    reply,
                } => {
                    let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
                    let result = api
                        .create_subresource::<_, serde_json::Value>(
                            "eviction",
                            &name,
                            &PostParams::default(),
                            &*eviction,
                        )
                        .await
                        .map(drop);
                    // The cycle waits for it (it is gone only if it panicked).
                    let _ = reply.send(result);
                }
                Call::Event(write, busy) => {
                    let client = self.client.clone();
                    events.spawn(async move {
                        if let Err(error) = send_event(client, write).await {
                            tracing::debug!(%error, "cannot record the event");
                        }
                        drop(busy);
                    });
                }
            }
        }
        while events.join_next().await.is_some() {}
    }

    /// Blocks until the cycle's next call, `None` once it is over. On a
    /// multi-threaded runtime the worker hands its other tasks on while it
    /// waits; on one thread the whole runtime waits (the cycle's decisions
    /// between its calls take no cluster time).
    fn next_call(&self) -> Option<Call> {
        let multi_thread = tokio::runtime::Handle::try_current().is_ok_and(|handle| {
            handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
        });
        if multi_thread {
            tokio::task::block_in_place(|| self.inbox.recv().ok())
        } else {
            self.inbox.recv().ok()
        }
    }
}
