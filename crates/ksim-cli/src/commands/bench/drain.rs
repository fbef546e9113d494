//! `ksim bench drain`: draining nodes one after another under a
//! PodDisruptionBudget, as `kubectl drain` does it, in an in-process cluster
//! (API server, kubelet simulator, scheduler and controllers). A Deployment
//! spread over the drained nodes, spare nodes to take its pods, a budget over
//! it; each node is cordoned, every pod on it evicted through the eviction
//! API (a 429 retried after a short wait), and the drain waits until those
//! pods are gone. Prints evictions per second, the 429s seen and the times.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, EvictParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::task::JoinSet;

use super::cluster::{Cluster, run_on_runtime};
use super::measure::{cpu_detail, cpu_time, millis, per_second, percentile};
use crate::commands::print_line;
use crate::commands::scale;

/// The namespace of the benchmarked Deployment.
const NAMESPACE: &str = "default";
/// The Deployment's name, label value and the budget's name.
const APP: &str = "bench-drain";
/// How long setting up (pods Ready, budget observed) may take.
const SETUP_DEADLINE: Duration = Duration::from_secs(600);
/// How long one node's drain may take before the benchmark gives up.
const NODE_DEADLINE: Duration = Duration::from_secs(300);
/// The default wait before a refused eviction is retried, in milliseconds.
const DEFAULT_RETRY_MS: u64 = 100;
/// How often a drained pod is looked up until it is gone (kubectl: 1 s).
const GONE_POLL: Duration = Duration::from_millis(5);

/// Sizes of `ksim bench drain`.
#[derive(Debug, Clone, clap::Args)]
pub struct DrainBench {
    /// Nodes the Deployment starts on, drained one after another.
    #[arg(long, default_value_t = 100)]
    pub nodes: usize,
    /// Empty nodes added after the Deployment is placed, to take its pods.
    #[arg(long, default_value_t = 10)]
    pub spare_nodes: usize,
    /// Pods of the Deployment per drained node.
    #[arg(long, default_value_t = 10)]
    pub pods_per_node: usize,
    /// The budget's maxUnavailable (an integer or a percentage).
    #[arg(long, default_value = "1", conflicts_with = "min_available")]
    pub max_unavailable: String,
    /// The budget's minAvailable (an integer or a percentage) instead.
    #[arg(long)]
    pub min_available: Option<String>,
    /// Wait before an eviction refused with 429 is tried again, in
    /// milliseconds. kubectl drain waits 5 s; 100 ms keeps the drain bound
    /// by the cluster (a replacement pod Ready, the budget updated) rather
    /// than by the wait, without a storm of refused evictions (at 10 ms
    /// the 429s themselves used most of the CPU).
    #[arg(long, default_value_t = DEFAULT_RETRY_MS)]
    pub retry_ms: u64,
}

/// Counters shared by the eviction tasks.
#[derive(Default)]
struct Counters {
    evictions: AtomicU64,
    too_many_requests: AtomicU64,
}

/// Runs the drain benchmark and prints its figures.
pub fn bench_drain(bench: &DrainBench) -> anyhow::Result<()> {
    if bench.nodes == 0 || bench.pods_per_node == 0 {
        bail!("--nodes and --pods-per-node must be at least 1");
    }
    if scale::MAX_REPLICAS < bench.nodes + bench.spare_nodes {
        bail!("at most {} nodes", scale::MAX_REPLICAS);
    }
    run_on_runtime(run(bench))
}

/// An intOrString flag as JSON: a percentage stays a string.
fn int_or_string(value: &str) -> anyhow::Result<serde_json::Value> {
    if value.ends_with('%') {
        return Ok(json!(value));
    }
    let n: i32 = value
        .parse()
        .with_context(|| format!("{value:?} is neither an integer nor a percentage"))?;
    Ok(json!(n))
}

async fn run(bench: &DrainBench) -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    drain_all(&cluster.client, bench).await
}

