//! `ksim run FILE... [--junit FILE] [-o json]`: loads and validates every
//! scenario (ksim-scenario) before anything runs, then runs each on a cluster
//! of its own started inside the process ([`start_cluster`]: the cluster
//! assembly on the scenario's clock, a loopback port and a kubeconfig in a
//! temporary directory, so kubectl steps work; nothing left behind), prints
//! the timeline (or JSON), writes JUnit XML when asked, and fails if any
//! step failed. With `--name N` (a running ksim cluster) or `--kubeconfig`
//! (its current context, any cluster) the scenarios run against that
//! cluster instead: `kubectl:` and `ksim:` steps reach it, and on a ksim
//! cluster with a virtual clock `advance` and `waitFor` move that clock
//! through its API; a cluster on the real clock refuses `advance` before
//! anything runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use ksim_runtime::Clock;
use ksim_scenario::{ClockMode, ClusterClock, ClusterSpec, Report, Scenario, Target};

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
    /// cluster) instead of a cluster of the scenario's own.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Run against this running ksim cluster (`ksim create cluster --name
    /// N`) instead of a cluster of the scenario's own.
    #[arg(long, conflicts_with = "kubeconfig")]
    pub name: Option<String>,
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
            clock: clock.into(),
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
    let reports = if flags.name.is_some() || flags.kubeconfig.is_some() {
        run_on_existing(flags, &scenarios)?
    } else {
        let options = scenarios
            .iter()
            .map(cluster_options)
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut reports = Vec::with_capacity(scenarios.len());
        for (scenario, options) in scenarios.iter().zip(&options) {
            let report = run_on_own_cluster(scenario, options)?;
            print_report(flags, &report)?;
            reports.push(report);
        }
        reports
    };
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

fn print_report(flags: &RunCommand, report: &Report) -> anyhow::Result<()> {
    if flags.output == RunOutput::Text {
        super::print_line(report.timeline().trim_end())?;
    }
    Ok(())
}

/// An existing cluster the scenarios run against.
struct Existing {
    client: kube::Client,
    /// What child processes use: the kubeconfig given, or one of cluster
    /// `--name`'s own (in `_dir`).
    kubeconfig: PathBuf,
    env: Vec<(String, String)>,
    clock: ClusterClock,
    /// Says which cluster, in errors.
    described: String,
    _dir: Option<tempfile::TempDir>,
}

/// Connects to the cluster `--name` or `--kubeconfig` gives and reads its
/// clock: a ksim cluster's virtual clock is moved through its API; any
/// other cluster runs on the wall clock.
async fn connect_existing(flags: &RunCommand) -> anyhow::Result<Existing> {
    let (client, kubeconfig, env, described, dir) = match &flags.name {
        Some(name) => {
            crate::cluster::validate_cluster_name(name)?;
            let home = KsimHome::from_env()?;
            let cluster = home.cluster(name);
            let Some(port) = cluster.running_pid().and_then(|_| cluster.port()) else {
                bail!("cluster {name:?} does not exist");
            };
            let client = super::connect::cluster_client(&home, name, None).await?;
            let dir = tempfile::Builder::new()
                .prefix("ksim-run-")
                .tempdir()
                .context("cannot create a temporary directory")?;
            // kubectl steps see this cluster alone, as their current context.
            let kubeconfig = dir.path().join("kubeconfig");
            crate::kubeconfig::Kubeconfig::for_cluster(name, &crate::kubeconfig::server_url(port))
                .save(&kubeconfig)?;
            let env = vec![(
                "KUBECACHEDIR".to_string(),
                dir.path().join("kube-cache").display().to_string(),
            )];
            (
                client,
                kubeconfig,
                env,
                format!("cluster {name:?}"),
                Some(dir),
            )
        }
        None => {
            let path = crate::kubeconfig::resolve_path(flags.kubeconfig.as_deref())?;
            let client = super::connect::kubeconfig_client(Some(&path)).await?;
            let described = format!("the cluster of {}", path.display());
            (client, path, Vec::new(), described, None)
        }
    };
    let reading = ksim_scenario::read_clock(&client)
        .await
        .map_err(|error| anyhow::anyhow!("{described}: {error}"))?;
    let clock = match reading {
        Some(reading) if reading.mode == "virtual" => ClusterClock::Remote(client.clone()),
        _ => ClusterClock::Local(Clock::real()),
    };
    Ok(Existing {
        client,
        kubeconfig,
        env,
        clock,
        described,
        _dir: dir,
    })
}

