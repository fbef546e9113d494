//! Node health as the node lifecycle controller judges it: when the kubelet
//! last showed signs of life (its Lease's renewTime or the Ready condition's
//! heartbeat), the Unknown conditions a silent node gets after the grace
//! period, and the taints a node's conditions and `spec.unschedulable` call for.

use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use ksim_core::status::{
    TAINT_NODE_DISK_PRESSURE, TAINT_NODE_MEMORY_PRESSURE, TAINT_NODE_NETWORK_UNAVAILABLE,
    TAINT_NODE_PID_PRESSURE,
};
pub use ksim_core::status::{
    TAINT_NODE_NOT_READY as NOT_READY_TAINT, TAINT_NODE_UNREACHABLE as UNREACHABLE_TAINT,
    TAINT_NODE_UNSCHEDULABLE as UNSCHEDULABLE_TAINT,
};

/// The conditions the controller sets to Unknown on a silent node.
const WATCHED_CONDITIONS: [&str; 4] = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// NoSchedule taints for a condition at a status (`nodeConditionToTaintKeyStatusMap`).
const CONDITION_TAINTS: [(&str, &str, &str); 6] = [
    ("Ready", "False", NOT_READY_TAINT),
    ("Ready", "Unknown", UNREACHABLE_TAINT),
    ("MemoryPressure", "True", TAINT_NODE_MEMORY_PRESSURE),
    ("DiskPressure", "True", TAINT_NODE_DISK_PRESSURE),
    ("NetworkUnavailable", "True", TAINT_NODE_NETWORK_UNAVAILABLE),
    ("PIDPressure", "True", TAINT_NODE_PID_PRESSURE),
];

