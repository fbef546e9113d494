//! The DaemonSet controller's sync: claim the set's ControllerRevisions
//! and make sure one records the current template (`constructHistory`),
//! claim the set's pods from the pod cache (adopting matching orphans,
//! releasing owned pods that stopped matching), group them by target node,
//! create the missing ones, delete failed, surplus, misplaced and orphaned
//! (node gone) ones, replace outdated pods within maxUnavailable, delete
//! old revisions beyond `revisionHistoryLimit`, and write the status
//! (`sync_all`); after pod and node events, plan only the nodes they
//! touched and adjust the kept counts (`sync_nodes`). Pods and nodes are
//! read from the caches of [`super::informers`]; creations and deletions
//! wait for the cache to observe the previous ones (expectations), as
//! upstream.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::workloop::{Action, requests, run_work_queue};
use futures::future::join_all;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef};
use kube::{Client, Resource, ResourceExt};

use super::history::{next_revision, revisions_to_clean, split_current};
use super::informers::{
    Caches, Dirty, DirtyNodes, NodeFollower, PodFollower, follow_nodes, follow_pods,
    follow_revisions, follow_sets,
};
use super::placement::{Placement, daemon_pod_spec, target_node};
use super::tally::{Tally, Totals, plan_node};
use crate::Error;
use crate::common::{
    controller_reference, is_pod_available, key_of, parse_selector, scaled_value, selector_matches,
    selector_query, update_status, watch_all,
};
use crate::common::{create_pod, delete_pod};
use crate::controller_ref::{ControllerRefManager, Owner, OwnerMapper, ReleaseHints};
use crate::deployment::compute_hash;
use crate::events::Events;
use crate::informer::SharedInformers;
use crate::replicaset::{Expectations, PodKey};
use crate::statefulset::{REVISION_LABEL, revision_data};
use ksim_runtime::clock::Clock;

/// The label carrying the set's generation when the pod was made.
pub const TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";

/// At most this many pods are created or deleted in one sync (upstream's
/// `BurstReplicas` for the DaemonSet controller).
pub const BURST_REPLICAS: usize = 250;

/// How long to wait before retrying a failed sync.
const RETRY: Duration = Duration::from_millis(500);

struct Context {
    client: Client,
    events: Events,
    caches: Arc<Caches>,
    /// Whether the pod and node caches have listed once.
    pods_synced: tokio::sync::watch::Receiver<bool>,
    nodes_synced: tokio::sync::watch::Receiver<bool>,
    expectations: Arc<Expectations>,
    /// Pods the pod watch saw stop matching: the cache finds them by
    /// controller uid, so these records are only dropped.
    pod_hints: ReleaseHints,
    /// Owned revisions that stopped matching their set's selector.
    revision_hints: ReleaseHints,
    /// The nodes each set's next sync must plan.
    dirty: Arc<Dirty>,
    /// What each set's last full sync kept.
    states: Arc<Mutex<SetStates>>,
    clock: Clock,
}