/// `args` of a `ksim:` step with `--name name` added after the subcommand
/// when the subcommand takes `--name` and the step gives none, so that it
/// reaches the run's cluster.
fn with_cluster_name(args: &[String], name: &str) -> Vec<String> {
    use clap::CommandFactory;
    let mut command = crate::Cli::command();
    command.build();
    let mut depth = 0;
    let mut current = &command;
    for arg in args {
        match current.find_subcommand(arg) {
            Some(sub) => {
                current = sub;
                depth += 1;
            }
            None => break,
        }
    }
    let takes_name = current
        .get_arguments()
        .any(|a| a.get_long() == Some("name"));
    let gives_name = args
        .iter()
        .any(|a| a == "--name" || a.starts_with("--name="));
    let mut out = args.to_vec();
    if depth > 0 && takes_name && !gives_name {
        out.splice(depth..depth, ["--name".to_string(), name.to_string()]);
    }
    out
}

fn run_on_existing(flags: &RunCommand, scenarios: &[Scenario]) -> anyhow::Result<Vec<Report>> {
    let runtime = runtime()?;
    let reports = runtime.block_on(async {
        let existing = connect_existing(flags).await?;
        for scenario in scenarios {
            if !existing.clock.is_virtual()
                && let Some(step) = scenario
                    .steps
                    .iter()
                    .find(|s| matches!(s.action, ksim_scenario::Action::Advance { .. }))
            {
                bail!(
                    "{}: step {}: advance: {} runs on the real clock; only a virtual clock can be advanced",
                    scenario.file.display(),
                    step.number,
                    existing.described
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
                    "spec.cluster is not used: the scenario runs against {}",
                    existing.described
                );
            }
        }
        let target = Target {
            client: existing.client.clone(),
            kubeconfig: existing.kubeconfig.clone(),
            env: existing.env.clone(),
            ksim: std::env::current_exe().context("cannot find the ksim binary")?,
            kubectl: PathBuf::from("kubectl"),
            clock: existing.clock.clone(),
        };
        let mut reports = Vec::with_capacity(scenarios.len());
        for scenario in scenarios {
            let report = match &flags.name {
                Some(name) => {
                    let mut scenario = scenario.clone();
                    for step in &mut scenario.steps {
                        if let ksim_scenario::Action::Ksim { args, .. } = &mut step.action {
                            *args = with_cluster_name(args, name);
                        }
                    }
                    ksim_scenario::run(&scenario, &target).await
                }
                None => ksim_scenario::run(scenario, &target).await,
            };
            print_report(flags, &report)?;
            reports.push(report);
        }
        anyhow::Ok(reports)
    });
    runtime.shutdown_timeout(Duration::from_millis(200));
    reports
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn ksim_steps_are_pointed_at_the_named_cluster() {
        assert_eq!(
            with_cluster_name(&args("scale node --replicas 3"), "n"),
            args("scale node --name n --replicas 3")
        );
        assert_eq!(
            with_cluster_name(&args("node stop node-000000"), "n"),
            args("node stop --name n node-000000")
        );
        assert_eq!(
            with_cluster_name(&args("clock advance 1m"), "n"),
            args("clock advance --name n 1m")
        );
        // Given already, or not taken: unchanged.
        assert_eq!(
            with_cluster_name(&args("scale node --name=m --replicas 3"), "n"),
            args("scale node --name=m --replicas 3")
        );
        assert_eq!(
            with_cluster_name(&args("get clusters"), "n"),
            args("get clusters")
        );
    }
}
