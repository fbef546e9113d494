//! The scenario file (`apiVersion: ksim.io/v1alpha1`, `kind: Scenario`)
//! and its validation: every field is checked, every file read, every jq
//! expression compiled and every duration parsed when the file is loaded, so
//! a bad scenario is one error naming the file, the step and the field
//! before anything runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ksim_kubelet::stage::JqQuery;
use serde_json::{Map, Value};

use crate::args::{quote, split_args};
use crate::checks::{Check, JqCheck};
use crate::duration::{format_duration, parse_duration};
use crate::error::ScenarioError;
use crate::get::GetArgs;

/// The apiVersion of scenario files.
pub const API_VERSION: &str = "ksim.io/v1alpha1";
/// Where a virtual clock starts when `spec.clockStart` is not given (fixed,
/// so that runs repeat).
pub const DEFAULT_CLOCK_START: &str = "2026-01-01T00:00:00Z";
/// How long `waitFor` waits when no `timeout` is given.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(60);
/// The components a cluster runs beside the API server, which
/// `spec.cluster.disable` may name.
pub const COMPONENTS: &[&str] = &["kubelet", "controllers", "scheduler", "dpdb"];

/// A loaded, valid scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The file it was read from.
    pub file: PathBuf,
    /// `metadata.name`.
    pub name: String,
    /// `spec.clock`.
    pub clock: ClockMode,
    /// `spec.clockStart`: where a virtual clock starts.
    pub clock_start: chrono::DateTime<chrono::Utc>,
    /// `spec.seed`.
    pub seed: Option<u64>,
    /// `spec.cluster`.
    pub cluster: ClusterSpec,
    /// `spec.steps`.
    pub steps: Vec<Step>,
}

/// `spec.clock`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ClockMode {
    /// Time stands still until advanced (the default).
    #[default]
    Virtual,
    /// The wall clock.
    Real,
}

impl ClockMode {
    /// The name used in files and reports.
    pub fn name(self) -> &'static str {
        match self {
            ClockMode::Virtual => "virtual",
            ClockMode::Real => "real",
        }
    }
}

/// `spec.cluster`: what `ksim create cluster` accepts.
#[derive(Debug, Clone, Default)]
pub struct ClusterSpec {
    /// Components not to run (`kubelet`, `controllers`, `scheduler`, `dpdb`).
    pub disable: Vec<String>,
    /// A KubeSchedulerConfiguration (`{file: F}` or inline).
    pub scheduler_config: Option<ConfigSource>,
    /// A DeschedulerPolicy (`{file: F}` or inline): runs the descheduler.
    pub descheduler_policy: Option<ConfigSource>,
    /// How often the descheduler runs.
    pub descheduling_interval: Option<Duration>,
    /// `autoscaler: true` or `{flag: value}`: runs the cluster autoscaler
    /// with these `ksim autoscaler` flags (`--flag=value`).
    pub autoscaler: Option<Vec<String>>,
    /// A snapshot to start from.
    pub snapshot: Option<PathBuf>,
}

/// A configuration document given in the scenario or in a file, read at load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigSource {
    /// The document (YAML or JSON).
    pub text: String,
    /// Where it came from: the file, or `inline`.
    pub origin: String,
}

/// One step.
#[derive(Debug, Clone)]
pub struct Step {
    /// Its number, from 1.
    pub number: usize,
    /// `name:`, shown in the timeline instead of the action.
    pub name: Option<String>,
    /// What it does.
    pub action: Action,
}

/// What a step does.
#[derive(Debug, Clone)]
pub enum Action {
    /// `ksim: ARGS`: a ksim subcommand against the scenario's cluster.
    Ksim {
        /// The arguments.
        args: Vec<String>,
        /// What must come of it.
        expect: Expect,
    },
    /// `kubectl: ARGS`: the real kubectl against the scenario's cluster.
    Kubectl {
        /// The arguments.
        args: Vec<String>,
        /// What must come of it.
        expect: Expect,
    },
    /// `apply: YAML` or `apply: {file: F}`: server-side apply of each document.
    Apply(Manifest),
    /// `delete: ARGS`: `kubectl delete` arguments (types, names, `-l`, `-n`,
    /// `--ignore-not-found`).
    Delete {
        /// What to delete.
        target: GetArgs,
        /// Whether a missing object is fine.
        ignore_not_found: bool,
    },
    /// `waitFor: {CHECK, timeout: D}`.
    WaitFor {
        /// The check.
        check: Check,
        /// How long, in cluster time.
        timeout: Duration,
    },
    /// `advance: D`, or `advance: {by: D, always: CHECK}`: moves the
    /// virtual clock, timer by timer; `always` must hold before the first
    /// timer, after each, and at the end.
    Advance {
        /// How far.
        by: Duration,
        /// What must hold throughout.
        always: Option<Check>,
    },
    /// `assert: CHECK`: must hold at once.
    Assert(Check),
}

/// `expect:` of `kubectl:` and `ksim:` steps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expect {
    /// The exit code (default 0).
    pub exit_code: i32,
    /// Text the output (stdout and stderr) contains.
    pub output_contains: Vec<String>,
    /// Text the output does not contain.
    pub output_not_contains: Vec<String>,
}

