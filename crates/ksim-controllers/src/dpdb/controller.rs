//! The DPDB controller's loop: watches of this cluster's DPDBs and
//! PodDisruptionBudgets, and one PodDisruptionBudget watch per other
//! cluster a federation names (shared by every DPDB naming it, with a
//! liveness probe), feeding one work queue. An event enqueues only the DPDBs
//! it concerns (an index from member to DPDBs); a sync gathers the inputs of
//! [`super::plan::plan`] from the caches, writes the child and the status.
//!
//! Staleness: a remote member is as fresh as its cluster's watch, which is
//! confirmed by events and by a probe every [`PROBE_INTERVAL`]; a watch or
//! probe failure makes every member of that cluster Unreachable at once
//! (the budgets close), and a reconnection (re-reading a ksim sibling's port)
//! brings them back after a full re-list.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::workloop::{Action, Requests, requests, run_work_queue};
use futures::channel::mpsc;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use ksim_runtime::Clock;
use ksim_runtime::clock::Instant;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};

use super::clusters::ClusterSource;
use super::plan::owns;
use super::plan::{ChildAction, MemberRead, PlanInput, STALENESS_BOUND, plan};
use super::types::{Coordination, DistributedPodDisruptionBudget, KIND};
use crate::Error;
use crate::common::{controller_of, parse_selector, selector_matches, selector_query, watch_all};

/// How often a remote cluster's liveness is confirmed.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(1);
const RETRY: Duration = Duration::from_millis(500);
/// The longest wait between reconnections to a cluster that is away.
const MAX_RETRY: Duration = Duration::from_secs(4);

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct DpdbConfig {
    /// The clusters members may name.
    pub clusters: ClusterSource,
    /// Delay applied to everything seen of other clusters (to study the
    /// propagation window); zero by default.
    pub propagation_delay: Duration,
    /// [`STALENESS_BOUND`] by default.
    pub staleness: SignedDuration,
    /// The clock stamped into statuses.
    pub clock: Clock,
}

impl Default for DpdbConfig {
    fn default() -> Self {
        Self {
            clusters: ClusterSource::None,
            propagation_delay: Duration::ZERO,
            staleness: STALENESS_BOUND,
            clock: Clock::real(),
        }
    }
}

type DpdbKey = (String, String);
type MemberKey = (String, String, String);

#[derive(Default)]
struct Index {
    by_member: HashMap<MemberKey, HashSet<DpdbKey>>,
    by_cluster: HashMap<String, HashSet<DpdbKey>>,
    members_of: HashMap<DpdbKey, Vec<MemberKey>>,
    /// The DPDBs of each namespace.
    by_namespace: HashMap<String, HashSet<String>>,
    /// The plain PodDisruptionBudgets (not DPDB children) of each namespace.
    plain: HashMap<String, HashSet<String>>,
}

impl Index {
    fn remove(&mut self, key: &DpdbKey) {
        if let Some(names) = self.by_namespace.get_mut(&key.0) {
            names.remove(&key.1);
        }
        for member in self.members_of.remove(key).unwrap_or_default() {
            if let Some(set) = self.by_member.get_mut(&member) {
                set.remove(key);
                if set.is_empty() {
                    self.by_member.remove(&member);
                }
            }
            if let Some(set) = self.by_cluster.get_mut(&member.0) {
                set.remove(key);
            }
        }
    }

    fn insert(&mut self, key: DpdbKey, members: Vec<MemberKey>) {
        self.remove(&key);
        for member in &members {
            self.by_member
                .entry(member.clone())
                .or_default()
                .insert(key.clone());
            self.by_cluster
                .entry(member.0.clone())
                .or_default()
                .insert(key.clone());
        }
        self.by_namespace
            .entry(key.0.clone())
            .or_default()
            .insert(key.1.clone());
        self.members_of.insert(key, members);
    }
}

#[derive(Clone, Debug)]
enum RemoteState {
    Connecting,
    Reachable,
    Unreachable(String),
}

/// What this controller knows of one other cluster.
struct Remote {
    /// The client of the current connection (fresh reads of Exclusive claims).
    client: RwLock<Option<Client>>,
    budgets: RwLock<HashMap<(String, String), PodDisruptionBudget>>,
    state: RwLock<RemoteState>,
    confirmed_at: RwLock<Timestamp>,
}

