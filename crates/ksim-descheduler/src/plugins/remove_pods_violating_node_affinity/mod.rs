//! RemovePodsViolatingNodeAffinity: evicts pods whose node no longer
//! satisfies their required node affinity (e.g. after its labels changed),
//! or, for `preferredDuringSchedulingIgnoredDuringExecution`, pods that
//! another node would suit better; only when the pod fits another node.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use ksim_core::node_affinity::{PreferredSchedulingTerms, RequiredNodeAffinity};
use ksim_core::status::is_terminal_phase;
use serde::Deserialize;

use crate::framework::{
    ArgsError, ClusterSnapshot, DeschedulePlugin, EvictionRequest, PluginStatus, PodEvictor,
    decode_args,
};
use crate::nodeutil::{NodeFitChecker, pod_matches_node_constraints};
use crate::podutil::{self, AfterEviction, Namespaces, PodSelection, after_eviction};

/// The plugin's name.
pub const PLUGIN_NAME: &str = "RemovePodsViolatingNodeAffinity";
const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
const PREFERRED: &str = "preferredDuringSchedulingIgnoredDuringExecution";

/// The plugin's args.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RemovePodsViolatingNodeAffinityArgs {
    /// Namespaces included or excluded.
    pub namespaces: Option<Namespaces>,
    /// Only pods with these labels.
    pub label_selector: Option<LabelSelector>,
    /// `requiredDuringSchedulingIgnoredDuringExecution` and/or
    /// `preferredDuringSchedulingIgnoredDuringExecution`.
    pub node_affinity_type: Vec<String>,
}

/// The plugin.
#[derive(Debug)]
pub struct RemovePodsViolatingNodeAffinity {
    selection: PodSelection,
    args: RemovePodsViolatingNodeAffinityArgs,
}

/// Builds the plugin from its args.
pub fn factory(args: Option<&serde_json::Value>) -> Result<Box<dyn DeschedulePlugin>, ArgsError> {
    let args: RemovePodsViolatingNodeAffinityArgs = decode_args(args)?;
    if args.node_affinity_type.is_empty() {
        return Err(ArgsError::new(
            "nodeAffinityType",
            "nodeAffinityType needs to be set",
        ));
    }
    let selection = PodSelection::new(args.namespaces.as_ref(), args.label_selector.as_ref())?;
    Ok(Box::new(RemovePodsViolatingNodeAffinity {
        selection,
        args,
    }))
}