/// The documents of an `apply:` step.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// Each object, in order.
    pub objects: Vec<Value>,
    /// Where they came from: the file, or `inline`.
    pub origin: String,
}

impl Step {
    /// A short description for the timeline.
    pub fn describe(&self) -> String {
        if let Some(name) = &self.name {
            return name.clone();
        }
        match &self.action {
            Action::Ksim { args, .. } => format!("ksim {}", quote_all(args)),
            Action::Kubectl { args, .. } => format!("kubectl {}", quote_all(args)),
            Action::Apply(manifest) => {
                let names: Vec<String> = manifest
                    .objects
                    .iter()
                    .map(|o| {
                        format!(
                            "{}/{}",
                            o["kind"].as_str().unwrap_or_default().to_ascii_lowercase(),
                            o["metadata"]["name"].as_str().unwrap_or_default()
                        )
                    })
                    .collect();
                let shown = if names.len() > 3 {
                    format!("{} and {} more", names[..3].join(", "), names.len() - 3)
                } else {
                    names.join(", ")
                };
                format!("apply {shown}")
            }
            Action::Delete { target, .. } => format!("delete {}", target.source),
            Action::WaitFor { check, timeout } => {
                format!(
                    "waitFor {} (timeout {})",
                    check.describe(),
                    format_duration(*timeout)
                )
            }
            Action::Advance { by, always: None } => format!("advance {}", format_duration(*by)),
            Action::Advance {
                by,
                always: Some(check),
            } => format!(
                "advance {} while {}",
                format_duration(*by),
                check.describe()
            ),
            Action::Assert(check) => format!("assert {}", check.describe()),
        }
    }
}

fn quote_all(args: &[String]) -> String {
    args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
}

/// Builds errors about one file.
struct Errors<'a> {
    file: &'a Path,
}

impl Errors<'_> {
    fn at(&self, field: &str, message: impl Into<String>) -> ScenarioError {
        ScenarioError::Invalid {
            file: self.file.to_path_buf(),
            field: field.to_string(),
            message: message.into(),
        }
    }

    fn step(&self, step: usize, field: &str, message: impl Into<String>) -> ScenarioError {
        ScenarioError::InvalidStep {
            file: self.file.to_path_buf(),
            step,
            field: field.to_string(),
            message: message.into(),
        }
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn unknown_fields(map: &Map<String, Value>, known: &[&str]) -> Option<String> {
    map.keys()
        .find(|k| !known.contains(&k.as_str()))
        .map(|k| format!("unknown field {k:?} (known: {})", known.join(", ")))
}

impl Scenario {
    /// Reads and validates a scenario file.
    pub fn load(file: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(file).map_err(|source| ScenarioError::Read {
            file: file.to_path_buf(),
            source,
        })?;
        Self::parse(file, &text)
    }

    /// Validates a scenario's text; `file` names it in errors and anchors
    /// relative paths.
    pub fn parse(file: &Path, text: &str) -> Result<Self, ScenarioError> {
        let errors = Errors { file };
        let base = file.parent().unwrap_or(Path::new(".")).to_path_buf();
        let document: Value = serde_saphyr::from_str(text)
            .map_err(|e| errors.at("(document)", format!("not valid YAML: {e}")))?;
        let Value::Object(top) = document else {
            return Err(errors.at(
                "(document)",
                format!("a mapping is required, not {}", type_name(&document)),
            ));
        };
        if let Some(message) = unknown_fields(&top, &["apiVersion", "kind", "metadata", "spec"]) {
            return Err(errors.at("(document)", message));
        }
        match top.get("apiVersion").and_then(Value::as_str) {
            Some(API_VERSION) => {}
            other => {
                return Err(errors.at(
                    "apiVersion",
                    format!(
                        "must be {API_VERSION:?}, not {:?}",
                        other.unwrap_or_default()
                    ),
                ));
            }
        }
        match top.get("kind").and_then(Value::as_str) {
            Some("Scenario") => {}
            other => {
                return Err(errors.at(
                    "kind",
                    format!("must be \"Scenario\", not {:?}", other.unwrap_or_default()),
                ));
            }
        }
        let name = match top.get("metadata") {
            Some(Value::Object(metadata)) => {
                if let Some(message) = unknown_fields(metadata, &["name", "annotations", "labels"])
                {
                    return Err(errors.at("metadata", message));
                }
                match metadata.get("name") {
                    Some(Value::String(name)) if !name.is_empty() => name.clone(),
                    _ => return Err(errors.at("metadata.name", "a name is required")),
                }
            }
            _ => return Err(errors.at("metadata.name", "a name is required")),
        };
        let empty = Map::new();
        let spec = match top.get("spec") {
            Some(Value::Object(spec)) => spec,
            None => &empty,
            Some(other) => {
                return Err(errors.at(
                    "spec",
                    format!("a mapping is required, not {}", type_name(other)),
                ));
            }
        };
        if let Some(message) =
            unknown_fields(spec, &["clock", "clockStart", "seed", "cluster", "steps"])
        {
            return Err(errors.at("spec", message));
        }
        let clock = match spec.get("clock") {
            None => ClockMode::Virtual,
            Some(Value::String(s)) if s == "virtual" => ClockMode::Virtual,
            Some(Value::String(s)) if s == "real" => ClockMode::Real,
            Some(other) => {
                return Err(errors.at(
                    "spec.clock",
                    format!("must be \"virtual\" or \"real\", not {other}"),
                ));
            }
        };
        let clock_start = match spec.get("clockStart") {
            None => DEFAULT_CLOCK_START,
            Some(Value::String(text)) => text.as_str(),
            Some(other) => {
                return Err(errors.at(
                    "spec.clockStart",
                    format!("an RFC 3339 time (2026-01-01T00:00:00Z) is required, not {other}"),
                ));
            }
        };
        let clock_start = chrono::DateTime::parse_from_rfc3339(clock_start)
            .map(|t| t.with_timezone(&chrono::Utc))
            .map_err(|e| {
                errors.at(
                    "spec.clockStart",
                    format!("{clock_start:?} is not an RFC 3339 time (2026-01-01T00:00:00Z): {e}"),
                )
            })?;
        let seed = match spec.get("seed") {
            None => None,
            Some(value) => Some(value.as_u64().ok_or_else(|| {
                errors.at(
                    "spec.seed",
                    format!("a non-negative integer is required, not {value}"),
                )
            })?),
        };
        let cluster = match spec.get("cluster") {
            None | Some(Value::Null) => ClusterSpec::default(),
            Some(Value::Object(cluster)) => parse_cluster(&errors, &base, cluster)?,
            Some(other) => {
                return Err(errors.at(
                    "spec.cluster",
                    format!("a mapping is required, not {}", type_name(other)),
                ));
            }
        };
        let raw_steps = match spec.get("steps") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(steps)) => steps.clone(),
            Some(other) => {
                return Err(errors.at(
                    "spec.steps",
                    format!("a list is required, not {}", type_name(other)),
                ));
            }
        };
        let mut steps = Vec::with_capacity(raw_steps.len());
        for (index, raw) in raw_steps.iter().enumerate() {
            let step = parse_step(&errors, &base, index + 1, raw)?;
            if clock == ClockMode::Real && matches!(step.action, Action::Advance { .. }) {
                return Err(errors.step(
                    step.number,
                    "advance",
                    "the scenario's clock is real (spec.clock); only a virtual clock can be advanced",
                ));
            }
            steps.push(step);
        }
        Ok(Scenario {
            file: file.to_path_buf(),
            name,
            clock,
            clock_start,
            seed,
            cluster,
            steps,
        })
    }
}

