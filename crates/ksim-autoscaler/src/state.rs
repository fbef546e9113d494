//! The autoscaler's view of the cluster, kept current by watches instead of
//! listed every loop: one informer per kind it reads (nodes, pods,
//! PodDisruptionBudgets, over `ksim_runtime::informer::changes`, decoded
//! without managed fields) applies each change to a [`ClusterState`] as it
//! arrives. The state is the scheduler's own cache
//! (`ksim_scheduler::scheduler::Cache`: the snapshot of nodes and the pods
//! bound to them, kept incrementally, and the budgets), the nodes as last
//! seen (Ready conditions, annotations), and the pods the scheduler marked
//! unschedulable. A loop reads it under a short lock and never lists.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Debug;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use ksim_runtime::WithoutManagedFields;
use ksim_runtime::clock::Clock;
use ksim_runtime::informer::{Change, changes, object_key};
use ksim_scheduler::framework::{DisruptionBudget, Snapshot};
use ksim_scheduler::scheduler::Cache;
use kube::runtime::watcher;
use kube::{Api, Client};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// A pod's namespace and name.
pub type PodKey = (String, String);

const NODES: u8 = 1;
const PODS: u8 = 2;
const BUDGETS: u8 = 4;
const ALL: u8 = NODES | PODS | BUDGETS;

/// Whether the scheduler marked the pod unschedulable (unbound, not being
/// deleted, `PodScheduled=False` with reason `Unschedulable`).
pub fn is_unschedulable(pod: &Pod) -> bool {
    let unbound = pod
        .spec
        .as_ref()
        .is_none_or(|s| s.node_name.as_deref().unwrap_or_default().is_empty());
    unbound
        && pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
            })
}