fn selector_of(
    set: &DaemonSet,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector> {
    set.spec.as_ref().map(|s| &s.selector)
}

/// Runs the DaemonSet controller until the watch streams end.
pub async fn run(client: Client, informers: SharedInformers) {
    let (set_store, set_writer) = reflector::store::<DaemonSet>();
    let caches = Arc::new(Caches::default());
    let expectations = Arc::new(Expectations::default());
    let pod_hints = ReleaseHints::default();
    let revision_hints = ReleaseHints::default();
    let dirty = Arc::new(Dirty::default());
    let states: Arc<Mutex<SetStates>> = Arc::default();
    let forget_state = {
        let states = Arc::clone(&states);
        Box::new(move |namespace: &str, name: &str| {
            states
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&(namespace.to_string(), name.to_string()));
        })
    };
    let (queue, requests) = requests::<DaemonSet>(informers.clock());
    let (pods_synced_tx, pods_synced) = tokio::sync::watch::channel(false);
    let (nodes_synced_tx, nodes_synced) = tokio::sync::watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(follow_sets(
        reflector::reflector(
            set_writer,
            watch_all::<DaemonSet>(client.clone(), informers.clock()),
        ),
        Arc::clone(&expectations),
        Arc::clone(&dirty),
        forget_state,
        queue.clone(),
    ));
    tasks.spawn(follow_pods(
        informers.pods(),
        PodFollower {
            caches: Arc::clone(&caches),
            mapper: OwnerMapper::new(set_store.clone(), selector_of, pod_hints.clone()),
            sets: set_store.clone(),
            expectations: Arc::clone(&expectations),
            dirty: Arc::clone(&dirty),
            queue: queue.clone(),
            synced: pods_synced_tx,
        },
    ));
    tasks.spawn(follow_nodes(
        watch_all::<Node>(client.clone(), informers.clock()),
        NodeFollower {
            caches: Arc::clone(&caches),
            sets: set_store.clone(),
            dirty: Arc::clone(&dirty),
            queue: queue.clone(),
            synced: nodes_synced_tx,
        },
    ));
    tasks.spawn(follow_revisions(
        watch_all::<ControllerRevision>(client.clone(), informers.clock()),
        OwnerMapper::new(set_store.clone(), selector_of, revision_hints.clone()),
        Arc::clone(&dirty),
        queue,
    ));
    if set_store.wait_until_ready().await.is_err() {
        tracing::warn!("daemonset controller cache never synced");
        return;
    }
    let context = Arc::new(Context {
        events: Events::new(client.clone(), "daemonset-controller", informers.clock()),
        clock: informers.clock().clone(),
        client,
        caches,
        pods_synced,
        nodes_synced,
        expectations,
        pod_hints,
        revision_hints,
        dirty,
        states,
    });
    run_work_queue(
        "daemonset",
        |set, context| Box::pin(reconcile(set, context)),
        error_policy,
        context,
        set_store,
        requests,
    )
    .await;
    tasks.abort_all();
}

fn error_policy(_set: Arc<DaemonSet>, error: &Error, _context: Arc<Context>) -> Action {
    tracing::debug!(%error, "daemonset sync will be retried");
    Action::requeue(RETRY)
}

/// Waits until the pod and node caches have listed once (as upstream, no
/// sync before); false when the controller is stopping.
async fn caches_synced(context: &Context) -> bool {
    let mut pods = context.pods_synced.clone();
    let mut nodes = context.nodes_synced.clone();
    pods.wait_for(|synced| *synced).await.is_ok() && nodes.wait_for(|synced| *synced).await.is_ok()
}

async fn reconcile(cached: Arc<DaemonSet>, context: Arc<Context>) -> Result<Action, Error> {
    let (namespace, name) = key_of(&cached.metadata);
    if !caches_synced(&context).await {
        return Ok(Action::await_change());
    }
    // The pod cache finds pods that stopped matching by controller uid.
    context.pod_hints.take(&namespace, &name);
    if let DirtyNodes::Some(nodes) = context.dirty.take(&namespace, &name) {
        match sync_nodes(&cached, &context, &nodes).await? {
            Some(action) => return Ok(action),
            None => tracing::debug!(daemonset = %name, "planning every node"),
        }
    }
    sync_all(&cached, &context).await
}

/// What each set's last full sync kept, by (namespace, name).
type SetStates = HashMap<(String, String), SetState>;

/// What a full sync of a set left for the syncs that plan only some nodes.
struct SetState {
    uid: String,
    generation: Option<i64>,
    hash: String,
    placement: Arc<Placement>,
    tally: Tally,
    /// The status last written (the cached set may not show it yet).
    status: DaemonSetStatus,
}

/// The status of `set` with these counts.
fn status_of(set: &DaemonSet, totals: &Totals) -> DaemonSetStatus {
    let previous = set.status.as_ref();
    DaemonSetStatus {
        observed_generation: set.metadata.generation,
        collision_count: previous.and_then(|s| s.collision_count),
        conditions: previous.and_then(|s| s.conditions.clone()),
        desired_number_scheduled: totals.desired,
        current_number_scheduled: totals.scheduled,
        number_ready: totals.ready,
        number_misscheduled: totals.misscheduled,
        number_available: Some(totals.available),
        number_unavailable: Some(totals.desired - totals.available),
        updated_number_scheduled: Some(totals.updated),
    }
}