fn read_relative(base: &Path, path: &str) -> Result<(PathBuf, String), String> {
    let full = base.join(path);
    std::fs::read_to_string(&full)
        .map(|text| (full.clone(), text))
        .map_err(|e| format!("cannot read {}: {e}", full.display()))
}

/// `{file: F}` or an inline document (a mapping, or YAML text).
fn config_source(base: &Path, value: &Value) -> Result<ConfigSource, (String, String)> {
    match value {
        Value::Object(map) if map.len() == 1 && map.contains_key("file") => {
            let Some(path) = map["file"].as_str() else {
                return Err(("file".into(), "a path is required".into()));
            };
            let (full, text) = read_relative(base, path).map_err(|m| ("file".to_string(), m))?;
            Ok(ConfigSource {
                text,
                origin: full.display().to_string(),
            })
        }
        Value::Object(_) => Ok(ConfigSource {
            text: serde_json::to_string(value).map_err(|e| (String::new(), e.to_string()))?,
            origin: "inline".into(),
        }),
        Value::String(text) => Ok(ConfigSource {
            text: text.clone(),
            origin: "inline".into(),
        }),
        other => Err((
            String::new(),
            format!(
                "{{file: F}} or a document is required, not {}",
                type_name(other)
            ),
        )),
    }
}

