//! `ksim bench workloads` (hidden): a Deployment of many replicas on many
//! nodes with the whole cluster in process (API server, kubelet simulator,
//! scheduler, controllers): the time from its create to every pod Ready,
//! then the time a rolling update to a new image takes to complete.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::measure::{cpu_detail, cpu_time, per_second, thousands};
use crate::commands::print_line;
use crate::commands::scale;

/// Sizes of `ksim bench workloads`; the defaults are the targets' sizes.
#[derive(Debug, Clone, clap::Args)]
pub struct WorkloadsBench {
    /// Simulated nodes.
    #[arg(long, default_value_t = 1_000)]
    pub nodes: usize,
    /// Replicas of the Deployment.
    #[arg(long, default_value_t = 10_000)]
    pub replicas: i32,
    /// Give up on a phase after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
}

const NAMESPACE: &str = "default";
const NAME: &str = "bench";

/// Runs the workload benchmark and prints one line per figure.
pub fn bench_workloads(bench: &WorkloadsBench) -> anyhow::Result<()> {
    if bench.nodes == 0 || bench.replicas <= 0 {
        bail!("--nodes and --replicas must be at least 1");
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

async fn run(bench: &WorkloadsBench) -> anyhow::Result<()> {
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

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": NAME},
        "spec": {
            "replicas": bench.replicas,
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1"}]}
            }
        }
    }))?;
    let pid = std::process::id();
    let created = Instant::now();
    let cpu_before = cpu_time(pid);
    deployments
        .create(&PostParams::default(), &deployment)
        .await?;
    let replicas = bench.replicas;
    wait_until(timeout, "every replica to be Ready", || async {
        let status = deployments.get(NAME).await.ok()?.status?;
        (status.ready_replicas == Some(replicas)).then_some(())
    })
    .await?;
    let to_ready = created.elapsed();
    let pods = u64::try_from(replicas).unwrap_or(0);
    print_line(format_args!(
        "Deployment of {} replicas on {} nodes, create to all pods Ready: {:.2} s ({} pods/s; target < 5 s){}",
        replicas,
        bench.nodes,
        to_ready.as_secs_f64(),
        thousands(per_second(pods, to_ready)),
        cpu_detail("cluster", cpu_spent(pid, cpu_before), pods, "pods"),
    ))?;

    let cpu_before = cpu_time(pid);

    let updated = Instant::now();
    deployments
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {
                "containers": [{"name": "nginx", "image": "nginx:2"}]
            }}}})),
        )
        .await?;
    wait_until(timeout, "the rolling update to complete", || async {
        let deployment = deployments.get(NAME).await.ok()?;
        let generation = deployment.metadata.generation;
        let status = deployment.status?;
        (status.observed_generation >= generation
            && status.updated_replicas == Some(replicas)
            && status.ready_replicas == Some(replicas)
            && status.available_replicas == Some(replicas)
            && status.replicas == Some(replicas))
        .then_some(())
    })
    .await?;
    let rolled = updated.elapsed();
    print_line(format_args!(
        "rolling update of {} replicas to a new image (maxSurge 25%, maxUnavailable 25%): {:.2} s ({} pods/s replaced){}",
        replicas,
        rolled.as_secs_f64(),
        thousands(per_second(pods, rolled)),
        cpu_detail("cluster", cpu_spent(pid, cpu_before), pods, "pods"),
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
