//! Node facts the plugins share: whether a node is ready and schedulable,
//! what its pods request, and whether a pod would fit on another node
//! (upstream's `pkg/descheduler/node`: `NodeFit`, `PodFitsAnyOtherNode`,
//! `PodFitsAnyNode`, `NodeUtilization`), plus the pod facts the balance
//! plugins order by (QoS class, priority, the soft no-eviction annotation).

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Node, Pod};
use ksim_core::node_affinity::RequiredNodeAffinity;
use ksim_core::pod_affinity::{ParsedPodAffinityTerm, pod_namespace};
pub use ksim_core::qos::{QosClass, pod_qos};
use ksim_core::quantity::{Quantity, parse_or_zero};
use ksim_core::resources::{
    RESOURCE_CPU, RESOURCE_PODS, Resource, ResourceList, insufficient_resources,
};
use ksim_core::selector::Labels;
pub use ksim_core::status::is_node_ready;
use ksim_core::toleration::{find_matching_untolerated_taint, is_do_not_schedule_taint};

use crate::framework::ClusterSnapshot;

/// The annotation by which a pod asks (softly) not to be evicted; plugins
/// consider such pods last (upstream `SoftNoEvictionAnnotationKey`).
pub const PREFER_NO_EVICTION_ANNOTATION: &str =
    "descheduler.alpha.kubernetes.io/prefer-no-eviction";

/// Whether the node is cordoned (`spec.unschedulable`).
pub use ksim_core::status::is_node_unschedulable;

/// Whether `pod`'s nodeSelector, required node affinity and tolerations (of
/// NoSchedule and NoExecute taints) admit `node`. Resources are not checked.
pub fn pod_matches_node_constraints(pod: &Pod, node: &Node) -> bool {
    if !RequiredNodeAffinity::from_pod(pod).matches(node) {
        return false;
    }
    pod_tolerates_node_taints(pod, node)
}

/// Whether the pod tolerates the node's NoSchedule and NoExecute taints.
fn pod_tolerates_node_taints(pod: &Pod, node: &Node) -> bool {
    find_matching_untolerated_taint(
        node_taints(node),
        ksim_core::toleration::pod_tolerations(pod),
        is_do_not_schedule_taint,
    )
    .is_none()
}

/// The node's taints (empty when it has none).
pub use ksim_core::toleration::node_taints;

/// Whether the pod has finished (phase Succeeded or Failed): such pods hold
/// no resources and are left out of node listings, as upstream's
/// `ListPodsOnANode`.
pub use ksim_core::status::is_pod_terminal;

/// The non-terminal pods bound to `node_name` (upstream `ListPodsOnANode`
/// without a filter).
pub fn active_pods_on_node<'a>(
    snapshot: &'a ClusterSnapshot,
    node_name: &str,
) -> impl Iterator<Item = &'a Pod> + 'a {
    snapshot
        .pods_on_node(node_name)
        .filter(|pod| !is_pod_terminal(pod))
}

/// The node's allocatable resources, or its capacity when it reports no
/// allocatable (upstream `referencedResourceListForNodeCapacity`).
pub fn node_allocatable(node: &Node) -> ResourceList {
    let Some(status) = node.status.as_ref() else {
        return ResourceList::new();
    };
    let chosen = match &status.allocatable {
        Some(allocatable) if !allocatable.is_empty() => Some(allocatable),
        _ => status.capacity.as_ref(),
    };
    chosen
        .map(|map| {
            map.iter()
                .map(|(name, quantity)| (name.clone(), parse_or_zero(quantity)))
                .collect()
        })
        .unwrap_or_default()
}

/// An amount in the unit upstream's node utilization counts a resource in:
/// milli-cpu for cpu, whole units (bytes, pods, devices) for the rest.
pub fn resource_amount(name: &str, quantity: Quantity) -> i64 {
    if name == RESOURCE_CPU {
        quantity.milli_value()
    } else {
        quantity.value()
    }
}

/// What `pods` request of each of `resource_names`, in [`resource_amount`]
/// units; `pods` counts the pods (upstream `NodeUtilization`).
pub fn node_utilization<'a>(
    snapshot: &ClusterSnapshot,
    pods: impl IntoIterator<Item = &'a Pod>,
    resource_names: &[String],
) -> Vec<i64> {
    let mut usage = vec![0i64; resource_names.len()];
    for pod in pods {
        let requests = snapshot.pod_requests(pod);
        for (slot, name) in usage.iter_mut().zip(resource_names) {
            if name == RESOURCE_PODS {
                *slot += 1;
            } else if let Some(quantity) = requests.get(name) {
                *slot += resource_amount(name, *quantity);
            }
        }
    }
    usage
}

