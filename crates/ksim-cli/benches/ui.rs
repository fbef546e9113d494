//! The web view at scale, in headless Chromium: a cluster (`ksim create
//! cluster`, API server alone) holding 5,000 nodes and 50,000 pods bound to
//! them; the time from navigation to the first complete render and the
//! page's JavaScript heap; then 1,000 pod changes per second for 30 s, once
//! without the page and once with it open: whether the page keeps up (a
//! probe pod created every second, the time until the page shows it) and
//! the cluster's CPU cost of serving the page (the difference).
//!
//! `cargo bench -p ksim --bench ui` (release build; env UI_BENCH_NODES,
//! UI_BENCH_PODS, UI_BENCH_RATE, UI_BENCH_SECONDS scale it down).

use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{Node, Pod};
use ksim_testutils::TestCluster;
use ksim_testutils::webdriver::Browser;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU time (user + system) of a process so far.
fn cpu_of(pid: i32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 (11 and 12 after the name).
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

fn node(i: usize) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": format!("node-{i:06}"), "labels": {
            "kubernetes.io/hostname": format!("node-{i:06}"),
            "topology.kubernetes.io/zone": format!("zone-{}", i % 10),
            "number": format!("{}", i % 50),
        }},
        "status": {
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }))
    .expect("a node")
}

fn pod(i: usize, nodes: usize) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("pod-{i:06}"), "namespace": "default",
            "labels": {"app": format!("app-{}", i % 20)}},
        "spec": {"nodeName": format!("node-{:06}", i % nodes), "containers": [{
            "name": "c", "image": "busybox",
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
        }]},
    }))
    .expect("a pod")
}

/// `rate` label patches per second on random existing pods for `seconds`.
/// `phase` keeps the values new, so that no patch is a no-op.
async fn churn(client: kube::Client, pods: usize, rate: usize, seconds: u64, phase: u32) -> usize {
    let api: Api<Pod> = Api::namespaced(client, "default");
    let started = Instant::now();
    let mut sent = 0usize;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    while started.elapsed() < Duration::from_secs(seconds) {
        tick.tick().await;
        let batch = rate / 10;
        let base = sent;
        stream::iter(0..batch)
            .for_each_concurrent(32, |j| {
                let api = api.clone();
                async move {
                    let i = (base + j) * 7919 % pods;
                    let patch =
                        json!({"metadata": {"labels": {"tick": format!("{phase}-{}", base + j)}}});
                    let _ = api
                        .patch(
                            &format!("pod-{i:06}"),
                            &PatchParams::default(),
                            &Patch::Merge(&patch),
                        )
                        .await;
                }
            })
            .await;
        sent += batch;
    }
    sent
}

