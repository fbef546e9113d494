//! `ksim bench`: benchmarks of ksim itself that print figures against their
//! targets. `startup` (time to /readyz, idle RSS), `api` (creates, lists,
//! RSS holding many pods, watch fan-out), `drain` (nodes drained under a
//! PodDisruptionBudget, hidden) and `all` (startup and api).

mod api;
mod drain;
mod measure;
mod server;
mod startup;

pub use api::{ApiBench, bench_api};
pub use drain::{DrainBench, bench_drain};
pub use startup::bench_startup;

/// Runs every benchmark: `startup` with `runs` starts, then `api`.
pub fn bench_all(runs: usize, api: &ApiBench) -> anyhow::Result<()> {
    bench_startup(runs)?;
    bench_api(api)
}
