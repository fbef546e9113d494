//! NodeUnschedulable: rejects cordoned nodes (`spec.unschedulable`) unless
//! the pod tolerates the `node.kubernetes.io/unschedulable:NoSchedule` taint.

use k8s_openapi::api::core::v1::{Pod, Taint};
use ksim_core::toleration::{
    EFFECT_NO_SCHEDULE, TAINT_NODE_UNSCHEDULABLE, tolerations_tolerate_taint,
};

use crate::framework::{CycleState, FilterPlugin, NodeInfo, Plugin, Status};

/// The plugin name.
pub const NAME: &str = "NodeUnschedulable";
/// The reason for a cordoned node.
pub const ERR_REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";

/// Filters out cordoned nodes.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeUnschedulable;

impl Plugin for NodeUnschedulable {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl FilterPlugin for NodeUnschedulable {
    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        if !ksim_core::status::is_node_unschedulable(&node.node) {
            return Status::success();
        }
        let taint = Taint {
            key: TAINT_NODE_UNSCHEDULABLE.to_string(),
            effect: EFFECT_NO_SCHEDULE.to_string(),
            ..Default::default()
        };
        if tolerations_tolerate_taint(ksim_core::toleration::pod_tolerations(pod), &taint) {
            return Status::success();
        }
        Status::unresolvable(ERR_REASON_UNSCHEDULABLE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Snapshot;
    use crate::testing::{filter_all, messages, node, pod};

    #[test]
    fn cordoned_nodes_reject_pods_without_toleration() {
        let cases = [
            ("schedulable node", pod("p").obj(), node("n").obj(), ""),
            (
                "cordoned node",
                pod("p").obj(),
                node("n").unschedulable().obj(),
                ERR_REASON_UNSCHEDULABLE,
            ),
            (
                "tolerating pod",
                pod("p")
                    .toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", "", "NoSchedule")
                    .obj(),
                node("n").unschedulable().obj(),
                "",
            ),
            (
                "toleration for another effect",
                pod("p")
                    .toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", "", "NoExecute")
                    .obj(),
                node("n").unschedulable().obj(),
                ERR_REASON_UNSCHEDULABLE,
            ),
        ];
        for (name, pod, node, expected) in cases {
            let snapshot = Snapshot::new([node], []);
            assert_eq!(
                messages(&filter_all(&NodeUnschedulable, &pod, &snapshot)),
                [expected],
                "{name}"
            );
        }
    }
}
