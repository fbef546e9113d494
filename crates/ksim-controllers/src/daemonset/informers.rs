//! The DaemonSet controller's caches and the watches feeding them: every
//! pod in a [`PodIndex`] (a set finds its pods by controller uid, adoption
//! candidates through the orphan index) plus a count of each set's pods by
//! target node, every node by name, and the sets' store. Each event queues
//! only the sets it concerns, marking the nodes their next sync must plan
//! ([`Dirty`]): a pod event its controller, for the pod's node (or every
//! set matching an orphan or a relabelled pod, for all nodes); a node event
//! the sets for which that one node changes (it should now run, or stop
//! running, their pod, or its fit changed); heartbeats, node status and the
//! sets' own status writes queue nothing. Observed pod
//! creations and deletions are recorded in the expectations.

use crate::workloop::Requests;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Resource, ResourceExt};

use super::placement::{NodeFit, Placement, placement_changed, target_node};
use crate::cache::PodIndex;
use crate::common::{controller_of, key_of};
use crate::controller_ref::OwnerMapper;
use crate::replicaset::Expectations;

/// Pods by name.
type PodsByName = HashMap<String, Arc<Pod>>;

/// The pods a DaemonSet may own (its own and orphans), and the daemon pods
/// by set uid and target node.
pub(crate) struct DaemonPods {
    pub(crate) index: PodIndex,
    /// Pods per target node, per DaemonSet uid.
    placed: HashMap<String, HashMap<String, PodsByName>>,
}

impl Default for DaemonPods {
    fn default() -> Self {
        DaemonPods {
            index: PodIndex::of_controller_kind("DaemonSet"),
            placed: HashMap::default(),
        }
    }
}

/// The uid of the DaemonSet controlling `pod`, if one does.
pub(crate) fn daemon_set_uid(pod: &Pod) -> Option<&str> {
    controller_of(&pod.metadata)
        .filter(|owner| owner.kind == "DaemonSet" && owner.api_version.starts_with("apps/"))
        .map(|owner| owner.uid.as_str())
}

impl DaemonPods {
    fn place(&mut self, pod: &Arc<Pod>) {
        let (Some(uid), Some(node)) = (daemon_set_uid(pod), target_node(pod)) else {
            return;
        };
        let name = pod.metadata.name.clone().unwrap_or_default();
        self.placed
            .entry(uid.to_string())
            .or_default()
            .entry(node)
            .or_default()
            .insert(name, Arc::clone(pod));
    }

    fn unplace(&mut self, pod: &Pod) {
        let (Some(uid), Some(node)) = (daemon_set_uid(pod), target_node(pod)) else {
            return;
        };
        let Some(nodes) = self.placed.get_mut(uid) else {
            return;
        };
        if let Some(pods) = nodes.get_mut(&node) {
            pods.remove(pod.metadata.name.as_deref().unwrap_or_default());
            if pods.is_empty() {
                nodes.remove(&node);
            }
        }
        if nodes.is_empty() {
            self.placed.remove(uid);
        }
    }

    /// Stores `pod`; returns the version it replaced.
    pub(crate) fn apply(&mut self, pod: Arc<Pod>) -> Option<Arc<Pod>> {
        let old = self.index.apply(Arc::clone(&pod));
        if let Some(old) = &old {
            self.unplace(old);
        }
        self.place(&pod);
        old
    }

    /// Forgets `pod`; returns the cached version.
    pub(crate) fn delete(&mut self, pod: &Pod) -> Option<Arc<Pod>> {
        let old = self.index.delete(pod);
        if let Some(old) = &old {
            self.unplace(old);
        }
        old
    }

    fn finish_relist(&mut self) -> Vec<Arc<Pod>> {
        let gone = self.index.finish_relist();
        for pod in &gone {
            self.unplace(pod);
        }
        gone
    }

