//! RemovePodsViolatingInterPodAntiAffinity: evicts pods whose required
//! inter-pod anti-affinity is broken by another pod in the same topology
//! domain, lowest priority first on each node (upstream's
//! `SortPodsBasedOnPriorityLowToHigh`: pods asking not to be evicted with
//! `descheduler.alpha.kubernetes.io/prefer-no-eviction` after their
//! equals, whatever the noEvictionPolicy).
//!
//! Order: upstream visits nodes and their pods in informer order (random)
//! and sorts unstably; here nodes and pods keep listing order, so of two
//! equal clashing pods the first listed is evicted.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::{Node, Pod, PodAffinityTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use ksim_core::pod_affinity::{ParsedPodAffinityTerm, pod_namespace};
use ksim_core::selector::{LabelSelectorRequirements, Labels, Requirement};
use ksim_core::status::is_terminal_phase;
use serde::Deserialize;

use crate::framework::{
    ArgsError, ClusterSnapshot, DeschedulePlugin, EvictionRequest, PluginStatus, PodEvictor,
    decode_args,
};
use crate::podutil::{self, AfterEviction, Namespaces, PodSelection, after_eviction};

/// The plugin's name.
pub const PLUGIN_NAME: &str = "RemovePodsViolatingInterPodAntiAffinity";

/// The plugin's args.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RemovePodsViolatingInterPodAntiAffinityArgs {
    /// Namespaces included or excluded.
    pub namespaces: Option<Namespaces>,
    /// Only pods with these labels.
    pub label_selector: Option<LabelSelector>,
}

/// The plugin.
#[derive(Debug)]
pub struct RemovePodsViolatingInterPodAntiAffinity {
    selection: PodSelection,
}

/// Builds the plugin from its args.
pub fn factory(args: Option<&serde_json::Value>) -> Result<Box<dyn DeschedulePlugin>, ArgsError> {
    let args: RemovePodsViolatingInterPodAntiAffinityArgs = decode_args(args)?;
    let selection = PodSelection::new(args.namespaces.as_ref(), args.label_selector.as_ref())?;
    Ok(Box::new(RemovePodsViolatingInterPodAntiAffinity {
        selection,
    }))
}

fn anti_affinity_terms(pod: &Pod) -> &[PodAffinityTerm] {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.affinity.as_ref())
        .and_then(|affinity| affinity.pod_anti_affinity.as_ref())
        .and_then(|anti| {
            anti.required_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default()
}

/// Whether two nodes are in the same domain of `key` (the same node always is).
fn same_domain(a: &Node, b: &Node, key: &str) -> bool {
    if a.metadata.name == b.metadata.name {
        return true;
    }
    let value = |node: &Node| {
        node.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(key).cloned())
    };
    matches!((value(a), value(b)), (Some(x), Some(y)) if x == y)
}

/// Upstream's `CheckPodsWithAntiAffinityExist`: whether a live pod in scope
/// matches one of the candidate's anti-affinity terms in its domain.
/// The live pods in scope, by namespace and by (namespace, label, value),
/// so that a term with an `In` requirement looks at the pods carrying one
/// of its values only.
struct PodIndex<'a> {
    by_namespace: HashMap<&'a str, Vec<&'a Pod>>,
    by_label: HashMap<(&'a str, &'a str, &'a str), Vec<&'a Pod>>,
}

impl<'a> PodIndex<'a> {
    fn new(pods: impl Iterator<Item = &'a Pod>) -> Self {
        let mut index = PodIndex {
            by_namespace: HashMap::new(),
            by_label: HashMap::new(),
        };
        for pod in pods {
            let namespace = pod_namespace(pod);
            index.by_namespace.entry(namespace).or_default().push(pod);
            for (key, value) in podutil::labels(pod) {
                index
                    .by_label
                    .entry((namespace, key.as_str(), value.as_str()))
                    .or_default()
                    .push(pod);
            }
        }
        index
    }

