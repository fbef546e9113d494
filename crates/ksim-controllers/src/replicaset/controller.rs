//! The ReplicaSet controller's sync: claim pods (adopt matching orphans,
//! release owned pods that no longer match), create or delete pods until the
//! active ones number `spec.replicas`, and write the status.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::workloop::{Action, Requests, requests, run_work_queue};
use futures::future::join_all;
use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use super::expectations::{Expectations, PodKey};
use super::ranking::pods_to_delete;
use crate::Error;
use crate::cache::PodIndex;
use crate::common::watch_all;
use crate::common::{
    controller_of, controller_reference, is_pod_active, is_pod_available, is_pod_ready, key_of,
    parse_selector, selector_matches, update_status_from,
};
use crate::deployment::nonzero;
use crate::events::Events;
use crate::informer::SharedInformers;
use crate::pacing::SyncPacer;
use ksim_runtime::WithoutManagedFields;
use ksim_runtime::clock::Clock;

/// At most this many pods are created or deleted in one sync (upstream's `BurstReplicas`).
pub const BURST_REPLICAS: usize = 500;

/// How long to wait before retrying a failed sync.
const RETRY: Duration = Duration::from_millis(500);

/// How long a set whose pods the cache does not hold yet waits for it.
const CACHE_LAG_RETRY: Duration = Duration::from_millis(100);

struct Context {
    client: Client,
    events: Events,
    /// Every pod, indexed by namespace and labels (fed by one watch).
    pods: Arc<RwLock<PodIndex>>,
    /// Whether the pod cache has listed once.
    pods_synced: tokio::sync::watch::Receiver<bool>,
    replica_sets: Store<ReplicaSet>,
    expectations: Arc<Expectations>,
    /// ReplicaSets owning pods that stopped matching their selector.
    release_hints: Arc<Mutex<HashSet<(String, String)>>>,
    /// ReplicaSets (by uid) whose pod count the API server confirmed
    /// before they first created pods (see [`cache_lags`]).
    confirmed: Arc<Mutex<HashSet<String>>>,
    pacer: SyncPacer,
    clock: Clock,
}

/// Runs the ReplicaSet controller until the watch streams end.
pub async fn run(client: Client, informers: SharedInformers) {
    let (rs_store, rs_writer) = reflector::store::<ReplicaSet>();
    let pods = Arc::new(RwLock::new(PodIndex::of_controller_kind("ReplicaSet")));
    let expectations = Arc::new(Expectations::default());
    let release_hints = Arc::new(Mutex::new(HashSet::new()));
    let confirmed = Arc::new(Mutex::new(HashSet::new()));
    let (queue, requests) = requests::<ReplicaSet>(informers.clock());
    let (pods_synced_tx, pods_synced) = tokio::sync::watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(follow_replica_sets(
        reflector::reflector(
            rs_writer,
            watch_all::<ReplicaSet>(client.clone(), informers.clock()),
        ),
        Arc::clone(&expectations),
        Arc::clone(&confirmed),
        queue.clone(),
    ));
    tasks.spawn(follow_pods(
        informers.pods(),
        PodFollower {
            pods: Arc::clone(&pods),
            replica_sets: rs_store.clone(),
            expectations: Arc::clone(&expectations),
            release_hints: Arc::clone(&release_hints),
            queue,
            synced: pods_synced_tx,
        },
    ));
    if rs_store.wait_until_ready().await.is_err() {
        tracing::warn!("replicaset controller cache never synced");
        return;
    }
    let context = Arc::new(Context {
        events: Events::new(client.clone(), "replicaset-controller", informers.clock()),
        clock: informers.clock().clone(),
        client,
        pods,
        pods_synced,
        replica_sets: rs_store.clone(),
        expectations,
        release_hints,
        confirmed,
        pacer: SyncPacer::new(informers.clock()),
    });
    run_work_queue(
        "replicaset",
        |rs, context| Box::pin(reconcile(rs, context)),
        error_policy,
        context,
        rs_store,
        requests,
    )
    .await;
    tasks.abort_all();
}

