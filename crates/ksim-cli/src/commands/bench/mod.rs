//! `ksim bench`: benchmarks of ksim itself that print figures against their
//! targets. `startup` (time to /readyz, idle RSS), `api` (creates, lists,
//! RSS holding many pods, watch fan-out) and `all` (both).

mod api;
mod kubelet;
mod measure;
mod server;
mod startup;

pub use api::{ApiBench, bench_api};
pub use kubelet::{KubeletBench, bench_kubelet};
pub use startup::bench_startup;

/// Runs every benchmark: `startup` with `runs` starts, then `api`.
pub fn bench_all(runs: usize, api: &ApiBench) -> anyhow::Result<()> {
    bench_startup(runs)?;
    bench_api(api)
}
