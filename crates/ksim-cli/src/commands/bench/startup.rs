//! `ksim bench startup`: how fast `ksim serve` answers `/readyz` after its
//! process starts, and how much memory an idle cluster holds (VmRSS).
//! Targets: under 100 ms and under 30 MiB.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::measure::{mebibytes, millis, percentile, vm_rss_bytes};
use super::server::free_port;
use crate::cluster::{self, KsimHome};
use crate::commands::print_line;

/// How long a benchmarked cluster idles before its RSS is read.
const IDLE: Duration = Duration::from_millis(300);

/// Starts `ksim serve` `runs` times (in a temporary `KSIM_HOME`) and prints
/// the median and p90 of the time to ready, and the median idle RSS.
pub fn bench_startup(runs: usize) -> anyhow::Result<()> {
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    let exe = std::env::current_exe().context("cannot find the ksim executable")?;
    let root = std::env::temp_dir().join(format!("ksim-bench-{}", std::process::id()));
    let home = KsimHome::at(&root);
    let mut ready_times = Vec::with_capacity(runs);
    let mut rss_bytes = Vec::with_capacity(runs);
    let result = (|| -> anyhow::Result<()> {
        for run in 0..runs {
            let port = free_port()?;
            let started = Instant::now();
            let mut child = Command::new(&exe)
                .args(["serve", "--name", "bench", "--port", &port.to_string()])
                .args(["--disable", "kubelet,controllers,scheduler"])
                .env("KSIM_HOME", &root)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("cannot start ksim serve")?;
            let deadline = started + Duration::from_secs(10);
            while !cluster::probe_readyz(port) {
                if child.try_wait()?.is_some() || Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    bail!("run {run}: ksim serve did not become ready");
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            ready_times.push(started.elapsed());
            std::thread::sleep(IDLE);
            if let Some(rss) = vm_rss_bytes(child.id()) {
                rss_bytes.push(rss);
            }
            let pid = i32::try_from(child.id()).context("pid out of range")?;
            cluster::stop(pid, Duration::from_secs(5))?;
            let _ = child.wait();
        }
        Ok(())
    })();
    let _ = home.cluster("bench").remove();
    let _ = std::fs::remove_dir_all(&root);
    result?;

    ready_times.sort();
    rss_bytes.sort_unstable();
    print_line(format_args!(
        "startup of the API server to /readyz over {runs} runs: median {}, p90 {} (target < 100 ms)",
        millis(percentile(&ready_times, 50)),
        millis(percentile(&ready_times, 90)),
    ))?;
    match rss_bytes.get(rss_bytes.len() / 2) {
        Some(rss) => print_line(format_args!(
            "idle RSS of the API server: median {} (target < 30 MiB)",
            mebibytes(*rss)
        )),
        None => print_line("idle RSS of ksim serve: unavailable (no /proc)"),
    }
}
