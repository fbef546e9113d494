//! `ksim scheduler`: the scheduler alone against the current context or
//! `--kubeconfig` (a ksim cluster or a real one), and the scheduler a
//! `ksim serve` cluster runs in process; both read a
//! KubeSchedulerConfiguration from `--config` / `--scheduler-config`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use ksim_scheduler::scheduler::SchedulerOptions;

use crate::cluster::ClusterDir;

/// Options of `ksim scheduler`.
#[derive(Debug, Clone)]
pub struct SchedulerCommand {
    pub kubeconfig: Option<PathBuf>,
    pub config: Option<PathBuf>,
    pub record_decisions: bool,
}

/// Reads a KubeSchedulerConfiguration file (YAML or JSON) into options.
pub fn load_scheduler_config(path: &Path) -> anyhow::Result<SchedulerOptions> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let value: serde_json::Value = serde_saphyr::from_str(&text).map_err(|e| {
        let message = e.to_string();
        anyhow::anyhow!(
            "{}: invalid YAML: {}",
            path.display(),
            message.lines().next().unwrap_or_default()
        )
    })?;
    let config = ksim_scheduler::config::from_json(&value)
        .with_context(|| format!("invalid scheduler configuration {}", path.display()))?;
    Ok(config.into())
}

/// A client for the kubeconfig at `path`, else the usual lookup
/// (`$KUBECONFIG`, `~/.kube/config`, in-cluster).
pub async fn kube_client(path: Option<&Path>) -> anyhow::Result<kube::Client> {
    super::connect::kubeconfig_client(path).await
}

/// Runs `ksim scheduler` until interrupted.
pub fn scheduler(command: &SchedulerCommand) -> anyhow::Result<()> {
    let mut options = match &command.config {
        Some(path) => load_scheduler_config(path)?,
        None => SchedulerOptions::default(),
    };
    options.record_decisions = command.record_decisions;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let client = kube_client(command.kubeconfig.as_deref()).await?;
        tokio::select! {
            result = ksim_scheduler::scheduler::run(client, options) => {
                result.context("the scheduler stopped")
            }
            _ = tokio::signal::ctrl_c() => Ok(()),
        }
    })
}

/// Where `create cluster --scheduler-config` leaves the configuration for
/// the cluster's `serve` process.
pub fn cluster_scheduler_config(cluster: &ClusterDir) -> PathBuf {
    cluster.scheduler_config_path()
}

/// Checks `config` and stores it for the cluster (or removes a stale one).
pub fn store_cluster_scheduler_config(
    cluster: &ClusterDir,
    config: Option<&Path>,
) -> anyhow::Result<()> {
    let target = cluster_scheduler_config(cluster);
    match config {
        Some(path) => {
            load_scheduler_config(path)?;
            std::fs::copy(path, &target)
                .with_context(|| format!("cannot copy {}", path.display()))?;
        }
        None => {
            let _ = std::fs::remove_file(&target);
        }
    }
    Ok(())
}

/// The scheduler configuration `ksim serve` uses: `config`, else the one
/// `create cluster` stored for the cluster.
pub fn serve_scheduler_config(cluster: &ClusterDir, config: Option<&Path>) -> Option<PathBuf> {
    let stored = cluster_scheduler_config(cluster);
    config
        .map(Path::to_path_buf)
        .or_else(|| stored.is_file().then_some(stored))
}

/// Starts the scheduler in a cluster, over the in-process client, with the
/// configuration at `config` (default: upstream's profile), on the
/// cluster's `clock`.
pub fn start_scheduler(
    server: &ksim_apiserver::ApiServer,
    config: Option<&Path>,
    clock: ksim_runtime::Clock,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let mut options = match config {
        Some(path) => load_scheduler_config(path)?,
        None => SchedulerOptions::default(),
    };
    options.clock = clock;
    let client = ksim_runtime::client::in_process(server);
    Ok(tokio::spawn(async move {
        if let Err(error) = ksim_scheduler::scheduler::run(client, options).await {
            tracing::error!(%error, "the scheduler stopped");
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_yaml_configuration_and_rejects_bad_ones() {
        let dir = tempfile::tempdir().expect("temp dir");
        let good = dir.path().join("good.yaml");
        std::fs::write(
            &good,
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: my-scheduler\n",
        )
        .expect("write");
        let options = load_scheduler_config(&good).expect("valid");
        assert_eq!(options.profiles.len(), 1);
        assert_eq!(options.profiles[0].scheduler_name, "my-scheduler");
        let bad = dir.path().join("bad.yaml");
        std::fs::write(
            &bad,
            "kind: KubeSchedulerConfiguration\npercentageOfNodesToScore: 120\n",
        )
        .expect("write");
        let error = load_scheduler_config(&bad).expect_err("out of range");
        assert!(
            format!("{error:#}").contains("percentageOfNodesToScore"),
            "{error:#}"
        );
        assert!(load_scheduler_config(&dir.path().join("missing.yaml")).is_err());
    }
}
