//! `ksim bench daemonset` (hidden): a DaemonSet on many nodes with the
//! whole cluster in process (API server, kubelet simulator, scheduler,
//! controllers): the time from its create to a Ready pod on every node,
//! then the time a node added later takes to get its Ready pod.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::cluster::{Cluster, cpu_spent, run_on_runtime, wait_until};
use super::measure::{cpu_detail, cpu_time, per_second, thousands};
use crate::commands::print_line;
use crate::commands::scale;

/// Sizes of `ksim bench daemonset`.
#[derive(Debug, Clone, clap::Args)]
pub struct DaemonSetBench {
    /// Simulated nodes.
    #[arg(long, default_value_t = 1_000)]
    pub nodes: usize,
    /// Give up on a phase after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
}

const NAMESPACE: &str = "default";
const NAME: &str = "bench-agent";

/// Runs the DaemonSet benchmark and prints one line per figure.
pub fn bench_daemonset(bench: &DaemonSetBench) -> anyhow::Result<()> {
    if bench.nodes == 0 {
        bail!("--nodes must be at least 1");
    }
    run_on_runtime(run(bench))
}

async fn run(bench: &DaemonSetBench) -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let client = cluster.client.clone();
    let timeout = Duration::from_secs(bench.timeout);
    let started = Instant::now();
    cluster.add_ready_nodes(0, bench.nodes, timeout).await?;
    print_line(format_args!(
        "{} nodes created and Ready in {:.2} s",
        bench.nodes,
        started.elapsed().as_secs_f64()
    ))?;

    let sets: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
    let set: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": NAME},
        "spec": {
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {"containers": [{"name": "agent", "image": "agent:1"}]}
            }
        }
    }))?;
    let pid = std::process::id();
    let created = Instant::now();
    let cpu_before = cpu_time(pid);
    sets.create(&PostParams::default(), &set).await?;
    let want = i32::try_from(bench.nodes).context("too many nodes")?;
    wait_until(timeout, "a Ready pod on every node", || async {
        let status = sets.get(NAME).await.ok()?.status?;
        (status.desired_number_scheduled == want && status.number_ready == want).then_some(())
    })
    .await?;
    let to_ready = created.elapsed();
    let pods = u64::try_from(bench.nodes).unwrap_or(0);
    print_line(format_args!(
        "DaemonSet on {} nodes, create to a Ready pod on every node: {:.2} s ({} pods/s){}",
        bench.nodes,
        to_ready.as_secs_f64(),
        thousands(per_second(pods, to_ready)),
        cpu_detail("cluster", cpu_spent(pid, cpu_before), pods, "pods"),
    ))?;

    let cpu_before = cpu_time(pid);
    let added = Instant::now();
    let node: Node = serde_json::from_value(scale::node(bench.nodes, &scale::default_values()))?;
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await?;
    wait_until(timeout, "the new node's pod to be Ready", || async {
        let status = sets.get(NAME).await.ok()?.status?;
        (status.desired_number_scheduled == want + 1 && status.number_ready == want + 1)
            .then_some(())
    })
    .await?;
    print_line(format_args!(
        "a node added later, to its daemon pod Ready: {:.3} s{}",
        added.elapsed().as_secs_f64(),
        cpu_detail("cluster", cpu_spent(pid, cpu_before), 1, "pod"),
    ))?;
    Ok(())
}
