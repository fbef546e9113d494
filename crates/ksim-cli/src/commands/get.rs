//! `ksim get clusters` and `ksim get kubeconfig`.

use anyhow::bail;

use super::print_line;
use crate::cluster::{KsimHome, validate_cluster_name};
use crate::kubeconfig::{Kubeconfig, server_url};

/// Prints the names of the clusters whose process is alive, one per line.
pub fn get_clusters(home: &KsimHome) -> anyhow::Result<()> {
    for cluster in home.clusters()? {
        if cluster.running_pid().is_some() {
            print_line(cluster.name())?;
        }
    }
    Ok(())
}

/// Prints a kubeconfig for the running cluster `name`.
pub fn get_kubeconfig(home: &KsimHome, name: &str) -> anyhow::Result<()> {
    validate_cluster_name(name)?;
    let cluster = home.cluster(name);
    let port = cluster.running_pid().and_then(|_| cluster.port());
    let Some(port) = port else {
        bail!("cluster {name:?} does not exist");
    };
    let yaml = Kubeconfig::for_cluster(name, &server_url(port)).to_yaml()?;
    print_line(yaml.trim_end())
}
