//! What the scheduler writes to the API: bindings (`pods/binding`), the
//! PodScheduled condition and nominatedNodeName (a status patch),
//! preemption (DisruptionTarget condition, then delete), decision
//! annotations, and events.k8s.io/v1 Events with kube's series
//! deduplication, written by one background writer as client-go's events
//! broadcaster does (a queue of 1,000; events past it are dropped).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use ksim_runtime::WithoutManagedFields;
use ksim_runtime::clock::{Busy, Clock, Instant};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::framework::pod_namespace;

/// The `Scheduled` event's action.
pub const ACTION_BINDING: &str = "Binding";
/// The `FailedScheduling` event's action.
pub const ACTION_SCHEDULING: &str = "Scheduling";
/// How long repeats of an event are counted in one series (upstream 6 minutes).
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);
/// Upstream truncates event notes to this many bytes.
const MAX_NOTE_BYTES: usize = 1024;
/// Events queued for writing at most (client-go's `maxQueuedEvents`);
/// past it new events are dropped, as upstream drops them.
pub const MAX_QUEUED_EVENTS: usize = 1000;

fn name_of(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

fn pods(client: &kube::Client, pod: &Pod) -> Api<Pod> {
    Api::namespaced(client.clone(), pod_namespace(pod))
}

/// `POST pods/<name>/binding` to `node`.
pub async fn bind(client: &kube::Client, pod: &Pod, node: &str) -> Result<(), kube::Error> {
    let binding = json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {
            "name": name_of(pod),
            "namespace": pod_namespace(pod),
            "uid": pod.metadata.uid,
        },
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    pods(client, pod)
        .create_subresource::<_, serde_json::Value>(
            "binding",
            name_of(pod),
            &PostParams::default(),
            &binding,
        )
        .await
        .map(|_| ())
}

/// The PodScheduled=False condition and nominatedNodeName a failed cycle
/// writes (`Some("")` clears the nomination), or `None` when the pod
/// already carries them (upstream `updatePod` skips the call then);
/// `now` is the transition time of a new condition.
pub fn unschedulable_status_patch(
    pod: &Pod,
    reason: &str,
    message: &str,
    nominated_node: Option<&str>,
    now: Timestamp,
) -> Option<serde_json::Value> {
    let status = pod.status.as_ref();
    let existing = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"));
    let same_condition = existing.is_some_and(|c| {
        c.status == "False"
            && c.reason.as_deref() == Some(reason)
            && c.message.as_deref() == Some(message)
    });
    let current_nominated = status
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty());
    let nominated_changes = match nominated_node {
        Some("") => current_nominated.is_some(),
        Some(node) => current_nominated != Some(node),
        None => false,
    };
    if same_condition && !nominated_changes {
        return None;
    }
    let transition = existing
        .filter(|c| c.status == "False")
        .and_then(|c| c.last_transition_time.clone())
        .map(|t| t.0.to_string())
        .unwrap_or_else(|| now.to_string());
    let mut patch = json!({"status": {"conditions": [{
        "type": "PodScheduled",
        "status": "False",
        "reason": reason,
        "message": message,
        "lastProbeTime": null,
        "lastTransitionTime": transition,
    }]}});
    match nominated_node {
        Some("") if nominated_changes => patch["status"]["nominatedNodeName"] = json!(null),
        Some(node) if !node.is_empty() => patch["status"]["nominatedNodeName"] = json!(node),
        _ => {}
    }
    Some(patch)
}