    /// The pods of `namespace` that may match `selector`.
    fn candidates<'s>(
        &'s self,
        namespace: &'s str,
        selector: &'s LabelSelectorRequirements,
    ) -> Box<dyn Iterator<Item = &'a Pod> + 's> {
        let narrowing = selector.requirements.iter().find_map(|r| match r {
            Requirement::In(key, values) => Some((key, values)),
            _ => None,
        });
        match narrowing {
            Some((key, values)) => Box::new(values.iter().flat_map(move |value| {
                self.by_label
                    .get(&(namespace, key.as_str(), value.as_str()))
                    .into_iter()
                    .flatten()
                    .copied()
            })),
            None => Box::new(
                self.by_namespace
                    .get(namespace)
                    .into_iter()
                    .flatten()
                    .copied(),
            ),
        }
    }
}

fn violates(
    candidate: &Pod,
    snapshot: &ClusterSnapshot,
    index: &PodIndex<'_>,
    nodes: &HashMap<&str, &Node>,
    evicted: &HashSet<&str>,
) -> bool {
    let Some(candidate_node) = nodes.get(podutil::node_name(candidate)) else {
        return false;
    };
    let namespace_labels = |namespace: &str| {
        snapshot
            .namespace_labels(namespace)
            .map(|l| l as &dyn Labels)
    };
    for term in anti_affinity_terms(candidate) {
        let Ok(term) = ParsedPodAffinityTerm::for_pod(term, candidate) else {
            return false;
        };
        // A nil selector matches nothing.
        let Some(selector) = term.selector.as_ref() else {
            continue;
        };
        // The listed namespaces, and with a namespace selector every
        // namespace holding pods that it selects.
        let namespaces: Vec<&str> = if term.namespace_selector.is_some() {
            index
                .by_namespace
                .keys()
                .copied()
                .filter(|namespace| {
                    term.selects_namespace(namespace, || namespace_labels(namespace))
                })
                .collect()
        } else {
            term.namespaces.iter().map(String::as_str).collect()
        };
        for namespace in namespaces {
            for other in index.candidates(namespace, selector) {
                if other.metadata.name == candidate.metadata.name
                    || evicted.contains(other.metadata.uid.as_deref().unwrap_or_default())
                    || !selector.matches(podutil::labels(other))
                {
                    continue;
                }
                let Some(other_node) = nodes.get(podutil::node_name(other)) else {
                    continue;
                };
                if same_domain(candidate_node, other_node, &term.topology_key) {
                    return true;
                }
            }
        }
    }
    false
}

