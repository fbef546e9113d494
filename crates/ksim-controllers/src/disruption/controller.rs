//! The disruption controller's sync: for each PodDisruptionBudget, list its
//! pods, find the scale of their controllers, and write the status (or the
//! SyncFailed fail-safe when that is impossible).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};

use super::status::{
    budget_status, count_healthy, disrupted_pod_map, expected_pod_count, failed_status,
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
        Err(e) if matches!(e, Error::Api(_)) => return Err(e),
        Err(e) => {
            context.events.warning(
                pdb.object_ref(&()),
                "CalculateExpectedPodCountFailed",
                "Sync",
                format!("Failed to calculate the number of expected pods: {e}"),
            );
            (failed_status(&pdb, &e.to_string(), now), None, Some(e))
        }
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
    let mut scales: HashMap<String, i32> = HashMap::new();
    for pod in &pods {
        if let Some(reference) = controller_of(&pod.metadata)
            && !scales.contains_key(&reference.uid)
            && let Some(scale) = controller_scale(client, namespace, reference).await?
        {
            scales.insert(reference.uid.clone(), scale);
        }
    }
    let count = expected_pod_count(&spec, &pods, &scales)?;
    if !count.unmanaged.is_empty() {
        let selector = spec
            .selector
            .as_ref()
            .map(selector_query)
            .unwrap_or_default();
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

/// The scale of a pod's controller: a Deployment's through its ReplicaSet,
/// else the ReplicaSet's, ReplicationController's or StatefulSet's.
async fn controller_scale(
    client: &Client,
    namespace: &str,
    reference: &OwnerReference,
) -> Result<Option<i32>, Error> {
    let group = reference.api_version.split('/').next().unwrap_or_default();
    match (group, reference.kind.as_str()) {
        ("apps", "ReplicaSet") => {
            let Some(rs) = get_owned::<ReplicaSet>(client, namespace, reference).await? else {
                return Ok(None);
            };
            if let Some(owner) = controller_of(&rs.metadata)
                && owner.kind == "Deployment"
                && owner.api_version.starts_with("apps/")
            {
                let deployment = get_owned::<Deployment>(client, namespace, owner).await?;
                return Ok(deployment.map(|d| d.spec.and_then(|s| s.replicas).unwrap_or(1)));
            }
            Ok(Some(rs.spec.and_then(|s| s.replicas).unwrap_or(1)))
        }
        ("v1", "ReplicationController") => Ok(get_owned::<ReplicationController>(
            client, namespace, reference,
        )
        .await?
        .map(|rc| rc.spec.and_then(|s| s.replicas).unwrap_or(1))),
        ("apps", "StatefulSet") => Ok(get_owned::<StatefulSet>(client, namespace, reference)
            .await?
            .map(|s| s.spec.and_then(|s| s.replicas).unwrap_or(1))),
        _ => Ok(None),
    }
}
