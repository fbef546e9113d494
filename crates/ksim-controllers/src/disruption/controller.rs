//! The disruption controller's loop and sync. Watches feed caches (pods
//! indexed by namespace and labels, budgets by namespace, and the
//! ReplicationControllers, ReplicaSets, Deployments and StatefulSets whose
//! scale counts); a pod event enqueues the budgets that select it (before
//! and after a label change). A sync reads the budget's own pods and its
//! controllers' scale from the caches and writes the status (or the
//! SyncFailed fail-safe). Pods with a DisruptionTarget condition that no
//! deletion followed within 2 minutes get it reset to False.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::workloop::{Action, Requests, requests, run_work_queue};
use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource};

use super::budgets::BudgetIndex;
use super::status::{
    ControllerScale, budget_status, count_healthy, disrupted_pod_map, expected_pod_count,
    failed_status, go_selector_string,
};
use crate::Error;
use crate::cache::{Key, PodIndex};
use crate::common::watch_all;
use crate::common::{controller_of, key_of, parse_selector, update_status};
use crate::events::Events;
use crate::informer::SharedInformers;
use ksim_runtime::clock::Clock;

const RETRY: Duration = Duration::from_millis(500);

/// The pod condition an eviction sets before deleting.
const DISRUPTION_TARGET: &str = "DisruptionTarget";
/// The reason of a DisruptionTarget set by the kubelet, never stale.
const TERMINATION_BY_KUBELET: &str = "TerminationByKubelet";
/// How long a DisruptionTarget=True condition may wait for its pod's
/// deletion before it is reset (upstream's stalePodDisruptionTimeout).
pub const STALE_POD_DISRUPTION_TIMEOUT: SignedDuration = SignedDuration::from_secs(120);

/// The controller's caches.
struct Caches {
    pods: RwLock<PodIndex>,
    budgets: RwLock<BudgetIndex>,
    replication_controllers: Store<ReplicationController>,
    replica_sets: Store<ReplicaSet>,
    deployments: Store<Deployment>,
    stateful_sets: Store<StatefulSet>,
}

struct Context {
    client: Client,
    events: Events,
    caches: Arc<Caches>,
    clock: Clock,
}

/// Runs the disruption controller until the watch streams end.
pub async fn run(client: Client, informers: SharedInformers) {
    let (pdb_store, pdb_writer) = reflector::store::<PodDisruptionBudget>();
    let (rc_store, rc_writer) = reflector::store::<ReplicationController>();
    let (rs_store, rs_writer) = reflector::store();
    let (deployment_store, deployment_writer) = reflector::store();
    let (sts_store, sts_writer) = reflector::store();
    let caches = Arc::new(Caches {
        pods: RwLock::new(PodIndex::default()),
        budgets: RwLock::new(BudgetIndex::default()),
        replication_controllers: rc_store,
        replica_sets: rs_store.clone(),
        deployments: deployment_store.clone(),
        stateful_sets: sts_store.clone(),
    });
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(drive(reflector::reflector(
        rc_writer,
        watch_all::<ReplicationController>(client.clone(), informers.clock()),
    )));
    tasks.spawn(drive(reflector::reflector(
        rs_writer,
        watch_all::<ReplicaSet>(client.clone(), informers.clock()),
    )));
    tasks.spawn(drive(reflector::reflector(
        deployment_writer,
        watch_all::<Deployment>(client.clone(), informers.clock()),
    )));
    tasks.spawn(drive(reflector::reflector(
        sts_writer,
        watch_all::<StatefulSet>(client.clone(), informers.clock()),
    )));
    let (queue, requests) = requests::<PodDisruptionBudget>(informers.clock());
    let budget_events = reflector::reflector(
        pdb_writer,
        watch_all::<PodDisruptionBudget>(client.clone(), informers.clock()),
    );
    tasks.spawn(follow_budgets(
        budget_events,
        Arc::clone(&caches),
        queue.clone(),
    ));
    let (pods_synced, mut pods_ready) = tokio::sync::watch::channel(false);
    let stale = StaleCleanup::new(client.clone(), informers.clock().clone());
    tasks.spawn(follow_pods(
        informers.pods(),
        Arc::clone(&caches),
        queue,
        pods_synced,
        stale,
    ));
    // As upstream, no sync before every cache has listed once; except the
    // ReplicationControllers, which a server may not serve (ksim does not).
    let synced = async {
        let stores = futures::future::try_join3(
            rs_store.wait_until_ready(),
            deployment_store.wait_until_ready(),
            sts_store.wait_until_ready(),
        );
        let pods = async { pods_ready.wait_for(|ready| *ready).await.is_ok() };
        let (stores, pods) = tokio::join!(stores, pods);
        stores.is_ok() && pods && pdb_store.wait_until_ready().await.is_ok()
    };
    if !synced.await {
        tracing::warn!("disruption controller caches never synced");
        return;
    }
    let context = Arc::new(Context {
        events: Events::new(client.clone(), "controllermanager", informers.clock()),
        clock: informers.clock().clone(),
        client,
        caches,
    });
    run_work_queue(
        "disruption",
        |pdb, context| Box::pin(reconcile(pdb, context)),
        error_policy,
        context,
        pdb_store,
        requests,
    )
    .await;
    tasks.abort_all();
}

