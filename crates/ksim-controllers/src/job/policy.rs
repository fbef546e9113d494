//! A Job's policies as pure functions: which `podFailurePolicy` rule a
//! failed pod matches (and so whether its failure counts, fails its index
//! or fails the Job), and whether the succeeded indexes of an Indexed Job
//! meet a `successPolicy` rule.

use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::{
    PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement, SuccessPolicy,
};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodStatus};

use super::progress::parse_indexes;

/// What a `podFailurePolicy` rule says to do with a failed pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureAction {
    /// `FailJob`: the whole Job fails.
    FailJob,
    /// `FailIndex`: the pod's index fails (with `backoffLimitPerIndex`).
    FailIndex,
    /// `Ignore`: the failure does not count toward the backoff limits.
    Ignore,
    /// `Count`: the failure counts, as without a policy.
    Count,
}

/// The outcome of matching a failed pod against a `podFailurePolicy`
/// (`matchPodFailurePolicy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureMatch {
    /// The Job's failure message when a `FailJob` rule matched.
    pub fail_job_message: Option<String>,
    /// Whether the failure counts toward `backoffLimit` (false for `Ignore`).
    pub counts: bool,
    /// The action of the first matching rule, if any rule matched.
    pub action: Option<FailureAction>,
}

impl FailureMatch {
    const UNMATCHED: FailureMatch = FailureMatch {
        fail_job_message: None,
        counts: true,
        action: None,
    };
}

/// Matches a failed pod against the Job's pod failure policy: the first
/// rule whose `onExitCodes` or `onPodConditions` requirement the pod meets
/// decides. Without a policy, or when no rule matches, the failure counts.
pub fn match_pod_failure_policy(policy: Option<&PodFailurePolicy>, pod: &Pod) -> FailureMatch {
    let Some(policy) = policy else {
        return FailureMatch::UNMATCHED;
    };
    let default_status = PodStatus::default();
    let status = pod.status.as_ref().unwrap_or(&default_status);
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    for (index, rule) in policy.rules.iter().enumerate() {
        let matched_message = if let Some(requirement) = &rule.on_exit_codes {
            match_exit_codes(status, requirement).map(|container| {
                let code = container
                    .state
                    .as_ref()
                    .and_then(|s| s.terminated.as_ref())
                    .map_or(0, |t| t.exit_code);
                format!(
                    "Container {} for pod {namespace}/{name} failed with exit code {code} matching {} rule at index {index}",
                    container.name, rule.action
                )
            })
        } else if let Some(patterns) = &rule.on_pod_conditions {
            status
                .conditions
                .iter()
                .flatten()
                .find(|c| {
                    patterns
                        .iter()
                        .any(|p| p.type_ == c.type_ && pattern_status(&p.status) == c.status)
                })
                .map(|condition| {
                    format!(
                        "Pod {namespace}/{name} has condition {} matching {} rule at index {index}",
                        condition.type_, rule.action
                    )
                })
        } else {
            None
        };
        let Some(message) = matched_message else {
            continue;
        };
        match rule.action.as_str() {
            "Ignore" => {
                return FailureMatch {
                    fail_job_message: None,
                    counts: false,
                    action: Some(FailureAction::Ignore),
                };
            }
            "Count" => {
                return FailureMatch {
                    fail_job_message: None,
                    counts: true,
                    action: Some(FailureAction::Count),
                };
            }
            "FailIndex" => {
                return FailureMatch {
                    fail_job_message: None,
                    counts: true,
                    action: Some(FailureAction::FailIndex),
                };
            }
            "FailJob" => {
                return FailureMatch {
                    fail_job_message: Some(message),
                    counts: true,
                    action: Some(FailureAction::FailJob),
                };
            }
            // An unknown action (validation rejects it) matches nothing.
            _ => {}
        }
    }
    FailureMatch::UNMATCHED
}

/// A pattern's status; unset is `True`, as the API server defaults it.
fn pattern_status(status: &str) -> &str {
    if status.is_empty() { "True" } else { status }
}

/// The first terminated container (then init container) whose non-zero
/// exit code meets the requirement.
fn match_exit_codes<'a>(
    status: &'a PodStatus,
    requirement: &PodFailurePolicyOnExitCodesRequirement,
) -> Option<&'a ContainerStatus> {
    let matching = |statuses: &'a Option<Vec<ContainerStatus>>| {
        statuses.iter().flatten().find(|container| {
            let Some(terminated) = container.state.as_ref().and_then(|s| s.terminated.as_ref())
            else {
                return false;
            };
            let named = requirement
                .container_name
                .as_ref()
                .is_none_or(|n| *n == container.name);
            let listed = requirement.values.contains(&terminated.exit_code);
            let operator_matches = match requirement.operator.as_str() {
                "In" => listed,
                "NotIn" => !listed,
                _ => false,
            };
            named && terminated.exit_code != 0 && operator_matches
        })
    };
    matching(&status.container_statuses).or_else(|| matching(&status.init_container_statuses))
}