/// An event of a remote cluster, applied after the propagation delay.
enum RemoteEvent {
    Listed(HashMap<(String, String), PodDisruptionBudget>),
    Applied(PodDisruptionBudget),
    Deleted(PodDisruptionBudget),
    Failed(String),
    Confirmed,
}

struct Context {
    client: Client,
    config: DpdbConfig,
    budgets: Store<PodDisruptionBudget>,
    index: Mutex<Index>,
    remotes: Mutex<HashMap<String, Arc<Remote>>>,
    /// Members seen with a status behind their generation: that generation
    /// and when it was first seen.
    behind: Mutex<HashMap<MemberKey, (i64, Timestamp)>>,
    /// Exclusive budgets backing off from a claim, until when.
    backoff: Mutex<HashMap<DpdbKey, Instant>>,
    /// The Exclusive budgets whose claim this controller holds (its own
    /// writes, which the child cache may not show yet).
    claims: Mutex<HashSet<DpdbKey>>,
    /// The remote clusters' tasks, stopped with the controller.
    remote_tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    queue: Requests<DistributedPodDisruptionBudget>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Context {
    fn now(&self) -> Timestamp {
        let micros = self.config.clock.now().timestamp_micros();
        Timestamp::from_microsecond(micros).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn enqueue(&self, key: &DpdbKey) {
        let _ = self
            .queue
            .unbounded_send(ObjectRef::new(&key.1).within(&key.0));
    }

    fn enqueue_member(&self, cluster: &str, namespace: &str, name: &str) {
        let mut keys: Vec<DpdbKey> = lock(&self.index)
            .by_member
            .get(&(cluster.to_string(), namespace.to_string(), name.to_string()))
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        keys.sort();
        for key in &keys {
            self.enqueue(key);
        }
    }

    fn enqueue_cluster(&self, cluster: &str) {
        let mut keys: Vec<DpdbKey> = lock(&self.index)
            .by_cluster
            .get(cluster)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        keys.sort();
        for key in &keys {
            self.enqueue(key);
        }
    }

    /// The member's cluster key: "" for this cluster, else the name given.
    fn cluster_key(&self, cluster: &str) -> String {
        if self.config.clusters.is_local(cluster) {
            String::new()
        } else {
            cluster.to_string()
        }
    }
}

/// Runs the controller on `client` (this cluster) until the watches end.
pub async fn run(client: Client, config: DpdbConfig) {
    let (dpdb_store, dpdb_writer) = reflector::store::<DistributedPodDisruptionBudget>();
    let (pdb_store, pdb_writer) = reflector::store::<PodDisruptionBudget>();
    let (queue, requests) = requests(&config.clock);
    let context = Arc::new(Context {
        client: client.clone(),
        config,
        budgets: pdb_store.clone(),
        index: Mutex::new(Index::default()),
        remotes: Mutex::new(HashMap::new()),
        behind: Mutex::new(HashMap::new()),
        backoff: Mutex::new(HashMap::new()),
        remote_tasks: Mutex::new(Vec::new()),
        claims: Mutex::new(HashSet::new()),
        queue,
    });
    let _stop_remotes = StopRemotes(Arc::clone(&context));
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(follow_budgets(
        reflector::reflector(
            pdb_writer,
            watch_all::<PodDisruptionBudget>(client.clone(), &context.config.clock),
        ),
        Arc::clone(&context),
    ));
    tasks.spawn(follow_dpdbs(
        reflector::reflector(
            dpdb_writer,
            watch_all::<DistributedPodDisruptionBudget>(client.clone(), &context.config.clock),
        ),
        Arc::clone(&context),
    ));
    let synced =
        futures::future::try_join(dpdb_store.wait_until_ready(), pdb_store.wait_until_ready())
            .await;
    if synced.is_err() {
        tracing::error!("the DPDB controller's caches never synced");
        return;
    }
    tracing::info!("DPDB controller synced");
    run_work_queue(
        "dpdb",
        |dpdb, ctx: Arc<Context>| Box::pin(reconcile(dpdb, ctx)),
        |_, _, _| Action::requeue(RETRY),
        Arc::clone(&context),
        dpdb_store,
        requests,
    )
    .await;
    tasks.abort_all();
}

/// Stops the remote clusters' tasks when the controller stops (or its
/// future is dropped).
struct StopRemotes(Arc<Context>);

impl Drop for StopRemotes {
    fn drop(&mut self) {
        for task in lock(&self.0.remote_tasks).drain(..) {
            task.abort();
        }
    }
}

async fn follow_dpdbs(
    events: impl Stream<Item = Result<Event<DistributedPodDisruptionBudget>, watcher::Error>>,
    context: Arc<Context>,
) {
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        let objects: Vec<DistributedPodDisruptionBudget> = match event {
            Ok(Event::Apply(d) | Event::InitApply(d)) => vec![d],
            Ok(Event::Delete(d)) => {
                let key = (d.namespace().unwrap_or_default(), d.name_any());
                lock(&context.index).remove(&key);
                lock(&context.claims).remove(&key);
                continue;
            }
            Ok(Event::Init | Event::InitDone) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "DPDB watch failed; retrying");
                continue;
            }
        };
        for dpdb in objects {
            let namespace = dpdb.namespace().unwrap_or_default();
            let key = (namespace.clone(), dpdb.name_any());
            let members: Vec<MemberKey> = dpdb
                .spec
                .federation
                .iter()
                .map(|m| {
                    let m = m.resolved(&namespace);
                    (context.cluster_key(&m.cluster), m.namespace, m.name)
                })
                .collect();
            for (cluster, _, _) in &members {
                if !cluster.is_empty() && context.config.clusters.unknown(cluster).is_none() {
                    remote(&context, cluster);
                }
            }
            lock(&context.index).insert(key.clone(), members);
            context.enqueue(&key);
        }
    }
}

