//! The pod row: READY, STATUS (the aggregate reason `kubectl get pods`
//! shows), RESTARTS with the age of the last restart, and the wide columns.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::duration::{age, human_duration, parse_time, seconds_between};
use super::format::{array_at, at, bool_at, int_at, is_deleting, name, str_at};

/// Whether an init container is a sidecar (`restartPolicy: Always`).
fn is_restartable_init_container(container: Option<&Value>) -> bool {
    container.and_then(|c| str_at(c, &["restartPolicy"])) == Some("Always")
}

fn condition_status<'a>(conditions: &'a [Value], condition_type: &str) -> Option<&'a str> {
    conditions
        .iter()
        .find(|c| str_at(c, &["type"]) == Some(condition_type))
        .and_then(|c| str_at(c, &["status"]))
}

/// The finish time of a container's last termination, if any.
fn last_termination(status: &Value) -> Option<DateTime<Utc>> {
    let terminated = at(status, &["lastState", "terminated"])?;
    str_at(terminated, &["finishedAt"]).and_then(parse_time)
}

fn later(
    current: Option<DateTime<Utc>>,
    candidate: Option<DateTime<Utc>>,
) -> Option<DateTime<Utc>> {
    match (current, candidate) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// `Signal:9`/`ExitCode:1`-style reason of a terminated state without one.
fn terminated_reason(terminated: &Value, prefix: &str) -> String {
    match str_at(terminated, &["reason"]).filter(|r| !r.is_empty()) {
        Some(reason) => format!("{prefix}{reason}"),
        None => match int_at(terminated, &["signal"]).filter(|s| *s != 0) {
            Some(signal) => format!("{prefix}Signal:{signal}"),
            None => format!(
                "{prefix}ExitCode:{}",
                int_at(terminated, &["exitCode"]).unwrap_or(0)
            ),
        },
    }
}

/// What `printPod` computes: ready/total containers, the status reason,
/// restarts and the time of the last restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSummary {
    pub ready: usize,
    pub total: usize,
    pub reason: String,
    pub restarts: i64,
    pub last_restart: Option<DateTime<Utc>>,
}

