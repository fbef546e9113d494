//! The simulator's core: caches of managed Nodes and bound Pods, the stage
//! chosen for each object with the time it is due, and the workers that apply
//! a stage's next action through the API. Any event about an object (or any
//! change of the Stages) re-evaluates it at once; the latest decision wins.
//! Delays and retries are deadlines of work queues on the cluster's clock
//! (a queue with due or in-flight keys keeps a virtual cluster busy), random
//! draws come from the clock's seeded source, and objects are visited in
//! name order wherever many are re-evaluated at once. Nothing is applied to a
//! stopped node or its pods (see [`super::KUBELET_ANNOTATION`]).
//!
//! Pod IPs: the IPs a pod already shows (it ran before the simulator
//! started, or a snapshot restore or a replay wrote them) are recorded as
//! taken, also for a pod seen before its node; no pod's stage is applied
//! before Nodes and Pods have both been listed once, so every IP shown is
//! known before one is handed out; and a pod's status is written for the
//! version it was rendered from, so that a status another client wrote
//! meanwhile (a restored pod's saved IP) is not overwritten.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde_json::Value;
use serde_json::value::RawValue;

use ksim_runtime::{Clock, WorkQueue};

use super::api::{self, SimulatedKind};
use super::cached::CachedObject;
use super::env::{Network, NodeFacts, RenderEnv};
use super::options::KubeletOptions;
use super::rng::ClockRng;
use crate::error::KubeletError;
use crate::pod::PodIpAllocator;
use crate::stage::{
    CompiledStage, NextAction, ObjectSnapshot, PatchType, ReadFields, Stage, choose_stage,
    compile_stages, matching_stages, next_action,
};
use crate::template::{Renderer, TemplateEnv, format_time};

// Keyed by the cluster's own names and UIDs: foldhash rather than SipHash
// (every pod of a restored cluster goes through these maps at the start).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;
type FastSet<K> = std::collections::HashSet<K, foldhash::fast::FixedState>;

/// How long to wait before retrying an object whose action failed at the API.
const API_RETRY: Duration = Duration::from_secs(1);
/// How long to wait before retrying an object whose stage failed to render.
const RENDER_RETRY: Duration = Duration::from_secs(30);

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// `object.pointer(pointer)` for a pointer through object keys, without
/// `Value::pointer`'s allocation of every token (it unescapes each one): the
/// engine reads a few fields of every pod it is told about.
fn at<'a>(object: &'a Value, pointer: &str) -> Option<&'a Value> {
    if pointer.is_empty() || pointer.contains('~') {
        return object.pointer(pointer);
    }
    let tokens = pointer.strip_prefix('/')?;
    tokens
        .split('/')
        .try_fold(object, |value, token| match value {
            Value::Object(map) => map.get(token),
            // An array index: `Value::pointer`'s own rules.
            Value::Array(_) => value.pointer(&format!("/{token}")),
            _ => None,
        })
}

fn str_at<'a>(object: &'a Value, pointer: &str) -> &'a str {
    at(object, pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The cache key of a Node (`name`) or Pod (`namespace/name`).
pub fn object_key(kind: SimulatedKind, object: &Value) -> String {
    let name = str_at(object, "/metadata/name");
    match kind {
        SimulatedKind::Node => name.to_owned(),
        SimulatedKind::Pod => format!("{}/{name}", str_at(object, "/metadata/namespace")),
    }
}

/// A stage chosen for an object, valid while the object and the stages are unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pending {
    stage: String,
    resource_version: String,
    generation: u64,
}

/// How a managed node's next lease renewal starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LeaseStart {
    /// The node was in a list (the simulator started over a running or
    /// restored cluster, or re-listed): its lease most likely exists, so it
    /// is patched first and created only if missing.
    Listed,
    /// The simulator has created or renewed the lease: it is patched, and
    /// created again only while the node still exists.
    Held,
}

/// The objects of one kind, their pending stages and their work queue.
#[derive(Debug)]
pub struct Tracker {
    kind: SimulatedKind,
    objects: Mutex<HashMap<String, Arc<CachedObject>>>,
    pending: Mutex<HashMap<String, Pending>>,
    /// Keys due for their stage.
    pub queue: WorkQueue<String>,
}

