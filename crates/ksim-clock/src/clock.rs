//! [`Clock`]: the cluster's time, real or virtual, with its instants, sleeps
//! and the virtual mode's stepping (fire the next timer, settle, repeat).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::jiff::Timestamp;

use crate::activity::{Activity, Busy};
use crate::sleep::{Elapsed, Interval, Sleep};
use crate::{Error, Random};

/// How a cluster's clock runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClockMode {
    /// The wall clock.
    #[default]
    Real,
    /// Stands still until advanced.
    Virtual,
}

impl std::fmt::Display for ClockMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ClockMode::Real => "real",
            ClockMode::Virtual => "virtual",
        })
    }
}

impl std::str::FromStr for ClockMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "real" => Ok(ClockMode::Real),
            "virtual" => Ok(ClockMode::Virtual),
            other => Err(format!(
                "unknown clock {other:?}: expected \"real\" or \"virtual\""
            )),
        }
    }
}

/// A point on a clock's monotonic timeline (time since the clock started).
/// Only instants of the same clock compare meaningfully.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(pub(crate) Duration);

impl Instant {
    /// The time from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(&self, earlier: Instant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// The time from `earlier` to `self`, if `earlier` is not later.
    pub fn checked_duration_since(&self, earlier: Instant) -> Option<Duration> {
        self.0.checked_sub(earlier.0)
    }

    /// `self` moved back by `by`, if that is not before the clock started.
    pub fn checked_sub(&self, by: Duration) -> Option<Instant> {
        self.0.checked_sub(by).map(Instant)
    }
}

impl std::ops::Add<Duration> for Instant {
    type Output = Instant;

    fn add(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_add(rhs))
    }
}

impl std::ops::AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        self.0 = self.0.saturating_add(rhs);
    }
}

impl std::ops::Sub<Instant> for Instant {
    type Output = Duration;

    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

/// The virtual timeline: where time stands and who waits for what.
#[derive(Debug)]
pub(crate) struct Timeline {
    start: DateTime<Utc>,
    pub(crate) elapsed: Duration,
    pub(crate) timers: BTreeMap<(Duration, u64), Waker>,
    sequence: u64,
}

impl Timeline {
    /// Registers (or re-registers) a waiter for `deadline`.
    pub(crate) fn register(
        &mut self,
        slot: Option<(Duration, u64)>,
        deadline: Duration,
        waker: &Waker,
    ) -> (Duration, u64) {
        if let Some(slot) = slot
            && let Some(existing) = self.timers.get_mut(&slot)
        {
            if !existing.will_wake(waker) {
                existing.clone_from(waker);
            }
            return slot;
        }
        self.sequence += 1;
        let slot = (deadline, self.sequence);
        self.timers.insert(slot, waker.clone());
        slot
    }

    /// Moves to `to` and takes the wakers of every timer then due.
    fn move_to(&mut self, to: Duration) -> Vec<Waker> {
        self.elapsed = self.elapsed.max(to);
        let mut due = Vec::new();
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > self.elapsed {
                break;
            }
            due.push(entry.remove());
        }
        due
    }
}

#[derive(Debug)]
pub(crate) enum Mode {
    Real { origin: tokio::time::Instant },
    Virtual(Mutex<Timeline>),
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) mode: Mode,
    random: Random,
    activity: Arc<Activity>,
}

impl Inner {
    pub(crate) fn timeline(&self) -> Option<MutexGuard<'_, Timeline>> {
        match &self.mode {
            Mode::Real { .. } => None,
            Mode::Virtual(timeline) => Some(timeline.lock().unwrap_or_else(|e| e.into_inner())),
        }
    }

    pub(crate) fn real_origin(&self) -> Option<tokio::time::Instant> {
        match &self.mode {
            Mode::Real { origin } => Some(*origin),
            Mode::Virtual(_) => None,
        }
    }
}

/// How many scheduler rounds in a row must pass with no guard held and
/// nothing touched before a virtual cluster counts as settled.
const QUIET_ROUNDS: u32 = 12;

/// How long (in real time) settling may take before giving up.
const SETTLE_LIMIT: Duration = Duration::from_secs(60);

/// The cluster's clock: cheap to clone; clones are the same clock.
#[derive(Debug, Clone)]
pub struct Clock {
    pub(crate) inner: Arc<Inner>,
}

impl Default for Clock {
    fn default() -> Self {
        Self::real()
    }
}

impl Clock {
    /// The wall clock, with a random source seeded by the OS.
    pub fn real() -> Self {
        Self::real_with(Random::from_entropy())
    }

