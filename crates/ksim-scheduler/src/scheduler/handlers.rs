//! Event handlers (upstream `eventhandlers.go`): informer changes into the
//! cache and the queue, and the cluster events that move waiting pods
//! back to the active queue (a node added or changed, a pod deleted or
//! finished, a binding that failed).

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};

use super::cache::{node_name, pod_key};
use super::informers::{Change, Informer, Message};
use super::{Scheduler, informers};
use crate::framework::{WorkloadKind, WorkloadSelector};
use crate::queue::PodKey;

impl Scheduler {
    /// Applies one message from the informers or a binding task.
    pub(super) fn handle(&mut self, message: Message) {
        match message {
            Message::Pod(change) => self.pod_change(change),
            Message::Node(change) => self.node_change(change),
            Message::Namespace(change) => self.namespace_change(change),
            Message::DisruptionBudget(change) => match change {
                Change::Apply(pdb) => self.cache.upsert_pdb(&pdb),
                Change::Delete(pdb) => self.cache.remove_pdb(
                    pdb.metadata.namespace.as_deref().unwrap_or_default(),
                    pdb.metadata.name.as_deref().unwrap_or_default(),
                ),
                Change::Relist(all) => {
                    self.cache.clear_pdbs();
                    for pdb in &all {
                        self.cache.upsert_pdb(pdb);
                    }
                    self.synced_once(Informer::DisruptionBudget);
                }
            },
            Message::Service(change) => self.workload_change(
                WorkloadKind::Service,
                change,
                WorkloadSelector::from_service,
            ),
            Message::ReplicationController(change) => self.workload_change(
                WorkloadKind::ReplicationController,
                change,
                WorkloadSelector::from_replication_controller,
            ),
            Message::ReplicaSet(change) => self.workload_change(
                WorkloadKind::ReplicaSet,
                change,
                WorkloadSelector::from_replica_set,
            ),
            Message::StatefulSet(change) => self.workload_change(
                WorkloadKind::StatefulSet,
                change,
                WorkloadSelector::from_stateful_set,
            ),
            Message::Bound(outcome) => self.bound(outcome),
        }
    }

    /// Records that an informer listed (its first list lets scheduling
    /// start once every informer has listed).
    pub(super) fn synced_once(&mut self, informer: Informer) {
        self.synced |= 1 << informer as u32;
    }

    /// Whether every informer has listed once.
    pub(super) fn all_synced(&self) -> bool {
        self.synced.count_ones() as usize >= informers::INFORMERS
    }

    fn pod_change(&mut self, change: Change<Arc<Pod>>) {
        let now = self.now();
        match change {
            Change::Apply(pod) => self.pod_applied(pod),
            Change::Delete(pod) => self.pod_deleted(&pod_key(&pod)),
            Change::Relist(pods) => {
                // Only a cache or queue holding pods has any to drop: the
                // first list (a restored cluster's 100,000 pods) builds no
                // set of keys.
                if self.cache.has_bound_pods() || !self.queue.is_empty() {
                    let listed: HashSet<PodKey> = pods.iter().map(|pod| pod_key(pod)).collect();
                    for key in self.cache.bound_pod_keys() {
                        if !listed.contains(&key) && !self.cache.is_assumed(&key) {
                            self.pod_deleted(&key);
                        }
                    }
                    for key in self.queue.keys() {
                        if !listed.contains(&key) {
                            self.pod_deleted(&key);
                        }
                    }
                }
                for pod in pods {
                    self.pod_applied(pod);
                }
                self.queue.move_all_to_active_or_backoff(now);
                self.synced_once(Informer::Pod);
            }
        }
    }

