//! `ksim dpdb-controller`: the DistributedPodDisruptionBudget controller
//! alone against any cluster (`--kubeconfig F [--context C]`; other
//! clusters are that kubeconfig's contexts, or those of
//! `--federation-kubeconfig`), printing or installing its CRD
//! (`--print-crd`, `--install-crd`); and the controller `ksim serve` runs
//! inside every ksim cluster, whose federation reaches the sibling ksim
//! clusters of the same KSIM_HOME.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use ksim_controllers::dpdb::clusters::ClusterSource;
use ksim_controllers::dpdb::{DpdbConfig, run};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::signal::unix::{SignalKind, signal};

/// The environment variable that delays what a ksim cluster's DPDB
/// controller sees of other clusters (a Go duration, e.g. `500ms`).
pub const PROPAGATION_DELAY_ENV: &str = "KSIM_DPDB_PROPAGATION_DELAY";

/// `ksim dpdb-controller`'s flags.
#[derive(Debug, clap::Args)]
pub struct DpdbControllerCommand {
    /// Kubeconfig (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The context of this cluster (default: the current context).
    #[arg(long)]
    pub context: Option<String>,
    /// The kubeconfig whose contexts members' `cluster` names (default: --kubeconfig).
    #[arg(long)]
    pub federation_kubeconfig: Option<PathBuf>,
    /// Delay everything seen of other clusters by this long (a Go duration: 500ms).
    #[arg(long, value_parser = super::deschedule::parse_interval)]
    pub propagation_delay: Option<Duration>,
    /// Print the CRD manifest (JSON, for `kubectl apply -f -`) and exit.
    #[arg(long)]
    pub print_crd: bool,
    /// Create (or update) the CRD in the cluster, then run.
    #[arg(long)]
    pub install_crd: bool,
}

fn read_kubeconfig(path: Option<&Path>) -> anyhow::Result<Kubeconfig> {
    match path {
        Some(path) => Kubeconfig::read_from(path)
            .with_context(|| format!("cannot read the kubeconfig {}", path.display())),
        None => Kubeconfig::read().context("cannot find a kubeconfig"),
    }
}

/// The propagation delay `ksim serve` gives its controller ([`PROPAGATION_DELAY_ENV`]).
pub fn propagation_delay_from_env() -> anyhow::Result<Duration> {
    match std::env::var(PROPAGATION_DELAY_ENV) {
        Ok(text) if !text.is_empty() => super::deschedule::parse_interval(&text)
            .map_err(|e| anyhow::anyhow!("{PROPAGATION_DELAY_ENV}: {e}")),
        _ => Ok(Duration::ZERO),
    }
}

/// The controller a ksim cluster named `name` runs in process.
pub fn in_cluster_config(ksim_home: &Path, name: &str) -> anyhow::Result<DpdbConfig> {
    Ok(DpdbConfig {
        clusters: ClusterSource::KsimHome {
            root: ksim_home.to_path_buf(),
            own: name.to_string(),
        },
        propagation_delay: propagation_delay_from_env()?,
        ..DpdbConfig::default()
    })
}

/// Runs `ksim dpdb-controller`.
pub fn dpdb_controller(flags: &DpdbControllerCommand) -> anyhow::Result<()> {
    if flags.print_crd {
        return super::print_line(
            ksim_core::crds::DISTRIBUTED_POD_DISRUPTION_BUDGET_CRD.trim_end(),
        );
    }
    let kubeconfig = read_kubeconfig(flags.kubeconfig.as_deref())?;
    let own = flags
        .context
        .clone()
        .or_else(|| kubeconfig.current_context.clone());
    let federation = match &flags.federation_kubeconfig {
        Some(path) => read_kubeconfig(Some(path))?,
        None => kubeconfig.clone(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(async {
        let options = KubeConfigOptions {
            context: flags.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .context("invalid kubeconfig")?;
        let client = ksim_runtime::client::from_config(config).context("cannot build a client")?;
        if flags.install_crd {
            install_crd(&client).await?;
        }
        let config = DpdbConfig {
            clusters: ClusterSource::Kubeconfig {
                kubeconfig: Box::new(federation),
                own,
            },
            propagation_delay: flags.propagation_delay.unwrap_or_default(),
            ..DpdbConfig::default()
        };
        let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
        let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
        tokio::select! {
            () = run(client, config) => {}
            _ = terminate.recv() => tracing::info!("SIGTERM: stopping the DPDB controller"),
            _ = interrupt.recv() => tracing::info!("SIGINT: stopping the DPDB controller"),
        }
        anyhow::Ok(())
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

/// Server-side applies the CRD.
async fn install_crd(client: &kube::Client) -> anyhow::Result<()> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crd: CustomResourceDefinition =
        serde_json::from_str(ksim_core::crds::DISTRIBUTED_POD_DISRUPTION_BUDGET_CRD)
            .context("the built-in CRD")?;
    let api: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    let name = crd.metadata.name.clone().unwrap_or_default();
    api.patch(
        &name,
        &kube::api::PatchParams::apply("ksim-dpdb-controller").force(),
        &kube::api::Patch::Apply(&crd),
    )
    .await
    .with_context(|| format!("cannot install the CRD {name}"))?;
    tracing::info!(%name, "CRD installed");
    Ok(())
}
