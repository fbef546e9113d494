//! The ReplicaSet controller's sync: claim pods (adopt matching orphans,
//! release owned pods that no longer match), create or delete pods until the
//! active ones number `spec.replicas`, and write the status.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::future::join_all;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use super::ranking::pods_to_delete;
use crate::Error;
use crate::common::{
    controller_of, controller_reference, is_pod_active, is_pod_available, is_pod_ready, key_of,
    parse_selector, selector_matches, selector_query, update_status,
};
use crate::deployment::nonzero;
use crate::events::Events;

/// At most this many pods are created or deleted in one sync (upstream's `BurstReplicas`).
pub const BURST_REPLICAS: usize = 500;

/// How long to wait before retrying a failed sync.
const RETRY: Duration = Duration::from_millis(500);

struct Context {
    client: Client,
    events: Events,
    /// ReplicaSets owning pods that stopped matching their selector.
    release_hints: Mutex<HashSet<(String, String)>>,
}

/// Runs the ReplicaSet controller until the watch streams end.
pub async fn run(client: Client) {
    let replica_sets: Api<ReplicaSet> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    let controller = Controller::new(replica_sets, watcher::Config::default());
    let store = controller.store();
    let context = Arc::new(Context {
        events: Events::new(client.clone(), "replicaset-controller"),
        client,
        release_hints: Mutex::new(HashSet::new()),
    });
    let mapper_context = context.clone();
    controller
        .watches(pods, watcher::Config::default(), move |pod| {
            replica_sets_of_pod(&store, &mapper_context, &pod)
        })
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "replicaset sync failed");
            }
        })
        .await;
}

/// The ReplicaSets a pod event concerns: its controller, or every ReplicaSet
/// of its namespace whose selector matches an orphan.
fn replica_sets_of_pod(
    store: &Store<ReplicaSet>,
    context: &Context,
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
                let mut hints = context
                    .release_hints
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
    store
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
        .collect()
}

fn error_policy(_rs: Arc<ReplicaSet>, error: &Error, _context: Arc<Context>) -> Action {
    tracing::debug!(%error, "replicaset sync will be retried");
    Action::requeue(RETRY)
}

