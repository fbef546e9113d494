//! The scenarios under `examples/scenarios/` are tests: each passes under
//! `ksim run`, and runs twice with its seed to the same report, byte for byte.

use std::path::{Path, PathBuf};

use ksim_testutils::KsimEnv;

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("examples/scenarios exists")
        .map(|entry| entry.expect("readable entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

fn example(prefix: &str) -> PathBuf {
    examples()
        .into_iter()
        .find(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .unwrap_or_else(|| panic!("no example {prefix}*"))
}

/// Runs `ksim run FILE -o json` in a private environment; panics with the
/// output unless it passes. Returns the report and the lines of the state
/// digest (pods and events at the end).
fn run_report(file: &Path) -> (String, String) {
    let env = KsimEnv::new(Path::new(env!("CARGO_BIN_EXE_ksim")));
    let path = file.to_str().expect("utf-8 path");
    let dump = env.root().join("state.txt");
    let output = env
        .ksim_command(&["run", path, "-o", "json"])
        .env("KSIM_STATE_DUMP", &dump)
        .output()
        .expect("cannot run ksim");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{} failed ({:?})\nstdout:\n{stdout}\nstderr:\n{}",
        file.display(),
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    let state = std::fs::read_to_string(&dump).unwrap_or_default();
    (stdout, state)
}

fn passes_and_repeats(prefix: &str) {
    let file = example(prefix);
    let (first, first_state) = run_report(&file);
    let (second, second_state) = run_report(&file);
    let only = |a: &str, b: &str| -> Vec<String> {
        let b: std::collections::HashSet<&str> = b.lines().collect();
        a.lines()
            .filter(|line| !b.contains(line))
            .map(str::to_string)
            .collect()
    };
    assert!(
        first == second,
        "two runs of {} with the same seed differ\nonly in the first run's state: {:#?}\nonly in the second's: {:#?}\nfirst report:\n{first}\nsecond report:\n{second}",
        file.display(),
        only(&first_state, &second_state),
        only(&second_state, &first_state),
    );
}

#[test]
fn every_example_is_covered_here() {
    let names: Vec<String> = examples()
        .iter()
        .filter_map(|p| p.file_name().and_then(|n| n.to_str()).map(str::to_string))
        .collect();
    assert_eq!(names.len(), 6, "one test below per example: {names:?}");
}

#[test]
fn example_1_drain_refused_by_a_budget_then_spread_by_number() {
    passes_and_repeats("01-");
}

#[test]
fn example_2_a_spread_leaves_a_pod_pending_with_the_scheduler_message() {
    passes_and_repeats("02-");
}

#[test]
fn example_3_the_descheduler_is_held_by_a_budget_then_rebalances() {
    passes_and_repeats("03-");
}

#[test]
fn example_4_kwok_getting_started_to_a_thousand_running_pods() {
    passes_and_repeats("04-");
}

#[test]
fn example_5_a_node_dies_and_its_pods_move_over_six_hours() {
    passes_and_repeats("05-");
}

#[test]
fn example_6_a_job_backs_off_completes_and_is_cleaned_up() {
    passes_and_repeats("06-");
}
