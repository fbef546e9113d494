//! `ksim bench dpdb`: DistributedPodDisruptionBudgets over three ksim
//! clusters in this process (each an API server on a loopback port recorded
//! in a temporary KSIM_HOME, with the kubelet simulator, the disruption
//! controller and the DPDB controller, which reaches the other two as
//! sibling ksim clusters). Prints the propagation of an eviction (from the
//! eviction in one cluster until every affected DPDB and child PDB in the
//! other two shows 0; median and p99 over the nine-pod ring), the
//! convergence of a ring of 1,000 DPDBs with 4 members each after a change,
//! and the process's idle CPU with those 1,000 DPDBs.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use ksim_controllers::dpdb::DistributedPodDisruptionBudget;
use kube::api::{Api, DeleteParams, EvictParams, ListParams, PostParams};
use serde_json::json;
use tokio::task::JoinSet;

use super::cluster::{run_on_runtime, wait_until};
use super::measure::{cpu_time, millis, percentile};
use crate::commands::{print_line, scale};

const CLUSTERS: [&str; 3] = ["red", "blue", "green"];
const NAMESPACE: &str = "default";
const SETUP_DEADLINE: Duration = Duration::from_secs(600);
const PODS_PER_NODE: usize = 100;

/// Sizes of `ksim bench dpdb`.
#[derive(Debug, Clone, clap::Args)]
pub struct DpdbBench {
    /// Evictions measured on the nine-pod ring.
    #[arg(long, default_value_t = 30)]
    pub runs: usize,
    /// DPDBs (and pods) of the large ring, spread over the three clusters.
    #[arg(long, default_value_t = 1000)]
    pub budgets: usize,
    /// Seconds of idle CPU measured with the large ring in place.
    #[arg(long, default_value_t = 10)]
    pub idle_seconds: u64,
}

/// One in-process cluster served on a loopback port.
struct Member {
    client: kube::Client,
    _components: JoinSet<()>,
}

async fn start_cluster(home: &std::path::Path, name: &str) -> anyhow::Result<Member> {
    let server = ksim_apiserver::ApiServer::new();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let port = listener.local_addr()?.port();
    let dir = home.join("clusters").join(name);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("port"), format!("{port}\n"))?;
    let mut components = JoinSet::new();
    let served = server.clone();
    components.spawn(async move {
        if let Err(error) = ksim_apiserver::serve(listener, served).await {
            tracing::error!(%error, "a bench API server stopped");
        }
    });
    let kubelet = ksim_kubelet::KubeletSimulator::new(
        ksim_runtime::client::in_process(&server),
        ksim_kubelet::KubeletOptions::default(),
    );
    components.spawn(async move {
        if let Err(error) = kubelet.run().await {
            tracing::error!(%error, "the kubelet simulator stopped");
        }
    });
    components.spawn(ksim_controllers::run_controllers(
        ksim_runtime::client::in_process(&server),
        &[
            ksim_controllers::ControllerName::Disruption,
            ksim_controllers::ControllerName::GarbageCollector,
        ],
    ));
    let config = ksim_controllers::dpdb::DpdbConfig {
        clusters: ksim_controllers::dpdb::clusters::ClusterSource::KsimHome {
            root: home.to_path_buf(),
            own: name.to_string(),
        },
        ..Default::default()
    };
    components.spawn(ksim_controllers::dpdb::run(
        ksim_runtime::client::in_process(&server),
        config,
    ));
    Ok(Member {
        client: ksim_runtime::client::in_process(&server),
        _components: components,
    })
}

/// The ring: pod `i` of `n` lives in cluster `i % 3`, its DPDB names the
/// DPDBs of its two neighbours on each side, minAvailable 4.
fn ring_name(i: usize) -> String {
    format!("db-{i:05}")
}

fn pod_of(i: usize, node: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": ring_name(i), "namespace": NAMESPACE, "labels": {"app": "database", "ring": ring_name(i)}},
        "spec": {"nodeName": node, "containers": [{"name": "db", "image": "db"}]},
    }))?)
}

fn dpdb_of(i: usize, n: usize) -> anyhow::Result<DistributedPodDisruptionBudget> {
    let members: Vec<serde_json::Value> = [n - 2, n - 1, 1, 2]
        .iter()
        .map(|d| {
            let j = (i + d) % n;
            json!({"cluster": CLUSTERS[j % 3], "name": ring_name(j)})
        })
        .collect();
    Ok(serde_json::from_value(json!({
        "apiVersion": "policy.ksim.io/v1alpha1", "kind": "DistributedPodDisruptionBudget",
        "metadata": {"name": ring_name(i), "namespace": NAMESPACE},
        "spec": {"selector": {"matchLabels": {"ring": ring_name(i)}}, "minAvailable": 4, "federation": members},
    }))?)
}