async fn reconcile(cached: Arc<ReplicaSet>, context: Arc<Context>) -> Result<Action, Error> {
    let (namespace, name) = key_of(&cached.metadata);
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
    let owner = controller_reference("apps/v1", "ReplicaSet", &rs.metadata);
    let deleting = rs.metadata.deletion_timestamp.is_some();

    let listed = pods_api
        .list(&ListParams::default().labels(&selector_query(&spec.selector)))
        .await?
        .items;
    let mut owned = Vec::with_capacity(listed.len());
    for pod in listed {
        match controller_of(&pod.metadata) {
            Some(reference) if reference.uid == owner.uid => owned.push(pod),
            Some(_) => {}
            None if !deleting && pod.metadata.deletion_timestamp.is_none() => {
                match adopt(&pods_api, &pod, &owner).await {
                    Ok(adopted) => owned.push(adopted),
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(e),
                }
            }
            None => {}
        }
    }
    let hinted = context
        .release_hints
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .remove(&(namespace.clone(), name.clone()));
    if hinted {
        release_unmatched(&pods_api, &owner.uid, &selector).await?;
    }

    let active: Vec<Pod> = owned.into_iter().filter(is_pod_active).collect();
    let mut manage_error = None;
    if !deleting {
        let want = usize::try_from(spec.replicas.unwrap_or(1).max(0)).unwrap_or(0);
        if active.len() < want {
            let count = (want - active.len()).min(BURST_REPLICAS);
            if let Err(e) = create_pods(
                &pods_api,
                &rs,
                &spec.template,
                &owner,
                count,
                &context.events,
            )
            .await
            {
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
            let related = indirectly_related_pods(&replica_sets, &pods_api, &rs, &active).await?;
            let victims = pods_to_delete(&active, &related, count, Timestamp::now());
            let deletions = victims.iter().map(|pod| {
                let pods_api = pods_api.clone();
                let pod_name = pod.name_any();
                async move {
                    let result = pods_api.delete(&pod_name, &DeleteParams::default()).await;
                    (pod_name, result)
                }
            });
            for (pod_name, result) in join_all(deletions).await {
                match result.map_err(Error::from) {
                    Ok(_) => context.events.normal(
                        rs.object_ref(&()),
                        "SuccessfulDelete",
                        "Delete",
                        format!("Deleted pod: {pod_name}"),
                    ),
                    Err(e) if e.is_not_found() => {}
                    Err(e) => {
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

    let now = Timestamp::now();
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
        match update_status(&replica_sets, &name, |fresh| {
            fresh.status = Some(status.clone())
        })
        .await
        {
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

/// The status a ReplicaSet reports for its active pods.
fn compute_status(
    rs: &ReplicaSet,
    active: &[Pod],
    template_labels: &BTreeMap<String, String>,
    min_ready_seconds: i32,
    failure: Option<(&str, String)>,
    now: Timestamp,
) -> ReplicaSetStatus {
    let count = |f: &dyn Fn(&Pod) -> bool| {
        i32::try_from(active.iter().filter(|p| f(p)).count()).unwrap_or(i32::MAX)
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
/// `getIndirectlyRelatedPods`; just `own` without a controller.
async fn indirectly_related_pods(
    replica_sets: &Api<ReplicaSet>,
    pods: &Api<Pod>,
    rs: &ReplicaSet,
    own: &[Pod],
) -> Result<Vec<Pod>, Error> {
    let Some(controller) = controller_of(&rs.metadata) else {
        return Ok(own.to_vec());
    };
    let mut related = own.to_vec();
    for sibling in replica_sets.list(&ListParams::default()).await?.items {
        let same_controller =
            controller_of(&sibling.metadata).is_some_and(|c| c.uid == controller.uid);
        if !same_controller || sibling.metadata.uid == rs.metadata.uid {
            continue;
        }
        let Some(spec) = sibling.spec.as_ref() else {
            continue;
        };
        let sibling_uid = sibling.metadata.uid.clone().unwrap_or_default();
        let listed = pods
            .list(&ListParams::default().labels(&selector_query(&spec.selector)))
            .await?
            .items;
        related.extend(listed.into_iter().filter(|p| {
            is_pod_active(p) && controller_of(&p.metadata).is_some_and(|c| c.uid == sibling_uid)
        }));
    }
    Ok(related)
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
    pods: &Api<Pod>,
    owner_uid: &str,
    selector: &ksim_core::selector::LabelSelectorRequirements,
) -> Result<(), Error> {
    for pod in pods.list(&ListParams::default()).await?.items {
        let owned = controller_of(&pod.metadata).is_some_and(|r| r.uid == owner_uid);
        if !owned || selector_matches(selector, pod.metadata.labels.as_ref()) {
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
/// the first batch with a failure.
async fn create_pods(
    pods: &Api<Pod>,
    rs: &ReplicaSet,
    template: &Option<PodTemplateSpec>,
    owner: &OwnerReference,
    count: usize,
    events: &Events,
) -> Result<(), Error> {
    let (namespace, name) = key_of(&rs.metadata);
    let pod = pod_from_template(&name, &namespace, template.as_ref(), owner);
    let mut remaining = count;
    let mut batch = remaining.min(1);
    while batch > 0 {
        let params = PostParams::default();
        let creations = (0..batch).map(|_| pods.create(&params, &pod));
        let mut failure = None;
        for result in join_all(creations).await {
            match result {
                Ok(pod) => events.normal(
                    rs.object_ref(&()),
                    "SuccessfulCreate",
                    "Create",
                    format!("Created pod: {}", pod.name_any()),
                ),
                Err(e) => failure = Some(e),
            }
        }
        if let Some(e) = failure {
            return Err(e.into());
        }
        remaining -= batch;
        batch = (batch * 2).min(remaining);
    }
    Ok(())
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
            ready_pod("a", true, json!({"app": "web", "tier": "front"})),
            ready_pod("b", true, json!({"app": "web"})),
            ready_pod("c", false, json!({"app": "web", "tier": "front"})),
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
