//! Whether the cluster is still working: components hold a [`Busy`] guard
//! while they have a request in flight or queued work, and touch the clock
//! when something happens. A virtual clock advances only once the cluster
//! has settled (no guard held, nothing touched for a few scheduler rounds).
//! In real mode guards cost nothing: they are not counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The counters a virtual clock settles on.
#[derive(Debug, Default)]
pub(crate) struct Activity {
    busy: AtomicUsize,
    epoch: AtomicU64,
}

impl Activity {
    pub(crate) fn enter(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::SeqCst);
        self.epoch.fetch_add(1, Ordering::SeqCst);
        Busy {
            activity: Some(self.clone()),
        }
    }

    pub(crate) fn touch(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// (guards held, changes so far).
    pub(crate) fn reading(&self) -> (usize, u64) {
        (
            self.busy.load(Ordering::SeqCst),
            self.epoch.load(Ordering::SeqCst),
        )
    }
}

/// Held while a component works on something (a request in flight, a queue
/// with items); a virtual clock does not move while any is held.
#[derive(Debug)]
#[must_use = "the cluster counts as busy only while the guard is held"]
pub struct Busy {
    activity: Option<Arc<Activity>>,
}

impl Busy {
    /// A guard that counts for nothing (real clocks).
    pub(crate) fn idle() -> Self {
        Self { activity: None }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(activity) = self.activity.take() {
            activity.epoch.fetch_add(1, Ordering::SeqCst);
            activity.busy.fetch_sub(1, Ordering::SeqCst);
        }
    }
}