    /// The pods of the set with `uid` meant for `node`.
    pub(crate) fn pods_on(&self, uid: &str, node: &str) -> Vec<Arc<Pod>> {
        self.placed
            .get(uid)
            .and_then(|nodes| nodes.get(node))
            .map(|pods| pods.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether the set with `uid` has a pod meant for `node`.
    pub(crate) fn has_pod_on(&self, uid: &str, node: &str) -> bool {
        self.placed.get(uid).is_some_and(|n| n.contains_key(node))
    }
}

/// Which nodes a set's next sync must plan again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DirtyNodes {
    /// Every node (the set changed, or what changed is not one node's).
    All,
    /// Only these.
    Some(HashSet<String>),
}

/// The nodes each set's next sync must plan, by set (namespace, name); a
/// set without a record (a retry) plans every node.
#[derive(Debug, Default)]
pub(crate) struct Dirty {
    by_set: Mutex<HashMap<(String, String), DirtyNodes>>,
}

impl Dirty {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<(String, String), DirtyNodes>) -> T) -> T {
        f(&mut self.by_set.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The set's next sync plans every node.
    pub(crate) fn all(&self, set: &ObjectRef<DaemonSet>) {
        let key = (set.namespace.clone().unwrap_or_default(), set.name.clone());
        self.with(|map| {
            map.insert(key, DirtyNodes::All);
        });
    }

    /// The set's next sync plans `node` (and whatever else it must).
    pub(crate) fn node(&self, set: &ObjectRef<DaemonSet>, node: &str) {
        let key = (set.namespace.clone().unwrap_or_default(), set.name.clone());
        self.with(|map| {
            match map
                .entry(key)
                .or_insert_with(|| DirtyNodes::Some(HashSet::new()))
            {
                DirtyNodes::All => {}
                DirtyNodes::Some(nodes) => {
                    nodes.insert(node.to_string());
                }
            }
        });
    }

    /// The set is gone.
    pub(crate) fn forget(&self, namespace: &str, name: &str) {
        self.with(|map| {
            map.remove(&(namespace.to_string(), name.to_string()));
        });
    }

    /// Takes what the set's sync must plan.
    pub(crate) fn take(&self, namespace: &str, name: &str) -> DirtyNodes {
        self.with(|map| map.remove(&(namespace.to_string(), name.to_string())))
            .unwrap_or(DirtyNodes::All)
    }
}

/// The caches the syncs read.
#[derive(Default)]
pub(crate) struct Caches {
    pub(crate) pods: RwLock<DaemonPods>,
    pub(crate) nodes: RwLock<HashMap<String, Arc<Node>>>,
}

/// Whether a node event concerns a set: the node's fit changed where it
/// matters, or the set's pod presence disagrees with the new fit.
pub(crate) fn node_event_concerns(old: NodeFit, new: NodeFit, has_pod: bool) -> bool {
    let fit_changed = old != new && (old.should_run || new.should_run || has_pod);
    fit_changed || (new.should_run && !has_pod) || (has_pod && !new.should_continue_running)
}

const NO_FIT: NodeFit = NodeFit {
    should_run: false,
    should_continue_running: false,
};

/// Marks each (set, node) dirty (`None`: every node) and queues each set
/// once; false when the queue is closed.
fn mark_and_send(
    dirty: &Dirty,
    queue: &Requests<DaemonSet>,
    marks: impl IntoIterator<Item = (ObjectRef<DaemonSet>, Option<String>)>,
) -> bool {
    let mut sets = Vec::new();
    for (set, node) in marks {
        match node {
            Some(node) => dirty.node(&set, &node),
            None => dirty.all(&set),
        }
        sets.push(set);
    }
    send_all(queue, sets)
}

/// Sends each reference once; false when the queue is closed.
fn send_all(
    queue: &Requests<DaemonSet>,
    references: impl IntoIterator<Item = ObjectRef<DaemonSet>>,
) -> bool {
    let mut seen = HashSet::new();
    for reference in references {
        if seen.insert(reference.clone()) && queue.unbounded_send(reference).is_err() {
            return false;
        }
    }
    true
}

/// Forgets what the controller keeps for a deleted set (namespace, name).
pub(crate) type ForgetSet = Box<dyn Fn(&str, &str) + Send + Sync>;

/// Keeps the set store (the reflector does) and queues every set whose
/// spec changed (a new generation; its own status writes queue nothing),
/// to plan every node; a deleted one's expectations are forgotten.
pub(crate) async fn follow_sets(
    stream: impl Stream<Item = Result<Event<DaemonSet>, watcher::Error>>,
    expectations: Arc<Expectations>,
    dirty: Arc<Dirty>,
    forget: ForgetSet,
    queue: Requests<DaemonSet>,
) {
    let mut stream = std::pin::pin!(stream);
    // The generation last queued, by set uid.
    let mut generations: HashMap<String, Option<i64>> = HashMap::new();
    while let Some(event) = stream.next().await {
        let set = match event {
            Ok(Event::InitApply(set)) => set,
            Ok(Event::Apply(set)) => {
                let uid = set.metadata.uid.clone().unwrap_or_default();
                if generations.get(&uid) == Some(&set.metadata.generation) {
                    continue;
                }
                set
            }
            Ok(Event::Delete(set)) => {
                if let Some(uid) = set.metadata.uid.as_deref() {
                    expectations.forget(uid);
                    generations.remove(uid);
                }
                let (namespace, name) = key_of(&set.metadata);
                dirty.forget(&namespace, &name);
                forget(&namespace, &name);
                continue;
            }
            Ok(Event::Init | Event::InitDone) => continue,
            Err(error) => {
                tracing::debug!(%error, "daemonset watch failed");
                continue;
            }
        };
        generations.insert(
            set.metadata.uid.clone().unwrap_or_default(),
            set.metadata.generation,
        );
        if !mark_and_send(&dirty, &queue, [(ObjectRef::from_obj(&set), None)]) {
            return;
        }
    }
}

/// What the pod watch updates.
pub(crate) struct PodFollower {
    pub(crate) caches: Arc<Caches>,
    pub(crate) mapper: OwnerMapper<DaemonSet>,
    /// The sets' store: events of sets no longer there mark nothing.
    pub(crate) sets: Store<DaemonSet>,
    pub(crate) expectations: Arc<Expectations>,
    pub(crate) dirty: Arc<Dirty>,
    pub(crate) queue: Requests<DaemonSet>,
    pub(crate) synced: tokio::sync::watch::Sender<bool>,
}

impl PodFollower {
    /// The sets a pod change concerns, with the node to plan again: its
    /// controller with the pod's node, else (an orphan, or a pod whose
    /// labels or owners changed) every set it may concern, all nodes.
    fn marks(&self, pod: &Pod, relabelled: bool) -> Vec<(ObjectRef<DaemonSet>, Option<String>)> {
        let node = daemon_set_uid(pod)
            .and_then(|_| target_node(pod))
            .filter(|_| !relabelled);
        self.mapper
            .owners_of(pod)
            .into_iter()
            .filter(|set| self.sets.get(set).is_some())
            .map(|set| (set, node.clone()))
            .collect()
    }
}

/// Keeps the pod cache, records observed creations and deletions, and
/// queues the sets each change concerns.
pub(crate) async fn follow_pods(
    stream: impl Stream<Item = Event<Arc<Pod>>>,
    follower: PodFollower,
) {
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        // Changed pods, and whether their labels or owners changed.
        let mut changed: Vec<(Arc<Pod>, bool)> = Vec::new();
        {
            let mut pods = follower
                .caches
                .pods
                .write()
                .expect("pod cache lock poisoned");
            match event {
                Event::Apply(pod) | Event::InitApply(pod) => {
                    let old = pods.apply(Arc::clone(&pod));
                    if let Some(uid) = daemon_set_uid(&pod) {
                        let was_deleting = old
                            .as_ref()
                            .is_some_and(|o| o.metadata.deletion_timestamp.is_some());
                        if old.is_none() {
                            follower.expectations.creations_observed(uid, 1);
                        }
                        if pod.metadata.deletion_timestamp.is_some() && !was_deleting {
                            follower
                                .expectations
                                .deletion_observed(uid, &key_of(&pod.metadata));
                        }
                    }
                    let relabelled = old.as_ref().is_some_and(|old| {
                        old.metadata.labels != pod.metadata.labels
                            || old.metadata.owner_references != pod.metadata.owner_references
                    });
                    if let Some(old) = old {
                        let moved = target_node(&old) != target_node(&pod);
                        if relabelled || moved {
                            changed.push((old, relabelled));
                        }
                    }
                    changed.push((pod, relabelled));
                }
                Event::Delete(pod) => {
                    let cached = pods.delete(&pod);
                    if let Some(uid) = daemon_set_uid(&pod) {
                        follower
                            .expectations
                            .deletion_observed(uid, &key_of(&pod.metadata));
                    }
                    changed.extend(cached.map(|p| (p, false)));
                    changed.push((pod, false));
                }
                Event::Init => pods.index.start_relist(),
                Event::InitDone => {
                    for pod in pods.finish_relist() {
                        if let Some(uid) = daemon_set_uid(&pod) {
                            follower
                                .expectations
                                .deletion_observed(uid, &key_of(&pod.metadata));
                        }
                        changed.push((pod, true));
                    }
                    tracing::debug!(
                        pods = pods.index.len(),
                        "daemonset controller pod cache synced"
                    );
                    follower.synced.send_replace(true);
                }
            }
        }
        let marks = changed
            .iter()
            .flat_map(|(pod, relabelled)| follower.marks(pod, *relabelled));
        if !mark_and_send(&follower.dirty, &follower.queue, marks) {
            return;
        }
    }
}