fn parse_cluster(
    errors: &Errors<'_>,
    base: &Path,
    cluster: &Map<String, Value>,
) -> Result<ClusterSpec, ScenarioError> {
    let known = [
        "disable",
        "schedulerConfig",
        "deschedulerPolicy",
        "deschedulingInterval",
        "autoscaler",
        "snapshot",
    ];
    if let Some(message) = unknown_fields(cluster, &known) {
        return Err(errors.at("spec.cluster", message));
    }
    let mut spec = ClusterSpec::default();
    match cluster.get("disable") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for item in items {
                match item.as_str() {
                    Some(name) if COMPONENTS.contains(&name) => spec.disable.push(name.to_string()),
                    _ => {
                        return Err(errors.at(
                            "spec.cluster.disable",
                            format!(
                                "unknown component {item} (known: {})",
                                COMPONENTS.join(", ")
                            ),
                        ));
                    }
                }
            }
        }
        Some(other) => {
            return Err(errors.at(
                "spec.cluster.disable",
                format!("a list of components is required, not {}", type_name(other)),
            ));
        }
    }
    let source = |field: &str| -> Result<Option<ConfigSource>, ScenarioError> {
        match cluster.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => config_source(base, value)
                .map(Some)
                .map_err(|(sub, message)| {
                    let path = if sub.is_empty() {
                        format!("spec.cluster.{field}")
                    } else {
                        format!("spec.cluster.{field}.{sub}")
                    };
                    errors.at(&path, message)
                }),
        }
    };
    spec.scheduler_config = source("schedulerConfig")?;
    spec.descheduler_policy = source("deschedulerPolicy")?;
    if let Some(policy) = &spec.descheduler_policy {
        ksim_descheduler::DeschedulerPolicy::parse(&policy.text).map_err(|e| {
            errors.at(
                "spec.cluster.deschedulerPolicy",
                format!("invalid policy: {e}"),
            )
        })?;
    }
    if let Some(value) = cluster.get("deschedulingInterval") {
        let text = value.as_str().unwrap_or_default();
        spec.descheduling_interval = Some(
            parse_duration(text).map_err(|e| errors.at("spec.cluster.deschedulingInterval", e))?,
        );
        if spec.descheduler_policy.is_none() {
            return Err(errors.at(
                "spec.cluster.deschedulingInterval",
                "needs spec.cluster.deschedulerPolicy",
            ));
        }
    }
    spec.autoscaler = match cluster.get("autoscaler") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => None,
        Some(Value::Bool(true)) => Some(Vec::new()),
        Some(Value::Object(flags)) => Some(
            flags
                .iter()
                .map(|(key, value)| {
                    let value = match value {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    format!("--{}={value}", kebab_case(key))
                })
                .collect::<std::collections::BTreeSet<String>>()
                .into_iter()
                .collect(),
        ),
        Some(other) => {
            return Err(errors.at(
                "spec.cluster.autoscaler",
                format!(
                    "true or a mapping of flags is required, not {}",
                    type_name(other)
                ),
            ));
        }
    };
    if let Some(value) = cluster.get("snapshot") {
        let Some(path) = value.as_str() else {
            return Err(errors.at("spec.cluster.snapshot", "a path is required"));
        };
        let full = base.join(path);
        if !full.is_file() {
            return Err(errors.at(
                "spec.cluster.snapshot",
                format!("cannot read {}: no such file", full.display()),
            ));
        }
        spec.snapshot = Some(full);
    }
    Ok(spec)
}

/// `scaleDownUnneededTime` → `scale-down-unneeded-time`.
fn kebab_case(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('-');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The keys that make a step.
const ACTIONS: &[&str] = &[
    "ksim", "kubectl", "apply", "delete", "waitFor", "advance", "assert",
];

fn parse_step(
    errors: &Errors<'_>,
    base: &Path,
    number: usize,
    raw: &Value,
) -> Result<Step, ScenarioError> {
    let fail = |field: &str, message: String| errors.step(number, field, message);
    let Value::Object(map) = raw else {
        return Err(fail(
            "(step)",
            format!(
                "a mapping with one of {} is required, not {}",
                ACTIONS.join(", "),
                type_name(raw)
            ),
        ));
    };
    let mut known: Vec<&str> = ACTIONS.to_vec();
    known.extend(["name", "expect"]);
    if let Some(key) = map.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(fail(
            key,
            format!(
                "unknown field {key:?} (a step is one of {}, with optional name and expect)",
                ACTIONS.join(", ")
            ),
        ));
    }
    let actions: Vec<&str> = ACTIONS
        .iter()
        .copied()
        .filter(|a| map.contains_key(*a))
        .collect();
    let action = match actions.as_slice() {
        [one] => *one,
        [] => {
            return Err(fail(
                "(step)",
                format!("no action: give one of {}", ACTIONS.join(", ")),
            ));
        }
        several => {
            return Err(fail(
                several[1],
                format!(
                    "a step does one thing, but this one has {}",
                    several.join(" and ")
                ),
            ));
        }
    };
    let name = match map.get("name") {
        None => None,
        Some(Value::String(name)) => Some(name.clone()),
        Some(other) => {
            return Err(fail(
                "name",
                format!("a string is required, not {}", type_name(other)),
            ));
        }
    };
    if map.contains_key("expect") && !matches!(action, "ksim" | "kubectl") {
        return Err(fail(
            "expect",
            format!("only kubectl and ksim steps take expect, not {action}"),
        ));
    }
    let value = &map[action];
    let action = match action {
        "ksim" | "kubectl" => {
            let args = command_args(value).map_err(|m| fail(action, m))?;
            if args.is_empty() {
                return Err(fail(action, "arguments are required".into()));
            }
            if action == "kubectl" && args[0] == "kubectl" {
                return Err(fail(
                    action,
                    "give kubectl's arguments without \"kubectl\"".into(),
                ));
            }
            if action == "ksim" && args[0] == "ksim" {
                return Err(fail(
                    action,
                    "give ksim's arguments without \"ksim\"".into(),
                ));
            }
            let expect = match map.get("expect") {
                None => Expect::default(),
                Some(expect) => parse_expect(expect).map_err(|(field, m)| fail(&field, m))?,
            };
            if action == "ksim" {
                Action::Ksim { args, expect }
            } else {
                Action::Kubectl { args, expect }
            }
        }
        "apply" => {
            Action::Apply(parse_manifest(base, value).map_err(|(field, m)| fail(&field, m))?)
        }
        "delete" => {
            let Some(line) = value.as_str() else {
                return Err(fail(
                    "delete",
                    format!(
                        "kubectl delete arguments are required, not {}",
                        type_name(value)
                    ),
                ));
            };
            let words = split_args(line).map_err(|m| fail("delete", m))?;
            let ignore_not_found = words
                .iter()
                .any(|w| w == "--ignore-not-found" || w == "--ignore-not-found=true");
            let rest: Vec<String> = words
                .into_iter()
                .filter(|w| !w.starts_with("--ignore-not-found"))
                .map(|w| quote(&w))
                .collect();
            let target = GetArgs::parse(&rest.join(" ")).map_err(|m| fail("delete", m))?;
            Action::Delete {
                target: GetArgs {
                    source: line.trim().to_string(),
                    ..target
                },
                ignore_not_found,
            }
        }
        "waitFor" => {
            let (check, timeout) =
                parse_check(value, "waitFor", true).map_err(|(field, m)| fail(&field, m))?;
            Action::WaitFor {
                check,
                timeout: timeout.unwrap_or(DEFAULT_WAIT_TIMEOUT),
            }
        }
        "assert" => {
            let (check, _) =
                parse_check(value, "assert", false).map_err(|(field, m)| fail(&field, m))?;
            Action::Assert(check)
        }
        "advance" => match value {
            Value::String(text) => Action::Advance {
                by: parse_duration(text).map_err(|m| fail("advance", m))?,
                always: None,
            },
            Value::Object(map) => {
                if let Some(message) = unknown_fields(map, &["by", "always"]) {
                    return Err(fail("advance", message));
                }
                let by = match map.get("by") {
                    Some(Value::String(text)) => {
                        parse_duration(text).map_err(|m| fail("advance.by", m))?
                    }
                    _ => {
                        return Err(fail(
                            "advance.by",
                            "a duration (10m, 1h30m) is required".into(),
                        ));
                    }
                };
                let always = match map.get("always") {
                    None => None,
                    Some(check) => Some(
                        parse_check(check, "advance.always", false)
                            .map_err(|(field, m)| fail(&field, m))?
                            .0,
                    ),
                };
                Action::Advance { by, always }
            }
            other => {
                return Err(fail(
                    "advance",
                    format!(
                        "a duration (10m, 1h30m) or {{by, always}} is required, not {}",
                        type_name(other)
                    ),
                ));
            }
        },
        other => unreachable!("{other} is one of ACTIONS"),
    };
    Ok(Step {
        number,
        name,
        action,
    })
}

