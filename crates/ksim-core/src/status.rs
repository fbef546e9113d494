//! Small facts about pods and nodes that many components ask: whether a pod
//! is terminal (upstream `podutil.IsPodTerminal`: phase Succeeded or
//! Failed), whether a node is Ready (its Ready condition is True), and the
//! well-known taint keys the node lifecycle controller and the scheduler use.

use k8s_openapi::api::core::v1::{Node, Pod};

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

/// Whether a pod phase is terminal (Succeeded or Failed).
pub fn is_terminal_phase(phase: &str) -> bool {
    matches!(phase, "Succeeded" | "Failed")
}

/// Whether the pod is terminal (its phase is Succeeded or Failed).
pub fn is_pod_terminal(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|status| status.phase.as_deref())
        .is_some_and(is_terminal_phase)
}

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