/// Keeps the ReplicaSet store (the reflector does) and enqueues every
/// ReplicaSet that changes; a deleted one's expectations and confirmation
/// are forgotten.
async fn follow_replica_sets(
    stream: impl Stream<Item = Result<Event<ReplicaSet>, watcher::Error>>,
    expectations: Arc<Expectations>,
    confirmed: Arc<Mutex<HashSet<String>>>,
    queue: Requests<ReplicaSet>,
) {
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        let rs = match event {
            Ok(Event::Apply(rs) | Event::InitApply(rs)) => rs,
            Ok(Event::Delete(rs)) => {
                if let Some(uid) = rs.metadata.uid.as_deref() {
                    expectations.forget(uid);
                    confirmed
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .remove(uid);
                }
                continue;
            }
            Ok(Event::Init | Event::InitDone) => continue,
            Err(error) => {
                tracing::debug!(%error, "replicaset watch failed");
                continue;
            }
        };
        if queue.unbounded_send(ObjectRef::from_obj(&rs)).is_err() {
            return;
        }
    }
}

/// What the pod watch updates.
struct PodFollower {
    pods: Arc<RwLock<PodIndex>>,
    replica_sets: Store<ReplicaSet>,
    expectations: Arc<Expectations>,
    release_hints: Arc<Mutex<HashSet<(String, String)>>>,
    queue: Requests<ReplicaSet>,
    synced: tokio::sync::watch::Sender<bool>,
}

/// The uid of the ReplicaSet controlling `pod`, if one does.
fn replica_set_uid(pod: &Pod) -> Option<&str> {
    controller_of(&pod.metadata)
        .filter(|owner| owner.kind == "ReplicaSet" && owner.api_version.starts_with("apps/"))
        .map(|owner| owner.uid.as_str())
}

fn pod_key(pod: &Pod) -> PodKey {
    key_of(&pod.metadata)
}

/// Keeps the pod index, records observed creations and deletions in the
/// expectations, and enqueues the ReplicaSets each change concerns.
async fn follow_pods(stream: impl Stream<Item = Event<Arc<Pod>>>, follower: PodFollower) {
    let mut stream = std::pin::pin!(stream);
    // While a list is read (`Init` to `InitDone`), the ReplicaSets its pods
    // concern are gathered and queued once at its end, not once per pod (a
    // restored cluster lists 100,000 pods of 100 sets): a re-list's changes
    // are all seen by the syncs queued after it. After the first list,
    // nothing is queued: every ReplicaSet was queued as its own watch
    // listed or added it, and no sync reads the pods before the first list
    // is in, so each one's first sync already sees them all (one sync, not
    // two, per restored set).
    let mut listing: Option<HashSet<ObjectRef<ReplicaSet>>> = None;
    while let Some(event) = stream.next().await {
        let mut changed: Vec<Arc<Pod>> = Vec::new();
        let mut list_done = false;
        let mut first_list = false;
        {
            let mut pods = follower.pods.write().expect("pod index lock poisoned");
            match event {
                Event::Apply(pod) | Event::InitApply(pod) => {
                    let old = pods.apply(Arc::clone(&pod));
                    if let Some(uid) = replica_set_uid(&pod) {
                        let was_deleting = old
                            .as_ref()
                            .is_some_and(|o| o.metadata.deletion_timestamp.is_some());
                        if old.is_none() {
                            follower.expectations.creations_observed(uid, 1);
                        }
                        if pod.metadata.deletion_timestamp.is_some() && !was_deleting {
                            follower.expectations.deletion_observed(uid, &pod_key(&pod));
                        }
                    }
                    if let Some(old) = old
                        && (old.metadata.labels != pod.metadata.labels
                            || old.metadata.owner_references != pod.metadata.owner_references)
                    {
                        changed.push(old);
                    }
                    changed.push(pod);
                }
                Event::Delete(pod) => {
                    let cached = pods.delete(&pod);
                    if let Some(uid) = replica_set_uid(&pod) {
                        follower.expectations.deletion_observed(uid, &pod_key(&pod));
                    }
                    changed.extend(cached);
                    changed.push(pod);
                }
                Event::Init => {
                    pods.start_relist();
                    listing.get_or_insert_with(HashSet::new);
                }
                Event::InitDone => {
                    list_done = true;
                    for pod in pods.finish_relist() {
                        if let Some(uid) = replica_set_uid(&pod) {
                            follower.expectations.deletion_observed(uid, &pod_key(&pod));
                        }
                        changed.push(pod);
                    }
                    tracing::debug!(pods = pods.len(), "replicaset controller pod cache synced");
                    first_list = !follower.synced.send_replace(true);
                }
            }
        }
        let mut concerned = Vec::new();
        for pod in &changed {
            concerned.extend(replica_sets_of_pod(
                &follower.replica_sets,
                &follower.release_hints,
                pod,
            ));
        }
        let queued: Vec<ObjectRef<ReplicaSet>> = match listing.as_mut() {
            Some(gathered) if !list_done => {
                gathered.extend(concerned);
                continue;
            }
            Some(_) if first_list => {
                listing = None;
                continue;
            }
            Some(_) => {
                let mut gathered = listing.take().unwrap_or_default();
                gathered.extend(concerned);
                crate::workloop::in_order(gathered.into_iter().collect())
            }
            None => {
                let mut seen = HashSet::new();
                concerned.retain(|reference| seen.insert(reference.clone()));
                concerned
            }
        };
        for reference in queued {
            if follower.queue.unbounded_send(reference).is_err() {
                return;
            }
        }
    }
}

