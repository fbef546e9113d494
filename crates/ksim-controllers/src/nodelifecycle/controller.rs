//! The node lifecycle controller's loop: caches of nodes, node Leases and
//! bound pods (indexed by node) fed by watches; a monitor tick that marks
//! silent nodes Unknown; taint reconciliation on every node change; and
//! one timer per pod due for taint-based eviction; a node whose Ready leaves
//! True gets a NodeNotReady event and its pods Ready=False
//! (`MarkPodsNotReady`); each tick sends `RegisteredNode` and
//! `RemovingNode` events for nodes that came or went, and a pending taint
//! eviction called off sends `Cancelling deletion of Pod`. A re-list prunes
//! what it no longer holds. Writes
//! run in their own tasks with optimistic concurrency, so the loop never
//! waits on the API.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, future};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, Toleration};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::mpsc;

use super::eviction::eviction_deadline;
use super::health::{desired_taints, last_probe, stale_conditions_since};
use crate::common::watch_all;
use crate::events::Events;
use crate::informer::SharedInformers;
use ksim_runtime::WithoutManagedFields;
use ksim_runtime::clock::Clock;

// Maps keyed by the cluster's own names hash with foldhash, not SipHash
// (a restored cluster's 100,000 pods and 10,000 nodes go through them).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::FixedState>;

/// The namespace of the nodes' Leases.
const LEASE_NAMESPACE: &str = "kube-node-lease";
/// How long after a failed eviction it is tried again.
const EVICTION_RETRY: SignedDuration = SignedDuration::from_secs(1);

/// The controller's timing (kube-controller-manager's flags).
#[derive(Debug, Clone, Copy)]
pub struct NodeLifecycleConfig {
    /// `--node-monitor-grace-period`: how long a node may stay silent
    /// before it is marked Unknown (50 s upstream since 1.32).
    pub grace_period: Duration,
    /// `--node-monitor-period`: how often node health is checked (5 s).
    pub monitor_period: Duration,
}

impl Default for NodeLifecycleConfig {
    fn default() -> Self {
        NodeLifecycleConfig {
            grace_period: Duration::from_secs(50),
            monitor_period: Duration::from_secs(5),
        }
    }
}

type PodKey = (String, String);

/// A bound pod as the controller keeps it: its node, and the informer's
/// shared copy of the pod (its uid and tolerations are read from there, so
/// a pod costs no copies of its own).
#[derive(Debug, Clone)]
struct BoundPod {
    node: String,
    pod: Arc<Pod>,
}

impl BoundPod {
    fn uid(&self) -> String {
        self.pod.metadata.uid.clone().unwrap_or_default()
    }

    fn tolerations(&self) -> &[Toleration] {
        ksim_core::toleration::pod_tolerations(&self.pod)
    }
}

/// Keys seen since a watch's re-list started (`Init`), while it runs.
struct Relist<K> {
    seen: Option<HashSet<K>>,
}

impl<K: std::hash::Hash + Eq + Clone> Relist<K> {
    fn new() -> Self {
        Relist { seen: None }
    }

    /// A list starts; only a re-list over a non-empty cache has anything to
    /// prune, so the first one (a restored cluster's 100,000 pods) records
    /// no keys.
    fn start(&mut self, anything_cached: bool) {
        self.seen = anything_cached.then(HashSet::default);
    }

    fn saw(&mut self, key: &K) {
        if let Some(seen) = self.seen.as_mut() {
            seen.insert(key.clone());
        }
    }

    /// The keys of `cached` the re-list did not list (to forget).
    fn finish<'a>(&mut self, cached: impl Iterator<Item = &'a K>) -> Vec<K>
    where
        K: 'a,
    {
        let Some(seen) = self.seen.take() else {
            return Vec::new();
        };
        cached.filter(|k| !seen.contains(*k)).cloned().collect()
    }
}

/// When the controller last saw a node's sign of life change.
#[derive(Debug, Clone, Copy)]
struct Probe {
    /// The sign of life (the later of heartbeat and Lease renewal).
    seen: Timestamp,
    /// When it was seen.
    at: Timestamp,
}

