//! `ksim bench`: benchmarks of ksim itself that print figures against their
//! targets. `bulk` (bulk creation in process, then paged pod lists), `startup` (time to /readyz, idle RSS), `api` (creates, lists,
//! RSS holding many pods, watch fan-out), `all` (both), and the component
//! benchmarks: `kubelet`, `workloads` (a large Deployment with the whole
//! cluster in process), `daemonset` (a DaemonSet on many nodes) and `drain` (nodes drained under a
//! PodDisruptionBudget), `snapshot` (save, restore,
//! export and replay at 10,000 nodes and 100,000 pods) and `dpdb`
//! (DistributedPodDisruptionBudgets over three clusters: propagation,
//! convergence of 1,000, idle CPU), and `scenarios` (`ksim run` over the
//! example scenarios; `advance 1h` on an idle cluster).

mod api;
mod bulk;
mod cluster;
mod daemonset;
mod dpdb;
mod drain;
mod kubelet;
mod measure;
mod scenarios;
mod server;
mod snapshot;
mod startup;
mod workloads;

pub use api::{ApiBench, bench_api};
pub use bulk::{BulkBench, bench_bulk};
pub use daemonset::{DaemonSetBench, bench_daemonset};
pub use dpdb::{DpdbBench, bench_dpdb};
pub use drain::{DrainBench, bench_drain};
pub use kubelet::{KubeletBench, bench_kubelet};
pub use scenarios::{ScenariosBench, bench_scenarios};
pub use snapshot::{SnapshotBench, bench_snapshot};
pub use startup::bench_startup;
pub use workloads::{WorkloadsBench, bench_workloads};

/// Runs every benchmark: `startup` with `runs` starts, then `api`.
pub fn bench_all(runs: usize, api: &ApiBench) -> anyhow::Result<()> {
    bench_startup(runs)?;
    bench_api(api)
}