/// Polls a reflector's stream so its store stays current.
async fn drive<K>(stream: impl Stream<Item = Result<Event<K>, watcher::Error>>) {
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        if let Err(error) = event {
            tracing::debug!(%error, "disruption controller watch failed");
        }
    }
}

/// Keeps the budget index and enqueues every budget that changes.
async fn follow_budgets(
    stream: impl Stream<Item = Result<Event<PodDisruptionBudget>, watcher::Error>>,
    caches: Arc<Caches>,
    queue: Requests<PodDisruptionBudget>,
) {
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                tracing::debug!(%error, "budget watch failed");
                continue;
            }
        };
        let touched = {
            let mut budgets = caches.budgets.write().expect("budget index lock poisoned");
            match event {
                Event::Apply(pdb) | Event::InitApply(pdb) => {
                    budgets.apply(&pdb);
                    Some(ObjectRef::from_obj(&pdb))
                }
                Event::Delete(pdb) => {
                    budgets.delete(&pdb);
                    None
                }
                Event::Init => {
                    budgets.start_relist();
                    None
                }
                Event::InitDone => {
                    budgets.finish_relist();
                    None
                }
            }
        };
        if let Some(reference) = touched
            && queue.unbounded_send(reference).is_err()
        {
            return;
        }
    }
}

fn budget_ref(key: Key) -> ObjectRef<PodDisruptionBudget> {
    ObjectRef::new(&key.1).within(&key.0)
}

/// Keeps the pod index, enqueues the budgets of every pod that changes
/// (those that selected its old labels too), and schedules the cleanup of
/// stale DisruptionTarget conditions.
async fn follow_pods(
    stream: impl Stream<Item = Event<Arc<Pod>>>,
    caches: Arc<Caches>,
    queue: Requests<PodDisruptionBudget>,
    synced: tokio::sync::watch::Sender<bool>,
    stale: StaleCleanup,
) {
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        let mut changed: Vec<Arc<Pod>> = Vec::new();
        {
            let mut pods = caches.pods.write().expect("pod index lock poisoned");
            match event {
                Event::Apply(pod) | Event::InitApply(pod) => {
                    stale.check(&pod);
                    if let Some(old) = pods.apply(Arc::clone(&pod))
                        && old.metadata.labels != pod.metadata.labels
                    {
                        changed.push(old);
                    }
                    changed.push(pod);
                }
                Event::Delete(pod) => {
                    let cached = pods.delete(&pod);
                    changed.extend(cached);
                    changed.push(pod);
                }
                Event::Init => pods.start_relist(),
                Event::InitDone => {
                    changed.extend(pods.finish_relist());
                    tracing::debug!(pods = pods.len(), "disruption controller pod cache synced");
                    synced.send_replace(true);
                }
            }
        }
        let budgets = caches.budgets.read().expect("budget index lock poisoned");
        let mut seen: HashSet<Key> = HashSet::new();
        let keys: Vec<Key> = changed
            .iter()
            .flat_map(|pod| budgets.budgets_of(pod))
            .filter(|key| seen.insert(key.clone()))
            .collect();
        drop(budgets);
        for key in keys {
            if queue.unbounded_send(budget_ref(key)).is_err() {
                return;
            }
        }
    }
}
fn error_policy(_pdb: Arc<PodDisruptionBudget>, error: &Error, _context: Arc<Context>) -> Action {
    tracing::debug!(%error, "disruption sync will be retried");
    Action::requeue(RETRY)
}