/// Each set's placement, rebuilt when its generation changes.
#[derive(Default)]
struct Placements {
    by_uid: HashMap<String, (Option<i64>, Arc<Placement>)>,
}

impl Placements {
    fn of(&mut self, set: &DaemonSet) -> Option<Arc<Placement>> {
        let uid = set.metadata.uid.as_deref()?;
        let template = set.spec.as_ref()?.template.spec.as_ref();
        let generation = set.metadata.generation;
        if let Some((seen, placement)) = self.by_uid.get(uid)
            && *seen == generation
        {
            return Some(Arc::clone(placement));
        }
        let placement = Arc::new(Placement::new(&template.cloned().unwrap_or_default()));
        self.by_uid
            .insert(uid.to_string(), (generation, Arc::clone(&placement)));
        Some(placement)
    }

    fn retain(&mut self, live: &HashSet<&str>) {
        self.by_uid.retain(|uid, _| live.contains(uid.as_str()));
    }
}

/// What the node watch updates.
pub(crate) struct NodeFollower {
    pub(crate) caches: Arc<Caches>,
    pub(crate) sets: Store<DaemonSet>,
    pub(crate) dirty: Arc<Dirty>,
    pub(crate) queue: Requests<DaemonSet>,
    pub(crate) synced: tokio::sync::watch::Sender<bool>,
}