/// Creates the ring of `n` pods and DPDBs over the clusters.
async fn create_ring(members: &[Member], n: usize) -> anyhow::Result<()> {
    let per_cluster = n.div_ceil(3);
    let values = scale::default_values();
    for member in members {
        let nodes: Api<Node> = Api::all(member.client.clone());
        for index in 0..per_cluster.div_ceil(PODS_PER_NODE) {
            let node: Node = serde_json::from_value(scale::node(index, &values))?;
            nodes.create(&PostParams::default(), &node).await?;
        }
    }
    let mut created = JoinSet::new();
    for i in 0..n {
        let client = members[i % 3].client.clone();
        let node = scale::node_name((i / 3) / PODS_PER_NODE);
        let pod = pod_of(i, &node)?;
        let dpdb = dpdb_of(i, n)?;
        created.spawn(async move {
            Api::<Pod>::namespaced(client.clone(), NAMESPACE)
                .create(&PostParams::default(), &pod)
                .await?;
            Api::<DistributedPodDisruptionBudget>::namespaced(client, NAMESPACE)
                .create(&PostParams::default(), &dpdb)
                .await?;
            anyhow::Ok(())
        });
        if created.len() >= 64 {
            created.join_next().await.context("a create task")???;
        }
    }
    while let Some(done) = created.join_next().await {
        done??;
    }
    Ok(())
}

/// `name -> disruptionsAllowed` of every DPDB and child PDB of a cluster.
async fn allowances(client: &kube::Client) -> Option<BTreeMap<String, (i32, i32)>> {
    let dpdbs = Api::<DistributedPodDisruptionBudget>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default())
        .await
        .ok()?;
    let pdbs = Api::<PodDisruptionBudget>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default())
        .await
        .ok()?;
    let mut result: BTreeMap<String, (i32, i32)> = dpdbs
        .items
        .iter()
        .map(|d| {
            let allowed = d.status.as_ref().map_or(-1, |s| s.disruptions_allowed);
            (d.metadata.name.clone().unwrap_or_default(), (allowed, -1))
        })
        .collect();
    for pdb in pdbs.items {
        let name = pdb.metadata.name.clone().unwrap_or_default();
        let allowed = pdb.status.as_ref().map_or(-1, |s| s.disruptions_allowed);
        if let Some(entry) = result.get_mut(&name) {
            entry.1 = allowed;
        }
    }
    Some(result)
}

/// Waits until every DPDB and child named in `want` shows its allowance.
async fn wait_allowed(
    members: &[Member],
    timeout: Duration,
    want: impl Fn(&str) -> i32,
    poll: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut all = true;
        for member in members {
            match allowances(&member.client).await {
                Some(map) => {
                    all &= map
                        .iter()
                        .all(|(name, (d, p))| *d == want(name) && *p == want(name))
                }
                None => all = false,
            }
        }
        if all {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "timed out after {} s waiting for the budgets",
                timeout.as_secs()
            );
        }
        tokio::time::sleep(poll).await;
    }
}

/// Waits until the named budgets of one cluster (DPDB and child) show 0.
async fn wait_closed(client: &kube::Client, names: &[String]) -> anyhow::Result<()> {
    let dpdbs = Api::<DistributedPodDisruptionBudget>::namespaced(client.clone(), NAMESPACE);
    let pdbs = Api::<PodDisruptionBudget>::namespaced(client.clone(), NAMESPACE);
    wait_until_fast(SETUP_DEADLINE, || async {
        for name in names {
            let d = dpdbs.get(name).await.ok()?;
            let p = pdbs.get(name).await.ok()?;
            let closed = d.status.is_some_and(|s| s.disruptions_allowed == 0)
                && p.status.is_some_and(|s| s.disruptions_allowed == 0);
            if !closed {
                return None;
            }
        }
        Some(())
    })
    .await
}