/// The ReplicaSets a pod event concerns: its controller, or every ReplicaSet
/// of its namespace whose selector matches an orphan.
fn replica_sets_of_pod(
    store: &Store<ReplicaSet>,
    release_hints: &Mutex<HashSet<(String, String)>>,
    pod: &Pod,
) -> Vec<ObjectRef<ReplicaSet>> {
    let namespace = pod.namespace().unwrap_or_default();
    if let Some(owner) = controller_of(&pod.metadata) {
        if owner.kind != "ReplicaSet" || !owner.api_version.starts_with("apps/") {
            return Vec::new();
        }
        let reference = ObjectRef::new(&owner.name).within(&namespace);
        if let Some(rs) = store.get(&reference) {
            let matches = rs
                .spec
                .as_ref()
                .and_then(|s| parse_selector(&s.selector).ok())
                .is_some_and(|s| selector_matches(&s, pod.metadata.labels.as_ref()));
            if rs.metadata.uid.as_deref() == Some(owner.uid.as_str()) && !matches {
                let mut hints = release_hints
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                hints.insert((namespace.clone(), owner.name.clone()));
            }
        }
        return vec![reference];
    }
    if pod.metadata.deletion_timestamp.is_some() {
        return Vec::new();
    }
    let refs = store
        .state()
        .iter()
        .filter(|rs| rs.namespace().as_deref() == Some(namespace.as_str()))
        .filter(|rs| {
            rs.spec
                .as_ref()
                .and_then(|s| parse_selector(&s.selector).ok())
                .is_some_and(|s| {
                    !s.is_empty() && selector_matches(&s, pod.metadata.labels.as_ref())
                })
        })
        .map(|rs| ObjectRef::from_obj(rs.as_ref()))
        .collect();
    crate::workloop::in_order(refs)
}

fn error_policy(_rs: Arc<ReplicaSet>, error: &Error, _context: Arc<Context>) -> Action {
    tracing::debug!(%error, "replicaset sync will be retried");
    Action::requeue(RETRY)
}