impl NodeFollower {
    /// The sets for which `name` going from `old` to `new` matters.
    fn sets_concerned(
        &self,
        placements: &mut Placements,
        name: &str,
        old: Option<&Node>,
        new: Option<&Node>,
    ) -> Vec<ObjectRef<DaemonSet>> {
        let sets = self.sets.state();
        let pods = self.caches.pods.read().expect("pod cache lock poisoned");
        let mut concerned = Vec::new();
        for set in &sets {
            let Some(placement) = placements.of(set) else {
                continue;
            };
            let uid = set.metadata.uid.as_deref().unwrap_or_default();
            let fit = |node: Option<&Node>| node.map_or(NO_FIT, |n| placement.fit(n));
            if node_event_concerns(fit(old), fit(new), pods.has_pod_on(uid, name)) {
                concerned.push(ObjectRef::from_obj(set.as_ref()));
            }
        }
        if placements.by_uid.len() > sets.len() {
            let live: HashSet<&str> = sets
                .iter()
                .filter_map(|s| s.metadata.uid.as_deref())
                .collect();
            placements.retain(&live);
        }
        crate::workloop::in_order(concerned)
    }
}

/// A node that changed where daemons run: its name, old and new versions.
type NodeChange = (String, Option<Arc<Node>>, Option<Arc<Node>>);

/// Keeps the node cache and queues the sets a node change concerns.
pub(crate) async fn follow_nodes(
    stream: impl Stream<Item = Result<Event<Node>, watcher::Error>>,
    follower: NodeFollower,
) {
    let mut stream = std::pin::pin!(stream);
    let mut placements = Placements::default();
    let mut relisted: Option<HashSet<String>> = None;
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                tracing::debug!(%error, "daemonset node watch failed");
                continue;
            }
        };
        let mut changes: Vec<NodeChange> = Vec::new();
        {
            let mut nodes = follower
                .caches
                .nodes
                .write()
                .expect("node cache lock poisoned");
            match event {
                Event::Apply(node) | Event::InitApply(node) => {
                    let name = node.name_any();
                    if let Some(seen) = relisted.as_mut() {
                        seen.insert(name.clone());
                    }
                    let node = Arc::new(node);
                    let old = nodes.insert(name.clone(), Arc::clone(&node));
                    if old.as_ref().is_none_or(|o| placement_changed(o, &node)) {
                        changes.push((name, old, Some(node)));
                    }
                }
                Event::Delete(node) => {
                    let name = node.name_any();
                    let old = nodes.remove(&name).or_else(|| Some(Arc::new(node)));
                    changes.push((name, old, None));
                }
                Event::Init => relisted = Some(HashSet::new()),
                Event::InitDone => {
                    if let Some(seen) = relisted.take() {
                        let gone: Vec<String> = nodes
                            .keys()
                            .filter(|n| !seen.contains(*n))
                            .cloned()
                            .collect();
                        for name in gone {
                            let old = nodes.remove(&name);
                            changes.push((name, old, None));
                        }
                    }
                    tracing::debug!(
                        nodes = nodes.len(),
                        "daemonset controller node cache synced"
                    );
                    follower.synced.send_replace(true);
                }
            }
        }
        let mut marks = Vec::new();
        for (name, old, new) in &changes {
            let sets =
                follower.sets_concerned(&mut placements, name, old.as_deref(), new.as_deref());
            marks.extend(sets.into_iter().map(|set| (set, Some(name.clone()))));
        }
        if !mark_and_send(&follower.dirty, &follower.queue, marks) {
            return;
        }
    }
}

