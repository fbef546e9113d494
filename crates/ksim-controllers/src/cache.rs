//! The pod cache the ReplicaSet and disruption controllers share, fed by a
//! pod watch: pods by namespace, indexed by each `(label, value)` (a
//! selector finds its pods at the cost of the smallest posting list of its
//! matchLabels), by controller uid (a ReplicaSet finds its own pods without
//! a selector scan) and as orphans (the pods it may adopt). A re-list
//! prunes what it no longer holds. Lookups borrow the caller's strings; no
//! key is allocated per pod. Its maps hash with foldhash, not SipHash:
//! four controllers each index every pod (a restored cluster's 100,000 at
//! once), and the keys are the cluster's own names, not an attacker's.

use std::collections::{HashMap as StdHashMap, HashSet as StdHashSet};

use foldhash::fast::FixedState;

type HashMap<K, V> = StdHashMap<K, V, FixedState>;
type HashSet<K> = StdHashSet<K, FixedState>;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use ksim_core::selector::LabelSelectorRequirements;

use crate::common::{controller_of, selector_matches};

/// A namespaced object's key.
pub(crate) type Key = (String, String);

/// A pod's name, shared by the namespace's map and every index naming it
/// (one allocation per pod, however many labels it has).
type Name = Arc<str>;

/// The pods of one namespace and their indexes.
#[derive(Default)]
struct Namespace {
    pods: HashMap<Name, Arc<Pod>>,
    /// Pod names by label, then by the label's value.
    by_label: HashMap<String, HashMap<String, HashSet<Name>>>,
    /// Pod names by the uid of their controller.
    by_controller: HashMap<String, HashSet<Name>>,
    /// Pods without a controller.
    orphans: HashSet<Name>,
}

/// The set under `key` of `map`, created empty when missing; `key` is
/// copied only then.
fn set_of<'a>(map: &'a mut HashMap<String, HashSet<Name>>, key: &str) -> &'a mut HashSet<Name> {
    if !map.contains_key(key) {
        map.insert(key.to_string(), HashSet::default());
    }
    map.get_mut(key).expect("inserted above")
}

/// Removes `name` from the set under `key` of `map`, and the set once empty.
fn unindex(map: &mut HashMap<String, HashSet<Name>>, key: &str, name: &str) {
    if let Some(names) = map.get_mut(key) {
        names.remove(name);
        if names.is_empty() {
            map.remove(key);
        }
    }
}

impl Namespace {
    fn insert(&mut self, name: &str, pod: Arc<Pod>) {
        let name: Name = Arc::from(name);
        for (label, value) in pod.metadata.labels.iter().flatten() {
            if !self.by_label.contains_key(label) {
                self.by_label.insert(label.clone(), HashMap::default());
            }
            let values = self.by_label.get_mut(label).expect("inserted above");
            set_of(values, value).insert(Arc::clone(&name));
        }
        match controller_of(&pod.metadata) {
            Some(owner) => {
                set_of(&mut self.by_controller, &owner.uid).insert(Arc::clone(&name));
            }
            None => {
                self.orphans.insert(Arc::clone(&name));
            }
        }
        self.pods.insert(name, pod);
    }

    fn remove(&mut self, name: &str) -> Option<Arc<Pod>> {
        let old = self.pods.remove(name)?;
        for (label, value) in old.metadata.labels.iter().flatten() {
            if let Some(values) = self.by_label.get_mut(label.as_str()) {
                unindex(values, value, name);
                if values.is_empty() {
                    self.by_label.remove(label.as_str());
                }
            }
        }
        match controller_of(&old.metadata) {
            Some(owner) => unindex(&mut self.by_controller, &owner.uid, name),
            None => {
                self.orphans.remove(name);
            }
        }
        Some(old)
    }

    fn get_all<'a>(&'a self, names: impl Iterator<Item = &'a Name>) -> Vec<Arc<Pod>> {
        names
            .filter_map(|name| self.pods.get(name))
            .cloned()
            .collect()
    }
}

