//! The in-process cluster the component benchmarks (`workloads`,
//! `daemonset`, `drain`) run against: the API server with the kubelet
//! simulator, the scheduler and every controller on in-process clients, as
//! `ksim serve` assembles them; the async runtime the benchmark runs on,
//! and the waits and figures they share.

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, PostParams};

use super::measure::cpu_time;
use crate::commands::print_line;
use crate::commands::scale;

/// Prints the machine line, then runs `bench` on a multi-threaded runtime.
pub fn run_on_runtime<F: Future<Output = anyhow::Result<()>>>(bench: F) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split_whitespace().next().unwrap_or("unknown");
    print_line(format_args!(
        "machine: {cpus} CPUs, load average {load}; whole cluster in process (API server, kubelet simulator, scheduler, controllers)"
    ))?;
    let result = runtime.block_on(bench);
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

/// A cluster in this process, assembled as `ksim serve` assembles it (the
/// components on their own lower-priority runtime); its components stop
/// when it is dropped.
pub struct Cluster {
    /// A client of its API server.
    pub client: kube::Client,
    _cluster: crate::assembly::Cluster,
}

impl Cluster {
    /// Starts the API server, the kubelet simulator, every controller and
    /// the scheduler (not the DPDB controller).
    pub async fn start() -> anyhow::Result<Self> {
        let mut cluster = crate::assembly::Cluster::new(ksim_runtime::clock::Clock::real());
        cluster
            .start(crate::assembly::Components {
                disabled: vec![crate::commands::Component::Dpdb],
                ..crate::assembly::Components::default()
            })
            .await?;
        Ok(Cluster {
            client: cluster.client(),
            _cluster: cluster,
        })
    }

    /// Creates nodes `first..first + count` (`ksim scale node`'s shape)
    /// and waits until all `first + count` nodes are Ready.
    pub async fn add_ready_nodes(
        &self,
        first: usize,
        count: usize,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let values = scale::default_values();
        for index in first..first + count {
            let node: Node = serde_json::from_value(scale::node(index, &values))?;
            nodes.create(&PostParams::default(), &node).await?;
        }
        let want = first + count;
        wait_until(timeout, "the nodes to be Ready", || async {
            let listed = nodes.list(&ListParams::default()).await.ok()?;
            let ready = listed.items.iter().filter(|n| node_ready(n)).count();
            (ready == want).then_some(())
        })
        .await
    }
}

use ksim_core::status::is_node_ready as node_ready;

/// The CPU time this process used since `before`.
pub fn cpu_spent(pid: u32, before: Option<Duration>) -> Option<Duration> {
    Some(cpu_time(pid)?.saturating_sub(before?))
}

/// Polls `check` every 100 ms until it returns `Some`, or fails after `timeout`.
pub async fn wait_until<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
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