/// Writes the status when it changed; false when the set is gone.
async fn write_status(
    sets: &Api<DaemonSet>,
    set: &DaemonSet,
    status: &DaemonSetStatus,
) -> Result<bool, Error> {
    if set.status.as_ref() == Some(status) {
        return Ok(true);
    }
    let name = set.name_any();
    match update_status(sets, &name, |fresh| fresh.status = Some(status.clone())).await {
        Ok(_) => Ok(true),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

/// A node's name, the node (if it still exists) and the set's pods there.
type NodeToPlan<'a> = (&'a String, Option<Arc<Node>>, Vec<Arc<Pod>>);

/// Plans only `nodes` (after pod and node events), from the caches and the
/// counts the last full sync kept; `None` when a full sync is needed (no
/// counts kept, the set changed, a rollout or minReadySeconds under way,
/// or a pod that stopped matching).
async fn sync_nodes(
    cached: &DaemonSet,
    context: &Context,
    nodes: &HashSet<String>,
) -> Result<Option<Action>, Error> {
    let (namespace, name) = key_of(&cached.metadata);
    let key = (namespace.clone(), name.clone());
    let Some(mut state) = context
        .states
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&key)
    else {
        return Ok(None);
    };
    let Some(spec) = cached.spec.as_ref() else {
        return Ok(None);
    };
    let uid = cached.metadata.uid.clone().unwrap_or_default();
    if state.uid != uid
        || state.generation != cached.metadata.generation
        || state.tally.has_outdated()
        || spec.min_ready_seconds.unwrap_or(0) > 0
        || cached.metadata.deletion_timestamp.is_some()
    {
        return Ok(None);
    }
    let selector = parse_selector(&spec.selector)?;
    let may_manage = context
        .expectations
        .satisfied(&uid, context.clock.instant());
    let planned: Vec<NodeToPlan<'_>> = {
        let cached_nodes = context
            .caches
            .nodes
            .read()
            .expect("node cache lock poisoned");
        let pods = context.caches.pods.read().expect("pod cache lock poisoned");
        nodes
            .iter()
            .map(|node| {
                (
                    node,
                    cached_nodes.get(node).cloned(),
                    pods.pods_on(&uid, node),
                )
            })
            .collect()
    };
    let matches = |p: &Arc<Pod>| selector_matches(&selector, p.metadata.labels.as_ref());
    if planned.iter().any(|(_, _, pods)| !pods.iter().all(matches)) {
        return Ok(None);
    }
    let hash = state.hash.clone();
    let updated = |p: &Pod| p.labels().get(REVISION_LABEL) == Some(&hash);
    let now = context.clock.timestamp();
    let available = |p: &Pod| is_pod_available(p, 0, now);
    let mut creations: Vec<&str> = Vec::new();
    let mut deletions: Vec<&Pod> = Vec::new();
    for (node_name, node, pods) in &planned {
        let fit = node.as_ref().map(|n| state.placement.fit(n));
        let plan = plan_node(
            fit,
            pods.iter().map(AsRef::as_ref).collect(),
            updated,
            available,
        );
        if plan.create {
            creations.push(node_name);
        }
        deletions.extend(plan.delete);
        state.tally.set(node_name, plan.count);
    }
    if state.tally.has_outdated() {
        return Ok(None);
    }
    let owner = controller_reference("apps/v1", "DaemonSet", &cached.metadata);
    let pods_api: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    let mut failure = None;
    let set_ref = ObjectRef::from_obj(cached);
    if may_manage {
        failure = manage(
            context, cached, &owner, &pods_api, &hash, &creations, &deletions,
        )
        .await;
        if creations.len() > BURST_REPLICAS || deletions.len() > BURST_REPLICAS {
            context.dirty.all(&set_ref);
        }
    } else {
        // Planned again once the earlier ones are observed.
        for node in &creations {
            context.dirty.node(&set_ref, node);
        }
        for node in deletions.iter().filter_map(|p| target_node(p)) {
            context.dirty.node(&set_ref, &node);
        }
    }
    let status = status_of(cached, &state.tally.totals());
    let unchanged = state.status == status;
    state.status = status.clone();
    context
        .states
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key, state);
    let sets: Api<DaemonSet> = Api::namespaced(context.client.clone(), &namespace);
    if !unchanged && !write_status(&sets, cached, &status).await? {
        return Ok(Some(Action::await_change()));
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(Some(Action::await_change())),
    }
}

