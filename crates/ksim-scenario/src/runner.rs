//! Running a scenario's steps against a cluster ([`Target`]): commands as
//! child processes (the real kubectl, the ksim binary) with the cluster's
//! kubeconfig, `apply`/`delete`/`get` in process through a kube client,
//! waiting timer by timer on a virtual clock (polling on a real one), and a
//! [`Report`] of every step. A failed action stops the run (the rest is
//! skipped); a failed `assert` is recorded and the run goes on.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use chrono::{DateTime, Utc};
use ksim_runtime::Clock;

use crate::clock::ClusterClock;
use serde_json::Value;

use crate::checks::{Check, Verdict};
use crate::duration::format_duration;
use crate::get::{GetArgs, Resolver, describe_error};
use crate::model::{Action, Expect, Manifest, Scenario, Step};
use crate::report::{Outcome, Report, StepReport};

/// The field manager of `apply:` steps.
pub const FIELD_MANAGER: &str = "ksim-run";
/// How long a `kubectl:` or `ksim:` step may run, in real time.
const COMMAND_LIMIT: Duration = Duration::from_secs(300);
/// Why `advance` fails on a real clock.
const NOT_VIRTUAL: &str = "the cluster's clock is real; only a virtual clock can be advanced";
/// How often `waitFor` checks on a real clock.
const POLL: Duration = Duration::from_millis(100);

/// The cluster a scenario runs against.
#[derive(Clone)]
pub struct Target {
    /// A client of the cluster (in process or through the kubeconfig).
    pub client: kube::Client,
    /// The kubeconfig child processes use (`KUBECONFIG`).
    pub kubeconfig: PathBuf,
    /// More environment for child processes (`HOME`, `KSIM_HOME`).
    pub env: Vec<(String, String)>,
    /// The ksim binary `ksim:` steps run.
    pub ksim: PathBuf,
    /// The kubectl `kubectl:` steps run.
    pub kubectl: PathBuf,
    /// The cluster's clock (real, or virtual: `advance` and `waitFor`
    /// move it, in process or through a ksim cluster's API).
    pub clock: ClusterClock,
}

/// How a step ended: passed with what was seen, or failed.
type StepResult = Result<Option<String>, Verdict>;

fn failed(expected: impl Into<String>, seen: impl Into<String>) -> Verdict {
    Verdict {
        holds: false,
        expected: expected.into(),
        seen: seen.into(),
    }
}

/// Runs every step of `scenario` against `target`.
pub async fn run(scenario: &Scenario, target: &Target) -> Report {
    let resolver = Resolver::new(target.client.clone());
    let clock = &target.clock;
    // Wall-clock timings (JUnit's time attributes only).
    let wall = Clock::real();
    let wall_start = wall.now();
    // A cluster whose clock cannot be read counts from where it was last seen.
    let start = clock.now().await.unwrap_or(wall_start);
    let mut last = start;
    let mut steps = Vec::with_capacity(scenario.steps.len());
    let mut stopped = false;
    let real = !clock.is_virtual();
    for step in &scenario.steps {
        let description = step.describe();
        last = clock.now().await.unwrap_or(last);
        if stopped {
            steps.push(StepReport {
                number: step.number,
                description,
                at: offset(start, last, real),
                outcome: Outcome::Skipped,
                expected: None,
                seen: None,
                wall_seconds: 0.0,
            });
            continue;
        }
        let began = wall.now();
        tracing::debug!(step = step.number, %description, "step");
        let result = run_step(step, target, &resolver).await;
        let wall_seconds = seconds_since(&wall, began);
        last = clock.now().await.unwrap_or(last);
        let report = match result {
            Ok(seen) => StepReport {
                number: step.number,
                description,
                at: offset(start, last, real),
                outcome: Outcome::Passed,
                expected: None,
                seen,
                wall_seconds,
            },
            Err(verdict) => {
                if !matches!(step.action, Action::Assert(_)) {
                    stopped = true;
                }
                StepReport {
                    number: step.number,
                    description,
                    at: offset(start, last, real),
                    outcome: Outcome::Failed,
                    expected: Some(verdict.expected),
                    seen: Some(verdict.seen),
                    wall_seconds,
                }
            }
        };
        steps.push(report);
    }
    let state = match scenario.seed {
        Some(_) if !real => Some(state_digest(&target.client).await),
        _ => None,
    };
    Report {
        name: scenario.name.clone(),
        file: scenario.file.display().to_string(),
        clock: if real { "real" } else { "virtual" }.to_string(),
        seed: scenario.seed,
        passed: steps.iter().all(|s| s.outcome != Outcome::Failed),
        steps,
        state,
        wall_seconds: seconds_since(&wall, wall_start),
    }
}

