//! The DaemonSet controller: one pod per eligible node (nodeSelector,
//! required node affinity, NoSchedule/NoExecute taints against the
//! template's tolerations plus the daemon tolerations upstream adds), each
//! pinned to its node with required node affinity on `metadata.name` for
//! the scheduler to bind; pods of nodes that went away or no longer fit are
//! deleted; RollingUpdate with maxUnavailable; the status `kubectl rollout
//! status ds/<name>` reads; ControllerRevisions `<set>-<hash>` recording
//! each template (what `kubectl rollout history|undo ds` reads), old ones
//! beyond `revisionHistoryLimit` deleted; orphan pods and revisions that
//! match the selector adopted, pods and revisions that stop matching
//! released. Pods and nodes come from watch-fed caches (`informers`): a pod
//! event syncs its set, a node event only the sets whose pod on that node
//! must change; creations and deletions wait on expectations.

mod controller;
mod history;
mod informers;
mod placement;
mod tally;
#[cfg(test)]
mod tests;

pub use controller::{BURST_REPLICAS, TEMPLATE_GENERATION_LABEL, run};
pub use placement::{
    NodeFit, Placement, daemon_pod_spec, node_fit, placement_changed, target_node,
};
