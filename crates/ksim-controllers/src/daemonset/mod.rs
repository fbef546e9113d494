//! The DaemonSet controller: one pod per eligible node (nodeSelector,
//! required node affinity, NoSchedule/NoExecute taints against the
//! template's tolerations plus the daemon tolerations upstream adds), each
//! pinned to its node with required node affinity on `metadata.name` for
//! the scheduler to bind; pods of nodes that went away or no longer fit are
//! deleted; RollingUpdate with maxUnavailable; the status `kubectl rollout
//! status ds/<name>` reads; ControllerRevisions `<set>-<hash>` recording
//! each template (what `kubectl rollout history|undo ds` reads), old ones
//! beyond `revisionHistoryLimit` deleted; orphan pods and revisions that
//! match the selector adopted, pods that stop matching released.

mod controller;
mod history;
mod placement;
#[cfg(test)]
mod tests;

pub use controller::{TEMPLATE_GENERATION_LABEL, run};
pub use placement::{NodeFit, daemon_pod_spec, node_fit, target_node};
