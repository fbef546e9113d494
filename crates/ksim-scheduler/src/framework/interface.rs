//! The extension points of the scheduling framework, as upstream's
//! `framework/interface.go`: one trait per extension point, and the
//! [`Plugin`] trait through which a profile finds which points a plugin
//! implements.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::cycle_state::CycleState;
use super::node_info::{NodeInfo, Snapshot};
use super::pod_info::PodInfo;
use super::profile::Profile;
use super::status::Status;

/// The highest score a Score plugin may give after normalization.
pub const MAX_NODE_SCORE: i64 = 100;
/// The lowest.
pub const MIN_NODE_SCORE: i64 = 0;

/// A plugin: its name and the extension points it implements.
pub trait Plugin: Send + Sync {
    /// The name used in configuration and messages (`NodeResourcesFit`).
    fn name(&self) -> &'static str;
    /// QueueSort, if implemented.
    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        None
    }
    /// PreEnqueue, if implemented.
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        None
    }
    /// PreFilter, if implemented.
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        None
    }
    /// Filter, if implemented.
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        None
    }
    /// PostFilter, if implemented.
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        None
    }
    /// PreScore, if implemented.
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        None
    }
    /// Score (and NormalizeScore), if implemented.
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        None
    }
    /// Reserve, if implemented.
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        None
    }
    /// Permit, if implemented.
    fn as_permit(&self) -> Option<&dyn PermitPlugin> {
        None
    }
    /// PreBind, if implemented.
    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        None
    }
    /// Bind, if implemented.
    fn as_bind(&self) -> Option<&dyn BindPlugin> {
        None
    }
}

/// A pod waiting in the scheduling queue.
#[derive(Debug, Clone)]
pub struct QueuedPodInfo {
    pub pod: Arc<Pod>,
    /// When the pod was (last) added to the queue, in any monotonic unit.
    pub timestamp: u64,
    /// Scheduling attempts so far.
    pub attempts: u32,
}

/// Orders the active queue.
pub trait QueueSortPlugin {
    /// Whether `a` goes before `b`.
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool;
}

/// Decides whether a pod may enter the active queue at all.
pub trait PreEnqueuePlugin {
    /// Success lets the pod in.
    fn pre_enqueue(&self, pod: &Pod) -> Status;
}

/// The nodes a PreFilter plugin narrows the cycle to; `None` means all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreFilterResult {
    pub node_names: Option<BTreeSet<String>>,
}

impl PreFilterResult {
    /// Whether every node stays a candidate.
    pub fn all_nodes(&self) -> bool {
        self.node_names.is_none()
    }

    /// The intersection of two results.
    pub fn merge(self, other: PreFilterResult) -> PreFilterResult {
        match (self.node_names, other.node_names) {
            (None, names) | (names, None) => PreFilterResult { node_names: names },
            (Some(a), Some(b)) => PreFilterResult {
                node_names: Some(a.intersection(&b).cloned().collect()),
            },
        }
    }
}

/// Runs once per cycle before Filter; may precompute into the state.
pub trait PreFilterPlugin {
    /// Skip makes the framework skip this plugin's Filter.
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status);

    /// PreFilter extension: `added` now runs on `node` (preemption dry runs).
    fn add_pod(
        &self,
        _state: &mut CycleState,
        _pod: &Pod,
        _added: &PodInfo,
        _node: &NodeInfo,
    ) -> Status {
        Status::success()
    }

    /// PreFilter extension: `removed` no longer runs on `node`.
    fn remove_pod(
        &self,
        _state: &mut CycleState,
        _pod: &Pod,
        _removed: &PodInfo,
        _node: &NodeInfo,
    ) -> Status {
        Status::success()
    }
}

/// Says whether the pod fits one node.
pub trait FilterPlugin {
    /// Success, Unschedulable or UnschedulableAndUnresolvable (Error fails the cycle).
    fn filter(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status;
}

/// What a PostFilter plugin proposes: a nominated node and the pods to
/// evict from it (preemption victims).
#[derive(Debug, Clone, Default)]
pub struct PostFilterResult {
    /// `Some("")` asks to clear the pod's nominatedNodeName.
    pub nominated_node_name: Option<String>,
    pub victims: Vec<Arc<Pod>>,
}

/// Runs when no node fits (preemption).
pub trait PostFilterPlugin {
    /// Success with a nominated node, or why not.
    fn post_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        snapshot: &Snapshot,
        profile: &Profile,
        diagnosis: &super::schedule_one::Diagnosis,
    ) -> (Option<PostFilterResult>, Status);
}