struct Lifecycle {
    client: Client,
    clock: Clock,
    config: NodeLifecycleConfig,
    events: Events,
    node_events: Events,
    node_relist: Relist<String>,
    lease_relist: Relist<String>,
    pod_relist: Relist<PodKey>,
    // Ordered maps where iteration order becomes the order of writes and
    // events (so that runs on a seeded virtual clock repeat).
    nodes: BTreeMap<String, Node>,
    /// Nodes (name, uid) seen at the last monitor tick (`knownNodeSet`).
    known: BTreeMap<String, String>,
    leases: HashMap<String, Timestamp>,
    /// Per node, the last sign of life seen (heartbeat or Lease renewal) and
    /// when the controller saw it change (`nodeHealthData.probeTimestamp`):
    /// the grace period runs from the latter, as upstream's does, so nodes
    /// first seen with old heartbeats (a restored snapshot, a restarted
    /// controller) get a full grace period for their kubelet to post again.
    probes: HashMap<String, Probe>,
    pods: HashMap<PodKey, BoundPod>,
    pods_by_node: HashMap<String, BTreeSet<PodKey>>,
    timers: BinaryHeap<Reverse<(Timestamp, PodKey)>>,
    scheduled: HashMap<PodKey, Timestamp>,
    evicting: HashSet<PodKey>,
    failed: mpsc::UnboundedSender<PodKey>,
}

/// Runs the controller with upstream's timing until the watches end.
pub async fn run(client: Client, informers: SharedInformers) {
    run_with(client, NodeLifecycleConfig::default(), informers).await;
}

/// Runs the controller with the given timing until the watches end; its
/// clock is the informers' (the cluster's).
pub async fn run_with(client: Client, config: NodeLifecycleConfig, informers: SharedInformers) {
    let clock = informers.clock().clone();
    let mut nodes = watch_all::<Node>(client.clone(), &clock).boxed();
    let mut leases = watcher(
        Api::<WithoutManagedFields<Lease>>::namespaced(client.clone(), LEASE_NAMESPACE),
        &clock,
    )
    .map(|event| event.map(ksim_runtime::lean::into_inner_event))
    .boxed();
    let mut pods = informers.pods().boxed();
    let (failed, mut failures) = mpsc::unbounded_channel();
    let mut state = Lifecycle {
        events: Events::new(client.clone(), "taint-eviction-controller", &clock),
        node_events: Events::new(client.clone(), "node-controller", &clock),
        clock: clock.clone(),
        node_relist: Relist::new(),
        lease_relist: Relist::new(),
        pod_relist: Relist::new(),
        client,
        config,
        nodes: BTreeMap::new(),
        known: BTreeMap::new(),
        leases: HashMap::default(),
        probes: HashMap::default(),
        pods: HashMap::default(),
        pods_by_node: HashMap::default(),
        timers: BinaryHeap::new(),
        scheduled: HashMap::default(),
        evicting: HashSet::default(),
        failed,
    };
    let mut tick = clock.interval(config.monitor_period);
    loop {
        let next = state.timers.peek().map(|Reverse((at, _))| *at);
        let timer_clock = clock.clone();
        let timer = async move {
            match next {
                Some(at) => {
                    let wait = timer_clock.timestamp().duration_until(at);
                    let wait = Duration::try_from(wait).unwrap_or(Duration::ZERO);
                    timer_clock.sleep(wait).await;
                }
                None => future::pending::<()>().await,
            }
        };
        tokio::select! {
            biased;
            Some(event) = nodes.next() => match event {
                Ok(event) => state.on_node(event),
                Err(error) => tracing::debug!(%error, "node watch failed"),
            },
            Some(event) = leases.next() => match event {
                Ok(event) => state.on_lease(event),
                Err(error) => tracing::debug!(%error, "lease watch failed"),
            },
            Some(event) = pods.next() => state.on_pod(event),
            Some(key) = failures.recv() => {
                state.evicting.remove(&key);
                let at = state.clock.timestamp() + EVICTION_RETRY;
                state.schedule(key, at);
            }
            _ = tick.tick() => state.monitor(),
            () = timer => state.fire_timers(),
            else => break,
        }
    }
}

