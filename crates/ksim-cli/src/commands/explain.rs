//! `ksim explain pod NAME [-n NS]`: the scheduling decisions recorded on a
//! pod (per-node filter verdicts and per-plugin scores) as a table.

use std::path::PathBuf;

use anyhow::Context;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use super::print_line;
use super::scheduler::kube_client;

/// Options of `ksim explain pod`.
#[derive(Debug, Clone)]
pub struct ExplainPod {
    pub name: String,
    /// Default: the context's namespace.
    pub namespace: Option<String>,
    pub kubeconfig: Option<PathBuf>,
}

/// Prints the decision table of a pod.
pub fn explain_pod(options: &ExplainPod) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let pod = runtime.block_on(async {
        let client = kube_client(options.kubeconfig.as_deref()).await?;
        let namespace = options
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string());
        Api::<Pod>::namespaced(client, &namespace)
            .get(&options.name)
            .await
            .map_err(|e| match e {
                kube::Error::Api(status) => anyhow::anyhow!("{}", status.message),
                other => anyhow::Error::new(other),
            })
    })?;
    let table = ksim_scheduler::scheduler::explain(&pod).map_err(|e| anyhow::anyhow!(e))?;
    print_line(table.trim_end())
}
