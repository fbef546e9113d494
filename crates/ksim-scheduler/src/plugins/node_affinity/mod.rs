//! NodeAffinity: Filter on `spec.nodeSelector` and required node affinity
//! (PreFilter narrows to the nodes named by `matchFields metadata.name In`);
//! Score by the weights of matching preferred terms.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use ksim_core::node_affinity::{OBJECT_NAME_FIELD, PreferredSchedulingTerms, RequiredNodeAffinity};

use crate::framework::{
    CycleState, FilterPlugin, MAX_NODE_SCORE, NodeInfo, Plugin, PreFilterPlugin, PreFilterResult,
    PreScorePlugin, ScorePlugin, Snapshot, Status, default_normalize_score,
};

/// The plugin name.
pub const NAME: &str = "NodeAffinity";
/// The reason for a node the pod's affinity or selector excludes.
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";
/// The reason when every term names conflicting nodes.
pub const ERR_REASON_CONFLICT: &str = "pod affinity terms conflict";
const PRE_FILTER_KEY: &str = "PreFilterNodeAffinity";
const PRE_SCORE_KEY: &str = "PreScoreNodeAffinity";

/// Filters and scores nodes by node affinity.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeAffinity;

impl Plugin for NodeAffinity {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

/// The node names the required terms pin the pod to: `None` when some term
/// does not pin (all nodes stay candidates).
fn pinned_node_names(pod: &Pod) -> Option<BTreeSet<String>> {
    let terms = &pod
        .spec
        .as_ref()?
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    let mut names = BTreeSet::new();
    for term in terms {
        let mut term_names: Option<BTreeSet<String>> = None;
        for requirement in term.match_fields.iter().flatten() {
            if requirement.key == OBJECT_NAME_FIELD && requirement.operator == "In" {
                let values: BTreeSet<String> =
                    requirement.values.iter().flatten().cloned().collect();
                term_names = Some(match term_names {
                    None => values,
                    Some(existing) => existing.intersection(&values).cloned().collect(),
                });
            }
        }
        names.extend(term_names?);
    }
    Some(names)
}

impl PreFilterPlugin for NodeAffinity {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let required = RequiredNodeAffinity::from_pod(pod);
        if required.is_empty() {
            return (None, Status::skip());
        }
        state.write(PRE_FILTER_KEY, required);
        match pinned_node_names(pod) {
            Some(names) if names.is_empty() => (None, Status::unresolvable(ERR_REASON_CONFLICT)),
            Some(names) => (
                Some(PreFilterResult {
                    node_names: Some(names),
                }),
                Status::success(),
            ),
            None => (None, Status::success()),
        }
    }
}

impl FilterPlugin for NodeAffinity {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let Some(required) = state.read::<RequiredNodeAffinity>(PRE_FILTER_KEY) else {
            return Status::error(format!(
                "reading {PRE_FILTER_KEY:?} from cycleState: not found"
            ));
        };
        if required.matches_labels(node.labels(), node.name()) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_POD)
        }
    }
}

impl PreScorePlugin for NodeAffinity {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        _nodes: &[&NodeInfo],
        _snapshot: &Snapshot,
    ) -> Status {
        match PreferredSchedulingTerms::from_pod(pod) {
            Some(terms) => {
                state.write(PRE_SCORE_KEY, terms);
                Status::success()
            }
            None => Status::skip(),
        }
    }
}

impl ScorePlugin for NodeAffinity {
    fn score(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let terms = state
            .read::<PreferredSchedulingTerms>(PRE_SCORE_KEY)
            .ok_or_else(|| {
                Status::error(format!(
                    "reading {PRE_SCORE_KEY:?} from cycleState: not found"
                ))
            })?;
        Ok(terms.score(&node.node))
    }

    fn normalize_score(
        &self,
        _state: &CycleState,
        _pod: &Pod,
        _nodes: &[&NodeInfo],
        scores: &mut [i64],
    ) -> Status {
        default_normalize_score(MAX_NODE_SCORE, false, scores);
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        NodeAffinity as K8sNodeAffinity, NodeSelectorRequirement, NodeSelectorTerm,
        PreferredSchedulingTerm,
    };

    use super::*;
    use crate::testing::{filter_all, messages, node, pod, score_all};