fn owned_by_dpdb(pdb: &PodDisruptionBudget) -> bool {
    controller_of(&pdb.metadata).is_some_and(|r| r.kind == KIND)
}

async fn follow_budgets(
    events: impl Stream<Item = Result<Event<PodDisruptionBudget>, watcher::Error>>,
    context: Arc<Context>,
) {
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        let pdb = match &event {
            Ok(Event::Apply(p) | Event::InitApply(p) | Event::Delete(p)) => p.clone(),
            Ok(Event::Init | Event::InitDone) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "PodDisruptionBudget watch failed; retrying");
                continue;
            }
        };
        let deleted = matches!(event, Ok(Event::Delete(_)));
        let namespace = pdb.namespace().unwrap_or_default();
        let name = pdb.name_any();
        context.enqueue(&(namespace.clone(), name.clone()));
        context.enqueue_member("", &namespace, &name);
        let plain = !owned_by_dpdb(&pdb);
        let affected: Vec<String> = {
            let mut index = lock(&context.index);
            let names = index.plain.entry(namespace.clone()).or_default();
            let changed = if plain && !deleted {
                names.insert(name.clone())
            } else {
                names.remove(&name)
            };
            // A plain budget may overlap the DPDBs of its namespace.
            if plain || changed {
                index
                    .by_namespace
                    .get(&namespace)
                    .map(|n| n.iter().cloned().collect())
                    .unwrap_or_default()
            } else {
                Vec::new()
            }
        };
        for dpdb in affected {
            context.enqueue(&(namespace.clone(), dpdb));
        }
    }
}

/// The remote cluster `name`, its watch started on first use.
fn remote(context: &Arc<Context>, name: &str) -> Arc<Remote> {
    let mut remotes = lock(&context.remotes);
    if let Some(remote) = remotes.get(name) {
        return Arc::clone(remote);
    }
    let remote = Arc::new(Remote {
        client: RwLock::new(None),
        budgets: RwLock::new(HashMap::new()),
        state: RwLock::new(RemoteState::Connecting),
        confirmed_at: RwLock::new(Timestamp::UNIX_EPOCH),
    });
    remotes.insert(name.to_string(), Arc::clone(&remote));
    let (sender, receiver) = mpsc::unbounded::<(Instant, RemoteEvent)>();
    let applier = tokio::spawn(apply_remote_events(
        Arc::clone(context),
        name.to_string(),
        Arc::clone(&remote),
        receiver,
    ));
    let watcher = tokio::spawn(watch_remote(
        Arc::clone(context),
        name.to_string(),
        Arc::clone(&remote),
        sender,
    ));
    lock(&context.remote_tasks).extend([applier.abort_handle(), watcher.abort_handle()]);
    remote
}

