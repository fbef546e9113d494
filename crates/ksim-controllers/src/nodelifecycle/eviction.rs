//! Taint-based eviction (upstream's `taint-eviction-controller`): when a pod
//! on a node with NoExecute taints must go. A pod that does not tolerate one
//! of them goes at once; one that tolerates them all goes after the shortest
//! tolerationSeconds of the tolerations used, counted from when the latest
//! taint was added; without tolerationSeconds it stays.

use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use ksim_core::toleration::tolerates;

/// When the pod is to be deleted, if ever.
pub fn eviction_deadline(
    tolerations: &[Toleration],
    taints: &[Taint],
    now: Timestamp,
) -> Option<Timestamp> {
    let no_execute: Vec<&Taint> = taints.iter().filter(|t| t.effect == "NoExecute").collect();
    if no_execute.is_empty() {
        return None;
    }
    let mut shortest: Option<i64> = None;
    for taint in &no_execute {
        let used: Vec<&Toleration> = tolerations.iter().filter(|t| tolerates(t, taint)).collect();
        if used.is_empty() {
            return Some(now);
        }
        for toleration in used {
            if let Some(seconds) = toleration.toleration_seconds {
                let seconds = seconds.max(0);
                shortest = Some(shortest.map_or(seconds, |s| s.min(seconds)));
            }
        }
    }
    let seconds = shortest?;
    let since = no_execute
        .iter()
        .filter_map(|t| t.time_added.as_ref().map(|t| t.0))
        .max()
        .unwrap_or(now);
    Some(
        since
            .checked_add(SignedDuration::from_secs(seconds))
            .unwrap_or(Timestamp::MAX),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deadlines_follow_tolerations() {
        let now: Timestamp = "2026-01-01T12:00:00Z".parse().expect("time");
        let added = "2026-01-01T11:59:00Z";
        let unreachable: Vec<Taint> = serde_json::from_value(json!([
            {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": added}
        ]))
        .expect("taints");
        let at = |seconds: i64| {
            Some(
                "2026-01-01T11:59:00Z"
                    .parse::<Timestamp>()
                    .expect("time")
                    .checked_add(SignedDuration::from_secs(seconds))
                    .expect("time"),
            )
        };
        let default = json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 300});
        let cases: Vec<(&str, serde_json::Value, Vec<Taint>, Option<Timestamp>)> = vec![
            ("no NoExecute taint", json!([]), vec![], None),
            ("untolerated", json!([]), unreachable.clone(), Some(now)),
            (
                "default 300 s",
                json!([default]),
                unreachable.clone(),
                at(300),
            ),
            (
                "shortest of the used tolerations",
                json!([default, {"operator": "Exists", "tolerationSeconds": 5}]),
                unreachable.clone(),
                at(5),
            ),
            (
                "forever",
                json!([{"operator": "Exists"}]),
                unreachable.clone(),
                None,
            ),
            (
                "negative is zero",
                json!([{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": -3}]),
                unreachable.clone(),
                at(0),
            ),
            (
                "other key does not tolerate",
                json!([{"key": "other", "operator": "Exists", "effect": "NoExecute"}]),
                unreachable,
                Some(now),
            ),
        ];
        for (what, tolerations, taints, want) in cases {
            let tolerations: Vec<Toleration> =
                serde_json::from_value(tolerations).expect("tolerations");
            assert_eq!(
                eviction_deadline(&tolerations, &taints, now),
                want,
                "{what}"
            );
        }
    }
}