fn pod_key(pod: &Pod) -> PodKey {
    (
        pod.metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

fn split_key(key: &str) -> PodKey {
    match key.split_once('/') {
        Some((namespace, name)) => (namespace.to_string(), name.to_string()),
        None => (String::new(), key.to_string()),
    }
}

/// What the autoscaler knows of the cluster.
#[derive(Debug, Default)]
pub struct ClusterState {
    /// The scheduler's cache: nodes and bound pods (the snapshot the
    /// simulations run on), and the budgets.
    pub cache: Cache,
    /// Every node as last seen, by name.
    nodes: BTreeMap<String, Arc<Node>>,
    /// Pods the scheduler marked unschedulable, by key.
    pending: BTreeMap<PodKey, Arc<Pod>>,
    budget_keys: HashSet<PodKey>,
    /// Which informers have listed once.
    synced: u8,
}

impl ClusterState {
    /// A state from lists (a one-shot reader, a benchmark), as the informers
    /// would build it from their first lists.
    pub fn from_lists(
        nodes: impl IntoIterator<Item = Node>,
        pods: impl IntoIterator<Item = Pod>,
        budgets: impl IntoIterator<Item = PodDisruptionBudget>,
    ) -> Self {
        let mut state = ClusterState::default();
        let mut keys = HashSet::new();
        for node in nodes {
            keys.insert(object_key(&node));
            state.node_changed(Change::Listed(node));
        }
        state.node_changed(Change::Synced(std::mem::take(&mut keys)));
        for pod in pods {
            keys.insert(object_key(&pod));
            state.pod_changed(Change::Listed(pod));
        }
        state.pod_changed(Change::Synced(std::mem::take(&mut keys)));
        for budget in budgets {
            keys.insert(object_key(&budget));
            state.budget_changed(Change::Listed(budget));
        }
        state.budget_changed(Change::Synced(keys));
        state
    }

    /// Whether every informer has listed once.
    pub fn is_synced(&self) -> bool {
        self.synced == ALL
    }

    /// Applies a node change.
    pub fn node_changed(&mut self, change: Change<Node>) {
        match change {
            Change::Listed(node) | Change::Applied(node) => {
                let name = node.metadata.name.clone().unwrap_or_default();
                self.cache.upsert_node(node.clone());
                self.nodes.insert(name, Arc::new(node));
            }
            Change::Deleted(node) => {
                let name = node.metadata.name.as_deref().unwrap_or_default();
                self.nodes.remove(name);
                self.cache.remove_node(name);
            }
            Change::Synced(keys) => {
                let gone: Vec<String> = self
                    .nodes
                    .keys()
                    .filter(|name| !keys.contains(*name))
                    .cloned()
                    .collect();
                for name in gone {
                    self.nodes.remove(&name);
                    self.cache.remove_node(&name);
                }
                self.synced |= NODES;
            }
        }
    }

    /// Applies a pod change.
    pub fn pod_changed(&mut self, change: Change<Pod>) {
        match change {
            Change::Listed(pod) | Change::Applied(pod) => {
                let key = pod_key(&pod);
                if is_unschedulable(&pod) {
                    self.pending.insert(key, Arc::new(pod));
                    return;
                }
                self.pending.remove(&key);
                let bound = pod
                    .spec
                    .as_ref()
                    .is_some_and(|s| s.node_name.as_deref().is_some_and(|n| !n.is_empty()));
                if bound {
                    self.cache.upsert_bound_pod(pod);
                } else {
                    self.cache.remove_pod(&key);
                }
            }
            Change::Deleted(pod) => {
                let key = pod_key(&pod);
                self.pending.remove(&key);
                self.cache.remove_pod(&key);
            }
            Change::Synced(keys) => {
                let keys: HashSet<PodKey> = keys.iter().map(|k| split_key(k)).collect();
                self.pending.retain(|key, _| keys.contains(key));
                for key in self.cache.bound_pod_keys() {
                    if !keys.contains(&key) {
                        self.cache.remove_pod(&key);
                    }
                }
                self.synced |= PODS;
            }
        }
    }

    /// Applies a PodDisruptionBudget change.
    pub fn budget_changed(&mut self, change: Change<PodDisruptionBudget>) {
        match change {
            Change::Listed(budget) | Change::Applied(budget) => {
                self.budget_keys.insert(split_key(&object_key(&budget)));
                self.cache.upsert_pdb(&budget);
            }
            Change::Deleted(budget) => {
                let key = split_key(&object_key(&budget));
                self.budget_keys.remove(&key);
                self.cache.remove_pdb(&key.0, &key.1);
            }
            Change::Synced(keys) => {
                let keys: HashSet<PodKey> = keys.iter().map(|k| split_key(k)).collect();
                let gone: Vec<PodKey> = self
                    .budget_keys
                    .iter()
                    .filter(|k| !keys.contains(*k))
                    .cloned()
                    .collect();
                for key in gone {
                    self.budget_keys.remove(&key);
                    self.cache.remove_pdb(&key.0, &key.1);
                }
                self.synced |= BUDGETS;
            }
        }
    }

    /// Every node, by name.
    pub fn nodes(&self) -> impl Iterator<Item = &Arc<Node>> {
        self.nodes.values()
    }

    /// The number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// A node by name.
    pub fn node(&self, name: &str) -> Option<&Arc<Node>> {
        self.nodes.get(name)
    }

    /// The pods the scheduler marked unschedulable, by namespace and name.
    pub fn pending(&self) -> impl Iterator<Item = &Arc<Pod>> {
        self.pending.values()
    }

    /// The budgets, as the scheduler's cache holds them.
    pub fn budgets(&self) -> &[DisruptionBudget] {
        &self.cache.snapshot.disruption_budgets
    }

    /// The snapshot the simulations run on.
    pub fn snapshot_mut(&mut self) -> &mut Snapshot {
        &mut self.cache.snapshot
    }
}

/// The state shared between the informers and the loop.
#[derive(Debug, Default)]
pub struct SharedState {
    state: Mutex<ClusterState>,
    changed: Notify,
}

impl SharedState {
    /// The state, locked (never held across an await).
    pub fn lock(&self) -> MutexGuard<'_, ClusterState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until every informer has listed once.
    pub async fn synced(&self) {
        loop {
            let changed = self.changed.notified();
            if self.lock().is_synced() {
                return;
            }
            changed.await;
        }
    }

    fn apply<K>(&self, apply: fn(&mut ClusterState, Change<K>), change: Change<K>) {
        let synced = matches!(change, Change::Synced(_));
        apply(&mut self.lock(), change);
        if synced {
            self.changed.notify_waiters();
        }
    }
}

fn unwrap_change<K>(change: Change<WithoutManagedFields<K>>) -> Change<K> {
    match change {
        Change::Listed(object) => Change::Listed(object.0),
        Change::Applied(object) => Change::Applied(object.0),
        Change::Deleted(object) => Change::Deleted(object.0),
        Change::Synced(keys) => Change::Synced(keys),
    }
}

fn spawn_informer<K>(
    client: &Client,
    shared: &Arc<SharedState>,
    clock: &Clock,
    apply: fn(&mut ClusterState, Change<K>),
) -> JoinHandle<()>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default,
{
    let api: Api<WithoutManagedFields<K>> = Api::all(client.clone());
    let shared = shared.clone();
    let clock = clock.clone();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(changes(api, watcher::Config::default(), &clock));
        while let Some(change) = stream.next().await {
            shared.apply(apply, unwrap_change(change));
        }
    })
}