/// Connects to the cluster, lists and watches its budgets and probes it,
/// forever; every outcome goes to `events`.
async fn watch_remote(
    context: Arc<Context>,
    name: String,
    remote: Arc<Remote>,
    events: mpsc::UnboundedSender<(Instant, RemoteEvent)>,
) {
    // Reconnections back off from RETRY to MAX_RETRY while the cluster is away.
    let mut retry = RETRY;
    let clock = context.config.clock.clone();
    let send = |event: RemoteEvent| events.unbounded_send((clock.instant(), event)).is_ok();
    loop {
        let client = match context.config.clusters.connect(&name).await {
            Ok(client) => {
                *remote.client.write().unwrap_or_else(|e| e.into_inner()) = Some(client.clone());
                client
            }
            Err(why) => {
                *remote.client.write().unwrap_or_else(|e| e.into_inner()) = None;
                if !send(RemoteEvent::Failed(why)) {
                    return;
                }
                clock.sleep(retry).await;
                retry = (retry * 2).min(MAX_RETRY);
                continue;
            }
        };
        let api: Api<ksim_runtime::WithoutManagedFields<PodDisruptionBudget>> =
            Api::all(client.clone());
        let mut watch = std::pin::pin!(watcher::watcher(api, watcher::Config::default()));
        let mut listing: HashMap<(String, String), PodDisruptionBudget> = HashMap::new();
        let mut probe = clock.interval(PROBE_INTERVAL);
        let failure = loop {
            tokio::select! {
                biased;
                event = watch.next() => {
                    let event = match event {
                        Some(Ok(event)) => ksim_runtime::lean::into_inner_event(event),
                        Some(Err(e)) => break e.to_string(),
                        None => break "the watch ended".to_string(),
                    };
                    let sent = match event {
                        Event::Init => { listing.clear(); true }
                        Event::InitApply(p) => { listing.insert((p.namespace().unwrap_or_default(), p.name_any()), p); true }
                        Event::InitDone => {
                            retry = RETRY;
                            send(RemoteEvent::Listed(std::mem::take(&mut listing)))
                        }
                        Event::Apply(p) => send(RemoteEvent::Applied(p)),
                        Event::Delete(p) => send(RemoteEvent::Deleted(p)),
                    };
                    if !sent {
                        return;
                    }
                }
                _ = probe.tick() => {
                    let probed = tokio::time::timeout(Duration::from_secs(2), client.apiserver_version()).await; // wall-clock: HTTP timeout to a remote server
                    match probed {
                        Ok(Ok(_)) => if !send(RemoteEvent::Confirmed) { return; },
                        Ok(Err(e)) => break e.to_string(),
                        Err(_) => break "no answer within 2s".to_string(),
                    }
                }
            }
        };
        tracing::debug!(cluster = %name, %failure, "remote cluster unreachable");
        if !send(RemoteEvent::Failed(format!(
            "cluster {name:?} is unreachable: {failure}"
        ))) {
            return;
        }
        clock.sleep(retry).await;
        retry = (retry * 2).min(MAX_RETRY);
    }
}