fn main() {
    let nodes = env_or("UI_BENCH_NODES", 5_000);
    let pods = env_or("UI_BENCH_PODS", 50_000);
    let rate = env_or("UI_BENCH_RATE", 1_000);
    let seconds = env_or("UI_BENCH_SECONDS", 30) as u64;
    let ksim = std::path::Path::new(env!("CARGO_BIN_EXE_ksim"));
    let cluster = TestCluster::start_api_only(ksim);
    let pid = cluster
        .env()
        .pid(cluster.name())
        .expect("the cluster's pid");
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let client = runtime.block_on(async {
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(cluster.kubeconfig()).expect("the kubeconfig"),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .expect("a client config");
        ksim_runtime::client::from_config(config).expect("a client")
    });
    let started = Instant::now();
    runtime.block_on(async {
        let node_api: Api<Node> = Api::all(client.clone());
        stream::iter(0..nodes)
            .for_each_concurrent(32, |i| {
                let api = node_api.clone();
                async move {
                    api.create(&PostParams::default(), &node(i))
                        .await
                        .expect("node created");
                }
            })
            .await;
        let pod_api: Api<Pod> = Api::namespaced(client.clone(), "default");
        stream::iter(0..pods)
            .for_each_concurrent(32, |i| {
                let api = pod_api.clone();
                async move {
                    api.create(&PostParams::default(), &pod(i, nodes))
                        .await
                        .expect("pod created");
                }
            })
            .await;
    });
    println!(
        "setup: {nodes} nodes and {pods} pods created in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // First complete render.
    let url = format!("{}/ui/", cluster.server());
    let browser = Browser::start(1600, 1000);
    let cpu_before = cpu_of(pid);
    browser.goto(&url);
    if std::env::var_os("UI_BENCH_DEBUG").is_some() {
        std::thread::sleep(Duration::from_secs(5));
        let state = browser.execute(
            "return [document.body.dataset.ready, window.ksimUi && window.ksimUi.pods.size, window.ksimUi && window.ksimUi.nodes.size, document.getElementById('status').textContent, document.querySelectorAll('#placement [data-pod]').length];",
            &[],
        );
        println!("debug: {state}");
    }
    browser.wait_for(
        "the first complete render",
        Duration::from_secs(300),
        &format!(
            "document.body.dataset.ready === 'true' && document.querySelectorAll('#placement [data-pod]').length === {pods} && window.ksimUi.firstCompleteRender > 0"
        ),
    );
    let render_ms = browser.execute("return window.ksimUi.firstCompleteRender;", &[]);
    let render_js_ms = browser.execute("return window.ksimUi.firstCompleteRenderJs;", &[]);
    println!(
        "timing marks (what, at ms, took ms): {}",
        browser.execute("return window.ksimUi.timings.map(t => `${t.what}${t.items !== undefined ? ' (' + t.items + ')' : ''} @${t.at} ${t.ms}`).join('; ');", &[])
    );
    let heap = browser.execute("return performance.memory.usedJSHeapSize;", &[]);
    let dom = browser.execute("return document.getElementsByTagName('*').length;", &[]);
    let load_cpu = cpu_of(pid) - cpu_before;
    println!(
        "first complete render: {:.0} ms from navigation to painted (target < 2000 ms), its script done at {:.0} ms; JS heap {:.0} MiB; {} DOM elements; cluster CPU serving the first load {:.2} s",
        render_ms.as_f64().unwrap_or(f64::NAN),
        render_js_ms.as_f64().unwrap_or(f64::NAN),
        heap.as_f64().unwrap_or(f64::NAN) / 1048576.0,
        dom,
        load_cpu.as_secs_f64()
    );
    // Regrouping by another key.
    let regroup = browser.execute(
        "const t = performance.now(); const s = document.getElementById('topology-key'); s.value = 'number'; s.dispatchEvent(new Event('change')); return t;",
        &[],
    );
    browser.wait_for(
        "regrouped",
        Duration::from_secs(60),
        "document.querySelectorAll('#placement [data-domain]').length === 50",
    );
    let after = browser.execute("return performance.now();", &[]);
    println!(
        "regroup by another key: {:.0} ms",
        after.as_f64().unwrap_or(0.0) - regroup.as_f64().unwrap_or(0.0)
    );
    drop(browser);

    // Churn without the page: the baseline CPU of the cluster.
    let cpu_before = cpu_of(pid);
    let sent = runtime.block_on(churn(client.clone(), pods, rate, seconds, 1));
    let baseline = cpu_of(pid) - cpu_before;
    println!(
        "churn without the page: {sent} pod changes in {seconds} s, cluster CPU {:.2} s",
        baseline.as_secs_f64()
    );

    // Churn with the page open, a probe pod created every second.
    let browser = Browser::start(1600, 1000);
    browser.goto(&url);
    browser.wait_for(
        "the page loaded again",
        Duration::from_secs(300),
        "document.body.dataset.ready === 'true'",
    );
    // The renders under churn only, not the load's.
    browser.execute("window.ksimUi.timings.length = 0;", &[]);
    let cpu_before = cpu_of(pid);
    let churner = runtime.spawn(churn(client.clone(), pods, rate, seconds, 2));
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut latencies = Vec::new();
    let probe_started = Instant::now();
    let mut k = 0;
    while probe_started.elapsed() < Duration::from_secs(seconds) {
        let second = Instant::now();
        let mut probe = pod(0, nodes);
        probe.metadata.name = Some(format!("probe-{k}"));
        runtime
            .block_on(pod_api.create(&PostParams::default(), &probe))
            .expect("probe created");
        let sent = Instant::now();
        browser.wait_for(
            "the probe pod",
            Duration::from_secs(60),
            &format!("document.querySelector('[data-pod=\"default/probe-{k}\"]') !== null"),
        );
        latencies.push(sent.elapsed());
        k += 1;
        if let Some(rest) = Duration::from_secs(1).checked_sub(second.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    let sent = runtime.block_on(churner).expect("the churn finished");
    let with_page = cpu_of(pid) - cpu_before;
    let heap = browser.execute("return performance.memory.usedJSHeapSize;", &[]);
    let renders = browser.execute(
        "const r = window.ksimUi.timings.filter(t => t.what.startsWith('render')).map(t => t.ms); return [window.ksimUi.renders, window.ksimUi.lastRender, Math.max(...r), document.getElementById('status').textContent];",
        &[],
    );
    latencies.sort();
    let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
    println!(
        "churn with the page: {sent} pod changes in {seconds} s; probe pod visible after p50 {:.0} ms, p90 {:.0} ms, max {:.0} ms (target within 1000 ms); JS heap {:.0} MiB; renders, last render ms, slowest render under churn ms, status: {renders}",
        ms(&latencies[latencies.len() / 2]),
        ms(&latencies[latencies.len() * 9 / 10]),
        ms(latencies.last().expect("probes")),
        heap.as_f64().unwrap_or(f64::NAN) / 1048576.0,
    );
    println!(
        "cluster CPU of serving the page under churn: {:.2} s over {seconds} s ({:.0}% of a core; {:.2} s with the page against {:.2} s without)",
        (with_page.as_secs_f64() - baseline.as_secs_f64()),
        (with_page.as_secs_f64() - baseline.as_secs_f64()) / seconds as f64 * 100.0,
        with_page.as_secs_f64(),
        baseline.as_secs_f64()
    );
}
