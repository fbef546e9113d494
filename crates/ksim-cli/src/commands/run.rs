//! `ksim run FILE... [--junit FILE] [-o json]`: loads and validates every
//! scenario (ksim-scenario) before anything runs, then runs each on a cluster
//! of its own started inside the process ([`start_cluster`]: the cluster
//! assembly on the scenario's clock, a loopback port and a kubeconfig in a
//! temporary directory, so kubectl steps work; nothing left behind), prints
//! the timeline (or JSON), writes JUnit XML when asked, and fails if any
//! step failed. With `--kubeconfig` the scenarios run
//! against that cluster instead, on the real clock.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use ksim_runtime::Clock;
use ksim_scenario::{ClockMode, ClusterSpec, Report, Scenario, Target};

use super::autoscaler::AutoscalerFlags;
use super::serve::Component;
use crate::cluster::KsimHome;

/// The name of the cluster a run starts (its kubeconfig context is `ksim-ksim`).
const CLUSTER_NAME: &str = crate::DEFAULT_CLUSTER_NAME;

/// Output of `ksim run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RunOutput {
    /// The timeline.
    Text,
    /// One JSON document for every scenario.
    Json,
}

/// Flags of `ksim run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunCommand {
    /// Scenario files (apiVersion: ksim.io/v1alpha1, kind: Scenario).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Write a JUnit XML report here (a testcase per step).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: RunOutput,
    /// Run against the current context of this kubeconfig (an existing
    /// cluster, real clock) instead of a cluster of the scenario's own.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
}

/// What a scenario's cluster is started with, checked before any run.
pub struct ClusterOptions {
    /// Scheduler configuration, descheduler policy: written here.
    dir: tempfile::TempDir,
    disabled: Vec<Component>,
    scheduler_config: Option<PathBuf>,
    descheduler_policy: Option<PathBuf>,
    descheduling_interval: Duration,
    autoscaler: Option<AutoscalerFlags>,
    snapshot: Option<PathBuf>,
}

#[derive(Parser)]
#[command(name = "autoscaler")]
struct AutoscalerArgs {
    #[command(flatten)]
    flags: AutoscalerFlags,
}