/// Plans every node of the set (a set change, a retry, or what
/// [`sync_nodes`] does not cover), with its revisions and adoption.
async fn sync_all(cached: &DaemonSet, context: &Context) -> Result<Action, Error> {
    let (namespace, name) = key_of(&cached.metadata);
    let key = (namespace.clone(), name.clone());
    let sets: Api<DaemonSet> = Api::namespaced(context.client.clone(), &namespace);
    let Some(set) = sets.get_opt(&name).await? else {
        // Gone: nothing of it is left to release.
        context.revision_hints.take(&namespace, &name);
        context
            .states
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key);
        return Ok(Action::await_change());
    };
    if set.metadata.uid != cached.metadata.uid || set.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let spec = set
        .spec
        .as_ref()
        .ok_or_else(|| Error::Invalid(format!("daemonset {namespace}/{name} has no spec")))?;
    let selector = parse_selector(&spec.selector)?;
    let owner = controller_reference("apps/v1", "DaemonSet", &set.metadata);
    let template_spec = spec.template.spec.clone().unwrap_or_default();
    let collision_count = set.status.as_ref().and_then(|s| s.collision_count);
    let mut manager = ControllerRefManager::new(
        Owner {
            reference: &owner,
            namespace: &namespace,
            deleting: false,
        },
        "DaemonSet",
        sets.clone(),
        &selector,
    );
    let revisions_api: Api<ControllerRevision> =
        Api::namespaced(context.client.clone(), &namespace);
    let (current, old_revisions) = construct_history(
        &revisions_api,
        &sets,
        &set,
        &mut manager,
        &context.revision_hints,
    )
    .await?;
    let hash = current
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(REVISION_LABEL).cloned())
        .unwrap_or_else(|| compute_hash(&spec.template, collision_count));
    let min_ready_seconds = spec.min_ready_seconds.unwrap_or(0);
    let now = context.clock.timestamp();
    // Read before the cache, so that pods observed meanwhile only make the
    // expectations look less satisfied than they are, never more.
    let may_manage = context
        .expectations
        .satisfied(&owner.uid, context.clock.instant());

    let pods_api: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    let pods = claim_pods(context, &mut manager, &pods_api, &owner.uid, &selector).await?;
    let nodes: Vec<Arc<Node>> = context
        .caches
        .nodes
        .read()
        .expect("node cache lock poisoned")
        .values()
        .cloned()
        .collect();
    let placement = Placement::new(&template_spec);
    let mut by_node: HashMap<String, Vec<&Pod>> = HashMap::new();
    let mut deletions: Vec<&Pod> = Vec::new();
    for pod in &pods {
        match target_node(pod) {
            Some(node) => by_node.entry(node).or_default().push(pod),
            None => deletions.push(pod),
        }
    }
    let updated = |p: &Pod| p.labels().get(REVISION_LABEL) == Some(&hash);
    let available = |p: &Pod| is_pod_available(p, min_ready_seconds, now);

    let mut creations: Vec<&str> = Vec::new();
    let mut tally = Tally::default();
    // Pods kept on desired nodes that are outdated, and whether available.
    let mut outdated: Vec<(&Pod, bool)> = Vec::new();
    for node in &nodes {
        let node_name = node.metadata.name.as_deref().unwrap_or_default();
        let daemons = by_node.remove(node_name).unwrap_or_default();
        let plan = plan_node(Some(placement.fit(node)), daemons, updated, available);
        if plan.create {
            creations.push(node_name);
        }
        deletions.extend(plan.delete);
        outdated.extend(plan.outdated);
        tally.set(node_name, plan.count);
    }
    // Pods of nodes that no longer exist.
    for daemons in by_node.into_values() {
        deletions.extend(plan_node(None, daemons, updated, available).delete);
    }
    let totals = tally.totals();
    let status = status_of(&set, &totals);

    // RollingUpdate: replace outdated pods, unavailable ones first, while
    // no more than maxUnavailable desired nodes lack an available pod.
    let strategy = spec.update_strategy.as_ref();
    if strategy
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("RollingUpdate")
        == "RollingUpdate"
    {
        let max_unavailable = strategy
            .and_then(|s| s.rolling_update.as_ref())
            .and_then(|r| r.max_unavailable.clone())
            .unwrap_or(IntOrString::Int(1));
        let max_unavailable = scaled_value(&max_unavailable, totals.desired, true)?.max(1);
        let mut budget = max_unavailable - totals.unavailable;
        outdated.sort_by_key(|(_, is_available)| *is_available);
        for (pod, is_available) in outdated {
            if !is_available {
                deletions.push(pod);
            } else if budget > 0 {
                budget -= 1;
                deletions.push(pod);
            }
        }
    }

    let mut failure = None;
    let set_ref = ObjectRef::from_obj(&set);
    if may_manage {
        failure = manage(
            context, &set, &owner, &pods_api, &hash, &creations, &deletions,
        )
        .await;
        if creations.len() > BURST_REPLICAS || deletions.len() > BURST_REPLICAS {
            // The rest waits for the next sync, which plans every node.
            context.dirty.all(&set_ref);
        }
    } else if !creations.is_empty() || !deletions.is_empty() {
        tracing::debug!(daemonset = %name, "waiting for earlier creations and deletions to be observed");
        context.dirty.all(&set_ref);
    }
    // The revision history limit (`cleanupHistory`).
    if failure.is_none() {
        let live: HashSet<&str> = pods
            .iter()
            .filter_map(|p| p.labels().get(REVISION_LABEL).map(String::as_str))
            .collect();
        let limit = spec.revision_history_limit.unwrap_or(10);
        for old in revisions_to_clean(&old_revisions, &live, limit) {
            match revisions_api.delete(&old, &DeleteParams::default()).await {
                Ok(_) => tracing::debug!(daemonset = %name, revision = %old, "cleaned up history"),
                Err(e) => {
                    let e = Error::from(e);
                    if !e.is_not_found() {
                        failure = Some(e);
                        break;
                    }
                }
            }
        }
    }
    context
        .states
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(
            key,
            SetState {
                uid: owner.uid.clone(),
                generation: set.metadata.generation,
                hash: hash.clone(),
                placement: Arc::new(placement),
                tally,
                status: status.clone(),
            },
        );

    if !write_status(&sets, &set, &status).await? {
        return Ok(Action::await_change());
    }
    if let Some(e) = failure {
        return Err(e);
    }
    if min_ready_seconds > 0 && totals.ready != totals.available {
        return Ok(Action::requeue(Duration::from_secs(
            u64::try_from(min_ready_seconds).unwrap_or(1),
        )));
    }
    Ok(Action::await_change())
}