/// Sends a status patch (strategic merge, as upstream's `PatchPodStatus`).
pub async fn patch_status(
    client: &kube::Client,
    pod: &Pod,
    patch: &serde_json::Value,
) -> Result<(), kube::Error> {
    pods(client, pod)
        .patch_status(
            name_of(pod),
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .await
        .map(|_| ())
}

/// Merges annotations into a pod.
pub async fn annotate(
    client: &kube::Client,
    pod: &Pod,
    annotations: &BTreeMap<String, String>,
) -> Result<(), kube::Error> {
    let patch = json!({"metadata": {"annotations": annotations}});
    pods(client, pod)
        .patch(name_of(pod), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

/// Evicts a preemption victim as upstream: the DisruptionTarget condition,
/// then delete (`now` is the condition's transition time).
pub async fn preempt(
    client: &kube::Client,
    victim: &Pod,
    scheduler_name: &str,
    now: Timestamp,
) -> Result<(), kube::Error> {
    let patch = json!({"status": {"conditions": [{
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": format!("{scheduler_name}: preempting to accommodate a higher priority pod"),
        "lastProbeTime": null,
        "lastTransitionTime": now.to_string(),
    }]}});
    match patch_status(client, victim, &patch).await {
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        other => other?,
    }
    match pods(client, victim)
        .delete(name_of(victim), &DeleteParams::default())
        .await
    {
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        other => other.map(|_| ()),
    }
}

/// The reference to a pod an Event is about.
fn reference(pod: &Pod) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_string()),
        kind: Some("Pod".to_string()),
        namespace: Some(pod_namespace(pod).to_string()),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        resource_version: pod.metadata.resource_version.clone(),
        ..Default::default()
    }
}

fn truncate(note: &str) -> String {
    if note.len() <= MAX_NOTE_BYTES {
        return note.to_string();
    }
    let mut end = MAX_NOTE_BYTES;
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    note[..end].to_string()
}

/// What an event says: its type, reason, action and note.
#[derive(Debug, Clone, Copy)]
pub struct EventText<'a> {
    pub type_: &'a str,
    pub reason: &'a str,
    pub action: &'a str,
    pub note: &'a str,
}

/// Who reports an event, and when.
#[derive(Debug, Clone, Copy)]
pub struct EventSource<'a> {
    pub reporting_controller: &'a str,
    pub reporting_instance: &'a str,
    /// The event's time.
    pub now: Timestamp,
    /// The nanoseconds its name carries (client-go uses the event's time;
    /// on a virtual clock several events of one pod share an instant, so
    /// the caller makes them unique).
    pub name_nanos: u64,
}

/// A new events.k8s.io/v1 Event about `pod`, named as client-go names
/// them (`<pod>.<hex nanoseconds>`).
pub fn new_event(pod: &Pod, text: EventText<'_>, source: EventSource<'_>) -> Event {
    let EventText {
        type_,
        reason,
        action,
        note,
    } = text;
    let EventSource {
        reporting_controller,
        reporting_instance,
        now,
        name_nanos: nanos,
    } = source;
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{}.{nanos:x}", name_of(pod))),
            namespace: Some(pod_namespace(pod).to_string()),
            ..Default::default()
        },
        event_time: Some(MicroTime(now)),
        action: Some(action.to_string()),
        reason: Some(reason.to_string()),
        note: Some(truncate(note)),
        type_: Some(type_.to_string()),
        regarding: Some(reference(pod)),
        reporting_controller: Some(reporting_controller.to_string()),
        reporting_instance: Some(reporting_instance.to_string()),
        ..Default::default()
    }
}

/// What to send for one event.
#[derive(Debug, Clone)]
pub enum EventWrite {
    /// A new Event object.
    Create(Box<Event>),
    /// Another occurrence of an Event already sent: its series.
    Series {
        namespace: String,
        name: String,
        series: EventSeries,
    },
}

/// Namespace, pod, reason and note of an event.
type SeriesKey = (String, String, String, String);

/// Deduplicates repeated events into series (client-go's events.k8s.io
/// broadcaster): the same pod, reason and note within 6 minutes update
/// the first Event's `series` instead of creating another.
#[derive(Debug, Default)]
pub struct EventRecorder {
    seen: HashMap<SeriesKey, (String, i32, Instant)>,
}