async fn reconcile(cached: Arc<ReplicaSet>, context: Arc<Context>) -> Result<Action, Error> {
    let (namespace, name) = key_of(&cached.metadata);
    // As upstream, no sync before the pod cache has listed once.
    if context
        .pods_synced
        .clone()
        .wait_for(|synced| *synced)
        .await
        .is_err()
    {
        return Ok(Action::await_change());
    }
    // A set whose pods keep changing is synced in batches (see `pacing`).
    let mut timer = context
        .pacer
        .pace(cached.metadata.uid.as_deref().unwrap_or_default())
        .await;
    // The cache may lag (a deleted or rescaled ReplicaSet): act on the
    // object as it is now.
    let replica_sets: Api<ReplicaSet> = Api::namespaced(context.client.clone(), &namespace);
    let Some(rs) = replica_sets.get_opt(&name).await? else {
        return Ok(Action::await_change());
    };
    if rs.metadata.uid != cached.metadata.uid {
        return Ok(Action::await_change());
    }
    let spec = rs
        .spec
        .as_ref()
        .ok_or_else(|| Error::Invalid(format!("replicaset {namespace}/{name} has no spec")))?;
    let selector = parse_selector(&spec.selector)?;
    let pods_api: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    // Creations and deletions read their response without managedFields.
    let lean_pods_api: Api<WithoutManagedFields<Pod>> =
        Api::namespaced(context.client.clone(), &namespace);
    let owner = controller_reference("apps/v1", "ReplicaSet", &rs.metadata);
    let deleting = rs.metadata.deletion_timestamp.is_some();
    // Read before the cache so that pods observed meanwhile only make the
    // expectations look less satisfied than they are, never more.
    let may_manage = context
        .expectations
        .satisfied(&owner.uid, context.clock.instant());

    // The pods it controls that its selector matches, and the matching
    // orphans it adopts (`ClaimPods`), from the controller and orphan
    // indexes: no scan of every pod its selector matches.
    let (mut owned, orphans) = if selector.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        let pods = context.pods.read().expect("pod index lock poisoned");
        let mut owned = pods.controlled_by(&namespace, &owner.uid);
        owned.retain(|pod| selector_matches(&selector, pod.metadata.labels.as_ref()));
        let orphans = if deleting {
            Vec::new()
        } else {
            pods.orphans(&namespace, &selector)
        };
        (owned, orphans)
    };
    // As upstream's `RecheckDeletionTimestamp`: orphans are adopted only
    // if the set, read afresh after the pods were, is the same and not
    // being deleted (an orphaning deletion releases its pods: a sync begun
    // before it must not adopt them back).
    if orphans
        .iter()
        .any(|pod| pod.metadata.deletion_timestamp.is_none())
    {
        match replica_sets.get_opt(&name).await? {
            Some(fresh)
                if fresh.metadata.uid == rs.metadata.uid
                    && fresh.metadata.deletion_timestamp.is_none() => {}
            _ => {
                return Err(Error::Invalid(format!(
                    "can't adopt pods of replicaset {namespace}/{name}: it is gone or being deleted"
                )));
            }
        }
    }
    for pod in orphans {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        match adopt(&pods_api, &pod, &owner).await {
            Ok(adopted) => owned.push(Arc::new(adopted)),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    let hinted = context
        .release_hints
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .remove(&(namespace.clone(), name.clone()));
    if hinted {
        release_unmatched(&context, &pods_api, &namespace, &owner.uid, &selector).await?;
    }

    timer.read_pods(owned.len());
    let active: Vec<Arc<Pod>> = owned.into_iter().filter(|p| is_pod_active(p)).collect();
    let mut manage_error = None;
    if !deleting && may_manage {
        let want = usize::try_from(spec.replicas.unwrap_or(1).max(0)).unwrap_or(0);
        if active.len() < want && !context.is_confirmed(&owner.uid) {
            if cache_lags(&lean_pods_api, &spec.selector, &owner.uid, active.len()).await? {
                tracing::debug!(replicaset = %name, %namespace, "the pod cache lags: creations wait");
                return Ok(Action::requeue(CACHE_LAG_RETRY));
            }
            context
                .confirmed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(owner.uid.clone());
        }
        if active.len() < want {
            let count = (want - active.len()).min(BURST_REPLICAS);
            context
                .expectations
                .expect_creations(&owner.uid, count, context.clock.instant());
            let (created, result) = create_pods(
                &lean_pods_api,
                &rs,
                &spec.template,
                &owner,
                count,
                &context.events,
            )
            .await;
            if let Err(e) = result {
                // The creations that will not happen are not waited for.
                context
                    .expectations
                    .creations_observed(&owner.uid, count - created);
                context.events.warning(
                    rs.object_ref(&()),
                    "FailedCreate",
                    "Create",
                    format!("Error creating: {e}"),
                );
                manage_error = Some(("FailedCreate", e));
            }
        } else if active.len() > want {
            let count = (active.len() - want).min(BURST_REPLICAS);
            let related = indirectly_related_pods(&context, &rs, &active);
            let victims = pods_to_delete(&active, &related, count, context.clock.timestamp());
            context.expectations.expect_deletions(
                &owner.uid,
                victims.iter().map(|pod| pod_key(pod)).collect(),
                context.clock.instant(),
            );
            let deletions = victims.iter().map(|pod| {
                let pods_api = lean_pods_api.clone();
                let key = pod_key(pod);
                async move {
                    let result = pods_api.delete(&key.1, &DeleteParams::default()).await;
                    (key, result)
                }
            });
            for (key, result) in join_all(deletions).await {
                let pod_name = &key.1;
                match result.map_err(Error::from) {
                    Ok(_) => context.events.normal(
                        rs.object_ref(&()),
                        "SuccessfulDelete",
                        "Delete",
                        format!("Deleted pod: {pod_name}"),
                    ),
                    Err(e) if e.is_not_found() => {
                        context.expectations.deletion_observed(&owner.uid, &key);
                    }
                    Err(e) => {
                        context.expectations.deletion_observed(&owner.uid, &key);
                        context.events.warning(
                            rs.object_ref(&()),
                            "FailedDelete",
                            "Delete",
                            format!("Error deleting: {e}"),
                        );
                        manage_error = Some(("FailedDelete", e));
                    }
                }
            }
        }
    }

    let now = context.clock.timestamp();
    let min_ready_seconds = spec.min_ready_seconds.unwrap_or(0);
    let template_labels = spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let status = compute_status(
        &rs,
        &active,
        &template_labels,
        min_ready_seconds,
        manage_error
            .as_ref()
            .map(|(reason, e)| (*reason, e.to_string())),
        now,
    );
    if rs.status.as_ref() != Some(&status) {
        let written = update_status_from(&replica_sets, &name, Some(rs.clone()), |fresh| {
            fresh.status = Some(status.clone())
        });
        match written.await {
            Ok(_) => {}
            Err(e) if e.is_not_found() => return Ok(Action::await_change()),
            Err(e) => return Err(e),
        }
    }
    if let Some((_, e)) = manage_error {
        return Err(e);
    }
    if min_ready_seconds > 0 && status.ready_replicas != status.available_replicas {
        return Ok(Action::requeue(Duration::from_secs(
            u64::try_from(min_ready_seconds).unwrap_or(1),
        )));
    }
    Ok(Action::await_change())
}

impl Context {
    /// Whether the ReplicaSet with `uid` had its pods counted by the API
    /// server before its first creations.
    fn is_confirmed(&self, uid: &str) -> bool {
        self.confirmed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(uid)
    }
}

/// Whether the API server holds more active pods of the ReplicaSet
/// `owner_uid` (controlled by it, or orphans its `selector` matches, which
/// it would adopt) than the `cached` the pod cache gave. Asked once per
/// set, the first time it would create pods: the pod cache and the
/// ReplicaSet watch are separate streams, so a set created just after its
/// pods (a snapshot restored into a running cluster creates the pods
/// first, for the set to adopt) may be synced before the cache holds them,
/// and would create them twice. Later creations are covered by the
/// expectations.
async fn cache_lags(
    pods: &Api<WithoutManagedFields<Pod>>,
    selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    owner_uid: &str,
    cached: usize,
) -> Result<bool, Error> {
    let selector = ksim_core::selector::label_selector_string(selector)
        .map_err(|e| Error::Invalid(e.to_string()))?;
    let listed = pods
        .list(&kube::api::ListParams::default().labels(&selector))
        .await?;
    let held = listed
        .items
        .iter()
        .filter(|pod| is_pod_active(pod))
        .filter(|pod| controller_of(&pod.metadata).is_none_or(|owner| owner.uid == owner_uid))
        .count();
    Ok(held > cached)
}

/// The status a ReplicaSet reports for its active pods.
fn compute_status(
    rs: &ReplicaSet,
    active: &[Arc<Pod>],
    template_labels: &BTreeMap<String, String>,
    min_ready_seconds: i32,
    failure: Option<(&str, String)>,
    now: Timestamp,
) -> ReplicaSetStatus {
    let count = |f: &dyn Fn(&Pod) -> bool| {
        i32::try_from(active.iter().filter(|p| f(p.as_ref())).count()).unwrap_or(i32::MAX)
    };
    let fully_labeled = count(&|p: &Pod| {
        let labels = p.metadata.labels.as_ref();
        template_labels
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
    });
    let previous = rs.status.clone().unwrap_or_default();
    let mut conditions: Vec<ReplicaSetCondition> = previous
        .conditions
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.type_ != "ReplicaFailure")
        .collect();
    if let Some((reason, message)) = failure {
        conditions.push(ReplicaSetCondition {
            type_: "ReplicaFailure".into(),
            status: "True".into(),
            reason: Some(reason.into()),
            message: Some(message),
            last_transition_time: Some(Time(now)),
        });
    }
    ReplicaSetStatus {
        replicas: count(&|_| true),
        fully_labeled_replicas: nonzero(fully_labeled),
        ready_replicas: nonzero(count(&is_pod_ready)),
        available_replicas: nonzero(count(&|p| is_pod_available(p, min_ready_seconds, now))),
        observed_generation: rs.metadata.generation,
        conditions: (!conditions.is_empty()).then_some(conditions),
        terminating_replicas: None,
    }
}