/// A digest of what a seeded run must repeat: pods (name, uid, node, IP,
/// phase) and events (name, reason, message, count), in name order, with
/// how many of each were seen.
async fn state_digest(client: &kube::Client) -> String {
    use k8s_openapi::api::core::v1::{Event, Pod};
    use std::hash::{Hash, Hasher};
    let params = kube::api::ListParams::default();
    let pods = kube::Api::<Pod>::all(client.clone()).list(&params).await;
    let events = kube::Api::<Event>::all(client.clone()).list(&params).await;
    let (Ok(pods), Ok(events)) = (pods, events) else {
        return "unavailable (the cluster could not be listed)".to_string();
    };
    let mut lines: Vec<String> = pods
        .items
        .iter()
        .map(|pod| {
            let status = pod.status.as_ref();
            format!(
                "pod {}/{} {} {} {} {}",
                pod.metadata.namespace.as_deref().unwrap_or_default(),
                pod.metadata.name.as_deref().unwrap_or_default(),
                pod.metadata.uid.as_deref().unwrap_or_default(),
                pod.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .unwrap_or_default(),
                status.and_then(|s| s.pod_ip.as_deref()).unwrap_or_default(),
                status.and_then(|s| s.phase.as_deref()).unwrap_or_default(),
            )
        })
        .collect();
    lines.extend(events.items.iter().map(|event| {
        format!(
            "event {}/{} {} {} {}",
            event.metadata.namespace.as_deref().unwrap_or_default(),
            event.metadata.name.as_deref().unwrap_or_default(),
            event.reason.as_deref().unwrap_or_default(),
            event.message.as_deref().unwrap_or_default(),
            event.count.unwrap_or_default(),
        )
    }));
    lines.sort();
    // To see what two runs disagree on: the lines the digest is made of.
    if let Some(path) = std::env::var_os("KSIM_STATE_DUMP") {
        let _ = std::fs::write(path, lines.join("\n"));
    }
    // SipHash with fixed keys: the same within a build.
    let mut hasher = std::hash::DefaultHasher::new();
    lines.hash(&mut hasher);
    format!(
        "{} pods, {} events, digest {:016x}",
        pods.items.len(),
        events.items.len(),
        hasher.finish()
    )
}

fn seconds_since(wall: &Clock, began: DateTime<Utc>) -> f64 {
    (wall.now() - began)
        .to_std()
        .unwrap_or_default()
        .as_secs_f64()
}

/// Cluster time since the start, as Go prints durations; on a real clock
/// rounded to a tenth of a second (finer digits are noise).
fn offset(start: DateTime<Utc>, now: DateTime<Utc>, real: bool) -> String {
    let elapsed = (now - start).to_std().unwrap_or_default();
    if real {
        let tenths = (elapsed.as_millis() + 50) / 100;
        return format_duration(Duration::from_millis(tenths as u64 * 100));
    }
    format_duration(elapsed)
}

async fn run_step(step: &Step, target: &Target, resolver: &Resolver) -> StepResult {
    let clock = &target.clock;
    let result = match &step.action {
        Action::Kubectl { args, expect } => {
            run_command(target, &target.kubectl, "kubectl", args, expect).await
        }
        Action::Ksim { args, expect } => {
            run_command(target, &target.ksim, "ksim", args, expect).await
        }
        Action::Apply(manifest) => apply(resolver, manifest).await,
        Action::Delete {
            target: what,
            ignore_not_found,
        } => delete(resolver, what, *ignore_not_found).await,
        Action::WaitFor { check, timeout } => {
            return wait_for(check, *timeout, clock, resolver).await;
        }
        Action::Advance { by, always } => {
            let expected = format!("to advance the clock by {}", format_duration(*by));
            if !clock.is_virtual() {
                return Err(failed(expected, NOT_VIRTUAL));
            }
            return match always {
                None => match clock.advance(*by).await {
                    Ok(_) => Ok(None),
                    Err(error) => Err(failed(expected, error)),
                },
                Some(check) => advance_while(*by, check, clock, resolver).await,
            };
        }
        Action::Assert(check) => {
            if let Err(error) = clock.settle().await {
                return Err(failed("the cluster to settle", error));
            }
            let verdict = check.evaluate(resolver).await;
            return if verdict.holds {
                Ok(Some(verdict.seen))
            } else {
                Err(verdict)
            };
        }
    };
    // What a command or a change set off runs to rest before the next step.
    if let Err(error) = clock.settle().await {
        return Err(failed("the cluster to settle", error));
    }
    result
}

