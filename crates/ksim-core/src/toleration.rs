//! Taint and toleration matching, as `v1helper` does it upstream: whether a
//! toleration tolerates a taint, finding the first untolerated taint of a
//! node, and the string forms of taints used in messages; and where a
//! node's taints and a pod's tolerations are read from.

use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};

/// The taint effects.
pub const EFFECT_NO_SCHEDULE: &str = "NoSchedule";
/// Prefer not to schedule onto the node.
pub const EFFECT_PREFER_NO_SCHEDULE: &str = "PreferNoSchedule";
/// Do not schedule and evict running pods.
pub const EFFECT_NO_EXECUTE: &str = "NoExecute";

/// The taint the node lifecycle controller puts on cordoned nodes.
pub use crate::status::TAINT_NODE_UNSCHEDULABLE;

/// The node's taints (none when `spec.taints` is unset).
pub fn node_taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|spec| spec.taints.as_deref())
        .unwrap_or_default()
}

/// The pod's tolerations (none when `spec.tolerations` is unset).
pub fn pod_tolerations(pod: &Pod) -> &[Toleration] {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.tolerations.as_deref())
        .unwrap_or_default()
}

/// Whether `toleration` tolerates `taint` (upstream `Toleration.ToleratesTaint`):
/// an empty effect matches every effect, an empty key (with `Exists`) every
/// key; operator `Equal` (or empty) compares values, `Exists` ignores them.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        "Exists" => true,
        _ => false,
    }
}

/// Whether any of `tolerations` tolerates `taint`.
pub fn tolerations_tolerate_taint(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

/// The first taint that passes `filter` and that no toleration tolerates
/// (upstream `FindMatchingUntoleratedTaint`).
pub fn find_matching_untolerated_taint<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    filter: impl Fn(&Taint) -> bool,
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|taint| filter(taint))
        .find(|taint| !tolerations_tolerate_taint(tolerations, taint))
}

/// Whether a taint's effect is NoSchedule or NoExecute (the effects the
/// scheduler's filters honour).
pub fn is_do_not_schedule_taint(taint: &Taint) -> bool {
    taint.effect == EFFECT_NO_SCHEDULE || taint.effect == EFFECT_NO_EXECUTE
}

/// The `key=value:effect` form of a taint (upstream `Taint.ToString`).
pub fn taint_to_string(taint: &Taint) -> String {
    let value = taint.value.as_deref().unwrap_or_default();
    match (taint.effect.is_empty(), value.is_empty()) {
        (true, true) => taint.key.clone(),
        (true, false) => format!("{}={}:", taint.key, value),
        (false, true) => format!("{}:{}", taint.key, taint.effect),
        (false, false) => format!("{}={}:{}", taint.key, value, taint.effect),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.to_string(),
            value: (!value.is_empty()).then(|| value.to_string()),
            effect: effect.to_string(),
            time_added: None,
        }
    }

    fn toleration(key: &str, operator: &str, value: &str, effect: &str) -> Toleration {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Toleration {
            key: some(key),
            operator: some(operator),
            value: some(value),
            effect: some(effect),
            toleration_seconds: None,
        }
    }

    #[test]
    fn toleration_matches_taint_as_upstream() {
        let cases = [
            (
                "empty toleration tolerates any valueless taint",
                toleration("", "", "", ""),
                taint("foo", "", "NoSchedule"),
                true,
            ),
            (
                "equal key and value",
                toleration("foo", "Equal", "bar", "NoSchedule"),
                taint("foo", "bar", "NoSchedule"),
                true,
            ),
            (
                "value differs",
                toleration("foo", "Equal", "baz", "NoSchedule"),
                taint("foo", "bar", "NoSchedule"),
                false,
            ),
            (
                "exists ignores value",
                toleration("foo", "Exists", "", "NoSchedule"),
                taint("foo", "bar", "NoSchedule"),
                true,
            ),
            (
                "effect differs",
                toleration("foo", "Exists", "", "NoExecute"),
                taint("foo", "bar", "NoSchedule"),
                false,
            ),
            (
                "empty effect matches all",
                toleration("foo", "Exists", "", ""),
                taint("foo", "bar", "PreferNoSchedule"),
                true,
            ),
            (
                "key differs",
                toleration("other", "Exists", "", ""),
                taint("foo", "", "NoSchedule"),
                false,
            ),
            (
                "empty key with exists tolerates everything",
                toleration("", "Exists", "", ""),
                taint("foo", "bar", "NoExecute"),
                true,
            ),
            (
                "empty operator means equal",
                toleration("foo", "", "bar", ""),
                taint("foo", "bar", "NoSchedule"),
                true,
            ),
            (
                "unknown operator",
                toleration("foo", "Near", "bar", ""),
                taint("foo", "bar", "NoSchedule"),
                false,
            ),
        ];
        for (name, toleration, taint, expected) in cases {
            assert_eq!(tolerates(&toleration, &taint), expected, "{name}");
        }
    }

    #[test]
    fn finds_first_untolerated_do_not_schedule_taint() {
        let taints = [
            taint("soft", "", "PreferNoSchedule"),
            taint("a", "1", "NoSchedule"),
            taint("b", "", "NoExecute"),
        ];
        let tolerations = [toleration("a", "Equal", "1", "NoSchedule")];
        let found =
            find_matching_untolerated_taint(&taints, &tolerations, is_do_not_schedule_taint);
        assert_eq!(found.map(|t| t.key.as_str()), Some("b"));
        let all = [toleration("", "Exists", "", "")];
        assert!(find_matching_untolerated_taint(&taints, &all, is_do_not_schedule_taint).is_none());
    }

    #[test]
    fn taint_strings() {
        assert_eq!(taint_to_string(&taint("k", "", "")), "k");
        assert_eq!(taint_to_string(&taint("k", "v", "")), "k=v:");
        assert_eq!(
            taint_to_string(&taint("k", "", "NoSchedule")),
            "k:NoSchedule"
        );
        assert_eq!(
            taint_to_string(&taint("k", "v", "NoExecute")),
            "k=v:NoExecute"
        );
    }
}