    fn name_term(names: &[&str]) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![NodeSelectorRequirement {
                key: OBJECT_NAME_FIELD.to_string(),
                operator: "In".to_string(),
                values: Some(names.iter().map(|n| n.to_string()).collect()),
            }]),
        }
    }

    #[test]
    fn filter_follows_selector_and_required_affinity() {
        let snapshot = Snapshot::new(
            [
                node("n1").label("foo", "bar").obj(),
                node("n2").label("foo", "baz").obj(),
            ],
            [],
        );
        let mut pinned = pod("p");
        pinned.required_node_term(name_term(&["n2"]));
        let mut conflicting = pod("p");
        conflicting.required_node_term(NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![
                NodeSelectorRequirement {
                    key: OBJECT_NAME_FIELD.to_string(),
                    operator: "In".to_string(),
                    values: Some(vec!["n1".to_string()]),
                },
                NodeSelectorRequirement {
                    key: OBJECT_NAME_FIELD.to_string(),
                    operator: "In".to_string(),
                    values: Some(vec!["n2".to_string()]),
                },
            ]),
        });
        let cases = [
            ("no constraints", pod("p").obj(), ["", ""]),
            (
                "node selector",
                pod("p").node_selector("foo", "bar").obj(),
                ["", ERR_REASON_POD],
            ),
            (
                "affinity In",
                pod("p").node_affinity_in("foo", &["baz"]).obj(),
                [ERR_REASON_POD, ""],
            ),
            (
                "affinity In none",
                pod("p").node_affinity_in("foo", &["qux"]).obj(),
                [ERR_REASON_POD, ERR_REASON_POD],
            ),
            (
                "selector and affinity",
                pod("p")
                    .node_selector("foo", "bar")
                    .node_affinity_in("foo", &["baz"])
                    .obj(),
                [ERR_REASON_POD, ERR_REASON_POD],
            ),
            (
                "matchFields pins the node",
                pinned.obj(),
                ["not in PreFilterResult", ""],
            ),
            (
                "conflicting matchFields",
                conflicting.obj(),
                [ERR_REASON_CONFLICT, ERR_REASON_CONFLICT],
            ),
        ];
        for (name, pod, expected) in cases {
            assert_eq!(
                messages(&filter_all(&NodeAffinity, &pod, &snapshot)),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn pre_filter_result_is_the_union_of_pinning_terms() {
        let mut two_terms = pod("p");
        two_terms.required_node_term(name_term(&["a", "b"]));
        two_terms.required_node_term(name_term(&["c"]));
        assert_eq!(
            pinned_node_names(&two_terms.obj()),
            Some(["a", "b", "c"].iter().map(|s| s.to_string()).collect())
        );
        let mut one_open = pod("p");
        one_open.required_node_term(name_term(&["a"]));
        let open = one_open.node_affinity_in("foo", &["bar"]).obj();
        assert_eq!(pinned_node_names(&open), None);
    }

    #[test]
    fn score_sums_preferred_weights_normalized() {
        let mut p = pod("p").obj();
        let preferred = |weight: i32, key: &str, value: &str| PreferredSchedulingTerm {
            weight,
            preference: NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: key.to_string(),
                    operator: "In".to_string(),
                    values: Some(vec![value.to_string()]),
                }]),
                match_fields: None,
            },
        };
        if let Some(spec) = p.spec.as_mut() {
            spec.affinity = Some(k8s_openapi::api::core::v1::Affinity {
                node_affinity: Some(K8sNodeAffinity {
                    preferred_during_scheduling_ignored_during_execution: Some(vec![
                        preferred(2, "foo", "bar"),
                        preferred(4, "key", "value"),
                        preferred(5, "az", "az1"),
                    ]),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        let snapshot = Snapshot::new(
            [
                node("n1").label("foo", "bar").obj(),
                node("n2").label("key", "value").obj(),
                node("n3")
                    .label("foo", "bar")
                    .label("key", "value")
                    .label("az", "az1")
                    .obj(),
                node("n4").obj(),
            ],
            [],
        );
        assert_eq!(
            score_all(&NodeAffinity, &p, &snapshot),
            Some(vec![18, 36, 100, 0])
        );
        assert_eq!(
            score_all(&NodeAffinity, &pod("plain").obj(), &snapshot),
            None
        );
    }
}
