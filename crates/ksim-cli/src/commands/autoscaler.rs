//! `ksim autoscaler`: runs the cluster autoscaler against the current
//! context, `--kubeconfig` or the ksim cluster `--name`, every
//! `--scan-interval` until SIGINT/SIGTERM (or one loop with `--once`),
//! with cluster-autoscaler's flag names; and the `--autoscaler` flags of
//! `ksim create cluster` / `ksim serve` that run it inside a cluster.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use ksim_autoscaler::{Autoscaler, AutoscalerOptions, Expander};
use tokio::signal::unix::{SignalKind, signal};

use super::print_line;
use crate::cluster::KsimHome;

fn parse_duration(text: &str) -> Result<Duration, String> {
    ksim_core::duration::parse_go_duration(text)
}

fn parse_threshold(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .parse()
        .map_err(|_| format!("invalid threshold {text:?}"))?;
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("threshold {text} is not between 0 and 1"))
    }
}

/// cluster-autoscaler's flags (upstream names and defaults).
#[derive(Debug, Clone, clap::Args)]
pub struct AutoscalerFlags {
    /// How often the cluster is re-evaluated for scale up or down.
    #[arg(long, value_name = "D", default_value = "10s", value_parser = parse_duration)]
    pub scan_interval: Duration,
    /// Expanders choosing the node group to grow, in order (random,
    /// most-pods, least-waste, priority).
    #[arg(long, default_value = "random", value_parser = parse_expanders)]
    pub expander: ExpanderList,
    /// Whether the autoscaler scales down.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub scale_down_enabled: bool,
    /// Requested cpu or memory over allocatable under which a node may go.
    #[arg(long, default_value = "0.5", value_parser = parse_threshold)]
    pub scale_down_utilization_threshold: f64,
    /// Nodes with pods to move considered for scale-down per scan at most.
    #[arg(long, default_value_t = 30)]
    pub scale_down_non_empty_candidates_count: usize,
    /// How long a node must be unneeded before it is removed.
    #[arg(long, value_name = "D", default_value = "10m", value_parser = parse_duration)]
    pub scale_down_unneeded_time: Duration,
    /// How long after a scale-up scale-down evaluation resumes.
    #[arg(long, value_name = "D", default_value = "10m", value_parser = parse_duration)]
    pub scale_down_delay_after_add: Duration,
    /// How long a new node may take to become Ready; one that takes longer
    /// is removed and its group backs off from scale-up.
    #[arg(long, value_name = "D", default_value = "15m", value_parser = parse_duration)]
    pub max_node_provision_time: Duration,
    /// The first backoff of a node group after a failed scale-up.
    #[arg(long, value_name = "D", default_value = "5m", value_parser = parse_duration)]
    pub initial_node_group_backoff_duration: Duration,
    /// The longest backoff of a node group (backoffs double up to it).
    #[arg(long, value_name = "D", default_value = "30m", value_parser = parse_duration)]
    pub max_node_group_backoff_duration: Duration,
    /// After this long without a failure, a group's backoff starts over.
    #[arg(long, value_name = "D", default_value = "3h", value_parser = parse_duration)]
    pub node_group_backoff_reset_timeout: Duration,
    /// Pods younger than this are not considered for scale-up.
    #[arg(long, value_name = "D", default_value = "0s", value_parser = parse_duration)]
    pub new_pod_scale_up_delay: Duration,
    /// How long a new node boots (NotReady, tainted not-ready) before the
    /// kubelet simulator makes it Ready (ksim's; a real provider's boot).
    #[arg(long, value_name = "D", default_value = "5s", value_parser = parse_duration)]
    pub node_boot_delay: Duration,
    /// Namespace of the kwok provider's ConfigMaps and of
    /// cluster-autoscaler-status (POD_NAMESPACE, as cluster-autoscaler).
    #[arg(
        long = "autoscaler-namespace",
        env = "POD_NAMESPACE",
        default_value = "kube-system"
    )]
    pub namespace: String,
    /// The kwok provider configuration ConfigMap (KWOK_PROVIDER_CONFIGMAP).
    #[arg(
        long,
        env = "KWOK_PROVIDER_CONFIGMAP",
        default_value = "kwok-provider-config"
    )]
    pub kwok_provider_configmap: String,
    /// Whether to write the cluster-autoscaler-status ConfigMap.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub write_status_configmap: bool,
}

