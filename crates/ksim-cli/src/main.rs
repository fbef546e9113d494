//! The `ksim` binary: parses the command line, sets up logging, runs the
//! command, and turns any error into one `error: ...` line and exit code 1.

mod assembly;
mod cluster;
mod commands;
mod kubeconfig;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use cluster::KsimHome;

/// mimalloc: the API server allocates many small JSON nodes per object; the
/// system allocator spends a third of a create's CPU on them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The cluster name when `--name` is not given.
pub(crate) const DEFAULT_CLUSTER_NAME: &str = "ksim";

#[derive(Parser)]
#[command(
    name = "ksim",
    version,
    about = "A Kubernetes cluster simulator in one binary"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create resources (a cluster).
    #[command(subcommand)]
    Create(CreateCommand),
    /// Delete resources (a cluster).
    #[command(subcommand)]
    Delete(DeleteCommand),
    /// Show resources (clusters, a kubeconfig).
    #[command(subcommand)]
    Get(GetCommand),
    /// Run a cluster in the foreground.
    Serve {
        /// Cluster name.
        #[arg(long, default_value = DEFAULT_CLUSTER_NAME)]
        name: String,
        /// Port to listen on (127.0.0.1); 0 picks a free one.
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// KubeSchedulerConfiguration for the cluster's scheduler.
        #[arg(long)]
        scheduler_config: Option<PathBuf>,
        /// Components not to run beside the API server (comma-separated).
        #[arg(long, value_delimiter = ',', value_enum)]
        disable: Vec<commands::Component>,
        #[command(flatten)]
        descheduler: commands::ClusterDescheduler,
        /// Snapshot to load before the components start (`create cluster --snapshot`).
        #[arg(long, hide = true)]
        snapshot: Option<PathBuf>,
        #[command(flatten)]
        autoscaler: commands::ClusterAutoscaler,
        #[command(flatten)]
        clock: commands::ClusterClock,
    },
    /// Save, restore or export snapshots of a cluster.
    #[command(subcommand)]
    Snapshot(SnapshotCommand),
    /// Record every change of a cluster to a file until interrupted.
    Record(commands::Record),
    /// Re-apply a recording's changes to a cluster.
    Replay(commands::Replay),
    /// Scale simulated resources (nodes).
    #[command(subcommand)]
    Scale(ScaleCommand),
    /// Run the kubelet simulator alone against a cluster.
    Kubelet {
        /// Kubeconfig (its current context); default as kubectl finds it.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Manage every node.
        #[arg(long)]
        manage_all_nodes: bool,
        /// Manage the nodes with this annotation (key=value).
        #[arg(long, value_name = "KEY=VALUE")]
        manage_nodes_with_annotation_selector: Option<String>,
        /// Manage the nodes with this label (key=value).
        #[arg(long, value_name = "KEY=VALUE")]
        manage_nodes_with_label_selector: Option<String>,
    },
    /// Run the workload and disruption controllers against a cluster.
    Controllers {
        /// Kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Controllers to run: `*` (all), `name`, `-name` (comma-separated).
        #[arg(long, default_value = "*")]
        controllers: String,
    },
    /// Run the scheduler against the current context or --kubeconfig.
    Scheduler {
        /// Kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) file.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Record per-node filter verdicts and scores on every pod.
        #[arg(long)]
        record_decisions: bool,
    },
    /// Run the descheduler (a DeschedulerPolicy) against a cluster.
    Deschedule(commands::DescheduleCommand),
    /// Print a cluster's time and clock; `advance D` moves a virtual clock.
    Clock(commands::ClockCommand),
    /// Run the DistributedPodDisruptionBudget controller against a cluster.
    DpdbController(commands::DpdbControllerCommand),
    /// Run the cluster autoscaler (node groups from the kwok provider's
    /// ConfigMaps) against a cluster.
    Autoscaler(commands::AutoscalerCommand),
    /// Explain scheduling decisions.
    #[command(subcommand)]
    Explain(ExplainCommand),
    /// Stop or start the simulated kubelet of nodes (as when a machine dies).
    #[command(subcommand)]
    Node(commands::NodeCommand),
    /// Drain nodes as `kubectl drain` does, waiting in the cluster's time (a
    /// virtual clock is advanced while the drain waits).
    Drain(commands::DrainCommand),
    /// Print the URL of the cluster's web view (and open it in a browser
    /// when one is available).
    Ui {
        /// Cluster name.
        #[arg(long, default_value = DEFAULT_CLUSTER_NAME)]
        name: String,
        /// Only print the URL.
        #[arg(long)]
        no_open: bool,
    },
    /// Run scenario files: steps and assertions on a cluster of their own.
    Run(commands::RunCommand),
    /// Benchmarks of ksim itself.
    #[command(subcommand, hide = true)]
    Bench(BenchCommand),
}