/// Queues the sets a ControllerRevision event concerns (its controller,
/// recording it for release when it stopped matching; or the sets matching
/// an orphan, to adopt it).
pub(crate) async fn follow_revisions(
    stream: impl Stream<Item = Result<Event<ControllerRevision>, watcher::Error>>,
    mapper: OwnerMapper<DaemonSet>,
    dirty: Arc<Dirty>,
    queue: Requests<DaemonSet>,
) {
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        let revision = match event {
            Ok(Event::Apply(revision) | Event::InitApply(revision)) => revision,
            Ok(_) => continue,
            Err(error) => {
                tracing::debug!(%error, "daemonset revision watch failed");
                continue;
            }
        };
        let is_daemon_revision = controller_of(revision.meta()).is_none_or(|owner| {
            owner.kind == "DaemonSet" && owner.api_version.starts_with("apps/")
        });
        let marks = mapper
            .owners_of(&revision)
            .into_iter()
            .map(|set| (set, None));
        if is_daemon_revision && !mark_and_send(&dirty, &queue, marks) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fit(should_run: bool, should_continue_running: bool) -> NodeFit {
        NodeFit {
            should_run,
            should_continue_running,
        }
    }

    #[test]
    fn a_node_event_concerns_a_set_only_when_its_pod_there_must_change() {
        let run = fit(true, true);
        let stay = fit(false, true);
        let cases = [
            // (what, old, new, has pod, concerned)
            ("a new fitting node", NO_FIT, run, false, true),
            ("a new node that does not fit", NO_FIT, NO_FIT, false, false),
            ("a heartbeat-like change", run, run, true, false),
            ("a fitting node lost its pod", run, run, false, true),
            ("a node labelled out", run, NO_FIT, true, true),
            ("a node labelled in", NO_FIT, run, false, true),
            ("a fitting node removed", run, NO_FIT, true, true),
            (
                "a removed node without a pod that fitted",
                run,
                NO_FIT,
                false,
                true,
            ),
            ("an unfit node removed", NO_FIT, NO_FIT, false, false),
            (
                "a NoSchedule taint added keeps the pod",
                run,
                stay,
                true,
                true,
            ),
            (
                "an unrelated change to a tainted node",
                stay,
                stay,
                true,
                false,
            ),
            (
                "an unrelated change to a node without fit",
                NO_FIT,
                NO_FIT,
                false,
                false,
            ),
        ];
        for (what, old, new, has_pod, want) in cases {
            assert_eq!(node_event_concerns(old, new, has_pod), want, "{what}");
        }
    }

    fn daemon_pod(name: &str, uid: &str, node: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"namespace": "default", "name": name, "ownerReferences": [{
                    "apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds",
                    "uid": uid, "controller": true
                }]},
                "spec": {"nodeName": node, "containers": []}
            }))
            .expect("pod"),
        )
    }

    #[test]
    fn daemon_pods_are_counted_by_set_and_target_node() {
        let mut pods = DaemonPods::default();
        pods.apply(daemon_pod("a", "ds-1", "node-1"));
        pods.apply(daemon_pod("b", "ds-1", "node-2"));
        pods.apply(daemon_pod("c", "ds-2", "node-1"));
        assert!(pods.has_pod_on("ds-1", "node-1"));
        assert!(pods.has_pod_on("ds-2", "node-1"));
        assert!(!pods.has_pod_on("ds-2", "node-2"));
        // Moved (re-applied with another node), then deleted.
        pods.apply(daemon_pod("a", "ds-1", "node-3"));
        assert!(!pods.has_pod_on("ds-1", "node-1"));
        assert!(pods.has_pod_on("ds-1", "node-3"));
        pods.delete(&daemon_pod("a", "ds-1", "node-3"));
        assert!(!pods.has_pod_on("ds-1", "node-3"));
        pods.index.start_relist();
        pods.apply(daemon_pod("b", "ds-1", "node-2"));
        let gone = pods.finish_relist();
        assert_eq!(gone.len(), 1, "c was not listed again");
        assert!(!pods.has_pod_on("ds-2", "node-1"));
        assert!(pods.placed.keys().all(|uid| uid == "ds-1"));
    }
}
