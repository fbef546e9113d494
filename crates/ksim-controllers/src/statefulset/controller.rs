//! The StatefulSet controller's sync: find the revisions (creating the
//! ControllerRevision of the template when it is new), read the set's pods,
//! carry out [`plan_steps`], and write the status.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use super::plan::{MemberPod, PodState, SetShape, Step, plan_steps};
use crate::Error;
use crate::common::{
    controller_of, controller_reference, is_pod_available, is_pod_ready, key_of, parse_selector,
    pod_phase, selector_matches, selector_query, update_status,
};
use crate::deployment::{compute_hash, nonzero};
use crate::events::Events;

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
}

/// Runs the StatefulSet controller until the watch streams end.
pub async fn run(client: Client) {
    let sets: Api<StatefulSet> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    Controller::new(sets, watcher::Config::default())
        .owns(pods, watcher::Config::default())
        .run(
            reconcile,
            error_policy,
            Arc::new(Context {
                events: Events::new(client.clone(), "statefulset-controller"),
                client,
            }),
        )
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "statefulset sync failed");
            }
        })
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
    } else if matches!(pod_phase(pod), "Succeeded" | "Failed") {
        PodState::Finished
    } else if pod_phase(pod) == "Running" && is_pod_ready(pod) {
        PodState::Healthy
    } else {
        PodState::Starting
    }
}

/// The data of a StatefulSet's ControllerRevision: its template, replacing.
fn revision_data(template: &PodTemplateSpec) -> Result<serde_json::Value, Error> {
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
    let revisions: Vec<ControllerRevision> = revisions_api
        .list(&ListParams::default().labels(&selector_query(&spec.selector)))
        .await?
        .items
        .into_iter()
        .filter(|r| controller_of(&r.metadata).is_some_and(|c| c.uid == owner.uid))
        .collect();
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
            Ok(_) => {}
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
    let pods: Vec<Pod> = pods_api
        .list(&ListParams::default().labels(&selector_query(&spec.selector)))
        .await?
        .items
        .into_iter()
        .filter(|p| controller_of(&p.metadata).is_some_and(|c| c.uid == owner.uid))
        .filter(|p| selector_matches(&selector, p.metadata.labels.as_ref()))
        .collect();
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

    let mut failure = None;
    for step in plan_steps(&shape, &members) {
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
                pods_api
                    .create(&PostParams::default(), &pod)
                    .await
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

    let now = Timestamp::now();
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
    let mut spec = template.spec.clone().unwrap_or_default();
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
