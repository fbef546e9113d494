//! Cluster process life: where a cluster's state lives (`$KSIM_HOME/clusters/<name>/`),
//! whether its process is alive, starting it in the background and stopping it.

mod process;
mod state;

pub use process::{probe_readyz, spawn_serve, stop, wait_until_ready};
pub use state::{ClusterDir, KsimHome, validate_cluster_name};