impl Tracker {
    fn new(kind: SimulatedKind, clock: Clock) -> Self {
        Self {
            kind,
            objects: Mutex::new(HashMap::default()),
            pending: Mutex::new(HashMap::default()),
            queue: WorkQueue::with_clock(clock),
        }
    }

    /// The kind of object tracked.
    pub fn kind(&self) -> SimulatedKind {
        self.kind
    }

    /// The cached object of `key`.
    pub fn get(&self, key: &str) -> Option<Arc<CachedObject>> {
        lock(&self.objects).get(key).cloned()
    }

    /// Every cached key, in order.
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = lock(&self.objects).keys().cloned().collect();
        keys.sort_unstable();
        keys
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        lock(&self.objects).len()
    }

    /// Whether no object is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn insert(&self, key: String, object: Arc<CachedObject>) -> Option<Arc<CachedObject>> {
        lock(&self.objects).insert(key, object)
    }

    /// Replaces the cached object of `key` by `new` if it is still `old`.
    fn replace(&self, key: &str, old: &Arc<CachedObject>, new: Arc<CachedObject>) {
        if let Some(cached) = lock(&self.objects).get_mut(key)
            && Arc::ptr_eq(cached, old)
        {
            *cached = new;
        }
    }

    fn remove(&self, key: &str) -> Option<Arc<CachedObject>> {
        lock(&self.pending).remove(key);
        self.queue.forget(&key.to_owned());
        lock(&self.objects).remove(key)
    }
}

/// The compiled Stages, split by kind, with a generation that changes on every update.
#[derive(Debug)]
struct CompiledSet {
    generation: u64,
    nodes: Vec<CompiledStage>,
    pods: Vec<CompiledStage>,
    /// The fields of Nodes and Pods (in this order) that the simulator and
    /// these stages read, with a version that changes when they do.
    fields: [(ReadFields, u64); 2],
}

impl CompiledSet {
    /// No stages: the fields the simulator itself reads.
    fn empty() -> Self {
        Self {
            generation: 0,
            nodes: Vec::new(),
            pods: Vec::new(),
            fields: [
                (simulator_fields(SimulatedKind::Node), 0),
                (simulator_fields(SimulatedKind::Pod), 0),
            ],
        }
    }

    fn of(&self, kind: SimulatedKind) -> &[CompiledStage] {
        match kind {
            SimulatedKind::Node => &self.nodes,
            SimulatedKind::Pod => &self.pods,
        }
    }

    fn fields(&self, kind: SimulatedKind) -> &(ReadFields, u64) {
        match kind {
            SimulatedKind::Node => &self.fields[0],
            SimulatedKind::Pod => &self.fields[1],
        }
    }
}

/// The fields of a Node or Pod the simulator reads itself (its name, node,
/// IPs, CIDRs, the kubelet annotation, the node selection's labels and
/// annotations).
fn simulator_fields(kind: SimulatedKind) -> ReadFields {
    let mut fields = ReadFields::none();
    for field in ["name", "namespace", "uid", "resourceVersion"] {
        fields.add(&["metadata", field]);
    }
    let more: &[&[&str]] = match kind {
        SimulatedKind::Node => &[
            &["metadata", "labels"],
            &["metadata", "annotations"],
            &["spec", "podCIDR"],
            &["spec", "podCIDRs"],
            &["status", "addresses"],
        ],
        SimulatedKind::Pod => &[
            &["spec", "nodeName"],
            &["spec", "hostNetwork"],
            &["status", "podIP"],
            &["status", "podIPs"],
        ],
    };
    for path in more {
        fields.add(path);
    }
    fields
}

