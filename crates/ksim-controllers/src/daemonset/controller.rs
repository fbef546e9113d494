//! The DaemonSet controller's sync: claim the set's ControllerRevisions
//! and make sure one records the current template (`constructHistory`),
//! claim the set's pods (adopting matching orphans, releasing pods that
//! stopped matching), group them by target node, create the missing ones,
//! delete failed, surplus, misplaced and orphaned (node gone) ones, replace
//! outdated pods within maxUnavailable, delete old revisions beyond
//! `revisionHistoryLimit`, and write the status. Node changes that matter
//! (labels, taints, additions, removals) requeue every DaemonSet.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, future};
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};

use super::history::{next_revision, revisions_to_clean, split_current};
use super::placement::{daemon_pod_spec, node_fit, target_node};
use crate::Error;
use crate::common::{
    controller_reference, is_pod_available, is_pod_ready, key_of, parse_selector, pod_phase,
    scaled_value, selector_query, update_status,
};
use crate::common::{create_pod, delete_pod};
use crate::controller_ref::{ControllerRefManager, Owner, OwnerMapper, ReleaseHints};
use crate::deployment::compute_hash;
use crate::events::Events;
use crate::statefulset::{REVISION_LABEL, revision_data};

/// The label carrying the set's generation when the pod was made.
pub const TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";

/// How long to wait before retrying a failed sync.
const RETRY: Duration = Duration::from_millis(500);

struct Context {
    client: Client,
    events: Events,
    /// Owned pods that stopped matching their set's selector.
    hints: ReleaseHints,
}

/// What of a node decides where daemons run.
fn node_fingerprint(node: &Node) -> String {
    let spec = node.spec.as_ref();
    serde_json::to_string(&(
        &node.metadata.labels,
        spec.and_then(|s| s.taints.as_ref()),
        spec.and_then(|s| s.unschedulable),
    ))
    .unwrap_or_default()
}

/// Runs the DaemonSet controller until the watch streams end.
pub async fn run(client: Client) {
    let sets: Api<DaemonSet> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    let mut seen: HashMap<String, String> = HashMap::new();
    let node_changes =
        watcher::watcher(nodes, watcher::Config::default()).filter_map(move |event| {
            let changed = match event {
                Ok(watcher::Event::Apply(node) | watcher::Event::InitApply(node)) => {
                    let fingerprint = node_fingerprint(&node);
                    seen.insert(node.name_any(), fingerprint.clone()) != Some(fingerprint)
                }
                Ok(watcher::Event::Delete(node)) => {
                    seen.remove(&node.name_any());
                    true
                }
                Ok(watcher::Event::InitDone) => true,
                Ok(watcher::Event::Init) | Err(_) => false,
            };
            future::ready(changed.then_some(()))
        });
    let hints = ReleaseHints::default();
    let controller = Controller::new(sets, watcher::Config::default());
    let mapper = OwnerMapper::new(
        controller.store(),
        |set: &DaemonSet| set.spec.as_ref().map(|s| &s.selector),
        hints.clone(),
    );
    controller
        .watches(pods, watcher::Config::default(), move |pod: Pod| {
            mapper.owners_of(&pod)
        })
        .reconcile_all_on(node_changes)
        .run(
            reconcile,
            error_policy,
            Arc::new(Context {
                events: Events::new(client.clone(), "daemonset-controller"),
                client,
                hints,
            }),
        )
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "daemonset sync failed");
            }
        })
        .await;
}

fn error_policy(_set: Arc<DaemonSet>, error: &Error, _context: Arc<Context>) -> Action {
    tracing::debug!(%error, "daemonset sync will be retried");
    Action::requeue(RETRY)
}