/// Pods by namespace and name, with their indexes.
#[derive(Default)]
pub(crate) struct PodIndex {
    namespaces: HashMap<String, Namespace>,
    len: usize,
    /// Keys seen since the last `Init` of a re-list, while one runs.
    relisting: Option<HashSet<Key>>,
    /// When set, only the pods a controller of this kind may own are kept:
    /// orphans, and those whose controller reference names this kind.
    controller_kind: Option<&'static str>,
}

impl PodIndex {
    /// An index of the pods a controller of `kind` (`"Job"`,
    /// `"DaemonSet"`, ...) may own: orphans, which it may adopt, and those
    /// whose controller is of its kind; pods controlled by other kinds are
    /// not kept, as [`PodIndex::controlled_by`] (by one of its own uids) and
    /// [`PodIndex::orphans`] would never return them. A restored cluster's
    /// 100,000 ReplicaSet pods cost the Job and DaemonSet controllers no
    /// index entries.
    pub(crate) fn of_controller_kind(kind: &'static str) -> Self {
        PodIndex {
            controller_kind: Some(kind),
            ..PodIndex::default()
        }
    }

    /// Whether this index keeps `pod`.
    fn keeps(&self, pod: &Pod) -> bool {
        match (self.controller_kind, controller_of(&pod.metadata)) {
            (Some(kind), Some(owner)) => owner.kind == kind,
            _ => true,
        }
    }

