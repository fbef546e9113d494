//! The disruption controller's budget cache, fed by a watch: budgets by
//! namespace with their parsed selectors, so a pod event finds its budgets
//! among its namespace's only. A re-list prunes what it no longer holds.

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use ksim_core::selector::LabelSelectorRequirements;

use crate::cache::Key;
use crate::common::{parse_selector, selector_matches};

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
    use std::sync::Arc;

    fn pod(namespace: &str, name: &str, labels: serde_json::Value) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"namespace": namespace, "name": name, "labels": labels}
            }))
            .expect("pod"),
        )
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
