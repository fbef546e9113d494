//! The scheduler cache (upstream `internal/cache`): the [`Snapshot`] kept
//! up to date incrementally from informer events, pods assumed on a node
//! while their binding is in flight, pods bound to nodes not seen yet and
//! PodDisruptionBudgets. PriorityClasses are not kept: a pod's
//! `spec.priority` is set by the API server's Priority admission (the one
//! place priority classes resolve), and the scheduler reads it as upstream
//! does, 0 when unset.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use crate::framework::{DisruptionBudget, Snapshot, pod_namespace};
use crate::queue::PodKey;

/// The key of a pod: namespace and name.
pub fn pod_key(pod: &Pod) -> PodKey {
    (
        pod_namespace(pod).to_string(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

/// The node a pod is bound to, if any.
pub fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

use ksim_core::status::is_pod_terminal as is_terminal;

/// What the scheduler knows of the cluster.
#[derive(Debug, Default)]
pub struct Cache {
    pub snapshot: Snapshot,
    /// Pods assumed on a node (binding in flight) → that node.
    assumed: HashMap<PodKey, String>,
    /// Pods bound to a node the cache does not know (yet), by node.
    waiting_for_node: HashMap<String, BTreeMap<PodKey, Arc<Pod>>>,
    /// Bound pods' nodes, to find pods waiting for a node.
    bound: HashMap<PodKey, String>,
    disruption_budgets: BTreeMap<PodKey, DisruptionBudget>,
}

impl Cache {
    /// Whether the pod's binding is in flight.
    pub fn is_assumed(&self, key: &PodKey) -> bool {
        self.assumed.contains_key(key)
    }

    /// The number of pods assumed and not yet seen bound.
    pub fn assumed_len(&self) -> usize {
        self.assumed.len()
    }

    /// Accounts `pod` on `node` before the binding is confirmed.
    pub fn assume(&mut self, pod: Pod, node: &str) {
        let key = pod_key(&pod);
        self.snapshot.bind_pod(pod, node);
        self.bound.insert(key.clone(), node.to_string());
        self.assumed.insert(key, node.to_string());
    }

    /// Undoes an assumption (the binding failed).
    pub fn forget(&mut self, key: &PodKey) {
        if self.assumed.remove(key).is_some() {
            self.remove_pod(key);
        }
    }

    /// A bound pod was added or updated. Returns true when room may have
    /// appeared (the pod finished).
    pub fn upsert_bound_pod(&mut self, pod: impl Into<Arc<Pod>>) -> bool {
        let pod = pod.into();
        let key = pod_key(&pod);
        self.assumed.remove(&key);
        if is_terminal(&pod) {
            return self.remove_pod(&key);
        }
        let Some(node) = node_name(&pod).map(str::to_string) else {
            return false;
        };
        if let Some(previous) = self.bound.insert(key.clone(), node.clone())
            && previous != node
        {
            self.remove_pod(&key);
            self.bound.insert(key.clone(), node.clone());
        }
        if self.snapshot.get(&node).is_some() {
            self.snapshot.add_pod(pod);
        } else {
            self.waiting_for_node
                .entry(node)
                .or_default()
                .insert(key, pod);
        }
        false
    }

    /// A pod is gone (deleted or finished); true when it was accounted.
    pub fn remove_pod(&mut self, key: &PodKey) -> bool {
        self.assumed.remove(key);
        let Some(node) = self.bound.remove(key) else {
            return false;
        };
        if let Some(waiting) = self.waiting_for_node.get_mut(&node) {
            waiting.remove(key);
            if waiting.is_empty() {
                self.waiting_for_node.remove(&node);
            }
        }
        self.snapshot.remove_pod(&key.0, &key.1);
        true
    }

    /// A node was added or updated; returns whether anything scheduling
    /// reads changed (labels, taints, unschedulable, allocatable, images),
    /// so that waiting pods should be retried.
    pub fn upsert_node(&mut self, node: Node) -> bool {
        let name = node.metadata.name.clone().unwrap_or_default();
        let changed = match self.snapshot.get(&name) {
            Some(old) => node_changed(&old.node, &node),
            None => true,
        };
        if !changed {
            // Heartbeats: keep the stored object fresh without rebuilding.
            return false;
        }
        self.snapshot.upsert_node(node);
        if let Some(waiting) = self.waiting_for_node.remove(&name) {
            for (_, pod) in waiting {
                self.snapshot.add_pod(pod);
            }
        }
        true
    }

    /// A node was deleted: its pods wait for it to come back (or to be deleted).
    pub fn remove_node(&mut self, name: &str) {
        if let Some(info) = self.snapshot.get(name) {
            let pods: Vec<(PodKey, Arc<Pod>)> = info
                .pods
                .iter()
                .map(|p| {
                    let (namespace, pod_name) = p.key();
                    ((namespace.to_string(), pod_name.to_string()), p.pod.clone())
                })
                .collect();
            if !pods.is_empty() {
                self.waiting_for_node
                    .entry(name.to_string())
                    .or_default()
                    .extend(pods);
            }
        }
        self.snapshot.remove_node(name);
    }

    /// The names of known nodes.
    pub fn node_names(&self) -> Vec<String> {
        self.snapshot
            .nodes()
            .iter()
            .map(|n| n.name().to_string())
            .collect()
    }

    /// Whether any pod is bound (or assumed).
    pub fn has_bound_pods(&self) -> bool {
        !self.bound.is_empty()
    }

    /// The keys of bound (or assumed) pods.
    pub fn bound_pod_keys(&self) -> Vec<PodKey> {
        let mut keys: Vec<PodKey> = self.bound.keys().cloned().collect();
        keys.sort_unstable();
        keys
    }

    /// A PodDisruptionBudget was added or updated.
    pub fn upsert_pdb(&mut self, pdb: &PodDisruptionBudget) {
        let key = (
            pdb.metadata.namespace.clone().unwrap_or_default(),
            pdb.metadata.name.clone().unwrap_or_default(),
        );
        self.disruption_budgets
            .insert(key, DisruptionBudget::from_pdb(pdb));
        self.sync_budgets();
    }

    /// A PodDisruptionBudget was deleted.
    pub fn remove_pdb(&mut self, namespace: &str, name: &str) {
        self.disruption_budgets
            .remove(&(namespace.to_string(), name.to_string()));
        self.sync_budgets();
    }

    /// Forgets every PodDisruptionBudget (before a relist).
    pub fn clear_pdbs(&mut self) {
        self.disruption_budgets.clear();
        self.sync_budgets();
    }

    fn sync_budgets(&mut self) {
        self.snapshot.disruption_budgets = self.disruption_budgets.values().cloned().collect();
    }
}

/// Whether a node update changes what scheduling reads.
fn node_changed(old: &Node, new: &Node) -> bool {
    let spec = |n: &Node| n.spec.as_ref().map(|s| (s.unschedulable, s.taints.clone()));
    let status = |n: &Node| {
        n.status
            .as_ref()
            .map(|s| (s.allocatable.clone(), s.images.clone()))
    };
    old.metadata.labels != new.metadata.labels
        || spec(old) != spec(new)
        || status(old) != status(new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod};

    fn key(name: &str) -> PodKey {
        ("default".to_string(), name.to_string())
    }

    #[test]
    fn assumed_pods_count_until_forgotten_or_confirmed() {
        let mut cache = Cache::default();
        cache.upsert_node(node("n1").cpu("2").obj());
        cache.assume(pod("a").cpu("1").obj(), "n1");
        assert!(cache.is_assumed(&key("a")));
        assert_eq!(
            cache.snapshot.get("n1").map(|n| n.requested.milli_cpu),
            Some(1000)
        );
        cache.forget(&key("a"));
        assert_eq!(
            cache.snapshot.get("n1").map(|n| n.requested.milli_cpu),
            Some(0)
        );
        cache.assume(pod("b").cpu("1").obj(), "n1");
        cache.upsert_bound_pod(pod("b").cpu("1").node("n1").obj());
        assert!(!cache.is_assumed(&key("b")));
        assert_eq!(cache.snapshot.get("n1").map(|n| n.pods.len()), Some(1));
    }

    #[test]
    fn pods_of_unknown_nodes_wait_for_the_node() {
        let mut cache = Cache::default();
        cache.upsert_bound_pod(pod("a").cpu("1").node("late").obj());
        assert!(cache.upsert_node(node("late").cpu("4").obj()));
        assert_eq!(
            cache.snapshot.get("late").map(|n| n.requested.milli_cpu),
            Some(1000)
        );
        cache.remove_node("late");
        assert!(cache.snapshot.get("late").is_none());
        cache.upsert_node(node("late").cpu("4").obj());
        assert_eq!(cache.snapshot.get("late").map(|n| n.pods.len()), Some(1));
        assert!(cache.remove_pod(&key("a")));
        assert_eq!(cache.snapshot.get("late").map(|n| n.pods.len()), Some(0));
    }

    #[test]
    fn finished_pods_free_their_room() {
        let mut cache = Cache::default();
        cache.upsert_node(node("n1").cpu("2").obj());
        cache.upsert_bound_pod(pod("a").cpu("1").node("n1").obj());
        let mut done = pod("a").cpu("1").node("n1").obj();
        done.status.get_or_insert_default().phase = Some("Succeeded".to_string());
        assert!(cache.upsert_bound_pod(done));
        assert_eq!(
            cache.snapshot.get("n1").map(|n| n.requested.milli_cpu),
            Some(0)
        );
    }

    #[test]
    fn node_heartbeats_are_not_changes() {
        let mut cache = Cache::default();
        assert!(cache.upsert_node(node("n1").cpu("2").obj()));
        let mut beat = node("n1").cpu("2").obj();
        beat.metadata.resource_version = Some("9".to_string());
        assert!(!cache.upsert_node(beat));
        assert!(cache.upsert_node(node("n1").cpu("3").obj()));
        assert!(cache.upsert_node(node("n1").cpu("3").label("a", "b").obj()));
    }
}