/// Applies a remote cluster's events to its cache, each after the
/// propagation delay, and enqueues the DPDBs they concern.
async fn apply_remote_events(
    context: Arc<Context>,
    name: String,
    remote: Arc<Remote>,
    mut events: mpsc::UnboundedReceiver<(Instant, RemoteEvent)>,
) {
    let delay = context.config.propagation_delay;
    while let Some((received, event)) = events.next().await {
        if !delay.is_zero() {
            // The simulated propagation delay is cluster time.
            context.config.clock.sleep_until(received + delay).await;
        }
        let now = context.now();
        let write_state = |state: RemoteState| {
            *remote.state.write().unwrap_or_else(|e| e.into_inner()) = state;
        };
        let previous = remote
            .state
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match event {
            RemoteEvent::Listed(budgets) => {
                *remote.budgets.write().unwrap_or_else(|e| e.into_inner()) = budgets;
                *remote
                    .confirmed_at
                    .write()
                    .unwrap_or_else(|e| e.into_inner()) = now;
                write_state(RemoteState::Reachable);
                context.enqueue_cluster(&name);
            }
            RemoteEvent::Applied(pdb) | RemoteEvent::Deleted(pdb)
                if !matches!(previous, RemoteState::Reachable) =>
            {
                // Not listed yet: the coming list carries it.
                let _ = pdb;
            }
            RemoteEvent::Applied(pdb) => {
                let key = (pdb.namespace().unwrap_or_default(), pdb.name_any());
                remote
                    .budgets
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key.clone(), pdb);
                *remote
                    .confirmed_at
                    .write()
                    .unwrap_or_else(|e| e.into_inner()) = now;
                context.enqueue_member(&name, &key.0, &key.1);
            }
            RemoteEvent::Deleted(pdb) => {
                let key = (pdb.namespace().unwrap_or_default(), pdb.name_any());
                remote
                    .budgets
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&key);
                *remote
                    .confirmed_at
                    .write()
                    .unwrap_or_else(|e| e.into_inner()) = now;
                context.enqueue_member(&name, &key.0, &key.1);
            }
            RemoteEvent::Confirmed => {
                if matches!(previous, RemoteState::Reachable) {
                    *remote
                        .confirmed_at
                        .write()
                        .unwrap_or_else(|e| e.into_inner()) = now;
                }
            }
            RemoteEvent::Failed(why) => {
                let changed = !matches!(&previous, RemoteState::Unreachable(w) if *w == why);
                write_state(RemoteState::Unreachable(why));
                if changed {
                    context.enqueue_cluster(&name);
                }
            }
        }
    }
}

/// Since when `pdb`'s status has been behind its generation (None: it is not).
fn behind_since(context: &Context, cluster: &str, pdb: &PodDisruptionBudget) -> Option<Timestamp> {
    let key = (
        cluster.to_string(),
        pdb.namespace().unwrap_or_default(),
        pdb.name_any(),
    );
    let generation = pdb.metadata.generation.unwrap_or(0);
    let observed = pdb.status.as_ref().and_then(|s| s.observed_generation);
    let mut behind = lock(&context.behind);
    if observed.is_some_and(|o| o >= generation) {
        behind.remove(&key);
        return None;
    }
    let entry = behind.entry(key).or_insert((generation, context.now()));
    if entry.0 != generation {
        *entry = (generation, context.now());
    }
    Some(entry.1)
}

/// The annotation an Exclusive budget's claim is written in, on its own
/// child: `<DPDB uid>@<time>`.
pub const CLAIM_ANNOTATION: &str = "policy.ksim.io/exclusive-claim";
/// How long a claim of another budget counts as competing.
const CLAIM_TTL: SignedDuration = SignedDuration::from_secs(10);

/// The holder and time of a claim on `pdb`.
fn claim_of(pdb: &PodDisruptionBudget) -> Option<(&str, Timestamp)> {
    let value = pdb.metadata.annotations.as_ref()?.get(CLAIM_ANNOTATION)?;
    let (holder, at) = value.split_once('@')?;
    Some((holder, at.parse().ok()?))
}

