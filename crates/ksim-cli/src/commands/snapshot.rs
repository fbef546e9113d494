//! `ksim snapshot save|restore|export`: thin commands over `ksim-snapshot`,
//! talking to the cluster as an API client through a kubeconfig (a ksim
//! cluster's context, or any cluster's).

use std::path::{Path, PathBuf};

use anyhow::Context;
use ksim_snapshot::restore::{Conflicts, Report, RestoreOptions};
use ksim_snapshot::save::SaveOptions;
use ksim_snapshot::{RateLimit, Target};

use super::print_line;
use crate::cluster::KsimHome;

/// Flags of `ksim snapshot save`.
#[derive(Debug, clap::Args)]
pub struct SnapshotSave {
    /// File to write (multi-document YAML).
    #[arg(long)]
    pub path: PathBuf,
    /// Cluster name.
    #[arg(long, default_value = crate::DEFAULT_CLUSTER_NAME)]
    pub name: String,
    /// Kubeconfig holding the cluster's context (default: the one create cluster wrote).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Save events too.
    #[arg(long)]
    pub events: bool,
    /// `flow`: one object a line (YAML's flow style, i.e. JSON; fast at
    /// scale); `block`: YAML as `kubectl get -o yaml` prints it.
    #[arg(long, value_enum, default_value_t = Format::Flow)]
    pub format: Format,
}

/// How a snapshot file lays out its objects (both are YAML; restore reads either).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One object a line, in YAML's flow style (JSON).
    Flow,
    /// Block-style YAML.
    Block,
}

impl Format {
    fn style(self) -> ksim_snapshot::Style {
        match self {
            Format::Flow => ksim_snapshot::Style::Flow,
            Format::Block => ksim_snapshot::Style::Block,
        }
    }
}

/// Flags of `ksim snapshot restore`.
#[derive(Debug, clap::Args)]
pub struct SnapshotRestore {
    /// Snapshot file (ksim's, or kwokctl's `--format k8s`).
    #[arg(long)]
    pub path: PathBuf,
    /// Cluster name.
    #[arg(long, default_value = crate::DEFAULT_CLUSTER_NAME)]
    pub name: String,
    /// Kubeconfig holding the cluster's context (default: the one create cluster wrote).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Restore into a cluster holding objects, keeping those that exist.
    #[arg(long, conflicts_with = "replace")]
    pub merge: bool,
    /// Restore into a cluster holding objects, replacing those the snapshot names.
    #[arg(long)]
    pub replace: bool,
    /// Fail (before applying anything) on kinds the cluster does not serve.
    #[arg(long)]
    pub strict: bool,
}

/// Flags of `ksim snapshot export`.
#[derive(Debug, clap::Args)]
pub struct SnapshotExport {
    /// Kubeconfig of the cluster to copy.
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// Context to use (default: the kubeconfig's current one).
    #[arg(long)]
    pub context: Option<String>,
    /// Every namespace (the default).
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    pub all_namespaces: bool,
    /// Only this namespace's objects (cluster-scoped ones are all kept).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Only namespaced objects matching this label selector.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// File to write.
    #[arg(long)]
    pub path: PathBuf,
    /// Export Secret data (left out otherwise).
    #[arg(long)]
    pub include_secret_data: bool,
    /// Requests per second to the source cluster (client-side; 0: no limit).
    #[arg(long, default_value_t = 50.0, value_parser = parse_qps)]
    pub qps: f64,
    /// Requests allowed in a burst above --qps.
    #[arg(long, default_value_t = 300)]
    pub burst: u32,
    /// Objects per list page.
    #[arg(long, default_value_t = 500)]
    pub chunk_size: u32,
    /// `flow` (one object a line) or `block` YAML.
    #[arg(long, value_enum, default_value_t = Format::Flow)]
    pub format: Format,
}