fn command_args(value: &Value) -> Result<Vec<String>, String> {
    match value {
        Value::String(line) => split_args(line),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.clone()),
                Value::Number(n) => Ok(n.to_string()),
                other => Err(format!(
                    "arguments must be strings, not {}",
                    type_name(other)
                )),
            })
            .collect(),
        other => Err(format!(
            "arguments (a string or a list) are required, not {}",
            type_name(other)
        )),
    }
}

fn strings(value: &Value) -> Result<Vec<String>, String> {
    match value {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(items) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| "strings are required".to_string())
            })
            .collect(),
        other => Err(format!(
            "a string or a list of strings is required, not {}",
            type_name(other)
        )),
    }
}

fn parse_expect(value: &Value) -> Result<Expect, (String, String)> {
    let Value::Object(map) = value else {
        return Err((
            "expect".into(),
            format!("a mapping is required, not {}", type_name(value)),
        ));
    };
    if let Some(message) = unknown_fields(map, &["exitCode", "outputContains", "outputNotContains"])
    {
        return Err(("expect".into(), message));
    }
    let mut expect = Expect::default();
    if let Some(code) = map.get("exitCode") {
        expect.exit_code = code
            .as_i64()
            .and_then(|c| i32::try_from(c).ok())
            .ok_or_else(|| {
                (
                    "expect.exitCode".to_string(),
                    format!("an integer is required, not {code}"),
                )
            })?;
    }
    if let Some(text) = map.get("outputContains") {
        expect.output_contains =
            strings(text).map_err(|m| ("expect.outputContains".to_string(), m))?;
    }
    if let Some(text) = map.get("outputNotContains") {
        expect.output_not_contains =
            strings(text).map_err(|m| ("expect.outputNotContains".to_string(), m))?;
    }
    Ok(expect)
}

