//! `ksim bench daemonset` (hidden): a DaemonSet on many nodes with the
//! whole cluster in process (API server, kubelet simulator, scheduler,
//! controllers): the time from its create to a Ready pod on every node,
//! then the time a node added later takes to get its Ready pod.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load
        .split_whitespace()
        .next()
        .unwrap_or("unknown")
        .to_string();
    print_line(format_args!(
        "machine: {cpus} CPUs, load average {load}; whole cluster in process (API server, kubelet simulator, scheduler, controllers)"
    ))?;
    let result = runtime.block_on(run(bench));
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

async fn run(bench: &DaemonSetBench) -> anyhow::Result<()> {
    let server = ksim_apiserver::ApiServer::new();
    let client = ksim_runtime::client::in_process(&server);
    let kubelet = ksim_kubelet::KubeletSimulator::new(
        ksim_runtime::client::in_process(&server),
        ksim_kubelet::KubeletOptions::default(),
    );
    tokio::spawn(async move {
        if let Err(error) = kubelet.run().await {
            tracing::error!(%error, "the kubelet simulator stopped");
        }
    });
    tokio::spawn(ksim_controllers::run_controllers(
        ksim_runtime::client::in_process(&server),
        ksim_controllers::ALL_CONTROLLERS,
    ));
    let scheduler_client = ksim_runtime::client::in_process(&server);
    tokio::spawn(async move {
        if let Err(error) =
            ksim_scheduler::scheduler::run(scheduler_client, Default::default()).await
        {
            tracing::error!(%error, "the scheduler stopped");
        }
    });
    let timeout = Duration::from_secs(bench.timeout);

    let nodes: Api<Node> = Api::all(client.clone());
    let values = scale::default_values();
    let started = Instant::now();
    for index in 0..bench.nodes {
        let node: Node = serde_json::from_value(scale::node(index, &values))?;
        nodes.create(&PostParams::default(), &node).await?;
    }
    wait_until(timeout, "the nodes to be Ready", || async {
        let listed = nodes.list(&ListParams::default()).await.ok()?;
        let ready = listed.items.iter().filter(|n| node_ready(n)).count();
        (ready == bench.nodes).then_some(())
    })
    .await?;
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
    let node: Node = serde_json::from_value(scale::node(bench.nodes, &values))?;
    nodes.create(&PostParams::default(), &node).await?;
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

/// The CPU time this process used since `before`.
fn cpu_spent(pid: u32, before: Option<Duration>) -> Option<Duration> {
    Some(cpu_time(pid)?.saturating_sub(before?))
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Polls `check` every 100 ms until it returns `Some`, or fails after `timeout`.
async fn wait_until<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if Instant::now() > deadline {
            bail!("timed out after {} s waiting for {what}", timeout.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