/// The set's pods (`getDaemonPods`), from the cache: those it controls and
/// its selector matches, plus the matching orphans it adopts; the owned
/// ones that stopped matching are released.
async fn claim_pods(
    context: &Context,
    manager: &mut ControllerRefManager<'_, DaemonSet>,
    pods_api: &Api<Pod>,
    uid: &str,
    selector: &ksim_core::selector::LabelSelectorRequirements,
) -> Result<Vec<Arc<Pod>>, Error> {
    let namespace = pods_api.namespace().unwrap_or_default().to_string();
    let (mut pods, unmatched, orphans) = {
        let cache = context.caches.pods.read().expect("pod cache lock poisoned");
        let (matched, unmatched): (Vec<Arc<Pod>>, Vec<Arc<Pod>>) = cache
            .index
            .controlled_by(&namespace, uid)
            .into_iter()
            .partition(|p| selector_matches(selector, p.metadata.labels.as_ref()));
        let orphans = if selector.is_empty() {
            Vec::new()
        } else {
            cache.index.orphans(&namespace, selector)
        };
        (matched, unmatched, orphans)
    };
    if unmatched.is_empty() && orphans.is_empty() {
        return Ok(pods);
    }
    let candidates: Vec<Pod> = unmatched
        .iter()
        .chain(orphans.iter())
        .map(|p| Pod::clone(p))
        .collect();
    let adopted = manager.claim(pods_api, candidates, |_| true).await?;
    pods.extend(adopted.into_iter().map(Arc::new));
    Ok(pods)
}