    /// The wall clock, with the given random source.
    pub fn real_with(random: Random) -> Self {
        Self::build(
            Mode::Real {
                origin: tokio::time::Instant::now(),
            },
            random,
        )
    }

    /// A virtual clock standing at `start`, with a random source seeded by
    /// the OS.
    pub fn virtual_at(start: DateTime<Utc>) -> Self {
        Self::virtual_with(start, Random::from_entropy())
    }

    /// A virtual clock standing at `start`, with the given random source.
    pub fn virtual_with(start: DateTime<Utc>, random: Random) -> Self {
        Self::build(
            Mode::Virtual(Mutex::new(Timeline {
                start,
                elapsed: Duration::ZERO,
                timers: BTreeMap::new(),
                sequence: 0,
            })),
            random,
        )
    }

    fn build(mode: Mode, random: Random) -> Self {
        Self {
            inner: Arc::new(Inner {
                mode,
                random,
                activity: Arc::new(Activity::default()),
            }),
        }
    }

    /// Real or virtual.
    pub fn mode(&self) -> ClockMode {
        match self.inner.mode {
            Mode::Real { .. } => ClockMode::Real,
            Mode::Virtual(_) => ClockMode::Virtual,
        }
    }

    /// Whether this is a virtual clock.
    pub fn is_virtual(&self) -> bool {
        self.mode() == ClockMode::Virtual
    }

    /// The cluster's random source.
    pub fn random(&self) -> &Random {
        &self.inner.random
    }

    /// The current time.
    pub fn now(&self) -> DateTime<Utc> {
        match self.inner.timeline() {
            // The one place that reads the wall clock.
            None => Utc::now(),
            Some(timeline) => {
                timeline.start
                    + chrono::Duration::from_std(timeline.elapsed).unwrap_or(chrono::Duration::MAX)
            }
        }
    }

    /// The current time as a `jiff` timestamp (what k8s-openapi's `Time` and
    /// `MicroTime` hold).
    pub fn timestamp(&self) -> Timestamp {
        let now = self.now();
        Timestamp::new(now.timestamp(), now.timestamp_subsec_nanos() as i32)
            .unwrap_or(Timestamp::UNIX_EPOCH)
    }

    /// The current time as RFC 3339 with whole seconds, as Kubernetes
    /// writes `metav1.Time`.
    pub fn now_rfc3339(&self) -> String {
        self.now()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }

    /// The current point on the clock's monotonic timeline.
    pub fn instant(&self) -> Instant {
        match &self.inner.mode {
            Mode::Real { origin } => Instant(tokio::time::Instant::now().duration_since(*origin)),
            Mode::Virtual(timeline) => {
                Instant(timeline.lock().unwrap_or_else(|e| e.into_inner()).elapsed)
            }
        }
    }

    /// The time since `earlier`.
    pub fn elapsed_since(&self, earlier: Instant) -> Duration {
        self.instant().saturating_duration_since(earlier)
    }

    /// Completes once `duration` has passed on this clock.
    pub fn sleep(&self, duration: Duration) -> Sleep {
        self.sleep_until(self.instant() + duration)
    }

    /// Completes once the clock reaches `deadline`.
    pub fn sleep_until(&self, deadline: Instant) -> Sleep {
        Sleep::new(self.inner.clone(), deadline)
    }

    /// Ticks every `period`; the first tick completes at once.
    pub fn interval(&self, period: Duration) -> Interval {
        Interval::new(self.clone(), period)
    }

    /// Runs `future` for at most `duration` of this clock's time.
    pub async fn timeout<F: std::future::Future>(
        &self,
        duration: Duration,
        future: F,
    ) -> Result<F::Output, Elapsed> {
        let sleep = self.sleep(duration);
        tokio::select! {
            biased;
            output = future => Ok(output),
            () = sleep => Err(Elapsed),
        }
    }

    /// A guard that keeps a virtual cluster from counting as settled while
    /// held (a request in flight, a queue with items). Free on a real clock.
    pub fn busy(&self) -> Busy {
        match self.inner.mode {
            Mode::Real { .. } => Busy::idle(),
            Mode::Virtual(_) => self.inner.activity.enter(),
        }
    }

    /// Notes that something happened (a virtual cluster that saw a change is
    /// not settled yet).
    pub fn touch(&self) {
        if self.is_virtual() {
            self.inner.activity.touch();
        }
    }

