//! `ksim delete cluster`: stops a cluster's process and removes its state and
//! the kubeconfig entries it wrote.

use std::time::Duration;

use anyhow::bail;

use super::create::remove_kubeconfig_entries;
use super::print_line;
use crate::cluster::{self, ClusterDir, KsimHome, validate_cluster_name};

/// How long a cluster gets to exit after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Options of `ksim delete cluster`.
#[derive(Debug, Clone)]
pub struct DeleteCluster {
    pub name: String,
    pub all: bool,
}

/// Deletes cluster `options.name`, or every cluster with `options.all`.
pub fn delete_cluster(home: &KsimHome, options: &DeleteCluster) -> anyhow::Result<()> {
    let clusters = if options.all {
        home.clusters()?
    } else {
        validate_cluster_name(&options.name)?;
        let cluster = home.cluster(&options.name);
        if !cluster.exists() {
            bail!("cluster {:?} does not exist", options.name);
        }
        vec![cluster]
    };
    let mut first_error = None;
    for cluster in clusters {
        match delete_one(&cluster) {
            Ok(()) => print_line(format_args!("Cluster {:?} deleted.", cluster.name()))?,
            Err(e) => {
                tracing::error!(cluster = cluster.name(), "{e:#}");
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn delete_one(cluster: &ClusterDir) -> anyhow::Result<()> {
    if let Some(pid) = cluster.running_pid() {
        cluster::stop(pid, STOP_GRACE)?;
    }
    remove_kubeconfig_entries(cluster);
    cluster.remove()
}