/// Creates the missing pods (slow start: batches of 1, 2, 4, ...) and
/// deletes the doomed ones, at most [`BURST_REPLICAS`] of each, under
/// expectations the pod watch settles. Returns the first failure.
#[allow(clippy::too_many_arguments)]
async fn manage(
    context: &Context,
    set: &DaemonSet,
    owner: &OwnerReference,
    pods_api: &Api<Pod>,
    hash: &str,
    creations: &[&str],
    deletions: &[&Pod],
) -> Option<Error> {
    // Nodes and pods in name order, so that runs repeat (the callers
    // gather them from hash maps).
    let mut creations: Vec<&str> = creations.to_vec();
    creations.sort_unstable();
    let creations = &creations[..creations.len().min(BURST_REPLICAS)];
    let mut deletions: Vec<&Pod> = deletions.to_vec();
    deletions.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    deletions.dedup_by(|a, b| a.metadata.name == b.metadata.name);
    deletions.truncate(BURST_REPLICAS);
    if creations.is_empty() && deletions.is_empty() {
        return None;
    }
    let keys: HashSet<PodKey> = deletions.iter().map(|p| key_of(&p.metadata)).collect();
    context
        .expectations
        .expect(&owner.uid, creations.len(), keys, context.clock.instant());
    let set_ref = set.object_ref(&());
    let mut failure = None;
    let mut created = 0;
    let mut batch = creations.len().min(1);
    while created < creations.len() {
        let chunk = &creations[created..(created + batch).min(creations.len())];
        let results = join_all(chunk.iter().map(|node_name| {
            let pod = daemon_pod(set, owner, node_name, hash);
            let set_ref = set_ref.clone();
            async move { create_pod(pods_api, &context.events, set_ref, &pod).await }
        }))
        .await;
        created += chunk.len();
        let failed = results.iter().filter(|r| r.is_err()).count();
        if failed > 0 {
            // Those creations will never be observed; nor will the rest.
            context
                .expectations
                .creations_observed(&owner.uid, failed + creations.len() - created);
            failure = results.into_iter().find_map(Result::err);
            break;
        }
        batch *= 2;
    }
    let results = join_all(deletions.iter().map(|pod| {
        let set_ref = set_ref.clone();
        async move {
            let result = delete_pod(pods_api, &context.events, set_ref, &pod.name_any()).await;
            (pod, result)
        }
    }))
    .await;
    for (pod, result) in results {
        if let Err(e) = result {
            context
                .expectations
                .deletion_observed(&owner.uid, &key_of(&pod.metadata));
            if !e.is_not_found() {
                failure.get_or_insert(e);
            }
        }
    }
    failure
}

/// The daemon pod of `set` for `node`.
fn daemon_pod(set: &DaemonSet, owner: &OwnerReference, node: &str, hash: &str) -> Pod {
    let (namespace, name) = key_of(&set.metadata);
    let template = set
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let template_meta = template.metadata.unwrap_or_default();
    let mut labels = template_meta.labels.unwrap_or_default();
    labels.insert(REVISION_LABEL.into(), hash.to_string());
    labels.insert(
        TEMPLATE_GENERATION_LABEL.into(),
        set.metadata.generation.unwrap_or(1).to_string(),
    );
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: Some(namespace),
            labels: Some(labels),
            annotations: template_meta.annotations,
            finalizers: template_meta.finalizers,
            owner_references: Some(vec![owner.clone()]),
            ..ObjectMeta::default()
        },
        spec: Some(daemon_pod_spec(&template.spec.unwrap_or_default(), node)),
        status: None,
    }
}

