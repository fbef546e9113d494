//! The StatefulSet controller's sync: claim the set's ControllerRevisions
//! (adopting orphans) and find the revisions (creating the
//! ControllerRevision of the template when it is new), claim the set's pods
//! (adopting orphans that match, releasing pods that stopped matching),
//! bring their claims' owner references in line with the retention policy,
//! carry out [`plan_steps`] (a pod's PersistentVolumeClaims are created
//! before it), write the status, and truncate the revision history.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::workloop::{Action, Queued};
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use super::claims::{
    ClaimOwners, Retention, claim_owner_up_to_date, claims_for, has_unexpected_controller,
    updated_claim_owners, with_storage,
};
use super::history::revisions_to_truncate;
use super::plan::{MemberPod, PodState, SetShape, Step, plan_steps};
use crate::Error;
use crate::common::{
    controller_reference, is_pod_available, is_pod_ready, key_of, parse_selector, pod_phase,
    selector_query, update_status,
};
use crate::controller_ref::{ControllerRefManager, Owner, OwnerMapper, ReleaseHints};
use crate::deployment::{compute_hash, nonzero};
use crate::events::Events;
use crate::informer::SharedInformers;
use ksim_runtime::clock::Clock;

/// The label naming a pod's revision (`<set>-<hash>`).
pub const REVISION_LABEL: &str = "controller-revision-hash";
/// The label carrying the pod's own name.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The label carrying the pod's ordinal.
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// How long to wait before retrying a failed sync.
const RETRY: Duration = Duration::from_millis(500);

struct Context {
    client: Client,
    events: Events,
    /// Owned pods that stopped matching their set's selector.
    hints: ReleaseHints,
    clock: Clock,
}

/// Runs the StatefulSet controller until the watch streams end.
pub async fn run(client: Client, informers: SharedInformers) {
    let clock = informers.clock().clone();
    let hints = ReleaseHints::default();
    let controller = Queued::<StatefulSet>::new(client.clone(), &clock);
    let mapper = OwnerMapper::new(
        controller.store(),
        |set: &StatefulSet| set.spec.as_ref().map(|s| &s.selector),
        hints.clone(),
    );
    controller
        .watches_shared_stream(informers.pod_triggers(), move |pod: Arc<Pod>| {
            mapper.owners_of(pod.as_ref())
        })
        .run(
            "statefulset",
            |set, context| Box::pin(reconcile(set, context)),
            error_policy,
            Arc::new(Context {
                events: Events::new(client.clone(), "statefulset-controller", &clock),
                client,
                hints,
                clock,
            }),
        )
        .await;
}

fn error_policy(_set: Arc<StatefulSet>, error: &Error, _context: Arc<Context>) -> Action {
    tracing::debug!(%error, "statefulset sync will be retried");
    Action::requeue(RETRY)
}

/// The ordinal a pod of `set` carries in its name.
fn ordinal_of(set: &str, pod: &str) -> Option<i32> {
    let suffix = pod.strip_prefix(set)?.strip_prefix('-')?;
    if suffix.is_empty() || !suffix.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    suffix.parse().ok()
}

fn state_of(pod: &Pod) -> PodState {
    if pod.metadata.deletion_timestamp.is_some() {
        PodState::Terminating
    } else if ksim_core::status::is_pod_terminal(pod) {
        PodState::Finished
    } else if pod_phase(pod) == "Running" && is_pod_ready(pod) {
        PodState::Healthy
    } else {
        PodState::Starting
    }
}

/// The data of a StatefulSet's ControllerRevision: its template, replacing.
pub(crate) fn revision_data(template: &PodTemplateSpec) -> Result<serde_json::Value, Error> {
    let mut template = serde_json::to_value(template)?;
    template["$patch"] = json!("replace");
    Ok(json!({"spec": {"template": template}}))
}

/// The template a ControllerRevision recorded.
fn template_of(revision: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut template = revision
        .data
        .as_ref()?
        .0
        .get("spec")?
        .get("template")?
        .clone();
    if let Some(map) = template.as_object_mut() {
        map.remove("$patch");
    }
    serde_json::from_value(template).ok()
}

