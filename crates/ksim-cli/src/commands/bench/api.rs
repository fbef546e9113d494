//! `ksim bench api`: the API server's throughput figures. Pod creates per
//! second through the in-process client and over HTTP, time to the last byte
//! of a list of many pods (JSON and Table), the server's RSS holding them,
//! and watch fan-out (many watchers each seeing every create).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use serde::Deserialize;
use serde::de::IgnoredAny;
use tokio::task::JoinSet;

use super::measure::{
    cpu_detail, cpu_time, mebibytes, millis, per_second, percentile, thousands, vm_hwm_bytes,
    vm_rss_bytes,
};
use super::server::ServeChild;
use crate::commands::print_line;

/// The namespace every benchmarked pod lives in (it exists in a new cluster).
const NAMESPACE: &str = "default";
/// The Accept header `kubectl get` sends for a Table.
const ACCEPT_TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
/// The Accept header of a plain JSON list.
const ACCEPT_JSON: &str = "application/json";

/// Sizes of `ksim bench api`; the defaults are the targets' sizes.
#[derive(Debug, Clone, clap::Args)]
pub struct ApiBench {
    /// Pods created through the in-process client.
    #[arg(long, default_value_t = 20_000)]
    pub in_process_pods: usize,
    /// Concurrent tasks creating pods through the in-process client.
    #[arg(long, default_value_t = 4)]
    pub tasks: usize,
    /// Pods created over HTTP, then listed and held while RSS is read.
    #[arg(long, default_value_t = 100_000)]
    pub pods: usize,
    /// Concurrent HTTP clients creating pods (one connection each).
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
    /// How many times each list is timed (the median is printed).
    #[arg(long, default_value_t = 3)]
    pub list_runs: usize,
    /// Concurrent watchers of the pods.
    #[arg(long, default_value_t = 100)]
    pub watchers: usize,
    /// Pod creates every watcher must see.
    #[arg(long, default_value_t = 10_000)]
    pub watch_events: usize,
}