/// Whether the pod carries the soft no-eviction annotation.
pub fn has_prefer_no_eviction_annotation(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|annotations| annotations.contains_key(PREFER_NO_EVICTION_ANNOTATION))
}

/// The eviction order of upstream's `SortPodsBasedOnPriorityLowToHigh`:
/// pods without a priority first, then by ascending priority; at equal
/// priority BestEffort before Burstable before Guaranteed, and within a QoS
/// class pods without the soft no-eviction annotation first.
pub fn compare_pods_for_eviction(a: &Pod, b: &Pod) -> Ordering {
    crate::podutil::priority(a)
        .cmp(&crate::podutil::priority(b))
        .then_with(|| pod_qos(a).cmp(&pod_qos(b)))
        .then_with(|| {
            has_prefer_no_eviction_annotation(a).cmp(&has_prefer_no_eviction_annotation(b))
        })
}

/// Sorts pods into [`compare_pods_for_eviction`] order (stable: equal pods
/// keep their listing order). Each pod's key is computed once.
pub fn sort_pods_by_priority_low_to_high(pods: &mut [&Pod]) {
    pods.sort_by_cached_key(|pod| {
        (
            crate::podutil::priority(pod),
            pod_qos(pod),
            has_prefer_no_eviction_annotation(pod),
        )
    });
}

/// Why a pod would not fit a node (upstream `NodeFit`'s errors, word for word).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeFitError {
    /// The node is cordoned.
    #[error("node is not schedulable")]
    Unschedulable,
    /// nodeSelector or required node affinity.
    #[error("pod node selector does not match the node label")]
    NodeSelectorMismatch,
    /// An untolerated NoSchedule or NoExecute taint.
    #[error("pod does not tolerate taints on the node")]
    UntoleratedTaint,
    /// The pod's required anti-affinity matches a pod on the node.
    #[error("pod matches inter-pod anti-affinity rule of other pod on node")]
    InterPodAntiAffinity,
    /// Not enough of a resource is left on the node.
    #[error("insufficient {0}")]
    Insufficient(String),
}

/// A pod prepared once for fit checks against many nodes.
struct PreparedPod<'p> {
    pod: &'p Pod,
    affinity: RequiredNodeAffinity,
    requests: Resource,
    anti_affinity: Vec<ParsedPodAffinityTerm>,
    /// Check resources even on the node the pod runs on.
    check_own_node_resources: bool,
}

impl<'p> PreparedPod<'p> {
    fn new(snapshot: &'p ClusterSnapshot, pod: &'p Pod) -> Self {
        let anti_affinity = pod
            .spec
            .as_ref()
            .and_then(|spec| spec.affinity.as_ref())
            .and_then(|affinity| affinity.pod_anti_affinity.as_ref())
            .map(|anti| {
                anti.required_during_scheduling_ignored_during_execution
                    .iter()
                    .flatten()
                    .filter_map(|term| ParsedPodAffinityTerm::for_pod(term, pod).ok())
                    .collect()
            })
            .unwrap_or_default();
        PreparedPod {
            pod,
            affinity: RequiredNodeAffinity::from_pod(pod),
            requests: Resource::from_list(&snapshot.pod_requests(pod)),
            anti_affinity,
            check_own_node_resources: false,
        }
    }
}

/// Resources requested on a node by its non-terminal pods.
#[derive(Debug, Default)]
struct NodeRequested {
    requested: Resource,
    pods: i64,
    allocatable: Resource,
}

/// Fit checks against one snapshot, with each node's requested resources
/// computed once, when first needed (a plugin checks many pods against the
/// same nodes).
pub struct NodeFitChecker<'a> {
    snapshot: &'a ClusterSnapshot,
    /// Keyed by the node's address in the snapshot (no string hashing in
    /// the per-node loop).
    requested: RefCell<HashMap<usize, NodeRequested>>,
}

