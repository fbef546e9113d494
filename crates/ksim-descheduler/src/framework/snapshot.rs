//! One consistent view of the cluster for a descheduling cycle, listed once
//! and indexed so that plugins never scan all pods per node.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::jiff::Timestamp;

/// The nodes, pods and namespaces of the cluster at the start of a cycle,
/// with pods indexed by the node they are bound to.
#[derive(Debug, Default)]
pub struct ClusterSnapshot {
    nodes: Vec<Node>,
    pods: Vec<Pod>,
    namespaces: Vec<Namespace>,
    pods_by_node: HashMap<String, Vec<usize>>,
    node_index: HashMap<String, usize>,
    now: Timestamp,
}

impl ClusterSnapshot {
    /// Indexes a listing. Pods not bound to a node are kept (some plugins
    /// look at them) but belong to no node.
    pub fn new(
        nodes: Vec<Node>,
        pods: Vec<Pod>,
        namespaces: Vec<Namespace>,
        now: Timestamp,
    ) -> Self {
        let mut pods_by_node: HashMap<String, Vec<usize>> = HashMap::new();
        for (index, pod) in pods.iter().enumerate() {
            if let Some(node_name) = pod.spec.as_ref().and_then(|spec| spec.node_name.as_ref()) {
                pods_by_node
                    .entry(node_name.clone())
                    .or_default()
                    .push(index);
            }
        }
        let node_index = nodes
            .iter()
            .enumerate()
            .filter_map(|(index, node)| Some((node.metadata.name.clone()?, index)))
            .collect();
        ClusterSnapshot {
            nodes,
            pods,
            namespaces,
            pods_by_node,
            node_index,
            now,
        }
    }

    /// Every node.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Every pod, bound or not.
    pub fn pods(&self) -> &[Pod] {
        &self.pods
    }

    /// Every namespace (for namespaceSelector and namespaceLabelSelector).
    pub fn namespaces(&self) -> &[Namespace] {
        &self.namespaces
    }

    /// The node called `name`.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.node_index.get(name).map(|&index| &self.nodes[index])
    }

    /// The pods bound to `node_name`, in listing order.
    pub fn pods_on_node<'a>(&'a self, node_name: &str) -> impl Iterator<Item = &'a Pod> + 'a {
        self.pods_by_node
            .get(node_name)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|&index| &self.pods[index])
    }

    /// The time the cycle started (pod ages are measured against it).
    pub fn now(&self) -> Timestamp {
        self.now
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(name: &str, node: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: node.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn node(name: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn pods_are_indexed_by_the_node_they_are_bound_to() {
        let snapshot = ClusterSnapshot::new(
            vec![node("a"), node("b")],
            vec![pod("p1", Some("a")), pod("p2", None), pod("p3", Some("a"))],
            vec![],
            Timestamp::UNIX_EPOCH,
        );
        let names: Vec<_> = snapshot
            .pods_on_node("a")
            .filter_map(|pod| pod.metadata.name.as_deref())
            .collect();
        assert_eq!(names, ["p1", "p3"]);
        assert_eq!(snapshot.pods_on_node("b").count(), 0);
        assert_eq!(snapshot.pods().len(), 3);
        assert!(snapshot.node("b").is_some());
        assert!(snapshot.node("c").is_none());
    }
}