#[derive(Subcommand)]
enum CreateCommand {
    /// Start a cluster in the background and write its kubeconfig context.
    Cluster {
        /// Cluster name.
        #[arg(long, default_value = DEFAULT_CLUSTER_NAME)]
        name: String,
        /// Port to listen on (127.0.0.1); 0 picks a free one.
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Kubeconfig to write (default: first path of $KUBECONFIG, else ~/.kube/config).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Cluster configuration file (not supported yet).
        #[arg(long)]
        config: Option<PathBuf>,
        /// KubeSchedulerConfiguration for the cluster's scheduler.
        #[arg(long)]
        scheduler_config: Option<PathBuf>,
        /// Components not to run beside the API server (comma-separated).
        #[arg(long, value_delimiter = ',', value_enum)]
        disable: Vec<commands::Component>,
        #[command(flatten)]
        descheduler: commands::ClusterDescheduler,
        /// Start from this snapshot (ksim's, kwokctl's `--format k8s`, or an export).
        #[arg(long)]
        snapshot: Option<PathBuf>,
        #[command(flatten)]
        autoscaler: commands::ClusterAutoscaler,
        #[command(flatten)]
        clock: commands::ClusterClock,
    },
}

#[derive(Subcommand)]
enum SnapshotCommand {
    /// Write every object of a cluster to a multi-document YAML file.
    Save(commands::SnapshotSave),
    /// Load a snapshot file into a cluster.
    Restore(commands::SnapshotRestore),
    /// Copy what a simulation needs from any cluster (through its kubeconfig).
    Export(commands::SnapshotExport),
}