    /// How many pods are cached.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Stores `pod` (or forgets it, when it is not a pod this index keeps);
    /// returns the version it replaced.
    pub(crate) fn apply(&mut self, pod: Arc<Pod>) -> Option<Arc<Pod>> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let old = self.remove_key(namespace, name);
        if !self.keeps(&pod) {
            return old;
        }
        if let Some(seen) = self.relisting.as_mut() {
            seen.insert((namespace.to_string(), name.to_string()));
        }
        if !self.namespaces.contains_key(namespace) {
            self.namespaces
                .insert(namespace.to_string(), Namespace::default());
        }
        self.namespaces
            .get_mut(namespace)
            .expect("inserted above")
            .insert(name, Arc::clone(&pod));
        self.len += 1;
        old
    }

    /// Forgets `pod`; returns the cached version.
    pub(crate) fn delete(&mut self, pod: &Pod) -> Option<Arc<Pod>> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        self.remove_key(namespace, name)
    }

    fn remove_key(&mut self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        let pods = self.namespaces.get_mut(namespace)?;
        let old = pods.remove(name)?;
        if pods.pods.is_empty() {
            self.namespaces.remove(namespace);
        }
        self.len -= 1;
        Some(old)
    }

    /// A re-list starts: pods it does not list again are pruned at its end.
    /// The first list (nothing cached yet) has nothing to prune, so it
    /// records nothing: a restored cluster's 100,000 pods are not each
    /// copied into a set of keys only to be found in it again.
    pub(crate) fn start_relist(&mut self) {
        self.relisting = (self.len > 0).then(HashSet::default);
    }

    /// A re-list ended: forgets and returns the pods it did not list.
    pub(crate) fn finish_relist(&mut self) -> Vec<Arc<Pod>> {
        let Some(seen) = self.relisting.take() else {
            return Vec::new();
        };
        let gone: Vec<Key> = self
            .namespaces
            .iter()
            .flat_map(|(namespace, pods)| {
                pods.pods
                    .keys()
                    .map(move |name| (namespace.clone(), name.to_string()))
            })
            .filter(|key| !seen.contains(key))
            .collect();
        gone.iter()
            .filter_map(|(namespace, name)| self.remove_key(namespace, name))
            .collect()
    }

    /// The pods of `namespace` that `selector` (parsed as `requirements`)
    /// selects, by name. Candidates come from the smallest posting list of
    /// its matchLabels, else from the namespace.
    pub(crate) fn select(
        &self,
        namespace: &str,
        selector: &LabelSelector,
        requirements: &LabelSelectorRequirements,
    ) -> Vec<Arc<Pod>> {
        let Some(pods) = self.namespaces.get(namespace) else {
            return Vec::new();
        };
        let mut selected: Vec<Arc<Pod>> =
            match selector.match_labels.as_ref().filter(|m| !m.is_empty()) {
                Some(labels) => {
                    let smallest = labels
                        .iter()
                        .map(|(label, value)| {
                            pods.by_label
                                .get(label.as_str())
                                .and_then(|values| values.get(value.as_str()))
                        })
                        .min_by_key(|names| names.map_or(0, HashSet::len))
                        .flatten();
                    pods.get_all(smallest.into_iter().flatten())
                }
                None => pods.pods.values().cloned().collect(),
            };
        selected.retain(|pod| selector_matches(requirements, pod.metadata.labels.as_ref()));
        selected.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        selected
    }

    /// The pods of `namespace` whose controller has uid `owner_uid`, by name.
    pub(crate) fn controlled_by(&self, namespace: &str, owner_uid: &str) -> Vec<Arc<Pod>> {
        self.namespaces
            .get(namespace)
            .and_then(|pods| {
                let names = pods.by_controller.get(owner_uid)?;
                let mut owned = pods.get_all(names.iter());
                owned.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
                Some(owned)
            })
            .unwrap_or_default()
    }

    /// The pods of `namespace` without a controller that `requirements`
    /// selects, by name.
    pub(crate) fn orphans(
        &self,
        namespace: &str,
        requirements: &LabelSelectorRequirements,
    ) -> Vec<Arc<Pod>> {
        let Some(pods) = self.namespaces.get(namespace) else {
            return Vec::new();
        };
        let mut orphans = pods.get_all(pods.orphans.iter());
        orphans.retain(|pod| selector_matches(requirements, pod.metadata.labels.as_ref()));
        orphans.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        orphans
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::parse_selector;
    use serde_json::json;

    fn pod(namespace: &str, name: &str, labels: serde_json::Value) -> Arc<Pod> {
        owned_pod(namespace, name, labels, None)
    }

    fn owned_pod(
        namespace: &str,
        name: &str,
        labels: serde_json::Value,
        controller: Option<&str>,
    ) -> Arc<Pod> {
        let mut value = json!({
            "metadata": {"namespace": namespace, "name": name, "labels": labels}
        });
        if let Some(uid) = controller {
            value["metadata"]["ownerReferences"] = json!([{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                "uid": uid, "controller": true
            }]);
        }
        Arc::new(serde_json::from_value(value).expect("pod"))
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

    fn sorted(pods: &[Arc<Pod>]) -> Vec<&str> {
        let mut names = names(pods);
        names.sort_unstable();
        names
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
            (
                json!({"matchLabels": {"app": "web", "tier": "none"}}),
                "a",
                vec![],
            ),
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
        index.apply(owned_pod("a", "p", json!({"app": "web"}), Some("rs-1")));
        let old = index.apply(pod("a", "p", json!({"app": "db"})));
        assert!(old.is_some());
        assert_eq!(index.len(), 1);
        let (web, web_parsed) = selector(json!({"matchLabels": {"app": "web"}}));
        let (db, db_parsed) = selector(json!({"matchLabels": {"app": "db"}}));
        assert!(index.select("a", &web, &web_parsed).is_empty());
        assert_eq!(names(&index.select("a", &db, &db_parsed)), vec!["p"]);
        assert!(index.controlled_by("a", "rs-1").is_empty());
        assert_eq!(names(&index.orphans("a", &db_parsed)), vec!["p"]);
        let gone = pod("a", "p", json!({}));
        assert!(index.delete(&gone).is_some());
        assert!(index.select("a", &db, &db_parsed).is_empty());
        assert_eq!(index.len(), 0);
        assert!(index.namespaces.is_empty());
    }

    #[test]
    fn controlled_pods_and_orphans_are_found_without_a_selector_scan() {
        let mut index = PodIndex::default();
        index.apply(owned_pod(
            "a",
            "mine-1",
            json!({"app": "web"}),
            Some("rs-1"),
        ));
        index.apply(owned_pod("a", "mine-2", json!({"app": "db"}), Some("rs-1")));
        index.apply(owned_pod(
            "a",
            "theirs",
            json!({"app": "web"}),
            Some("rs-2"),
        ));
        index.apply(owned_pod(
            "b",
            "other-ns",
            json!({"app": "web"}),
            Some("rs-1"),
        ));
        index.apply(pod("a", "orphan-web", json!({"app": "web"})));
        index.apply(pod("a", "orphan-db", json!({"app": "db"})));
        assert_eq!(
            sorted(&index.controlled_by("a", "rs-1")),
            vec!["mine-1", "mine-2"]
        );
        assert!(index.controlled_by("c", "rs-1").is_empty());
        let (_, web) = selector(json!({"matchLabels": {"app": "web"}}));
        assert_eq!(names(&index.orphans("a", &web)), vec!["orphan-web"]);
        let adopted = owned_pod("a", "orphan-web", json!({"app": "web"}), Some("rs-1"));
        index.apply(adopted);
        assert!(index.orphans("a", &web).is_empty());
        assert_eq!(
            sorted(&index.controlled_by("a", "rs-1")),
            vec!["mine-1", "mine-2", "orphan-web"]
        );
    }

    #[test]
    fn an_index_for_one_controller_kind_keeps_its_pods_and_orphans_only() {
        let mut index = PodIndex::of_controller_kind("Job");
        let job_pod = |name: &str, uid: &str| {
            let mut value = json!({
                "metadata": {"namespace": "a", "name": name, "labels": {"app": "web"},
                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                        "name": "j", "uid": uid, "controller": true}]}
            });
            value["metadata"]["labels"]["job"] = json!(uid);
            Arc::new(serde_json::from_value::<Pod>(value).expect("pod"))
        };
        index.apply(job_pod("mine", "job-1"));
        assert!(
            index
                .apply(owned_pod(
                    "a",
                    "rs-pod",
                    json!({"app": "web"}),
                    Some("job-1")
                ))
                .is_none(),
            "a ReplicaSet's pod is not kept, even with a forged uid"
        );
        index.apply(pod("a", "orphan", json!({"app": "web"})));
        assert_eq!(index.len(), 2);
        assert_eq!(names(&index.controlled_by("a", "job-1")), vec!["mine"]);
        let (_, web) = selector(json!({"matchLabels": {"app": "web"}}));
        assert_eq!(names(&index.orphans("a", &web)), vec!["orphan"]);
        let adopted_elsewhere = owned_pod("a", "orphan", json!({"app": "web"}), Some("rs-1"));
        let old = index.apply(adopted_elsewhere);
        assert!(old.is_some(), "the orphan it replaced");
        assert!(index.orphans("a", &web).is_empty());
        assert_eq!(index.len(), 1);
        let mut everything = PodIndex::default();
        everything.apply(owned_pod("a", "rs-pod", json!({}), Some("rs-1")));
        assert_eq!(everything.len(), 1, "an index of every pod keeps all");
    }

    #[test]
    fn the_first_list_records_no_keys_and_prunes_nothing() {
        let mut index = PodIndex::default();
        index.start_relist();
        index.apply(pod("a", "p", json!({"app": "web"})));
        assert!(index.relisting.is_none(), "nothing was cached to prune");
        assert!(index.finish_relist().is_empty());
        assert_eq!(index.len(), 1);
        let (web, web_parsed) = selector(json!({"matchLabels": {"app": "web"}}));
        assert_eq!(names(&index.select("a", &web, &web_parsed)), vec!["p"]);
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
}