/// The active pods of every ReplicaSet sharing this one's controller (a
/// Deployment's old and new ReplicaSets), as upstream ranks with
/// `getIndirectlyRelatedPods`; just `own` without a controller. Read from
/// the caches.
fn indirectly_related_pods(context: &Context, rs: &ReplicaSet, own: &[Arc<Pod>]) -> Vec<Arc<Pod>> {
    let Some(controller) = controller_of(&rs.metadata) else {
        return own.to_vec();
    };
    let namespace = rs.metadata.namespace.clone().unwrap_or_default();
    let mut related = own.to_vec();
    let pods = context.pods.read().expect("pod index lock poisoned");
    for sibling in context.replica_sets.state() {
        let same_controller =
            controller_of(&sibling.metadata).is_some_and(|c| c.uid == controller.uid);
        if !same_controller
            || sibling.metadata.uid == rs.metadata.uid
            || sibling.metadata.namespace.as_deref() != Some(namespace.as_str())
        {
            continue;
        }
        let Some(spec) = sibling.spec.as_ref() else {
            continue;
        };
        let Ok(selector) = parse_selector(&spec.selector) else {
            continue;
        };
        if selector.is_empty() {
            continue;
        }
        let sibling_uid = sibling.metadata.uid.as_deref().unwrap_or_default();
        related.extend(
            pods.controlled_by(&namespace, sibling_uid)
                .into_iter()
                .filter(|p| {
                    is_pod_active(p) && selector_matches(&selector, p.metadata.labels.as_ref())
                }),
        );
    }
    related
}