fn parse_manifest(base: &Path, value: &Value) -> Result<Manifest, (String, String)> {
    let (text, origin, field) = match value {
        Value::String(text) => (text.clone(), "inline".to_string(), "apply".to_string()),
        Value::Object(map) if map.len() == 1 && map.contains_key("file") => {
            let Some(path) = map["file"].as_str() else {
                return Err(("apply.file".into(), "a path is required".into()));
            };
            let (full, text) =
                read_relative(base, path).map_err(|m| ("apply.file".to_string(), m))?;
            (text, full.display().to_string(), "apply.file".to_string())
        }
        Value::Object(map) => {
            return Err((
                "apply".into(),
                unknown_fields(map, &["file"])
                    .unwrap_or_else(|| "give {file: F} or inline YAML".into()),
            ));
        }
        other => {
            return Err((
                "apply".into(),
                format!(
                    "inline YAML (apply: |) or {{file: F}} is required, not {}",
                    type_name(other)
                ),
            ));
        }
    };
    let documents: Vec<Value> = serde_saphyr::from_multiple(&text)
        .map_err(|e| (field.clone(), format!("not valid YAML: {e}")))?;
    let mut objects = Vec::new();
    for (index, document) in documents.into_iter().enumerate() {
        let which = format!("document {}", index + 1);
        match document {
            Value::Null => continue,
            Value::Object(ref map) => {
                if map.get("kind").and_then(Value::as_str) == Some("List") {
                    for item in map
                        .get("items")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        check_object(item).map_err(|m| (field.clone(), format!("{which}: {m}")))?;
                        objects.push(item.clone());
                    }
                    continue;
                }
                check_object(&document).map_err(|m| (field.clone(), format!("{which}: {m}")))?;
                objects.push(document);
            }
            other => {
                return Err((
                    field,
                    format!("{which}: an object is required, not {}", type_name(&other)),
                ));
            }
        }
    }
    if objects.is_empty() {
        return Err((field, "no objects to apply".into()));
    }
    Ok(Manifest { objects, origin })
}

fn check_object(object: &Value) -> Result<(), String> {
    for (path, what) in [
        (object.get("apiVersion"), "apiVersion"),
        (object.get("kind"), "kind"),
        (
            object.get("metadata").and_then(|m| m.get("name")),
            "metadata.name",
        ),
    ] {
        if path.and_then(Value::as_str).is_none_or(str::is_empty) {
            return Err(format!("{what} is required"));
        }
    }
    Ok(())
}

/// The keys of a check.
const CHECKS: &[&str] = &[
    "get",
    "spread",
    "placement",
    "pending",
    "evictions",
    "events",
];