fn condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// When the kubelet last showed it was alive: the later of the Lease's
/// renewTime and the Ready condition's lastHeartbeatTime.
pub fn last_probe(node: &Node, lease_renewed: Option<Timestamp>) -> Option<Timestamp> {
    let heartbeat = condition(node, "Ready")
        .and_then(|c| c.last_heartbeat_time.as_ref())
        .map(|t| t.0);
    match (heartbeat, lease_renewed) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// The node's conditions once it has been silent for longer than `grace`
/// (`tryUpdateNodeHealth`): Ready and the pressure conditions Unknown, with
/// upstream's reasons and messages. `None` when nothing changes.
pub fn stale_conditions(
    node: &Node,
    lease_renewed: Option<Timestamp>,
    now: Timestamp,
    grace: SignedDuration,
) -> Option<Vec<NodeCondition>> {
    stale_conditions_since(node, last_probe(node, lease_renewed), now, grace)
}

/// [`stale_conditions`] of a node last heard from at `probed` (the
/// controller's `probeTimestamp`: when it saw the last sign of life, not the
/// time that sign carries); a node never heard from counts from its creation.
pub fn stale_conditions_since(
    node: &Node,
    probed: Option<Timestamp>,
    now: Timestamp,
    grace: SignedDuration,
) -> Option<Vec<NodeCondition>> {
    let created = node.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let since = probed.or(created).unwrap_or(now);
    if since
        .checked_add(grace)
        .is_ok_and(|deadline| deadline >= now)
    {
        return None;
    }
    let mut conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut changed = false;
    for type_ in WATCHED_CONDITIONS {
        match conditions.iter_mut().find(|c| c.type_ == type_) {
            Some(existing) if existing.status == "Unknown" => {}
            Some(existing) => {
                existing.status = "Unknown".into();
                existing.reason = Some("NodeStatusUnknown".into());
                existing.message = Some("Kubelet stopped posting node status.".into());
                existing.last_transition_time = Some(Time(now));
                changed = true;
            }
            None => {
                conditions.push(NodeCondition {
                    type_: type_.into(),
                    status: "Unknown".into(),
                    reason: Some("NodeStatusNeverUpdated".into()),
                    message: Some("Kubelet never posted node status.".into()),
                    last_heartbeat_time: created.map(Time),
                    last_transition_time: Some(Time(now)),
                });
                changed = true;
            }
        }
    }
    changed.then_some(conditions)
}

fn taint(key: &str, effect: &str, added: Option<Timestamp>) -> Taint {
    Taint {
        key: key.into(),
        effect: effect.into(),
        value: None,
        time_added: added.map(Time),
    }
}

fn is_managed(taint: &Taint) -> bool {
    match taint.effect.as_str() {
        "NoExecute" => matches!(taint.key.as_str(), NOT_READY_TAINT | UNREACHABLE_TAINT),
        "NoSchedule" => {
            taint.key == UNSCHEDULABLE_TAINT
                || CONDITION_TAINTS.iter().any(|(_, _, key)| *key == taint.key)
        }
        _ => false,
    }
}

/// The taints the node should carry: the user's, plus the NoExecute taint
/// of its Ready status (`not-ready` for False, `unreachable` for Unknown),
/// the NoSchedule taints of its conditions, and `unschedulable` when
/// cordoned. Taints already present keep their timeAdded.
pub fn desired_taints(node: &Node, now: Timestamp) -> Vec<Taint> {
    let current: Vec<Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let mut wanted: Vec<Taint> = Vec::new();
    let ready = condition(node, "Ready").map(|c| c.status.as_str());
    match ready {
        Some("False") => wanted.push(taint(NOT_READY_TAINT, "NoExecute", Some(now))),
        Some("Unknown") => wanted.push(taint(UNREACHABLE_TAINT, "NoExecute", Some(now))),
        _ => {}
    }
    for (type_, status, key) in CONDITION_TAINTS {
        if condition(node, type_).is_some_and(|c| c.status == status) {
            wanted.push(taint(key, "NoSchedule", None));
        }
    }
    if ksim_core::status::is_node_unschedulable(node) {
        wanted.push(taint(UNSCHEDULABLE_TAINT, "NoSchedule", None));
    }
    let mut result: Vec<Taint> = current
        .iter()
        .filter(|t| {
            !is_managed(t)
                || wanted
                    .iter()
                    .any(|w| w.key == t.key && w.effect == t.effect)
        })
        .cloned()
        .collect();
    for want in wanted {
        if !result
            .iter()
            .any(|t| t.key == want.key && t.effect == want.effect)
        {
            result.push(want);
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: &str = "2026-01-01T12:00:00Z";

    fn node(value: serde_json::Value) -> Node {
        serde_json::from_value(value).expect("node")
    }

    fn now() -> Timestamp {
        NOW.parse().expect("time")
    }

    fn ready(status: &str, heartbeat: &str) -> serde_json::Value {
        json!({"type": "Ready", "status": status, "lastHeartbeatTime": heartbeat,
               "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "KubeletReady"})
    }

    #[test]
    fn a_node_is_stale_only_past_the_grace_period_after_its_last_probe() {
        let grace = SignedDuration::from_secs(40);
        let fresh_lease = Some(now() - SignedDuration::from_secs(10));
        let old_lease = Some(now() - SignedDuration::from_secs(100));
        let old = "2026-01-01T11:00:00Z";
        let recent = "2026-01-01T11:59:50Z";
        let cases = [
            ("renewed lease", ready("True", old), fresh_lease, false),
            ("recent heartbeat", ready("True", recent), old_lease, false),
            ("silent", ready("True", old), old_lease, true),
            ("silent, no lease", ready("True", old), None, true),
            ("already unknown", ready("Unknown", old), old_lease, false),
        ];
        for (what, ready, lease, stale) in cases {
            let mut conditions = vec![ready];
            for type_ in ["MemoryPressure", "DiskPressure", "PIDPressure"] {
                conditions.push(json!({"type": type_, "status": "Unknown"}));
            }
            let n = node(json!({"metadata": {"name": "n", "creationTimestamp": old},
                                "status": {"conditions": conditions}}));
            let got = stale_conditions(&n, lease, now(), grace);
            assert_eq!(got.is_some(), stale, "{what}");
            if let Some(conditions) = got {
                let ready = conditions
                    .iter()
                    .find(|c| c.type_ == "Ready")
                    .expect("ready");
                assert_eq!(ready.status, "Unknown");
                assert_eq!(
                    ready.message.as_deref(),
                    Some("Kubelet stopped posting node status.")
                );
                assert_eq!(ready.reason.as_deref(), Some("NodeStatusUnknown"));
            }
        }
    }

    #[test]
    fn a_node_that_never_posted_status_gets_never_updated_conditions() {
        let n =
            node(json!({"metadata": {"name": "n", "creationTimestamp": "2026-01-01T11:00:00Z"}}));
        let conditions =
            stale_conditions(&n, None, now(), SignedDuration::from_secs(40)).expect("stale");
        assert_eq!(conditions.len(), 4);
        assert!(conditions.iter().all(|c| c.status == "Unknown"
            && c.message.as_deref() == Some("Kubelet never posted node status.")));
        let young =
            node(json!({"metadata": {"name": "n", "creationTimestamp": "2026-01-01T11:59:59Z"}}));
        assert!(stale_conditions(&young, None, now(), SignedDuration::from_secs(40)).is_none());
    }

    #[test]
    fn taints_follow_readiness_conditions_and_cordon() {
        let keys = |taints: Vec<Taint>| -> Vec<String> {
            taints
                .into_iter()
                .map(|t| format!("{}:{}", t.key, t.effect))
                .collect()
        };
        let cases = [
            (
                json!({"status": {"conditions": [ready("True", NOW)]}}),
                vec![],
            ),
            (
                json!({"status": {"conditions": [ready("False", NOW)]}}),
                vec![
                    "node.kubernetes.io/not-ready:NoExecute",
                    "node.kubernetes.io/not-ready:NoSchedule",
                ],
            ),
            (
                json!({"status": {"conditions": [ready("Unknown", NOW)]}}),
                vec![
                    "node.kubernetes.io/unreachable:NoExecute",
                    "node.kubernetes.io/unreachable:NoSchedule",
                ],
            ),
            (
                json!({"spec": {"unschedulable": true}, "status": {"conditions": [ready("True", NOW)]}}),
                vec!["node.kubernetes.io/unschedulable:NoSchedule"],
            ),
            (
                // Recovered and uncordoned: the managed taints go, the user's stay.
                json!({"spec": {"taints": [
                    {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
                    {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                    {"key": "dedicated", "value": "db", "effect": "NoSchedule"}
                ]}, "status": {"conditions": [ready("True", NOW)]}}),
                vec!["dedicated:NoSchedule"],
            ),
        ];
        for (value, want) in cases {
            let mut value = value;
            value["metadata"] = json!({"name": "n"});
            assert_eq!(
                keys(desired_taints(&node(value.clone()), now())),
                want,
                "{value}"
            );
        }
    }

    #[test]
    fn existing_taints_keep_their_time_added() {
        let n = node(json!({"metadata": {"name": "n"},
            "spec": {"taints": [{"key": UNREACHABLE_TAINT, "effect": "NoExecute", "timeAdded": "2026-01-01T11:00:00Z"}]},
            "status": {"conditions": [ready("Unknown", NOW)]}}));
        let taints = desired_taints(&n, now());
        let unreachable = taints
            .iter()
            .find(|t| t.effect == "NoExecute")
            .expect("taint");
        assert_eq!(
            unreachable.time_added.as_ref().map(|t| t.0.to_string()),
            Some("2026-01-01T11:00:00Z".to_string())
        );
    }
}