/// Summarizes a pod as kube-apiserver's pod printer does.
pub fn summarize(pod: &Value) -> PodSummary {
    let spec_containers = array_at(pod, &["spec", "containers"]);
    let spec_init = array_at(pod, &["spec", "initContainers"]);
    let conditions = array_at(pod, &["status", "conditions"]);
    let phase = str_at(pod, &["status", "phase"]).unwrap_or_default();

    let mut total = spec_containers.len();
    let mut ready = 0;
    let mut restarts = 0;
    let mut restartable_init_restarts = 0;
    let mut last_restart = None;
    let mut last_restartable_init_restart = None;

    let mut reason = phase.to_string();
    if let Some(status_reason) = str_at(pod, &["status", "reason"]).filter(|r| !r.is_empty()) {
        reason = status_reason.to_string();
    }
    if conditions.iter().any(|c| {
        str_at(c, &["type"]) == Some("PodScheduled")
            && str_at(c, &["reason"]) == Some("SchedulingGated")
    }) {
        reason = "SchedulingGated".to_string();
    }

    let init_spec = |container_name: Option<&str>| {
        spec_init
            .iter()
            .find(|c| str_at(c, &["name"]) == container_name)
    };
    total += spec_init
        .iter()
        .filter(|c| is_restartable_init_container(Some(c)))
        .count();

    let mut initializing = false;
    for (i, container) in array_at(pod, &["status", "initContainerStatuses"])
        .iter()
        .enumerate()
    {
        let count = int_at(container, &["restartCount"]).unwrap_or(0);
        restarts += count;
        let terminated_at = last_termination(container);
        last_restart = later(last_restart, terminated_at);
        let restartable = is_restartable_init_container(init_spec(str_at(container, &["name"])));
        if restartable {
            restartable_init_restarts += count;
            last_restartable_init_restart = later(last_restartable_init_restart, terminated_at);
        }
        let terminated = at(container, &["state", "terminated"]).filter(|t| t.is_object());
        let waiting_reason = str_at(container, &["state", "waiting", "reason"]).unwrap_or_default();
        if terminated.is_some_and(|t| int_at(t, &["exitCode"]).unwrap_or(0) == 0) {
            continue;
        }
        if restartable && bool_at(container, &["started"]) == Some(true) {
            if bool_at(container, &["ready"]) == Some(true) {
                ready += 1;
            }
            continue;
        }
        if let Some(terminated) = terminated {
            reason = terminated_reason(terminated, "Init:");
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            reason = format!("Init:{waiting_reason}");
        } else {
            reason = format!("Init:{i}/{}", spec_init.len());
        }
        initializing = true;
        break;
    }

    if !initializing || condition_status(conditions, "Initialized") == Some("True") {
        restarts = restartable_init_restarts;
        last_restart = last_restartable_init_restart;
        let mut has_running = false;
        for container in array_at(pod, &["status", "containerStatuses"]).iter().rev() {
            restarts += int_at(container, &["restartCount"]).unwrap_or(0);
            last_restart = later(last_restart, last_termination(container));
            let waiting_reason =
                str_at(container, &["state", "waiting", "reason"]).unwrap_or_default();
            let terminated = at(container, &["state", "terminated"]).filter(|t| t.is_object());
            let running = at(container, &["state", "running"]).is_some_and(Value::is_object);
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_string();
            } else if let Some(terminated) = terminated {
                reason = terminated_reason(terminated, "");
            } else if bool_at(container, &["ready"]) == Some(true) && running {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if condition_status(conditions, "Ready") == Some("True") {
                "Running".to_string()
            } else {
                "NotReady".to_string()
            };
        }
    }

    if is_deleting(pod) && str_at(pod, &["status", "reason"]) == Some("NodeLost") {
        reason = "Unknown".to_string();
    } else if is_deleting(pod) && !ksim_core::status::is_terminal_phase(phase) {
        reason = "Terminating".to_string();
    }

    PodSummary {
        ready,
        total,
        reason,
        restarts,
        last_restart,
    }
}

/// The cells of a pod row (all columns, wide ones included).
pub fn cells(pod: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let summary = summarize(pod);
    let restarts = match summary.last_restart {
        Some(time) if summary.restarts != 0 => format!(
            "{} ({} ago)",
            summary.restarts,
            human_duration(seconds_between(time, now))
        ),
        _ => summary.restarts.to_string(),
    };
    let pod_ip = array_at(pod, &["status", "podIPs"])
        .first()
        .and_then(|ip| str_at(ip, &["ip"]))
        .or_else(|| str_at(pod, &["status", "podIP"]))
        .filter(|ip| !ip.is_empty())
        .unwrap_or("<none>");
    let node_name = str_at(pod, &["spec", "nodeName"])
        .filter(|n| !n.is_empty())
        .unwrap_or("<none>");
    let nominated = str_at(pod, &["status", "nominatedNodeName"])
        .filter(|n| !n.is_empty())
        .unwrap_or("<none>");
    let gates = array_at(pod, &["spec", "readinessGates"]);
    let readiness_gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conditions = array_at(pod, &["status", "conditions"]);
        let true_conditions = gates
            .iter()
            .filter(|gate| {
                str_at(gate, &["conditionType"]).and_then(|t| condition_status(conditions, t))
                    == Some("True")
            })
            .count();
        format!("{true_conditions}/{}", gates.len())
    };
    vec![
        json!(name(pod)),
        json!(format!("{}/{}", summary.ready, summary.total)),
        json!(summary.reason),
        json!(restarts),
        json!(age(super::format::creation_timestamp(pod), now)),
        json!(pod_ip),
        json!(node_name),
        json!(nominated),
        json!(readiness_gates),
    ]
}

