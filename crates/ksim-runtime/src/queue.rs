//! A delaying work queue keyed by object, in the manner of client-go's
//! workqueue: a key is handed to one worker at a time, keys added while being
//! processed come back once the worker calls [`WorkQueue::done`], and a key
//! may be scheduled for later. Scheduling a key again replaces its pending
//! deadline, so the latest decision about an object wins. Deadlines are on
//! the queue's [`Clock`]; while keys are ready or being processed the queue
//! holds a busy guard, so a virtual cluster does not count as settled.
//!
//! A queue arms one clock timer, whatever the number of its workers: an
//! alarm task sleeps until the earliest deadline (re-armed whenever that
//! changes) and then wakes a worker, which hands out the keys that fell due.
//! Idle workers only wait to be woken, so how many timers a virtual clock
//! holds, and when they fire, does not depend on which workers happen to be
//! idle.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ksim_clock::{Busy, Clock, Instant};
use tokio::sync::Notify;

/// The queue's one timer: when its earliest deadline falls, and the task
/// that sleeps until then.
#[derive(Debug, Default)]
struct Alarm {
    /// The earliest deadline of the queue, if any.
    at: Mutex<Option<Instant>>,
    /// Rung when `at` changes or the queue shuts down.
    changed: Notify,
    /// The queue is shut down (or dropped): the task ends.
    shut: AtomicBool,
    /// The task has been started.
    started: AtomicBool,
}

impl Alarm {
    fn at(&self) -> Option<Instant> {
        *self.at.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the earliest deadline, waking the task if it moved.
    fn set(&self, at: Option<Instant>) {
        let mut current = self.at.lock().unwrap_or_else(|e| e.into_inner());
        if *current != at {
            *current = at;
            drop(current);
            self.changed.notify_one();
        }
    }

    fn shut(&self) {
        self.shut.store(true, Ordering::SeqCst);
        self.changed.notify_one();
    }

    /// The task: sleeps until the earliest deadline, then wakes a worker
    /// (which promotes what fell due and moves the deadline on).
    async fn ring(self: Arc<Self>, workers: Arc<Notify>, clock: Clock) {
        let mut rung = None;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.shut.load(Ordering::SeqCst) {
                return;
            }
            match self.at() {
                Some(at) if rung != Some(at) => {
                    tokio::select! {
                        biased;
                        () = &mut changed => {}
                        () = clock.sleep_until(at) => {
                            rung = Some(at);
                            // A virtual cluster is not settled until a worker has
                            // taken what fell due.
                            clock.touch();
                            workers.notify_one();
                        }
                    }
                }
                _ => changed.await,
            }
        }
    }
}

#[derive(Debug)]
struct State<K> {
    timers: BTreeMap<(Instant, u64), K>,
    scheduled: HashMap<K, (Instant, u64)>,
    ready: VecDeque<K>,
    queued: HashSet<K>,
    processing: HashSet<K>,
    dirty: HashSet<K>,
    sequence: u64,
    shut_down: bool,
    busy: Option<Busy>,
}

impl<K: Hash + Eq + Clone> State<K> {
    /// Holds a busy guard exactly while keys are ready or being processed.
    fn account(&mut self, clock: &Clock) {
        let working = !self.ready.is_empty() || !self.processing.is_empty();
        if working && self.busy.is_none() {
            self.busy = Some(clock.busy());
        } else if !working {
            self.busy = None;
        }
    }

    fn make_ready(&mut self, key: K) {
        if self.processing.contains(&key) {
            self.dirty.insert(key);
        } else if self.queued.insert(key.clone()) {
            self.ready.push_back(key);
        }
    }

    fn cancel_timer(&mut self, key: &K) {
        if let Some(at) = self.scheduled.remove(key) {
            self.timers.remove(&at);
        }
    }

    fn promote_due(&mut self, now: Instant) {
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            self.scheduled.remove(&key);
            self.make_ready(key);
        }
    }
}

/// A work queue of keys, each handed out to one worker at a time.
#[derive(Debug)]
pub struct WorkQueue<K> {
    state: Mutex<State<K>>,
    notify: Arc<Notify>,
    alarm: Arc<Alarm>,
    clock: Clock,
}

impl<K> Drop for WorkQueue<K> {
    fn drop(&mut self) {
        self.alarm.shut();
    }
}

impl<K: Hash + Eq + Clone> Default for WorkQueue<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Hash + Eq + Clone> WorkQueue<K> {
    /// An empty queue on the wall clock.
    pub fn new() -> Self {
        Self::with_clock(Clock::real())
    }

    /// An empty queue whose deadlines are on `clock`.
    pub fn with_clock(clock: Clock) -> Self {
        Self {
            clock,
            state: Mutex::new(State {
                timers: BTreeMap::new(),
                scheduled: HashMap::new(),
                ready: VecDeque::new(),
                queued: HashSet::new(),
                processing: HashSet::new(),
                dirty: HashSet::new(),
                sequence: 0,
                shut_down: false,
                busy: None,
            }),
            notify: Arc::new(Notify::new()),
            alarm: Arc::new(Alarm::default()),
        }
    }