impl<'a> NodeFitChecker<'a> {
    /// A checker over `snapshot`.
    pub fn new(snapshot: &'a ClusterSnapshot) -> Self {
        NodeFitChecker {
            snapshot,
            requested: RefCell::new(HashMap::new()),
        }
    }

    /// The snapshot the checker reads.
    pub fn snapshot(&self) -> &'a ClusterSnapshot {
        self.snapshot
    }

    /// Whether `pod` could be scheduled onto `node` (upstream `NodeFit`):
    /// the node is schedulable, matches the pod's nodeSelector and required
    /// node affinity, has no untolerated NoSchedule/NoExecute taint, holds
    /// no pod the pod's anti-affinity repels, and (unless the pod already
    /// runs there) has room for the pod's requests and one more pod.
    pub fn node_fit(&self, pod: &Pod, node: &Node) -> Result<(), NodeFitError> {
        self.prepared_fit(&PreparedPod::new(self.snapshot, pod), node)
    }

    /// [`Self::node_fit`] as if the pod ran nowhere yet: resources are
    /// checked on its own node too.
    pub fn node_fit_ignoring_own_node(&self, pod: &Pod, node: &Node) -> Result<(), NodeFitError> {
        let mut prepared = PreparedPod::new(self.snapshot, pod);
        prepared.check_own_node_resources = true;
        self.prepared_fit(&prepared, node)
    }

    /// Whether `pod` fits one of `nodes` other than the one it runs on.
    pub fn pod_fits_any_other_node(&self, pod: &Pod, nodes: &[&Node]) -> bool {
        self.pod_fits_any_other_node_of(pod, nodes.iter().copied())
    }

    /// [`Self::pod_fits_any_other_node`] over nodes chosen on the fly (no
    /// list to build per pod).
    pub fn pod_fits_any_other_node_of<'n>(
        &self,
        pod: &Pod,
        mut nodes: impl Iterator<Item = &'n Node>,
    ) -> bool {
        let prepared = PreparedPod::new(self.snapshot, pod);
        let current = crate::podutil::node_name(pod);
        nodes.any(|node| {
            node.metadata.name.as_deref() != Some(current)
                && self.prepared_fit(&prepared, node).is_ok()
        })
    }

    /// Whether `pod` fits one of `nodes` (its own node included).
    pub fn pod_fits_any_node(&self, pod: &Pod, nodes: &[&Node]) -> bool {
        let prepared = PreparedPod::new(self.snapshot, pod);
        nodes
            .iter()
            .any(|node| self.prepared_fit(&prepared, node).is_ok())
    }

    fn prepared_fit(&self, pod: &PreparedPod<'_>, node: &Node) -> Result<(), NodeFitError> {
        if is_node_unschedulable(node) {
            return Err(NodeFitError::Unschedulable);
        }
        if !pod.affinity.matches(node) {
            return Err(NodeFitError::NodeSelectorMismatch);
        }
        if !pod_tolerates_node_taints(pod.pod, node) {
            return Err(NodeFitError::UntoleratedTaint);
        }
        let node_name = node.metadata.name.as_deref().unwrap_or_default();
        if self.matches_anti_affinity(pod, node, node_name) {
            return Err(NodeFitError::InterPodAntiAffinity);
        }
        if pod.check_own_node_resources || crate::podutil::node_name(pod.pod) != node_name {
            self.fits_request(pod, node)?;
        }
        Ok(())
    }

    /// Upstream `podMatchesInterPodAntiAffinity`: one of the pod's
    /// anti-affinity terms selects another pod on the node, and the node has
    /// the term's topology key.
    fn matches_anti_affinity(&self, pod: &PreparedPod<'_>, node: &Node, node_name: &str) -> bool {
        if pod.anti_affinity.is_empty() {
            return false;
        }
        let name = pod.pod.metadata.name.as_deref();
        let node_labels = node.metadata.labels.as_ref();
        let empty = BTreeMap::new();
        active_pods_on_node(self.snapshot, node_name).any(|other| {
            if other.metadata.name.as_deref() == name {
                return false;
            }
            let namespace = pod_namespace(other);
            let labels = other.metadata.labels.as_ref().unwrap_or(&empty);
            pod.anti_affinity.iter().any(|term| {
                term.matches(namespace, labels, || {
                    self.snapshot
                        .namespace_labels(namespace)
                        .map(|l| l as &dyn Labels)
                }) && node_labels.is_some_and(|l| l.contains_key(&term.topology_key))
            })
        })
    }

    /// Upstream `fitsRequest` (ksim-core's, as the scheduler's): one pod
    /// slot and every resource the pod requests are left on the node after
    /// its pods' requests; the first resource lacking is the error.
    fn fits_request(&self, pod: &PreparedPod<'_>, node: &Node) -> Result<(), NodeFitError> {
        let mut cache = self.requested.borrow_mut();
        let requested = cache
            .entry(node as *const Node as usize)
            .or_insert_with(|| requested_on_node(self.snapshot, node));
        let insufficient = insufficient_resources(
            &pod.requests,
            &requested.allocatable,
            &requested.requested,
            requested.pods,
            |_| false,
        );
        // Upstream's descheduler names a lacking resource before the pod count.
        let lacking = insufficient
            .iter()
            .find(|i| i.resource_name != RESOURCE_PODS)
            .or(insufficient.first());
        match lacking {
            Some(lacking) => Err(NodeFitError::Insufficient(lacking.resource_name.clone())),
            None => Ok(()),
        }
    }
}

