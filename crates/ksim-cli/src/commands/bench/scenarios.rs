//! `ksim bench scenarios`: wall time of `ksim run` over the example
//! scenarios (issue targets: the six-hour node failure under 3 s, the
//! 1,000-pod one under 5 s, each other under 2 s), and of `advance 1h` on an
//! idle cluster of 100 nodes with leases (target under 2 s). Each run is a
//! `ksim run` process of this binary, so figures include its start.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::measure::percentile;

/// Flags of `ksim bench scenarios`.
#[derive(Debug, Clone, clap::Args)]
pub struct ScenariosBench {
    /// Scenario files (default: every `*.yaml` under `examples/scenarios`).
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Runs of each file.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Nodes of the idle cluster advanced by an hour.
    #[arg(long, default_value_t = 100)]
    pub idle_nodes: usize,
}

/// The step of the idle scenario whose time is reported.
const IDLE_STEP: &str = "advance one hour, idle";

fn target(file: &Path) -> Duration {
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.contains("node-failure") {
        Duration::from_secs(3)
    } else if name.contains("kwok-getting-started") {
        Duration::from_secs(5)
    } else {
        Duration::from_secs(2)
    }
}

fn example_files() -> anyhow::Result<Vec<PathBuf>> {
    let dir = Path::new("examples/scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| {
            format!(
                "cannot read {} (run from the repository root, or name files)",
                dir.display()
            )
        })?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    Ok(files)
}

/// Runs `ksim run FILE --junit J -o json` once; its wall time.
fn run_once(exe: &Path, file: &Path, junit: &Path) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let output = Command::new(exe)
        .args(["run", "-o", "json", "--junit"])
        .arg(junit)
        .arg(file)
        .output()
        .with_context(|| format!("cannot run {}", exe.display()))?;
    let elapsed = started.elapsed();
    if !output.status.success() {
        bail!(
            "{} failed:\n{}{}",
            file.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(elapsed)
}

/// The `time` attribute of the JUnit testcase whose name holds `step`.
fn step_time(junit: &str, step: &str) -> Option<Duration> {
    let case = junit.split("<testcase").find(|case| {
        case.split('>')
            .next()
            .is_some_and(|head| head.contains(step))
    })?;
    let head = case.split('>').next()?;
    let time = head.split("time=\"").nth(1)?.split('"').next()?;
    time.parse::<f64>().ok().map(Duration::from_secs_f64)
}

/// Runs `ksim bench scenarios`.
pub fn bench_scenarios(bench: &ScenariosBench) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("cannot find the ksim binary")?;
    let files = if bench.files.is_empty() {
        example_files()?
    } else {
        bench.files.clone()
    };
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let junit = dir.path().join("report.xml");
    let runs = bench.runs.max(1);
    println!("ksim run, {runs} runs each (wall time of the whole process):");
    for file in &files {
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            times.push(run_once(&exe, file, &junit)?);
        }
        times.sort();
        let median = percentile(&times, 50);
        let goal = target(file);
        println!(
            "  {:<40} median {:>7.0} ms  min {:>7.0} ms  target < {} s  {}",
            file.file_name().and_then(|n| n.to_str()).unwrap_or("?"),
            median.as_secs_f64() * 1e3,
            times[0].as_secs_f64() * 1e3,
            goal.as_secs(),
            if median < goal { "met" } else { "MISSED" }
        );
    }
    let idle = dir.path().join("idle.yaml");
    std::fs::write(
        &idle,
        format!(
            "apiVersion: ksim.io/v1alpha1\nkind: Scenario\nmetadata: {{name: idle}}\nspec:\n  seed: 1\n  steps:\n  - ksim: scale node --replicas {n}\n  - waitFor: {{get: leases -n kube-node-lease, jq: '.items | length == {n}'}}\n  - name: {IDLE_STEP}\n    advance: 1h\n",
            n = bench.idle_nodes
        ),
    )
    .context("cannot write the idle scenario")?;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        run_once(&exe, &idle, &junit)?;
        let report = std::fs::read_to_string(&junit).context("cannot read the JUnit report")?;
        times.push(step_time(&report, IDLE_STEP).with_context(|| {
            format!("no `{IDLE_STEP}` testcase with a time in the JUnit report")
        })?);
    }
    times.sort();
    let median = percentile(&times, 50);
    println!(
        "advance 1h, idle cluster of {} nodes with leases: median {:.0} ms, min {:.0} ms (target < 2 s) {}",
        bench.idle_nodes,
        median.as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3,
        if median < Duration::from_secs(2) {
            "met"
        } else {
            "MISSED"
        }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_step_time_from_junit() {
        let junit = r#"<testsuite><testcase name="1: ksim scale node" time="0.012"/><testcase name="3: advance one hour, idle" time="1.250"></testcase></testsuite>"#;
        assert_eq!(
            step_time(junit, IDLE_STEP),
            Some(Duration::from_millis(1250))
        );
        assert_eq!(step_time(junit, "nothing"), None);
    }
}
