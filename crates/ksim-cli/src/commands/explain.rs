//! `ksim explain pod NAME [-n NS]`: the scheduling decisions recorded on a
//! pod (per-node filter verdicts and per-plugin scores) as a table, and for
//! a pod the scheduler marked unschedulable, what each of the cluster
//! autoscaler's node groups could do for it (when the kwok provider's
//! ConfigMaps exist).

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
    let (pod, groups) = runtime.block_on(async {
        let client = kube_client(options.kubeconfig.as_deref()).await?;
        let namespace = options
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string());
        let pod = Api::<Pod>::namespaced(client.clone(), &namespace)
            .get(&options.name)
            .await
            .map_err(|e| match e {
                kube::Error::Api(status) => anyhow::anyhow!("{}", status.message),
                other => anyhow::Error::new(other),
            })?;
        let mut autoscaler_options = ksim_autoscaler::AutoscalerOptions::default();
        if let Ok(namespace) = std::env::var("POD_NAMESPACE")
            && !namespace.trim().is_empty()
        {
            autoscaler_options.namespace = namespace;
        }
        let mut autoscaler = ksim_autoscaler::Autoscaler::new(client, autoscaler_options);
        let groups = match autoscaler.explain(&pod).await {
            Ok(explanation) if explanation.unschedulable => Some(explanation),
            Ok(_) => None,
            Err(error) => {
                tracing::debug!(%error, "no node groups to explain");
                None
            }
        };
        anyhow::Ok((pod, groups))
    })?;
    let table = ksim_scheduler::scheduler::explain(&pod);
    match (table, groups) {
        (Ok(table), None) => print_line(table.trim_end()),
        (Err(error), None) => Err(anyhow::anyhow!(error)),
        (table, Some(groups)) => {
            if let Ok(table) = table {
                print_line(table.trim_end())?;
                print_line("")?;
            }
            for line in group_lines(&groups) {
                print_line(line)?;
            }
            Ok(())
        }
    }
}

/// The node groups' answers as lines: a heading, then a table.
fn group_lines(explanation: &ksim_autoscaler::runner::Explanation) -> Vec<String> {
    let mut lines = vec!["Cluster autoscaler node groups:".to_string()];
    if explanation.fits_booting_node {
        lines.push("The pod fits a node that is still booting: no scale-up needed.".into());
    }
    let mut rows = vec![[
        "GROUP".to_string(),
        "SIZE".into(),
        "MAX".into(),
        "SCALE-UP".into(),
    ]];
    for group in &explanation.groups {
        rows.push([
            group.name.clone(),
            group.size.to_string(),
            group.max_size.to_string(),
            match &group.verdict {
                None => "yes: a new node would host the pod".into(),
                Some(reason) => format!("no: {reason}"),
            },
        ]);
    }
    let widths: Vec<usize> = (0..4)
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    for row in rows {
        lines.push(format!(
            "{:<w0$}   {:<w1$}   {:<w2$}   {}",
            row[0],
            row[1],
            row[2],
            row[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        ));
    }
    lines
}
