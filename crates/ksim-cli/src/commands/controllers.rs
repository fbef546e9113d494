//! `ksim controllers`: runs the workload and disruption controllers alone,
//! against the current kubeconfig context or `--kubeconfig` (a ksim cluster
//! or a real one), until SIGINT/SIGTERM.

use std::path::Path;

use anyhow::Context;
use tokio::signal::unix::{SignalKind, signal};

/// Runs the controllers named in `controllers` (kube-controller-manager's
/// `--controllers` syntax; empty is all) against `kubeconfig`, else the
/// default kubeconfig.
pub fn run_controllers(kubeconfig: Option<&Path>, controllers: &str) -> anyhow::Result<()> {
    let chosen = ksim_controllers::parse_controllers(controllers)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(async {
        let client = super::connect::kubeconfig_client(kubeconfig).await?;
        let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
        let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
        tokio::select! {
            () = ksim_controllers::run_controllers(client, &chosen) => {}
            _ = terminate.recv() => tracing::info!("SIGTERM: stopping the controllers"),
            _ = interrupt.recv() => tracing::info!("SIGINT: stopping the controllers"),
        }
        anyhow::Ok(())
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    result
}
