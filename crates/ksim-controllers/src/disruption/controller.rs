//! The disruption controller's sync: for each PodDisruptionBudget, list its
//! pods, find the scale of their controllers, and write the status (or the
//! SyncFailed fail-safe when that is impossible).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, GroupVersionKind, ListParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};

use super::status::{
    ControllerScale, budget_status, count_healthy, disrupted_pod_map, expected_pod_count,
    failed_status, go_selector_string,
};
use crate::Error;
use crate::common::{
    controller_of, key_of, parse_selector, selector_matches, selector_query, update_status,
};
use crate::events::Events;

const RETRY: Duration = Duration::from_millis(500);

struct Context {
    client: Client,
    events: Events,
}

/// Runs the disruption controller until the watch streams end.
pub async fn run(client: Client) {
    let budgets: Api<PodDisruptionBudget> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    let controller = Controller::new(budgets, watcher::Config::default());
    let store = controller.store();
    controller
        .watches(pods, watcher::Config::default(), move |pod| {
            budgets_of_pod(&store, &pod)
        })
        .run(
            reconcile,
            error_policy,
            Arc::new(Context {
                events: Events::new(client.clone(), "controllermanager"),
                client,
            }),
        )
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "disruption sync failed");
            }
        })
        .await;
}

fn budgets_of_pod(
    store: &Store<PodDisruptionBudget>,
    pod: &Pod,
) -> Vec<ObjectRef<PodDisruptionBudget>> {
    let namespace = pod.namespace().unwrap_or_default();
    store
        .state()
        .iter()
        .filter(|pdb| pdb.namespace().as_deref() == Some(namespace.as_str()))
        .filter(|pdb| {
            pdb.spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .and_then(|s| parse_selector(s).ok())
                .is_some_and(|s| selector_matches(&s, pod.metadata.labels.as_ref()))
        })
        .map(|pdb| ObjectRef::from_obj(pdb.as_ref()))
        .collect()
}

fn error_policy(_pdb: Arc<PodDisruptionBudget>, error: &Error, _context: Arc<Context>) -> Action {
    tracing::debug!(%error, "disruption sync will be retried");
    Action::requeue(RETRY)
}

async fn reconcile(pdb: Arc<PodDisruptionBudget>, context: Arc<Context>) -> Result<Action, Error> {
    let (namespace, name) = key_of(&pdb.metadata);
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(context.client.clone(), &namespace);
    let now = Timestamp::now();
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
    let pods: Vec<Pod> = match &spec.selector {
        // A nil selector selects nothing.
        None => Vec::new(),
        Some(selector) => {
            parse_selector(selector)?;
            let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
            api.list(&ListParams::default().labels(&selector_query(selector)))
                .await?
                .items
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
                && let Some(scale) = controller_scale(client, namespace, reference).await?
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

async fn get_owned<K>(
    client: &Client,
    namespace: &str,
    reference: &OwnerReference,
) -> Result<Option<K>, Error>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let found = api.get_opt(&reference.name).await?;
    Ok(found.filter(|o| o.meta().uid.as_deref() == Some(reference.uid.as_str())))
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
    namespace: &str,
    reference: &OwnerReference,
) -> Result<Option<ControllerScale>, Error> {
    let group = group_of(&reference.api_version);
    match (group, reference.kind.as_str()) {
        ("", "ReplicationController") => {
            let rc = get_owned::<ReplicationController>(client, namespace, reference).await?;
            Ok(rc
                .and_then(|rc| counted(rc.metadata.uid.as_ref(), rc.spec.and_then(|s| s.replicas))))
        }
        ("apps" | "extensions", "ReplicaSet") => {
            let Some(rs) = get_owned::<ReplicaSet>(client, namespace, reference).await? else {
                return generic_scale(client, namespace, reference).await;
            };
            if let Some(owner) = controller_of(&rs.metadata)
                && owner.kind == "Deployment"
            {
                if matches!(group_of(&owner.api_version), "apps" | "extensions")
                    && let Some(deployment) =
                        get_owned::<Deployment>(client, namespace, owner).await?
                {
                    return Ok(counted(
                        deployment.metadata.uid.as_ref(),
                        deployment.spec.and_then(|s| s.replicas),
                    ));
                }
                // A ReplicaSet of a missing Deployment: only its scale subresource.
                return generic_scale(client, namespace, reference).await;
            }
            Ok(counted(
                rs.metadata.uid.as_ref(),
                rs.spec.and_then(|s| s.replicas),
            ))
        }
        ("apps", "StatefulSet") => {
            let set = get_owned::<StatefulSet>(client, namespace, reference).await?;
            Ok(set.and_then(|s| counted(s.metadata.uid.as_ref(), s.spec.and_then(|s| s.replicas))))
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
