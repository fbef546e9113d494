//! `ksim record` and `ksim replay`: thin commands over `ksim-snapshot`'s
//! recordings (the format is documented there), through a kubeconfig: a
//! ksim cluster's context, or any cluster's current context.

use std::path::{Path, PathBuf};

use anyhow::Context;
use ksim_snapshot::Target;
use ksim_snapshot::record::Speed;
use tokio::signal::unix::{SignalKind, signal};

use super::print_line;
use crate::cluster::KsimHome;

/// Flags of `ksim record`.
#[derive(Debug, clap::Args)]
pub struct Record {
    /// File to write (JSON Lines, see the README).
    #[arg(long)]
    pub path: PathBuf,
    /// ksim cluster to record (default: `ksim`, or --kubeconfig's current context).
    #[arg(long)]
    pub name: Option<String>,
    /// Kubeconfig (with --name: holding `ksim-<name>`; alone: its current context, any cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Resources to record (plural, plural.group or kind; comma-separated; default all but events).
    #[arg(long, value_delimiter = ',')]
    pub kinds: Vec<String>,
}

/// Flags of `ksim replay`.
#[derive(Debug, clap::Args)]
pub struct Replay {
    /// Recording to replay.
    #[arg(long)]
    pub path: PathBuf,
    /// ksim cluster to replay into (default: `ksim`, or --kubeconfig's current context).
    #[arg(long)]
    pub name: Option<String>,
    /// Kubeconfig (with --name: holding `ksim-<name>`; alone: its current context).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Pace: 1 as recorded, 10 ten times faster, `max` as fast as possible.
    #[arg(long, default_value = "1", value_parser = parse_speed)]
    pub speed: Speed,
    /// Fail (before applying anything) on kinds the cluster does not serve.
    #[arg(long)]
    pub strict: bool,
}

/// The line of a recording holding its `index`-th change (the header is
/// line 1; blank lines hold none).
fn line_of_change(text: &str, index: usize) -> usize {
    text.lines()
        .enumerate()
        .skip(1)
        .filter(|(_, line)| !line.trim().is_empty())
        .nth(index)
        .map_or(0, |(number, _)| number + 1)
}

fn parse_speed(text: &str) -> Result<Speed, String> {
    if text.eq_ignore_ascii_case("max") {
        return Ok(Speed::Max);
    }
    match text.parse::<f64>() {
        Ok(factor) if factor > 0.0 && factor.is_finite() => Ok(Speed::Factor(factor)),
        _ => Err(format!("invalid speed {text:?}: want a factor > 0 or max")),
    }
}

async fn client(
    home: &KsimHome,
    name: Option<&str>,
    kubeconfig: Option<&Path>,
) -> anyhow::Result<kube::Client> {
    match (name, kubeconfig) {
        (None, Some(path)) => super::connect::kubeconfig_client(Some(path)).await,
        (name, kubeconfig) => {
            super::connect::cluster_client(
                home,
                name.unwrap_or(crate::DEFAULT_CLUSTER_NAME),
                kubeconfig,
            )
            .await
        }
    }
}

/// `ksim record`: until SIGINT or SIGTERM.
pub fn record(home: &KsimHome, flags: &Record) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let written = runtime.block_on(async {
        let client = client(home, flags.name.as_deref(), flags.kubeconfig.as_deref()).await?;
        let file = std::fs::File::create(&flags.path)
            .with_context(|| format!("cannot create {}", flags.path.display()))?;
        let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
        let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
        let stop = async move {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = interrupt.recv() => {}
            }
        };
        let clock = ksim_runtime::clock::Clock::real();
        let start = clock.now();
        ksim_snapshot::record::record(
            &Target::new(client),
            &flags.kinds,
            start,
            clock,
            std::io::BufWriter::new(file),
            stop,
        )
        .await
        .context("cannot record the cluster")
    })?;
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    print_line(format_args!(
        "Recorded {written} changes to {}.",
        flags.path.display()
    ))
}

/// `ksim replay`.
pub fn replay(home: &KsimHome, flags: &Replay) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&flags.path)
        .with_context(|| format!("cannot read {}", flags.path.display()))?;
    let changes = ksim_snapshot::record::parse(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", flags.path.display()))?;
    let total = changes.len();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let report = runtime.block_on(async {
        let client = client(home, flags.name.as_deref(), flags.kubeconfig.as_deref()).await?;
        let target = Target::new(client);
        if flags.strict
            && let Some((index, kind, count)) =
                ksim_snapshot::record::first_unserved(&target, &changes).await?
        {
            anyhow::bail!(
                "{}: line {}: the cluster does not serve {kind} ({count} such changes in the recording; nothing was applied)",
                flags.path.display(),
                line_of_change(&text, index)
            );
        }
        ksim_snapshot::record::replay(&target, changes, flags.speed, 32)
            .await
            .map_err(anyhow::Error::from)
    })?;
    if report.unserved > 0 {
        eprintln!(
            "warning: skipped {} changes of kinds the cluster does not serve",
            report.unserved
        );
    }
    print_line(format_args!(
        "Replayed {} of {total} changes from {}.",
        report.applied,
        flags.path.display()
    ))
}
