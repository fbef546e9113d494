//! The subcommands of `ksim` that own cluster life: `create cluster`,
//! `delete cluster`, `get clusters`, `get kubeconfig`, `serve`, the
//! `bench` benchmarks; and the components: `scale node`, `kubelet`,
//! `controllers`, `scheduler`, `deschedule`, `autoscaler`, `explain pod`,
//! `dpdb-controller`, `node stop|start`; `snapshot save|restore|export`,
//! `record`, `replay`; `ui`, the web view's URL; `run`, scenario files;
//! `clock` (`clock advance`), the cluster's time; `drain`, kubectl's drain
//! waiting in the cluster's time.

mod autoscaler;
mod bench;
mod clock;
mod clock_cmd;
mod connect;
mod controllers;
mod create;
mod delete;
mod deschedule;
mod dpdb;
mod drain;
mod explain;
mod get;
mod kubelet;
mod node;
mod record;
mod run;
mod scale;
mod scheduler;
mod serve;
mod snapshot;
mod ui;

pub use autoscaler::{
    AutoscalerCommand, AutoscalerFlags, ClusterAutoscaler, autoscaler, start_autoscaler,
};
pub use bench::{
    ApiBench, DaemonSetBench, DpdbBench, DrainBench, KubeletBench, ScenariosBench, SnapshotBench,
    WorkloadsBench, bench_all, bench_api, bench_daemonset, bench_dpdb, bench_drain, bench_kubelet,
    bench_scenarios, bench_snapshot, bench_startup, bench_workloads,
};
pub use bench::{BulkBench, bench_bulk};
pub use clock::ClusterClock;
pub use clock_cmd::{ClockCommand, clock};
pub use controllers::run_controllers;
pub use create::{CreateCluster, create_cluster};
pub use delete::{DeleteCluster, delete_cluster};
pub use deschedule::{ClusterDescheduler, DescheduleCommand, deschedule, start_descheduler};
pub use dpdb::{DpdbControllerCommand, dpdb_controller};
pub use drain::{DrainCommand, DrainFailed, drain};
pub use explain::{ExplainPod, explain_pod};
pub use get::{get_clusters, get_kubeconfig};
pub use kubelet::{Kubelet, kubelet};
pub use node::{NodeCommand, node};
pub use record::{Record, Replay, record, replay};
pub use run::{RunCommand, run};
pub use scale::{ScaleNode, scale_node};
pub use scheduler::{SchedulerCommand, scheduler, start_scheduler};
pub use serve::{Component, ServeOptions, serve};
pub use snapshot::{
    SnapshotExport, SnapshotRestore, SnapshotSave, read_snapshot, restore_at_start,
    snapshot_export, snapshot_restore, snapshot_save,
};
pub use ui::ui;

/// Writes one line to stdout; a closed stdout is an error, not a panic.
fn print_line(line: impl std::fmt::Display) -> anyhow::Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}"))
}