/// `--qps`: a finite number of requests a second, 0 for no limit.
fn parse_qps(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(qps) if qps.is_finite() && qps >= 0.0 => Ok(qps),
        _ => Err(format!(
            "invalid qps {text:?}: want requests a second, 0 for no limit"
        )),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Writes a snapshot to `path` through a temporary file (never
/// half-written): `save` reads the cluster and writes the file into the
/// writer it is given, handing it back. The file's size, and what `save`
/// said.
fn write_snapshot<T>(
    path: &Path,
    save: impl AsyncFnOnce(
        std::io::BufWriter<std::fs::File>,
    ) -> anyhow::Result<(T, std::io::BufWriter<std::fs::File>)>,
) -> anyhow::Result<(u64, T)> {
    let directory = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let file_name = path
        .file_name()
        .with_context(|| format!("{}: not a file path", path.display()))?;
    let temporary = directory.join(format!(".{}.partial", file_name.to_string_lossy()));
    let cannot_write = |e: std::io::Error| anyhow::anyhow!("cannot write {}: {e}", path.display());
    let file = std::fs::File::create(&temporary).map_err(cannot_write)?;
    let writer = std::io::BufWriter::with_capacity(1 << 20, file);
    let saved = runtime()?.block_on(save(writer));
    let result = saved.and_then(|(said, writer)| {
        let finish = || -> std::io::Result<u64> {
            let file = writer.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()?;
            let size = file.metadata()?.len();
            std::fs::rename(&temporary, path)?;
            Ok(size)
        };
        finish().map(|size| (size, said)).map_err(cannot_write)
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result
}

/// Reads and checks a snapshot file as a restore wants it (times relative
/// to now, for kwok's files): every document checked before anything is
/// created, flow-style objects built from the file's text as they are
/// created ([`ksim_snapshot::scan_documents`]).
pub fn read_snapshot(path: &Path) -> anyhow::Result<Vec<ksim_snapshot::ScannedDocument>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let now = ksim_runtime::clock::Clock::real().now();
    ksim_snapshot::scan_documents(std::sync::Arc::new(text), now)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// `ksim snapshot save`.
pub fn snapshot_save(home: &KsimHome, flags: &SnapshotSave) -> anyhow::Result<()> {
    let (size, written) = write_snapshot(&flags.path, async |writer| {
        let client =
            super::connect::cluster_client(home, &flags.name, flags.kubeconfig.as_deref()).await?;
        let options = SaveOptions {
            events: flags.events,
            ..SaveOptions::all()
        };
        ksim_snapshot::save::write(&Target::new(client), &options, flags.format.style(), writer)
            .await
            .with_context(|| format!("cannot read cluster {:?}", flags.name))
    })?;
    print_line(format_args!(
        "Saved {} objects of cluster {:?} to {} ({size} bytes).",
        written.objects,
        flags.name,
        flags.path.display()
    ))
}

/// The one-line summary of a restore.
pub fn describe_report(report: &Report) -> String {
    let kinds: Vec<String> = report
        .created
        .iter()
        .map(|(kind, n)| format!("{kind}: {n}"))
        .collect();
    let mut line = format!("Restored {} objects", report.created_total());
    if !kinds.is_empty() {
        line.push_str(&format!(" ({})", kinds.join(", ")));
    }
    line.push('.');
    if report.existing > 0 {
        line.push_str(&format!(" {} already present, kept.", report.existing));
    }
    if report.replaced > 0 {
        line.push_str(&format!(" {} replaced.", report.replaced));
    }
    if !report.unserved.is_empty() {
        let kinds: Vec<String> = report
            .unserved
            .iter()
            .map(|(kind, n)| format!("{kind} ({n})"))
            .collect();
        line.push_str(&format!(
            " Skipped kinds the cluster does not serve: {}.",
            kinds.join(", ")
        ));
    }
    if report.dangling_owner_references > 0 {
        line.push_str(&format!(
            " Dropped {} owner references to objects not in the snapshot.",
            report.dangling_owner_references
        ));
    }
    line
}

/// `ksim snapshot restore`.
pub fn snapshot_restore(home: &KsimHome, flags: &SnapshotRestore) -> anyhow::Result<()> {
    let documents = read_snapshot(&flags.path)?;
    let options = RestoreOptions {
        conflicts: if flags.merge {
            Conflicts::Merge
        } else if flags.replace {
            Conflicts::Replace
        } else {
            Conflicts::Refuse
        },
        strict: flags.strict,
        ..RestoreOptions::default()
    };
    let report = runtime()?.block_on(async {
        let client =
            super::connect::cluster_client(home, &flags.name, flags.kubeconfig.as_deref()).await?;
        ksim_snapshot::restore::restore_scanned(&Target::new(client), documents, &options)
            .await
            .map_err(anyhow::Error::from)
    })?;
    for (kind, count) in &report.unserved {
        eprintln!("warning: skipped {count} objects of {kind}: the cluster does not serve it");
    }
    print_line(describe_report(&report))
}

/// `ksim snapshot export`.
pub fn snapshot_export(flags: &SnapshotExport) -> anyhow::Result<()> {
    let (size, written) = write_snapshot(&flags.path, async |writer| {
        let client = ksim_runtime::client::from_kubeconfig(
            Some(&flags.kubeconfig),
            flags.context.as_deref(),
        )
        .await?;
        let target = Target::with_rate_limit(client, RateLimit::new(flags.qps, flags.burst));
        let options = SaveOptions {
            namespace: flags.namespace.clone(),
            label_selector: flags.selector.clone(),
            secret_data: flags.include_secret_data,
            page_size: flags.chunk_size.max(1),
            ..SaveOptions::export()
        };
        let written = ksim_snapshot::save::write(&target, &options, flags.format.style(), writer)
            .await
            .context("cannot export the cluster");
        if let Some(limit) = target.rate_limit() {
            tracing::debug!(
                tokens = limit.permitted(),
                "tokens handed out by the client-side rate limit"
            );
        }
        written
    })?;
    print_line(format_args!(
        "Exported {} objects to {} ({size} bytes).",
        written.objects,
        flags.path.display()
    ))
}

/// Restores a snapshot's read documents into a cluster being started,
/// before its components run (`ksim create cluster --snapshot`): `target`
/// is the cluster in process, its objects created by the API server's own
/// bulk creation. `path` names the file in messages.
pub async fn restore_at_start(
    target: &Target,
    documents: Vec<ksim_snapshot::ScannedDocument>,
    path: &Path,
) -> anyhow::Result<Report> {
    // No controller runs yet: owners are created first and their
    // dependents with the owners' new uids (no second pass over them).
    let options = RestoreOptions {
        controllers_running: false,
        ..RestoreOptions::default()
    };
    let report = ksim_snapshot::restore::restore_scanned(target, documents, &options)
        .await
        .with_context(|| format!("cannot restore {}", path.display()))?;
    tracing::info!(path = %path.display(), summary = %describe_report(&report), "snapshot restored");
    Ok(report)
}
