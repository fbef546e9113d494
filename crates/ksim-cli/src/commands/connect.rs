//! Clients for the commands that talk to a cluster as a plain API client
//! (`scale node`, `kubelet`, `scheduler`, `controllers`, `deschedule`,
//! `explain`): from a ksim cluster's kubeconfig context, or from a kubeconfig
//! file's current context (any cluster). Both are built by
//! `ksim_runtime::client::from_kubeconfig`, the one place that decides how a
//! kubeconfig client retries (as client-go: only when the server sends
//! `Retry-After`).

use std::path::Path;

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
    match ksim_runtime::client::from_kubeconfig(Some(&path), Some(&context)).await {
        Ok(client) => Ok(client),
        Err(ksim_runtime::Error::NoContext { .. }) => anyhow::bail!(
            "cluster {name:?} not found: no context {context:?} in {}",
            path.display()
        ),
        Err(error) => Err(error.into()),
    }
}

/// The client of a command's `--name`/`--kubeconfig` flags: ksim cluster
/// `name` ([`cluster_client`]) when given, else `kubeconfig`'s current
/// context ([`kubeconfig_client`]).
pub async fn client(
    home: &KsimHome,
    name: Option<&str>,
    kubeconfig: Option<&Path>,
) -> anyhow::Result<kube::Client> {
    match name {
        Some(name) => cluster_client(home, name, kubeconfig).await,
        None => kubeconfig_client(kubeconfig).await,
    }
}

/// A client from `kubeconfig`'s current context, else as kubectl finds its
/// configuration ($KUBECONFIG, ~/.kube/config, in-cluster).
pub async fn kubeconfig_client(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Client> {
    Ok(ksim_runtime::client::from_kubeconfig(kubeconfig, None).await?)
}