/// Polls `check` every millisecond (the figures are in milliseconds).
async fn wait_until_fast<F, Fut>(timeout: Duration, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<()>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if check().await.is_some() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("timed out after {} s", timeout.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Evicts ring pod `i` in its cluster, then the time until the affected
/// budgets in the two other clusters show 0; then puts the pod back.
async fn one_eviction(members: &[Member], n: usize, i: usize) -> anyhow::Result<Duration> {
    let pods: Api<Pod> = Api::namespaced(members[i % 3].client.clone(), NAMESPACE);
    let pod = pods.get(&ring_name(i)).await?;
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    let start = Instant::now();
    pods.evict(&ring_name(i), &EvictParams::default()).await?;
    let mut waits = JoinSet::new();
    for d in [n - 2, n - 1, 1, 2] {
        let j = (i + d) % n;
        if j % 3 == i % 3 {
            continue;
        }
        let client = members[j % 3].client.clone();
        let names = vec![ring_name(j)];
        waits.spawn(async move { wait_closed(&client, &names).await });
    }
    while let Some(done) = waits.join_next().await {
        done??;
    }
    let elapsed = start.elapsed();
    // Back: the pod gone, then again and Ready.
    wait_until(SETUP_DEADLINE, "the evicted pod to be gone", || async {
        matches!(pods.get_opt(&ring_name(i)).await, Ok(None)).then_some(())
    })
    .await?;
    let _ = pods.delete(&ring_name(i), &DeleteParams::default()).await;
    pods.create(&PostParams::default(), &pod_of(i, &node)?)
        .await?;
    Ok(elapsed)
}

/// Runs `ksim bench dpdb`.
pub fn bench_dpdb(bench: &DpdbBench) -> anyhow::Result<()> {
    let home = tempfile::Builder::new()
        .prefix("ksim-bench-dpdb-")
        .tempdir()
        .context("cannot create a temporary KSIM_HOME")?;
    run_on_runtime(async {
        // The nine-pod ring: propagation.
        let mut members = Vec::new();
        for name in CLUSTERS {
            members.push(start_cluster(home.path(), name).await?);
        }
        create_ring(&members, 9).await?;
        let settle = Instant::now();
        wait_allowed(&members, SETUP_DEADLINE, |_| 1, Duration::from_millis(10)).await?;
        print_line(format_args!(
            "ring of 9 over 3 clusters: all allow 1 after {}",
            millis(settle.elapsed())
        ))?;
        let mut times = Vec::new();
        for run in 0..bench.runs {
            let i = run % 9;
            times.push(one_eviction(&members, 9, i).await?);
            wait_allowed(&members, SETUP_DEADLINE, |_| 1, Duration::from_millis(10)).await?;
        }
        times.sort();
        print_line(format_args!(
            "propagation (eviction in one cluster until every affected DPDB and child in the other two show 0), {} runs: median {}, p99 {} (targets: 50 ms, 250 ms)",
            times.len(),
            millis(percentile(&times, 50)),
            millis(percentile(&times, 99))
        ))?;
        drop(members);

        // The large ring: convergence and idle CPU.
        let home = tempfile::Builder::new()
            .prefix("ksim-bench-dpdb-")
            .tempdir()?;
        let mut members = Vec::new();
        for name in CLUSTERS {
            members.push(start_cluster(home.path(), name).await?);
        }
        let n = bench.budgets.max(9);
        let setup = Instant::now();
        create_ring(&members, n).await?;
        wait_allowed(&members, SETUP_DEADLINE, |_| 1, Duration::from_millis(100)).await?;
        print_line(format_args!(
            "ring of {n} DPDBs with 4 members each over 3 clusters: created and all allow 1 after {}",
            millis(setup.elapsed())
        ))?;
        // A change: one pod evicted; every DPDB (and child) converges.
        let i = n / 2;
        let affected: Vec<String> = [n - 2, n - 1, 0, 1, 2]
            .iter()
            .map(|d| ring_name((i + d) % n))
            .collect();
        let start = Instant::now();
        Api::<Pod>::namespaced(members[i % 3].client.clone(), NAMESPACE)
            .evict(&ring_name(i), &EvictParams::default())
            .await?;
        wait_allowed(
            &members,
            SETUP_DEADLINE,
            |name| i32::from(!affected.iter().any(|a| a == name)),
            Duration::from_millis(5),
        )
        .await?;
        print_line(format_args!(
            "convergence of all {n} DPDBs and children after one eviction: {} (target: 1 s)",
            millis(start.elapsed())
        ))?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let pid = std::process::id();
        let before = cpu_time(pid);
        let idle = Duration::from_secs(bench.idle_seconds.max(1));
        tokio::time::sleep(idle).await;
        let spent = cpu_time(pid)
            .zip(before)
            .map(|(after, before)| after.saturating_sub(before));
        match spent {
            Some(spent) => print_line(format_args!(
                "idle CPU with {n} DPDBs (the whole process: 3 API servers, kubelets, disruption and DPDB controllers): {:.1}% of a core over {} s (target: 5%)",
                100.0 * spent.as_secs_f64() / idle.as_secs_f64(),
                idle.as_secs()
            ))?,
            None => print_line("idle CPU: unknown (no /proc)")?,
        }
        anyhow::Ok(())
    })
}