fn watcher<K>(
    api: Api<K>,
    clock: &Clock,
) -> std::pin::Pin<Box<dyn futures::Stream<Item = Result<Event<K>, watcher::Error>> + Send>>
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
{
    crate::common::backoff_on(watcher::watcher(api, watcher::Config::default()), clock).boxed()
}

impl Lifecycle {
    fn on_node(&mut self, event: Event<Node>) {
        match event {
            Event::Apply(node) | Event::InitApply(node) => {
                let name = node.name_any();
                self.node_relist.saw(&name);
                self.reconcile_taints(&node);
                let was_ready = self.nodes.get(&name).and_then(ready_status) == Some("True");
                let is_ready = ready_status(&node) == Some("True");
                if was_ready && !is_ready {
                    self.node_not_ready(&node);
                }
                self.nodes.insert(name.clone(), node);
                self.observe(&name);
                let keys: Vec<PodKey> = self
                    .pods_by_node
                    .get(&name)
                    .map(|keys| keys.iter().cloned().collect())
                    .unwrap_or_default();
                for key in keys {
                    self.evaluate(&key);
                }
            }
            Event::Delete(node) => {
                let name = node.name_any();
                self.nodes.remove(&name);
                self.probes.remove(&name);
            }
            Event::Init => self.node_relist.start(!self.nodes.is_empty()),
            Event::InitDone => {
                for name in self.node_relist.finish(self.nodes.keys()) {
                    self.nodes.remove(&name);
                    self.probes.remove(&name);
                }
            }
        }
    }

    fn on_lease(&mut self, event: Event<Lease>) {
        match event {
            Event::Apply(lease) | Event::InitApply(lease) => {
                let renewed = lease
                    .spec
                    .as_ref()
                    .and_then(|s| s.renew_time.as_ref())
                    .map(|t| t.0);
                let name = lease.name_any();
                self.lease_relist.saw(&name);
                if let Some(renewed) = renewed {
                    self.leases.insert(name.clone(), renewed);
                    self.observe(&name);
                }
            }
            Event::Delete(lease) => {
                self.leases.remove(&lease.name_any());
            }
            Event::Init => self.lease_relist.start(!self.leases.is_empty()),
            Event::InitDone => {
                for name in self.lease_relist.finish(self.leases.keys()) {
                    self.leases.remove(&name);
                }
            }
        }
    }

    fn on_pod(&mut self, event: Event<Arc<Pod>>) {
        match event {
            Event::Apply(pod) | Event::InitApply(pod) => {
                let key = (pod.namespace().unwrap_or_default(), pod.name_any());
                self.pod_relist.saw(&key);
                let node = pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .unwrap_or_default();
                let phase = pod
                    .status
                    .as_ref()
                    .and_then(|s| s.phase.as_deref())
                    .unwrap_or_default();
                let gone = node.is_empty()
                    || pod.metadata.deletion_timestamp.is_some()
                    || ksim_core::status::is_terminal_phase(phase);
                // A pod update keeps its pending eviction (re-judged below).
                let pending = self.scheduled.get(&key).copied();
                self.forget_pod(&key);
                if gone {
                    return;
                }
                if let Some(at) = pending {
                    self.scheduled.insert(key.clone(), at);
                }
                let bound = BoundPod {
                    node: node.clone(),
                    pod: Arc::clone(&pod),
                };
                self.pods_by_node
                    .entry(node)
                    .or_default()
                    .insert(key.clone());
                self.pods.insert(key.clone(), bound);
                self.evaluate(&key);
            }
            Event::Delete(pod) => {
                let key = (pod.namespace().unwrap_or_default(), pod.name_any());
                self.forget_pod(&key);
                self.evicting.remove(&key);
            }
            Event::Init => self.pod_relist.start(!self.pods.is_empty()),
            Event::InitDone => {
                for key in self.pod_relist.finish(self.pods.keys()) {
                    self.forget_pod(&key);
                    self.evicting.remove(&key);
                }
            }
        }
    }