impl EventRecorder {
    /// The write for `event`, counting it in a series when it repeats.
    pub fn record(&mut self, event: Event, now: Instant) -> EventWrite {
        if self.seen.len() > 4096 {
            self.seen
                .retain(|_, (_, _, first)| now.saturating_duration_since(*first) < SERIES_WINDOW);
        }
        let regarding = event.regarding.as_ref();
        let key = (
            event.metadata.namespace.clone().unwrap_or_default(),
            regarding.and_then(|r| r.name.clone()).unwrap_or_default(),
            event.reason.clone().unwrap_or_default(),
            event.note.clone().unwrap_or_default(),
        );
        let namespace = key.0.clone();
        match self.seen.get_mut(&key) {
            Some((name, count, first)) if now.saturating_duration_since(*first) < SERIES_WINDOW => {
                *count += 1;
                EventWrite::Series {
                    namespace,
                    name: name.clone(),
                    series: EventSeries {
                        count: *count,
                        last_observed_time: event
                            .event_time
                            .clone()
                            .unwrap_or(MicroTime(Timestamp::UNIX_EPOCH)),
                    },
                }
            }
            _ => {
                let name = event.metadata.name.clone().unwrap_or_default();
                self.seen.insert(key, (name, 1, now));
                EventWrite::Create(Box::new(event))
            }
        }
    }

    /// Forgets the events about a pod (it was deleted).
    pub fn forget_pod(&mut self, namespace: &str, name: &str) {
        self.seen
            .retain(|(ns, pod, _, _), _| !(ns == namespace && pod == name));
    }
}

/// Sends an event write.
pub async fn send_event(client: &kube::Client, write: EventWrite) -> Result<(), kube::Error> {
    match write {
        EventWrite::Create(event) => {
            let namespace = event.metadata.namespace.clone().unwrap_or_default();
            // The response is read without its managedFields.
            Api::<WithoutManagedFields<Event>>::namespaced(client.clone(), &namespace)
                .create(&PostParams::default(), &WithoutManagedFields(*event))
                .await
                .map(|_| ())
        }
        EventWrite::Series {
            namespace,
            name,
            series,
        } => {
            let patch = json!({"series": series});
            Api::<WithoutManagedFields<Event>>::namespaced(client.clone(), &namespace)
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
        }
    }
}

/// Where the scheduler puts events: a bounded queue drained by one
/// writer task, so that scheduling and binding never wait on them. A
/// queued event keeps a virtual cluster busy until it is written.
#[derive(Debug, Clone)]
pub struct EventSink {
    tx: tokio::sync::mpsc::Sender<(EventWrite, Busy)>,
    clock: Clock,
}

impl EventSink {
    /// Starts the writer (on the current tokio runtime) on a real clock;
    /// it stops when every sink is dropped.
    pub fn spawn(client: kube::Client) -> Self {
        Self::spawn_with_clock(client, Clock::real())
    }

    /// Starts the writer; queued events count as work of `clock`.
    pub fn spawn_with_clock(client: kube::Client, clock: Clock) -> Self {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<(EventWrite, Busy)>(MAX_QUEUED_EVENTS);
        tokio::spawn(async move {
            while let Some((write, busy)) = rx.recv().await {
                if let Err(error) = send_event(&client, write).await {
                    tracing::debug!(%error, "cannot write an event");
                }
                drop(busy);
            }
        });
        EventSink { tx, clock }
    }