/// Writes (or with `None` removes) the claim on the child `name`.
async fn set_claim(
    budgets: &Api<PodDisruptionBudget>,
    name: &str,
    claim: Option<String>,
) -> Result<(), Error> {
    let patch = serde_json::json!({"metadata": {"annotations": {CLAIM_ANNOTATION: claim}}});
    budgets
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Reads every member fresh (from its cluster, not a cache): a member that
/// cannot be read, holds a recent claim of its own, allows disruptions, or
/// has fewer healthy pods than the plan counted (`counted`, per member:
/// the cache the allowance came from is behind) means backing off.
async fn fresh_check(
    context: &Arc<Context>,
    dpdb: &DistributedPodDisruptionBudget,
    uid: &str,
    counted: &[Option<i32>],
) -> Result<(), String> {
    let namespace = dpdb.namespace().unwrap_or_default();
    let now = context.now();
    for (index, member) in dpdb.spec.federation.iter().enumerate() {
        let member = member.resolved(&namespace);
        let cluster = context.cluster_key(&member.cluster);
        let client = if cluster.is_empty() {
            Some(context.client.clone())
        } else {
            let remote = remote(context, &cluster);
            remote
                .client
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        };
        let Some(client) = client else {
            return Err(format!("{member} cannot be read"));
        };
        let api: Api<PodDisruptionBudget> = Api::namespaced(client, &member.namespace);
        // The member may live on another cluster's server.
        let pdb = tokio::time::timeout(Duration::from_secs(2), api.get(&member.name)) // wall-clock: HTTP timeout to a remote server
            .await
            .map_err(|_| format!("{member}: no answer"))?
            .map_err(|e| format!("{member}: {e}"))?;
        if let Some((holder, at)) = claim_of(&pdb)
            && holder != uid
            && now.duration_since(at) < CLAIM_TTL
        {
            return Err(format!("{member} holds a competing claim"));
        }
        if pdb
            .status
            .as_ref()
            .is_some_and(|s| s.disruptions_allowed > 0)
        {
            return Err(format!("{member} allows disruptions"));
        }
        let healthy = pdb.status.as_ref().map_or(0, |s| s.current_healthy);
        if let Some(counted) = counted.get(index).copied().flatten()
            && healthy < counted
        {
            return Err(format!(
                "{member} has {healthy} healthy pods, {counted} were counted"
            ));
        }
    }
    Ok(())
}

/// What is known of one member now.
fn read_member(context: &Arc<Context>, cluster: &str, namespace: &str, name: &str) -> MemberRead {
    if let Some(why) = (!context.config.clusters.is_local(cluster))
        .then(|| context.config.clusters.unknown(cluster))
        .flatten()
    {
        return MemberRead::UnknownCluster(why);
    }
    let cluster = context.cluster_key(cluster);
    if cluster.is_empty() {
        let found = context.budgets.get(&ObjectRef::new(name).within(namespace));
        return match found {
            Some(pdb) => MemberRead::Found {
                behind_since: behind_since(context, &cluster, &pdb),
                pdb: Box::new((*pdb).clone()),
                confirmed_at: context.now(),
            },
            None => MemberRead::NotFound,
        };
    }
    let remote = remote(context, &cluster);
    let state = remote
        .state
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    match state {
        RemoteState::Connecting => {
            MemberRead::Unreachable(format!("connecting to cluster {cluster:?}"))
        }
        RemoteState::Unreachable(why) => MemberRead::Unreachable(why),
        RemoteState::Reachable => {
            let confirmed_at = *remote
                .confirmed_at
                .read()
                .unwrap_or_else(|e| e.into_inner());
            match remote
                .budgets
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .get(&(namespace.to_string(), name.to_string()))
            {
                Some(pdb) => MemberRead::Found {
                    behind_since: behind_since(context, &cluster, pdb),
                    pdb: Box::new(pdb.clone()),
                    confirmed_at,
                },
                None => MemberRead::NotFound,
            }
        }
    }
}

/// The plain PodDisruptionBudgets of the namespace that select one of the
/// budget's pods (read only when such budgets exist).
async fn overlapping(
    context: &Context,
    dpdb: &DistributedPodDisruptionBudget,
) -> Result<Vec<String>, Error> {
    let namespace = dpdb.namespace().unwrap_or_default();
    let name = dpdb.name_any();
    let names: Vec<String> = lock(&context.index)
        .plain
        .get(&namespace)
        .map(|n| n.iter().filter(|n| **n != name).cloned().collect())
        .unwrap_or_default();
    let plain: Vec<Arc<PodDisruptionBudget>> = names
        .iter()
        .filter_map(|n| context.budgets.get(&ObjectRef::new(n).within(&namespace)))
        .collect();
    let Some(selector) = dpdb.spec.selector.as_ref().filter(|_| !plain.is_empty()) else {
        return Ok(Vec::new());
    };
    if parse_selector(selector).is_err() {
        return Ok(Vec::new());
    }
    let pods: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    let pods = pods
        .list(&ListParams::default().labels(&selector_query(selector)))
        .await?;
    let mut names = Vec::new();
    for pdb in plain {
        let Some(theirs) = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
            continue;
        };
        let Ok(theirs) = parse_selector(theirs) else {
            continue;
        };
        if pods
            .items
            .iter()
            .any(|pod| selector_matches(&theirs, pod.metadata.labels.as_ref()))
        {
            names.push(pdb.name_any());
        }
    }
    names.sort();
    Ok(names)
}