    fn forget_pod(&mut self, key: &PodKey) {
        if let Some(old) = self.pods.remove(key)
            && let Some(keys) = self.pods_by_node.get_mut(&old.node)
        {
            keys.remove(key);
            if keys.is_empty() {
                self.pods_by_node.remove(&old.node);
            }
        }
        self.scheduled.remove(key);
    }

    /// Deletes the pod now, or schedules it, as its node's NoExecute taints
    /// and its tolerations say.
    fn evaluate(&mut self, key: &PodKey) {
        let Some(pod) = self.pods.get(key) else {
            return;
        };
        let taints = self
            .nodes
            .get(&pod.node)
            .map(ksim_core::toleration::node_taints)
            .unwrap_or_default();
        // Without a NoExecute taint there is no deadline (and no clock read).
        let deadline = taints
            .iter()
            .any(|t| t.effect == "NoExecute")
            .then(|| {
                let now = self.clock.timestamp();
                eviction_deadline(pod.tolerations(), taints, now).map(|at| (at, at <= now))
            })
            .flatten();
        match deadline {
            None => {
                if self.scheduled.remove(key).is_some() {
                    self.cancel_event(key);
                }
            }
            Some((_, true)) => self.evict(key.clone()),
            Some((at, false)) => self.schedule(key.clone(), at),
        }
    }