/// The row conditions upstream sets on finished pods.
pub fn row_conditions(pod: &Value) -> Option<Value> {
    let (reason, message) = match str_at(pod, &["status", "phase"]) {
        Some("Succeeded") => ("Succeeded", "The pod has completed successfully."),
        Some("Failed") => ("Failed", "The pod failed."),
        _ => return None,
    };
    Some(json!([{
        "type": "Completed",
        "status": "True",
        "reason": reason,
        "message": message,
    }]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        parse_time("2024-01-01T12:00:00Z").expect("valid time")
    }

    fn pod(status: Value) -> Value {
        json!({
            "metadata": {"name": "p", "creationTimestamp": "2024-01-01T11:00:00Z"},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            "status": status,
        })
    }

    #[test]
    fn status_column_follows_upstream_pod_printer() {
        let cases = [
            (
                "pending",
                pod(json!({"phase": "Pending"})),
                "Pending",
                "0/1",
            ),
            (
                "container creating",
                pod(json!({"phase": "Pending", "containerStatuses": [
                    {"name": "app", "ready": false, "restartCount": 0,
                     "state": {"waiting": {"reason": "ContainerCreating"}}}]})),
                "ContainerCreating",
                "0/1",
            ),
            (
                "running",
                pod(
                    json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                    "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0,
                     "state": {"running": {"startedAt": "2024-01-01T11:00:00Z"}}}]}),
                ),
                "Running",
                "1/1",
            ),
            (
                "completed",
                pod(json!({"phase": "Succeeded", "containerStatuses": [
                    {"name": "app", "ready": false, "restartCount": 0,
                     "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]})),
                "Completed",
                "0/1",
            ),
            (
                "crash loop",
                pod(json!({"phase": "Running", "containerStatuses": [
                    {"name": "app", "ready": false, "restartCount": 4,
                     "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]})),
                "CrashLoopBackOff",
                "0/1",
            ),
            (
                "image pull error",
                pod(json!({"phase": "Pending", "containerStatuses": [
                    {"name": "app", "ready": false, "restartCount": 0,
                     "state": {"waiting": {"reason": "ErrImagePull"}}}]})),
                "ErrImagePull",
                "0/1",
            ),
            (
                "exit code without reason",
                pod(json!({"phase": "Failed", "containerStatuses": [
                    {"name": "app", "ready": false, "restartCount": 0,
                     "state": {"terminated": {"exitCode": 2}}}]})),
                "ExitCode:2",
                "0/1",
            ),
            (
                "signal without reason",
                pod(json!({"phase": "Failed", "containerStatuses": [
                    {"name": "app", "ready": false, "restartCount": 0,
                     "state": {"terminated": {"exitCode": 137, "signal": 9}}}]})),
                "Signal:9",
                "0/1",
            ),
            (
                "evicted",
                pod(json!({"phase": "Failed", "reason": "Evicted"})),
                "Evicted",
                "0/1",
            ),
            (
                "scheduling gated",
                pod(json!({"phase": "Pending", "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]})),
                "SchedulingGated",
                "0/1",
            ),
            (
                "completed container but another running, not ready",
                json!({"metadata": {"name": "p"},
                    "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
                    "status": {"phase": "Running", "containerStatuses": [
                        {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
                        {"name": "b", "ready": false, "restartCount": 0,
                         "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}}),
                "NotReady",
                "1/2",
            ),
        ];
        for (case, pod, status, ready) in cases {
            let summary = summarize(&pod);
            assert_eq!(summary.reason, status, "{case}");
            assert_eq!(
                format!("{}/{}", summary.ready, summary.total),
                ready,
                "{case}"
            );
        }
    }

    #[test]
    fn init_containers_show_progress_and_failures() {
        let with_init = |init_status: Value| {
            json!({
                "metadata": {"name": "p"},
                "spec": {"initContainers": [{"name": "init"}], "containers": [{"name": "app"}]},
                "status": {"phase": "Pending", "initContainerStatuses": [init_status],
                    "containerStatuses": [{"name": "app", "ready": false, "restartCount": 0,
                        "state": {"waiting": {"reason": "PodInitializing"}}}]},
            })
        };
        let cases = [
            (
                json!({"name": "init", "restartCount": 0, "state": {"running": {}}}),
                "Init:0/1",
            ),
            (
                json!({"name": "init", "restartCount": 0,
                    "state": {"waiting": {"reason": "PodInitializing"}}}),
                "Init:0/1",
            ),
            (
                json!({"name": "init", "restartCount": 2,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}}}),
                "Init:CrashLoopBackOff",
            ),
            (
                json!({"name": "init", "restartCount": 0,
                    "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}),
                "Init:Error",
            ),
            (
                json!({"name": "init", "restartCount": 0,
                    "state": {"terminated": {"exitCode": 3}}}),
                "Init:ExitCode:3",
            ),
            (
                json!({"name": "init", "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}),
                "PodInitializing",
            ),
        ];
        for (status, want) in cases {
            assert_eq!(
                summarize(&with_init(status.clone())).reason,
                want,
                "{status}"
            );
        }
    }

    #[test]
    fn sidecar_init_containers_count_as_containers() {
        let pod = json!({
            "metadata": {"name": "p"},
            "spec": {"initContainers": [{"name": "side", "restartPolicy": "Always"}],
                     "containers": [{"name": "app"}]},
            "status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"}],
                "initContainerStatuses": [{"name": "side", "started": true, "ready": true,
                    "restartCount": 1, "state": {"running": {}}}],
                "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0,
                    "state": {"running": {}}}]},
        });
        let summary = summarize(&pod);
        assert_eq!((summary.ready, summary.total), (2, 2));
        assert_eq!(summary.reason, "Running");
        assert_eq!(summary.restarts, 1);
    }

    #[test]
    fn terminating_pod_shows_terminating_unless_finished() {
        let mut running = pod(json!({"phase": "Running"}));
        running["metadata"]["deletionTimestamp"] = json!("2024-01-01T11:59:00Z");
        assert_eq!(summarize(&running).reason, "Terminating");

        let mut finished = pod(json!({"phase": "Succeeded"}));
        finished["metadata"]["deletionTimestamp"] = json!("2024-01-01T11:59:00Z");
        assert_eq!(summarize(&finished).reason, "Succeeded");

        let mut lost = pod(json!({"phase": "Running", "reason": "NodeLost"}));
        lost["metadata"]["deletionTimestamp"] = json!("2024-01-01T11:59:00Z");
        assert_eq!(summarize(&lost).reason, "Unknown");
    }

    #[test]
    fn restarts_show_age_of_last_restart() {
        let restarted = pod(json!({"phase": "Running", "containerStatuses": [
            {"name": "app", "ready": true, "restartCount": 5, "state": {"running": {}},
             "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2024-01-01T11:55:00Z"}}}]}));
        assert_eq!(cells(&restarted, now())[3], json!("5 (5m ago)"));

        let no_last_state = pod(json!({"phase": "Running", "containerStatuses": [
            {"name": "app", "ready": true, "restartCount": 2, "state": {"running": {}}}]}));
        assert_eq!(cells(&no_last_state, now())[3], json!("2"));
    }

    #[test]
    fn wide_cells_use_placeholders_and_readiness_gates() {
        let mut p = pod(json!({"phase": "Running", "podIPs": [{"ip": "10.0.0.5"}],
            "conditions": [{"type": "example.com/gate", "status": "True"}]}));
        p["spec"]["nodeName"] = json!("node-1");
        p["spec"]["readinessGates"] =
            json!([{"conditionType": "example.com/gate"}, {"conditionType": "other"}]);
        let row = cells(&p, now());
        assert_eq!(row[4], json!("60m"));
        assert_eq!(
            &row[5..],
            &[
                json!("10.0.0.5"),
                json!("node-1"),
                json!("<none>"),
                json!("1/2")
            ]
        );

        let bare = cells(&pod(json!({"phase": "Pending"})), now());
        assert_eq!(
            &bare[5..],
            &[
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
    }
}