#[derive(Subcommand)]
enum ExplainCommand {
    /// The recorded filter verdicts and scores of a pod, per node.
    Pod {
        /// Pod name.
        name: String,
        /// Namespace (default: the context's).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        /// Kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum DeleteCommand {
    /// Stop a cluster and remove its state and kubeconfig entries.
    Cluster {
        /// Cluster name.
        #[arg(long, default_value = DEFAULT_CLUSTER_NAME, conflicts_with = "all")]
        name: String,
        /// Delete every cluster.
        #[arg(long)]
        all: bool,
    },
}

#[derive(Subcommand)]
enum GetCommand {
    /// List running clusters.
    Clusters,
    /// Print a kubeconfig for a cluster.
    Kubeconfig {
        /// Cluster name.
        #[arg(long, default_value = DEFAULT_CLUSTER_NAME)]
        name: String,
    },
}

#[derive(Subcommand)]
enum ScaleCommand {
    /// Make exactly R simulated nodes (node-000000, node-000001, ...) exist.
    Node {
        /// How many nodes.
        #[arg(long)]
        replicas: usize,
        /// Cluster name.
        #[arg(long, default_value = DEFAULT_CLUSTER_NAME)]
        name: String,
        /// Kubeconfig holding the cluster's context (default: the one create cluster wrote).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Node template value, e.g. '.allocatable.cpu="4"' (repeatable).
        #[arg(long = "param", value_name = ".PATH=VALUE")]
        params: Vec<String>,
    },
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Time from `ksim serve` start to /readyz, and its idle RSS.
    Startup {
        /// How many times to start the server.
        #[arg(long, default_value_t = 20)]
        runs: usize,
    },
    /// API server throughput: pod creates (in process and over HTTP), lists
    /// as JSON and Table, RSS holding the pods, watch fan-out.
    Api(commands::ApiBench),
    /// A Deployment of 10,000 replicas on 1,000 nodes with the whole
    /// cluster in process: create to all Ready, then a rolling update.
    Workloads(commands::WorkloadsBench),
    /// A DaemonSet on 1,000 nodes with the whole cluster in process: create
    /// to a Ready pod on every node, then a node added later.
    #[command(name = "daemonset")]
    DaemonSet(commands::DaemonSetBench),
    /// Kubelet simulator: nodes to Ready, idle CPU and RSS with leases,
    /// pre-bound pods to Running and their deletion.
    Kubelet(commands::KubeletBench),
    /// Draining nodes one after another under a PodDisruptionBudget, in an
    /// in-process cluster: evictions per second and 429s seen.
    Drain(commands::DrainBench),
    /// Snapshots at scale: save, restore to all Running, export over HTTP,
    /// replay of a recording.
    Snapshot(commands::SnapshotBench),
    /// DistributedPodDisruptionBudgets over three clusters.
    Dpdb(commands::DpdbBench),
    /// Bulk creation in process (`create_objects`): nodes and Running pods,
    /// then every pod read back through paged lists.
    Bulk(commands::BulkBench),
    /// `ksim run` over the example scenarios, and an hour advanced on an
    /// idle cluster (virtual clock).
    Scenarios(commands::ScenariosBench),
    /// Every benchmark: startup, then api.
    All {
        /// How many times to start the server (startup).
        #[arg(long, default_value_t = 20)]
        runs: usize,
        #[command(flatten)]
        api: commands::ApiBench,
    },
}

/// Checks a `ksim` command line (without `ksim`) as the binary would parse
/// it, for `ksim run`'s `ksim:` steps: the first line of clap's error.
pub(crate) fn check_ksim_args(args: &[String]) -> Result<(), String> {
    match Cli::try_parse_from(std::iter::once("ksim").chain(args.iter().map(String::as_str))) {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == clap::error::ErrorKind::DisplayHelp => Ok(()),
        Err(error) => {
            let message = error.to_string();
            let line = message.lines().next().unwrap_or_default();
            Err(line.trim_start_matches("error: ").to_string())
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let default_level = match cli.command {
        Command::Serve { .. }
        | Command::Kubelet { .. }
        | Command::Controllers { .. }
        | Command::DpdbController(_)
        | Command::Deschedule(_)
        | Command::Autoscaler(_) => "info",
        // The API's own message is the error line; kube's log of it is noise.
        Command::Snapshot(_)
        | Command::Record(_)
        | Command::Replay(_)
        | Command::Clock(_)
        | Command::Drain(_) => "warn,kube_client=off",
        _ => "warn",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        // The drain has printed kubectl's own last lines.
        Err(e) if e.is::<commands::DrainFailed>() => ExitCode::FAILURE,
        Err(e) => {
            use std::io::Write;
            let message = format!("{e:#}").replace('\n', " ");
            let _ = writeln!(std::io::stderr(), "error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command) -> anyhow::Result<()> {
    let home = || KsimHome::from_env();
    match command {
        Command::Create(CreateCommand::Cluster {
            name,
            port,
            kubeconfig,
            config,
            scheduler_config,
            disable,
            descheduler,
            snapshot,
            autoscaler,
            clock,
        }) => commands::create_cluster(
            &home()?,
            &commands::CreateCluster {
                name,
                port,
                kubeconfig,
                config,
                scheduler_config,
                disable,
                descheduler,
                snapshot,
                autoscaler,
                clock,
            },
        ),
        Command::Snapshot(SnapshotCommand::Save(flags)) => {
            commands::snapshot_save(&home()?, &flags)
        }
        Command::Snapshot(SnapshotCommand::Restore(flags)) => {
            commands::snapshot_restore(&home()?, &flags)
        }
        Command::Snapshot(SnapshotCommand::Export(flags)) => commands::snapshot_export(&flags),
        Command::Record(flags) => commands::record(&home()?, &flags),
        Command::Replay(flags) => commands::replay(&home()?, &flags),
        Command::Delete(DeleteCommand::Cluster { name, all }) => {
            commands::delete_cluster(&home()?, &commands::DeleteCluster { name, all })
        }
        Command::Get(GetCommand::Clusters) => commands::get_clusters(&home()?),
        Command::Get(GetCommand::Kubeconfig { name }) => commands::get_kubeconfig(&home()?, &name),
        Command::Serve {
            name,
            port,
            scheduler_config,
            disable,
            descheduler,
            snapshot,
            autoscaler,
            clock,
        } => commands::serve(
            &home()?,
            &name,
            port,
            commands::ServeOptions {
                scheduler_config: scheduler_config.as_deref(),
                disabled: &disable,
                descheduler: &descheduler,
                snapshot: snapshot.as_deref(),
                autoscaler: &autoscaler,
                clock: &clock,
            },
        ),
        Command::Ui { name, no_open } => commands::ui(&home()?, &name, !no_open),
        Command::Run(flags) => commands::run(&flags),
        Command::Deschedule(flags) => commands::deschedule(&home()?, &flags),
        Command::Clock(flags) => commands::clock(&home()?, &flags),
        Command::Node(command) => commands::node(&home()?, &command),
        Command::Drain(flags) => commands::drain(&home()?, &flags),
        Command::Autoscaler(flags) => commands::autoscaler(&home()?, &flags),
        Command::Scheduler {
            kubeconfig,
            config,
            record_decisions,
        } => commands::scheduler(&commands::SchedulerCommand {
            kubeconfig,
            config,
            record_decisions,
        }),
        Command::Explain(ExplainCommand::Pod {
            name,
            namespace,
            kubeconfig,
        }) => commands::explain_pod(&commands::ExplainPod {
            name,
            namespace,
            kubeconfig,
        }),
        Command::Scale(ScaleCommand::Node {
            replicas,
            name,
            kubeconfig,
            params,
        }) => commands::scale_node(
            &home()?,
            &commands::ScaleNode {
                name,
                kubeconfig,
                replicas,
                params,
            },
        ),
        Command::Kubelet {
            kubeconfig,
            manage_all_nodes,
            manage_nodes_with_annotation_selector,
            manage_nodes_with_label_selector,
        } => commands::kubelet(&commands::Kubelet {
            kubeconfig,
            manage_all_nodes,
            annotation_selector: manage_nodes_with_annotation_selector,
            label_selector: manage_nodes_with_label_selector,
        }),
        Command::Controllers {
            kubeconfig,
            controllers,
        } => commands::run_controllers(kubeconfig.as_deref(), &controllers),
        Command::DpdbController(flags) => commands::dpdb_controller(&flags),
        Command::Bench(BenchCommand::Startup { runs }) => commands::bench_startup(runs),
        Command::Bench(BenchCommand::Api(bench)) => commands::bench_api(&bench),
        Command::Bench(BenchCommand::Kubelet(bench)) => commands::bench_kubelet(&bench),
        Command::Bench(BenchCommand::Drain(bench)) => commands::bench_drain(&bench),
        Command::Bench(BenchCommand::Snapshot(bench)) => commands::bench_snapshot(&bench),
        Command::Bench(BenchCommand::Dpdb(bench)) => commands::bench_dpdb(&bench),
        Command::Bench(BenchCommand::Bulk(bench)) => commands::bench_bulk(&bench),
        Command::Bench(BenchCommand::Scenarios(bench)) => commands::bench_scenarios(&bench),
        Command::Bench(BenchCommand::All { runs, api }) => commands::bench_all(runs, &api),
        Command::Bench(BenchCommand::Workloads(bench)) => commands::bench_workloads(&bench),
        Command::Bench(BenchCommand::DaemonSet(bench)) => commands::bench_daemonset(&bench),
    }
}
