//! Options of the kubelet simulator: which nodes it manages, the addresses it
//! hands out, lease timing and concurrency.

use serde_json::Value;

use ksim_runtime::Clock;

use crate::error::KubeletError;
use crate::pod::DEFAULT_POD_CIDR;

/// The address templates get for a node without an InternalIP. Nodes made by
/// `ksim scale node` get theirs from 10.128.0.0/9 (see the CLI).
pub const DEFAULT_NODE_IP: &str = "10.128.0.1";
/// The kubelet port nodes advertise.
pub const DEFAULT_NODE_PORT: i64 = 10250;
/// Lease duration of managed nodes, as the kubelet's default.
pub const DEFAULT_LEASE_DURATION_SECONDS: i32 = 40;

/// The Node annotation that stops a node's simulated kubelet, as when its
/// machine dies: with value [`KUBELET_STOPPED`] the simulator stops renewing
/// the node's Lease and status and stops acting on its pods; removed (or set
/// to [`KUBELET_RUNNING`]) the kubelet resumes. `ksim node stop|start` set it.
pub const KUBELET_ANNOTATION: &str = "ksim.io/kubelet";
/// [`KUBELET_ANNOTATION`]'s value for a stopped kubelet.
pub const KUBELET_STOPPED: &str = "stopped";
/// [`KUBELET_ANNOTATION`]'s value for a running kubelet (the same as no annotation).
pub const KUBELET_RUNNING: &str = "running";

/// Whether the Node (as JSON) says its kubelet is stopped.
pub fn kubelet_stopped(node: &Value) -> bool {
    node.get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(KUBELET_ANNOTATION))
        .and_then(Value::as_str)
        == Some(KUBELET_STOPPED)
}

/// Which nodes the simulator takes care of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeSelection {
    /// Every node (the default inside a ksim cluster).
    All,
    /// Nodes whose annotation `key` is `value`.
    Annotation {
        /// Annotation key.
        key: String,
        /// Annotation value.
        value: String,
    },
    /// Nodes whose label `key` is `value`.
    Label {
        /// Label key.
        key: String,
        /// Label value.
        value: String,
    },
}

impl NodeSelection {
    /// `--manage-nodes-with-annotation-selector k=v`.
    pub fn annotation(selector: &str) -> Result<Self, KubeletError> {
        let (key, value) = split_selector(selector)?;
        Ok(Self::Annotation { key, value })
    }

    /// `--manage-nodes-with-label-selector k=v`.
    pub fn label(selector: &str) -> Result<Self, KubeletError> {
        let (key, value) = split_selector(selector)?;
        Ok(Self::Label { key, value })
    }

    /// Whether the Node (as JSON) is selected.
    pub fn selects(&self, node: &Value) -> bool {
        let get = |field: &str, key: &str| {
            node.get("metadata")
                .and_then(|m| m.get(field))
                .and_then(|m| m.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        match self {
            NodeSelection::All => true,
            NodeSelection::Annotation { key, value } => {
                get("annotations", key).as_deref() == Some(value)
            }
            NodeSelection::Label { key, value } => get("labels", key).as_deref() == Some(value),
        }
    }
}

fn split_selector(selector: &str) -> Result<(String, String), KubeletError> {
    let (key, value) = selector
        .split_once('=')
        .map(|(k, v)| (k.trim(), v.trim()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| {
            KubeletError::InvalidOption(format!(
                "invalid node selector {selector:?}: want key=value"
            ))
        })?;
    let value = value.strip_prefix('=').unwrap_or(value);
    Ok((key.to_owned(), value.to_owned()))
}

/// How the simulator runs.
#[derive(Clone, Debug)]
pub struct KubeletOptions {
    /// Managed nodes.
    pub manage: NodeSelection,
    /// Address of nodes without an InternalIP.
    pub node_ip: String,
    /// Kubelet port nodes advertise.
    pub node_port: i64,
    /// Pod CIDR of nodes without spec.podCIDR.
    pub default_pod_cidr: String,
    /// Lease duration; leases are renewed at a quarter of it. 0: no leases.
    pub lease_duration_seconds: i32,
    /// Install the Stage CRD and, when no Stage exists, the default stages.
    pub install_stages: bool,
    /// Concurrent workers applying stages (per kind) and renewing leases.
    pub workers: usize,
    /// The cluster's clock: timestamps, stage delays, lease renewals,
    /// retries, and the random source of jitter and stage choice.
    pub clock: Clock,
}

impl Default for KubeletOptions {
    fn default() -> Self {
        Self {
            manage: NodeSelection::All,
            node_ip: DEFAULT_NODE_IP.to_owned(),
            node_port: DEFAULT_NODE_PORT,
            default_pod_cidr: DEFAULT_POD_CIDR.to_owned(),
            lease_duration_seconds: DEFAULT_LEASE_DURATION_SECONDS,
            install_stages: true,
            workers: 8,
            clock: Clock::real(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selections_match_annotations_and_labels() {
        let node = json!({"metadata": {
            "labels": {"type": "kwok"},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        }});
        let cases = [
            (NodeSelection::All, true),
            (
                NodeSelection::annotation("kwok.x-k8s.io/node=fake").expect("valid"),
                true,
            ),
            (
                NodeSelection::annotation("kwok.x-k8s.io/node=real").expect("valid"),
                false,
            ),
            (NodeSelection::label("type=kwok").expect("valid"), true),
            (NodeSelection::label("type==kwok").expect("valid"), true),
            (
                NodeSelection::label("kwok.x-k8s.io/node=fake").expect("valid"),
                false,
            ),
        ];
        for (selection, want) in cases {
            assert_eq!(selection.selects(&node), want, "{selection:?}");
        }
    }

    #[test]
    fn malformed_selectors_are_errors() {
        for bad in ["", "novalue", "=v"] {
            assert!(NodeSelection::label(bad).is_err(), "{bad:?}");
        }
    }
}
