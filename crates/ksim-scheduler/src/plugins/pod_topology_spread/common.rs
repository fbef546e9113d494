//! Constraint parsing shared by Filter and Score: the pod's own constraints
//! of one `whenUnsatisfiable` kind (with matchLabelKeys merged, policies
//! defaulted), or the default constraints with the workload selector.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, TopologySpreadConstraint};
use ksim_core::node_affinity::RequiredNodeAffinity;
use ksim_core::selector::{LabelSelectorRequirements, Requirement};
use ksim_core::topology_spread::{NodeInclusionPolicies, SpreadConstraint};

use crate::framework::{
    NodeInfo, PodInfo, Selector, Snapshot, WorkloadKind, pod_labels, pod_namespace,
};

/// A constraint ready to evaluate: ksim-core's parse, with the selector
/// the scheduler counts by (the workload selector for default constraints).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    pub max_skew: i32,
    pub topology_key: String,
    pub selector: Selector,
    /// 1 when unset.
    pub min_domains: i32,
    /// nodeAffinityPolicy and nodeTaintsPolicy.
    pub policies: NodeInclusionPolicies,
}

impl Constraint {
    /// Whether the node counts for this constraint under the inclusion policies.
    pub fn matches_node_inclusion_policies(
        &self,
        pod: &Pod,
        node: &NodeInfo,
        required: &RequiredNodeAffinity,
    ) -> bool {
        let tolerations = pod
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.as_deref())
            .unwrap_or_default();
        self.policies
            .includes_node(&node.node, required, tolerations)
    }
}

/// The pod's constraints with `when_unsatisfiable` (upstream
/// `filterTopologySpreadConstraints`).
pub fn filter_constraints(
    constraints: &[TopologySpreadConstraint],
    pod_labels_map: Option<&BTreeMap<String, String>>,
    when_unsatisfiable: &str,
) -> Result<Vec<Constraint>, String> {
    constraints
        .iter()
        .filter(|c| c.when_unsatisfiable == when_unsatisfiable)
        .map(|c| {
            let parsed = SpreadConstraint::parse(c, pod_labels_map).map_err(|e| e.to_string())?;
            Ok(Constraint {
                max_skew: parsed.max_skew,
                topology_key: parsed.topology_key,
                selector: parsed
                    .selector
                    .map_or(Selector::Nothing, Selector::Requirements),
                min_domains: parsed.min_domains,
                policies: parsed.policies,
            })
        })
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
    let controller = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    if let Some(owner) = controller {
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
pub fn node_has_all_topology_keys(node: &NodeInfo, constraints: &[Constraint]) -> bool {
    let labels = node.labels();
    constraints
        .iter()
        .all(|c| labels.contains_key(&c.topology_key))
}

/// The number of pods in `namespace` matching the selector, terminating
/// pods aside (an empty selector counts none, as upstream).
pub fn count_pods_match_selector(
    pods: &[std::sync::Arc<PodInfo>],
    selector: &Selector,
    namespace: &str,
) -> i64 {
    if selector.is_everything() || matches!(selector, Selector::Nothing) {
        return 0;
    }
    let count = pods
        .iter()
        .filter(|p| p.pod.metadata.deletion_timestamp.is_none())
        .filter(|p| pod_namespace(&p.pod) == namespace)
        .filter(|p| selector.matches(pod_labels(&p.pod)))
        .count();
    i64::try_from(count).unwrap_or(i64::MAX)
}
