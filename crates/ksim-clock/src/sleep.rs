//! Waiting on a [`Clock`](crate::Clock): [`Sleep`], [`Interval`] and the
//! error of a timeout. On a real clock these are tokio's timers; on a
//! virtual one they register in the clock's timeline and complete when an
//! advance reaches them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::clock::Inner;
use crate::{Clock, Instant};

/// A timeout elapsed before its future completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("deadline has elapsed")]
pub struct Elapsed;

/// Completes when its clock reaches a deadline. Dropping it cancels the timer.
#[derive(Debug)]
#[must_use = "a sleep does nothing unless awaited"]
pub struct Sleep {
    inner: Arc<Inner>,
    deadline: Instant,
    state: State,
}

#[derive(Debug)]
enum State {
    Real(Pin<Box<tokio::time::Sleep>>),
    Virtual { slot: Option<(Duration, u64)> },
}

impl Sleep {
    pub(crate) fn new(inner: Arc<Inner>, deadline: Instant) -> Self {
        let state = match inner.real_origin() {
            Some(origin) => State::Real(Box::pin(tokio::time::sleep_until(origin + deadline.0))),
            None => State::Virtual { slot: None },
        };
        Self {
            inner,
            deadline,
            state,
        }
    }

    /// When it completes.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the deadline has passed.
    pub fn is_elapsed(&self) -> bool {
        match &self.state {
            State::Real(sleep) => sleep.is_elapsed(),
            State::Virtual { .. } => self
                .inner
                .timeline()
                .is_none_or(|timeline| timeline.elapsed >= self.deadline.0),
        }
    }

    /// Moves the deadline (to earlier or later).
    pub fn reset(&mut self, deadline: Instant) {
        self.cancel();
        self.deadline = deadline;
        match &mut self.state {
            State::Real(sleep) => {
                if let Some(origin) = self.inner.real_origin() {
                    sleep.as_mut().reset(origin + deadline.0);
                }
            }
            State::Virtual { slot } => *slot = None,
        }
    }

    fn cancel(&mut self) {
        if let State::Virtual { slot } = &mut self.state
            && let Some(slot) = slot.take()
            && let Some(mut timeline) = self.inner.timeline()
        {
            timeline.timers.remove(&slot);
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let deadline = this.deadline.0;
        match &mut this.state {
            State::Real(sleep) => sleep.as_mut().poll(cx),
            State::Virtual { slot } => {
                let Some(mut timeline) = this.inner.timeline() else {
                    return Poll::Ready(());
                };
                if timeline.elapsed >= deadline {
                    if let Some(taken) = slot.take() {
                        timeline.timers.remove(&taken);
                    }
                    return Poll::Ready(());
                }
                *slot = Some(timeline.register(*slot, deadline, cx.waker()));
                Poll::Pending
            }
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// Ticks every period of its clock. The first tick completes at once; a
/// tick that comes late does not make the next ones come early.
#[derive(Debug)]
pub struct Interval {
    clock: Clock,
    period: Duration,
    next: Instant,
}

impl Interval {
    pub(crate) fn new(clock: Clock, period: Duration) -> Self {
        let next = clock.instant();
        Self {
            clock,
            period: period.max(Duration::from_nanos(1)),
            next,
        }
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Waits for the next tick and returns when it was due.
    pub async fn tick(&mut self) -> Instant {
        let due = self.next;
        self.clock.sleep_until(due).await;
        let now = self.clock.instant();
        self.next = due + self.period;
        if self.next <= now {
            self.next = now + self.period;
        }
        due
    }

    /// Makes the next tick come a full period from now.
    pub fn reset(&mut self) {
        self.next = self.clock.instant() + self.period;
    }
}
