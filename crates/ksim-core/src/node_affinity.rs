//! Node affinity matching as upstream's `component-helpers/scheduling/corev1/nodeaffinity`:
//! a pod's `nodeSelector` plus its required `NodeSelectorTerms` (ORed terms of
//! ANDed `matchExpressions` with In/NotIn/Exists/DoesNotExist/Gt/Lt and
//! `matchFields` on `metadata.name`), and the weighted preferred terms.
//! Terms that do not parse match nothing (upstream's lazy-error selector).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod, PreferredSchedulingTerm,
};

use crate::selector::{Labels, Requirement};

/// The only field `matchFields` may name.
pub const OBJECT_NAME_FIELD: &str = "metadata.name";

/// One parsed term: all requirements must hold. An empty term matches no node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedTerm {
    /// From `matchExpressions`, against node labels.
    pub label_requirements: Vec<Requirement>,
    /// From `matchFields`, against `metadata.name`: In/NotIn only.
    pub field_requirements: Vec<Requirement>,
}

impl ParsedTerm {
    /// Parses a term; `None` when any requirement is invalid.
    pub fn parse(term: &NodeSelectorTerm) -> Option<Self> {
        let label_requirements = term
            .match_expressions
            .iter()
            .flatten()
            .map(parse_label_requirement)
            .collect::<Option<Vec<_>>>()?;
        let field_requirements = term
            .match_fields
            .iter()
            .flatten()
            .map(parse_field_requirement)
            .collect::<Option<Vec<_>>>()?;
        Some(ParsedTerm {
            label_requirements,
            field_requirements,
        })
    }

    /// Whether the term selects a node with these labels and name.
    pub fn matches(&self, labels: &dyn Labels, node_name: &str) -> bool {
        if self.label_requirements.is_empty() && self.field_requirements.is_empty() {
            return false;
        }
        let fields = NodeFields(node_name);
        self.label_requirements.iter().all(|r| r.matches(labels))
            && self.field_requirements.iter().all(|r| r.matches(&fields))
    }
}

struct NodeFields<'a>(&'a str);

impl Labels for NodeFields<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        (key == OBJECT_NAME_FIELD).then_some(self.0)
    }
}

fn parse_label_requirement(requirement: &NodeSelectorRequirement) -> Option<Requirement> {
    let key = requirement.key.clone();
    let values = requirement.values.clone().unwrap_or_default();
    match requirement.operator.as_str() {
        "In" if !values.is_empty() => Some(Requirement::In(key, values)),
        "NotIn" if !values.is_empty() => Some(Requirement::NotIn(key, values)),
        "Exists" if values.is_empty() => Some(Requirement::Exists(key)),
        "DoesNotExist" if values.is_empty() => Some(Requirement::DoesNotExist(key)),
        "Gt" | "Lt" => {
            let [value] = values.as_slice() else {
                return None;
            };
            let n: i64 = value.parse().ok()?;
            Some(if requirement.operator == "Gt" {
                Requirement::GreaterThan(key, n)
            } else {
                Requirement::LessThan(key, n)
            })
        }
        _ => None,
    }
}

fn parse_field_requirement(requirement: &NodeSelectorRequirement) -> Option<Requirement> {
    if requirement.key != OBJECT_NAME_FIELD {
        return None;
    }
    let values = requirement.values.clone().unwrap_or_default();
    // Field selectors take exactly one value for In/NotIn.
    if values.len() != 1 {
        return None;
    }
    match requirement.operator.as_str() {
        "In" => Some(Requirement::In(requirement.key.clone(), values)),
        "NotIn" => Some(Requirement::NotIn(requirement.key.clone(), values)),
        _ => None,
    }
}

/// A parsed `NodeSelector`: ORed terms. Terms that fail to parse are kept out
/// (they match nothing); no term at all matches nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedNodeSelector {
    pub terms: Vec<ParsedTerm>,
    /// Whether some term failed to parse.
    pub had_parse_errors: bool,
}

impl ParsedNodeSelector {
    /// Parses every term, dropping invalid ones.
    pub fn parse(selector: &NodeSelector) -> Self {
        let mut parsed = ParsedNodeSelector::default();
        for term in &selector.node_selector_terms {
            match ParsedTerm::parse(term) {
                Some(term) => parsed.terms.push(term),
                None => parsed.had_parse_errors = true,
            }
        }
        parsed
    }

    /// Whether any term selects the node.
    pub fn matches(&self, labels: &dyn Labels, node_name: &str) -> bool {
        self.terms.iter().any(|t| t.matches(labels, node_name))
    }
}

