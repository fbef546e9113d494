//! `ksim deschedule`: runs the descheduler with an upstream
//! DeschedulerPolicy against the current context, `--kubeconfig` or the
//! ksim cluster `--name`: once (printing what was evicted, or with
//! `--dry-run` what would be, as a table or JSON), or every
//! `--descheduling-interval` until SIGINT/SIGTERM. Also what `ksim serve`
//! uses to run the descheduler inside a cluster.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use ksim_descheduler::evictor::{EvictionRecord, EvictionResult};
use ksim_descheduler::{CycleReport, Descheduler, DeschedulerPolicy};
use tokio::signal::unix::{SignalKind, signal};

use super::print_line;
use crate::cluster::KsimHome;

/// How the summary of a cycle is printed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Columns for people.
    #[default]
    Table,
    /// The cycle's report for programs.
    Json,
}

/// Flags of `ksim deschedule`.
#[derive(Debug, Clone, clap::Args)]
pub struct DescheduleCommand {
    /// DeschedulerPolicy file (descheduler/v1alpha2, YAML or JSON).
    #[arg(long)]
    pub policy: PathBuf,
    /// Only report what would be evicted.
    #[arg(long)]
    pub dry_run: bool,
    /// Output format of the summary.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    /// Run a cycle every D (e.g. 30s, 5m) until interrupted; 0 runs once.
    #[arg(long, value_name = "D", value_parser = parse_interval)]
    pub descheduling_interval: Option<Duration>,
    /// Kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The ksim cluster to deschedule (its `ksim-<name>` context);
    /// default: the kubeconfig's current context.
    #[arg(long)]
    pub name: Option<String>,
}

/// The flags of `ksim create cluster` / `ksim serve` that run the
/// descheduler inside the cluster.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClusterDescheduler {
    /// Run the descheduler in the cluster with this DeschedulerPolicy.
    #[arg(long = "descheduler-policy", value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// How often the in-cluster descheduler runs (default 5m).
    #[arg(long, value_name = "D", value_parser = parse_interval, requires = "policy")]
    pub descheduling_interval: Option<Duration>,
}

/// The in-cluster interval when `--descheduling-interval` is not given.
pub const DEFAULT_CLUSTER_INTERVAL: Duration = Duration::from_secs(300);

impl ClusterDescheduler {
    /// Checks the policy (before a cluster starts) and gives the flags to
    /// pass on to `ksim serve`.
    pub fn serve_args(&self) -> anyhow::Result<Vec<String>> {
        let Some(policy) = &self.policy else {
            return Ok(Vec::new());
        };
        load_policy(policy)?;
        let policy = std::path::absolute(policy)
            .with_context(|| format!("invalid policy path {}", policy.display()))?;
        let mut args = vec![
            "--descheduler-policy".to_string(),
            policy.display().to_string(),
        ];
        if let Some(interval) = self.descheduling_interval {
            args.push("--descheduling-interval".to_string());
            args.push(format!("{}ms", interval.as_millis()));
        }
        Ok(args)
    }

    /// The interval of the in-cluster loop.
    pub fn interval(&self) -> Duration {
        self.descheduling_interval
            .unwrap_or(DEFAULT_CLUSTER_INTERVAL)
    }
}

/// Parses `--descheduling-interval` (a Go duration).
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    ksim_core::duration::parse_go_duration(text)
}

/// Reads and validates a policy file.
pub fn load_policy(path: &Path) -> anyhow::Result<DeschedulerPolicy> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the policy {}", path.display()))?;
    DeschedulerPolicy::parse(&text).with_context(|| format!("policy {}", path.display()))
}