async fn reconcile(cached: Arc<StatefulSet>, context: Arc<Context>) -> Result<Action, Error> {
    let (namespace, name) = key_of(&cached.metadata);
    let sets: Api<StatefulSet> = Api::namespaced(context.client.clone(), &namespace);
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
        .ok_or_else(|| Error::Invalid(format!("statefulset {namespace}/{name} has no spec")))?;
    let selector = parse_selector(&spec.selector)?;
    let owner = controller_reference("apps/v1", "StatefulSet", &set.metadata);

    // Revisions: the update revision is the template's; the current one is
    // what the status says, or the update revision on the first sync.
    let revisions_api: Api<ControllerRevision> =
        Api::namespaced(context.client.clone(), &namespace);
    let mut manager = ControllerRefManager::new(
        Owner {
            reference: &owner,
            namespace: &namespace,
            deleting: false,
        },
        "StatefulSet",
        sets.clone(),
        &selector,
    );
    let listed = revisions_api
        .list(&ListParams::default().labels(&selector_query(&spec.selector)))
        .await?
        .items;
    let mut revisions: Vec<ControllerRevision> =
        manager.claim(&revisions_api, listed, |_| true).await?;
    let collision_count = Some(
        set.status
            .as_ref()
            .and_then(|s| s.collision_count)
            .unwrap_or(0),
    );
    let update_revision = format!("{name}-{}", compute_hash(&spec.template, collision_count));
    if !revisions
        .iter()
        .any(|r| r.metadata.name.as_deref() == Some(update_revision.as_str()))
    {
        let next = revisions.iter().map(|r| r.revision).max().unwrap_or(0) + 1;
        let revision = ControllerRevision {
            metadata: ObjectMeta {
                name: Some(update_revision.clone()),
                namespace: Some(namespace.clone()),
                labels: spec
                    .template
                    .metadata
                    .as_ref()
                    .and_then(|m| m.labels.clone()),
                owner_references: Some(vec![owner.clone()]),
                ..ObjectMeta::default()
            },
            data: Some(RawExtension(revision_data(&spec.template)?)),
            revision: next,
        };
        match revisions_api
            .create(&PostParams::default(), &revision)
            .await
        {
            Ok(created) => revisions.push(created),
            Err(e) => {
                let e = Error::from(e);
                if !e.is_conflict() {
                    return Err(e);
                }
            }
        }
    }
    let status = set.status.clone().unwrap_or_default();
    let current_revision = status
        .current_revision
        .clone()
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| update_revision.clone());

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
    let pods: Vec<Pod> = manager
        .claim(&pods_api, listed, |p| {
            ordinal_of(&name, p.metadata.name.as_deref().unwrap_or("")).is_some()
        })
        .await?;
    let members: Vec<MemberPod> = pods
        .iter()
        .filter_map(|p| {
            let pod_name = p.name_any();
            Some(MemberPod {
                ordinal: ordinal_of(&name, &pod_name)?,
                name: pod_name,
                revision: p.labels().get(REVISION_LABEL).cloned().unwrap_or_default(),
                state: state_of(p),
            })
        })
        .collect();
    let rolling = spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("RollingUpdate")
        == "RollingUpdate";
    let shape = SetShape {
        replicas: spec.replicas.unwrap_or(1),
        start: spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0),
        parallel: spec.pod_management_policy.as_deref() == Some("Parallel"),
        partition: rolling.then(|| {
            spec.update_strategy
                .as_ref()
                .and_then(|s| s.rolling_update.as_ref())
                .and_then(|r| r.partition)
                .unwrap_or(0)
        }),
        current_revision: current_revision.clone(),
        update_revision: update_revision.clone(),
    };

    let mut claims = Claims::list(&context, &set).await?;
    let mut failure = claims.fix_owners(&context, &set, &pods).await.err();
    let steps = if failure.is_some() {
        Vec::new()
    } else {
        plan_steps(&shape, &members)
    };
    for step in steps {
        let result = match &step {
            Step::Create { ordinal, revision } => {
                let template = if *revision == update_revision {
                    Some(spec.template.clone())
                } else {
                    revisions
                        .iter()
                        .find(|r| r.metadata.name.as_deref() == Some(revision.as_str()))
                        .and_then(template_of)
                };
                let template = template.unwrap_or_else(|| spec.template.clone());
                let pod = set_pod(&set, &template, &owner, *ordinal, revision);
                let pod_name = pod.metadata.name.clone().unwrap_or_default();
                if let Err(e) = claims
                    .create_missing(&context, &set, *ordinal, &pod_name)
                    .await
                {
                    let note =
                        format!("create Pod {pod_name} in StatefulSet {name} failed error: {e}");
                    context
                        .events
                        .warning(set.object_ref(&()), "FailedCreate", "Create", note);
                    failure = Some(e);
                    break;
                }
                let created = pods_api.create(&PostParams::default(), &pod).await;
                if let Ok(created) = &created
                    && let Err(e) = claims.fix_pod_owners(&context, &set, created).await
                {
                    let note =
                        format!("update Pod {pod_name} in StatefulSet {name} failed error: {e}");
                    context
                        .events
                        .warning(set.object_ref(&()), "FailedUpdate", "Update", note);
                    failure = Some(e);
                    break;
                }
                created
                    .map(|_| {
                        (
                            "SuccessfulCreate",
                            "Create",
                            format!("create Pod {pod_name} in StatefulSet {name} successful"),
                        )
                    })
                    .map_err(|e| {
                        (
                            "FailedCreate",
                            "Create",
                            format!(
                                "create Pod {pod_name} in StatefulSet {name} failed error: {e}"
                            ),
                            e,
                        )
                    })
            }
            Step::Delete(pod_name) => pods_api
                .delete(pod_name, &DeleteParams::default())
                .await
                .map(|_| {
                    (
                        "SuccessfulDelete",
                        "Delete",
                        format!("delete Pod {pod_name} in StatefulSet {name} successful"),
                    )
                })
                .map_err(|e| {
                    (
                        "FailedDelete",
                        "Delete",
                        format!("delete Pod {pod_name} in StatefulSet {name} failed error: {e}"),
                        e,
                    )
                }),
        };
        match result {
            Ok((reason, action, note)) => {
                context
                    .events
                    .normal(set.object_ref(&()), reason, action, note);
            }
            Err((reason, action, note, e)) => {
                let e = Error::from(e);
                if e.is_not_found() || e.is_conflict() {
                    continue;
                }
                context
                    .events
                    .warning(set.object_ref(&()), reason, action, note);
                failure = Some(e);
                break;
            }
        }
    }

    let now = context.clock.timestamp();
    let min_ready_seconds = spec.min_ready_seconds.unwrap_or(0);
    let new_status = compute_status(
        &set,
        &pods,
        &current_revision,
        &update_revision,
        rolling,
        min_ready_seconds,
        now,
    );
    if set.status.as_ref() != Some(&new_status) {
        match update_status(&sets, &name, |fresh| {
            fresh.status = Some(new_status.clone())
        })
        .await
        {
            Ok(_) => {}
            Err(e) if e.is_not_found() => return Ok(Action::await_change()),
            Err(e) => return Err(e),
        }
    }
    // The set's revision history limit (`truncateHistory`).
    let mut live: HashSet<&str> = [current_revision.as_str(), update_revision.as_str()]
        .into_iter()
        .collect();
    live.extend(new_status.current_revision.as_deref());
    live.extend(
        pods.iter()
            .filter_map(|p| p.labels().get(REVISION_LABEL).map(String::as_str)),
    );
    let limit = spec.revision_history_limit.unwrap_or(10);
    for old in revisions_to_truncate(&revisions, &live, limit) {
        match revisions_api.delete(&old, &DeleteParams::default()).await {
            Ok(_) => tracing::debug!(statefulset = %name, revision = %old, "truncated history"),
            Err(e) => {
                let e = Error::from(e);
                if !e.is_not_found() {
                    failure.get_or_insert(e);
                    break;
                }
            }
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    if min_ready_seconds > 0 && new_status.ready_replicas != new_status.available_replicas {
        return Ok(Action::requeue(Duration::from_secs(
            u64::try_from(min_ready_seconds).unwrap_or(1),
        )));
    }
    Ok(Action::await_change())
}

/// The status of `set` with `pods` (`computeReplicaStatus` and
/// `completeRollingUpdate`).
fn compute_status(
    set: &StatefulSet,
    pods: &[Pod],
    current_revision: &str,
    update_revision: &str,
    rolling: bool,
    min_ready_seconds: i32,
    now: Timestamp,
) -> StatefulSetStatus {
    let live: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    let count = |f: &dyn Fn(&Pod) -> bool| {
        i32::try_from(live.iter().filter(|p| f(p)).count()).unwrap_or(i32::MAX)
    };
    let revision_is =
        |p: &Pod, r: &str| p.labels().get(REVISION_LABEL).map(String::as_str) == Some(r);
    let replicas = count(&|_| true);
    let ready = count(&|p| pod_phase(p) == "Running" && is_pod_ready(p));
    let mut current = count(&|p| revision_is(p, current_revision));
    let updated = count(&|p| revision_is(p, update_revision));
    let mut current_revision = current_revision.to_string();
    if rolling && updated == replicas && ready == replicas {
        current = updated;
        current_revision = update_revision.to_string();
    }
    let previous = set.status.clone().unwrap_or_default();
    StatefulSetStatus {
        replicas,
        ready_replicas: nonzero(ready),
        available_replicas: Some(count(&|p| {
            pod_phase(p) == "Running" && is_pod_available(p, min_ready_seconds, now)
        })),
        current_replicas: nonzero(current),
        updated_replicas: nonzero(updated),
        current_revision: Some(current_revision),
        update_revision: Some(update_revision.to_string()),
        observed_generation: set.metadata.generation,
        collision_count: Some(previous.collision_count.unwrap_or(0)),
        conditions: previous.conditions,
    }
}

/// The pod of `ordinal` (`newVersionedStatefulSetPod`): the template's
/// labels plus the identity labels, hostname and subdomain.
fn set_pod(
    set: &StatefulSet,
    template: &PodTemplateSpec,
    owner: &OwnerReference,
    ordinal: i32,
    revision: &str,
) -> Pod {
    let (namespace, name) = key_of(&set.metadata);
    let pod_name = format!("{name}-{ordinal}");
    let template_meta = template.metadata.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = template_meta.labels.unwrap_or_default();
    labels.insert(POD_NAME_LABEL.into(), pod_name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    labels.insert(REVISION_LABEL.into(), revision.to_string());
    let mut spec = with_storage(set, ordinal, template.spec.clone().unwrap_or_default());
    spec.hostname = Some(pod_name.clone());
    if let Some(service) = set
        .spec
        .as_ref()
        .and_then(|s| s.service_name.clone())
        .filter(|s| !s.is_empty())
    {
        spec.subdomain = Some(service);
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(pod_name),
            namespace: Some(namespace),
            labels: Some(labels),
            annotations: template_meta.annotations,
            finalizers: template_meta.finalizers,
            owner_references: Some(vec![owner.clone()]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The claims of the set's pods, read once per sync (they carry the
/// selector's matchLabels), and what is done to them.
struct Claims {
    api: Api<PersistentVolumeClaim>,
    by_name: HashMap<String, PersistentVolumeClaim>,
}

impl Claims {
    /// Lists the set's claims (nothing when it has no claim templates).
    async fn list(context: &Context, set: &StatefulSet) -> Result<Self, Error> {
        let (namespace, _) = key_of(&set.metadata);
        let api: Api<PersistentVolumeClaim> = Api::namespaced(context.client.clone(), &namespace);
        let mut by_name = HashMap::new();
        if !claims_for(set, 0).is_empty() {
            let query = set
                .spec
                .as_ref()
                .and_then(|s| s.selector.match_labels.as_ref())
                .map(|labels| {
                    labels
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            for claim in api.list(&ListParams::default().labels(&query)).await?.items {
                by_name.insert(claim.name_any(), claim);
            }
        }
        Ok(Claims { api, by_name })
    }

    /// `createPersistentVolumeClaims`: creates the pod's missing claims
    /// with upstream's events; a claim being deleted is an error.
    async fn create_missing(
        &mut self,
        context: &Context,
        set: &StatefulSet,
        ordinal: i32,
        pod_name: &str,
    ) -> Result<(), Error> {
        let set_name = set.name_any();
        let mut errors = Vec::new();
        for (_, claim) in claims_for(set, ordinal) {
            let claim_name = claim.name_any();
            if let Some(existing) = self.by_name.get(&claim_name) {
                if existing.metadata.deletion_timestamp.is_some() {
                    errors.push(format!("pvc {claim_name} is being deleted"));
                }
                continue;
            }
            match self.api.create(&PostParams::default(), &claim).await {
                Ok(created) => {
                    let note = format!(
                        "create Claim {claim_name} Pod {pod_name} in StatefulSet {set_name} success"
                    );
                    context
                        .events
                        .normal(set.object_ref(&()), "SuccessfulCreate", "Create", note);
                    self.by_name.insert(claim_name, created);
                }
                Err(e) => {
                    let e = Error::from(e);
                    errors.push(format!("failed to create PVC {claim_name}: {e}"));
                    if !e.is_conflict() {
                        let note = format!(
                            "create Claim {claim_name} for Pod {pod_name} in StatefulSet {set_name} failed error: {e}"
                        );
                        context
                            .events
                            .warning(set.object_ref(&()), "FailedCreate", "Create", note);
                    }
                }
            }
        }
        match errors.len() {
            0 => Ok(()),
            1 => Err(Error::Invalid(errors.remove(0))),
            _ => Err(Error::Invalid(format!("[{}]", errors.join(", ")))),
        }
    }

    /// `UpdatePodClaimForRetentionPolicy`: brings the owner references of
    /// the pod's claims in line with the retention policy.
    async fn fix_pod_owners(
        &mut self,
        context: &Context,
        set: &StatefulSet,
        pod: &Pod,
    ) -> Result<(), Error> {
        let set_name = set.name_any();
        let Some(ordinal) = ordinal_of(&set_name, &pod.name_any()) else {
            return Ok(());
        };
        let retention = Retention::of(set);
        let set_ref = controller_reference("apps/v1", "StatefulSet", &set.metadata);
        let pod_ref = controller_reference("v1", "Pod", &pod.metadata);
        let owners = ClaimOwners {
            set: &set_ref,
            pod: &pod_ref,
            scaled_down: !in_range(set, ordinal),
        };
        for (_, wanted) in claims_for(set, ordinal) {
            let claim_name = wanted.name_any();
            let Some(claim) = self.by_name.get(&claim_name) else {
                continue;
            };
            let refs = claim.metadata.owner_references.clone().unwrap_or_default();
            if has_unexpected_controller(&refs, &owners, retention) {
                let note = format!(
                    "PersistentVolumeClaim {claim_name} has a conflicting OwnerReference that acts as a manging controller, the retention policy is ignored for this claim"
                );
                context.events.warning(
                    set.object_ref(&()),
                    "ConflictingController",
                    "Update",
                    note,
                );
            }
            if claim_owner_up_to_date(&refs, &owners, retention) {
                continue;
            }
            let mut updated = claim.clone();
            updated.metadata.owner_references =
                Some(updated_claim_owners(&refs, &owners, retention));
            match self
                .api
                .replace(&claim_name, &PostParams::default(), &updated)
                .await
            {
                Ok(replaced) => {
                    self.by_name.insert(claim_name, replaced);
                }
                Err(e) => {
                    return Err(Error::Invalid(format!(
                        "could not update claim {claim_name} for delete policy ownerRefs: {e}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// For every pod of the set: the missing claims of pending pods are
    /// created, and the claims' owner references follow the retention
    /// policy (condemned pods included, before they are deleted).
    async fn fix_owners(
        &mut self,
        context: &Context,
        set: &StatefulSet,
        pods: &[Pod],
    ) -> Result<(), Error> {
        if claims_for(set, 0).is_empty() {
            return Ok(());
        }
        let set_name = set.name_any();
        for pod in pods {
            let pod_name = pod.name_any();
            let Some(ordinal) = ordinal_of(&set_name, &pod_name) else {
                continue;
            };
            let terminating = pod.metadata.deletion_timestamp.is_some();
            if !terminating && pod_phase(pod) == "Pending" {
                self.create_missing(context, set, ordinal, &pod_name)
                    .await?;
            }
            if !terminating || !in_range(set, ordinal) {
                self.fix_pod_owners(context, set, pod).await?;
            }
        }
        Ok(())
    }
}

/// Whether `ordinal` is within the set's range of ordinals
/// (`podInOrdinalRange`).
fn in_range(set: &StatefulSet, ordinal: i32) -> bool {
    let spec = set.spec.as_ref();
    let start = spec
        .and_then(|s| s.ordinals.as_ref())
        .and_then(|o| o.start)
        .unwrap_or(0);
    let replicas = spec.and_then(|s| s.replicas).unwrap_or(1);
    ordinal >= start && ordinal < start.saturating_add(replicas)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_are_read_from_pod_names_of_the_set_only() {
        let cases = [
            ("web", "web-0", Some(0)),
            ("web", "web-12", Some(12)),
            ("web", "web-x", None),
            ("web", "web-", None),
            ("web", "webby-1", None),
            ("web", "web-1-2", None),
        ];
        for (set, pod, want) in cases {
            assert_eq!(ordinal_of(set, pod), want, "{pod}");
        }
    }

    #[test]
    fn a_revision_records_the_template_it_was_made_from() {
        let template: PodTemplateSpec = serde_json::from_value(json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}
        }))
        .expect("template");
        let revision = ControllerRevision {
            data: Some(RawExtension(revision_data(&template).expect("data"))),
            ..ControllerRevision::default()
        };
        assert_eq!(template_of(&revision), Some(template));
    }
}