/// A pod's hard node constraints: `spec.nodeSelector` and the required
/// node affinity (upstream `RequiredNodeAffinity`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequiredNodeAffinity {
    node_selector: Option<BTreeMap<String, String>>,
    required: Option<ParsedNodeSelector>,
}

impl RequiredNodeAffinity {
    /// Reads the pod's nodeSelector and requiredDuringSchedulingIgnoredDuringExecution.
    pub fn from_pod(pod: &Pod) -> Self {
        let spec = pod.spec.as_ref();
        let node_selector = spec
            .and_then(|s| s.node_selector.clone())
            .filter(|s| !s.is_empty());
        let required = spec
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(ParsedNodeSelector::parse);
        RequiredNodeAffinity {
            node_selector,
            required,
        }
    }

    /// Whether the pod has neither a nodeSelector nor required node affinity.
    pub fn is_empty(&self) -> bool {
        self.node_selector.is_none() && self.required.is_none()
    }

    /// Whether the node satisfies both the nodeSelector and the required affinity.
    pub fn matches(&self, node: &Node) -> bool {
        let empty = BTreeMap::new();
        let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
        let name = node.metadata.name.as_deref().unwrap_or_default();
        self.matches_labels(labels, name)
    }

    /// Whether a node with these labels and this name satisfies the pod.
    pub fn matches_labels(&self, labels: &BTreeMap<String, String>, node_name: &str) -> bool {
        if let Some(selector) = &self.node_selector
            && !selector.iter().all(|(k, v)| labels.get(k) == Some(v))
        {
            return false;
        }
        self.required
            .as_ref()
            .is_none_or(|required| required.matches(labels, node_name))
    }
}

/// A pod's weighted preferred node affinity terms (weight-0 and invalid
/// terms dropped, as upstream).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreferredSchedulingTerms {
    pub terms: Vec<(i32, ParsedTerm)>,
}

impl PreferredSchedulingTerms {
    /// Parses the terms.
    pub fn parse(terms: &[PreferredSchedulingTerm]) -> Self {
        PreferredSchedulingTerms {
            terms: terms
                .iter()
                .filter(|t| t.weight != 0)
                .filter_map(|t| ParsedTerm::parse(&t.preference).map(|p| (t.weight, p)))
                .collect(),
        }
    }

    /// The pod's preferred terms, if any.
    pub fn from_pod(pod: &Pod) -> Option<Self> {
        let terms = pod
            .spec
            .as_ref()?
            .affinity
            .as_ref()?
            .node_affinity
            .as_ref()?
            .preferred_during_scheduling_ignored_during_execution
            .as_ref()?;
        Some(Self::parse(terms))
    }