/// `constructHistory`: claims the set's ControllerRevisions, labels them
/// with their hash, and returns the one recording the current template
/// (created, or renumbered as the newest) and the old ones.
async fn construct_history(
    api: &Api<ControllerRevision>,
    sets: &Api<DaemonSet>,
    set: &DaemonSet,
    manager: &mut ControllerRefManager<'_, DaemonSet>,
    hints: &ReleaseHints,
) -> Result<(ControllerRevision, Vec<ControllerRevision>), Error> {
    let spec = set
        .spec
        .as_ref()
        .ok_or_else(|| Error::Invalid("daemonset has no spec".into()))?;
    let mut listed = api
        .list(&ListParams::default().labels(&selector_query(&spec.selector)))
        .await?
        .items;
    // Owned revisions that stopped matching are not listed: the revision
    // watch named them, and claiming releases them.
    let (namespace, name) = key_of(&set.metadata);
    hints
        .add_recorded(api, &namespace, &name, &mut listed)
        .await?;
    let mut revisions = manager.claim(api, listed, |_| true).await?;
    for revision in &mut revisions {
        let name = revision.name_any();
        let labels = revision.metadata.labels.get_or_insert_with(BTreeMap::new);
        if !labels.contains_key(REVISION_LABEL) {
            labels.insert(REVISION_LABEL.into(), name.clone());
            *revision = api.replace(&name, &PostParams::default(), revision).await?;
        }
    }
    let data = revision_data(&spec.template)?;
    let (mut current, old) = split_current(revisions, &data);
    let next = next_revision(&old);
    // Duplicates (only after hash collisions): the newest one counts.
    current.sort_by_key(|r| std::cmp::Reverse(r.revision));
    let current = match current.into_iter().next() {
        Some(mut current) => {
            if current.revision < next {
                current.revision = next;
                current = api
                    .replace(&current.name_any(), &PostParams::default(), &current)
                    .await?;
            }
            current
        }
        None => snapshot(api, sets, set, data, next).await?,
    };
    Ok((current, old))
}

/// `snapshot`: creates the revision of the current template, named
/// `<set>-<hash>`; a different revision of that name is a hash collision,
/// resolved by bumping `status.collisionCount`.
async fn snapshot(
    api: &Api<ControllerRevision>,
    sets: &Api<DaemonSet>,
    set: &DaemonSet,
    data: serde_json::Value,
    number: i64,
) -> Result<ControllerRevision, Error> {
    let (namespace, name) = key_of(&set.metadata);
    let template = set
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let collision_count = set.status.as_ref().and_then(|s| s.collision_count);
    let hash = compute_hash(&template, collision_count);
    let mut labels = template.metadata.and_then(|m| m.labels).unwrap_or_default();
    labels.insert(REVISION_LABEL.into(), hash.clone());
    let revision = ControllerRevision {
        metadata: ObjectMeta {
            name: Some(format!("{name}-{hash}")),
            namespace: Some(namespace),
            labels: Some(labels),
            annotations: set.metadata.annotations.clone(),
            owner_references: Some(vec![controller_reference(
                "apps/v1",
                "DaemonSet",
                &set.metadata,
            )]),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(data.clone())),
        revision: number,
    };
    match api.create(&PostParams::default(), &revision).await {
        Ok(created) => Ok(created),
        Err(e) => {
            let e = Error::from(e);
            if !e.is_conflict() {
                return Err(e);
            }
            let existing = api.get(&format!("{name}-{hash}")).await?;
            if existing.data.as_ref().is_some_and(|d| d.0 == data) {
                return Ok(existing);
            }
            let updated = update_status(sets, &name, |fresh| {
                let status = fresh.status.get_or_insert_with(DaemonSetStatus::default);
                status.collision_count = Some(status.collision_count.unwrap_or(0) + 1);
            })
            .await?;
            let count = updated.status.and_then(|s| s.collision_count).unwrap_or(0);
            Err(Error::Invalid(format!(
                "found a hash collision for DaemonSet {name:?} - bumping collisionCount to {count} to resolve it"
            )))
        }
    }
}