async fn reconcile(pdb: Arc<PodDisruptionBudget>, context: Arc<Context>) -> Result<Action, Error> {
    let (namespace, name) = key_of(&pdb.metadata);
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(context.client.clone(), &namespace);
    let now = context.clock.timestamp();
    let outcome = compute(&pdb, &context, &namespace, now).await;
    let (status, recheck, failure) = match outcome {
        Ok((status, recheck)) => (status, recheck, None),
        // A conflict is retried without the fail-safe, as upstream.
        Err(e) if e.is_conflict() => return Err(e),
        Err(e) => (failed_status(&pdb, &e.to_string(), now), None, Some(e)),
    };
    if pdb.status.as_ref() != Some(&status) {
        match update_status(&budgets, &name, |fresh| fresh.status = Some(status.clone())).await {
            Ok(_) => {}
            Err(e) if e.is_not_found() => return Ok(Action::await_change()),
            Err(e) => return Err(e),
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(match recheck {
        Some(at) => {
            let wait = at.duration_since(now).as_millis().max(1);
            Action::requeue(Duration::from_millis(u64::try_from(wait).unwrap_or(1)))
        }
        None => Action::await_change(),
    })
}

/// The new status and when to look again (a disrupted pod's timeout).
async fn compute(
    pdb: &PodDisruptionBudget,
    context: &Context,
    namespace: &str,
    now: Timestamp,
) -> Result<
    (
        k8s_openapi::api::policy::v1::PodDisruptionBudgetStatus,
        Option<Timestamp>,
    ),
    Error,
> {
    let client = &context.client;
    let spec = pdb.spec.clone().unwrap_or_default();
    let pods: Vec<Arc<Pod>> = match &spec.selector {
        // A nil selector selects nothing.
        None => Vec::new(),
        Some(selector) => {
            let requirements = parse_selector(selector)?;
            let index = context.caches.pods.read().expect("pod index lock poisoned");
            index.select(namespace, selector, &requirements)
        }
    };
    if pods.is_empty() {
        context.events.normal(
            pdb.object_ref(&()),
            "NoPods",
            "Sync",
            "No matching pods found".into(),
        );
    }
    let needs_scale = spec.max_unavailable.is_some()
        || matches!(spec.min_available, Some(IntOrString::String(_)));
    let count = async {
        let mut scales: HashMap<String, ControllerScale> = HashMap::new();
        let mut looked_up: HashSet<String> = HashSet::new();
        for pod in pods.iter().filter(|_| needs_scale) {
            if let Some(reference) = controller_of(&pod.metadata)
                && looked_up.insert(reference.uid.clone())
                && let Some(scale) =
                    controller_scale(client, &context.caches, namespace, reference).await?
            {
                scales.insert(reference.uid.clone(), scale);
            }
        }
        expected_pod_count(&spec, &pods, &scales)
    }
    .await
    .inspect_err(|e| {
        context.events.warning(
            pdb.object_ref(&()),
            "CalculateExpectedPodCountFailed",
            "Sync",
            format!("Failed to calculate the number of expected pods: {e}"),
        );
    })?;
    if !count.unmanaged.is_empty() {
        let selector = go_selector_string(spec.selector.as_ref());
        context.events.warning(
            pdb.object_ref(&()),
            "UnmanagedPods",
            "Sync",
            format!(
                "Pods selected by this PodDisruptionBudget (selector: {selector}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value."
            ),
        );
    }
    let (disrupted, recheck) = disrupted_pod_map(&pods, pdb, now);
    let healthy = count_healthy(&pods, &disrupted, now);
    Ok((budget_status(pdb, &count, healthy, disrupted, now), recheck))
}

/// The cached object `reference` names, if it is the one with its uid.
fn get_owned<K>(store: &Store<K>, namespace: &str, reference: &OwnerReference) -> Option<Arc<K>>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    let found = store.get(&ObjectRef::new(&reference.name).within(namespace))?;
    (found.meta().uid.as_deref() == Some(reference.uid.as_str())).then_some(found)
}

/// The group of an apiVersion (`apps/v1` → `apps`, `v1` → ``).
fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(group, _)| group)
}

fn counted(uid: Option<&String>, replicas: Option<i32>) -> Option<ControllerScale> {
    Some(ControllerScale {
        uid: uid?.clone(),
        scale: replicas.unwrap_or(1),
    })
}

