//! Pod topology spread constraints as the scheduler's PodTopologySpread and
//! the descheduler's RemovePodsViolatingTopologySpreadConstraint both read
//! them (upstream `filterTopologySpreadConstraints` and
//! `matchNodeInclusionPolicies`): the label selector with the pod's
//! `matchLabelKeys` values merged in, `minDomains` defaulted, and which
//! nodes count under `nodeAffinityPolicy` (default Honor) and
//! `nodeTaintsPolicy` (default Ignore).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Toleration, TopologySpreadConstraint};

use crate::Error;
use crate::node_affinity::RequiredNodeAffinity;
use crate::selector::{LabelSelectorRequirements, Labels, NilableSelector, Requirement};
use crate::toleration::{find_matching_untolerated_taint, is_do_not_schedule_taint, node_taints};

/// The node inclusion policy value that honours the pod's node affinity or
/// tolerations.
pub const POLICY_HONOR: &str = "Honor";
/// The node inclusion policy value that ignores them.
pub const POLICY_IGNORE: &str = "Ignore";

/// A topology spread constraint of a pod, parsed once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpreadConstraint {
    /// `maxSkew`.
    pub max_skew: i32,
    /// The node label whose values are the domains.
    pub topology_key: String,
    /// `DoNotSchedule` or `ScheduleAnyway`.
    pub when_unsatisfiable: String,
    /// The label selector with the `matchLabelKeys` values added; `None`
    /// (no labelSelector) selects no pod.
    pub selector: Option<LabelSelectorRequirements>,
    /// `minDomains`, 1 when unset.
    pub min_domains: i32,
    /// Which nodes count.
    pub policies: NodeInclusionPolicies,
}

/// A constraint's node inclusion policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeInclusionPolicies {
    /// `nodeAffinityPolicy` is Honor (the default).
    pub honor_node_affinity: bool,
    /// `nodeTaintsPolicy` is Honor (default Ignore).
    pub honor_node_taints: bool,
}

impl NodeInclusionPolicies {
    /// From a constraint's `nodeAffinityPolicy` and `nodeTaintsPolicy`.
    pub fn of(constraint: &TopologySpreadConstraint) -> Self {
        NodeInclusionPolicies {
            honor_node_affinity: constraint
                .node_affinity_policy
                .as_deref()
                .unwrap_or(POLICY_HONOR)
                == POLICY_HONOR,
            honor_node_taints: constraint
                .node_taints_policy
                .as_deref()
                .unwrap_or(POLICY_IGNORE)
                == POLICY_HONOR,
        }
    }

    /// Whether a node counts (upstream `matchNodeInclusionPolicies`): with
    /// nodeAffinityPolicy Honor the pod's required node affinity
    /// (`affinity`) must admit it, with nodeTaintsPolicy Honor the pod's
    /// `tolerations` must tolerate its NoSchedule and NoExecute taints.
    pub fn includes_node(
        &self,
        node: &Node,
        affinity: &RequiredNodeAffinity,
        tolerations: &[Toleration],
    ) -> bool {
        static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();
        let labels = node.metadata.labels.as_ref().unwrap_or(&NO_LABELS);
        let taints = node_taints(node);
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if self.honor_node_affinity && !affinity.matches_labels(labels, name) {
            return false;
        }
        !(self.honor_node_taints
            && find_matching_untolerated_taint(taints, tolerations, is_do_not_schedule_taint)
                .is_some())
    }

    /// Whether every node with the topology key counts, whatever its labels
    /// and taints, for a pod with required node affinity `affinity`.
    pub fn includes_every_node(&self, affinity: &RequiredNodeAffinity) -> bool {
        !self.honor_node_taints && (!self.honor_node_affinity || affinity.is_empty())
    }
}

