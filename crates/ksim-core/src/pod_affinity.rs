//! A pod (anti-)affinity term, parsed once (upstream `framework.AffinityTerm`
//! and `GetNamespacesFromPodAffinityTerm`): which pods, in which namespaces,
//! it selects.
//!
//! Namespaces: the listed ones, or the pod's own when none are listed and
//! there is no `namespaceSelector`; a pod in a namespace whose labels the
//! `namespaceSelector` matches is also in scope (an empty selector matches
//! every namespace, an absent one none). A missing `labelSelector` selects
//! no pod. A pod without a namespace is in `default`, as the API server
//! would have put it.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm};

use crate::Error;
use crate::selector::{LabelSelectorRequirements, Labels, NilableSelector, NoLabels};

/// The namespace of a pod (`default` when unset).
pub fn pod_namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

/// The labels of a pod (none when unset).
pub fn pod_labels(pod: &Pod) -> &dyn Labels {
    match pod.metadata.labels.as_ref() {
        Some(labels) => labels,
        None => &NoLabels,
    }
}

/// A parsed pod (anti-)affinity term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedPodAffinityTerm {
    /// The namespaces named by the term (or the pod's own).
    pub namespaces: BTreeSet<String>,
    /// Selects pods by label; `None` selects none.
    pub selector: Option<LabelSelectorRequirements>,
    /// Selects namespaces by label; `None` selects none.
    pub namespace_selector: Option<LabelSelectorRequirements>,
    /// The node label whose values are the topology domains.
    pub topology_key: String,
}

impl ParsedPodAffinityTerm {
    /// Parses a term of a pod in `pod_namespace`. A selector that does not
    /// parse is an error.
    pub fn parse(term: &PodAffinityTerm, pod_namespace: &str) -> Result<Self, Error> {
        let selector = LabelSelectorRequirements::from_optional(term.label_selector.as_ref())?;
        let namespace_selector =
            LabelSelectorRequirements::from_optional(term.namespace_selector.as_ref())?;
        let listed = term.namespaces.as_deref().unwrap_or_default();
        let namespaces = if listed.is_empty() && term.namespace_selector.is_none() {
            BTreeSet::from([pod_namespace.to_string()])
        } else {
            listed.iter().cloned().collect()
        };
        Ok(ParsedPodAffinityTerm {
            namespaces,
            selector,
            namespace_selector,
            topology_key: term.topology_key.clone(),
        })
    }

    /// Parses a term of `pod` (its namespace `default` when unset).
    pub fn for_pod(term: &PodAffinityTerm, pod: &Pod) -> Result<Self, Error> {
        Self::parse(term, pod_namespace(pod))
    }

    /// Whether the namespace selector selects every namespace (an empty
    /// selector; upstream keeps such a term's selector as it is when it
    /// resolves selectors into namespace lists).
    pub fn selects_every_namespace(&self) -> bool {
        self.namespace_selector.selects_everything()
    }

    /// Whether `pod` (in a namespace with `namespace_labels`) is selected.
    pub fn matches_pod(&self, pod: &Pod, namespace_labels: &dyn Labels) -> bool {
        self.matches(pod_namespace(pod), pod_labels(pod), || {
            Some(namespace_labels)
        })
    }

    /// Whether a pod in `namespace` is in the term's scope; the namespace's
    /// labels are asked for only when the term has a namespace selector.
    pub fn selects_namespace<'l>(
        &self,
        namespace: &str,
        namespace_labels: impl FnOnce() -> Option<&'l dyn Labels>,
    ) -> bool {
        self.namespaces.contains(namespace)
            || self
                .namespace_selector
                .as_ref()
                .is_some_and(|selector| namespace_labels().is_some_and(|l| selector.matches(l)))
    }

    /// Whether a pod in `namespace` with `labels` is selected.
    pub fn matches<'l>(
        &self,
        namespace: &str,
        labels: &dyn Labels,
        namespace_labels: impl FnOnce() -> Option<&'l dyn Labels>,
    ) -> bool {
        self.selector.selects(labels) && self.selects_namespace(namespace, namespace_labels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn term(value: serde_json::Value) -> PodAffinityTerm {
        serde_json::from_value(value).expect("a term")
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn own_namespace_only_without_namespaces_or_selector() {
        let parsed = ParsedPodAffinityTerm::parse(
            &term(serde_json::json!({"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "a"}}})),
            "team",
        )
        .expect("parses");
        let app = labels(&[("app", "a")]);
        assert!(parsed.matches("team", &app, || None));
        assert!(!parsed.matches("other", &app, || None));
        assert!(!parsed.matches("team", &labels(&[("app", "b")]), || None));
    }

    #[test]
    fn namespace_selector_widens_and_replaces_the_own_namespace() {
        // The descheduler's old copies ignored namespaceSelector and kept the
        // pod's own namespace.
        let parsed = ParsedPodAffinityTerm::parse(
            &term(
                serde_json::json!({"topologyKey": "zone", "labelSelector": {},
                "namespaceSelector": {"matchLabels": {"team": "x"}}}),
            ),
            "home",
        )
        .expect("parses");
        let x = labels(&[("team", "x")]);
        let y = labels(&[("team", "y")]);
        let pod = labels(&[]);
        assert!(parsed.matches("other", &pod, || Some(&x as &dyn Labels)));
        assert!(!parsed.matches("other", &pod, || Some(&y as &dyn Labels)));
        assert!(!parsed.matches("home", &pod, || Some(&y as &dyn Labels)));
        // An empty namespace selector is every namespace.
        let all = ParsedPodAffinityTerm::parse(
            &term(serde_json::json!({"topologyKey": "zone", "labelSelector": {}, "namespaceSelector": {}})),
            "home",
        )
        .expect("parses");
        assert!(all.matches("other", &pod, || Some(&y as &dyn Labels)));
        // Listed namespaces plus the selector.
        let listed = ParsedPodAffinityTerm::parse(
            &term(
                serde_json::json!({"topologyKey": "zone", "labelSelector": {}, "namespaces": ["a"],
                "namespaceSelector": {"matchLabels": {"team": "x"}}}),
            ),
            "home",
        )
        .expect("parses");
        assert!(listed.matches("a", &pod, || Some(&y as &dyn Labels)));
        assert!(listed.matches("b", &pod, || Some(&x as &dyn Labels)));
        assert!(!listed.matches("home", &pod, || Some(&y as &dyn Labels)));
    }

    #[test]
    fn a_pod_without_a_namespace_is_in_default() {
        // The descheduler's copy put such a pod in "" and so found no
        // neighbour in `default` for the term.
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "labels": {"app": "a"}}
        }))
        .expect("pod");
        let parsed = ParsedPodAffinityTerm::for_pod(
            &term(serde_json::json!({"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "a"}}})),
            &pod,
        )
        .expect("parses");
        assert_eq!(parsed.namespaces, BTreeSet::from(["default".to_string()]));
        assert!(parsed.matches_pod(&pod, &NoLabels));
        assert!(!parsed.matches("", &labels(&[("app", "a")]), || None));
    }

    #[test]
    fn a_missing_label_selector_selects_nothing_and_bad_ones_are_errors() {
        let parsed =
            ParsedPodAffinityTerm::parse(&term(serde_json::json!({"topologyKey": "zone"})), "ns")
                .expect("parses");
        assert!(!parsed.matches("ns", &labels(&[]), || None));
        let bad = term(serde_json::json!({"topologyKey": "zone",
            "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}}));
        assert!(ParsedPodAffinityTerm::parse(&bad, "ns").is_err());
    }
}