    /// Queues an event; drops it when the queue is full.
    pub fn send(&self, write: EventWrite) {
        if let Err(tokio::sync::mpsc::error::TrySendError::Full((write, _))) =
            self.tx.try_send((write, self.clock.busy()))
        {
            let reason = match &write {
                EventWrite::Create(event) => event.reason.clone().unwrap_or_default(),
                EventWrite::Series { name, .. } => name.clone(),
            };
            tracing::debug!(%reason, "event queue full; event dropped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::pod;

    fn source() -> EventSource<'static> {
        EventSource {
            reporting_controller: "default-scheduler",
            reporting_instance: "default-scheduler-x",
            now: Timestamp::from_second(1_000).expect("valid"),
            name_nanos: 1,
        }
    }

    #[test]
    fn repeated_events_become_a_series() {
        let mut recorder = EventRecorder::default();
        let p = pod("web").obj();
        let event = |note: &str| {
            new_event(
                &p,
                EventText {
                    type_: "Warning",
                    reason: "FailedScheduling",
                    action: ACTION_SCHEDULING,
                    note,
                },
                source(),
            )
        };
        let start = Instant::default();
        let first = recorder.record(event("0/1 nodes are available"), start);
        let EventWrite::Create(created) = first else {
            panic!("the first occurrence creates an event");
        };
        match recorder.record(event("0/1 nodes are available"), start) {
            EventWrite::Series { name, series, .. } => {
                assert_eq!(Some(name), created.metadata.name);
                assert_eq!(series.count, 2);
            }
            other => panic!("expected a series, got {other:?}"),
        }
        assert!(matches!(
            recorder.record(event("0/2 nodes are available"), start),
            EventWrite::Create(_)
        ));
        assert!(matches!(
            recorder.record(event("0/1 nodes are available"), start + SERIES_WINDOW),
            EventWrite::Create(_)
        ));
    }

    #[test]
    fn event_names_the_pod_and_truncates_long_notes() {
        let p = pod("web").namespace("shop").obj();
        let long = "x".repeat(2000);
        let event = new_event(
            &p,
            EventText {
                type_: "Normal",
                reason: "Scheduled",
                action: ACTION_BINDING,
                note: &long,
            },
            source(),
        );
        assert_eq!(event.metadata.name.as_deref(), Some("web.1"));
        assert_eq!(
            event.event_time.map(|t| t.0),
            Some(Timestamp::from_second(1_000).expect("valid"))
        );
        assert_eq!(event.metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(event.note.map(|n| n.len()), Some(MAX_NOTE_BYTES));
        let regarding = event.regarding.expect("regarding");
        assert_eq!(
            (regarding.kind.as_deref(), regarding.name.as_deref()),
            (Some("Pod"), Some("web"))
        );
    }

    #[test]
    fn status_patch_only_when_condition_or_nomination_changes() {
        let now = Timestamp::from_second(1_000).expect("valid");
        let mut p = pod("web").obj();
        let patch =
            unschedulable_status_patch(&p, "Unschedulable", "0/1 nodes", None, now).expect("first");
        assert_eq!(patch["status"]["conditions"][0]["reason"], "Unschedulable");
        assert!(patch["status"].get("nominatedNodeName").is_none());
        let status: k8s_openapi::api::core::v1::PodStatus =
            serde_json::from_value(patch["status"].clone()).expect("status");
        p.status = Some(status);
        assert!(unschedulable_status_patch(&p, "Unschedulable", "0/1 nodes", None, now).is_none());
        assert!(unschedulable_status_patch(&p, "Unschedulable", "0/2 nodes", None, now).is_some());
        let nominated =
            unschedulable_status_patch(&p, "Unschedulable", "0/1 nodes", Some("n1"), now)
                .expect("nominated");
        assert_eq!(nominated["status"]["nominatedNodeName"], "n1");
        assert!(
            unschedulable_status_patch(&p, "Unschedulable", "0/1 nodes", Some(""), now).is_none()
        );
        p.status.get_or_insert_default().nominated_node_name = Some("n1".to_string());
        let cleared = unschedulable_status_patch(&p, "Unschedulable", "0/1 nodes", Some(""), now)
            .expect("clears the nomination");
        assert!(cleared["status"]["nominatedNodeName"].is_null());
        assert!(cleared["status"].get("nominatedNodeName").is_some());
    }
}