impl SpreadConstraint {
    /// Parses a constraint of a pod with `pod_labels`: each `matchLabelKeys`
    /// key the pod carries adds `key in (value)` to the selector. A selector
    /// that does not parse is an error.
    pub fn parse(
        constraint: &TopologySpreadConstraint,
        pod_labels: Option<&BTreeMap<String, String>>,
    ) -> Result<Self, Error> {
        let mut selector =
            LabelSelectorRequirements::from_optional(constraint.label_selector.as_ref())?;
        if let (Some(selector), Some(keys), Some(labels)) = (
            selector.as_mut(),
            constraint.match_label_keys.as_ref(),
            pod_labels,
        ) {
            for key in keys {
                if let Some(value) = labels.get(key) {
                    selector
                        .requirements
                        .push(Requirement::In(key.clone(), vec![value.clone()]));
                }
            }
        }
        Ok(SpreadConstraint {
            max_skew: constraint.max_skew,
            topology_key: constraint.topology_key.clone(),
            when_unsatisfiable: constraint.when_unsatisfiable.clone(),
            selector,
            min_domains: constraint.min_domains.unwrap_or(1),
            policies: NodeInclusionPolicies::of(constraint),
        })
    }

    /// Whether a pod with `labels` is selected.
    pub fn selects(&self, labels: &dyn Labels) -> bool {
        self.selector.selects(labels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    fn constraint(value: serde_json::Value) -> TopologySpreadConstraint {
        serde_json::from_value(value).expect("constraint")
    }

    fn node(value: serde_json::Value) -> Node {
        serde_json::from_value(value).expect("node")
    }

    #[test]
    fn match_label_keys_narrow_the_selector_to_the_pods_values() {
        let labels = BTreeMap::from([
            ("app".to_string(), "web".to_string()),
            ("pod-template-hash".to_string(), "abc".to_string()),
        ]);
        let parsed = SpreadConstraint::parse(
            &constraint(json!({"maxSkew": 1, "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "matchLabelKeys": ["pod-template-hash", "absent"]})),
            Some(&labels),
        )
        .expect("parses");
        assert!(parsed.selects(&labels));
        let older = BTreeMap::from([
            ("app".to_string(), "web".to_string()),
            ("pod-template-hash".to_string(), "old".to_string()),
        ]);
        assert!(!parsed.selects(&older));
        assert_eq!(parsed.min_domains, 1);
        // No labelSelector: nothing is selected, matchLabelKeys or not.
        let none = SpreadConstraint::parse(
            &constraint(json!({"maxSkew": 1, "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule", "matchLabelKeys": ["app"]})),
            Some(&labels),
        )
        .expect("parses");
        assert!(!none.selects(&labels));
    }

    #[test]
    fn node_inclusion_policies_default_to_honor_affinity_and_ignore_taints() {
        let pod: Pod = serde_json::from_value(json!({"spec": {"containers": [],
            "nodeSelector": {"disk": "ssd"}}}))
        .expect("pod");
        let affinity = RequiredNodeAffinity::from_pod(&pod);
        let hdd =
            node(json!({"metadata": {"name": "hdd", "labels": {"zone": "a", "disk": "hdd"}}}));
        let tainted = node(
            json!({"metadata": {"name": "t", "labels": {"zone": "a", "disk": "ssd"}},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}),
        );
        let defaults = SpreadConstraint::parse(
            &constraint(json!({"maxSkew": 1, "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}})),
            None,
        )
        .expect("parses");
        assert!(!defaults.policies.includes_node(&hdd, &affinity, &[]));
        assert!(defaults.policies.includes_node(&tainted, &affinity, &[]));
        assert!(!defaults.policies.includes_every_node(&affinity));
        assert!(
            defaults
                .policies
                .includes_every_node(&RequiredNodeAffinity::default())
        );
        let flipped = SpreadConstraint::parse(
            &constraint(json!({"maxSkew": 1, "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {},
                "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor"})),
            None,
        )
        .expect("parses");
        assert!(flipped.policies.includes_node(&hdd, &affinity, &[]));
        assert!(!flipped.policies.includes_node(&tainted, &affinity, &[]));
        let tolerates: Toleration =
            serde_json::from_value(json!({"key": "k", "operator": "Exists"})).expect("toleration");
        assert!(
            flipped
                .policies
                .includes_node(&tainted, &affinity, &[tolerates])
        );
        assert!(
            !flipped
                .policies
                .includes_every_node(&RequiredNodeAffinity::default())
        );
    }
}