/// `--expander`'s parsed list.
#[derive(Debug, Clone)]
pub struct ExpanderList(pub Vec<Expander>);

fn parse_expanders(text: &str) -> Result<ExpanderList, String> {
    Expander::parse_list(text).map(ExpanderList)
}

impl AutoscalerFlags {
    /// The library's options.
    pub fn options(&self) -> AutoscalerOptions {
        AutoscalerOptions {
            scan_interval: self.scan_interval,
            expanders: self.expander.0.clone(),
            scale_down_enabled: self.scale_down_enabled,
            scale_down_utilization_threshold: self.scale_down_utilization_threshold,
            scale_down_non_empty_candidates_count: self.scale_down_non_empty_candidates_count,
            scale_down_unneeded_time: self.scale_down_unneeded_time,
            scale_down_delay_after_add: self.scale_down_delay_after_add,
            max_node_provision_time: self.max_node_provision_time,
            initial_node_group_backoff_duration: self.initial_node_group_backoff_duration,
            max_node_group_backoff_duration: self.max_node_group_backoff_duration,
            node_group_backoff_reset_timeout: self.node_group_backoff_reset_timeout,
            new_pod_scale_up_delay: self.new_pod_scale_up_delay,
            node_boot_delay: self.node_boot_delay,
            namespace: self.namespace.clone(),
            config_name: self.kwok_provider_configmap.clone(),
            write_status_configmap: self.write_status_configmap,
        }
    }

    /// The same flags for `ksim serve`.
    pub fn serve_args(&self) -> Vec<String> {
        let names: Vec<&str> = self
            .expander
            .0
            .iter()
            .map(|e| match e {
                Expander::Random => "random",
                Expander::MostPods => "most-pods",
                Expander::LeastWaste => "least-waste",
                Expander::Priority => "priority",
            })
            .collect();
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        vec![
            "--autoscaler".into(),
            format!("--scan-interval={}", ms(self.scan_interval)),
            format!("--expander={}", names.join(",")),
            format!("--scale-down-enabled={}", self.scale_down_enabled),
            format!(
                "--scale-down-utilization-threshold={}",
                self.scale_down_utilization_threshold
            ),
            format!(
                "--scale-down-non-empty-candidates-count={}",
                self.scale_down_non_empty_candidates_count
            ),
            format!(
                "--scale-down-unneeded-time={}",
                ms(self.scale_down_unneeded_time)
            ),
            format!(
                "--scale-down-delay-after-add={}",
                ms(self.scale_down_delay_after_add)
            ),
            format!(
                "--max-node-provision-time={}",
                ms(self.max_node_provision_time)
            ),
            format!(
                "--initial-node-group-backoff-duration={}",
                ms(self.initial_node_group_backoff_duration)
            ),
            format!(
                "--max-node-group-backoff-duration={}",
                ms(self.max_node_group_backoff_duration)
            ),
            format!(
                "--node-group-backoff-reset-timeout={}",
                ms(self.node_group_backoff_reset_timeout)
            ),
            format!(
                "--new-pod-scale-up-delay={}",
                ms(self.new_pod_scale_up_delay)
            ),
            format!("--node-boot-delay={}", ms(self.node_boot_delay)),
            format!("--autoscaler-namespace={}", self.namespace),
            format!("--kwok-provider-configmap={}", self.kwok_provider_configmap),
            format!("--write-status-configmap={}", self.write_status_configmap),
        ]
    }
}