fn parse_check(
    value: &Value,
    prefix: &str,
    waits: bool,
) -> Result<(Check, Option<Duration>), (String, String)> {
    let at = |field: &str| format!("{prefix}.{field}");
    let Value::Object(map) = value else {
        return Err((
            prefix.into(),
            format!(
                "a mapping ({{get, jq}} or one of spread, placement, pending, evictions, events) is required, not {}",
                type_name(value)
            ),
        ));
    };
    let mut known = CHECKS.to_vec();
    known.push("jq");
    if waits {
        known.push("timeout");
    }
    if let Some(key) = map.keys().find(|k| !known.contains(&k.as_str())) {
        let field = if key == "timeout" {
            at("timeout")
        } else {
            prefix.to_string()
        };
        let message = if key == "timeout" {
            "assert must hold at once; waitFor takes a timeout".to_string()
        } else {
            format!("unknown field {key:?} (known: {})", known.join(", "))
        };
        return Err((field, message));
    }
    let timeout = match map.get("timeout") {
        None => None,
        Some(Value::String(text)) => Some(parse_duration(text).map_err(|m| (at("timeout"), m))?),
        Some(other) => {
            return Err((
                at("timeout"),
                format!("a duration (2m, 90s) is required, not {other}"),
            ));
        }
    };
    let kinds: Vec<&str> = CHECKS
        .iter()
        .copied()
        .filter(|k| map.contains_key(*k))
        .collect();
    let check = match kinds.as_slice() {
        ["get"] => {
            let get = map["get"]
                .as_str()
                .ok_or_else(|| (at("get"), "kubectl get arguments are required".to_string()))?;
            let get = GetArgs::parse(get).map_err(|m| (at("get"), m))?;
            let Some(jq) = map.get("jq") else {
                return Err((
                    at("jq"),
                    "a jq expression that must yield true is required with get".into(),
                ));
            };
            let jq = jq.as_str().ok_or_else(|| {
                (
                    at("jq"),
                    "a jq expression (a string) is required".to_string(),
                )
            })?;
            let jq = JqQuery::compile(jq).map_err(|e| (at("jq"), e.to_string()))?;
            Check::Jq(JqCheck { get, jq })
        }
        [kind] => {
            if map.contains_key("jq") {
                return Err((at("jq"), format!("jq goes with get, not with {kind}")));
            }
            let inner = map[*kind].clone();
            let check = match *kind {
                "spread" => serde_path_to_error::deserialize(inner).map(Check::Spread),
                "placement" => serde_path_to_error::deserialize(inner).map(Check::Placement),
                "pending" => serde_path_to_error::deserialize(inner).map(Check::Pending),
                "evictions" => serde_path_to_error::deserialize(inner).map(Check::Evictions),
                "events" => serde_path_to_error::deserialize(inner).map(Check::Events),
                other => unreachable!("{other} is one of CHECKS"),
            };
            let check = check.map_err(|e| {
                let path = e.path().to_string();
                let field = if path == "." || path.is_empty() {
                    at(kind)
                } else {
                    format!("{}.{path}", at(kind))
                };
                (field, e.into_inner().to_string())
            })?;
            check.validate().map_err(|(field, m)| (at(&field), m))?;
            check
        }
        [] => {
            return Err((
                prefix.into(),
                format!(
                    "nothing to check: give get and jq, or one of {}",
                    CHECKS[1..].join(", ")
                ),
            ));
        }
        several => {
            return Err((
                at(several[1]),
                format!(
                    "one check per step, but this one has {}",
                    several.join(" and ")
                ),
            ));
        }
    };
    Ok((check, timeout))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse(Path::new("/tmp/does-not-exist/s.yaml"), text)
    }

    const HEAD: &str = "apiVersion: ksim.io/v1alpha1\nkind: Scenario\nmetadata: {name: t}\n";

    fn with_steps(steps: &str) -> Result<Scenario, ScenarioError> {
        parse(&format!("{HEAD}spec:\n  steps:\n{steps}"))
    }

    fn error(steps: &str) -> String {
        with_steps(steps).expect_err("invalid").to_string()
    }

    #[test]
    fn the_issue_example_parses() {
        let scenario = parse(
            r#"apiVersion: ksim.io/v1alpha1
kind: Scenario
metadata: {name: drain-under-budget}
spec:
  clock: virtual
  seed: 7
  cluster: {}
  steps:
  - ksim: scale node --replicas 10
  - kubectl: label nodes node-000000 number=even
  - apply: |
      apiVersion: policy/v1
      kind: PodDisruptionBudget
      metadata: {name: pdb-sample}
      spec: {minAvailable: 95%, selector: {matchLabels: {app: nginx}}}
  - waitFor: {get: pods -l app=nginx, jq: '[.items[] | select(.status.phase == "Running")] | length == 10', timeout: 2m}
  - kubectl: drain node-000000 --ignore-daemonsets --timeout=20s
    expect: {exitCode: 1, outputContains: "Cannot evict pod as it would violate the pod's disruption budget."}
  - advance: 10m
  - assert: {get: pdb pdb-sample, jq: '.status.disruptionsAllowed == 0'}
  - assert: {spread: {selector: app=nginx, topologyKey: number, maxSkew: 1}}
"#,
        )
        .expect("valid");
        assert_eq!(scenario.name, "drain-under-budget");
        assert_eq!(scenario.seed, Some(7));
        assert_eq!(scenario.clock, ClockMode::Virtual);
        assert_eq!(scenario.steps.len(), 8);
        let described: Vec<String> = scenario.steps.iter().map(Step::describe).collect();
        assert_eq!(described[0], "ksim scale node --replicas 10");
        assert_eq!(described[2], "apply poddisruptionbudget/pdb-sample");
        assert!(described[3].ends_with("(timeout 2m0s)"), "{}", described[3]);
        assert_eq!(described[5], "advance 10m0s");
        assert_eq!(
            described[7],
            "assert spread of app=nginx by number (maxSkew 1)"
        );
        match &scenario.steps[4].action {
            Action::Kubectl { expect, .. } => {
                assert_eq!(expect.exit_code, 1);
                assert_eq!(expect.output_contains.len(), 1);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_name_the_file_the_step_and_the_field() {
        for (steps, want) in [
            (
                "  - kubctl: get pods\n",
                "s.yaml: step 1: kubctl: unknown field \"kubctl\"",
            ),
            (
                "  - advance: 10m\n  - advance: ten\n",
                "s.yaml: step 2: advance: time: invalid duration \"ten\"",
            ),
            (
                "  - waitFor: {get: pods, jq: '.items[', timeout: 1m}\n",
                "s.yaml: step 1: waitFor.jq: ",
            ),
            (
                "  - waitFor: {get: pods, jq: 'true', timeout: 5}\n",
                "step 1: waitFor.timeout: a duration",
            ),
            (
                "  - waitFor: {get: pods, jq: 'true', timout: 1m}\n",
                "step 1: waitFor: unknown field \"timout\"",
            ),
            (
                "  - assert: {get: pods, jq: 'true', timeout: 1m}\n",
                "step 1: assert.timeout: assert must hold at once",
            ),
            (
                "  - assert: {get: pods}\n",
                "step 1: assert.jq: a jq expression",
            ),
            (
                "  - assert: {spread: {selector: app=a, topologyKey: k, maxskew: 1}}\n",
                "step 1: assert.spread.maxskew: unknown field `maxskew`",
            ),
            (
                "  - assert: {spread: {selector: app=a, topologyKey: k, maxSkew: many}}\n",
                "step 1: assert.spread.maxSkew: invalid type",
            ),
            (
                "  - assert: {pending: {selector: 'a in (b'}}\n",
                "step 1: assert.pending.selector: invalid label selector",
            ),
            (
                "  - apply: {file: missing.yaml}\n",
                "step 1: apply.file: cannot read /tmp/does-not-exist/missing.yaml",
            ),
            (
                "  - apply: 'kind: Pod'\n",
                "step 1: apply: document 1: apiVersion is required",
            ),
            (
                "  - kubectl: get pods\n    expect: {exitcode: 1}\n",
                "step 1: expect: unknown field \"exitcode\"",
            ),
            (
                "  - assert: {events: {reason: X}}\n    expect: {exitCode: 1}\n",
                "step 1: expect: only kubectl and ksim steps",
            ),
            (
                "  - kubectl: get pods\n    ksim: scale node --replicas 1\n",
                "step 1: kubectl: a step does one thing",
            ),
            ("  - name: nothing\n", "step 1: (step): no action"),
            (
                "  - advance: {by: 1h, always: {get: pods}}\n",
                "step 1: advance.always.jq: a jq expression",
            ),
            (
                "  - advance: {by: soon}\n",
                "step 1: advance.by: time: invalid duration",
            ),
            (
                "  - advance: {by: 1h, while: {}}\n",
                "step 1: advance: unknown field \"while\"",
            ),
            (
                "  - kubectl: \"get 'pods\"\n",
                "step 1: kubectl: unclosed single quote",
            ),
            (
                "  - delete: pods --now\n",
                "step 1: delete: unknown flag: --now",
            ),
            (
                "  - assert: {get: pods --watch, jq: 'true'}\n",
                "step 1: assert.get: unknown flag: --watch",
            ),
        ] {
            let error = error(steps);
            assert!(
                error.contains(want),
                "{steps}\n  got: {error}\n want: {want}"
            );
            assert!(error.starts_with("/tmp/does-not-exist/s.yaml: "), "{error}");
        }
    }

    #[test]
    fn spec_errors_name_the_field() {
        for (text, want) in [
            (
                "apiVersion: v1\nkind: Scenario\nmetadata: {name: t}\n",
                "apiVersion: must be \"ksim.io/v1alpha1\"",
            ),
            (
                "apiVersion: ksim.io/v1alpha1\nkind: Job\nmetadata: {name: t}\n",
                "kind: must be \"Scenario\"",
            ),
            (
                "apiVersion: ksim.io/v1alpha1\nkind: Scenario\n",
                "metadata.name: a name is required",
            ),
            (
                &format!("{HEAD}spec: {{clock: fast}}\n"),
                "spec.clock: must be \"virtual\" or \"real\"",
            ),
            (
                &format!("{HEAD}spec: {{seed: -1}}\n"),
                "spec.seed: a non-negative integer",
            ),
            (
                &format!("{HEAD}spec: {{clockStart: yesterday}}\n"),
                "spec.clockStart: \"yesterday\" is not an RFC 3339 time",
            ),
            (
                &format!("{HEAD}spec: {{step: []}}\n"),
                "spec: unknown field \"step\"",
            ),
            (
                &format!("{HEAD}spec: {{cluster: {{disable: [etcd]}}}}\n"),
                "spec.cluster.disable: unknown component",
            ),
            (
                &format!("{HEAD}spec: {{cluster: {{schedulerConfig: {{file: nope.yaml}}}}}}\n"),
                "spec.cluster.schedulerConfig.file: cannot read",
            ),
            (
                &format!("{HEAD}spec: {{cluster: {{deschedulerPolicy: {{profiles: 3}}}}}}\n"),
                "spec.cluster.deschedulerPolicy: invalid policy",
            ),
            (
                &format!("{HEAD}spec: {{cluster: {{snapshot: nope.yaml}}}}\n"),
                "spec.cluster.snapshot: cannot read",
            ),
            (
                &format!("{HEAD}spec: {{clock: real, steps: [{{advance: 1m}}]}}\n"),
                "step 1: advance: the scenario's clock is real",
            ),
            ("a: [", "(document): not valid YAML"),
        ] {
            let error = parse(text).expect_err(text).to_string();
            assert!(
                error.contains(want),
                "{text}\n  got: {error}\n want: {want}"
            );
        }
    }

    #[test]
    fn cluster_options_and_relative_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("pdb.yaml"), "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: p}\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n").expect("write");
        std::fs::write(
            dir.path().join("sched.yaml"),
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
        )
        .expect("write");
        let file = dir.path().join("s.yaml");
        let text = format!(
            "{HEAD}spec:\n  clock: real\n  cluster:\n    disable: [dpdb]\n    schedulerConfig: {{file: sched.yaml}}\n    autoscaler: {{scanInterval: 10s, maxNodesTotal: 5}}\n  steps:\n  - apply: {{file: pdb.yaml}}\n  - delete: pdb p --ignore-not-found\n"
        );
        let scenario = Scenario::parse(&file, &text).expect("valid");
        assert_eq!(scenario.clock, ClockMode::Real);
        assert_eq!(scenario.cluster.disable, ["dpdb"]);
        let config = scenario.cluster.scheduler_config.as_ref().expect("config");
        assert!(config.text.contains("KubeSchedulerConfiguration"));
        assert_eq!(
            scenario.cluster.autoscaler.as_deref(),
            Some(
                &[
                    "--max-nodes-total=5".to_string(),
                    "--scan-interval=10s".to_string()
                ][..]
            )
        );
        match &scenario.steps[0].action {
            Action::Apply(manifest) => assert_eq!(manifest.objects.len(), 2),
            other => panic!("{other:?}"),
        }
        match &scenario.steps[1].action {
            Action::Delete {
                target,
                ignore_not_found,
            } => {
                assert!(ignore_not_found);
                assert_eq!(
                    target.targets,
                    vec![("pdb".to_string(), Some("p".to_string()))]
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