/// Starts the informers over `client`, re-watching after errors on `clock`;
/// they run until aborted.
pub fn watch(client: &Client, shared: &Arc<SharedState>, clock: &Clock) -> Vec<JoinHandle<()>> {
    vec![
        spawn_informer::<Node>(client, shared, clock, ClusterState::node_changed),
        spawn_informer::<Pod>(client, shared, clock, ClusterState::pod_changed),
        spawn_informer::<PodDisruptionBudget>(client, shared, clock, ClusterState::budget_changed),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse<T: DeserializeOwned>(value: serde_json::Value) -> T {
        serde_json::from_value(value).expect("valid object")
    }

    fn pod(name: &str, node: Option<&str>, unschedulable: bool) -> Pod {
        let mut value = json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": "100m"}}}]}
        });
        if let Some(node) = node {
            value["spec"]["nodeName"] = json!(node);
        }
        if unschedulable {
            value["status"] = json!({"conditions": [{"type": "PodScheduled",
                "status": "False", "reason": "Unschedulable"}]});
        }
        parse(value)
    }

    fn node(name: &str) -> Node {
        parse(json!({"metadata": {"name": name},
            "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"}}}))
    }

    #[test]
    fn changes_keep_nodes_bound_pods_and_pending_pods_current() {
        let mut state = ClusterState::from_lists([node("a")], [pod("p", None, true)], []);
        assert!(state.is_synced());
        assert_eq!(state.pending().count(), 1);
        // The scheduler binds it: no longer pending, accounted on its node.
        state.pod_changed(Change::Applied(pod("p", Some("a"), false)));
        assert_eq!(state.pending().count(), 0);
        let a = state.cache.snapshot.get("a").expect("node a");
        assert_eq!(a.requested.milli_cpu, 100);
        // A pod bound to a node not seen yet counts once the node comes.
        state.pod_changed(Change::Applied(pod("q", Some("b"), false)));
        state.node_changed(Change::Applied(node("b")));
        let b = state.cache.snapshot.get("b").expect("node b");
        assert_eq!(b.requested.milli_cpu, 100);
        // A relist without node a and pod q drops them.
        state.node_changed(Change::Synced(["b".to_string()].into()));
        state.pod_changed(Change::Synced(["default/p".to_string()].into()));
        assert!(state.node("a").is_none());
        assert!(state.cache.snapshot.get("a").is_none());
        let b = state.cache.snapshot.get("b").expect("node b");
        assert_eq!(b.requested.milli_cpu, 0);
        assert_eq!(state.node_count(), 1);
    }

    #[test]
    fn budgets_follow_their_changes() {
        let budget: PodDisruptionBudget = parse(json!({
            "metadata": {"name": "b", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 1, "currentHealthy": 1, "desiredHealthy": 0, "expectedPods": 1}
        }));
        let mut state = ClusterState::from_lists([], [], [budget.clone()]);
        assert_eq!(state.budgets().len(), 1);
        state.budget_changed(Change::Synced(HashSet::new()));
        assert!(state.budgets().is_empty());
        state.budget_changed(Change::Applied(budget.clone()));
        state.budget_changed(Change::Deleted(budget));
        assert!(state.budgets().is_empty());
    }
}