/// The flags of `ksim create cluster` / `ksim serve` that run the
/// autoscaler inside the cluster.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterAutoscaler {
    /// Run the cluster autoscaler in the cluster (node groups from the
    /// kwok provider ConfigMaps in kube-system).
    #[arg(long)]
    pub autoscaler: bool,
    #[command(flatten)]
    pub flags: AutoscalerFlags,
}

impl ClusterAutoscaler {
    /// The flags to pass on to `ksim serve`.
    pub fn serve_args(&self) -> Vec<String> {
        if self.autoscaler {
            self.flags.serve_args()
        } else {
            Vec::new()
        }
    }
}

/// Flags of `ksim autoscaler`.
#[derive(Debug, Clone, clap::Args)]
pub struct AutoscalerCommand {
    /// Kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The ksim cluster (its `ksim-<name>` context); default: the
    /// kubeconfig's current context.
    #[arg(long)]
    pub name: Option<String>,
    /// Run one loop, print what it did as JSON, and exit.
    #[arg(long)]
    pub once: bool,
    #[command(flatten)]
    pub flags: AutoscalerFlags,
}

/// Runs `ksim autoscaler`.
pub fn autoscaler(home: &KsimHome, command: &AutoscalerCommand) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(async {
        let client =
            super::connect::client(home, command.name.as_deref(), command.kubeconfig.as_deref())
                .await?;
        let options = command.flags.options();
        // Fail at once on a missing or invalid provider configuration.
        ksim_autoscaler::read_node_groups(&client, &options).await?;
        let mut autoscaler = Autoscaler::new(client, options);
        if command.once {
            let report = autoscaler.run_once().await?;
            let text = serde_json::to_string_pretty(&report).context("cannot encode the report")?;
            return print_line(text);
        }
        let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
        let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
        tokio::select! {
            () = autoscaler.run() => {}
            _ = terminate.recv() => tracing::info!("SIGTERM: stopping the autoscaler"),
            _ = interrupt.recv() => tracing::info!("SIGINT: stopping the autoscaler"),
        }
        Ok(())
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

/// Starts the autoscaler inside a cluster (`ksim serve`).
pub fn start_autoscaler(
    server: &ksim_apiserver::ApiServer,
    flags: &AutoscalerFlags,
    clock: ksim_runtime::clock::Clock,
) -> tokio::task::JoinHandle<()> {
    let client = ksim_runtime::client::in_process(server);
    let autoscaler = Autoscaler::with_clock(client, flags.options(), clock);
    tokio::spawn(autoscaler.run())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        flags: AutoscalerFlags,
    }

    #[test]
    fn defaults_are_upstream_and_serve_args_round_trip() {
        let cli = Cli::try_parse_from(["x"]).expect("defaults");
        let options = cli.flags.options();
        assert_eq!(options.scan_interval, Duration::from_secs(10));
        assert_eq!(options.expanders, vec![Expander::Random]);
        assert_eq!(options.scale_down_utilization_threshold, 0.5);
        assert_eq!(options.scale_down_unneeded_time, Duration::from_secs(600));
        assert_eq!(options.scale_down_delay_after_add, Duration::from_secs(600));
        let cli = Cli::try_parse_from([
            "x",
            "--scan-interval=1s",
            "--expander=priority,least-waste",
            "--scale-down-enabled=false",
        ])
        .expect("flags");
        let mut args = vec!["x".to_string()];
        args.extend(cli.flags.serve_args().into_iter().skip(1));
        let again = Cli::try_parse_from(args).expect("round trip");
        assert_eq!(again.flags.scan_interval, Duration::from_secs(1));
        assert_eq!(
            again.flags.expander.0,
            vec![Expander::Priority, Expander::LeastWaste]
        );
        assert!(!again.flags.scale_down_enabled);
        assert!(Cli::try_parse_from(["x", "--expander=price"]).is_err());
        assert!(Cli::try_parse_from(["x", "--scale-down-utilization-threshold=2"]).is_err());
    }
}