    /// Points the alarm at the earliest deadline (after any change of them).
    fn arm(&self, state: &State<K>) {
        self.alarm
            .set(state.timers.first_key_value().map(|((at, _), _)| *at));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes `key` ready now (cancelling a pending deadline).
    pub fn add(&self, key: K) {
        {
            let mut state = self.lock();
            if state.shut_down {
                return;
            }
            state.cancel_timer(&key);
            state.make_ready(key);
            state.account(&self.clock);
            self.arm(&state);
        }
        self.notify.notify_one();
    }

    /// Makes `key` ready after `delay`, replacing any deadline it had. A zero
    /// delay is [`WorkQueue::add`].
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            self.add(key);
            return;
        }
        let at = self.clock.instant() + delay;
        {
            let mut state = self.lock();
            if state.shut_down {
                return;
            }
            state.cancel_timer(&key);
            state.sequence += 1;
            let slot = (at, state.sequence);
            state.timers.insert(slot, key.clone());
            state.scheduled.insert(key, slot);
            self.arm(&state);
        }
    }

    /// Drops `key`'s pending deadline and, if it waits to be handed out, the key itself.
    pub fn forget(&self, key: &K) {
        let mut state = self.lock();
        state.cancel_timer(key);
        state.dirty.remove(key);
        if state.queued.remove(key) {
            state.ready.retain(|k| k != key);
        }
        state.account(&self.clock);
        self.arm(&state);
    }

    /// Whether `key` has a pending deadline.
    pub fn is_scheduled(&self, key: &K) -> bool {
        self.lock().scheduled.contains_key(key)
    }

    /// Keys ready or scheduled (not counting those being processed).
    pub fn len(&self) -> usize {
        let state = self.lock();
        state.ready.len() + state.scheduled.len()
    }

    /// Whether no key is ready or scheduled.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits for a ready key and marks it processing; `None` once the queue is shut down.
    /// The worker must call [`WorkQueue::done`] with the key when finished.
    pub async fn get(&self) -> Option<K> {
        if !self.alarm.started.swap(true, Ordering::SeqCst) {
            tokio::spawn(
                self.alarm
                    .clone()
                    .ring(self.notify.clone(), self.clock.clone()),
            );
        }
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.lock();
                if state.shut_down {
                    return None;
                }
                state.promote_due(self.clock.instant());
                self.arm(&state);
                state.account(&self.clock);
                if let Some(key) = state.ready.pop_front() {
                    state.queued.remove(&key);
                    state.processing.insert(key.clone());
                    state.account(&self.clock);
                    let more = !state.ready.is_empty();
                    drop(state);
                    if more {
                        self.notify.notify_one();
                    }
                    return Some(key);
                }
            }
            // The alarm wakes a worker when the earliest deadline falls.
            notified.await;
        }
    }

    /// Marks `key` processed; if it was added meanwhile it becomes ready again.
    pub fn done(&self, key: &K) {
        let requeued = {
            let mut state = self.lock();
            state.processing.remove(key);
            let requeued = if state.dirty.remove(key) {
                state.make_ready(key.clone());
                true
            } else {
                false
            };
            state.account(&self.clock);
            requeued
        };
        if requeued {
            self.notify.notify_one();
        }
    }

    /// Stops handing out keys: every `get` returns `None`.
    pub fn shut_down(&self) {
        {
            let mut state = self.lock();
            state.shut_down = true;
            state.busy = None;
        }
        self.alarm.shut();
        self.notify.notify_waiters();
        self.notify.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio::time::Instant;

    #[tokio::test(start_paused = true)]
    async fn ready_keys_come_out_in_order_once() {
        let queue = WorkQueue::new();
        queue.add("a");
        queue.add("b");
        queue.add("a");
        assert_eq!(queue.get().await, Some("a"));
        assert_eq!(queue.get().await, Some("b"));
        assert!(queue.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_key_waits_its_delay() {
        let queue = WorkQueue::new();
        let start = Instant::now();
        queue.add_after("a", Duration::from_secs(5));
        assert!(queue.is_scheduled(&"a"));
        assert_eq!(queue.get().await, Some("a"));
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn rescheduling_replaces_the_deadline() {
        let queue = WorkQueue::new();
        let start = Instant::now();
        queue.add_after("a", Duration::from_secs(5));
        queue.add_after("a", Duration::from_secs(9));
        queue.add_after("b", Duration::from_secs(7));
        assert_eq!(queue.get().await, Some("b"));
        assert_eq!(queue.get().await, Some("a"));
        assert_eq!(start.elapsed(), Duration::from_secs(9));
    }

    #[tokio::test(start_paused = true)]
    async fn add_cancels_a_pending_deadline() {
        let queue = WorkQueue::new();
        queue.add_after("a", Duration::from_secs(60));
        queue.add("a");
        let start = Instant::now();
        assert_eq!(queue.get().await, Some("a"));
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert!(!queue.is_scheduled(&"a"));
    }

    #[tokio::test(start_paused = true)]
    async fn key_added_while_processing_comes_back_after_done() {
        let queue = WorkQueue::new();
        queue.add("a");
        assert_eq!(queue.get().await, Some("a"));
        queue.add("a");
        assert!(queue.is_empty(), "not handed out twice at once");
        queue.done(&"a");
        assert_eq!(queue.get().await, Some("a"));
        queue.done(&"a");
        assert!(queue.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn forgotten_key_never_comes_out() {
        let queue = WorkQueue::new();
        queue.add_after("a", Duration::from_secs(1));
        queue.add("b");
        queue.forget(&"a");
        queue.forget(&"b");
        assert!(queue.is_empty());
        let got = tokio::time::timeout(Duration::from_secs(10), queue.get()).await;
        assert!(got.is_err(), "nothing is handed out");
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_wakes_waiting_workers() {
        let queue = Arc::new(WorkQueue::<&str>::new());
        let waiter = tokio::spawn({
            let queue = queue.clone();
            async move { queue.get().await }
        });
        tokio::task::yield_now().await;
        queue.shut_down();
        assert_eq!(waiter.await.expect("joins"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn many_workers_drain_many_keys() {
        let queue = Arc::new(WorkQueue::new());
        for i in 0..1000 {
            queue.add_after(i, Duration::from_millis(i % 7));
        }
        let mut workers = Vec::new();
        for _ in 0..8 {
            let queue = queue.clone();
            workers.push(tokio::spawn(async move {
                let mut seen = Vec::new();
                while let Ok(Some(key)) =
                    tokio::time::timeout(Duration::from_secs(1), queue.get()).await
                {
                    seen.push(key);
                    queue.done(&key);
                }
                seen
            }));
        }
        let mut all = Vec::new();
        for worker in workers {
            all.extend(worker.await.expect("joins"));
        }
        all.sort_unstable();
        assert_eq!(all, (0..1000).collect::<Vec<_>>());
    }
}

#[cfg(test)]
mod virtual_tests {
    use super::*;

    fn start() -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .expect("valid time")
            .with_timezone(&chrono::Utc)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn on_a_virtual_clock_a_delayed_key_comes_out_when_time_reaches_it() {
        let clock = Clock::virtual_at(start());
        let queue = std::sync::Arc::new(WorkQueue::with_clock(clock.clone()));
        queue.add_after("a", Duration::from_secs(300));
        let worker = tokio::spawn({
            let queue = queue.clone();
            let clock = clock.clone();
            async move {
                let key = queue.get().await;
                if let Some(key) = &key {
                    queue.done(key);
                }
                (key, clock.now())
            }
        });
        clock
            .advance(Duration::from_secs(299))
            .await
            .expect("virtual");
        assert!(!worker.is_finished());
        clock
            .advance(Duration::from_secs(1))
            .await
            .expect("virtual");
        let (key, at) = worker.await.expect("joins");
        assert_eq!(key, Some("a"));
        assert_eq!(at, start() + chrono::Duration::seconds(300));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn one_timer_follows_the_earliest_deadline_however_many_workers_are_idle() {
        let clock = Clock::virtual_at(start());
        let queue = std::sync::Arc::new(WorkQueue::with_clock(clock.clone()));
        let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
        queue.add_after("a", Duration::from_secs(10));
        queue.add_after("b", Duration::from_secs(20));
        for _ in 0..4 {
            tokio::spawn({
                let (queue, seen, clock) = (queue.clone(), seen.clone(), clock.clone());
                async move {
                    while let Some(key) = queue.get().await {
                        seen.lock().expect("seen").push((key, clock.now()));
                        queue.done(&key);
                    }
                }
            });
        }
        let at = |seconds| Some(start() + chrono::Duration::seconds(seconds));
        clock.settle().await.expect("settles");
        assert_eq!(clock.next_timer(), at(10));
        // The earliest deadline moves later: no timer stays behind at 10s.
        queue.add_after("a", Duration::from_secs(30));
        clock.settle().await.expect("settles");
        assert_eq!(clock.next_timer(), at(20));
        queue.forget(&"b");
        clock.settle().await.expect("settles");
        assert_eq!(clock.next_timer(), at(30));
        let fired = clock.fire_next(start() + chrono::Duration::hours(1)).await;
        assert_eq!(fired.expect("virtual"), at(30));
        assert_eq!(
            *seen.lock().expect("seen"),
            [("a", start() + chrono::Duration::seconds(30))]
        );
        assert_eq!(clock.next_timer(), None);
        queue.shut_down();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_key_being_processed_keeps_the_cluster_from_settling() {
        let clock = Clock::virtual_at(start());
        let queue = std::sync::Arc::new(WorkQueue::with_clock(clock.clone()));
        queue.add("a");
        let processed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        tokio::spawn({
            let queue = queue.clone();
            let processed = processed.clone();
            async move {
                let key = queue.get().await.expect("a key");
                for _ in 0..100 {
                    tokio::task::yield_now().await;
                }
                processed.store(true, std::sync::atomic::Ordering::SeqCst);
                queue.done(&key);
            }
        });
        clock.settle().await.expect("settles");
        assert!(processed.load(std::sync::atomic::Ordering::SeqCst));
    }
}
