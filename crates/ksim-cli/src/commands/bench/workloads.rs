//! `ksim bench workloads` (hidden): a Deployment of many replicas on many
//! nodes with the whole cluster in process (API server, kubelet simulator,
//! scheduler, controllers): the time from its create to every pod Ready,
//! then the time a rolling update to a new image takes to complete.

use std::time::{Duration, Instant};

use anyhow::bail;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::cluster::{Cluster, cpu_spent, run_on_runtime, wait_until};
use super::measure::{cpu_detail, cpu_time, per_second, thousands};
use crate::commands::print_line;

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
    run_on_runtime(run(bench))
}

async fn run(bench: &WorkloadsBench) -> anyhow::Result<()> {
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
