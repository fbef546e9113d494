//! ksim-clock: the one clock of a cluster, and its source of randomness.
//!
//! Every timestamp the API server writes and every timer, sleep, back-off,
//! lease, delay and interval a component waits on goes through a [`Clock`],
//! in one of two modes:
//!
//! - **real**: the wall clock; sleeps are `tokio::time` sleeps, so tests that
//!   pause tokio's clock keep working;
//! - **virtual**: time starts at a given instant and stands still until
//!   [`Clock::advance`] moves it. Advancing fires due timers one deadline at a
//!   time, in order, and lets the cluster *settle* after each (no
//!   [`Busy`] guard held — requests in flight, queued work — and nothing
//!   happening for a few scheduler rounds) before going on.
//!
//! The clock also carries the cluster's [`Random`] source: seeded, it makes
//! generated names, uids and the scheduler's tie-breaks repeat from run to run.
//!
//! The API server and every component reach the same clock, which is why it
//! lives below both (ksim-runtime re-exports it).

mod activity;
mod clock;
mod error;
mod random;
mod sleep;

pub use activity::Busy;
pub use clock::{Clock, ClockMode, Instant};
pub use error::Error;
pub use random::Random;
pub use sleep::{Elapsed, Interval, Sleep};