    /// Waits until the cluster has settled: no [`Busy`] guard held and
    /// nothing touched for a few scheduler rounds. Returns at once on a real
    /// clock.
    pub async fn settle(&self) -> Result<(), Error> {
        if !self.is_virtual() {
            return Ok(());
        }
        let multi_thread = tokio::runtime::Handle::try_current()
            .map(|handle| handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
            .unwrap_or(false);
        // Real time bounds settling (a component that never stops working).
        let started = std::time::Instant::now();
        let (_, mut last) = self.inner.activity.reading();
        let mut quiet = 0;
        let mut busy_rounds = 0u32;
        loop {
            if multi_thread || busy_rounds > 1_000 {
                // Other threads (or a slow request) need real time to run.
                tokio::time::sleep(Duration::from_micros(200)).await;
            } else {
                tokio::task::yield_now().await;
            }
            let (busy, epoch) = self.inner.activity.reading();
            if busy == 0 && epoch == last {
                quiet += 1;
                busy_rounds = 0;
                if quiet >= QUIET_ROUNDS {
                    return Ok(());
                }
            } else {
                quiet = 0;
                last = epoch;
                if busy > 0 {
                    busy_rounds += 1;
                }
            }
            if started.elapsed() > SETTLE_LIMIT {
                return Err(Error::NotSettled(SETTLE_LIMIT));
            }
        }
    }

    /// When the next timer falls due (virtual clocks only).
    pub fn next_timer(&self) -> Option<DateTime<Utc>> {
        let timeline = self.inner.timeline()?;
        let (deadline, _) = timeline.timers.keys().next()?;
        Some(
            timeline.start + chrono::Duration::from_std(*deadline).unwrap_or(chrono::Duration::MAX),
        )
    }

    fn offset_of(&self, at: DateTime<Utc>) -> Result<Duration, Error> {
        let timeline = self.inner.timeline().ok_or(Error::NotVirtual)?;
        Ok((at - timeline.start).to_std().unwrap_or(Duration::ZERO))
    }

    /// Settles, then moves to the next timer if it falls due by `limit`,
    /// fires it (and every timer due at the same instant) and settles again.
    /// Returns the new time, or `None` when no timer falls due by `limit`
    /// (the clock then stays where it is).
    pub async fn fire_next(&self, limit: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, Error> {
        let limit = self.offset_of(limit)?;
        self.settle().await?;
        self.fire_settled(limit).await
    }

    /// [`Clock::fire_next`] on a cluster that has just settled (nothing ran
    /// since): no settle before the timer fires.
    async fn fire_settled(&self, limit: Duration) -> Result<Option<DateTime<Utc>>, Error> {
        let due = {
            let mut timeline = self.inner.timeline().ok_or(Error::NotVirtual)?;
            match timeline.timers.keys().next() {
                Some(&(deadline, _)) if deadline <= limit => {
                    let due = timeline.move_to(deadline);
                    tracing::trace!(at = ?deadline, timers = due.len(), "fire");
                    due
                }
                _ => return Ok(None),
            }
        };
        due.into_iter().for_each(Waker::wake);
        self.settle().await?;
        Ok(Some(self.now()))
    }

    /// Moves a virtual clock forward by `by`: fires every timer that falls
    /// due on the way, in time order, letting the cluster settle after each,
    /// and ends at exactly `now + by`, settled.
    pub async fn advance(&self, by: Duration) -> Result<DateTime<Utc>, Error> {
        let to = self.now() + chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
        self.advance_to(to).await
    }

    /// [`Clock::advance`] to a given time (no-op if it is not later).
    pub async fn advance_to(&self, to: DateTime<Utc>) -> Result<DateTime<Utc>, Error> {
        let target = self.offset_of(to)?;
        // Each step ends settled, and nothing runs between one step and the
        // next: one settle before the first timer is enough.
        self.settle().await?;
        while self.fire_settled(target).await?.is_some() {}
        let due = self
            .inner
            .timeline()
            .ok_or(Error::NotVirtual)?
            .move_to(target);
        // Settled already unless a timer fell due on the last stretch.
        if !due.is_empty() {
            due.into_iter().for_each(Waker::wake);
            self.settle().await?;
        }
        Ok(self.now())
    }

    /// Moves a virtual clock forward by `by` at once, waking every timer due
    /// without settling in between (for unit tests of a single component).
    pub fn jump(&self, by: Duration) -> Result<(), Error> {
        let due = {
            let mut timeline = self.inner.timeline().ok_or(Error::NotVirtual)?;
            let to = timeline.elapsed + by;
            timeline.move_to(to)
        };
        due.into_iter().for_each(Waker::wake);
        Ok(())
    }
}
