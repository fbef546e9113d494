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
//! released. Pods and nodes come from watch-fed caches (`informers`). The
//! work per event follows what changed: a pod event marks its node for its
//! set, a node event marks that node for the sets whose pod there must
//! change, and such a sync plans only the marked nodes, adjusting the
//! status counts the last full sync kept (`tally`); a new generation, a
//! retry, a rollout, minReadySeconds, adoption or release plan every node
//! of that one set. Creations and deletions wait on expectations.

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