async fn drain_all(client: &kube::Client, bench: &DrainBench) -> anyhow::Result<()> {
    let replicas = bench.nodes * bench.pods_per_node;
    let replicas_i32 = i32::try_from(replicas).context("too many pods")?;
    let setup = Instant::now();
    create_nodes(client, 0..bench.nodes).await?;
    create_deployment(client, replicas_i32).await?;
    wait_ready(client, replicas_i32).await?;
    let placement = pods_per_node(client).await?;
    let (fewest, most) = (
        placement.values().min().copied().unwrap_or(0),
        placement.values().max().copied().unwrap_or(0),
    );
    create_nodes(client, bench.nodes..bench.nodes + bench.spare_nodes).await?;
    let budget = create_budget(client, bench).await?;
    wait_budget_observed(client, replicas_i32).await?;
    print_line(format_args!(
        "setup: {} nodes + {} spare, a Deployment of {replicas} pods Ready ({fewest}..{most} per node), budget {budget}, in {:.1} s",
        bench.nodes,
        bench.spare_nodes,
        setup.elapsed().as_secs_f64()
    ))?;

    let counters = Arc::new(Counters::default());
    let own = std::process::id();
    let cpu_before = cpu_time(own);
    let started = Instant::now();
    let mut node_times = Vec::with_capacity(bench.nodes);
    for index in 0..bench.nodes {
        let node = scale::node_name(index);
        let node_started = Instant::now();
        tokio::time::timeout(NODE_DEADLINE, drain_node(client, &node, bench, &counters))
            .await
            .with_context(|| format!("draining {node} took more than {NODE_DEADLINE:?}"))??;
        node_times.push(node_started.elapsed());
    }
    let elapsed = started.elapsed();
    let cpu = cpu_before
        .zip(cpu_time(own))
        .map(|(before, after)| after.saturating_sub(before));
    let evictions = counters.evictions.load(Ordering::Relaxed);
    let refused = counters.too_many_requests.load(Ordering::Relaxed);
    node_times.sort();
    print_line(format_args!(
        "drain of {} nodes one after another: {evictions} evictions in {:.2} s = {:.1} evictions/s; {refused} refused with 429 (retried after {} ms){}",
        bench.nodes,
        elapsed.as_secs_f64(),
        per_second(evictions, elapsed),
        bench.retry_ms,
        cpu_detail("process", cpu, evictions, "evictions"),
    ))?;
    print_line(format_args!(
        "time per node: median {}, p90 {}, max {}",
        millis(percentile(&node_times, 50)),
        millis(percentile(&node_times, 90)),
        millis(percentile(&node_times, 100)),
    ))?;
    wait_ready(client, replicas_i32).await?;
    let placement = pods_per_node(client).await?;
    let drained: Vec<String> = (0..bench.nodes).map(scale::node_name).collect();
    let left = drained
        .iter()
        .filter_map(|n| placement.get(n))
        .sum::<usize>();
    // A pod the scheduler bound while its node was being cordoned (its
    // cache not yet showing the cordon) stays there, as with kube.
    print_line(format_args!(
        "after the drain: all {replicas} pods Ready again, on {} nodes; {left} of them bound to a node after it was drained (scheduled as it was cordoned)",
        placement.len()
    ))
}

async fn create_nodes(
    client: &kube::Client,
    indexes: std::ops::Range<usize>,
) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let values = scale::default_values();
    for index in indexes {
        let node: Node = serde_json::from_value(scale::node(index, &values))
            .context("the node template is a Node")?;
        api.create(&PostParams::default(), &node)
            .await
            .with_context(|| format!("cannot create node {}", scale::node_name(index)))?;
    }
    Ok(())
}

async fn create_deployment(client: &kube::Client, replicas: i32) -> anyhow::Result<()> {
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": APP, "namespace": NAMESPACE},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": APP}},
            "template": {
                "metadata": {"labels": {"app": APP}},
                "spec": {"containers": [{
                    "name": "app",
                    "image": "nginx",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                }]},
            },
        },
    }))
    .context("the benchmark's Deployment")?;
    Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &deployment)
        .await
        .context("cannot create the Deployment")?;
    Ok(())
}

/// Creates the budget; returns how it reads (`maxUnavailable 1`).
async fn create_budget(client: &kube::Client, bench: &DrainBench) -> anyhow::Result<String> {
    let (field, value) = match &bench.min_available {
        Some(min) => ("minAvailable", min.as_str()),
        None => ("maxUnavailable", bench.max_unavailable.as_str()),
    };
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": APP, "namespace": NAMESPACE},
        "spec": {"selector": {"matchLabels": {"app": APP}}, field: int_or_string(value)?},
    }))
    .context("the benchmark's PodDisruptionBudget")?;
    Api::<PodDisruptionBudget>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &pdb)
        .await
        .context("cannot create the PodDisruptionBudget")?;
    Ok(format!("{field} {value}"))
}

/// Polls `check` every 50 ms until it holds, or fails after the setup deadline.
async fn poll_until<F, Fut>(what: &str, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + SETUP_DEADLINE;
    while !check().await? {
        if Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

async fn wait_ready(client: &kube::Client, replicas: i32) -> anyhow::Result<()> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    poll_until("the Deployment's pods to be Ready", || {
        let api = api.clone();
        async move {
            let status = api.get(APP).await?.status.unwrap_or_default();
            Ok(status.ready_replicas == Some(replicas)
                && status.updated_replicas == Some(replicas)
                && status.replicas == Some(replicas))
        }
    })
    .await
}

async fn wait_budget_observed(client: &kube::Client, replicas: i32) -> anyhow::Result<()> {
    let api: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), NAMESPACE);
    poll_until("the budget's status", || {
        let api = api.clone();
        async move {
            let pdb = api.get(APP).await?;
            let status = pdb.status.unwrap_or_default();
            Ok(status.observed_generation == pdb.metadata.generation
                && status.expected_pods == replicas
                && status.current_healthy == replicas)
        }
    })
    .await
}

