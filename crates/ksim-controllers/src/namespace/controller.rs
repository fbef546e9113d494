//! The namespace controller's sync: for a terminating namespace, delete the
//! contents of every namespaced resource discovery lists, count what is
//! left, write the deletion conditions, and finalize when nothing is left.

use std::sync::Arc;
use std::time::Duration;

use crate::workloop::{Action, Queued};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::discovery::{ApiResource, Discovery, Scope, verbs};
use kube::{Client, ResourceExt};

use super::status::{ContentTotals, deletion_conditions};
use crate::Error;
use crate::common::update_status;
use crate::informer::SharedInformers;
use ksim_runtime::clock::Clock;

/// The finalizer kube-apiserver puts in every namespace's `spec.finalizers`.
pub const FINALIZER: &str = "kubernetes";

/// How soon a namespace whose content is still going is looked at again.
const RECHECK: Duration = Duration::from_millis(500);

/// How long to wait before retrying a failed sync.
const RETRY: Duration = Duration::from_secs(1);

struct Context {
    client: Client,
    clock: Clock,
}

/// Runs the namespace controller until the watch stream ends.
pub async fn run(client: Client, informers: SharedInformers) {
    let clock = informers.clock().clone();
    Queued::<Namespace>::new(client.clone(), &clock)
        .run(
            "namespace",
            |ns, context| Box::pin(reconcile(ns, context)),
            error_policy,
            Arc::new(Context { client, clock }),
        )
        .await;
}

fn error_policy(_ns: Arc<Namespace>, error: &Error, _context: Arc<Context>) -> Action {
    tracing::debug!(%error, "namespace sync will be retried");
    Action::requeue(RETRY)
}

fn holds_finalizer(ns: &Namespace) -> bool {
    ns.spec
        .as_ref()
        .and_then(|s| s.finalizers.as_ref())
        .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
}

async fn reconcile(cached: Arc<Namespace>, context: Arc<Context>) -> Result<Action, Error> {
    if cached.metadata.deletion_timestamp.is_none() || !holds_finalizer(&cached) {
        return Ok(Action::await_change());
    }
    let name = cached.name_any();
    let namespaces: Api<Namespace> = Api::all(context.client.clone());
    let Some(ns) = namespaces.get_opt(&name).await? else {
        return Ok(Action::await_change());
    };
    if ns.metadata.deletion_timestamp.is_none() || !holds_finalizer(&ns) {
        return Ok(Action::await_change());
    }
    let totals = delete_content(&context.client, &name).await;
    let empty = totals.discovery_error.is_none()
        && totals.delete_errors.is_empty()
        && totals.resources.values().all(|n| *n == 0);
    if empty {
        finalize(&namespaces, ns).await?;
        tracing::info!(namespace = %name, "namespace finalized");
        return Ok(Action::await_change());
    }
    let previous = ns
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let conditions = deletion_conditions(&previous, &totals, context.clock.timestamp());
    if conditions != previous {
        match update_status(&namespaces, &name, |fresh| {
            fresh.status.get_or_insert_with(Default::default).conditions = Some(conditions.clone());
        })
        .await
        {
            Ok(_) => {}
            Err(e) if e.is_not_found() => return Ok(Action::await_change()),
            Err(e) => return Err(e),
        }
    }
    Ok(Action::requeue(RECHECK))
}

/// Removes the `kubernetes` finalizer through the `finalize` subresource;
/// the API server lets the namespace go once `spec.finalizers` is empty.
async fn finalize(namespaces: &Api<Namespace>, mut ns: Namespace) -> Result<(), Error> {
    let name = ns.name_any();
    if let Some(finalizers) = ns.spec.as_mut().and_then(|s| s.finalizers.as_mut()) {
        finalizers.retain(|f| f != FINALIZER);
    }
    match namespaces
        .replace_subresource("finalize", &name, &PostParams::default(), &ns)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) => {
            let e = Error::from(e);
            if e.is_not_found() { Ok(()) } else { Err(e) }
        }
    }
}

/// The namespaced resources the server serves that can be listed and
/// deleted, in each group's preferred version.
async fn deletable_resources(client: &Client) -> Result<Vec<(ApiResource, bool)>, Error> {
    let discovery = Discovery::new(client.clone()).run_aggregated().await?;
    let mut resources = Vec::new();
    for group in discovery.groups() {
        for (resource, capabilities) in group.recommended_resources() {
            if !matches!(capabilities.scope, Scope::Namespaced)
                || !capabilities.supports_operation(verbs::LIST)
            {
                continue;
            }
            let collection = capabilities.supports_operation(verbs::DELETE_COLLECTION);
            if collection || capabilities.supports_operation(verbs::DELETE) {
                resources.push((resource, collection));
            }
        }
    }
    Ok(resources)
}

/// One deletion pass over the namespace: delete everything, then count what
/// is left (objects waiting on finalizers or graceful termination).
async fn delete_content(client: &Client, namespace: &str) -> ContentTotals {
    let mut totals = ContentTotals::default();
    let resources = match deletable_resources(client).await {
        Ok(resources) => resources,
        Err(e) => {
            totals.discovery_error = Some(e.to_string());
            return totals;
        }
    };
    for (resource, collection) in resources {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
        let label = format!("{}.{}", resource.plural, resource.group);
        if let Err(e) = delete_all(&api, collection).await {
            totals.delete_errors.push(format!("{label}: {e}"));
        }
        match api.list_metadata(&ListParams::default()).await {
            Ok(left) => {
                if left.items.is_empty() {
                    continue;
                }
                *totals.resources.entry(label).or_default() += left.items.len();
                for item in &left.items {
                    for finalizer in item.metadata.finalizers.iter().flatten() {
                        *totals.finalizers.entry(finalizer.clone()).or_default() += 1;
                    }
                }
            }
            Err(e) => totals.delete_errors.push(format!("{label}: {e}")),
        }
    }
    totals
}

/// Deletes every object of one resource in the namespace: with one
/// deletecollection when the resource supports it, one by one otherwise.
async fn delete_all(api: &Api<DynamicObject>, collection: bool) -> Result<(), Error> {
    let params = DeleteParams::background();
    if collection {
        api.delete_collection(&params, &ListParams::default())
            .await?;
        return Ok(());
    }
    for item in api.list_metadata(&ListParams::default()).await?.items {
        if item.metadata.deletion_timestamp.is_some() {
            continue;
        }
        match api.delete(&item.name_any(), &params).await {
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