    /// `emitCancelPodDeletionEvent`: a pending taint eviction is called off.
    fn cancel_event(&self, key: &PodKey) {
        let (namespace, name) = key;
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            uid: self.pods.get(key).map(BoundPod::uid),
            ..Default::default()
        };
        self.events.normal(
            reference,
            "TaintManagerEviction",
            "Delete",
            format!("Cancelling deletion of Pod {namespace}/{name}"),
        );
    }

    fn schedule(&mut self, key: PodKey, at: Timestamp) {
        if self.scheduled.get(&key) == Some(&at) {
            return;
        }
        self.scheduled.insert(key.clone(), at);
        self.timers.push(Reverse((at, key)));
    }

    fn fire_timers(&mut self) {
        let now = self.clock.timestamp();
        while let Some(Reverse((at, _))) = self.timers.peek() {
            if *at > now {
                break;
            }
            let Some(Reverse((at, key))) = self.timers.pop() else {
                break;
            };
            if self.scheduled.get(&key) == Some(&at) {
                self.scheduled.remove(&key);
                self.evaluate(&key);
            }
        }
    }

    /// `addConditionAndDeletePod`: the DisruptionTarget condition, then the delete.
    fn evict(&mut self, key: PodKey) {
        let Some(pod) = self.pods.get(&key) else {
            return;
        };
        if !self.evicting.insert(key.clone()) {
            return;
        }
        let uid = pod.uid();
        let client = self.client.clone();
        let events = self.events.clone();
        let failed = self.failed.clone();
        let now = self.clock.timestamp();
        let busy = self.clock.busy();
        tokio::spawn(async move {
            let _busy = busy;
            let (namespace, name) = &key;
            let api: Api<Pod> = Api::namespaced(client, namespace);
            let reference = k8s_openapi::api::core::v1::ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                uid: Some(uid.clone()),
                ..Default::default()
            };
            events.normal(
                reference,
                "TaintManagerEviction",
                "Delete",
                format!("Marking for deletion Pod {namespace}/{name}"),
            );
            let condition = json!({"status": {"conditions": [{
                "type": "DisruptionTarget", "status": "True",
                "reason": "DeletionByTaintManager",
                "message": "Taint manager: deleting due to NoExecute taint",
                "lastTransitionTime": now.to_string(),
            }]}});
            let result = async {
                api.patch_status(name, &PatchParams::default(), &Patch::Strategic(condition))
                    .await?;
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: Some(uid.clone()),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                api.delete(name, &params).await?;
                Ok::<(), kube::Error>(())
            }
            .await;
            match result {
                Ok(()) => {
                    tracing::info!(pod = %name, namespace = %namespace, "evicted pod from a NoExecute-tainted node")
                }
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => {
                    tracing::debug!(%error, pod = %name, "taint eviction failed; retrying");
                    let _ = failed.send(key.clone());
                }
            }
        });
    }

    /// The node's Ready left True: a `NodeNotReady` event on the node
    /// (`RecordNodeStatusChange`), and `MarkPodsNotReady` on its pods.
    fn node_not_ready(&self, node: &Node) {
        let name = node.name_any();
        tracing::info!(node = %name, "node is not ready: marking its pods not ready");
        // kube's node events name the node as their uid (kubectl describe
        // node looks them up so).
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(name.clone()),
            uid: Some(name.clone()),
            ..Default::default()
        };
        self.node_events.normal(
            reference,
            "NodeNotReady",
            "NodeNotReady",
            format!("Node {name} status is now: NodeNotReady"),
        );
        let keys: Vec<PodKey> = self
            .pods_by_node
            .get(&name)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default();
        if keys.is_empty() {
            return;
        }
        let client = self.client.clone();
        let events = self.node_events.clone();
        let clock = self.clock.clone();
        let busy = clock.busy();
        tokio::spawn(async move {
            let _busy = busy;
            for (namespace, pod) in keys {
                if let Err(error) =
                    mark_pod_not_ready(&client, &events, &namespace, &pod, &name, &clock).await
                {
                    tracing::debug!(%error, %namespace, %pod, "cannot mark pod not ready");
                }
            }
        });
    }

    /// Writes the taints the node's state calls for, if they differ.
    fn reconcile_taints(&self, node: &Node) {
        let wanted = desired_taints(node, self.clock.timestamp());
        let current = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        let same = wanted.len() == current.len()
            && wanted.iter().all(|w| {
                current
                    .iter()
                    .any(|c| c.key == w.key && c.effect == w.effect)
            });
        if same {
            return;
        }
        let mut new = node.clone();
        new.spec.get_or_insert_with(Default::default).taints =
            (!wanted.is_empty()).then_some(wanted);
        new.metadata.managed_fields = None;
        let api: Api<Node> = Api::all(self.client.clone());
        let busy = self.clock.busy();
        tokio::spawn(async move {
            let _busy = busy;
            let name = new.name_any();
            if let Err(error) = api.replace(&name, &PostParams::default(), &new).await {
                // A conflict means a newer version is on its way through the watch.
                tracing::debug!(%error, node = %name, "cannot update node taints");
            }
        });
    }

    /// `monitorNodeHealth`: nodes seen for the first time since the last
    /// tick get a `RegisteredNode` event, nodes gone a `RemovingNode` one;
    /// nodes silent for longer than the grace period get Unknown conditions.
    fn monitor(&mut self) {
        self.classify_nodes();
        let now = self.clock.timestamp();
        let grace = SignedDuration::try_from(self.config.grace_period)
            .unwrap_or(SignedDuration::from_secs(50));
        for (name, node) in &self.nodes {
            let probed = self.probes.get(name).map(|p| p.at);
            let Some(conditions) = stale_conditions_since(node, probed, now, grace) else {
                continue;
            };
            tracing::info!(node = %name, "node stopped posting status: marking it Unknown");
            let mut new = node.clone();
            new.status.get_or_insert_with(Default::default).conditions = Some(conditions);
            new.metadata.managed_fields = None;
            let api: Api<Node> = Api::all(self.client.clone());
            let name = name.clone();
            let busy = self.clock.busy();
            tokio::spawn(async move {
                let _busy = busy;
                if let Err(error) = api
                    .replace_status(&name, &PostParams::default(), &new)
                    .await
                {
                    tracing::debug!(%error, node = %name, "cannot update node status");
                }
            });
        }
    }
}

impl Lifecycle {
    /// Notes when node `name`'s sign of life changed (`tryUpdateNodeHealth`
    /// moving `probeTimestamp` to now on a new heartbeat or renewal, and on
    /// a node it had no record of).
    fn observe(&mut self, name: &str) {
        let Some(node) = self.nodes.get(name) else {
            return;
        };
        let Some(seen) = last_probe(node, self.leases.get(name).copied()) else {
            self.probes.remove(name);
            return;
        };
        if self.probes.get(name).is_some_and(|p| p.seen == seen) {
            return;
        }
        let at = self.clock.timestamp();
        self.probes.insert(name.to_string(), Probe { seen, at });
    }