/// Upstream's controller finders, in their order: ReplicationController,
/// Deployment (through its ReplicaSet), ReplicaSet (not owned by a
/// Deployment), StatefulSet, then any resource with a scale subresource.
async fn controller_scale(
    client: &Client,
    caches: &Caches,
    namespace: &str,
    reference: &OwnerReference,
) -> Result<Option<ControllerScale>, Error> {
    let group = group_of(&reference.api_version);
    match (group, reference.kind.as_str()) {
        ("", "ReplicationController") => {
            let rc = get_owned(&caches.replication_controllers, namespace, reference);
            Ok(rc.and_then(|rc| {
                counted(
                    rc.metadata.uid.as_ref(),
                    rc.spec.as_ref().and_then(|s| s.replicas),
                )
            }))
        }
        ("apps" | "extensions", "ReplicaSet") => {
            let Some(rs) = get_owned(&caches.replica_sets, namespace, reference) else {
                return generic_scale(client, namespace, reference).await;
            };
            if let Some(owner) = controller_of(&rs.metadata)
                && owner.kind == "Deployment"
            {
                if matches!(group_of(&owner.api_version), "apps" | "extensions")
                    && let Some(deployment) = get_owned(&caches.deployments, namespace, owner)
                {
                    return Ok(counted(
                        deployment.metadata.uid.as_ref(),
                        deployment.spec.as_ref().and_then(|s| s.replicas),
                    ));
                }
                // A ReplicaSet of a missing Deployment: only its scale subresource.
                return generic_scale(client, namespace, reference).await;
            }
            Ok(counted(
                rs.metadata.uid.as_ref(),
                rs.spec.as_ref().and_then(|s| s.replicas),
            ))
        }
        ("apps", "StatefulSet") => {
            let set = get_owned(&caches.stateful_sets, namespace, reference);
            Ok(set.and_then(|s| {
                counted(
                    s.metadata.uid.as_ref(),
                    s.spec.as_ref().and_then(|s| s.replicas),
                )
            }))
        }
        _ => generic_scale(client, namespace, reference).await,
    }
}

