//! Spacing the syncs of one object by what they cost. A ReplicaSet with
//! thousands of pods is queued again by each of their events; upstream's
//! work queue merges the requests that arrive while a sync is queued, but
//! starts the next sync as soon as the last ends, so during a large
//! rollout the controller re-reads every pod of the set back to back,
//! using whatever CPU it is given. A sync's cost is its pods (it reads
//! each once), so here the next sync of an object starts no sooner than
//! [`PER_POD`] times the pods the last one read after that one started.
//! Requests arriving meanwhile merge into that next sync (the controller
//! runtime keeps one pending request per object while its sync runs). A
//! small set is next to unpaced (a thousand pods: 2 ms); a set of ten
//! thousand is synced at most fifty times a second, its pods' events in
//! batches.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use ksim_runtime::clock::{Clock, Instant};

/// The spacing a sync's every pod adds before the next sync of its object.
pub(crate) const PER_POD: Duration = Duration::from_micros(2);

/// Past this many objects, ones whose next sync may start now are forgotten.
const PRUNE_ABOVE: usize = 10_000;

/// When each object's next sync may start.
pub(crate) struct SyncPacer {
    clock: Clock,
    next_start: Mutex<HashMap<String, Instant>>,
}

/// A sync in progress: when dropped, records when the object's next sync
/// may start.
pub(crate) struct SyncTimer<'a> {
    pacer: &'a SyncPacer,
    key: String,
    started: Instant,
    pods: u32,
}

impl SyncTimer<'_> {
    /// Records how many pods this sync read.
    pub(crate) fn read_pods(&mut self, pods: usize) {
        self.pods = u32::try_from(pods).unwrap_or(u32::MAX);
    }
}

impl Drop for SyncTimer<'_> {
    fn drop(&mut self) {
        let next = self.started + PER_POD.saturating_mul(self.pods);
        self.pacer
            .lock()
            .insert(std::mem::take(&mut self.key), next);
    }
}

impl SyncPacer {
    /// A pacer on `clock`. On a virtual clock syncs take no time, so none
    /// is paced.
    pub(crate) fn new(clock: &Clock) -> Self {
        SyncPacer {
            clock: clock.clone(),
            next_start: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.next_start
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The wait before a sync of `key` may start now.
    fn wait(&self, key: &str) -> Duration {
        if self.clock.is_virtual() {
            return Duration::ZERO;
        }
        let now = self.clock.instant();
        let mut next_start = self.lock();
        if next_start.len() > PRUNE_ABOVE {
            next_start.retain(|_, at| *at > now);
        }
        next_start
            .get(key)
            .map_or(Duration::ZERO, |at| at.saturating_duration_since(now))
    }

    /// Waits until a sync of `key` may start; the timer measures it.
    pub(crate) async fn pace(&self, key: &str) -> SyncTimer<'_> {
        let wait = self.wait(key);
        if !wait.is_zero() {
            self.clock.sleep(wait).await;
        }
        SyncTimer {
            pacer: self,
            key: key.to_string(),
            started: self.clock.instant(),
            pods: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_next_sync_waits_in_proportion_to_the_pods_the_last_one_read() {
        let pacer = SyncPacer::new(&Clock::real());
        let mut timer = pacer.pace("a").await;
        timer.read_pods(10_000);
        tokio::time::advance(Duration::from_millis(5)).await;
        drop(timer);
        assert_eq!(pacer.wait("a"), PER_POD * 10_000 - Duration::from_millis(5));
        // Another object is not held back, nor is this one once the wait passed.
        assert_eq!(pacer.wait("b"), Duration::ZERO);
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(pacer.wait("a"), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_sync_that_read_no_pods_is_not_paced() {
        let pacer = SyncPacer::new(&Clock::real());
        drop(pacer.pace("a").await);
        assert_eq!(pacer.wait("a"), Duration::ZERO);
    }
}