/// How many of the Deployment's pods each node holds.
async fn pods_per_node(client: &kube::Client) -> anyhow::Result<BTreeMap<String, usize>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let pods = api
        .list(&ListParams::default().labels(&format!("app={APP}")))
        .await?;
    let mut counts = BTreeMap::new();
    for pod in pods.items {
        if let Some(node) = pod.spec.and_then(|s| s.node_name) {
            *counts.entry(node).or_insert(0) += 1;
        }
    }
    Ok(counts)
}

/// `kubectl drain NODE`: cordon, evict every pod on the node (not
/// DaemonSet pods), wait until each evicted pod is gone.
async fn drain_node(
    client: &kube::Client,
    node: &str,
    bench: &DrainBench,
    counters: &Arc<Counters>,
) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"unschedulable": true}})),
        )
        .await
        .with_context(|| format!("cannot cordon {node}"))?;
    let all: Api<Pod> = Api::all(client.clone());
    let on_node = all
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
        .with_context(|| format!("cannot list the pods on {node}"))?;
    let mut evictions = JoinSet::new();
    for pod in on_node.items {
        let owned_by_daemon_set = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.controller == Some(true) && r.kind == "DaemonSet");
        if owned_by_daemon_set {
            continue;
        }
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        let counters = Arc::clone(counters);
        let retry = Duration::from_millis(bench.retry_ms);
        evictions.spawn(async move {
            evict_and_wait(&api, &name, &uid, retry, &counters)
                .await
                .with_context(|| format!("pod {namespace}/{name}"))
        });
    }
    while let Some(done) = evictions.join_next().await {
        done.context("an eviction task failed")??;
    }
    Ok(())
}

/// Evicts one pod, retrying 429s, then waits until it is gone (404, or a
/// pod of the same name with another uid).
async fn evict_and_wait(
    api: &Api<Pod>,
    name: &str,
    uid: &str,
    retry: Duration,
    counters: &Counters,
) -> anyhow::Result<()> {
    let mut attempt = 0u64;
    loop {
        match api.evict(name, &EvictParams::default()).await {
            Ok(_) => {
                counters.evictions.fetch_add(1, Ordering::Relaxed);
                break;
            }
            Err(kube::Error::Api(status)) if status.code == 429 => {
                counters.too_many_requests.fetch_add(1, Ordering::Relaxed);
                attempt += 1;
                tokio::time::sleep(jittered(retry, name, attempt)).await;
            }
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
            Err(e) => return Err(e).context("eviction failed"),
        }
    }
    loop {
        match api.get_opt(name).await? {
            Some(pod) if pod.metadata.uid.as_deref() == Some(uid) => {
                tokio::time::sleep(GONE_POLL).await;
            }
            _ => return Ok(()),
        }
    }
}

/// `retry` spread over [retry/2, 3·retry/2) by the pod's name and the
/// attempt: a node's evictions all start together, and retried in lockstep
/// they would all wait a whole `retry` after the budget allows one more.
fn jittered(retry: Duration, name: &str, attempt: u64) -> Duration {
    use std::hash::{Hash, Hasher};
    let millis = u64::try_from(retry.as_millis()).unwrap_or(u64::MAX).max(1);
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (name, attempt).hash(&mut hasher);
    Duration::from_millis(millis / 2 + hasher.finish() % millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_values_are_integers_or_percentages() {
        assert_eq!(int_or_string("1").expect("int"), json!(1));
        assert_eq!(int_or_string("90%").expect("percent"), json!("90%"));
        assert!(int_or_string("ninety").is_err());
    }

    #[test]
    fn retries_spread_around_the_requested_wait() {
        let retry = Duration::from_millis(100);
        let waits: Vec<Duration> = (0..50)
            .map(|attempt| jittered(retry, "pod-a", attempt))
            .collect();
        assert!(
            waits
                .iter()
                .all(|w| *w >= Duration::from_millis(50) && *w < Duration::from_millis(150))
        );
        assert!(waits.iter().any(|w| *w != waits[0]), "the waits differ");
        assert_ne!(jittered(retry, "pod-a", 1), jittered(retry, "pod-b", 1));
        assert_eq!(jittered(Duration::ZERO, "p", 1), Duration::ZERO);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_small_drain_moves_every_pod_to_the_spare_nodes() {
        let bench = DrainBench {
            nodes: 2,
            spare_nodes: 1,
            pods_per_node: 2,
            max_unavailable: "1".into(),
            min_available: None,
            retry_ms: 10,
        };
        run(&bench).await.expect("the drain benchmark runs");
    }
}