/// The simulator's shared state.
pub struct Engine {
    /// The API client.
    pub client: kube::Client,
    /// Options.
    pub options: KubeletOptions,
    renderer: Renderer,
    start_time: String,
    stages: RwLock<Arc<CompiledSet>>,
    /// Managed nodes.
    pub nodes: Tracker,
    /// Pods bound to any node (acted on only when their node is managed).
    pub pods: Tracker,
    /// Managed nodes' facts and pod IPs.
    pub network: Arc<Network>,
    pods_by_node: Mutex<HashMap<String, FastSet<String>>>,
    /// Nodes due for a lease renewal.
    pub leases: WorkQueue<String>,
    /// What the simulator knows of each node's lease (see [`LeaseStart`]); a node
    /// absent here is new: its first renewal starts by creating the lease.
    pub(super) lease_starts: Mutex<HashMap<String, LeaseStart>>,
    events: std::sync::atomic::AtomicU64,
    /// Whether the Node and the Pod informers (in this order) have delivered
    /// their first complete list: no pod's stage is applied before both
    /// have, so that every IP a listed pod already shows is known before
    /// one is handed out.
    listed: [AtomicBool; 2],
    listed_changed: tokio::sync::Notify,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("options", &self.options)
            .field("nodes", &self.nodes.len())
            .field("pods", &self.pods.len())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// A simulator state with no stages and no objects.
    pub fn new(client: kube::Client, options: KubeletOptions) -> Self {
        let start_time = format_time(options.clock.now());
        let network = Arc::new(Network {
            nodes: RwLock::new(HashMap::default()),
            ips: Mutex::new(PodIpAllocator::new(&options.default_pod_cidr)),
            default_node_ip: options.node_ip.clone(),
        });
        let clock = options.clock.clone();
        Self {
            client,
            options,
            renderer: Renderer::new(),
            start_time,
            stages: RwLock::new(Arc::new(CompiledSet::empty())),
            nodes: Tracker::new(SimulatedKind::Node, clock.clone()),
            pods: Tracker::new(SimulatedKind::Pod, clock.clone()),
            network,
            pods_by_node: Mutex::new(HashMap::default()),
            leases: WorkQueue::with_clock(clock),
            lease_starts: Mutex::new(HashMap::default()),
            events: std::sync::atomic::AtomicU64::new(0),
            listed: [AtomicBool::new(false), AtomicBool::new(false)],
            listed_changed: tokio::sync::Notify::new(),
        }
    }

    /// The informer of `kind` has delivered a complete list.
    pub fn listed(&self, kind: SimulatedKind) {
        let index = match kind {
            SimulatedKind::Node => 0,
            SimulatedKind::Pod => 1,
        };
        if !self.listed[index].swap(true, Ordering::AcqRel) {
            self.listed_changed.notify_waiters();
        }
    }

    /// Waits until both Nodes and Pods have been listed once.
    async fn wait_for_lists(&self) {
        loop {
            let changed = self.listed_changed.notified();
            if self.listed.iter().all(|l| l.load(Ordering::Acquire)) {
                return;
            }
            changed.await;
        }
    }

    fn tracker(&self, kind: SimulatedKind) -> &Tracker {
        match kind {
            SimulatedKind::Node => &self.nodes,
            SimulatedKind::Pod => &self.pods,
        }
    }

