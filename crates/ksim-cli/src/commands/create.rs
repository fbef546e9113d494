//! `ksim create cluster`: starts `ksim serve` in the background, waits for
//! `/readyz`, and writes the cluster's kubeconfig context.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};

use super::print_line;
use crate::cluster::{self, KsimHome, validate_cluster_name};
use crate::kubeconfig::{Kubeconfig, context_name, resolve_path, server_url};

/// How long a new cluster may take to answer `/readyz`.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a new cluster may take to load its snapshot and answer `/readyz`.
const SNAPSHOT_READY_TIMEOUT: Duration = Duration::from_secs(600);

/// Options of `ksim create cluster`.
#[derive(Debug, Clone)]
pub struct CreateCluster {
    pub name: String,
    /// 0 picks a free port.
    pub port: u16,
    pub kubeconfig: Option<PathBuf>,
    pub config: Option<PathBuf>,
    /// KubeSchedulerConfiguration for the cluster's scheduler.
    pub scheduler_config: Option<PathBuf>,
    /// Components not to run beside the API server.
    pub disable: Vec<super::serve::Component>,
    /// The in-cluster descheduler (`--descheduler-policy`).
    pub descheduler: super::deschedule::ClusterDescheduler,
    /// A snapshot the cluster starts from.
    pub snapshot: Option<PathBuf>,
    /// The in-cluster autoscaler (`--autoscaler`).
    pub autoscaler: super::autoscaler::ClusterAutoscaler,
    /// The cluster's clock (`--clock virtual`).
    pub clock: super::clock::ClusterClock,
}

/// Creates cluster `options.name` and makes its context current.
pub fn create_cluster(home: &KsimHome, options: &CreateCluster) -> anyhow::Result<()> {
    let name = options.name.as_str();
    validate_cluster_name(name)?;
    if let Some(config) = &options.config {
        bail!(
            "--config {}: cluster configuration files are not supported yet",
            config.display()
        );
    }
    if let Some(path) = &options.scheduler_config {
        super::scheduler::load_scheduler_config(path)?;
    }
    let descheduler_args = options.descheduler.serve_args()?;
    // The snapshot is read once, by the cluster's process: a bad one makes
    // it stop before it serves, and its one-line reason is printed here.
    let snapshot = match &options.snapshot {
        Some(path) => Some(
            std::path::absolute(path)
                .with_context(|| format!("invalid path {}", path.display()))?,
        ),
        None => None,
    };
    let cluster = home.cluster(name);
    if cluster.running_pid().is_some() || cluster.is_locked() {
        bail!("cluster {name:?} already exists");
    }
    if cluster.exists() {
        // The directory stays: a racing `create` of the same name may be
        // starting in it (its server's lock decides who wins).
        tracing::info!(cluster = name, "removing stale cluster state");
        remove_kubeconfig_entries(&cluster);
        cluster.clear_stale();
    }
    let kubeconfig_path = resolve_path(options.kubeconfig.as_deref())?;
    // Recorded for `delete cluster`, which may run from another directory.
    let kubeconfig_path = std::path::absolute(&kubeconfig_path)
        .with_context(|| format!("invalid kubeconfig path {}", kubeconfig_path.display()))?;
    // Fail before starting anything if the kubeconfig cannot be read.
    Kubeconfig::load(&kubeconfig_path)?;
    cluster.create()?;
    super::scheduler::store_cluster_scheduler_config(
        &cluster,
        options.scheduler_config.as_deref(),
    )?;

    let exe = std::env::current_exe().context("cannot find the ksim executable")?;
    let mut extra_args: Vec<String> = if options.disable.is_empty() {
        Vec::new()
    } else {
        let names: Vec<&str> = options.disable.iter().map(|c| c.name()).collect();
        vec!["--disable".to_string(), names.join(",")]
    };
    extra_args.extend(descheduler_args);
    let mut timeout = READY_TIMEOUT;
    if let Some(path) = &snapshot {
        extra_args.extend(["--snapshot".to_string(), path.display().to_string()]);
        timeout = SNAPSHOT_READY_TIMEOUT;
    }
    extra_args.extend(options.autoscaler.serve_args());
    extra_args.extend(
        options
            .clock
            .serve_args(ksim_runtime::clock::Clock::real().now()),
    );
    let startup_error = cluster.startup_error_path();
    let _ = std::fs::remove_file(&startup_error);
    let mut child = cluster::spawn_serve(&exe, &cluster, options.port, &extra_args)?;
    let port = match cluster::wait_until_ready(&mut child, &cluster, timeout) {
        Ok(port) => port,
        Err(e) => {
            // Why our server stopped, if it said (a bad snapshot).
            if let Some(reason) = std::fs::read_to_string(&startup_error)
                .ok()
                .map(|r| r.trim().to_string())
                .filter(|r| !r.is_empty())
            {
                let _ = cluster.remove();
                bail!("{reason}");
            }
            // Our server has stopped: if the name is locked, a racing
            // create's server holds it and won.
            if cluster.is_locked() {
                bail!("cluster {name:?} already exists");
            }
            let _ = cluster.remove();
            return Err(e);
        }
    };

    let written = cluster.record_kubeconfig(&kubeconfig_path).and_then(|()| {
        let mut config = Kubeconfig::load(&kubeconfig_path)?;
        config.set_cluster(name, &server_url(port));
        config.save(&kubeconfig_path)
    });
    if let Err(e) = written {
        let _ = child.kill();
        let _ = child.wait();
        let _ = cluster.remove();
        return Err(e);
    }
    print_line(format_args!(
        "Cluster {name:?} is ready. kubectl context {:?} written to {}.",
        context_name(name),
        kubeconfig_path.display()
    ))
}

/// Removes the entries a cluster wrote into its kubeconfig, if any.
pub(super) fn remove_kubeconfig_entries(cluster: &cluster::ClusterDir) {
    let Some(path) = cluster.kubeconfig() else {
        return;
    };
    let result = Kubeconfig::load(&path).and_then(|mut config| {
        if config.remove_cluster(cluster.name()) {
            config.save(&path)
        } else {
            Ok(())
        }
    });
    if let Err(e) = result {
        tracing::warn!(
            cluster = cluster.name(),
            "cannot clean the kubeconfig: {e:#}"
        );
    }
}
