//! `ksim serve`: runs a cluster (API server and kubelet simulator) in the
//! foreground, records its pid and port in the cluster's state directory, and
//! forgets them on SIGINT/SIGTERM. The web view (ksim-ui) is served at
//! `/ui/` on the same listener.

use std::time::Duration;

use anyhow::{Context, bail};
use tokio::signal::unix::{SignalKind, signal};

use crate::cluster::{KsimHome, validate_cluster_name};

/// Serves cluster `name` on 127.0.0.1:`port` (0 picks a free port) until
/// SIGINT or SIGTERM.
/// A component `ksim serve` runs beside the API server, unless disabled
/// (`--disable kubelet,controllers,scheduler`, as `kwokctl create cluster
/// --disable` does): an API server alone stores objects and nothing acts
/// on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Component {
    /// The kubelet simulator (nodes and pods follow their Stages).
    Kubelet,
    /// The workload, garbage-collection and disruption controllers.
    Controllers,
    /// The scheduler.
    Scheduler,
    /// The DistributedPodDisruptionBudget controller.
    Dpdb,
}

impl Component {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Component::Kubelet => "kubelet",
            Component::Controllers => "controllers",
            Component::Scheduler => "scheduler",
            Component::Dpdb => "dpdb",
        }
    }
}

/// What `ksim serve` runs beside the API server, and how.
pub struct ServeOptions<'a> {
    /// A kube-scheduler configuration file for the scheduler.
    pub scheduler_config: Option<&'a std::path::Path>,
    /// Components not to run.
    pub disabled: &'a [Component],
    /// The in-cluster descheduler, if a policy is given.
    pub descheduler: &'a super::deschedule::ClusterDescheduler,
    /// A snapshot loaded before the components start.
    pub snapshot: Option<&'a std::path::Path>,
    /// The in-cluster autoscaler.
    pub autoscaler: &'a super::autoscaler::ClusterAutoscaler,
    /// The cluster's clock.
    pub clock: &'a super::clock::ClusterClock,
}

pub fn serve(
    home: &KsimHome,
    name: &str,
    port: u16,
    options: ServeOptions<'_>,
) -> anyhow::Result<()> {
    let ServeOptions {
        scheduler_config,
        disabled,
        descheduler,
        snapshot,
        autoscaler,
        clock,
    } = options;
    validate_cluster_name(name)?;
    let cluster = home.cluster(name);
    let own_pid = std::process::id();
    // Held until the process exits.
    let Some(_lock) = cluster.lock()? else {
        bail!("cluster {name:?} already exists");
    };
    let clock = clock.build()?;
    // A virtual clock runs the cluster on one thread: settling is then a
    // matter of scheduler rounds, and runs repeat.
    let runtime = if clock.is_virtual() {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    }
    .enable_all()
    .build()
    .context("cannot start the async runtime")?;
    let result = runtime.block_on(async {
        let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
        let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .with_context(|| format!("cannot listen on 127.0.0.1:{port}"))?;
        let address = listener.local_addr().context("cannot read the listen address")?;
        let mut assembled = crate::assembly::Cluster::new(clock);
        // Loaded before the components start, and before the port is
        // recorded (so `create cluster` waits for it). The file is read
        // here only: why it does not parse or restore is left, in one line,
        // for `create cluster` to print.
        if let Some(path) = snapshot
            && let Err(error) = assembled.restore(path).await
        {
            let line = format!("{error:#}").replace('\n', " ");
            if let Err(e) = std::fs::write(cluster.startup_error_path(), format!("{line}\n")) {
                tracing::warn!(error = %e, "cannot record why the cluster did not start");
            }
            return Err(error);
        }
        cluster.record_serving(own_pid, address.port())?;
        tracing::info!(cluster = name, %address, pid = own_pid, "serving");
        let dpdb = if disabled.contains(&Component::Dpdb) {
            ksim_controllers::dpdb::DpdbConfig::default()
        } else {
            super::dpdb::in_cluster_config(home.root(), name)?
        };
        assembled
            .start(crate::assembly::Components {
                disabled: disabled.to_vec(),
                scheduler: super::scheduler::serve_scheduler_config(&cluster, scheduler_config),
                descheduler: descheduler
                    .policy
                    .clone()
                    .map(|policy| (policy, descheduler.interval())),
                autoscaler: autoscaler.autoscaler.then(|| autoscaler.flags.clone()),
                dpdb,
            })
            .await?;
        let result = tokio::select! {
            // The web view shares the API server's listener (same origin).
            result = axum::serve(listener, assembled.router()) => result.context("the API server failed"),
            _ = terminate.recv() => {
                tracing::info!(cluster = name, "SIGTERM: shutting down");
                Ok(())
            }
            _ = interrupt.recv() => {
                tracing::info!(cluster = name, "SIGINT: shutting down");
                Ok(())
            }
        };
        // The components stop with the cluster.
        drop(assembled);
        cluster.clear_serving(own_pid);
        result
    });
    // Tasks still running (open watches, blocking work) must not hold the exit.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}
