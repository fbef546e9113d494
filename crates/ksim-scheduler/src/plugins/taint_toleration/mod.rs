//! TaintToleration: Filter rejects nodes with a NoSchedule/NoExecute taint
//! the pod does not tolerate; Score prefers nodes with fewer untolerated
//! PreferNoSchedule taints.

use k8s_openapi::api::core::v1::{Pod, Toleration};
use ksim_core::toleration::{
    EFFECT_PREFER_NO_SCHEDULE, find_matching_untolerated_taint, is_do_not_schedule_taint,
    tolerations_tolerate_taint,
};

use crate::framework::{
    CycleState, FilterPlugin, MAX_NODE_SCORE, NodeInfo, Plugin, PreScorePlugin, ScorePlugin,
    Snapshot, Status, default_normalize_score,
};

/// The plugin name.
pub const NAME: &str = "TaintToleration";
const PRE_SCORE_KEY: &str = "PreScoreTaintToleration";

/// Filters and scores nodes by taints.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaintToleration;

use ksim_core::toleration::{node_taints, pod_tolerations as tolerations};

impl Plugin for TaintToleration {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl FilterPlugin for TaintToleration {
    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        let taints = node_taints(&node.node);
        match find_matching_untolerated_taint(taints, tolerations(pod), is_do_not_schedule_taint) {
            None => Status::success(),
            Some(taint) => Status::unresolvable(format!(
                "node(s) had untolerated taint {{{}: {}}}",
                taint.key,
                taint.value.as_deref().unwrap_or_default()
            )),
        }
    }
}

impl PreScorePlugin for TaintToleration {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        _nodes: &[&NodeInfo],
        _snapshot: &Snapshot,
    ) -> Status {
        let prefer_no_schedule: Vec<Toleration> = tolerations(pod)
            .iter()
            .filter(|t| {
                let effect = t.effect.as_deref().unwrap_or_default();
                effect.is_empty() || effect == EFFECT_PREFER_NO_SCHEDULE
            })
            .cloned()
            .collect();
        state.write(PRE_SCORE_KEY, prefer_no_schedule);
        Status::success()
    }
}

impl ScorePlugin for TaintToleration {
    fn score(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let tolerations = state
            .read::<Vec<Toleration>>(PRE_SCORE_KEY)
            .ok_or_else(|| {
                Status::error(format!(
                    "reading {PRE_SCORE_KEY:?} from cycleState: not found"
                ))
            })?;
        let count = node_taints(&node.node)
            .iter()
            .filter(|t| t.effect == EFFECT_PREFER_NO_SCHEDULE)
            .filter(|t| !tolerations_tolerate_taint(tolerations, t))
            .count();
        Ok(i64::try_from(count).unwrap_or(i64::MAX))
    }

    fn normalize_score(
        &self,
        _state: &CycleState,
        _pod: &Pod,
        _nodes: &[&NodeInfo],
        scores: &mut [i64],
    ) -> Status {
        default_normalize_score(MAX_NODE_SCORE, true, scores);
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::testing::{filter_all, messages, node, pod, score_all};

    #[test]
    fn filter_rejects_untolerated_hard_taints() {
        let cases = [
            ("no taints", pod("p").obj(), node("n").obj(), ""),
            (
                "untolerated NoSchedule",
                pod("p").obj(),
                node("n").taint("dedicated", "user1", "NoSchedule").obj(),
                "node(s) had untolerated taint {dedicated: user1}",
            ),
            (
                "tolerated by equal",
                pod("p")
                    .toleration("dedicated", "Equal", "user1", "NoSchedule")
                    .obj(),
                node("n").taint("dedicated", "user1", "NoSchedule").obj(),
                "",
            ),
            (
                "value mismatch",
                pod("p")
                    .toleration("dedicated", "Equal", "user2", "NoSchedule")
                    .obj(),
                node("n").taint("dedicated", "user1", "NoSchedule").obj(),
                "node(s) had untolerated taint {dedicated: user1}",
            ),
            (
                "tolerated by exists",
                pod("p").toleration("foo", "Exists", "", "NoSchedule").obj(),
                node("n").taint("foo", "bar", "NoSchedule").obj(),
                "",
            ),
            (
                "PreferNoSchedule ignored",
                pod("p").obj(),
                node("n").taint("soft", "", "PreferNoSchedule").obj(),
                "",
            ),
            (
                "NoExecute counts",
                pod("p").obj(),
                node("n")
                    .taint("node.kubernetes.io/not-ready", "", "NoExecute")
                    .obj(),
                "node(s) had untolerated taint {node.kubernetes.io/not-ready: }",
            ),
            (
                "cordon taint",
                pod("p").obj(),
                node("n")
                    .taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
                    .obj(),
                "node(s) had untolerated taint {node.kubernetes.io/unschedulable: }",
            ),
            (
                "effect mismatch",
                pod("p").toleration("foo", "Exists", "", "NoExecute").obj(),
                node("n").taint("foo", "", "NoSchedule").obj(),
                "node(s) had untolerated taint {foo: }",
            ),
        ];
        for (name, pod, node, expected) in cases {
            let snapshot = Snapshot::new([node], []);
            let statuses = filter_all(&TaintToleration, &pod, &snapshot);
            assert_eq!(messages(&statuses), [expected], "{name}");
            if !expected.is_empty() {
                assert_eq!(
                    statuses[0].code(),
                    Code::UnschedulableAndUnresolvable,
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn score_prefers_fewer_untolerated_soft_taints() {
        let cases = [
            (
                "tolerated soft taint scores best",
                pod("p")
                    .toleration("foo", "Equal", "bar", "PreferNoSchedule")
                    .obj(),
                vec![
                    node("a").taint("foo", "bar", "PreferNoSchedule").obj(),
                    node("b").taint("foo", "blah", "PreferNoSchedule").obj(),
                ],
                vec![100, 0],
            ),
            (
                "more untolerated taints score less",
                pod("p").obj(),
                vec![
                    node("a").obj(),
                    node("b").taint("x", "", "PreferNoSchedule").obj(),
                    node("c")
                        .taint("x", "", "PreferNoSchedule")
                        .taint("y", "", "PreferNoSchedule")
                        .obj(),
                ],
                vec![100, 50, 0],
            ),
            (
                "hard taints do not count",
                pod("p").obj(),
                vec![
                    node("a").taint("x", "", "NoSchedule").obj(),
                    node("b").obj(),
                ],
                vec![100, 100],
            ),
            (
                "NoSchedule toleration does not tolerate soft taints",
                pod("p").toleration("x", "Exists", "", "NoSchedule").obj(),
                vec![
                    node("a").taint("x", "", "PreferNoSchedule").obj(),
                    node("b").obj(),
                ],
                vec![0, 100],
            ),
        ];
        for (name, pod, nodes, expected) in cases {
            let snapshot = Snapshot::new(nodes, []);
            assert_eq!(
                score_all(&TaintToleration, &pod, &snapshot),
                Some(expected),
                "{name}"
            );
        }
    }
}