/// The creation order of pods (oldest first, then by name).
fn oldest_first(a: &&Pod, b: &&Pod) -> std::cmp::Ordering {
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    created(a)
        .cmp(&created(b))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

async fn reconcile(cached: Arc<DaemonSet>, context: Arc<Context>) -> Result<Action, Error> {
    let (namespace, name) = key_of(&cached.metadata);
    let sets: Api<DaemonSet> = Api::namespaced(context.client.clone(), &namespace);
    let Some(set) = sets.get_opt(&name).await? else {
        // Gone: nothing of it is left to release.
        context.hints.take(&namespace, &name);
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
    let (current, old_revisions) =
        construct_history(&revisions_api, &sets, &set, &mut manager).await?;
    let hash = current
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(REVISION_LABEL).cloned())
        .unwrap_or_else(|| compute_hash(&spec.template, collision_count));
    let min_ready_seconds = spec.min_ready_seconds.unwrap_or(0);
    let now = Timestamp::now();

    let nodes: Vec<Node> = Api::<Node>::all(context.client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let pods_api: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    let mut listed = pods_api
        .list(&ListParams::default().labels(&selector_query(&spec.selector)))
        .await?
        .items;
    // Owned pods that stopped matching are not listed: the watch named them.
    context
        .hints
        .add_recorded(&pods_api, &namespace, &name, &mut listed)
        .await?;
    let pods: Vec<Pod> = manager.claim(&pods_api, listed, |_| true).await?;
    let mut by_node: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
    let mut deletions: Vec<String> = Vec::new();
    for pod in &pods {
        match target_node(pod) {
            Some(node) => by_node.entry(node).or_default().push(pod),
            None => deletions.push(pod.name_any()),
        }
    }
    let updated = |p: &Pod| p.labels().get(REVISION_LABEL) == Some(&hash);
    let available = |p: &Pod| is_pod_available(p, min_ready_seconds, now);

    let mut creations: Vec<String> = Vec::new();
    let mut status = DaemonSetStatus {
        observed_generation: set.metadata.generation,
        collision_count,
        conditions: set.status.as_ref().and_then(|s| s.conditions.clone()),
        ..DaemonSetStatus::default()
    };
    let (mut number_available, mut updated_scheduled) = (0, 0);
    // Pods kept on desired nodes that are outdated, and whether available.
    let mut outdated: Vec<(&Pod, bool)> = Vec::new();
    let mut unavailable = 0;
    for node in &nodes {
        let node_name = node.name_any();
        let fit = node_fit(&template_spec, node);
        let mut daemons: Vec<&Pod> = by_node.remove(&node_name).unwrap_or_default();
        daemons.sort_by(oldest_first);
        let (terminating, live): (Vec<&Pod>, Vec<&Pod>) = daemons
            .into_iter()
            .partition(|p| p.metadata.deletion_timestamp.is_some());
        if fit.should_run {
            status.desired_number_scheduled += 1;
            let (failed, running): (Vec<&Pod>, Vec<&Pod>) =
                live.into_iter().partition(|p| pod_phase(p) == "Failed");
            deletions.extend(failed.iter().map(|p| p.name_any()));
            match running.split_first() {
                None => {
                    unavailable += 1;
                    if terminating.is_empty() {
                        creations.push(node_name);
                    }
                }
                Some((kept, surplus)) => {
                    deletions.extend(surplus.iter().map(|p| p.name_any()));
                    status.current_number_scheduled += 1;
                    if is_pod_ready(kept) {
                        status.number_ready += 1;
                    }
                    let is_available = available(kept);
                    if is_available {
                        number_available += 1;
                    } else {
                        unavailable += 1;
                    }
                    if updated(kept) {
                        updated_scheduled += 1;
                    } else {
                        outdated.push((kept, is_available));
                    }
                }
            }
        } else if !live.is_empty() {
            status.number_misscheduled += 1;
            if !fit.should_continue_running {
                deletions.extend(live.iter().map(|p| p.name_any()));
            }
        }
    }
    // Pods of nodes that no longer exist.
    for pods in by_node.values() {
        deletions.extend(
            pods.iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .map(|p| p.name_any()),
        );
    }
    status.number_available = Some(number_available);
    status.number_unavailable = Some(status.desired_number_scheduled - number_available);
    status.updated_number_scheduled = Some(updated_scheduled);

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
        let max_unavailable =
            scaled_value(&max_unavailable, status.desired_number_scheduled, true)?.max(1);
        let mut budget = max_unavailable - unavailable;
        outdated.sort_by_key(|(_, is_available)| *is_available);
        for (pod, is_available) in outdated {
            if !is_available {
                deletions.push(pod.name_any());
            } else if budget > 0 {
                budget -= 1;
                deletions.push(pod.name_any());
            }
        }
    }

    let mut failure = None;
    for node_name in &creations {
        let pod = daemon_pod(&set, &owner, node_name, &hash);
        if let Err(e) = create_pod(&pods_api, &context.events, set.object_ref(&()), &pod).await {
            failure = Some(e);
            break;
        }
    }
    for pod_name in &deletions {
        let owner = set.object_ref(&());
        match delete_pod(&pods_api, &context.events, owner, pod_name).await {
            Err(e) if !e.is_not_found() => failure = Some(e),
            _ => {}
        }
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

    if set.status.as_ref() != Some(&status) {
        match update_status(&sets, &name, |fresh| fresh.status = Some(status.clone())).await {
            Ok(_) => {}
            Err(e) if e.is_not_found() => return Ok(Action::await_change()),
            Err(e) => return Err(e),
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    if min_ready_seconds > 0 && status.number_ready != number_available {
        return Ok(Action::requeue(Duration::from_secs(
            u64::try_from(min_ready_seconds).unwrap_or(1),
        )));
    }
    Ok(Action::await_change())
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
) -> Result<(ControllerRevision, Vec<ControllerRevision>), Error> {
    let spec = set
        .spec
        .as_ref()
        .ok_or_else(|| Error::Invalid("daemonset has no spec".into()))?;
    let listed = api
        .list(&ListParams::default().labels(&selector_query(&spec.selector)))
        .await?
        .items;
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