    /// `classifyNodes` and its events, against the nodes known at the last tick.
    fn classify_nodes(&mut self) {
        let added: Vec<(String, String)> = self
            .nodes
            .iter()
            .filter(|(name, _)| !self.known.contains_key(*name))
            .map(|(name, node)| (name.clone(), node.uid().unwrap_or_default()))
            .collect();
        for (name, uid) in added {
            tracing::debug!(node = %name, "controller observed a new node");
            self.node_event(
                &name,
                &uid,
                "RegisteredNode",
                format!("Registered Node {name} in Controller"),
            );
            self.known.insert(name, uid);
        }
        if self.known.len() != self.nodes.len() {
            let deleted: Vec<(String, String)> = self
                .known
                .iter()
                .filter(|(name, _)| !self.nodes.contains_key(*name))
                .map(|(name, uid)| (name.clone(), uid.clone()))
                .collect();
            for (name, uid) in deleted {
                tracing::debug!(node = %name, "controller observed a node deletion");
                self.node_event(
                    &name,
                    &uid,
                    "RemovingNode",
                    format!("Removing Node {name} from Controller"),
                );
                self.known.remove(&name);
            }
        }
    }

    /// `RecordNodeEvent`: a Normal event about a node, by its uid.
    fn node_event(&self, name: &str, uid: &str, reason: &str, note: String) {
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(name.to_string()),
            uid: Some(uid.to_string()),
            ..Default::default()
        };
        self.node_events.normal(reference, reason, reason, note);
    }
}

/// The status of the node's Ready condition.
fn ready_status(node: &Node) -> Option<&str> {
    ksim_core::status::node_ready_condition(node).map(|c| c.status.as_str())
}

/// One pod of `MarkPodsNotReady`: its Ready condition becomes False (a
/// transition time of now), then a `NodeNotReady` warning on the pod.
async fn mark_pod_not_ready(
    client: &Client,
    events: &Events,
    namespace: &str,
    name: &str,
    node: &str,
    clock: &Clock,
) -> Result<(), kube::Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    for _ in 0..5 {
        let Some(mut pod) = api.get_opt(name).await? else {
            return Ok(());
        };
        if pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some(node) {
            return Ok(());
        }
        let Some(ready) = pod
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .and_then(|c| c.iter_mut().find(|c| c.type_ == "Ready"))
        else {
            return Ok(());
        };
        if ready.status == "False" {
            return Ok(());
        }
        ready.status = "False".into();
        ready.last_transition_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            clock.timestamp(),
        ));
        match api.replace_status(name, &PostParams::default(), &pod).await {
            Ok(_) => {
                let reference = k8s_openapi::api::core::v1::ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some(name.to_string()),
                    namespace: Some(namespace.to_string()),
                    uid: pod.metadata.uid.clone(),
                    ..Default::default()
                };
                events.warning(
                    reference,
                    "NodeNotReady",
                    "NodeNotReady",
                    "Node is not ready".into(),
                );
                return Ok(());
            }
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relist_forgets_only_what_it_did_not_list() {
        let mut relist: Relist<String> = Relist::new();
        let cached = ["a".to_string(), "b".to_string(), "c".to_string()];
        assert!(
            relist.finish(cached.iter()).is_empty(),
            "no re-list running"
        );
        relist.start(true);
        relist.saw(&"a".to_string());
        relist.saw(&"c".to_string());
        assert_eq!(relist.finish(cached.iter()), vec!["b".to_string()]);
        assert!(relist.finish(cached.iter()).is_empty());
    }

    #[test]
    fn a_first_list_over_an_empty_cache_records_nothing() {
        let mut relist: Relist<String> = Relist::new();
        relist.start(false);
        relist.saw(&"a".to_string());
        assert!(relist.seen.is_none(), "no keys recorded");
        assert!(relist.finish(std::iter::empty()).is_empty());
    }
}