    fn compiled(&self) -> Arc<CompiledSet> {
        self.stages
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the Stages and re-evaluates every object at once.
    pub fn set_stages(&self, stages: Vec<Stage>) {
        let (compiled, errors) = compile_stages(stages);
        for error in errors {
            tracing::warn!(%error, "stage ignored");
        }
        let previous = self.compiled();
        let mut set = CompiledSet {
            generation: previous.generation + 1,
            ..CompiledSet::empty()
        };
        for stage in compiled {
            if stage.applies_to("", "Node") {
                set.nodes.push(stage);
            } else if stage.applies_to("", "Pod") {
                set.pods.push(stage);
            }
        }
        for (index, kind) in [SimulatedKind::Node, SimulatedKind::Pod]
            .into_iter()
            .enumerate()
        {
            let mut fields = simulator_fields(kind);
            for stage in set.of(kind) {
                stage.read_fields(&mut fields);
            }
            let (before, version) = previous.fields(kind);
            let version = if &fields == before {
                *version
            } else {
                version + 1
            };
            set.fields[index] = (fields, version);
        }
        tracing::debug!(
            nodes = set.nodes.len(),
            pods = set.pods.len(),
            generation = set.generation,
            "stages updated"
        );
        *self.stages.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(set);
        for kind in [SimulatedKind::Node, SimulatedKind::Pod] {
            for key in self.tracker(kind).keys() {
                self.evaluate(kind, &key);
            }
        }
    }

    /// A Node or Pod was added or changed: `raw` is its JSON text.
    pub fn object_applied(&self, kind: SimulatedKind, raw: Box<RawValue>) {
        self.object_seen(kind, raw, false);
    }

    /// A Node or Pod of a (re-)list: `raw` is its JSON text. A listed node
    /// that is new to the simulator most likely holds its lease already: its
    /// first renewal patches it rather than creating it.
    pub fn object_listed(&self, kind: SimulatedKind, raw: Box<RawValue>) {
        self.object_seen(kind, raw, true);
    }

    fn object_seen(&self, kind: SimulatedKind, raw: Box<RawValue>, listed: bool) {
        let set = self.compiled();
        let (fields, version) = set.fields(kind);
        let object = Arc::new(CachedObject::new(raw, fields, *version));
        drop(set);
        match kind {
            SimulatedKind::Node => self.node_cached(object, listed),
            SimulatedKind::Pod => self.pod_cached(object),
        }
    }

    fn value_applied(&self, kind: SimulatedKind, object: &Value) {
        match serde_json::value::to_raw_value(object) {
            Ok(raw) => self.object_applied(kind, raw),
            Err(error) => tracing::warn!(%error, "object not cached"),
        }
    }

    /// A Node was added or changed.
    pub fn node_applied(&self, node: Value) {
        self.value_applied(SimulatedKind::Node, &node);
    }

    fn node_cached(&self, cached: Arc<CachedObject>, listed: bool) {
        let node = cached.view();
        let name = object_key(SimulatedKind::Node, node);
        if name.is_empty() {
            return;
        }
        if !self.options.manage.selects(node) {
            self.node_deleted(&name);
            return;
        }
        let facts = NodeFacts::of(node);
        let stopped = facts.stopped;
        let was_stopped = self
            .network
            .nodes
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.clone(), facts)
            .map(|previous| previous.stopped);
        self.nodes.insert(name.clone(), cached);
        if listed && was_stopped.is_none() {
            lock(&self.lease_starts)
                .entry(name.clone())
                .or_insert(LeaseStart::Listed);
        }
        if was_stopped != Some(stopped) {
            match (was_stopped, stopped) {
                (_, true) => {
                    tracing::info!(node = %name, "kubelet stopped");
                    self.leases.forget(&name);
                }
                (Some(true), false) => tracing::info!(node = %name, "kubelet resumed"),
                _ => {}
            }
            if !stopped && self.options.lease_duration_seconds > 0 {
                self.leases.add(name.clone());
            }
            // The node's pods start (or stop) being acted on.
            let mut waiting: Vec<String> = lock(&self.pods_by_node)
                .get(&name)
                .map(|pods| pods.iter().cloned().collect())
                .unwrap_or_default();
            waiting.sort_unstable();
            if was_stopped.is_none() {
                // Pods seen before their node: their IPs are taken from now on.
                for pod in &waiting {
                    if let Some(pod) = self.pods.get(pod) {
                        self.mark_pod_ips(pod.view(), &name);
                    }
                }
            }
            for pod in waiting {
                self.evaluate(SimulatedKind::Pod, &pod);
            }
        }
        self.evaluate(SimulatedKind::Node, &name);
    }

    /// A Node is gone (or no longer selected).
    pub fn node_deleted(&self, name: &str) {
        self.network
            .nodes
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        self.nodes.remove(name);
        self.leases.forget(&name.to_owned());
        lock(&self.lease_starts).remove(name);
    }

    /// A Pod was added or changed.
    pub fn pod_applied(&self, pod: Value) {
        self.value_applied(SimulatedKind::Pod, &pod);
    }

    fn pod_cached(&self, cached: Arc<CachedObject>) {
        let pod = cached.view();
        let key = object_key(SimulatedKind::Pod, pod);
        let node = str_at(pod, "/spec/nodeName").to_owned();
        if node.is_empty() {
            self.pods.remove(&key);
            return;
        }
        self.mark_pod_ips(pod, &node);
        let previous = self.pods.insert(key.clone(), cached);
        let mut index = lock(&self.pods_by_node);
        if let Some(previous) = previous {
            let old = str_at(previous.view(), "/spec/nodeName");
            if old != node
                && let Some(set) = index.get_mut(old)
            {
                set.remove(&key);
            }
        }
        index.entry(node).or_default().insert(key.clone());
        drop(index);
        self.evaluate(SimulatedKind::Pod, &key);
    }