/// Checks `spec.cluster` the way `ksim create cluster` checks its flags.
fn cluster_options(scenario: &Scenario) -> anyhow::Result<ClusterOptions> {
    let file = scenario.file.display();
    let spec: &ClusterSpec = &scenario.cluster;
    let dir = tempfile::Builder::new()
        .prefix("ksim-run-")
        .tempdir()
        .context("cannot create a temporary directory")?;
    let disabled = spec
        .disable
        .iter()
        .map(|name| match name.as_str() {
            "kubelet" => Ok(Component::Kubelet),
            "controllers" => Ok(Component::Controllers),
            "scheduler" => Ok(Component::Scheduler),
            "dpdb" => Ok(Component::Dpdb),
            other => bail!("{file}: spec.cluster.disable: unknown component {other:?}"),
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let write = |name: &str, text: &str| -> anyhow::Result<PathBuf> {
        let path = dir.path().join(name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    };
    let scheduler_config = match &spec.scheduler_config {
        Some(config) => {
            let path = write("scheduler-config.yaml", &config.text)?;
            super::scheduler::load_scheduler_config(&path).map_err(|e| {
                anyhow::anyhow!(
                    "{file}: spec.cluster.schedulerConfig ({}): {e:#}",
                    config.origin
                )
            })?;
            Some(path)
        }
        None => None,
    };
    let descheduler_policy = match &spec.descheduler_policy {
        Some(policy) => Some(write("descheduler-policy.yaml", &policy.text)?),
        None => None,
    };
    let autoscaler = match &spec.autoscaler {
        Some(flags) => {
            let args = std::iter::once("autoscaler".to_string()).chain(flags.iter().cloned());
            let parsed = AutoscalerArgs::try_parse_from(args).map_err(|e| {
                let message = e.to_string();
                anyhow::anyhow!(
                    "{file}: spec.cluster.autoscaler: {}",
                    message
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .trim_start_matches("error: ")
                )
            })?;
            Some(parsed.flags)
        }
        None => None,
    };
    Ok(ClusterOptions {
        dir,
        disabled,
        scheduler_config,
        descheduler_policy,
        descheduling_interval: spec
            .descheduling_interval
            .unwrap_or(super::deschedule::DEFAULT_CLUSTER_INTERVAL),
        autoscaler,
        snapshot: spec.snapshot.clone(),
    })
}

/// A cluster started for a run; stopped when dropped (with its runtime).
pub struct RunningCluster {
    /// What the steps run against.
    pub target: Target,
    _cluster: crate::assembly::Cluster,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for RunningCluster {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The clock a scenario's cluster runs on: virtual (from `spec.clockStart`,
/// else [`ksim_scenario::DEFAULT_CLOCK_START`]) or real, its random source
/// seeded with `spec.seed`.
fn scenario_clock(scenario: &Scenario) -> Clock {
    let random = match scenario.seed {
        Some(seed) => ksim_runtime::Random::seeded(seed),
        None => ksim_runtime::Random::from_entropy(),
    };
    match scenario.clock {
        ClockMode::Virtual => Clock::virtual_with(scenario.clock_start, random),
        ClockMode::Real => Clock::real_with(random),
    }
}

/// Starts a cluster in this process on `clock` (the cluster assembly
/// `ksim serve` uses), served on a loopback port, with a kubeconfig for it in
/// the options' temporary directory.
pub async fn start_cluster(
    options: &ClusterOptions,
    clock: Clock,
) -> anyhow::Result<RunningCluster> {
    let root = options.dir.path();
    let home = KsimHome::at(root.join("home"));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .context("cannot listen on 127.0.0.1")?;
    let port = listener
        .local_addr()
        .context("cannot read the listen address")?
        .port();
    let mut cluster = crate::assembly::Cluster::new(clock.clone());
    if let Some(path) = &options.snapshot {
        cluster.restore(path).await?;
    }
    let router = cluster.router();
    let server = tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, router).await {
            tracing::error!(%error, "the API server stopped");
        }
    });
    let dpdb = if options.disabled.contains(&Component::Dpdb) {
        ksim_controllers::dpdb::DpdbConfig::default()
    } else {
        super::dpdb::in_cluster_config(home.root(), CLUSTER_NAME)?
    };
    cluster
        .start(crate::assembly::Components {
            disabled: options.disabled.clone(),
            scheduler: options.scheduler_config.clone(),
            descheduler: options
                .descheduler_policy
                .clone()
                .map(|policy| (policy, options.descheduling_interval)),
            autoscaler: options.autoscaler.clone(),
            dpdb,
        })
        .await?;
    let kubeconfig = root.join("kubeconfig");
    crate::kubeconfig::Kubeconfig::for_cluster(CLUSTER_NAME, &crate::kubeconfig::server_url(port))
        .save(&kubeconfig)?;
    Ok(RunningCluster {
        target: Target {
            client: cluster.client(),
            kubeconfig,
            env: child_env(root, home.root()),
            ksim: std::env::current_exe().context("cannot find the ksim binary")?,
            kubectl: PathBuf::from("kubectl"),
            clock,
        },
        _cluster: cluster,
        server,
    })
}

/// The environment of `kubectl:` and `ksim:` steps: the run's own ksim
/// home, and kubectl's caches inside the temporary directory.
fn child_env(root: &Path, home: &Path) -> Vec<(String, String)> {
    vec![
        ("KSIM_HOME".to_string(), home.display().to_string()),
        (
            "KUBECACHEDIR".to_string(),
            root.join("kube-cache").display().to_string(),
        ),
    ]
}

/// Runs `ksim run`.
pub fn run(flags: &RunCommand) -> anyhow::Result<()> {
    // Every file is checked before anything runs.
    let scenarios = flags
        .files
        .iter()
        .map(|file| Scenario::load(file).map_err(anyhow::Error::from))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for scenario in &scenarios {
        for step in &scenario.steps {
            if let ksim_scenario::Action::Ksim { args, .. } = &step.action {
                crate::check_ksim_args(args).map_err(|message| {
                    anyhow::anyhow!(
                        "{}: step {}: ksim: {message}",
                        scenario.file.display(),
                        step.number
                    )
                })?;
            }
        }
    }
    let options = match &flags.kubeconfig {
        Some(_) => {
            for scenario in &scenarios {
                if let Some(step) = scenario
                    .steps
                    .iter()
                    .find(|s| matches!(s.action, ksim_scenario::Action::Advance { .. }))
                {
                    bail!(
                        "{}: step {}: advance: a cluster given by --kubeconfig runs on the real clock; only a virtual clock can be advanced",
                        scenario.file.display(),
                        step.number
                    );
                }
                let spec = &scenario.cluster;
                if !spec.disable.is_empty()
                    || spec.scheduler_config.is_some()
                    || spec.descheduler_policy.is_some()
                    || spec.autoscaler.is_some()
                    || spec.snapshot.is_some()
                {
                    tracing::warn!(
                        scenario = %scenario.name,
                        "spec.cluster is not used: the scenario runs against the cluster --kubeconfig gives"
                    );
                }
            }
            Vec::new()
        }
        None => scenarios
            .iter()
            .map(cluster_options)
            .collect::<anyhow::Result<Vec<_>>>()?,
    };
    let mut reports = Vec::with_capacity(scenarios.len());
    for (index, scenario) in scenarios.iter().enumerate() {
        let report = match &flags.kubeconfig {
            Some(kubeconfig) => run_on_existing(scenario, kubeconfig)?,
            None => run_on_own_cluster(scenario, &options[index])?,
        };
        if flags.output == RunOutput::Text {
            super::print_line(report.timeline().trim_end())?;
        }
        reports.push(report);
    }
    if flags.output == RunOutput::Json {
        super::print_line(ksim_scenario::reports_json(&reports))?;
    }
    if let Some(path) = &flags.junit {
        std::fs::write(path, ksim_scenario::junit_xml(&reports))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let failed: Vec<&str> = reports
        .iter()
        .filter(|r| !r.passed)
        .map(|r| r.name.as_str())
        .collect();
    if !failed.is_empty() {
        bail!(
            "{} of {} scenario{} failed: {}",
            failed.len(),
            reports.len(),
            if reports.len() == 1 { "" } else { "s" },
            failed.join(", ")
        );
    }
    Ok(())
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    // One thread: a run's order of work does not depend on thread timing.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

fn run_on_own_cluster(scenario: &Scenario, options: &ClusterOptions) -> anyhow::Result<Report> {
    let runtime = runtime()?;
    let report = runtime.block_on(async {
        let cluster = start_cluster(options, scenario_clock(scenario))
            .await
            .with_context(|| format!("{}: cannot start the cluster", scenario.file.display()))?;
        let report = ksim_scenario::run(scenario, &cluster.target).await;
        drop(cluster);
        anyhow::Ok(report)
    });
    // Watches and components still running must not hold the exit.
    runtime.shutdown_timeout(Duration::from_millis(200));
    report
}

fn run_on_existing(scenario: &Scenario, kubeconfig: &Path) -> anyhow::Result<Report> {
    let runtime = runtime()?;
    let report = runtime.block_on(async {
        let client = super::connect::kubeconfig_client(Some(kubeconfig)).await?;
        let target = Target {
            client,
            kubeconfig: kubeconfig.to_path_buf(),
            env: Vec::new(),
            ksim: std::env::current_exe().context("cannot find the ksim binary")?,
            kubectl: PathBuf::from("kubectl"),
            clock: Clock::real(),
        };
        anyhow::Ok(ksim_scenario::run(scenario, &target).await)
    });
    runtime.shutdown_timeout(Duration::from_millis(200));
    report
}