/// Runs every phase of the API benchmark and prints one line per figure.
pub fn bench_api(bench: &ApiBench) -> anyhow::Result<()> {
    if bench.tasks == 0 || bench.clients == 0 || bench.list_runs == 0 {
        bail!("--tasks, --clients and --list-runs must be at least 1");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split_whitespace().next().unwrap_or("unknown");
    print_line(format_args!(
        "machine: {cpus} CPUs, load average {load} (wall-clock figures share the machine; per CPU-second figures do not)"
    ))?;
    runtime.block_on(async {
        if bench.in_process_pods > 0 {
            creates_in_process(bench).await?;
        }
        over_http(bench).await
    })
}

/// A minimal pod of one container.
fn minimal_pod(name: String) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".to_owned(),
                image: Some("registry.k8s.io/pause:3.10".to_owned()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

/// What a batch of creates measured.
#[derive(Debug, Default)]
struct CreateRun {
    pods: usize,
    workers: usize,
    elapsed: Duration,
    /// Every create's latency, sorted.
    latencies: Vec<Duration>,
    /// The highest resourceVersion a create answered with.
    last_revision: u64,
}

/// Creates `total` pods named `<prefix>-<n>`, one worker per client, the
/// pods dealt round-robin between them.
async fn create_pods(
    clients: Vec<kube::Client>,
    total: usize,
    prefix: &str,
) -> anyhow::Result<CreateRun> {
    let workers = clients.len();
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for (worker, client) in clients.into_iter().enumerate() {
        let prefix = prefix.to_owned();
        tasks.spawn(async move {
            let api: Api<Pod> = Api::namespaced(client, NAMESPACE);
            let params = PostParams::default();
            let mut latencies = Vec::with_capacity(total / workers + 1);
            let mut last_revision = 0u64;
            for n in (worker..total).step_by(workers) {
                let pod = minimal_pod(format!("{prefix}-{n}"));
                let sent = Instant::now();
                let created = api
                    .create(&params, &pod)
                    .await
                    .with_context(|| format!("cannot create pod {prefix}-{n}"))?;
                latencies.push(sent.elapsed());
                let revision = created
                    .metadata
                    .resource_version
                    .and_then(|rv| rv.parse::<u64>().ok())
                    .unwrap_or(0);
                last_revision = last_revision.max(revision);
            }
            anyhow::Ok((latencies, last_revision))
        });
    }
    let mut run = CreateRun {
        pods: total,
        workers,
        latencies: Vec::with_capacity(total),
        ..CreateRun::default()
    };
    while let Some(joined) = tasks.join_next().await {
        let (latencies, last_revision) = joined.context("a create task failed")??;
        run.latencies.extend(latencies);
        run.last_revision = run.last_revision.max(last_revision);
    }
    run.elapsed = started.elapsed();
    run.latencies.sort_unstable();
    Ok(run)
}

/// `creates <how>: 23,456 pods/s (target >= 20,000); ...`
/// One line of create figures; `target` is the issue's, when it sets one
/// for this way of creating.
fn creates_line(how: &str, worker_kind: &str, run: &CreateRun, target: Option<f64>) -> String {
    let target = match target {
        Some(target) => format!("target >= {}", thousands(target)),
        None => "no target: the watchers of the fan-out see every create".to_string(),
    };
    format!(
        "creates {how}: {} pods/s ({target}); {} pods by {} {worker_kind} in {:.2} s, latency p50 {}, p99 {}",
        thousands(per_second(run.pods as u64, run.elapsed)),
        thousands(run.pods as f64),
        run.workers,
        run.elapsed.as_secs_f64(),
        millis(percentile(&run.latencies, 50)),
        millis(percentile(&run.latencies, 99)),
    )
}

async fn creates_in_process(bench: &ApiBench) -> anyhow::Result<()> {
    let server = ksim_apiserver::ApiServer::new();
    let client = ksim_runtime::client::in_process(&server);
    let clients = vec![client; bench.tasks];
    let own = std::process::id();
    let cpu_before = cpu_time(own);
    let run = create_pods(clients, bench.in_process_pods, "in-process").await?;
    let cpu = cpu_used(cpu_before, cpu_time(own));
    print_line(format_args!(
        "{}{}",
        creates_line("in-process", "tasks", &run, Some(20_000.0)),
        cpu_detail("process", cpu, run.pods as u64, "pods")
    ))
}

/// The CPU time used between two readings, when both were readable.
fn cpu_used(before: Option<Duration>, after: Option<Duration>) -> Option<Duration> {
    before
        .zip(after)
        .map(|(before, after)| after.saturating_sub(before))
}

/// A kube client over plain HTTP to `url`, with its own connection pool.
fn http_client(url: &str) -> anyhow::Result<kube::Client> {
    let uri: http::Uri = url.parse().with_context(|| format!("bad URL {url}"))?;
    let mut config = kube::Config::new(uri);
    config.default_namespace = NAMESPACE.to_owned();
    config.read_timeout = None;
    ksim_runtime::client::from_config(config).context("cannot build an HTTP client")
}

async fn over_http(bench: &ApiBench) -> anyhow::Result<()> {
    let server = ServeChild::start()?;
    let url = server.url();
    let clients = (0..bench.clients)
        .map(|_| http_client(&url))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let pid = server.pid();
    let cpu_before = cpu_time(pid);
    let run = create_pods(clients, bench.pods, "pod").await?;
    let cpu = cpu_used(cpu_before, cpu_time(pid));
    print_line(format_args!(
        "{}{}",
        creates_line("over HTTP", "clients", &run, Some(5_000.0)),
        cpu_detail("server", cpu, run.pods as u64, "pods")
    ))?;
    let rss_holding = vm_rss_bytes(server.pid());

    let client = http_client(&url)?;
    for (name, accept) in [("JSON", ACCEPT_JSON), ("Table", ACCEPT_TABLE)] {
        let mut runs = Vec::with_capacity(bench.list_runs);
        let mut size = 0;
        let mut cpu = Some(Duration::ZERO);
        for _ in 0..bench.list_runs {
            let cpu_before = cpu_time(pid);
            let list = list_pods(&client, accept).await?;
            cpu = cpu
                .zip(cpu_used(cpu_before, cpu_time(pid)))
                .map(|(sum, used)| sum + used);
            let items = count_items(&list.body, accept)?;
            if items != bench.pods {
                bail!(
                    "the {name} list held {items} items, not the {} pods created",
                    bench.pods
                );
            }
            size = list.body.len();
            runs.push(list.elapsed);
        }
        runs.sort_unstable();
        let runs_u32 = u32::try_from(bench.list_runs).unwrap_or(u32::MAX);
        print_line(format_args!(
            "{}{}",
            list_line(name, bench.pods, &runs, size),
            cpu_detail(
                "server",
                cpu.map(|sum| sum / runs_u32),
                bench.pods as u64,
                "rows"
            )
        ))?;
    }
    print_line(rss_line(
        bench.pods,
        rss_holding,
        vm_rss_bytes(server.pid()),
        vm_hwm_bytes(server.pid()),
    ))?;

    if bench.watchers > 0 && bench.watch_events > 0 {
        watch_fan_out(bench, &url, pid, run.last_revision).await?;
    }
    Ok(())
}

/// A list response read to its last byte.
struct ListResponse {
    elapsed: Duration,
    body: Vec<u8>,
}

/// `GET` the pods of the namespace with `accept`, timed to the last byte.
async fn list_pods(client: &kube::Client, accept: &str) -> anyhow::Result<ListResponse> {
    let request = http::Request::get(format!("/api/v1/namespaces/{NAMESPACE}/pods"))
        .header(http::header::ACCEPT, accept)
        .body(kube::client::Body::from(Vec::new()))
        .context("cannot build the list request")?;
    let started = Instant::now();
    let response = client.send(request).await.context("list failed")?;
    let status = response.status();
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.context("list body failed")?.into_data() {
            bytes.extend_from_slice(&data);
        }
    }
    let elapsed = started.elapsed();
    if !status.is_success() {
        bail!(
            "list answered {status}: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(500)])
        );
    }
    Ok(ListResponse {
        elapsed,
        body: bytes,
    })
}

/// How many items (a list) or rows (a Table) a list response holds.
fn count_items(body: &[u8], accept: &str) -> anyhow::Result<usize> {
    #[derive(Deserialize)]
    struct Items {
        #[serde(default)]
        items: Vec<IgnoredAny>,
        #[serde(default)]
        rows: Vec<IgnoredAny>,
    }
    let list: Items = serde_json::from_slice(body).context("the list is not JSON")?;
    Ok(if accept == ACCEPT_TABLE {
        list.rows.len()
    } else {
        list.items.len()
    })
}

/// `list 100,000 pods as JSON: 512.3 ms to the last byte (target < 1 s); ...`
fn list_line(name: &str, pods: usize, sorted_runs: &[Duration], size: usize) -> String {
    format!(
        "list {} pods as {name}: {} to the last byte (target < 1 s); median of {}, best {}, {}",
        thousands(pods as f64),
        millis(percentile(sorted_runs, 50)),
        sorted_runs.len(),
        millis(percentile(sorted_runs, 0)),
        mebibytes(size as u64),
    )
}

fn rss_line(pods: usize, holding: Option<u64>, after: Option<u64>, peak: Option<u64>) -> String {
    let show = |bytes: Option<u64>| bytes.map_or_else(|| "unavailable".to_owned(), mebibytes);
    format!(
        "RSS of ksim serve holding {} pods: {} (target < 1 GiB); after the lists {}, peak {}",
        thousands(pods as f64),
        show(holding),
        show(after),
        show(peak),
    )
}

/// What the watch fan-out measured.
struct FanOut {
    watchers: usize,
    events_each: usize,
    /// From the first create to the last watcher seeing its last event.
    elapsed: Duration,
    /// From the last create's answer to the last watcher seeing its last event.
    lag: Duration,
}

fn fan_out_line(fan_out: &FanOut) -> String {
    let total = (fan_out.watchers * fan_out.events_each) as u64;
    format!(
        "watch fan-out: {} events/s delivered in total (no target); {} watchers x {} events, the last watcher saw the last event {:.2} s after the first create, {} after the last",
        thousands(per_second(total, fan_out.elapsed)),
        thousands(fan_out.watchers as f64),
        thousands(fan_out.events_each as f64),
        fan_out.elapsed.as_secs_f64(),
        millis(fan_out.lag),
    )
}

/// Opens `watchers` watches of the namespace's pods from `revision`, creates
/// `watch_events` pods over HTTP, and waits until every watcher saw them all.
async fn watch_fan_out(
    bench: &ApiBench,
    url: &str,
    server_pid: u32,
    revision: u64,
) -> anyhow::Result<()> {
    let client = http_client(url)?;
    let path = format!("/api/v1/namespaces/{NAMESPACE}/pods?watch=true&resourceVersion={revision}");
    let mut opening = JoinSet::new();
    for _ in 0..bench.watchers {
        let client = client.clone();
        let path = path.clone();
        opening.spawn(async move {
            let request = http::Request::get(path)
                .body(kube::client::Body::from(Vec::new()))
                .context("cannot build the watch request")?;
            let response = client.send(request).await.context("watch failed")?;
            if !response.status().is_success() {
                bail!("watch answered {}", response.status());
            }
            anyhow::Ok(response.into_body())
        });
    }
    let mut bodies = Vec::with_capacity(bench.watchers);
    while let Some(opened) = opening.join_next().await {
        bodies.push(opened.context("a watch task failed")??);
    }

    let events = bench.watch_events;
    let mut watching = JoinSet::new();
    for mut body in bodies {
        watching.spawn(async move {
            let mut seen = 0usize;
            let mut tail = bytes::Bytes::new();
            while seen < events {
                let Some(frame) = body.frame().await else {
                    bail!(
                        "a watch ended after {seen} of {events} events: {}",
                        String::from_utf8_lossy(&tail)
                    );
                };
                if let Ok(data) = frame.context("watch body failed")?.into_data() {
                    seen += data.iter().filter(|b| **b == b'\n').count();
                    tail = data;
                }
            }
            anyhow::Ok(Instant::now())
        });
    }

    let clients = (0..bench.clients)
        .map(|_| http_client(url))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let pid = server_pid;
    let own = std::process::id();
    let cpu_before = cpu_time(pid);
    let own_before = cpu_time(own);
    let started = Instant::now();
    let run = create_pods(clients, events, "watched").await?;
    let created = Instant::now();
    let mut last_seen = created;
    while let Some(seen) = watching.join_next().await {
        last_seen = last_seen.max(seen.context("a watcher task failed")??);
    }
    let cpu = cpu_used(cpu_before, cpu_time(pid));
    print_line(creates_line(
        "over HTTP while watched",
        "clients",
        &run,
        None,
    ))?;
    let own_cpu = cpu_used(own_before, cpu_time(own));
    let delivered = (bench.watchers * events) as u64;
    print_line(format_args!(
        "{}{}{}",
        fan_out_line(&FanOut {
            watchers: bench.watchers,
            events_each: events,
            elapsed: last_seen - started,
            lag: last_seen - created,
        }),
        cpu_detail("server", cpu, delivered, "events"),
        cpu_detail("bench (watchers, creators)", own_cpu, delivered, "events"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_line_prints_rate_target_and_latencies() {
        let run = CreateRun {
            pods: 20_000,
            workers: 4,
            elapsed: Duration::from_millis(800),
            latencies: vec![Duration::from_micros(100), Duration::from_micros(2_500)],
            last_revision: 7,
        };
        assert_eq!(
            creates_line("in-process", "tasks", &run, Some(20_000.0)),
            "creates in-process: 25,000 pods/s (target >= 20,000); 20,000 pods by 4 tasks in 0.80 s, latency p50 0.1 ms, p99 2.5 ms"
        );
    }

    #[test]
    fn list_line_prints_the_median_and_best_run() {
        let runs = [300, 400, 900].map(Duration::from_millis);
        assert_eq!(
            list_line("Table", 100_000, &runs, 2 * 1024 * 1024),
            "list 100,000 pods as Table: 400.0 ms to the last byte (target < 1 s); median of 3, best 300.0 ms, 2.0 MiB"
        );
    }

    #[test]
    fn rss_line_says_when_proc_is_missing() {
        assert_eq!(
            rss_line(10, Some(512 * 1024 * 1024), None, None),
            "RSS of ksim serve holding 10 pods: 512.0 MiB (target < 1 GiB); after the lists unavailable, peak unavailable"
        );
    }

    #[test]
    fn fan_out_counts_every_watchers_events() {
        let line = fan_out_line(&FanOut {
            watchers: 100,
            events_each: 10_000,
            elapsed: Duration::from_secs(2),
            lag: Duration::from_millis(15),
        });
        assert_eq!(
            line,
            "watch fan-out: 500,000 events/s delivered in total (no target); 100 watchers x 10,000 events, the last watcher saw the last event 2.00 s after the first create, 15.0 ms after the last"
        );
    }

    #[test]
    fn list_items_and_table_rows_are_counted() {
        let list = br#"{"kind":"PodList","items":[{"a":1},{"b":[2]}]}"#;
        let table = br#"{"kind":"Table","columnDefinitions":[],"rows":[{"cells":[]}]}"#;
        assert_eq!(count_items(list, ACCEPT_JSON).expect("list"), 2);
        assert_eq!(count_items(table, ACCEPT_TABLE).expect("table"), 1);
        assert!(count_items(b"not json", ACCEPT_JSON).is_err());
    }

    #[test]
    fn minimal_pod_has_one_named_container() {
        let pod = minimal_pod("p-1".to_owned());
        assert_eq!(pod.metadata.name.as_deref(), Some("p-1"));
        let containers = pod.spec.map(|spec| spec.containers).unwrap_or_default();
        assert_eq!(containers.len(), 1);
        assert_eq!(containers[0].name, "app");
    }

    #[tokio::test]
    async fn creates_in_process_land_in_the_store_and_are_counted() {
        let server = ksim_apiserver::ApiServer::new();
        let client = ksim_runtime::client::in_process(&server);
        let run = create_pods(vec![client.clone(); 3], 10, "t")
            .await
            .expect("creates");
        assert_eq!(run.latencies.len(), 10);
        assert!(run.last_revision > 0);
        let pods: Api<Pod> = Api::namespaced(client, NAMESPACE);
        let list = pods.list(&Default::default()).await.expect("list");
        assert_eq!(list.items.len(), 10);
    }
}
