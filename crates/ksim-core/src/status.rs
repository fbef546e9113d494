//! Small facts about pods, nodes and objects that many components ask,
//! stated once as upstream does: a pod's phase, whether it is terminal
//! (`podutil.IsPodTerminal`: Succeeded or Failed), active
//! (`controller.IsPodActive`), ready (`podutil.IsPodReady`) or a mirror
//! pod, its priority (`corev1helpers.PodPriority`: 0 when unset); whether a
//! node is Ready or cordoned; an object's controller
//! (`metav1.GetControllerOf`); and the well-known taint keys the node
//! lifecycle controller and the scheduler use.

use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// Taint of a node whose Ready condition is False.
pub const TAINT_NODE_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// Taint of a node whose Ready condition is Unknown.
pub const TAINT_NODE_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// Taint of a cordoned node.
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
/// Taint of a node under memory pressure.
pub const TAINT_NODE_MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
/// Taint of a node under disk pressure.
pub const TAINT_NODE_DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
/// Taint of a node under PID pressure.
pub const TAINT_NODE_PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
/// Taint of a node whose network is unavailable.
pub const TAINT_NODE_NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";

/// The annotation the kubelet puts on the API mirror of a static pod.
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// The pod's phase ("" when not reported).
pub fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|status| status.phase.as_deref())
        .unwrap_or_default()
}

/// Whether a pod phase is terminal (Succeeded or Failed).
pub fn is_terminal_phase(phase: &str) -> bool {
    matches!(phase, "Succeeded" | "Failed")
}

/// Whether the pod is terminal (its phase is Succeeded or Failed).
pub fn is_pod_terminal(pod: &Pod) -> bool {
    is_terminal_phase(pod_phase(pod))
}

/// Whether the pod is neither terminal nor being deleted.
pub fn is_pod_active(pod: &Pod) -> bool {
    !is_pod_terminal(pod) && pod.metadata.deletion_timestamp.is_none()
}

/// The pod's Ready condition, if it has one.
pub fn pod_ready_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|condition| condition.type_ == "Ready")
}

/// Whether the pod's Ready condition is True.
pub fn is_pod_ready(pod: &Pod) -> bool {
    pod_ready_condition(pod).is_some_and(|condition| condition.status == "True")
}

/// Whether the pod is the API mirror of a static pod.
pub fn is_mirror_pod(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|annotations| annotations.contains_key(MIRROR_POD_ANNOTATION))
}

/// The pod's priority: `spec.priority`, 0 when unset.
pub fn pod_priority(pod: &Pod) -> i32 {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.priority)
        .unwrap_or(0)
}

/// The node's Ready condition, if it has one.
pub fn node_ready_condition(node: &Node) -> Option<&NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|condition| condition.type_ == "Ready")
}

/// Whether the node's Ready condition is True.
pub fn is_node_ready(node: &Node) -> bool {
    node_ready_condition(node).is_some_and(|condition| condition.status == "True")
}

/// Whether the node is cordoned (`spec.unschedulable`).
pub fn is_node_unschedulable(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|spec| spec.unschedulable)
        .unwrap_or(false)
}

/// The object's controller: its owner reference with `controller: true`.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|owner| owner.controller == Some(true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn terminal_pods_are_succeeded_or_failed() {
        for (phase, terminal) in [
            ("Succeeded", true),
            ("Failed", true),
            ("Running", false),
            ("Pending", false),
            ("Unknown", false),
        ] {
            let pod: Pod =
                serde_json::from_value(json!({"status": {"phase": phase}})).expect("pod");
            assert_eq!(is_pod_terminal(&pod), terminal, "{phase}");
        }
        assert!(!is_pod_terminal(&Pod::default()));
    }

    #[test]
    fn active_pods_are_neither_terminal_nor_deleted() {
        let pod = |value: serde_json::Value| -> Pod { serde_json::from_value(value).expect("pod") };
        assert!(is_pod_active(&pod(json!({"status": {"phase": "Running"}}))));
        assert!(is_pod_active(&Pod::default()));
        assert!(!is_pod_active(&pod(json!({"status": {"phase": "Failed"}}))));
        assert!(!is_pod_active(&pod(json!({
            "metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"},
            "status": {"phase": "Running"}}))));
    }

    #[test]
    fn ready_pods_have_a_true_ready_condition() {
        let pod = |status: &str| -> Pod {
            serde_json::from_value(json!({"status": {"conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": status}]}}))
            .expect("pod")
        };
        assert!(is_pod_ready(&pod("True")));
        assert!(!is_pod_ready(&pod("False")));
        assert!(!is_pod_ready(&Pod::default()));
    }

    #[test]
    fn priority_is_zero_when_unset() {
        let pod: Pod = serde_json::from_value(json!({"spec": {"containers": [], "priority": -5}}))
            .expect("pod");
        assert_eq!(pod_priority(&pod), -5);
        assert_eq!(pod_priority(&Pod::default()), 0);
    }

    #[test]
    fn the_controller_is_the_owner_reference_marked_controller() {
        let meta: ObjectMeta = serde_json::from_value(json!({"ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "1"},
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "b", "uid": "2",
             "controller": false},
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "c", "uid": "3",
             "controller": true}]}))
        .expect("meta");
        assert_eq!(controller_of(&meta).map(|o| o.name.as_str()), Some("c"));
        assert!(controller_of(&ObjectMeta::default()).is_none());
    }

    #[test]
    fn mirror_pods_carry_the_mirror_annotation() {
        let mirror: Pod = serde_json::from_value(json!({"metadata": {"annotations": {
            "kubernetes.io/config.mirror": "abc"}}}))
        .expect("pod");
        assert!(is_mirror_pod(&mirror));
        assert!(!is_mirror_pod(&Pod::default()));
    }

    #[test]
    fn cordoned_nodes_are_unschedulable() {
        let node: Node =
            serde_json::from_value(json!({"spec": {"unschedulable": true}})).expect("node");
        assert!(is_node_unschedulable(&node));
        assert!(!is_node_unschedulable(&Node::default()));
    }

    #[test]
    fn ready_nodes_have_a_true_ready_condition() {
        let node = |status: &str| -> Node {
            serde_json::from_value(json!({"status": {"conditions": [
                {"type": "MemoryPressure", "status": "True"},
                {"type": "Ready", "status": status}]}}))
            .expect("node")
        };
        assert!(is_node_ready(&node("True")));
        assert!(!is_node_ready(&node("False")));
        assert!(!is_node_ready(&node("Unknown")));
        assert!(!is_node_ready(&Node::default()));
    }
}
