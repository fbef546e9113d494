//! Clients for the commands that talk to a cluster as a plain API client
//! (`scale node`, `kubelet`): from a ksim cluster's kubeconfig context, or from
//! a kubeconfig file's current context (any cluster).

use std::path::Path;

use anyhow::Context;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::cluster::KsimHome;
use crate::kubeconfig::{context_name, resolve_path};

/// A client for ksim cluster `name`: its `ksim-<name>` context in `kubeconfig`, else in
/// the kubeconfig `create cluster` wrote, else in the default kubeconfig.
pub async fn cluster_client(
    home: &KsimHome,
    name: &str,
    kubeconfig: Option<&Path>,
) -> anyhow::Result<kube::Client> {
    let path = match kubeconfig {
        Some(path) => path.to_path_buf(),
        None => match home.cluster(name).kubeconfig() {
            Some(path) => path,
            None => resolve_path(None)?,
        },
    };
    let context = context_name(name);
    let config = Kubeconfig::read_from(&path)
        .with_context(|| format!("cannot read the kubeconfig {}", path.display()))?;
    if !config.contexts.iter().any(|c| c.name == context) {
        anyhow::bail!(
            "cluster {name:?} not found: no context {context:?} in {}",
            path.display()
        );
    }
    let options = KubeConfigOptions {
        context: Some(context),
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(config, &options)
        .await
        .with_context(|| format!("invalid kubeconfig {}", path.display()))?;
    kube::Client::try_from(config).context("cannot build the API client")
}

/// A client from `kubeconfig`'s current context, else as kubectl finds its
/// configuration ($KUBECONFIG, ~/.kube/config, in-cluster).
pub async fn kubeconfig_client(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read the kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("invalid kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("cannot find a kubeconfig")?,
    };
    kube::Client::try_from(config).context("cannot build the API client")
}
