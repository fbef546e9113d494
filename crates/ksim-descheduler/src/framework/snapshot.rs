//! One consistent view of the cluster for a descheduling cycle, listed once
//! and indexed so that plugins never scan all pods per node; each pod's
//! resource requests are computed once per snapshot, on first use.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::jiff::Timestamp;
use ksim_core::resources::{PodResourcesOptions, ResourceList, pod_requests};

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

/// The nodes, pods and namespaces of the cluster at the start of a cycle,
/// with pods indexed by the node they are bound to.
#[derive(Debug, Default)]
pub struct ClusterSnapshot {
    nodes: Vec<Node>,
    pods: Vec<Pod>,
    namespaces: Vec<Namespace>,
    pods_by_node: HashMap<String, Vec<usize>>,
    node_index: HashMap<String, usize>,
    namespace_index: HashMap<String, usize>,
    now: Timestamp,
    /// Every pod's requests, in listing order, computed on first use.
    pod_requests: OnceLock<Vec<ResourceList>>,
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
        let namespace_index = namespaces
            .iter()
            .enumerate()
            .filter_map(|(index, namespace)| Some((namespace.metadata.name.clone()?, index)))
            .collect();
        ClusterSnapshot {
            nodes,
            namespace_index,
            pods,
            namespaces,
            pods_by_node,
            node_index,
            now,
            pod_requests: OnceLock::new(),
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

    /// The labels of the namespace called `name`, if it is known.
    pub fn namespace_labels(&self, name: &str) -> Option<&BTreeMap<String, String>> {
        self.namespace_index
            .get(name)
            .map(|&index| &self.namespaces[index])
            .map(|namespace| namespace.metadata.labels.as_ref().unwrap_or(&NO_LABELS))
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

    /// The pod's requests as upstream's `PodRequests` computes them
    /// (containers, init containers, sidecars, overhead; no defaults for
    /// containers that request nothing). Computed once per snapshot for
    /// every pod of it; a pod from elsewhere is computed on the spot.
    pub fn pod_requests<'s>(&'s self, pod: &Pod) -> Cow<'s, ResourceList> {
        match self.pod_index(pod) {
            Some(index) => Cow::Borrowed(&self.all_pod_requests()[index]),
            None => Cow::Owned(pod_requests(pod, &PodResourcesOptions::default())),
        }
    }

    fn all_pod_requests(&self) -> &[ResourceList] {
        self.pod_requests.get_or_init(|| {
            let options = PodResourcesOptions::default();
            self.pods
                .iter()
                .map(|pod| pod_requests(pod, &options))
                .collect()
        })
    }

    /// The position of `pod` in [`Self::pods`] when it is one of them
    /// (found by address: plugins hold references into the snapshot).
    fn pod_index(&self, pod: &Pod) -> Option<usize> {
        let size = std::mem::size_of::<Pod>();
        let offset = (pod as *const Pod as usize).checked_sub(self.pods.as_ptr() as usize)?;
        let index = offset / size;
        (offset % size == 0 && index < self.pods.len()).then_some(index)
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

    #[test]
    fn requests_are_cached_for_the_snapshots_pods_and_computed_for_others() {
        use k8s_openapi::api::core::v1::{Container, ResourceRequirements};
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        let requesting = |name: &str, cpu: &str| {
            let mut p = pod(name, Some("a"));
            p.spec.as_mut().expect("spec").containers = vec![Container {
                name: "c".into(),
                resources: Some(ResourceRequirements {
                    requests: Some([("cpu".to_string(), Quantity(cpu.into()))].into()),
                    ..Default::default()
                }),
                ..Default::default()
            }];
            p
        };
        let snapshot = ClusterSnapshot::new(
            vec![node("a")],
            vec![requesting("p1", "100m"), requesting("p2", "2")],
            vec![],
            Timestamp::UNIX_EPOCH,
        );
        let cpu = |requests: &ResourceList| requests.get("cpu").map(|q| q.milli_value());
        let p2 = &snapshot.pods()[1];
        assert!(matches!(snapshot.pod_requests(p2), Cow::Borrowed(_)));
        assert_eq!(cpu(&snapshot.pod_requests(p2)), Some(2000));
        assert_eq!(cpu(&snapshot.pod_requests(&snapshot.pods()[0])), Some(100));
        let outside = requesting("p3", "300m");
        assert!(matches!(snapshot.pod_requests(&outside), Cow::Owned(_)));
        assert_eq!(cpu(&snapshot.pod_requests(&outside)), Some(300));
    }
}