    fn pod_applied(&mut self, pod: Arc<Pod>) {
        let key = pod_key(&pod);
        let now = self.now();
        if node_name(&pod).is_some() {
            self.queue.delete(&key.0, &key.1);
            self.cache.snapshot.clear_nomination(&key.0, &key.1);
            if self.cache.upsert_bound_pod(pod) {
                // The pod finished: its room is free.
                self.queue.move_all_to_active_or_backoff(now);
            }
            return;
        }
        if self.cache.is_assumed(&key) {
            // An older version from before our binding: keep the assumption.
            return;
        }
        let responsible = self.profiles.contains_key(
            pod.spec
                .as_ref()
                .and_then(|s| s.scheduler_name.as_deref())
                .unwrap_or(crate::framework::DEFAULT_SCHEDULER_NAME),
        );
        let finished = ksim_core::status::is_pod_terminal(&pod);
        if !responsible || finished || pod.metadata.deletion_timestamp.is_some() {
            self.queue.delete(&key.0, &key.1);
            self.cache.snapshot.clear_nomination(&key.0, &key.1);
            return;
        }
        match pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.clone())
            .filter(|n| !n.is_empty())
        {
            Some(node) => self.cache.snapshot.nominate(pod.clone(), &node),
            None => self.cache.snapshot.clear_nomination(&key.0, &key.1),
        }
        self.queue.add_or_update(pod, now);
    }

    fn pod_deleted(&mut self, key: &PodKey) {
        self.queue.delete(&key.0, &key.1);
        self.cache.snapshot.clear_nomination(&key.0, &key.1);
        self.forget_pod(key);
        if self.cache.remove_pod(key) {
            self.queue.move_all_to_active_or_backoff(self.now());
        }
    }

    fn node_change(&mut self, change: Change<Node>) {
        let now = self.now();
        match change {
            Change::Apply(node) => {
                if self.cache.upsert_node(node) {
                    self.queue.move_all_to_active_or_backoff(now);
                }
            }
            Change::Delete(node) => {
                self.cache
                    .remove_node(node.metadata.name.as_deref().unwrap_or_default());
            }
            Change::Relist(nodes) => {
                let known = self.cache.node_names();
                if !known.is_empty() {
                    let listed: HashSet<&str> = nodes
                        .iter()
                        .filter_map(|n| n.metadata.name.as_deref())
                        .collect();
                    for name in known {
                        if !listed.contains(name.as_str()) {
                            self.cache.remove_node(&name);
                        }
                    }
                }
                for node in nodes {
                    self.cache.upsert_node(node);
                }
                self.queue.move_all_to_active_or_backoff(now);
                self.synced_once(Informer::Node);
            }
        }
    }

    fn namespace_change(&mut self, change: Change<Namespace>) {
        match change {
            Change::Apply(namespace) => self.cache.snapshot.upsert_namespace(&namespace),
            Change::Delete(namespace) => {
                if let Some(name) = &namespace.metadata.name {
                    self.cache.snapshot.namespaces.remove(name);
                }
            }
            Change::Relist(all) => {
                self.cache.snapshot.namespaces.clear();
                for namespace in &all {
                    self.cache.snapshot.upsert_namespace(namespace);
                }
                self.synced_once(Informer::Namespace);
            }
        }
        // Pods waiting on a namespaceSelector may fit now.
        self.queue.move_all_to_active_or_backoff(self.now());
    }

    fn workload_change<K: kube::Resource>(
        &mut self,
        kind: WorkloadKind,
        change: Change<K>,
        selector: fn(&K) -> Option<WorkloadSelector>,
    ) {
        let identity = |object: &K| {
            let meta = object.meta();
            (
                meta.namespace
                    .clone()
                    .unwrap_or_else(|| "default".to_string()),
                meta.name.clone().unwrap_or_default(),
            )
        };
        let snapshot = &mut self.cache.snapshot;
        match change {
            Change::Apply(object) => {
                let (namespace, name) = identity(&object);
                match selector(&object) {
                    Some(workload) => snapshot.upsert_workload_selector(workload),
                    None => snapshot.remove_workload_selector(kind, &namespace, &name),
                }
            }
            Change::Delete(object) => {
                let (namespace, name) = identity(&object);
                snapshot.remove_workload_selector(kind, &namespace, &name);
            }
            Change::Relist(all) => {
                snapshot.workload_selectors.retain(|w| w.kind != kind);
                for object in &all {
                    if let Some(workload) = selector(object) {
                        snapshot.upsert_workload_selector(workload);
                    }
                }
                self.synced_once(Informer::from(kind));
            }
        }
    }
}
