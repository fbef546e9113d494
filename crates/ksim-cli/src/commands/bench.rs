//! `ksim bench startup`: how fast `ksim serve` answers `/readyz` after its
//! process starts, and how much memory an idle cluster holds (VmRSS).
//! Targets: under 100 ms and under 30 MiB.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::print_line;
use crate::cluster::{self, KsimHome};

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
    let mut rss_kib = Vec::with_capacity(runs);
    let result = (|| -> anyhow::Result<()> {
        for run in 0..runs {
            let port = free_port()?;
            let started = Instant::now();
            let mut child = Command::new(&exe)
                .args(["serve", "--name", "bench", "--port", &port.to_string()])
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
            let pid = i32::try_from(child.id()).context("pid out of range")?;
            if let Some(rss) = vm_rss_kib(pid) {
                rss_kib.push(rss);
            }
            cluster::stop(pid, Duration::from_secs(5))?;
            let _ = child.wait();
        }
        Ok(())
    })();
    let _ = home.cluster("bench").remove();
    let _ = std::fs::remove_dir_all(&root);
    result?;

    ready_times.sort();
    rss_kib.sort_unstable();
    print_line(format_args!(
        "startup to /readyz over {runs} runs: median {:.1} ms, p90 {:.1} ms (target < 100 ms)",
        millis(percentile(&ready_times, 50)),
        millis(percentile(&ready_times, 90)),
    ))?;
    match rss_kib.get(rss_kib.len() / 2) {
        Some(rss) => print_line(format_args!(
            "idle RSS of ksim serve: median {:.1} MiB (target < 30 MiB)",
            *rss as f64 / 1024.0
        )),
        None => print_line("idle RSS of ksim serve: unavailable (no /proc)"),
    }
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The `p`th percentile (nearest rank) of sorted `values`.
fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p * sorted.len()).div_ceil(100).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("cannot find a free port")?;
    Ok(listener.local_addr()?.port())
}

/// VmRSS of process `pid` in KiB, from `/proc/<pid>/status`.
fn vm_rss_kib(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_rss_kib(&status)
}

fn parse_vm_rss_kib(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_uses_nearest_rank() {
        let values: Vec<_> = (1..=20).map(Duration::from_millis).collect();
        assert_eq!(percentile(&values, 50), Duration::from_millis(10));
        assert_eq!(percentile(&values, 90), Duration::from_millis(18));
        assert_eq!(percentile(&values[..1], 90), Duration::from_millis(1));
        assert_eq!(percentile(&[], 50), Duration::ZERO);
    }

    #[test]
    fn vm_rss_is_parsed_from_proc_status() {
        let status = "Name:\tksim\nVmPeak:\t  9 kB\nVmRSS:\t   12345 kB\nThreads:\t3\n";
        assert_eq!(parse_vm_rss_kib(status), Some(12345));
        assert_eq!(parse_vm_rss_kib("Name:\tksim\n"), None);
    }
}