/// Runs once per cycle before Score, over the feasible nodes.
pub trait PreScorePlugin {
    /// Skip makes the framework skip this plugin's Score.
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        nodes: &[&NodeInfo],
        snapshot: &Snapshot,
    ) -> Status;
}

/// Scores one feasible node, then normalizes all scores to 0..=100.
pub trait ScorePlugin {
    /// The raw score.
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Result<i64, Status>;
    /// The raw scores of `nodes` (the nodes PreScore was given, in its
    /// order) into `scores`; by default one [`ScorePlugin::score`] per node.
    /// Plugins that resolve what they need per node once in PreScore
    /// override it.
    fn score_nodes(
        &self,
        state: &CycleState,
        pod: &Pod,
        nodes: &[&NodeInfo],
        scores: &mut [i64],
    ) -> Result<(), Status> {
        for (slot, node) in scores.iter_mut().zip(nodes) {
            *slot = self.score(state, pod, node)?;
        }
        Ok(())
    }
    /// Rewrites `scores` (parallel to `nodes`) into 0..=100.
    fn normalize_score(
        &self,
        _state: &CycleState,
        _pod: &Pod,
        _nodes: &[&NodeInfo],
        _scores: &mut [i64],
    ) -> Status {
        Status::success()
    }
}

/// Reserves cluster state for the chosen node (and undoes it).
pub trait ReservePlugin {
    /// Reserve.
    fn reserve(&self, state: &mut CycleState, pod: &Pod, node_name: &str) -> Status;
    /// Undo a reservation.
    fn unreserve(&self, state: &mut CycleState, pod: &Pod, node_name: &str);
}

/// Approves, denies or delays the binding.
pub trait PermitPlugin {
    /// Success, Unschedulable, or Wait with a timeout.
    fn permit(&self, state: &mut CycleState, pod: &Pod, node_name: &str) -> (Status, Duration);
}

/// Prepares the binding.
pub trait PreBindPlugin {
    /// Success lets binding go on.
    fn pre_bind(&self, state: &mut CycleState, pod: &Pod, node_name: &str) -> Status;
}

/// Binds the pod; Skip hands over to the next binder.
pub trait BindPlugin {
    /// Success, Skip or Error.
    fn bind(&self, state: &mut CycleState, pod: &Pod, node_name: &str) -> Status;
}

/// Upstream `helper.DefaultNormalizeScore`: scales scores so the highest is
/// `max_priority`, optionally reversed (lower raw score is better).
pub fn default_normalize_score(max_priority: i64, reverse: bool, scores: &mut [i64]) {
    let max_count = scores.iter().copied().max().unwrap_or(0).max(0);
    if max_count == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| *s = max_priority);
        }
        return;
    }
    for score in scores.iter_mut() {
        let scaled = i128::from(max_priority) * i128::from(*score) / i128::from(max_count);
        let scaled = i64::try_from(scaled).unwrap_or(0);
        *score = if reverse {
            max_priority.saturating_sub(scaled)
        } else {
            scaled
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_normalize_scales_and_reverses() {
        let cases: &[(&[i64], bool, &[i64])] = &[
            (&[0, 0], false, &[0, 0]),
            (&[0, 0], true, &[100, 100]),
            (&[1, 2, 4], false, &[25, 50, 100]),
            (&[1, 2, 4], true, &[75, 50, 0]),
            (&[3], false, &[100]),
        ];
        for (input, reverse, expected) in cases {
            let mut scores = input.to_vec();
            default_normalize_score(MAX_NODE_SCORE, *reverse, &mut scores);
            assert_eq!(&scores, expected, "{input:?} reverse={reverse}");
        }
    }

    #[test]
    fn pre_filter_results_intersect() {
        let names = |n: &[&str]| PreFilterResult {
            node_names: Some(n.iter().map(|s| s.to_string()).collect()),
        };
        assert!(
            PreFilterResult::default()
                .merge(PreFilterResult::default())
                .all_nodes()
        );
        assert_eq!(
            PreFilterResult::default().merge(names(&["a"])),
            names(&["a"])
        );
        assert_eq!(names(&["a", "b"]).merge(names(&["b", "c"])), names(&["b"]));
    }
}
