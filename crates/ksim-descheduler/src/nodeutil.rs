//! Node facts the plugins share: whether a node is ready and schedulable,
//! what its pods request, and whether a pod would fit on another node
//! (upstream's `nodeutil.PodFitsAnyOtherNode` / `PodFitsAnyNode`).

use k8s_openapi::api::core::v1::{Node, Pod};
use ksim_core::node_affinity::RequiredNodeAffinity;
use ksim_core::toleration::{find_matching_untolerated_taint, is_do_not_schedule_taint};

/// Whether the node's Ready condition is True.
pub fn is_node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|condition| condition.type_ == "Ready" && condition.status == "True")
        })
}

/// Whether the node is cordoned (`spec.unschedulable`).
pub fn is_node_unschedulable(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|spec| spec.unschedulable)
        .unwrap_or(false)
}

/// Whether `pod`'s nodeSelector, required node affinity and tolerations (of
/// NoSchedule and NoExecute taints) admit `node`. Resources are not checked.
pub fn pod_matches_node_constraints(pod: &Pod, node: &Node) -> bool {
    if !RequiredNodeAffinity::from_pod(pod).matches(node) {
        return false;
    }
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.tolerations.as_deref())
        .unwrap_or_default();
    let taints = node
        .spec
        .as_ref()
        .and_then(|spec| spec.taints.as_deref())
        .unwrap_or_default();
    find_matching_untolerated_taint(taints, tolerations, is_do_not_schedule_taint).is_none()
}