/// Runs `ksim deschedule`.
pub fn deschedule(home: &KsimHome, flags: &DescheduleCommand) -> anyhow::Result<()> {
    let policy = load_policy(&flags.policy)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(async {
        let client =
            super::connect::client(home, flags.name.as_deref(), flags.kubeconfig.as_deref())
                .await?;
        let descheduler = Descheduler::new(client, policy, flags.dry_run)
            .await
            .with_context(|| format!("policy {}", flags.policy.display()))?;
        match flags.descheduling_interval {
            Some(interval) if !interval.is_zero() => {
                let mut terminate =
                    signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
                let mut interrupt =
                    signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
                tokio::select! {
                    () = descheduler.run(interval) => {}
                    _ = terminate.recv() => tracing::info!("SIGTERM: stopping the descheduler"),
                    _ = interrupt.recv() => tracing::info!("SIGINT: stopping the descheduler"),
                }
                Ok(())
            }
            _ => {
                let report = descheduler
                    .run_once()
                    .await
                    .context("the descheduling cycle failed")?;
                print_report(&report, flags.output)
            }
        }
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

/// Starts the descheduler inside a cluster (`ksim serve`): every
/// `interval` of the cluster's `clock` against the in-process API.
pub async fn start_descheduler(
    server: &ksim_apiserver::ApiServer,
    policy: &Path,
    interval: Duration,
    clock: ksim_runtime::Clock,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let policy = load_policy(policy)?;
    let client = ksim_runtime::client::in_process(server);
    let descheduler = Descheduler::new(client, policy, false)
        .await
        .context("cannot start the descheduler")?
        .with_clock(clock);
    tracing::info!(interval = ?interval, "descheduler starting");
    Ok(tokio::spawn(async move { descheduler.run(interval).await }))
}

fn print_report(report: &CycleReport, output: OutputFormat) -> anyhow::Result<()> {
    match output {
        OutputFormat::Json => {
            let text = serde_json::to_string_pretty(report).context("cannot encode the report")?;
            print_line(text)
        }
        OutputFormat::Table => {
            if let Some(skipped) = &report.skipped {
                return print_line(skipped);
            }
            for line in table(report) {
                print_line(line)?;
            }
            Ok(())
        }
    }
}

/// The table: one row per eviction (dry-run: per pod that would be
/// evicted), columns aligned as kubectl aligns them.
fn table(report: &CycleReport) -> Vec<String> {
    let rows: Vec<&EvictionRecord> = report
        .evictions
        .iter()
        .filter(|record| !report.dry_run || record.result == EvictionResult::DryRun)
        .collect();
    if rows.is_empty() {
        return vec![if report.dry_run {
            "No pods would be evicted.".to_string()
        } else {
            "No pods evicted.".to_string()
        }];
    }
    let mut header = vec!["PROFILE", "PLUGIN", "NAMESPACE", "POD", "NODE"];
    if !report.dry_run {
        header.push("RESULT");
    }
    let mut cells: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    for record in rows {
        let mut row = vec![
            record.profile.clone(),
            record.plugin.clone(),
            record.namespace.clone(),
            record.pod.clone(),
            record.node.clone(),
        ];
        if !report.dry_run {
            row.push(match (&record.result, &record.error) {
                (_, Some(error)) => format!("Failed: {error}"),
                (EvictionResult::Evicted, None) => "Evicted".to_string(),
                (other, None) => format!("{other:?}"),
            });
        }
        cells.push(row);
    }
    let columns = cells[0].len();
    let widths: Vec<usize> = (0..columns)
        .map(|column| cells.iter().map(|row| row[column].len()).max().unwrap_or(0))
        .collect();
    cells
        .iter()
        .map(|row| {
            let mut line = String::new();
            for (column, cell) in row.iter().enumerate() {
                if column + 1 == columns {
                    line.push_str(cell);
                } else {
                    line.push_str(&format!("{cell:<width$}   ", width = widths[column]));
                }
            }
            line
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(pod: &str, result: EvictionResult, error: Option<&str>) -> EvictionRecord {
        EvictionRecord {
            profile: "default".into(),
            plugin: "RemovePodsViolatingNodeTaints".into(),
            namespace: "default".into(),
            pod: pod.into(),
            node: "node-000000".into(),
            result,
            error: error.map(str::to_string),
        }
    }

    #[test]
    fn the_dry_run_table_lists_the_pods_that_would_be_evicted() {
        let report = CycleReport {
            dry_run: true,
            total_evicted: 1,
            evictions: vec![record("web-1", EvictionResult::DryRun, None)],
            ..Default::default()
        };
        assert_eq!(
            table(&report),
            [
                "PROFILE   PLUGIN                          NAMESPACE   POD     NODE",
                "default   RemovePodsViolatingNodeTaints   default     web-1   node-000000",
            ]
        );
    }

    #[test]
    fn a_real_run_shows_refusals_and_an_empty_one_says_so() {
        let report = CycleReport {
            evictions: vec![record("web-1", EvictionResult::Failed, Some("no"))],
            ..Default::default()
        };
        assert!(table(&report)[1].ends_with("Failed: no"));
        assert_eq!(table(&CycleReport::default()), ["No pods evicted."]);
    }

    #[test]
    fn intervals_are_go_durations() {
        assert_eq!(parse_interval("30s"), Ok(Duration::from_secs(30)));
        assert!(parse_interval("30").is_err());
    }
}
