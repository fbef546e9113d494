//! The `cluster-autoscaler-status` ConfigMap (key `status`), in the YAML
//! layout cluster-autoscaler writes since 1.30: `time`, `autoscalerStatus`,
//! `clusterWide` (health with node counts, scaleUp, scaleDown) and one
//! entry per node group, each state with its lastProbeTime and
//! lastTransitionTime.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};

use crate::runner::LoopReport;
use crate::scaledown::Unremovable;

/// The ConfigMap's name.
pub const STATUS_CONFIGMAP: &str = "cluster-autoscaler-status";
/// The annotation with the time of the last write.
pub const LAST_UPDATED_ANNOTATION: &str = "cluster-autoscaler.kubernetes.io/last-updated";

/// What the status of one loop is made of.
#[derive(Debug)]
pub struct StatusInput<'a> {
    pub now: DateTime<Utc>,
    pub report: &'a LoopReport,
    pub registered: usize,
    pub ready: usize,
    pub not_started: usize,
    pub unneeded: usize,
}

/// A state and when it last changed.
#[derive(Debug, Clone)]
struct Tracked {
    status: String,
    since: DateTime<Utc>,
}

/// Keeps the transition times between loops.
#[derive(Debug, Default)]
pub struct StatusTracker {
    states: HashMap<String, Tracked>,
    /// Group → when it last scaled up / down.
    scaled_up_at: HashMap<String, DateTime<Utc>>,
    scaled_down_at: HashMap<String, DateTime<Utc>>,
    /// `NoCandidates` or `CandidatesPresent`.
    pub scale_down_state: String,
    /// Node → why it is not removed (last loop).
    pub unremovable: BTreeMap<String, Unremovable>,
}

/// Go's `time.Time.String()` in UTC.
pub fn go_time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S%.9f +0000 UTC").to_string()
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

impl StatusTracker {
    /// Records a scale-up of `group`.
    pub fn scaled_up(&mut self, group: &str, now: DateTime<Utc>) {
        self.scaled_up_at.insert(group.to_string(), now);
    }

    /// Records a scale-down in `group`.
    pub fn scaled_down(&mut self, group: &str, now: DateTime<Utc>) {
        self.scaled_down_at.insert(group.to_string(), now);
    }

    fn track(&mut self, key: &str, status: &str, now: DateTime<Utc>) -> DateTime<Utc> {
        let entry = self.states.entry(key.to_string()).or_insert(Tracked {
            status: status.to_string(),
            since: now,
        });
        if entry.status != status {
            entry.status = status.to_string();
            entry.since = now;
        }
        entry.since
    }

    /// The `status` text for this loop.
    pub fn render(&mut self, input: &StatusInput<'_>) -> String {
        let now = input.now;
        let probe = rfc3339(now);
        let mut out = String::new();
        out.push_str(&format!("time: {}\n", go_time(now)));
        out.push_str("autoscalerStatus: Running\n");
        out.push_str("clusterWide:\n");
        let since = self.track("cluster/health", "Healthy", now);
        out.push_str("  health:\n    status: Healthy\n");
        out.push_str(&node_counts(
            "    ",
            input.registered,
            input.ready,
            input.not_started,
        ));
        out.push_str(&format!(
            "    lastProbeTime: \"{probe}\"\n    lastTransitionTime: \"{}\"\n",
            rfc3339(since)
        ));
        let up = if input.not_started > 0 || input.report.scaled_up.is_some() {
            "InProgress"
        } else {
            "NoActivity"
        };
        let since = self.track("cluster/scaleUp", up, now);
        out.push_str(&format!(
            "  scaleUp:\n    status: {up}\n    lastProbeTime: \"{probe}\"\n    lastTransitionTime: \"{}\"\n",
            rfc3339(since)
        ));
        let down = if input.unneeded > 0 {
            "CandidatesPresent"
        } else {
            "NoCandidates"
        };
        let since = self.track("cluster/scaleDown", down, now);
        out.push_str(&format!(
            "  scaleDown:\n    status: {down}\n    candidates: {}\n    lastProbeTime: \"{probe}\"\n    lastTransitionTime: \"{}\"\n",
            input.unneeded,
            rfc3339(since)
        ));
        if input.report.groups.is_empty() {
            out.push_str("nodeGroups: []\n");
            return out;
        }
        out.push_str("nodeGroups:\n");
        for group in &input.report.groups {
            out.push_str(&format!("- name: {}\n", group.name));
            let health =
                if group.ready + group.not_started >= group.min_size || group.target_size == 0 {
                    "Healthy"
                } else {
                    "Unhealthy"
                };
            let since = self.track(&format!("{}/health", group.name), health, now);
            out.push_str(&format!("  health:\n    status: {health}\n"));
            out.push_str(&node_counts(
                "    ",
                group.registered,
                group.ready,
                group.not_started,
            ));
            out.push_str(&format!(
                "    cloudProviderTarget: {}\n    minSize: {}\n    maxSize: {}\n    lastProbeTime: \"{probe}\"\n    lastTransitionTime: \"{}\"\n",
                group.target_size,
                group.min_size,
                group.max_size,
                rfc3339(since)
            ));
            let up = if group.backoff {
                "Backoff"
            } else if group.target_size > group.ready {
                "InProgress"
            } else {
                "NoActivity"
            };
            let since = self.track(&format!("{}/scaleUp", group.name), up, now);
            out.push_str(&format!(
                "  scaleUp:\n    status: {up}\n    lastProbeTime: \"{probe}\"\n    lastTransitionTime: \"{}\"\n",
                rfc3339(since)
            ));
            let down = if group.candidates > 0 {
                "CandidatesPresent"
            } else {
                "NoCandidates"
            };
            let since = self.track(&format!("{}/scaleDown", group.name), down, now);
            out.push_str(&format!(
                "  scaleDown:\n    status: {down}\n    candidates: {}\n    lastProbeTime: \"{probe}\"\n    lastTransitionTime: \"{}\"\n",
                group.candidates,
                rfc3339(since)
            ));
        }
        out
    }
}