async fn run_command(
    target: &Target,
    program: &std::path::Path,
    name: &str,
    args: &[String],
    expect: &Expect,
) -> StepResult {
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .env("KUBECONFIG", &target.kubeconfig)
        .envs(target.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let expected = describe_expect(expect);
    let child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            return Err(failed(
                expected,
                format!("cannot run {name} ({}): {error}", program.display()),
            ));
        }
    };
    // wall-clock: a child process runs in real time
    let output = match tokio::time::timeout(COMMAND_LIMIT, child.wait_with_output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(error)) => return Err(failed(expected, format!("{name} failed to run: {error}"))),
        Err(_) => {
            return Err(failed(
                expected,
                format!(
                    "{name} still running after {} (killed)",
                    format_duration(COMMAND_LIMIT)
                ),
            ));
        }
    };
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    let code = output.status.code().unwrap_or(-1);
    let holds = code == expect.exit_code
        && expect
            .output_contains
            .iter()
            .all(|want| text.contains(want.as_str()))
        && expect
            .output_not_contains
            .iter()
            .all(|not| !text.contains(not.as_str()));
    if holds {
        Ok(None)
    } else {
        Err(failed(
            expected,
            format!("exit code {code}; output: {}", tail(&text, 8)),
        ))
    }
}

fn describe_expect(expect: &Expect) -> String {
    let mut parts = vec![format!("exit code {}", expect.exit_code)];
    for want in &expect.output_contains {
        parts.push(format!("output containing {want:?}"));
    }
    for not in &expect.output_not_contains {
        parts.push(format!("output not containing {not:?}"));
    }
    parts.join(", ")
}

/// The last `lines` lines of `text`, on one line.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if all.is_empty() {
        return "(none)".to_string();
    }
    let start = all.len().saturating_sub(lines);
    let mut shown = all[start..].join(" | ");
    if start > 0 {
        shown.insert_str(0, "... | ");
    }
    shown
}

async fn apply(resolver: &Resolver, manifest: &Manifest) -> StepResult {
    let expected = format!("the objects of {} applied", manifest.origin);
    let mut applied = Vec::new();
    for object in &manifest.objects {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let api = resolver
            .resolve_kind(api_version, kind)
            .await
            .map_err(|error| failed(expected.clone(), error))?;
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or(resolver.default_namespace())
            .to_string();
        let path = format!(
            "{}?fieldManager={FIELD_MANAGER}&force=true",
            api.path(Some(&namespace), Some(name))
        );
        resolver
            .send(
                http::Method::PATCH,
                &path,
                "application/apply-patch+yaml",
                Some(object),
            )
            .await
            .map_err(|error| {
                failed(
                    expected.clone(),
                    format!(
                        "{}/{name}: {}",
                        kind.to_ascii_lowercase(),
                        describe_error(&error)
                    ),
                )
            })?;
        applied.push(format!("{}/{name}", kind.to_ascii_lowercase()));
    }
    Ok(Some(format!("{} applied", applied.join(", "))))
}