    /// The sum of the weights of the terms the node matches.
    pub fn score(&self, node: &Node) -> i64 {
        let empty = BTreeMap::new();
        let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
        let name = node.metadata.name.as_deref().unwrap_or_default();
        self.terms
            .iter()
            .filter(|(_, term)| term.matches(labels, name))
            .map(|(weight, _)| i64::from(*weight))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Affinity, NodeAffinity, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn requirement(key: &str, operator: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.to_string(),
            operator: operator.to_string(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn term(
        expressions: Vec<NodeSelectorRequirement>,
        fields: Vec<NodeSelectorRequirement>,
    ) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: Some(expressions),
            match_fields: Some(fields),
        }
    }

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn pod(node_selector: &[(&str, &str)], terms: Option<Vec<NodeSelectorTerm>>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                node_selector: (!node_selector.is_empty()).then(|| {
                    node_selector
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect()
                }),
                affinity: terms.map(|terms| Affinity {
                    node_affinity: Some(NodeAffinity {
                        required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                            node_selector_terms: terms,
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn required_affinity_matches_as_upstream() {
        let n = node("node-1", &[("foo", "bar"), ("gpu", "4"), ("zone", "a")]);
        let cases = [
            ("no constraints", pod(&[], None), true),
            ("node selector matches", pod(&[("foo", "bar")], None), true),
            (
                "node selector mismatch",
                pod(&[("foo", "baz")], None),
                false,
            ),
            (
                "node selector missing label",
                pod(&[("missing", "x")], None),
                false,
            ),
            (
                "In",
                pod(
                    &[],
                    Some(vec![term(
                        vec![requirement("foo", "In", &["x", "bar"])],
                        vec![],
                    )]),
                ),
                true,
            ),
            (
                "In mismatch",
                pod(
                    &[],
                    Some(vec![term(vec![requirement("foo", "In", &["x"])], vec![])]),
                ),
                false,
            ),
            (
                "NotIn",
                pod(
                    &[],
                    Some(vec![term(
                        vec![requirement("foo", "NotIn", &["x"])],
                        vec![],
                    )]),
                ),
                true,
            ),
            (
                "NotIn absent key",
                pod(
                    &[],
                    Some(vec![term(
                        vec![requirement("nope", "NotIn", &["x"])],
                        vec![],
                    )]),
                ),
                true,
            ),
            (
                "Exists",
                pod(
                    &[],
                    Some(vec![term(vec![requirement("foo", "Exists", &[])], vec![])]),
                ),
                true,
            ),
            (
                "DoesNotExist",
                pod(
                    &[],
                    Some(vec![term(
                        vec![requirement("foo", "DoesNotExist", &[])],
                        vec![],
                    )]),
                ),
                false,
            ),
            (
                "Gt",
                pod(
                    &[],
                    Some(vec![term(vec![requirement("gpu", "Gt", &["3"])], vec![])]),
                ),
                true,
            ),
            (
                "Gt equal",
                pod(
                    &[],
                    Some(vec![term(vec![requirement("gpu", "Gt", &["4"])], vec![])]),
                ),
                false,
            ),
            (
                "Lt",
                pod(
                    &[],
                    Some(vec![term(vec![requirement("gpu", "Lt", &["5"])], vec![])]),
                ),
                true,
            ),
            (
                "Gt not a number",
                pod(
                    &[],
                    Some(vec![term(vec![requirement("gpu", "Gt", &["x"])], vec![])]),
                ),
                false,
            ),
            (
                "Gt two values",
                pod(
                    &[],
                    Some(vec![term(
                        vec![requirement("gpu", "Gt", &["1", "2"])],
                        vec![],
                    )]),
                ),
                false,
            ),
            (
                "terms are ORed",
                pod(
                    &[],
                    Some(vec![
                        term(vec![requirement("foo", "In", &["x"])], vec![]),
                        term(vec![requirement("zone", "In", &["a"])], vec![]),
                    ]),
                ),
                true,
            ),
            (
                "expressions are ANDed",
                pod(
                    &[],
                    Some(vec![term(
                        vec![
                            requirement("foo", "In", &["bar"]),
                            requirement("zone", "In", &["b"]),
                        ],
                        vec![],
                    )]),
                ),
                false,
            ),
            (
                "empty term matches nothing",
                pod(&[], Some(vec![term(vec![], vec![])])),
                false,
            ),
            ("no terms matches nothing", pod(&[], Some(vec![])), false),
            (
                "invalid term ignored, valid one matches",
                pod(
                    &[],
                    Some(vec![
                        term(vec![requirement("foo", "Bogus", &["x"])], vec![]),
                        term(vec![requirement("foo", "Exists", &[])], vec![]),
                    ]),
                ),
                true,
            ),
            (
                "matchFields name In",
                pod(
                    &[],
                    Some(vec![term(
                        vec![],
                        vec![requirement("metadata.name", "In", &["node-1"])],
                    )]),
                ),
                true,
            ),
            (
                "matchFields name NotIn",
                pod(
                    &[],
                    Some(vec![term(
                        vec![],
                        vec![requirement("metadata.name", "NotIn", &["node-1"])],
                    )]),
                ),
                false,
            ),
            (
                "matchFields other field invalid",
                pod(
                    &[],
                    Some(vec![term(
                        vec![],
                        vec![requirement("metadata.uid", "In", &["x"])],
                    )]),
                ),
                false,
            ),
            (
                "selector and affinity both needed",
                pod(
                    &[("foo", "bar")],
                    Some(vec![term(vec![requirement("zone", "In", &["b"])], vec![])]),
                ),
                false,
            ),
        ];
        for (name, pod, expected) in cases {
            assert_eq!(
                RequiredNodeAffinity::from_pod(&pod).matches(&n),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn preferred_terms_sum_matching_weights() {
        let terms = vec![
            PreferredSchedulingTerm {
                weight: 5,
                preference: term(vec![requirement("zone", "In", &["a"])], vec![]),
            },
            PreferredSchedulingTerm {
                weight: 3,
                preference: term(vec![requirement("foo", "Exists", &[])], vec![]),
            },
            PreferredSchedulingTerm {
                weight: 0,
                preference: term(vec![requirement("foo", "Exists", &[])], vec![]),
            },
            PreferredSchedulingTerm {
                weight: 7,
                preference: term(vec![requirement("zone", "In", &["b"])], vec![]),
            },
        ];
        let parsed = PreferredSchedulingTerms::parse(&terms);
        assert_eq!(parsed.score(&node("n", &[("zone", "a"), ("foo", "")])), 8);
        assert_eq!(parsed.score(&node("n", &[("zone", "b")])), 7);
        assert_eq!(parsed.score(&node("n", &[])), 0);
    }
}