async fn reconcile(
    dpdb: Arc<DistributedPodDisruptionBudget>,
    context: Arc<Context>,
) -> Result<Action, Error> {
    let namespace = dpdb.namespace().unwrap_or_default();
    let name = dpdb.name_any();
    let child = context
        .budgets
        .get(&ObjectRef::new(&name).within(&namespace));
    let members: Vec<MemberRead> = dpdb
        .spec
        .federation
        .iter()
        .map(|m| {
            let m = m.resolved(&namespace);
            read_member(&context, &m.cluster, &m.namespace, &m.name)
        })
        .collect();
    let overlapping = overlapping(&context, &dpdb).await?;
    let exclusive = dpdb.spec.coordination == Some(Coordination::Exclusive);
    // The healthy pods counted of each member, checked fresh before a claim.
    let counted: Vec<Option<i32>> = members
        .iter()
        .map(|read| match read {
            MemberRead::Found { pdb, .. } => pdb.status.as_ref().map(|s| s.current_healthy),
            _ => None,
        })
        .collect();
    let uid = dpdb.metadata.uid.clone().unwrap_or_default();
    let key = (namespace.clone(), name.clone());
    let holding = lock(&context.claims).contains(&key)
        || child
            .as_deref()
            .and_then(claim_of)
            .is_some_and(|(holder, _)| holder == uid);
    let steps = plan(&PlanInput {
        dpdb: &dpdb,
        child: child.as_deref(),
        members,
        overlapping,
        now: context.now(),
        staleness: context.config.staleness,
        hold_closed: exclusive && !holding,
    });
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(context.client.clone(), &namespace);
    match &steps.child {
        ChildAction::Keep => {}
        ChildAction::Create(child) => {
            tracing::debug!(%namespace, %name, min = ?steps.child_min_available, "creating the child");
            match budgets.create(&PostParams::default(), child).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => return Ok(Action::requeue(RETRY)),
                Err(e) => return Err(e.into()),
            }
        }
        ChildAction::Update(child) => {
            tracing::debug!(%namespace, %name, min = ?steps.child_min_available, "updating the child");
            match budgets.replace(&name, &PostParams::default(), child).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => return Ok(Action::requeue(RETRY)),
                Err(e) => return Err(e.into()),
            }
        }
    }
    if dpdb.status.as_ref() != Some(&steps.status) {
        let api: Api<DistributedPodDisruptionBudget> =
            Api::namespaced(context.client.clone(), &namespace);
        let patch = serde_json::json!({"status": steps.status});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    if exclusive && child.as_deref().is_some_and(|c| owns(&dpdb, c)) {
        if holding && steps.open_allowance == 0 {
            set_claim(&budgets, &name, None).await?;
            lock(&context.claims).remove(&key);
        } else if !holding && steps.open_allowance > 0 {
            let until = lock(&context.backoff).get(&key).copied();
            let instant = context.config.clock.instant();
            if let Some(until) = until.filter(|u| *u > instant) {
                return Ok(Action::requeue(until - instant));
            }
            let now = context.now();
            set_claim(&budgets, &name, Some(format!("{uid}@{now}"))).await?;
            match fresh_check(&context, &dpdb, &uid, &counted).await {
                Ok(()) => {
                    tracing::debug!(%namespace, %name, "exclusive claim held");
                    lock(&context.backoff).remove(&key);
                    lock(&context.claims).insert(key);
                    return Ok(Action::requeue(Duration::from_millis(1)));
                }
                Err(why) => {
                    tracing::debug!(%namespace, %name, %why, "exclusive claim: backing off");
                    set_claim(&budgets, &name, None).await?;
                    let jitter = context
                        .config
                        .clock
                        .random()
                        .keyed(&format!("dpdb:{namespace}/{name}"))
                        .below(500) as u64;
                    let wait = Duration::from_millis(100 + jitter);
                    let until = context.config.clock.instant() + wait;
                    lock(&context.backoff).insert(key, until);
                    return Ok(Action::requeue(wait));
                }
            }
        }
    }
    Ok(match steps.recheck_after {
        Some(after) => Action::requeue(Duration::from_millis(
            u64::try_from(after.as_millis()).unwrap_or(0).max(1),
        )),
        None => Action::await_change(),
    })
}
