//! `ksim node stop NODE...` / `ksim node start NODE...`: stop a node's
//! simulated kubelet as if its machine died, and start it again. They set and
//! remove the Node annotation `ksim.io/kubelet: stopped` (what
//! `kubectl annotate node NODE ksim.io/kubelet=stopped` and
//! `kubectl annotate node NODE ksim.io/kubelet-` do): while it is set the
//! kubelet simulator renews neither the node's Lease nor its status and leaves
//! its pods alone, so the node lifecycle controller marks the node NotReady
//! after its grace period.

use std::path::PathBuf;

use anyhow::Context;
use k8s_openapi::api::core::v1::Node;
use ksim_kubelet::simulator::{KUBELET_ANNOTATION, KUBELET_STOPPED, kubelet_stopped};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::cluster::KsimHome;

/// `ksim node ...`.
#[derive(Debug, clap::Subcommand)]
pub enum NodeCommand {
    /// Stop the simulated kubelet of nodes (their lease and status are no
    /// longer renewed, their pods no longer acted on).
    Stop(NodeKubelet),
    /// Start the simulated kubelet of stopped nodes again.
    #[command(visible_alias = "resume")]
    Start(NodeKubelet),
}

/// The flags of `ksim node stop|start`.
#[derive(Debug, clap::Args)]
pub struct NodeKubelet {
    /// Node names.
    #[arg(required = true, value_name = "NODE")]
    pub nodes: Vec<String>,
    /// Kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The ksim cluster (its `ksim-<name>` context); default: the
    /// kubeconfig's current context.
    #[arg(long)]
    pub name: Option<String>,
}

/// Runs `ksim node stop|start`.
pub fn node(home: &KsimHome, command: &NodeCommand) -> anyhow::Result<()> {
    let (flags, stop) = match command {
        NodeCommand::Stop(flags) => (flags, true),
        NodeCommand::Start(flags) => (flags, false),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let client =
            super::connect::client(home, flags.name.as_deref(), flags.kubeconfig.as_deref())
                .await?;
        set_kubelet(client, &flags.nodes, stop).await
    })
}

/// Stops (or starts) the kubelet of every node in `names`, printing a line
/// for each; nodes that do not exist make one error line at the end.
async fn set_kubelet(client: kube::Client, names: &[String], stop: bool) -> anyhow::Result<()> {
    let nodes = Api::<Node>::all(client);
    let mut missing = Vec::new();
    for name in names {
        let Some(node) = nodes.get_opt(name).await? else {
            missing.push(format!("{name:?}"));
            continue;
        };
        let value = serde_json::to_value(&node).context("node as JSON")?;
        let (verb, changed) = match (stop, kubelet_stopped(&value)) {
            (true, true) => ("already stopped", false),
            (true, false) => ("stopped", true),
            (false, true) => ("started", true),
            (false, false) => ("already running", false),
        };
        if changed {
            let annotation = stop.then_some(KUBELET_STOPPED);
            let patch = json!({"metadata": {"annotations": {KUBELET_ANNOTATION: annotation}}});
            match nodes
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    missing.push(format!("{name:?}"));
                    continue;
                }
                Err(error) => return Err(error).with_context(|| format!("node {name:?}")),
            }
        }
        super::print_line(format!("node/{name} kubelet {verb}"))?;
    }
    if !missing.is_empty() {
        anyhow::bail!("nodes {} not found", missing.join(", "));
    }
    Ok(())
}