/// The message of the first `successPolicy` rule the succeeded indexes
/// meet (`Matched rules at index N`), if any (`matchSuccessPolicy`).
pub fn match_success_policy(
    policy: Option<&SuccessPolicy>,
    completions: i32,
    succeeded: &BTreeSet<i32>,
) -> Option<String> {
    let policy = policy?;
    if succeeded.is_empty() {
        return None;
    }
    for (index, rule) in policy.rules.iter().enumerate() {
        let matched = match (&rule.succeeded_indexes, rule.succeeded_count) {
            (Some(indexes), count) => {
                let required = parse_indexes(indexes, completions);
                if required.is_empty() {
                    continue;
                }
                let contained = required.intersection(succeeded).count();
                match count {
                    None => contained == required.len(),
                    Some(count) => contained >= usize::try_from(count).unwrap_or(usize::MAX),
                }
            }
            (None, Some(count)) => succeeded.len() >= usize::try_from(count).unwrap_or(usize::MAX),
            (None, None) => false,
        };
        if matched {
            return Some(format!("Matched rules at index {index}"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn failed_pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "status": status,
        }))
        .expect("pod")
    }

    fn exited(name: &str, code: i32) -> serde_json::Value {
        json!({"name": name, "image": "i", "imageID": "", "ready": false, "restartCount": 0,
               "state": {"terminated": {"exitCode": code}}})
    }

    fn policy(rules: serde_json::Value) -> PodFailurePolicy {
        serde_json::from_value(json!({ "rules": rules })).expect("policy")
    }

    #[test]
    fn the_first_matching_rule_decides_a_failed_pod() {
        let rules = json!([
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [1, 2]}},
            {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [2]}},
        ]);
        let policy = policy(rules);
        let disrupted = json!([{"type": "DisruptionTarget", "status": "True"}]);
        let cases = [
            (
                "exit 42 in main fails the job",
                json!({"phase": "Failed", "containerStatuses": [exited("main", 42)]}),
                Some(FailureAction::FailJob),
                true,
            ),
            (
                "exit 42 in another container is not that rule",
                json!({"phase": "Failed", "containerStatuses": [exited("side", 42)]}),
                Some(FailureAction::Count),
                true,
            ),
            (
                "a disruption is ignored",
                json!({"phase": "Failed", "conditions": disrupted, "containerStatuses": [exited("main", 137)]}),
                Some(FailureAction::Ignore),
                false,
            ),
            (
                "NotIn skips listed codes",
                json!({"phase": "Failed", "containerStatuses": [exited("main", 2)]}),
                Some(FailureAction::FailIndex),
                true,
            ),
            (
                "exit code 0 matches no rule",
                json!({"phase": "Failed", "containerStatuses": [exited("main", 0)]}),
                None,
                true,
            ),
            (
                "init containers are looked at too",
                json!({"phase": "Failed", "initContainerStatuses": [exited("main", 42)]}),
                Some(FailureAction::FailJob),
                true,
            ),
        ];
        for (what, status, action, counts) in cases {
            let got = match_pod_failure_policy(Some(&policy), &failed_pod(status));
            assert_eq!(got.action, action, "{what}");
            assert_eq!(got.counts, counts, "{what}");
        }
    }

    #[test]
    fn fail_job_rules_carry_upstreams_messages() {
        let policy = policy(json!([
            {"action": "FailJob", "onPodConditions": [{"type": "ConfigIssue", "status": "True"}]},
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}},
        ]));
        let by_exit = failed_pod(json!({"phase": "Failed", "containerStatuses": [exited("c", 3)]}));
        assert_eq!(
            match_pod_failure_policy(Some(&policy), &by_exit)
                .fail_job_message
                .as_deref(),
            Some(
                "Container c for pod ns/p failed with exit code 3 matching FailJob rule at index 1"
            )
        );
        let by_condition = failed_pod(
            json!({"phase": "Failed", "conditions": [{"type": "ConfigIssue", "status": "True"}]}),
        );
        assert_eq!(
            match_pod_failure_policy(Some(&policy), &by_condition)
                .fail_job_message
                .as_deref(),
            Some("Pod ns/p has condition ConfigIssue matching FailJob rule at index 0")
        );
        assert_eq!(
            match_pod_failure_policy(None, &by_exit),
            FailureMatch::UNMATCHED
        );
    }

    #[test]
    fn success_policy_rules_match_indexes_and_counts() {
        let policy = |rules: serde_json::Value| -> SuccessPolicy {
            serde_json::from_value(json!({ "rules": rules })).expect("policy")
        };
        let done: BTreeSet<i32> = [0, 1, 2, 4].into_iter().collect();
        let cases = [
            (
                "all listed indexes",
                json!([{"succeededIndexes": "0-2"}]),
                Some(0),
            ),
            (
                "a listed index missing",
                json!([{"succeededIndexes": "2-3"}]),
                None,
            ),
            (
                "enough of the listed indexes",
                json!([{"succeededIndexes": "2-5", "succeededCount": 2}]),
                Some(0),
            ),
            ("a count alone", json!([{"succeededCount": 4}]), Some(0)),
            (
                "the second rule",
                json!([{"succeededCount": 5}, {"succeededIndexes": "4"}]),
                Some(1),
            ),
            (
                "indexes past completions are dropped",
                json!([{"succeededIndexes": "9"}]),
                None,
            ),
        ];
        for (what, rules, want) in cases {
            assert_eq!(
                match_success_policy(Some(&policy(rules)), 6, &done),
                want.map(|i| format!("Matched rules at index {i}")),
                "{what}"
            );
        }
    }
}
