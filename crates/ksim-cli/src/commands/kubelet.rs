//! `ksim kubelet`: the kubelet simulator stand-alone, against the current
//! context or `--kubeconfig` (a ksim cluster over HTTP, or a real cluster).

use std::path::PathBuf;

use anyhow::Context;
use ksim_kubelet::{KubeletOptions, KubeletSimulator, NodeSelection};
use tokio::signal::unix::{SignalKind, signal};

/// Flags of `ksim kubelet`.
#[derive(Debug, Default)]
pub struct Kubelet {
    /// Kubeconfig (its current context); default as kubectl finds it.
    pub kubeconfig: Option<PathBuf>,
    /// Manage every node.
    pub manage_all_nodes: bool,
    /// Manage nodes with this annotation (`k=v`).
    pub annotation_selector: Option<String>,
    /// Manage nodes with this label (`k=v`).
    pub label_selector: Option<String>,
}

/// Which nodes the flags select: exactly one way must be given.
fn selection(flags: &Kubelet) -> anyhow::Result<NodeSelection> {
    let given = usize::from(flags.manage_all_nodes)
        + usize::from(flags.annotation_selector.is_some())
        + usize::from(flags.label_selector.is_some());
    if given != 1 {
        anyhow::bail!(
            "give exactly one of --manage-all-nodes, --manage-nodes-with-annotation-selector, --manage-nodes-with-label-selector"
        );
    }
    Ok(match (&flags.annotation_selector, &flags.label_selector) {
        (Some(a), _) => NodeSelection::annotation(a)?,
        (_, Some(l)) => NodeSelection::label(l)?,
        _ => NodeSelection::All,
    })
}

/// Runs the simulator until SIGINT or SIGTERM.
pub fn kubelet(flags: &Kubelet) -> anyhow::Result<()> {
    let manage = selection(flags)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(async {
        let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
        let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
        let client = super::connect::kubeconfig_client(flags.kubeconfig.as_deref()).await?;
        let options = KubeletOptions {
            manage,
            ..Default::default()
        };
        tracing::info!(manage = ?options.manage, "kubelet simulator starting");
        tokio::select! {
            result = KubeletSimulator::new(client, options).run() => result.context("the kubelet simulator failed"),
            _ = terminate.recv() => Ok(()),
            _ = interrupt.recv() => Ok(()),
        }
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_selection_flag_is_required() {
        let all = Kubelet {
            manage_all_nodes: true,
            ..Default::default()
        };
        assert_eq!(selection(&all).expect("valid"), NodeSelection::All);
        let label = Kubelet {
            label_selector: Some("type=kwok".into()),
            ..Default::default()
        };
        assert_eq!(
            selection(&label).expect("valid"),
            NodeSelection::Label {
                key: "type".into(),
                value: "kwok".into()
            }
        );
        assert!(selection(&Kubelet::default()).is_err());
        let both = Kubelet {
            manage_all_nodes: true,
            label_selector: Some("a=b".into()),
            ..Default::default()
        };
        assert!(selection(&both).is_err());
    }
}