/// `getScaleController`: the owner's scale subresource, found through discovery.
async fn generic_scale(
    client: &Client,
    namespace: &str,
    reference: &OwnerReference,
) -> Result<Option<ControllerScale>, Error> {
    let (group, version) = match reference.api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", reference.api_version.as_str()),
    };
    let kind = GroupVersionKind::gvk(group, version, &reference.kind);
    let (resource, capabilities) = kube::discovery::pinned_kind(client, &kind).await?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    match api.get_scale(&reference.name).await {
        Ok(scale) => {
            if scale.metadata.uid.as_deref() != Some(reference.uid.as_str()) {
                return Ok(None);
            }
            Ok(Some(ControllerScale {
                uid: reference.uid.clone(),
                scale: scale.spec.and_then(|s| s.replicas).unwrap_or(0),
            }))
        }
        Err(kube::Error::Api(status)) if status.code == 404 => {
            if capabilities
                .subresources
                .iter()
                .any(|(sub, _)| sub.plural == "scale")
            {
                Ok(None)
            } else {
                let qualified = if group.is_empty() {
                    resource.plural.clone()
                } else {
                    format!("{}.{group}", resource.plural)
                };
                Err(Error::Invalid(format!(
                    "{qualified} does not implement the scale subresource"
                )))
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// Upstream's `nonTerminatingPodHasStaleDisruptionCondition`: when a pod that
/// is not terminating carries DisruptionTarget=True (not set by the kubelet,
/// not on a terminal pod), how long until the condition is stale.
pub fn stale_disruption_wait(pod: &Pod, now: Timestamp) -> Option<Duration> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let status = pod.status.as_ref()?;
    if ksim_core::status::is_pod_terminal(pod) {
        return None;
    }
    let condition = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == DISRUPTION_TARGET)?;
    if condition.status != "True" || condition.reason.as_deref() == Some(TERMINATION_BY_KUBELET) {
        return None;
    }
    let since = condition
        .last_transition_time
        .as_ref()
        .map_or(Timestamp::UNIX_EPOCH, |t| t.0);
    let stale_at = since
        .checked_add(STALE_POD_DISRUPTION_TIMEOUT)
        .unwrap_or(since);
    let wait = now.duration_until(stale_at);
    Some(Duration::try_from(wait).unwrap_or(Duration::ZERO))
}

/// Resets stale DisruptionTarget conditions: one task per pod waits until
/// its condition is stale, reads the pod again and writes the condition
/// False (`syncStalePodDisruption`).
#[derive(Clone)]
struct StaleCleanup {
    client: Client,
    clock: Clock,
    pending: Arc<Mutex<HashSet<Key>>>,
}

impl StaleCleanup {
    fn new(client: Client, clock: Clock) -> Self {
        StaleCleanup {
            client,
            clock,
            pending: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    /// Schedules the cleanup of `pod` if its condition will be stale.
    fn check(&self, pod: &Pod) {
        let Some(wait) = stale_disruption_wait(pod, self.clock.timestamp()) else {
            return;
        };
        let key = key_of(&pod.metadata);
        let fresh = self
            .pending
            .lock()
            .expect("stale cleanup lock poisoned")
            .insert(key.clone());
        if !fresh {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            let mut wait = wait;
            let result = loop {
                this.clock.sleep(wait).await;
                let _busy = this.clock.busy();
                match this.reset(&key).await {
                    Ok(Some(later)) => wait = later,
                    Ok(None) => break Ok(()),
                    Err(error) => break Err(error),
                }
            };
            this.pending
                .lock()
                .expect("stale cleanup lock poisoned")
                .remove(&key);
            if let Err(error) = result {
                tracing::debug!(%error, namespace = %key.0, pod = %key.1, "stale DisruptionTarget reset failed");
            }
        });
    }

    /// Resets the pod's condition if it is stale; if it is not stale yet,
    /// how long until it will be.
    async fn reset(&self, (namespace, name): &Key) -> Result<Option<Duration>, Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        for _ in 0..5 {
            let Some(mut pod) = api.get_opt(name).await? else {
                return Ok(None);
            };
            let now = self.clock.timestamp();
            match stale_disruption_wait(&pod, now) {
                None => return Ok(None),
                Some(wait) if !wait.is_zero() => return Ok(Some(wait)),
                Some(_) => {}
            }
            if let Some(condition) = pod
                .status
                .as_mut()
                .and_then(|s| s.conditions.as_mut())
                .and_then(|c| c.iter_mut().find(|c| c.type_ == DISRUPTION_TARGET))
            {
                condition.status = "False".into();
                condition.reason = None;
                condition.message = None;
                condition.last_transition_time =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
            }
            match api.replace_status(name, &PostParams::default(), &pod).await {
                Ok(_) => {
                    tracing::info!(%namespace, pod = %name, "reset stale DisruptionTarget condition to False");
                    return Ok(None);
                }
                Err(kube::Error::Api(status)) if status.code == 409 => continue,
                Err(kube::Error::Api(status)) if status.code == 404 => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod_with(condition: serde_json::Value, phase: &str, terminating: bool) -> Pod {
        let mut value = json!({
            "metadata": {"name": "p", "namespace": "default"},
            "status": {"phase": phase, "conditions": [condition]},
        });
        if terminating {
            value["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        serde_json::from_value(value).expect("pod")
    }

    #[test]
    fn disruption_targets_become_stale_two_minutes_after_they_were_set() {
        let now: Timestamp = "2026-01-01T00:10:00Z".parse().expect("time");
        let target = |status: &str, reason: &str, at: &str| json!({"type": "DisruptionTarget", "status": status, "reason": reason, "lastTransitionTime": at});
        let cases = [
            (
                target("True", "EvictionByEvictionAPI", "2026-01-01T00:09:00Z"),
                "Running",
                false,
                Some(Duration::from_secs(60)),
            ),
            (
                target("True", "EvictionByEvictionAPI", "2026-01-01T00:00:00Z"),
                "Running",
                false,
                Some(Duration::ZERO),
            ),
            (
                target("True", "EvictionByEvictionAPI", "2026-01-01T00:00:00Z"),
                "Pending",
                false,
                Some(Duration::ZERO),
            ),
            (
                target("True", "EvictionByEvictionAPI", "2026-01-01T00:00:00Z"),
                "Running",
                true,
                None,
            ),
            (
                target("True", "TerminationByKubelet", "2026-01-01T00:00:00Z"),
                "Running",
                false,
                None,
            ),
            (
                target("True", "EvictionByEvictionAPI", "2026-01-01T00:00:00Z"),
                "Failed",
                false,
                None,
            ),
            (
                target("False", "", "2026-01-01T00:00:00Z"),
                "Running",
                false,
                None,
            ),
            (
                json!({"type": "Ready", "status": "True"}),
                "Running",
                false,
                None,
            ),
        ];
        for (condition, phase, terminating, want) in cases {
            let pod = pod_with(condition.clone(), phase, terminating);
            assert_eq!(
                stale_disruption_wait(&pod, now),
                want,
                "{condition} {phase} terminating={terminating}"
            );
        }
    }
}
