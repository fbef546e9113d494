//! The cluster's clock as a scenario run sees it: the time the timeline
//! shows, and, for a virtual clock, settling, firing the next timer and
//! advancing. The cluster's own clock implements [`ScenarioClock`]; a real
//! clock is [`RealTime`].

use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use ksim_runtime::Clock as _;

/// What a run needs of the cluster's clock.
pub trait ScenarioClock: Send + Sync {
    /// The cluster's time.
    fn now(&self) -> DateTime<Utc>;
    /// Whether time stands still until advanced.
    fn is_virtual(&self) -> bool;
    /// Waits until the cluster has settled (a real clock returns at once).
    fn settle(&self) -> BoxFuture<'_, Result<(), String>>;
    /// Settles, fires the next timer if it falls due by `limit` and settles
    /// again; `None` when no timer falls due by then.
    fn fire_next(
        &self,
        limit: DateTime<Utc>,
    ) -> BoxFuture<'_, Result<Option<DateTime<Utc>>, String>>;
    /// Moves the clock forward by `by`, firing every timer on the way.
    fn advance(&self, by: Duration) -> BoxFuture<'_, Result<DateTime<Utc>, String>>;
}

/// The wall clock: nothing to settle, nothing to advance.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealTime;

/// The message for moving a real clock.
pub(crate) const NOT_VIRTUAL: &str =
    "the cluster's clock is real; only a virtual clock can be advanced";

impl ScenarioClock for RealTime {
    fn now(&self) -> DateTime<Utc> {
        ksim_runtime::RealClock.now()
    }

    fn is_virtual(&self) -> bool {
        false
    }

    fn settle(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }

    fn fire_next(&self, _: DateTime<Utc>) -> BoxFuture<'_, Result<Option<DateTime<Utc>>, String>> {
        Box::pin(async { Err(NOT_VIRTUAL.to_string()) })
    }

    fn advance(&self, _: Duration) -> BoxFuture<'_, Result<DateTime<Utc>, String>> {
        Box::pin(async { Err(NOT_VIRTUAL.to_string()) })
    }
}
