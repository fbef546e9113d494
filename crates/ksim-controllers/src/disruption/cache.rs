//! The disruption controller's caches, fed by watches: pods indexed by
//! namespace and by each `(namespace, label, value)`, so a budget finds its
//! pods at the cost of its own pods (the smallest posting list of its
//! matchLabels, then the full selector); and budgets by namespace, so a pod
//! event finds its budgets among its namespace's only. A re-list prunes
//! what it no longer holds.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use ksim_core::selector::LabelSelectorRequirements;

use crate::common::{parse_selector, selector_matches};

/// A namespaced object's key.
pub(crate) type Key = (String, String);

type LabelKey = (String, String, String);

/// Pods by key, with their label and namespace indexes.
#[derive(Default)]
pub(crate) struct PodIndex {
    pods: HashMap<Key, Arc<Pod>>,
    by_label: HashMap<LabelKey, HashSet<String>>,
    by_namespace: HashMap<String, HashSet<String>>,
    /// Keys seen since the last `Init` of a re-list, while one runs.
    relisting: Option<HashSet<Key>>,
}

fn key_of_pod(pod: &Pod) -> Key {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

impl PodIndex {
    /// How many pods are cached.
    pub(crate) fn len(&self) -> usize {
        self.pods.len()
    }

    /// Stores `pod`; returns the version it replaced.
    pub(crate) fn apply(&mut self, pod: Arc<Pod>) -> Option<Arc<Pod>> {
        let key = key_of_pod(&pod);
        if let Some(seen) = self.relisting.as_mut() {
            seen.insert(key.clone());
        }
        let old = self.remove_key(&key);
        let (namespace, name) = &key;
        for (label, value) in pod.metadata.labels.iter().flatten() {
            self.by_label
                .entry((namespace.clone(), label.clone(), value.clone()))
                .or_default()
                .insert(name.clone());
        }
        self.by_namespace
            .entry(namespace.clone())
            .or_default()
            .insert(name.clone());
        self.pods.insert(key, pod);
        old
    }

    /// Forgets `pod`; returns the cached version.
    pub(crate) fn delete(&mut self, pod: &Pod) -> Option<Arc<Pod>> {
        self.remove_key(&key_of_pod(pod))
    }

    fn remove_key(&mut self, key: &Key) -> Option<Arc<Pod>> {
        let old = self.pods.remove(key)?;
        let (namespace, name) = key;
        for (label, value) in old.metadata.labels.iter().flatten() {
            let label_key = (namespace.clone(), label.clone(), value.clone());
            if let Some(names) = self.by_label.get_mut(&label_key) {
                names.remove(name);
                if names.is_empty() {
                    self.by_label.remove(&label_key);
                }
            }
        }
        if let Some(names) = self.by_namespace.get_mut(namespace) {
            names.remove(name);
            if names.is_empty() {
                self.by_namespace.remove(namespace);
            }
        }
        Some(old)
    }

    /// A re-list starts: pods it does not list again are pruned at its end.
    pub(crate) fn start_relist(&mut self) {
        self.relisting = Some(HashSet::new());
    }

    /// A re-list ended: forgets and returns the pods it did not list.
    pub(crate) fn finish_relist(&mut self) -> Vec<Arc<Pod>> {
        let Some(seen) = self.relisting.take() else {
            return Vec::new();
        };
        let gone: Vec<Key> = self
            .pods
            .keys()
            .filter(|key| !seen.contains(*key))
            .cloned()
            .collect();
        gone.iter().filter_map(|key| self.remove_key(key)).collect()
    }

    /// The pods of `namespace` that `selector` (parsed as `requirements`)
    /// selects. Candidates come from the smallest posting list of its
    /// matchLabels, else from the namespace.
    pub(crate) fn select(
        &self,
        namespace: &str,
        selector: &LabelSelector,
        requirements: &LabelSelectorRequirements,
    ) -> Vec<Arc<Pod>> {
        let empty = HashSet::new();
        let candidates = match selector.match_labels.as_ref().filter(|m| !m.is_empty()) {
            Some(labels) => labels
                .iter()
                .map(|(label, value)| {
                    self.by_label
                        .get(&(namespace.to_string(), label.clone(), value.clone()))
                        .unwrap_or(&empty)
                })
                .min_by_key(|names| names.len())
                .unwrap_or(&empty),
            None => self.by_namespace.get(namespace).unwrap_or(&empty),
        };
        let mut pods: Vec<Arc<Pod>> = candidates
            .iter()
            .filter_map(|name| self.pods.get(&(namespace.to_string(), name.clone())))
            .filter(|pod| selector_matches(requirements, pod.metadata.labels.as_ref()))
            .cloned()
            .collect();
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        pods
    }
}

/// The budgets of each namespace with their parsed selectors (None: no
/// selector or an invalid one, which selects nothing here).
#[derive(Default)]
pub(crate) struct BudgetIndex {
    by_namespace: HashMap<String, BTreeMap<String, Option<LabelSelectorRequirements>>>,
    relisting: Option<HashSet<Key>>,
}

impl BudgetIndex {
    /// Stores `pdb`'s selector.
    pub(crate) fn apply(&mut self, pdb: &PodDisruptionBudget) {
        let namespace = pdb.metadata.namespace.clone().unwrap_or_default();
        let name = pdb.metadata.name.clone().unwrap_or_default();
        if let Some(seen) = self.relisting.as_mut() {
            seen.insert((namespace.clone(), name.clone()));
        }
        let selector = pdb
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .and_then(|s| parse_selector(s).ok());
        self.by_namespace
            .entry(namespace)
            .or_default()
            .insert(name, selector);
    }

    /// Forgets `pdb`.
    pub(crate) fn delete(&mut self, pdb: &PodDisruptionBudget) {
        let namespace = pdb.metadata.namespace.clone().unwrap_or_default();
        let name = pdb.metadata.name.clone().unwrap_or_default();
        self.remove(&namespace, &name);
    }

    fn remove(&mut self, namespace: &str, name: &str) {
        if let Some(budgets) = self.by_namespace.get_mut(namespace) {
            budgets.remove(name);
            if budgets.is_empty() {
                self.by_namespace.remove(namespace);
            }
        }
    }

    /// A re-list starts.
    pub(crate) fn start_relist(&mut self) {
        self.relisting = Some(HashSet::new());
    }

    /// A re-list ended: forgets the budgets it did not list.
    pub(crate) fn finish_relist(&mut self) {
        let Some(seen) = self.relisting.take() else {
            return;
        };
        let gone: Vec<Key> = self
            .by_namespace
            .iter()
            .flat_map(|(namespace, budgets)| {
                budgets.keys().map(|name| (namespace.clone(), name.clone()))
            })
            .filter(|key| !seen.contains(key))
            .collect();
        for (namespace, name) in gone {
            self.remove(&namespace, &name);
        }
    }

    /// The names of the budgets in the pod's namespace whose selector
    /// matches its labels.
    pub(crate) fn budgets_of(&self, pod: &Pod) -> Vec<Key> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let Some(budgets) = self.by_namespace.get(&namespace) else {
            return Vec::new();
        };
        budgets
            .iter()
            .filter(|(_, selector)| {
                selector
                    .as_ref()
                    .is_some_and(|s| selector_matches(s, pod.metadata.labels.as_ref()))
            })
            .map(|(name, _)| (namespace.clone(), name.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(namespace: &str, name: &str, labels: serde_json::Value) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"namespace": namespace, "name": name, "labels": labels}
            }))
            .expect("pod"),
        )
    }

    fn selector(value: serde_json::Value) -> (LabelSelector, LabelSelectorRequirements) {
        let selector: LabelSelector = serde_json::from_value(value).expect("selector");
        let parsed = parse_selector(&selector).expect("valid");
        (selector, parsed)
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<&str> {
        pods.iter()
            .map(|p| p.metadata.name.as_deref().unwrap_or_default())
            .collect()
    }

    #[test]
    fn selection_reads_only_the_namespace_and_matching_labels() {
        let mut index = PodIndex::default();
        index.apply(pod("a", "web-1", json!({"app": "web", "tier": "x"})));
        index.apply(pod("a", "web-2", json!({"app": "web", "tier": "y"})));
        index.apply(pod("a", "db-1", json!({"app": "db"})));
        index.apply(pod("b", "web-3", json!({"app": "web"})));
        let cases = [
            (
                json!({"matchLabels": {"app": "web"}}),
                "a",
                vec!["web-1", "web-2"],
            ),
            (
                json!({"matchLabels": {"app": "web", "tier": "y"}}),
                "a",
                vec!["web-2"],
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["db", "web"]}]}),
                "a",
                vec!["db-1", "web-1", "web-2"],
            ),
            (
                json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]}),
                "a",
                vec!["web-2"],
            ),
            (json!({}), "b", vec!["web-3"]),
            (json!({"matchLabels": {"app": "none"}}), "a", vec![]),
            (json!({"matchLabels": {"app": "web"}}), "c", vec![]),
        ];
        for (value, namespace, want) in cases {
            let (selector, parsed) = selector(value.clone());
            assert_eq!(
                names(&index.select(namespace, &selector, &parsed)),
                want,
                "{value} in {namespace}"
            );
        }
    }

    #[test]
    fn relabelled_and_deleted_pods_leave_the_indexes() {
        let mut index = PodIndex::default();
        index.apply(pod("a", "p", json!({"app": "web"})));
        let old = index.apply(pod("a", "p", json!({"app": "db"})));
        assert!(old.is_some());
        let (web, web_parsed) = selector(json!({"matchLabels": {"app": "web"}}));
        let (db, db_parsed) = selector(json!({"matchLabels": {"app": "db"}}));
        assert!(index.select("a", &web, &web_parsed).is_empty());
        assert_eq!(names(&index.select("a", &db, &db_parsed)), vec!["p"]);
        let gone = pod("a", "p", json!({}));
        assert!(index.delete(&gone).is_some());
        assert!(index.select("a", &db, &db_parsed).is_empty());
        assert_eq!(index.len(), 0);
        assert!(index.by_label.is_empty() && index.by_namespace.is_empty());
    }

    #[test]
    fn a_relist_prunes_the_pods_it_did_not_list() {
        let mut index = PodIndex::default();
        index.apply(pod("a", "kept", json!({})));
        index.apply(pod("a", "gone", json!({})));
        index.start_relist();
        index.apply(pod("a", "kept", json!({})));
        index.apply(pod("a", "new", json!({})));
        let pruned = index.finish_relist();
        assert_eq!(names(&pruned), vec!["gone"]);
        assert_eq!(index.len(), 2);
        assert!(index.finish_relist().is_empty());
    }

    #[test]
    fn budgets_of_a_pod_are_those_of_its_namespace_that_select_it() {
        let budget = |namespace: &str, name: &str, selector: serde_json::Value| {
            serde_json::from_value::<PodDisruptionBudget>(json!({
                "metadata": {"namespace": namespace, "name": name},
                "spec": {"selector": selector}
            }))
            .expect("pdb")
        };
        let mut index = BudgetIndex::default();
        index.apply(&budget("a", "web", json!({"matchLabels": {"app": "web"}})));
        index.apply(&budget("a", "all", json!({})));
        index.apply(&budget("b", "web", json!({"matchLabels": {"app": "web"}})));
        let web = pod("a", "p", json!({"app": "web"}));
        let keys = |index: &BudgetIndex| -> Vec<String> {
            index.budgets_of(&web).into_iter().map(|(_, n)| n).collect()
        };
        assert_eq!(keys(&index), vec!["all", "web"]);
        index.start_relist();
        index.apply(&budget("a", "web", json!({"matchLabels": {"app": "web"}})));
        index.finish_relist();
        assert_eq!(keys(&index), vec!["web"]);
        index.delete(&budget("a", "web", json!({})));
        assert!(keys(&index).is_empty());
    }
}