impl DeschedulePlugin for RemovePodsViolatingInterPodAntiAffinity {
    fn name(&self) -> &'static str {
        PLUGIN_NAME
    }

    fn deschedule(
        &self,
        snapshot: &ClusterSnapshot,
        nodes: &[&Node],
        evictor: &mut dyn PodEvictor,
    ) -> PluginStatus {
        let node_map: HashMap<&str, &Node> = nodes
            .iter()
            .filter_map(|node| Some((node.metadata.name.as_deref()?, *node)))
            .collect();
        let live = |pod: &&Pod| {
            let phase = podutil::phase(pod);
            !is_terminal_phase(phase) && self.selection.matches(pod)
        };
        let index = PodIndex::new(nodes.iter().flat_map(|node| {
            snapshot
                .pods_on_node(node.metadata.name.as_deref().unwrap_or_default())
                .filter(live)
        }));
        let mut evicted: HashSet<&str> = HashSet::new();
        for node in nodes {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            let mut pods: Vec<&Pod> = snapshot.pods_on_node(name).filter(live).collect();
            podutil::sort_by_priority_low_to_high(&mut pods);
            for pod in pods {
                if anti_affinity_terms(pod).is_empty()
                    || !violates(pod, snapshot, &index, &node_map, &evicted)
                    || !evictor.filter(pod)
                    || !evictor.pre_eviction_filter(pod)
                {
                    continue;
                }
                let request = EvictionRequest {
                    strategy: PLUGIN_NAME,
                    reason: "",
                };
                let result = evictor.evict(pod, request);
                if result.is_ok() {
                    evicted.insert(pod.metadata.uid.as_deref().unwrap_or_default());
                }
                match after_eviction(result, PLUGIN_NAME) {
                    AfterEviction::Next => {}
                    AfterEviction::NextNode => break,
                    AfterEviction::Stop => return PluginStatus::Success,
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
    use k8s_openapi::api::core::v1::{Affinity, PodAntiAffinity};
    use k8s_openapi::jiff::Timestamp;
    use std::collections::BTreeMap;

    fn web(name: &str, node: &str, priority: i32) -> Pod {
        let mut p = pod(name, node);
        p.metadata.labels = Some(BTreeMap::from([("app".into(), "web".into())]));
        let spec = p.spec.as_mut().expect("spec");
        spec.priority = Some(priority);
        spec.affinity = Some(Affinity {
            pod_anti_affinity: Some(PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                    label_selector: Some(LabelSelector {
                        match_labels: Some(BTreeMap::from([("app".into(), "web".into())])),
                        ..Default::default()
                    }),
                    topology_key: "kubernetes.io/hostname".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        });
        p
    }

    #[test]
    fn the_lowest_priority_of_two_clashing_pods_is_evicted_once() {
        let plugin = factory(None).expect("valid");
        let snapshot = ClusterSnapshot::new(
            vec![node("a", &[]), node("b", &[])],
            vec![
                web("high", "a", 10),
                web("low", "a", 1),
                web("alone", "b", 1),
            ],
            vec![],
            Timestamp::UNIX_EPOCH,
        );
        let nodes: Vec<&Node> = snapshot.nodes().iter().collect();
        let mut evictor = FakeEvictor::default();
        plugin.deschedule(&snapshot, &nodes, &mut evictor);
        assert_eq!(evictor.evicted, ["low"]);
    }

    #[test]
    fn a_term_of_a_pod_without_a_namespace_selects_pods_in_default() {
        // The old copy put the pod in "" and found no clash with `default`.
        let plugin = factory(None).expect("valid");
        let mut bare = web("bare", "a", 1);
        bare.metadata.namespace = None;
        let snapshot = ClusterSnapshot::new(
            vec![node("a", &[])],
            vec![bare, web("high", "a", 10)],
            vec![],
            Timestamp::UNIX_EPOCH,
        );
        let nodes: Vec<&Node> = snapshot.nodes().iter().collect();
        let mut evictor = FakeEvictor::default();
        plugin.deschedule(&snapshot, &nodes, &mut evictor);
        assert_eq!(evictor.evicted, ["bare"]);
    }

    #[test]
    fn a_protected_pod_is_skipped_and_the_next_one_evicted() {
        let plugin = factory(None).expect("valid");
        let snapshot = ClusterSnapshot::new(
            vec![node("a", &[])],
            vec![web("high", "a", 10), web("low", "a", 1)],
            vec![],
            Timestamp::UNIX_EPOCH,
        );
        let nodes: Vec<&Node> = snapshot.nodes().iter().collect();
        let mut evictor = FakeEvictor {
            protected: ["low".to_string()].into(),
            ..Default::default()
        };
        plugin.deschedule(&snapshot, &nodes, &mut evictor);
        assert_eq!(evictor.evicted, ["high"]);
    }

    #[test]
    fn a_pod_preferring_no_eviction_is_taken_after_its_equal_peers() {
        let plugin = factory(None).expect("valid");
        let mut shy = web("shy", "a", 1);
        shy.metadata.annotations = Some(BTreeMap::from([(
            crate::nodeutil::PREFER_NO_EVICTION_ANNOTATION.to_string(),
            String::new(),
        )]));
        let snapshot = ClusterSnapshot::new(
            vec![node("a", &[]), node("b", &[])],
            vec![shy, web("plain", "a", 1)],
            vec![],
            Timestamp::UNIX_EPOCH,
        );
        let nodes: Vec<&Node> = snapshot.nodes().iter().collect();
        let mut evictor = FakeEvictor::default();
        plugin.deschedule(&snapshot, &nodes, &mut evictor);
        assert_eq!(evictor.evicted, ["plain"]);
    }
}