    /// Records the IPs a pod on managed `node` already shows (a pod that ran
    /// before the simulator started, or one written with its status by a
    /// snapshot restore or a replay) as taken, so that no other pod is given
    /// them. A pod seen before its node is recorded when the node comes.
    fn mark_pod_ips(&self, pod: &Value, node: &str) {
        if pod
            .get("spec")
            .and_then(|spec| spec.get("hostNetwork"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
        {
            return;
        }
        let mut ips: Vec<String> = at(pod, "/status/podIPs")
            .and_then(Value::as_array)
            .map(|ips| {
                ips.iter()
                    .filter_map(|ip| ip.get("ip").and_then(Value::as_str).map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        if ips.is_empty() {
            let ip = str_at(pod, "/status/podIP");
            if !ip.is_empty() {
                ips.push(ip.to_owned());
            }
        }
        if ips.is_empty() {
            return;
        }
        // One look-up: whether the node is managed, and its CIDRs.
        if let Some(cidrs) = self.network.managed_pod_cidrs(node) {
            lock(&self.network.ips).mark_used(str_at(pod, "/metadata/uid"), &cidrs, &ips);
        }
    }

    /// A Pod is gone: forget it and give its IPs back.
    pub fn pod_deleted(&self, key: &str) {
        if let Some(pod) = self.pods.remove(key) {
            let pod = pod.view();
            let node = str_at(pod, "/spec/nodeName");
            let mut index = lock(&self.pods_by_node);
            if let Some(set) = index.get_mut(node) {
                set.remove(key);
                if set.is_empty() {
                    index.remove(node);
                }
            }
            drop(index);
            lock(&self.network.ips).release(str_at(pod, "/metadata/uid"));
        }
    }

    /// Removes cached objects of `kind` whose keys are not in `present` (after a re-list).
    pub fn retain(&self, kind: SimulatedKind, present: &HashSet<String>) {
        for key in self.tracker(kind).keys() {
            if !present.contains(&key) {
                match kind {
                    SimulatedKind::Node => self.node_deleted(&key),
                    SimulatedKind::Pod => self.pod_deleted(&key),
                }
            }
        }
    }

    /// Whether the object's kubelet runs: its node (or the pod's node) is managed
    /// and not stopped.
    fn acts_on(&self, kind: SimulatedKind, object: &Value) -> bool {
        match kind {
            SimulatedKind::Node => self.network.runs(str_at(object, "/metadata/name")),
            SimulatedKind::Pod => self.network.runs(str_at(object, "/spec/nodeName")),
        }
    }

    /// Picks the stage for the object of `key` and schedules it after the stage's delay;
    /// keeps an earlier decision about the same object version and stages.
    pub fn evaluate(&self, kind: SimulatedKind, key: &str) {
        let tracker = self.tracker(kind);
        let Some(mut cached) = tracker.get(key) else {
            return;
        };
        let cancel = || {
            lock(&tracker.pending).remove(key);
            tracker.queue.forget(&key.to_owned());
        };
        if !self.acts_on(kind, cached.view()) {
            cancel();
            return;
        }
        let set = self.compiled();
        // An object cached before the stages read other fields is viewed afresh.
        let (fields, version) = set.fields(kind);
        if cached.fields_version() != *version {
            let fresh = Arc::new(cached.with_fields(fields, *version));
            tracker.replace(key, &cached, fresh.clone());
            cached = fresh;
        }
        let object = cached.view();
        let resource_version = str_at(object, "/metadata/resourceVersion");
        // The same version under the same stages keeps its decision, and draws
        // nothing: how often an object is looked at again (a watch event, its
        // node changing) must not move the seeded draws of later decisions.
        if lock(&tracker.pending).get(key).is_some_and(|p| {
            p.resource_version == resource_version && p.generation == set.generation
        }) {
            return;
        }
        let snapshot = ObjectSnapshot::new(object);
        // Most objects match no stage (a restored cluster's Running pods):
        // the seeded source is keyed only for those that do (it draws the
        // same either way).
        let matching = matching_stages(set.of(kind), &snapshot);
        if matching.is_empty() {
            cancel();
            return;
        }
        let random = self
            .options
            .clock
            .random()
            .keyed(&format!("stage:{kind:?}/{key}"));
        let mut rng = ClockRng(&random);
        let Some(stage) = choose_stage(&matching, &snapshot, &mut rng) else {
            cancel();
            return;
        };
        let pending = Pending {
            stage: stage.name().to_owned(),
            resource_version: resource_version.to_owned(),
            generation: set.generation,
        };
        {
            let mut all = lock(&tracker.pending);
            if all.get(key) == Some(&pending) {
                return;
            }
            all.insert(key.to_owned(), pending);
        }
        let delay = stage.delay(&snapshot, self.options.clock.now(), &mut rng);
        tracker.queue.add_after(key.to_owned(), delay);
    }

    /// Applies due stages of `kind` until the queue shuts down.
    pub async fn work(self: Arc<Self>, kind: SimulatedKind) {
        let tracker = self.tracker(kind);
        if kind == SimulatedKind::Pod {
            self.wait_for_lists().await;
        }
        while let Some(key) = tracker.queue.get().await {
            self.process(kind, &key).await;
            tracker.queue.done(&key);
        }
    }

    async fn process(&self, kind: SimulatedKind, key: &str) {
        let tracker = self.tracker(kind);
        let pending = lock(&tracker.pending).remove(key);
        let Some(cached) = tracker.get(key) else {
            return;
        };
        if !self.acts_on(kind, cached.view()) {
            return;
        }
        let set = self.compiled();
        let stage = pending
            .filter(|p| {
                p.generation == set.generation
                    && p.resource_version == str_at(cached.view(), "/metadata/resourceVersion")
            })
            .and_then(|p| set.of(kind).iter().find(|s| s.name() == p.stage));
        let Some(stage) = stage else {
            self.evaluate(kind, key);
            return;
        };
        // Rendering reads the whole object.
        let object = cached.full();
        match self.apply(kind, key, &object, stage).await {
            Ok(Some(updated)) if stage.immediate_next_stage() => {
                if newer(&updated, &object) {
                    self.value_applied(kind, &updated);
                }
            }
            Ok(_) => {}
            Err(error) => {
                let retry = match error {
                    KubeletError::Api { .. } => API_RETRY,
                    _ => RENDER_RETRY,
                };
                tracing::warn!(kind = kind.kind(), key, stage = stage.name(), %error, "stage not applied; retrying");
                tracker.queue.add_after(key.to_owned(), retry);
            }
        }
    }

    /// A number for event names: the clock's nanoseconds, made unique by a counter.
    fn unique_suffix(&self) -> u64 {
        let nanos = self
            .options
            .clock
            .now()
            .timestamp_nanos_opt()
            .map_or(0, |n| n.unsigned_abs());
        let count = self
            .events
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        nanos.wrapping_add(count)
    }

    fn render_env(&self, kind: SimulatedKind, object: &Value) -> Arc<dyn TemplateEnv> {
        let node_name = match kind {
            SimulatedKind::Node => str_at(object, "/metadata/name"),
            SimulatedKind::Pod => str_at(object, "/spec/nodeName"),
        };
        Arc::new(RenderEnv {
            now: format_time(self.options.clock.now()),
            start_time: self.start_time.clone(),
            node_name: node_name.to_owned(),
            node_port: self.options.node_port,
            network: self.network.clone(),
        })
    }

    /// Sends `stage`'s next action for `object`; the object as last returned by the server.
    async fn apply(
        &self,
        kind: SimulatedKind,
        key: &str,
        object: &Value,
        stage: &CompiledStage,
    ) -> Result<Option<Value>, KubeletError> {
        let env = self.render_env(kind, object);
        let mut action: NextAction = next_action(stage, object, &self.renderer, &env)?;
        let client = &self.client;
        let path = api::object_path(kind, key, None);
        let context = |what: &str| format!("{what} {} {key} (stage {})", kind.kind(), stage.name());
        if let Some(event) = &action.event {
            let body = api::event_for(
                kind,
                object,
                &event.event_type,
                &event.reason,
                &event.message,
                &env.now(),
                self.unique_suffix(),
            );
            let events = format!(
                "/api/v1/namespaces/{}/events",
                body["metadata"]["namespace"].as_str().unwrap_or("default")
            );
            if let Err(error) = api::create(client, &events, &body).await {
                tracing::warn!(%error, "event not recorded");
            }
        }
        let mut last = None;
        if let Some(ops) = &action.finalizers_patch {
            match api::patch(client, &path, crate::stage::PatchType::Json, ops, None).await {
                Ok(updated) => last = Some(updated),
                Err(e) if api::is_not_found(&e) => return Ok(None),
                Err(e) => return Err(KubeletError::api(context("patch finalizers of"), e)),
            }
        }
        if action.delete {
            let uid = object
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .filter(|u| !u.is_empty());
            return match api::delete_now(client, &path, uid).await {
                Ok(()) => Ok(None),
                Err(e) if api::is_not_found(&e) || api::is_conflict(&e) => Ok(None),
                Err(e) => Err(KubeletError::api(context("delete"), e)),
            };
        }
        // The patched object is read back only when the next stage follows at once.
        let read_back = stage.immediate_next_stage();
        // A pod's status is written for the version it was rendered from: if
        // another client wrote the pod meanwhile (a snapshot restore or a
        // replay writing the pod's recorded status and IPs), the server
        // refuses with 409 and the newer version, which the watch brings, is
        // evaluated afresh instead of being overwritten.
        let status_for_version = match action.status_patch.as_mut() {
            Some(patch)
                if kind == SimulatedKind::Pod
                    && matches!(
                        patch.patch_type,
                        PatchType::Merge | PatchType::StrategicMerge
                    )
                    && patch.data.is_object() =>
            {
                patch.data["metadata"]["resourceVersion"] =
                    Value::from(str_at(object, "/metadata/resourceVersion"));
                true
            }
            _ => false,
        };
        for (index, patch) in action
            .status_patch
            .iter()
            .chain(&action.patches)
            .enumerate()
        {
            let data = &patch.data;
            let target = api::object_path(kind, key, patch.subresource.as_deref());
            let sent = if read_back || patch.impersonate.is_some() {
                api::patch(
                    client,
                    &target,
                    patch.patch_type,
                    data,
                    patch.impersonate.as_deref(),
                )
                .await
                .map(Some)
            } else {
                let body = serde_json::to_vec(data).unwrap_or_default();
                api::patch_discarding(client, &target, patch.patch_type, body)
                    .await
                    .map(|()| None)
            };
            match sent {
                Ok(Some(updated)) => last = Some(updated),
                Ok(None) => {}
                Err(e) if api::is_not_found(&e) => return Ok(None),
                Err(e) if index == 0 && status_for_version && api::is_conflict(&e) => {
                    tracing::debug!(
                        key,
                        stage = stage.name(),
                        "pod changed meanwhile; its newer version decides"
                    );
                    return Ok(None);
                }
                Err(e) => return Err(KubeletError::api(context("patch"), e)),
            }
        }
        Ok(last)
    }
}

/// Whether `updated` is a later version than `old` (resource versions compared as numbers
/// when both are; otherwise assumed newer when different).
fn newer(updated: &Value, old: &Value) -> bool {
    let rv = |o: &Value| str_at(o, "/metadata/resourceVersion").to_owned();
    let (a, b) = (rv(updated), rv(old));
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(a), Ok(b)) => a > b,
        _ => a != b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_name_nodes_and_namespaced_pods() {
        let node = json!({"metadata": {"name": "n"}});
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"}});
        assert_eq!(object_key(SimulatedKind::Node, &node), "n");
        assert_eq!(object_key(SimulatedKind::Pod, &pod), "ns/p");
    }

    #[test]
    fn field_lookups_agree_with_json_pointers() {
        let pod = json!({"metadata": {"name": "p", "a/b": 1, "m~n": 2},
            "spec": {"nodeName": "n", "list": [{"x": "y"}, 3]}, "status": "odd"});
        for pointer in [
            "",
            "/",
            "/metadata/name",
            "/spec/nodeName",
            "/spec/list/0/x",
            "/spec/list/1",
            "/spec/list/01",
            "/spec/list/2",
            "/status/phase",
            "/metadata/a~1b",
            "/metadata/m~0n",
            "/missing/field",
            "spec",
        ] {
            assert_eq!(at(&pod, pointer), pod.pointer(pointer), "{pointer:?}");
        }
    }

    #[test]
    fn newer_compares_numeric_resource_versions() {
        let v = |rv: &str| json!({"metadata": {"resourceVersion": rv}});
        assert!(newer(&v("10"), &v("9")));
        assert!(!newer(&v("9"), &v("10")));
        assert!(!newer(&v("9"), &v("9")));
        assert!(newer(&v("b"), &v("a")));
    }
}
