//! The scheduling queue (upstream `PriorityQueue`), as pure code over an
//! injected clock: an active queue ordered by the profile's QueueSort, a
//! backoff queue (1s doubling to 10s per failed attempt), the unschedulable
//! pool that cluster events (or 5 minutes) move pods out of, and the gated
//! pods PreEnqueue holds back. Its iteration order is fixed (a fixed hash
//! seed, and pods moved together are moved in name order), so the same
//! events give the same scheduling order on every run.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use foldhash::fast::FixedState;
use k8s_openapi::api::core::v1::Pod;

use crate::framework::{Profile, QueuedPodInfo, Status, pod_namespace};

/// Initial backoff of a pod that failed once (upstream default 1s).
pub const DEFAULT_INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// Backoff cap (upstream default 10s).
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(10);
/// How long a pod stays unschedulable without an event (upstream 5 minutes).
pub const DEFAULT_MAX_IN_UNSCHEDULABLE: Duration = Duration::from_secs(300);

/// Namespace and name.
pub type PodKey = (String, String);

fn key_of(pod: &Pod) -> PodKey {
    (
        pod_namespace(pod).to_string(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

/// Orders the active queue: whether `a` goes before `b`.
pub type LessFn = Arc<dyn Fn(&QueuedPodInfo, &QueuedPodInfo) -> bool + Send + Sync>;

struct Active {
    info: QueuedPodInfo,
    seq: u64,
    less: LessFn,
}

impl PartialEq for Active {
    fn eq(&self, other: &Self) -> bool {
        self.seq == other.seq
    }
}

impl Eq for Active {}

impl PartialOrd for Active {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Active {
    /// BinaryHeap pops the greatest: "less" (goes first) is greater.
    fn cmp(&self, other: &Self) -> Ordering {
        if (self.less)(&self.info, &other.info) {
            Ordering::Greater
        } else if (self.less)(&other.info, &self.info) {
            Ordering::Less
        } else {
            other.seq.cmp(&self.seq)
        }
    }
}

/// Where a pod waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueLocation {
    Active,
    Backoff,
    Unschedulable,
    /// Held back by a PreEnqueue plugin (scheduling gates).
    Gated,
    /// Popped and being scheduled.
    InFlight,
}

struct Entry {
    info: QueuedPodInfo,
    location: QueueLocation,
    /// When it became unschedulable or gated.
    since: Duration,
    /// When its backoff ends.
    backoff_until: Duration,
    /// Why PreEnqueue holds it.
    gate_status: Option<Status>,
}

/// The scheduling queue.
pub struct SchedulingQueue {
    less: LessFn,
    pre_enqueue: Arc<Profile>,
    active: BinaryHeap<Active>,
    backoff: BTreeMap<(Duration, u64), PodKey>,
    entries: HashMap<PodKey, Entry, FixedState>,
    seq: u64,
    /// Whether a pod may sit in the unschedulable pool (cleared when an
    /// event moves them all out), so events cost nothing when none waits.
    maybe_unschedulable: bool,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    pub max_in_unschedulable: Duration,
}

impl SchedulingQueue {
    /// A queue ordered by `profile`'s QueueSort and gated by its PreEnqueue plugins.
    pub fn new(profile: Arc<Profile>) -> Self {
        let sorter = profile.clone();
        SchedulingQueue {
            less: Arc::new(move |a, b| sorter.queue_less(a, b)),
            pre_enqueue: profile,
            active: BinaryHeap::new(),
            backoff: BTreeMap::new(),
            entries: HashMap::default(),
            seq: 0,
            maybe_unschedulable: false,
            initial_backoff: DEFAULT_INITIAL_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
            max_in_unschedulable: DEFAULT_MAX_IN_UNSCHEDULABLE,
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn push_active(&mut self, info: QueuedPodInfo) {
        let seq = self.next_seq();
        self.active.push(Active {
            info,
            seq,
            less: self.less.clone(),
        });
    }

    /// How long a pod waits after `attempts` failed attempts (upstream
    /// `calculateBackoffDuration`).
    pub fn backoff_duration(&self, attempts: u32) -> Duration {
        let mut duration = self.initial_backoff;
        for _ in 1..attempts {
            if duration > self.max_backoff.saturating_sub(duration) {
                return self.max_backoff;
            }
            duration += duration;
        }
        duration
    }

    /// Where a pod is, if queued.
    pub fn location(&self, namespace: &str, name: &str) -> Option<QueueLocation> {
        self.entries
            .get(&(namespace.to_string(), name.to_string()))
            .map(|e| e.location)
    }

    /// The number of pods known to the queue (in flight included).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the queue knows no pod.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Why PreEnqueue holds a gated pod.
    pub fn gate_status(&self, namespace: &str, name: &str) -> Option<&Status> {
        self.entries
            .get(&(namespace.to_string(), name.to_string()))
            .and_then(|e| e.gate_status.as_ref())
    }

    /// A new pending pod, or an update of a queued one.
    pub fn add_or_update(&mut self, pod: impl Into<Arc<Pod>>, now: Duration) {
        let pod = pod.into();
        let key = key_of(&pod);
        let gate = self.pre_enqueue.run_pre_enqueue_plugins(&pod);
        if let Some(entry) = self.entries.get_mut(&key)
            && matches!(
                entry.location,
                QueueLocation::Unschedulable | QueueLocation::Gated
            )
            && !pod_updated(&entry.info.pod, &pod)
        {
            // Only the status or resourceVersion changed (for instance our
            // own PodScheduled=False patch): the pod keeps waiting.
            entry.info.pod = pod;
            return;
        }
        let (info, location) = match self.entries.remove(&key) {
            Some(mut entry) => {
                entry.info.pod = pod;
                (entry.info, Some((entry.location, entry.backoff_until)))
            }
            None => (
                QueuedPodInfo {
                    pod,
                    timestamp: now.as_nanos().try_into().unwrap_or(u64::MAX),
                    attempts: 0,
                },
                None,
            ),
        };
        let mut entry = Entry {
            info: info.clone(),
            location: QueueLocation::Active,
            since: now,
            backoff_until: location.map(|(_, until)| until).unwrap_or(now),
            gate_status: None,
        };
        match location.map(|(l, _)| l) {
            Some(QueueLocation::InFlight) => {
                entry.location = QueueLocation::InFlight;
                self.entries.insert(key, entry);
                return;
            }
            Some(QueueLocation::Active) | Some(QueueLocation::Backoff) if gate.is_success() => {
                // Still queued where it was; the heap/backoff entry reads
                // the pod from `entries` when popped.
                entry.location = location.map(|(l, _)| l).unwrap_or(QueueLocation::Active);
                self.entries.insert(key, entry);
                return;
            }
            _ => {}
        }
        if !gate.is_success() {
            entry.location = QueueLocation::Gated;
            entry.gate_status = Some(gate);
            self.entries.insert(key, entry);
            return;
        }
        if entry.backoff_until > now {
            entry.location = QueueLocation::Backoff;
            let seq = self.next_seq();
            self.backoff.insert((entry.backoff_until, seq), key.clone());
        } else {
            self.push_active(info);
        }
        self.entries.insert(key, entry);
    }

    /// Forgets a pod (deleted or bound).
    pub fn delete(&mut self, namespace: &str, name: &str) {
        // Every bound pod of a (re)list passes here: no key is built for
        // an empty queue.
        if self.entries.is_empty() {
            return;
        }
        self.entries
            .remove(&(namespace.to_string(), name.to_string()));
    }

    fn flush_backoff(&mut self, now: Duration) {
        while let Some((&(until, seq), _)) = self.backoff.iter().next() {
            if until > now {
                break;
            }
            let Some(key) = self.backoff.remove(&(until, seq)) else {
                break;
            };
            let info = match self.entries.get_mut(&key) {
                Some(entry) if entry.location == QueueLocation::Backoff => {
                    entry.location = QueueLocation::Active;
                    entry.info.clone()
                }
                _ => continue,
            };
            self.push_active(info);
        }
    }

    /// The keys of every pod the queue knows.
    pub fn keys(&self) -> Vec<PodKey> {
        let mut keys: Vec<PodKey> = self.entries.keys().cloned().collect();
        keys.sort_unstable();
        keys
    }

    /// When the earliest backoff ends (to wake up for it).
    pub fn next_backoff_expiry(&self) -> Option<Duration> {
        self.backoff.keys().next().map(|(until, _)| *until)
    }

    /// Moves pods unschedulable for longer than `max_in_unschedulable` out.
    pub fn flush_unschedulable_leftover(&mut self, now: Duration) {
        let mut waiting = 0usize;
        let mut stale: Vec<PodKey> = self
            .entries
            .iter()
            .filter(|(_, e)| e.location == QueueLocation::Unschedulable)
            .inspect(|_| waiting += 1)
            .filter(|(_, e)| now.saturating_sub(e.since) > self.max_in_unschedulable)
            .map(|(k, _)| k.clone())
            .collect();
        self.maybe_unschedulable = waiting > stale.len();
        stale.sort_unstable();
        for key in stale {
            self.requeue(key, now);
        }
    }

    /// Whether a pod may wait in the unschedulable pool (for the periodic
    /// leftover flush; may be true when none does until the next flush).
    pub fn has_unschedulable(&self) -> bool {
        self.maybe_unschedulable
    }

    /// The next pod to schedule (backoffs that ended are moved first);
    /// counts an attempt.
    pub fn pop(&mut self, now: Duration) -> Option<QueuedPodInfo> {
        self.flush_backoff(now);
        while let Some(top) = self.active.pop() {
            let key = key_of(&top.info.pod);
            let Some(entry) = self.entries.get_mut(&key) else {
                continue;
            };
            if entry.location != QueueLocation::Active {
                continue;
            }
            entry.location = QueueLocation::InFlight;
            entry.info.attempts += 1;
            return Some(entry.info.clone());
        }
        None
    }

    /// A popped pod could not be scheduled: it waits for a cluster event
    /// (or its backoff, if an event came while it was in flight).
    pub fn add_unschedulable(&mut self, pod: &Pod, event_during_cycle: bool, now: Duration) {
        let key = key_of(pod);
        let backoff = {
            let Some(entry) = self.entries.get(&key) else {
                return;
            };
            self.backoff_duration(entry.info.attempts)
        };
        let Some(entry) = self.entries.get_mut(&key) else {
            return;
        };
        entry.backoff_until = now + backoff;
        entry.since = now;
        self.maybe_unschedulable = true;
        if event_during_cycle {
            entry.location = QueueLocation::Backoff;
            let until = entry.backoff_until;
            let seq = self.next_seq();
            self.backoff.insert((until, seq), key);
        } else {
            entry.location = QueueLocation::Unschedulable;
        }
    }

    fn requeue(&mut self, key: PodKey, now: Duration) {
        let Some(entry) = self.entries.get_mut(&key) else {
            return;
        };
        if entry.backoff_until > now {
            entry.location = QueueLocation::Backoff;
            let until = entry.backoff_until;
            self.seq += 1;
            let seq = self.seq;
            self.backoff.insert((until, seq), key);
        } else {
            entry.location = QueueLocation::Active;
            let info = entry.info.clone();
            self.push_active(info);
        }
    }

    /// A cluster event that may make unschedulable pods fit (node added or
    /// changed, pod deleted, ...): they go back to backoff or active.
    pub fn move_all_to_active_or_backoff(&mut self, now: Duration) {
        if !self.maybe_unschedulable {
            return;
        }
        self.maybe_unschedulable = false;
        let mut waiting: Vec<PodKey> = self
            .entries
            .iter()
            .filter(|(_, e)| e.location == QueueLocation::Unschedulable)
            .map(|(k, _)| k.clone())
            .collect();
        waiting.sort_unstable();
        for key in waiting {
            self.requeue(key, now);
        }
    }
}

/// Whether an update changes what scheduling reads (upstream `isPodUpdated`
/// ignores resourceVersion, generation and status).
fn pod_updated(old: &Pod, new: &Pod) -> bool {
    old.metadata.labels != new.metadata.labels
        || old.metadata.annotations != new.metadata.annotations
        || old.metadata.deletion_timestamp != new.metadata.deletion_timestamp
        || old.spec != new.spec
}

#[cfg(test)]
mod tests;