async fn delete(resolver: &Resolver, what: &GetArgs, ignore_not_found: bool) -> StepResult {
    let expected = format!("to delete {}", what.source);
    let fail = |seen: String| failed(expected.clone(), seen);
    let found = resolver.get(what).await;
    let objects: Vec<Value> = match found {
        Ok(Value::Object(map)) if map.get("kind").and_then(Value::as_str) == Some("List") => map
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        Ok(object) => vec![object],
        Err(error) if ignore_not_found && error.contains("(NotFound)") => return Ok(None),
        Err(error) => return Err(fail(error)),
    };
    let mut deleted = Vec::new();
    for object in objects {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let namespace = object["metadata"]["namespace"].as_str();
        let api = resolver
            .resolve_kind(api_version, kind)
            .await
            .map_err(fail)?;
        match resolver
            .send(
                http::Method::DELETE,
                &api.path(namespace, Some(name)),
                "application/json",
                None,
            )
            .await
        {
            Ok(_) => deleted.push(format!("{}/{name}", kind.to_ascii_lowercase())),
            Err(kube::Error::Api(status)) if status.code == 404 && ignore_not_found => {}
            Err(error) => return Err(fail(describe_error(&error))),
        }
    }
    Ok(Some(if deleted.is_empty() {
        "nothing to delete".to_string()
    } else {
        format!("{} deleted", deleted.join(", "))
    }))
}

async fn wait_for(
    check: &Check,
    timeout: Duration,
    clock: &ClusterClock,
    resolver: &Resolver,
) -> StepResult {
    let now = clock
        .now()
        .await
        .map_err(|error| failed("to read the cluster's clock", error))?;
    let deadline = now + chrono::Duration::from_std(timeout).unwrap_or(chrono::TimeDelta::MAX);
    let within = |verdict: Verdict, why: String| Verdict {
        holds: false,
        expected: format!("{} within {}", verdict.expected, format_duration(timeout)),
        seen: format!("{} ({why})", verdict.seen),
    };
    loop {
        if let Err(error) = clock.settle().await {
            return Err(failed("the cluster to settle", error));
        }
        let verdict = check.evaluate(resolver).await;
        if verdict.holds {
            return Ok(Some(verdict.seen));
        }
        if clock.is_virtual() {
            match clock.fire_next(deadline).await {
                Ok(Some(_)) => {}
                Ok(None) => {
                    return Err(within(
                        verdict,
                        format!(
                            "no timer falls due within {} of cluster time to change it",
                            format_duration(timeout)
                        ),
                    ));
                }
                Err(error) => return Err(within(verdict, error)),
            }
        } else {
            let now = clock.now().await.unwrap_or(deadline);
            if now >= deadline {
                return Err(within(verdict, "timed out".to_string()));
            }
            clock.sleep(POLL).await;
        }
    }
}

/// Advances timer by timer, checking `check` before the first timer, after
/// each and at the end.
async fn advance_while(
    by: Duration,
    check: &Check,
    clock: &ClusterClock,
    resolver: &Resolver,
) -> StepResult {
    let settle_error = |error: String| failed("the cluster to settle", error);
    let from = clock.now().await.map_err(settle_error)?;
    let to = from + chrono::Duration::from_std(by).unwrap_or(chrono::TimeDelta::MAX);
    let throughout = |verdict: Verdict, now: DateTime<Utc>| Verdict {
        holds: false,
        expected: format!("{} throughout {}", verdict.expected, format_duration(by)),
        seen: format!(
            "after {}: {}",
            format_duration((now - from).to_std().unwrap_or_default()),
            verdict.seen
        ),
    };
    clock.settle().await.map_err(settle_error)?;
    let mut now = from;
    let mut checks = 0usize;
    loop {
        let verdict = check.evaluate(resolver).await;
        checks += 1;
        if !verdict.holds {
            return Err(throughout(verdict, now));
        }
        match clock.fire_next(to).await {
            Ok(Some(at)) => now = at,
            Ok(None) => break,
            Err(error) => return Err(settle_error(error)),
        }
    }
    if now < to {
        now = clock.advance_to(to).await.map_err(settle_error)?;
        let verdict = check.evaluate(resolver).await;
        checks += 1;
        if !verdict.holds {
            return Err(throughout(verdict, now));
        }
    }
    // How many timers fired is not part of the report: an idle wake-up
    // more or less does not change what the check saw.
    tracing::debug!(checks, "held throughout");
    Ok(Some("held after every timer".to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_tails_are_one_line() {
        assert_eq!(tail("a\n\nb\nc\n", 2), "... | b | c");
        assert_eq!(tail("", 2), "(none)");
    }

    #[test]
    fn expectations_read_as_words() {
        let expect = Expect {
            exit_code: 1,
            output_contains: vec!["x".into()],
            output_not_contains: vec![],
        };
        assert_eq!(
            describe_expect(&expect),
            "exit code 1, output containing \"x\""
        );
    }
}