fn node_counts(indent: &str, registered: usize, ready: usize, not_started: usize) -> String {
    let unready = registered.saturating_sub(ready + not_started);
    format!(
        "{indent}nodeCounts:\n{indent}  registered:\n{indent}    total: {registered}\n{indent}    ready: {ready}\n{indent}    notStarted: {not_started}\n{indent}    unready:\n{indent}      total: {unready}\n{indent}      resourceUnready: 0\n{indent}  longUnregistered: 0\n{indent}  unregistered: 0\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::GroupReport;

    #[test]
    fn the_status_is_yaml_with_upstream_fields_and_transition_times() {
        let t0: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().expect("time");
        let t1: DateTime<Utc> = "2026-01-01T00:00:10Z".parse().expect("time");
        let mut report = LoopReport::default();
        report.groups.push(GroupReport {
            name: "workers".into(),
            min_size: 1,
            max_size: 10,
            target_size: 4,
            registered: 4,
            ready: 3,
            not_started: 1,
            candidates: 0,
            backoff: false,
        });
        let mut tracker = StatusTracker::default();
        let input = StatusInput {
            now: t0,
            report: &report,
            registered: 4,
            ready: 3,
            not_started: 1,
            unneeded: 0,
        };
        let first = tracker.render(&input);
        let value: serde_json::Value = serde_saphyr::from_str(&first).expect("yaml");
        assert_eq!(value["autoscalerStatus"], "Running");
        assert_eq!(value["time"], "2026-01-01 00:00:00.000000000 +0000 UTC");
        let group = &value["nodeGroups"][0];
        assert_eq!(group["name"], "workers");
        assert_eq!(group["health"]["cloudProviderTarget"], 4);
        assert_eq!(group["health"]["nodeCounts"]["registered"]["notStarted"], 1);
        assert_eq!(group["scaleUp"]["status"], "InProgress");
        report.groups[0].ready = 4;
        report.groups[0].not_started = 0;
        let input = StatusInput {
            now: t1,
            report: &report,
            registered: 4,
            ready: 4,
            not_started: 0,
            unneeded: 0,
        };
        let second: serde_json::Value =
            serde_saphyr::from_str(&tracker.render(&input)).expect("yaml");
        let group = &second["nodeGroups"][0];
        assert_eq!(group["scaleUp"]["status"], "NoActivity");
        assert_eq!(
            group["scaleUp"]["lastTransitionTime"],
            "2026-01-01T00:00:10.000000000Z"
        );
        assert_eq!(
            group["health"]["lastTransitionTime"],
            "2026-01-01T00:00:00.000000000Z"
        );
    }
}
