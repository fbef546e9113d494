//! Constraint parsing shared by Filter and Score: the pod's own constraints
//! of one `whenUnsatisfiable` kind as ksim-core parses them
//! ([`SpreadConstraint`]: matchLabelKeys merged, policies defaulted), or the
//! default constraints with the workload selector put in their place.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, TopologySpreadConstraint};
use ksim_core::node_affinity::RequiredNodeAffinity;
use ksim_core::selector::{LabelSelectorRequirements, NilableSelector, Requirement};
use ksim_core::toleration::pod_tolerations;
use ksim_core::topology_spread::SpreadConstraint;

use crate::framework::{NodeInfo, PodInfo, Snapshot, WorkloadKind, pod_labels, pod_namespace};

/// Whether `node` counts for `constraint` under its node inclusion
/// policies, for `pod` with required node affinity `required`.
pub fn includes_node(
    constraint: &SpreadConstraint,
    pod: &Pod,
    node: &NodeInfo,
    required: &RequiredNodeAffinity,
) -> bool {
    constraint
        .policies
        .includes_node(&node.node, required, pod_tolerations(pod))
}

/// The pod's constraints with `when_unsatisfiable` (upstream
/// `filterTopologySpreadConstraints`), parsed by ksim-core.
pub fn filter_constraints(
    constraints: &[TopologySpreadConstraint],
    pod_labels_map: Option<&BTreeMap<String, String>>,
    when_unsatisfiable: &str,
) -> Result<Vec<SpreadConstraint>, String> {
    constraints
        .iter()
        .filter(|c| c.when_unsatisfiable == when_unsatisfiable)
        .map(|c| SpreadConstraint::parse(c, pod_labels_map).map_err(|e| e.to_string()))
        .collect()
}

/// The selector made of the Services selecting the pod and its controlling
/// ReplicationController/ReplicaSet/StatefulSet (upstream `DefaultSelector`).
pub fn default_selector(pod: &Pod, snapshot: &Snapshot) -> LabelSelectorRequirements {
    let namespace = pod_namespace(pod);
    let labels = pod_labels(pod);
    let mut requirements: Vec<Requirement> = Vec::new();
    let mut add = |extra: &LabelSelectorRequirements| {
        for r in &extra.requirements {
            if !requirements.contains(r) {
                requirements.push(r.clone());
            }
        }
    };
    for workload in &snapshot.workload_selectors {
        if workload.kind == WorkloadKind::Service
            && workload.namespace == namespace
            && !workload.selector.is_empty()
            && workload.selector.matches(labels)
        {
            add(&workload.selector);
        }
    }
    if let Some(owner) = ksim_core::status::controller_of(&pod.metadata) {
        let kind = match (owner.api_version.as_str(), owner.kind.as_str()) {
            ("v1", "ReplicationController") => Some(WorkloadKind::ReplicationController),
            ("apps/v1", "ReplicaSet") => Some(WorkloadKind::ReplicaSet),
            ("apps/v1", "StatefulSet") => Some(WorkloadKind::StatefulSet),
            _ => None,
        };
        if let Some(kind) = kind
            && let Some(workload) = snapshot
                .workload_selectors
                .iter()
                .find(|w| w.kind == kind && w.namespace == namespace && w.name == owner.name)
        {
            add(&workload.selector);
        }
    }
    LabelSelectorRequirements { requirements }
}

/// Whether the node has every constraint's topology key.
pub fn node_has_all_topology_keys(node: &NodeInfo, constraints: &[SpreadConstraint]) -> bool {
    let labels = node.labels();
    constraints
        .iter()
        .all(|c| labels.contains_key(&c.topology_key))
}

/// The number of pods in `namespace` matching the selector, terminating
/// pods aside (an empty selector counts none, as upstream).
pub fn count_pods_match_selector(
    pods: &[std::sync::Arc<PodInfo>],
    selector: &Option<LabelSelectorRequirements>,
    namespace: &str,
) -> i64 {
    if selector.selects_everything() || selector.is_none() {
        return 0;
    }
    let count = pods
        .iter()
        .filter(|p| p.pod.metadata.deletion_timestamp.is_none())
        .filter(|p| pod_namespace(&p.pod) == namespace)
        .filter(|p| selector.selects(pod_labels(&p.pod)))
        .count();
    i64::try_from(count).unwrap_or(i64::MAX)
}
