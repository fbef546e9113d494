//! What the simulator knows about managed nodes (addresses, pod CIDRs, UID) and
//! the template environment built over it for one rendering.

use std::sync::{Arc, Mutex, RwLock};

use serde_json::Value;

use crate::pod::PodIpAllocator;
use crate::template::TemplateEnv;

// Keyed by the cluster's own names and UIDs: foldhash rather than SipHash
// (every pod of a restored cluster goes through these maps at the start).
pub(super) type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;

/// The facts of a managed node templates and leases need.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeFacts {
    /// metadata.uid.
    pub uid: String,
    /// InternalIP addresses from status.addresses.
    pub internal_ips: Vec<String>,
    /// spec.podCIDRs, else spec.podCIDR alone.
    pub pod_cidrs: Vec<String>,
    /// Whether the node's kubelet is stopped (annotation
    /// [`KUBELET_ANNOTATION`](super::KUBELET_ANNOTATION) is `stopped`).
    pub stopped: bool,
}

impl NodeFacts {
    /// Reads the facts from a Node as JSON.
    pub fn of(node: &Value) -> Self {
        let strings = |pointer: &str| -> Vec<String> {
            node.pointer(pointer)
                .and_then(Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut pod_cidrs = strings("/spec/podCIDRs");
        if pod_cidrs.is_empty()
            && let Some(cidr) = node.pointer("/spec/podCIDR").and_then(Value::as_str)
            && !cidr.is_empty()
        {
            pod_cidrs.push(cidr.to_owned());
        }
        let internal_ips = node
            .pointer("/status/addresses")
            .and_then(Value::as_array)
            .map(|addresses| {
                addresses
                    .iter()
                    .filter(|a| a.get("type").and_then(Value::as_str) == Some("InternalIP"))
                    .filter_map(|a| a.get("address").and_then(Value::as_str).map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            uid: node
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            internal_ips,
            pod_cidrs,
            stopped: super::options::kubelet_stopped(node),
        }
    }
}

/// Managed nodes by name and the pod IP pools, shared by every rendering.
#[derive(Debug)]
pub struct Network {
    /// Managed nodes.
    pub nodes: RwLock<HashMap<String, NodeFacts>>,
    /// Pod IPs by pod UID.
    pub ips: Mutex<PodIpAllocator>,
    /// The address of a node that has no InternalIP.
    pub default_node_ip: String,
}

impl Network {
    /// The addresses of `node`: its InternalIPs, else the default node IP.
    pub fn node_ips(&self, node: &str) -> Vec<String> {
        let nodes = self.nodes.read().unwrap_or_else(|e| e.into_inner());
        match nodes.get(node) {
            Some(facts) if !facts.internal_ips.is_empty() => facts.internal_ips.clone(),
            _ => vec![self.default_node_ip.clone()],
        }
    }

    /// Whether `node` is managed.
    pub fn manages(&self, node: &str) -> bool {
        self.nodes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(node)
    }

    /// Whether `node` is managed and its kubelet runs (not stopped).
    pub fn runs(&self, node: &str) -> bool {
        self.nodes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(node)
            .is_some_and(|facts| !facts.stopped)
    }

    /// The pod CIDRs of `node` if it is managed.
    pub fn managed_pod_cidrs(&self, node: &str) -> Option<Vec<String>> {
        self.nodes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(node)
            .map(|f| f.pod_cidrs.clone())
    }

    /// The pod CIDRs of `node`.
    pub fn pod_cidrs(&self, node: &str) -> Vec<String> {
        self.nodes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(node)
            .map(|f| f.pod_cidrs.clone())
            .unwrap_or_default()
    }
}

/// The environment of one rendering: the time, the node in question, the network.
#[derive(Debug)]
pub struct RenderEnv {
    /// `Now`.
    pub now: String,
    /// `StartTime`.
    pub start_time: String,
    /// `NodeName`: the node rendered, or the pod's node.
    pub node_name: String,
    /// `NodePort`.
    pub node_port: i64,
    /// Nodes and pod IPs.
    pub network: Arc<Network>,
}

impl TemplateEnv for RenderEnv {
    fn now(&self) -> String {
        self.now.clone()
    }
    fn start_time(&self) -> String {
        self.start_time.clone()
    }
    fn node_ip(&self) -> String {
        self.network
            .node_ips(&self.node_name)
            .into_iter()
            .next()
            .unwrap_or_default()
    }
    fn node_name(&self) -> String {
        self.node_name.clone()
    }
    fn node_port(&self) -> i64 {
        self.node_port
    }
    fn node_ips_with(&self, node_name: &str) -> Vec<String> {
        self.network.node_ips(node_name)
    }
    fn pod_ips_with(
        &self,
        node_name: &str,
        host_network: bool,
        uid: &str,
        _name: &str,
        _namespace: &str,
    ) -> Vec<String> {
        let node_ips = self.network.node_ips(node_name);
        let cidrs = self.network.pod_cidrs(node_name);
        let mut ips = self.network.ips.lock().unwrap_or_else(|e| e.into_inner());
        match ips.pod_ips(uid, &cidrs, host_network, &node_ips) {
            Ok(ips) => ips,
            Err(error) => {
                tracing::warn!(node = node_name, %error, "no pod IP");
                Vec::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn network() -> Arc<Network> {
        let network = Network {
            nodes: RwLock::new(HashMap::default()),
            ips: Mutex::new(PodIpAllocator::new(crate::pod::DEFAULT_POD_CIDR)),
            default_node_ip: "10.128.0.1".into(),
        };
        let node = json!({
            "metadata": {"name": "n1", "uid": "u"},
            "spec": {"podCIDR": "10.0.3.0/24"},
            "status": {"addresses": [
                {"type": "Hostname", "address": "n1"},
                {"type": "InternalIP", "address": "10.128.0.13"},
            ]},
        });
        network
            .nodes
            .write()
            .expect("not poisoned")
            .insert("n1".into(), NodeFacts::of(&node));
        Arc::new(network)
    }

    #[test]
    fn node_facts_read_cidrs_and_internal_ips() {
        let facts = NodeFacts::of(&json!({
            "metadata": {"uid": "u"},
            "spec": {"podCIDR": "10.0.1.0/24", "podCIDRs": ["10.0.1.0/24", "fd00::/64"]},
            "status": {"addresses": [{"type": "InternalIP", "address": "1.2.3.4"}]},
        }));
        assert_eq!(facts.pod_cidrs, vec!["10.0.1.0/24", "fd00::/64"]);
        assert_eq!(facts.internal_ips, vec!["1.2.3.4"]);
        assert_eq!(facts.uid, "u");
        let bare = NodeFacts::of(&json!({"spec": {"podCIDR": "10.0.2.0/24"}}));
        assert_eq!(bare.pod_cidrs, vec!["10.0.2.0/24"]);
    }

    #[test]
    fn pods_get_ips_from_their_nodes_cidr_and_keep_them() {
        let env = RenderEnv {
            now: String::new(),
            start_time: String::new(),
            node_name: "n1".into(),
            node_port: 10250,
            network: network(),
        };
        let a = env.pod_ips_with("n1", false, "uid-a", "a", "ns");
        assert_eq!(a.len(), 1);
        assert!(a[0].starts_with("10.0.3."), "{a:?}");
        assert_eq!(env.pod_ips_with("n1", false, "uid-a", "a", "ns"), a);
        assert_ne!(env.pod_ips_with("n1", false, "uid-b", "b", "ns"), a);
        assert_eq!(
            env.pod_ips_with("n1", true, "uid-c", "c", "ns"),
            vec!["10.128.0.13"]
        );
        assert_eq!(env.node_ip(), "10.128.0.13");
        assert_eq!(env.node_ips_with("unknown"), vec!["10.128.0.1"]);
    }
}
