//! Keeps direct wall-clock reads, tokio timers and unseeded randomness out of
//! the cluster's code (kube's watcher back-off included): they would break
//! virtual time and repeatable runs.
//! Time comes from the cluster's `Clock` (this crate); randomness from
//! `clock.random()`. A genuine wall-time need (a timeout talking to another
//! process, a progress display) says so on the same line with a
//! `// wall-clock: <reason>` comment. Test modules, the test harness and the
//! benchmarks may read the wall clock.

use std::path::{Path, PathBuf};

/// What reads the wall clock, sleeps on tokio's clock, or draws unseeded
/// random numbers.
const FORBIDDEN: &[&str] = &[
    "Utc::now()",
    "Local::now()",
    "Timestamp::now()",
    "SystemTime::now()",
    "Instant::now()",
    "time::sleep(",
    "time::sleep_until(",
    "time::interval(",
    "time::interval_at(",
    "time::timeout(",
    "thread_rng()",
    "rand::rng()",
    "Uuid::new_v4()",
    // kube's watcher back-off sleeps on tokio's clock; back off with
    // `ksim_runtime::informer::backoff_on` instead.
    ".default_backoff()",
    "WatchStreamExt::backoff(",
];

/// Where the wall clock belongs.
const ALLOWED_PATHS: &[&str] = &[
    // The clock itself.
    "crates/ksim-clock/src/",
    // The test harness drives real processes in real time.
    "crates/ksim-testutils/",
    // Benchmarks time things.
    "crates/ksim-cli/src/commands/bench/",
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/ksim-clock sits two levels below the workspace root")
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether a file holds only tests (by its name).
fn is_test_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name == "tests.rs" || name.ends_with("_tests.rs") || name == "testing.rs"
}

/// The lines of `source` that read the wall clock, outside test modules
/// (a `#[cfg(test)]` ends the scan: test modules close the file).
fn violations(source: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut marked_above = false;
    for (number, line) in source.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            break;
        }
        // A marker on the line, or alone on the line above.
        let marked = std::mem::replace(&mut marked_above, false);
        if trimmed.starts_with("//") {
            marked_above = trimmed.starts_with("// wall-clock:");
            continue;
        }
        if marked || line.contains("// wall-clock:") {
            continue;
        }
        let imports_timer = trimmed.starts_with("use tokio::time::")
            && ["sleep", "interval", "timeout", "Instant"]
                .iter()
                .any(|name| trimmed.contains(name));
        if imports_timer || FORBIDDEN.iter().any(|pattern| line.contains(pattern)) {
            found.push((number + 1, line.trim().to_string()));
        }
    }
    found
}

#[test]
fn the_cluster_reads_time_only_through_its_clock() {
    let root = workspace_root();
    let mut files = Vec::new();
    rust_files(&root.join("crates"), &mut files);
    files.sort();
    let mut report = Vec::new();
    for file in files {
        let relative = file
            .strip_prefix(&root)
            .expect("under the root")
            .to_string_lossy()
            .replace('\\', "/");
        let in_src = relative.split('/').nth(2) == Some("src");
        if !in_src
            || is_test_file(&file)
            || ALLOWED_PATHS
                .iter()
                .any(|allowed| relative.starts_with(allowed))
        {
            continue;
        }
        let source = std::fs::read_to_string(&file).expect("readable source");
        for (line, text) in violations(&source) {
            report.push(format!("{relative}:{line}: {text}"));
        }
    }
    assert!(
        report.is_empty(),
        "{} direct wall-clock reads (use the cluster's Clock, or mark a genuine \
         wall-time need with `// wall-clock: <reason>`):\n{}",
        report.len(),
        report.join("\n")
    );
}

#[test]
fn the_scan_sees_what_it_must_and_skips_what_it_may() {
    let source = "fn a() { let t = Utc::now(); }\n\
                  fn b() { tokio::time::sleep(d); } // wall-clock: a remote timeout\n\
                  use tokio::time::{Instant, sleep};\n\
                  // Utc::now() in a comment\n\
                  // wall-clock: waits for a process\n\
                  let deadline = Instant::now();\n\
                  #[cfg(test)]\n\
                  mod tests { fn c() { Utc::now(); } }\n";
    let found = violations(source);
    assert_eq!(
        found.iter().map(|(line, _)| *line).collect::<Vec<_>>(),
        vec![1, 3]
    );
}