/// Makes `owner` the pod's controller.
async fn adopt(pods: &Api<Pod>, pod: &Pod, owner: &OwnerReference) -> Result<Pod, Error> {
    let mut references = pod.metadata.owner_references.clone().unwrap_or_default();
    references.push(owner.clone());
    let patch = json!({"metadata": {"ownerReferences": references, "uid": pod.metadata.uid}});
    Ok(pods
        .patch(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await?)
}

/// Removes the controller reference to `owner_uid` from owned pods whose
/// labels no longer match the selector.
async fn release_unmatched(
    context: &Context,
    pods: &Api<Pod>,
    namespace: &str,
    owner_uid: &str,
    selector: &ksim_core::selector::LabelSelectorRequirements,
) -> Result<(), Error> {
    let owned = context
        .pods
        .read()
        .expect("pod index lock poisoned")
        .controlled_by(namespace, owner_uid);
    for pod in owned {
        if selector_matches(selector, pod.metadata.labels.as_ref()) {
            continue;
        }
        let references: Vec<&OwnerReference> = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .filter(|r| r.uid != owner_uid)
            .collect();
        let patch = json!({"metadata": {"ownerReferences": references, "uid": pod.metadata.uid}});
        match pods
            .patch(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
        {
            Ok(_) => {}
            Err(e) => {
                let e = Error::from(e);
                if !e.is_not_found() {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

/// The pod a controller creates from its template (`GetPodFromTemplate`).
fn pod_from_template(
    owner_name: &str,
    namespace: &str,
    template: Option<&PodTemplateSpec>,
    owner: &OwnerReference,
) -> Pod {
    let template_meta = template
        .and_then(|t| t.metadata.clone())
        .unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{owner_name}-")),
            namespace: Some(namespace.to_string()),
            labels: template_meta.labels,
            annotations: template_meta.annotations,
            finalizers: template_meta.finalizers,
            owner_references: Some(vec![owner.clone()]),
            ..ObjectMeta::default()
        },
        spec: template.and_then(|t| t.spec.clone()),
        status: None,
    }
}

/// Creates `count` pods in slow-start batches (1, 2, 4, ...), stopping at
/// the first batch with a failure; returns how many were created.
async fn create_pods(
    pods: &Api<WithoutManagedFields<Pod>>,
    rs: &ReplicaSet,
    template: &Option<PodTemplateSpec>,
    owner: &OwnerReference,
    count: usize,
    events: &Events,
) -> (usize, Result<(), Error>) {
    let (namespace, name) = key_of(&rs.metadata);
    let pod = WithoutManagedFields(pod_from_template(
        &name,
        &namespace,
        template.as_ref(),
        owner,
    ));
    let mut created = 0;
    let mut remaining = count;
    let mut batch = remaining.min(1);
    while batch > 0 {
        let params = PostParams::default();
        let creations = (0..batch).map(|_| pods.create(&params, &pod));
        let mut failure = None;
        for result in join_all(creations).await {
            match result {
                Ok(pod) => {
                    created += 1;
                    events.normal(
                        rs.object_ref(&()),
                        "SuccessfulCreate",
                        "Create",
                        format!("Created pod: {}", pod.name_any()),
                    );
                }
                Err(e) => failure = Some(e),
            }
        }
        if let Some(e) = failure {
            return (created, Err(e.into()));
        }
        remaining -= batch;
        batch = (batch * 2).min(remaining);
    }
    (created, Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready_pod(name: &str, ready: bool, labels: serde_json::Value) -> Pod {
        let status = if ready { "True" } else { "False" };
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": status, "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ]}
        }))
        .expect("pod")
    }

    #[test]
    fn status_counts_labeled_ready_and_available_pods() {
        let rs: ReplicaSet = serde_json::from_value(json!({
            "metadata": {"name": "web", "generation": 4}
        }))
        .expect("rs");
        let pods = [
            Arc::new(ready_pod("a", true, json!({"app": "web", "tier": "front"}))),
            Arc::new(ready_pod("b", true, json!({"app": "web"}))),
            Arc::new(ready_pod(
                "c",
                false,
                json!({"app": "web", "tier": "front"}),
            )),
        ];
        let labels: BTreeMap<String, String> = [
            ("app".to_string(), "web".to_string()),
            ("tier".to_string(), "front".to_string()),
        ]
        .into();
        let now = "2026-01-01T00:00:30Z".parse().expect("time");
        let status = compute_status(&rs, &pods, &labels, 0, None, now);
        assert_eq!(status.replicas, 3);
        assert_eq!(status.fully_labeled_replicas, Some(2));
        assert_eq!(status.ready_replicas, Some(2));
        assert_eq!(status.available_replicas, Some(2));
        assert_eq!(status.observed_generation, Some(4));
        let status = compute_status(
            &rs,
            &pods,
            &labels,
            60,
            Some(("FailedCreate", "x".into())),
            now,
        );
        assert_eq!(status.available_replicas, None, "zero counts are omitted");
        let conditions = status.conditions.expect("failure condition");
        assert_eq!(conditions[0].reason.as_deref(), Some("FailedCreate"));
    }

    #[test]
    fn pods_from_a_template_are_named_after_and_owned_by_their_replica_set() {
        let template: PodTemplateSpec = serde_json::from_value(json!({
            "metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}
        }))
        .expect("template");
        let owner = OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web-abc".into(),
            uid: "u1".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let pod = pod_from_template("web-abc", "ns", Some(&template), &owner);
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("web-abc-"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(pod.metadata.owner_references, Some(vec![owner]));
        assert_eq!(
            pod.metadata.labels.and_then(|l| l.get("app").cloned()),
            Some("web".to_string())
        );
    }
}