fn requested_on_node(snapshot: &ClusterSnapshot, node: &Node) -> NodeRequested {
    let node_name = node.metadata.name.as_deref().unwrap_or_default();
    let mut requested = NodeRequested {
        allocatable: Resource::from_list(&node_allocatable(node)),
        ..NodeRequested::default()
    };
    for pod in active_pods_on_node(snapshot, node_name) {
        requested.pods += 1;
        requested
            .requested
            .add(&Resource::from_list(&snapshot.pod_requests(pod)));
    }
    requested
}

/// Whether `pod` could be scheduled onto `node` (see [`NodeFitChecker::node_fit`]).
pub fn pod_fits_node(snapshot: &ClusterSnapshot, pod: &Pod, node: &Node) -> bool {
    NodeFitChecker::new(snapshot).node_fit(pod, node).is_ok()
}

/// Whether `pod` fits one of `nodes` other than its own (upstream
/// `PodFitsAnyOtherNode`).
pub fn pod_fits_any_other_node(snapshot: &ClusterSnapshot, pod: &Pod, nodes: &[&Node]) -> bool {
    NodeFitChecker::new(snapshot).pod_fits_any_other_node(pod, nodes)
}

/// Whether `pod` fits one of `nodes` (upstream `PodFitsAnyNode`).
pub fn pod_fits_any_node(snapshot: &ClusterSnapshot, pod: &Pod, nodes: &[&Node]) -> bool {
    NodeFitChecker::new(snapshot).pod_fits_any_node(pod, nodes)
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests {
    use super::testing::{node, pod, snapshot};
    use super::*;
    use serde_json::json;

    #[test]
    fn node_fit_checks_schedulability_affinity_taints_and_room() {
        let snapshot = snapshot(
            vec![
                node(
                    "roomy",
                    "4",
                    "8Gi",
                    "10",
                    json!({"metadata": {"labels": {"disk": "ssd"}}}),
                ),
                node("full", "1", "8Gi", "10", json!({})),
                node(
                    "cordoned",
                    "4",
                    "8Gi",
                    "10",
                    json!({"spec": {"unschedulable": true}}),
                ),
                node(
                    "tainted",
                    "4",
                    "8Gi",
                    "10",
                    json!({"spec": {"taints": [{"key": "k", "effect": "NoExecute"}]}}),
                ),
                node("no-slots", "4", "8Gi", "1", json!({})),
            ],
            vec![
                pod("ns", "resident", "full", "800m", "", json!({})),
                pod("ns", "other", "no-slots", "", "", json!({})),
            ],
        );
        let checker = NodeFitChecker::new(&snapshot);
        let candidate = pod("ns", "p", "elsewhere", "500m", "1Gi", json!({}));
        let fit = |name: &str| checker.node_fit(&candidate, snapshot.node(name).expect("node"));
        assert_eq!(fit("roomy"), Ok(()));
        assert_eq!(fit("full"), Err(NodeFitError::Insufficient("cpu".into())));
        assert_eq!(fit("cordoned"), Err(NodeFitError::Unschedulable));
        assert_eq!(fit("tainted"), Err(NodeFitError::UntoleratedTaint));
        assert_eq!(
            fit("no-slots"),
            Err(NodeFitError::Insufficient("pods".into()))
        );
        assert_eq!(
            fit("full").expect_err("no room").to_string(),
            "insufficient cpu"
        );
        let picky = pod(
            "ns",
            "q",
            "elsewhere",
            "",
            "",
            json!({"spec": {"nodeSelector": {"disk": "hdd"}}}),
        );
        assert_eq!(
            checker.node_fit(&picky, snapshot.node("roomy").expect("node")),
            Err(NodeFitError::NodeSelectorMismatch)
        );
    }

    #[test]
    fn a_pod_fits_its_own_node_without_a_resource_check_but_not_any_other_node() {
        let snapshot = snapshot(
            vec![
                node("a", "1", "1Gi", "10", json!({})),
                node("b", "1", "1Gi", "10", json!({})),
            ],
            vec![
                pod("ns", "big", "a", "900m", "", json!({})),
                pod("ns", "filler", "b", "900m", "", json!({})),
            ],
        );
        let nodes: Vec<&Node> = snapshot.nodes().iter().collect();
        let big = &snapshot.pods()[0];
        assert!(pod_fits_any_node(&snapshot, big, &nodes));
        assert!(!pod_fits_any_other_node(&snapshot, big, &nodes));
        assert!(pod_fits_node(&snapshot, big, nodes[0]));
    }

    #[test]
    fn required_anti_affinity_to_a_pod_on_the_node_does_not_fit() {
        let anti = json!({"spec": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
        ]}}}});
        let snapshot = snapshot(
            vec![node("a", "4", "8Gi", "10", json!({}))],
            vec![pod(
                "ns",
                "db",
                "a",
                "",
                "",
                json!({"metadata": {"labels": {"app": "db"}}}),
            )],
        );
        let candidate = pod("ns", "db2", "b", "", "", anti);
        assert_eq!(
            NodeFitChecker::new(&snapshot).node_fit(&candidate, &snapshot.nodes()[0]),
            Err(NodeFitError::InterPodAntiAffinity)
        );
    }

    #[test]
    fn qos_classes_follow_requests_and_limits() {
        let limits = |cpu: &str, memory: &str| {
            json!({"spec": {"containers": [{"name": "c", "resources": {
                "requests": {"cpu": cpu, "memory": memory},
                "limits": {"cpu": cpu, "memory": memory}
            }}]}})
        };
        let cases = [
            (pod("ns", "a", "n", "", "", json!({})), QosClass::BestEffort),
            (
                pod("ns", "b", "n", "100m", "", json!({})),
                QosClass::Burstable,
            ),
            (
                pod("ns", "c", "n", "", "", limits("1", "1Gi")),
                QosClass::Guaranteed,
            ),
            (
                pod(
                    "ns",
                    "d",
                    "n",
                    "",
                    "",
                    json!({"status": {"qosClass": "Guaranteed"}}),
                ),
                QosClass::Guaranteed,
            ),
        ];
        for (pod, expected) in cases {
            assert_eq!(pod_qos(&pod), expected, "{:?}", pod.metadata.name);
        }
    }

    #[test]
    fn eviction_order_is_priority_then_qos_then_the_soft_annotation() {
        let guaranteed = json!({"spec": {"containers": [{"name": "c", "resources": {
            "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}
        }}]}});
        let pods = [
            pod(
                "ns",
                "prio-5",
                "n",
                "",
                "",
                json!({"spec": {"priority": 5}}),
            ),
            pod("ns", "guaranteed", "n", "", "", guaranteed),
            pod("ns", "burstable", "n", "100m", "", json!({})),
            pod(
                "ns",
                "best-effort-annotated",
                "n",
                "",
                "",
                json!({"metadata": {"annotations": {PREFER_NO_EVICTION_ANNOTATION: ""}}}),
            ),
            pod("ns", "best-effort", "n", "", "", json!({})),
        ];
        let mut refs: Vec<&Pod> = pods.iter().collect();
        sort_pods_by_priority_low_to_high(&mut refs);
        let names: Vec<&str> = refs
            .iter()
            .filter_map(|pod| pod.metadata.name.as_deref())
            .collect();
        assert_eq!(
            names,
            [
                "best-effort",
                "best-effort-annotated",
                "burstable",
                "guaranteed",
                "prio-5"
            ]
        );
        assert_eq!(compare_pods_for_eviction(refs[0], refs[4]), Ordering::Less);
    }
}
