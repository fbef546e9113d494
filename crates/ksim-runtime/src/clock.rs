//! Clocks: the wall time components stamp into objects (`Now` in templates,
//! lease renew times), behind a trait so tests can set it. Waiting is done with
//! `tokio::time`, which tests pause and advance on their own.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeDelta, Utc};

/// The wall clock of a component.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time.
    fn now(&self) -> DateTime<Utc>;
}

/// A shared clock.
pub type SharedClock = Arc<dyn Clock>;

/// The system's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub struct TestClock {
    now: Mutex<DateTime<Utc>>,
}

impl TestClock {
    /// A clock standing at `now`.
    pub fn new(now: DateTime<Utc>) -> Self {
        Self {
            now: Mutex::new(now),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: TimeDelta) {
        let mut now = self.now.lock().unwrap_or_else(|e| e.into_inner());
        *now += by;
    }

    /// Sets the clock to `to`.
    pub fn set(&self, to: DateTime<Utc>) {
        *self.now.lock().unwrap_or_else(|e| e.into_inner()) = to;
    }
}

impl Clock for TestClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_clock_moves_only_when_told() {
        let start = DateTime::parse_from_rfc3339("2024-01-02T03:04:05Z")
            .expect("valid time")
            .with_timezone(&Utc);
        let clock = TestClock::new(start);
        assert_eq!(clock.now(), start);
        clock.advance(TimeDelta::seconds(10));
        assert_eq!(clock.now(), start + TimeDelta::seconds(10));
        clock.set(start);
        assert_eq!(clock.now(), start);
    }

    #[test]
    fn real_clock_is_close_to_system_time() {
        let delta = RealClock.now() - Utc::now();
        assert!(delta.num_seconds().abs() < 5);
    }
}