fn node_affinity(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::NodeAffinity> {
    pod.spec.as_ref()?.affinity.as_ref()?.node_affinity.as_ref()
}

impl RemovePodsViolatingNodeAffinity {
    /// Whether the pod violates its `kind` of node affinity on `node` and
    /// fits one of `nodes` (upstream `PodFitsAnyNode`: selector, affinity,
    /// taints, cordons, inter-pod anti-affinity and the room left).
    fn violates(
        &self,
        kind: &str,
        pod: &Pod,
        node: &Node,
        nodes: &[&Node],
        fit: &NodeFitChecker<'_>,
    ) -> bool {
        match kind {
            REQUIRED => {
                node_affinity(pod).is_some_and(|a| {
                    a.required_during_scheduling_ignored_during_execution
                        .is_some()
                }) && !RequiredNodeAffinity::from_pod(pod).matches(node)
                    && fit.pod_fits_any_node(pod, nodes)
            }
            PREFERRED => {
                let Some(terms) = PreferredSchedulingTerms::from_pod(pod) else {
                    return false;
                };
                if terms.terms.is_empty() || !fit.pod_fits_any_node(pod, nodes) {
                    return false;
                }
                let current = terms.score(node);
                nodes
                    .iter()
                    .filter(|other| pod_matches_node_constraints(pod, other))
                    .any(|other| terms.score(other) > current)
            }
            _ => false,
        }
    }
}

impl DeschedulePlugin for RemovePodsViolatingNodeAffinity {
    fn name(&self) -> &'static str {
        PLUGIN_NAME
    }

    fn deschedule(
        &self,
        snapshot: &ClusterSnapshot,
        nodes: &[&Node],
        evictor: &mut dyn PodEvictor,
    ) -> PluginStatus {
        let fit = NodeFitChecker::new(snapshot);
        for kind in &self.args.node_affinity_type {
            if kind != REQUIRED && kind != PREFERRED {
                tracing::error!(nodeAffinity = %kind, plugin = PLUGIN_NAME, "Invalid nodeAffinityType");
                continue;
            }
            for node in nodes {
                let node_name = node.metadata.name.as_deref().unwrap_or_default();
                tracing::debug!(node = node_name, plugin = PLUGIN_NAME, "Processing node");
                for pod in snapshot.pods_on_node(node_name) {
                    let phase = podutil::phase(pod);
                    if is_terminal_phase(phase) || !self.selection.matches(pod) {
                        continue;
                    }
                    if !self.violates(kind, pod, node, nodes, &fit)
                        || !evictor.filter(pod)
                        || !evictor.pre_eviction_filter(pod)
                    {
                        continue;
                    }
                    let request = EvictionRequest {
                        strategy: PLUGIN_NAME,
                        reason: "",
                    };
                    match after_eviction(evictor.evict(pod, request), PLUGIN_NAME) {
                        AfterEviction::Next => {}
                        AfterEviction::NextNode => break,
                        AfterEviction::Stop => return PluginStatus::Success,
                    }
                }
            }
        }
        PluginStatus::Success
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podutil::testing::{FakeEvictor, node, pod};
    use k8s_openapi::api::core::v1::{
        Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
        PreferredSchedulingTerm,
    };
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    fn term(key: &str, value: &str) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: key.into(),
                operator: "In".into(),
                values: Some(vec![value.into()]),
            }]),
            ..Default::default()
        }
    }

    fn requiring(name: &str, node: &str, value: &str) -> Pod {
        let mut p = pod(name, node);
        p.spec.as_mut().expect("spec").affinity = Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: vec![term("zone", value)],
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        p
    }

    fn preferring(name: &str, node: &str, value: &str) -> Pod {
        let mut p = pod(name, node);
        p.spec.as_mut().expect("spec").affinity = Some(Affinity {
            node_affinity: Some(NodeAffinity {
                preferred_during_scheduling_ignored_during_execution: Some(vec![
                    PreferredSchedulingTerm {
                        weight: 10,
                        preference: term("zone", value),
                    },
                ]),
                ..Default::default()
            }),
            ..Default::default()
        });
        p
    }

    fn run(kind: &str, nodes: Vec<Node>, pods: Vec<Pod>) -> Vec<String> {
        let plugin = factory(Some(&json!({"nodeAffinityType": [kind]}))).expect("valid");
        let snapshot = ClusterSnapshot::new(nodes, pods, vec![], Timestamp::UNIX_EPOCH);
        let nodes: Vec<&Node> = snapshot.nodes().iter().collect();
        let mut evictor = FakeEvictor::default();
        plugin.deschedule(&snapshot, &nodes, &mut evictor);
        evictor.evicted
    }

    #[test]
    fn pods_whose_node_lost_the_required_label_are_evicted_when_another_node_fits() {
        let nodes = vec![node("a", &[("zone", "x")]), node("b", &[("zone", "y")])];
        let pods = vec![
            requiring("stays", "a", "x"),
            requiring("moves", "b", "x"),
            requiring("nowhere", "b", "z"),
            pod("plain", "b"),
        ];
        assert_eq!(run(REQUIRED, nodes, pods), ["moves"]);
    }

    #[test]
    fn a_pod_is_not_evicted_when_the_matching_node_has_no_room_left() {
        use k8s_openapi::api::core::v1::ResourceRequirements;
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        let mut full = node("a", &[("zone", "x")]);
        full.status.as_mut().expect("status").allocatable = Some(
            [("cpu", "1"), ("pods", "110")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), Quantity(v.into())))
                .collect(),
        );
        let mut moves = requiring("moves", "b", "x");
        moves.spec.as_mut().expect("spec").containers[0].resources = Some(ResourceRequirements {
            requests: Some([("cpu".to_string(), Quantity("2".into()))].into()),
            ..Default::default()
        });
        let nodes = vec![full, node("b", &[("zone", "y")])];
        assert!(run(REQUIRED, nodes, vec![moves]).is_empty());
    }

    #[test]
    fn preferred_affinity_evicts_when_a_better_node_exists() {
        let nodes = vec![node("a", &[("zone", "x")]), node("b", &[("zone", "y")])];
        let pods = vec![
            preferring("best", "a", "x"),
            preferring("better-elsewhere", "b", "x"),
        ];
        assert_eq!(run(PREFERRED, nodes, pods), ["better-elsewhere"]);
    }

    #[test]
    fn node_affinity_type_is_required() {
        let error = factory(Some(&json!({}))).err().expect("missing type");
        assert_eq!(
            error.to_string(),
            "nodeAffinityType: nodeAffinityType needs to be set"
        );
    }
}
