//! The garbage collector's loop: discovers every deletable resource, keeps
//! a metadata watch on each feeding the ownership [`Graph`], and acts on the
//! objects whose state changed once every initial list is in: deletes
//! objects whose owners are gone, finishes foreground deletions (dependents
//! first) and orphaning deletions (owner references removed).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use ksim_runtime::WithoutManagedFields;
use kube::Client;
use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy,
};
use kube::core::{DynamicResourceScope, ObjectMeta};
use kube::discovery::{ApiCapabilities, ApiResource, Discovery, Scope, verbs};
use kube::runtime::watcher;
use serde_json::json;

use super::graph::{
    Decision, FOREGROUND_FINALIZER, Graph, Node, ORPHAN_FINALIZER, OwnerState, decide,
};
use crate::Error;
use crate::informer::SharedInformers;
use ksim_runtime::clock::Clock;

/// How soon a failed collection is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// How often the served resources are discovered again.
const REDISCOVERY: Duration = Duration::from_secs(30);

fn resource_keys(resources: &[Resource]) -> BTreeSet<(String, String, String)> {
    resources
        .iter()
        .map(|r| {
            (
                r.api.group.clone(),
                r.api.version.clone(),
                r.api.plural.clone(),
            )
        })
        .collect()
}

/// A watched resource type.
struct Resource {
    api: ApiResource,
    namespaced: bool,
}

/// Runs the garbage collector until its client can no longer reach the API.
pub async fn run(client: Client, informers: SharedInformers) {
    let clock = informers.clock().clone();
    loop {
        match run_once(&client, &clock).await {
            Ok(()) => continue,
            Err(e) => tracing::warn!(error = %e, "garbage collector restarting"),
        }
        clock.sleep(Duration::from_secs(1)).await;
    }
}

fn deletable(caps: &ApiCapabilities) -> bool {
    [verbs::LIST, verbs::WATCH, verbs::DELETE, verbs::PATCH]
        .iter()
        .all(|v| caps.supports_operation(v))
}

async fn discover(client: &Client) -> Result<Vec<Resource>, Error> {
    let discovery = Discovery::new(client.clone()).run().await?;
    let mut resources = Vec::new();
    for group in discovery.groups() {
        for (api, caps) in group.recommended_resources() {
            if api.plural == "events" || !deletable(&caps) {
                continue;
            }
            resources.push(Resource {
                api,
                namespaced: caps.scope == Scope::Namespaced,
            });
        }
    }
    Ok(resources)
}

struct Collector {
    client: Client,
    resources: Vec<Resource>,
    /// Resource index by (group, kind).
    by_kind: HashMap<(String, String), usize>,
    graph: Graph,
}

async fn run_once(client: &Client, clock: &Clock) -> Result<(), Error> {
    let resources = discover(client).await?;
    let by_kind = resources
        .iter()
        .enumerate()
        .map(|(i, r)| ((r.api.group.clone(), r.api.kind.clone()), i))
        .collect();
    let streams = resources.iter().enumerate().map(|(i, r)| {
        // Metadata only, and without managedFields: owners and finalizers are all it reads.
        let api: Api<WithoutManagedFields<Owned>> = Api::all_with(client.clone(), &r.api);
        crate::common::backoff_on(watcher(api, watcher::Config::default()), clock)
            .map(move |event| (i, event))
            .boxed()
    });
    let mut events = futures::stream::select_all(streams);
    let mut collector = Collector {
        client: client.clone(),
        resources,
        by_kind,
        graph: Graph::default(),
    };
    // The uids each list in progress saw, for the re-lists of resources
    // listed before (a first list has nothing to prune, so a restored
    // cluster's 110,000 uids are not copied into sets only to be checked).
    let mut listing: HashMap<usize, HashSet<String>> = HashMap::new();
    let mut listed_before: HashSet<usize> = HashSet::new();
    let mut synced: HashSet<usize> = HashSet::new();
    let mut dirty: BTreeSet<String> = BTreeSet::new();
    let mut retry: BTreeSet<String> = BTreeSet::new();
    let mut discovered_at = clock.instant();
    loop {
        if clock.elapsed_since(discovered_at) >= REDISCOVERY {
            // New kinds (CustomResourceDefinitions) join by starting over.
            discovered_at = clock.instant();
            let fresh = discover(client).await?;
            if resource_keys(&fresh) != resource_keys(&collector.resources) {
                tracing::info!("served resources changed: garbage collector restarts its watches");
                return Ok(());
            }
        }
        let all_synced = synced.len() == collector.resources.len();
        let next = if all_synced && !dirty.is_empty() {
            match events.next().now_or_never() {
                Some(next) => Some(next),
                None => {
                    let batch = std::mem::take(&mut dirty);
                    let _busy = clock.busy();
                    for uid in batch {
                        if let Err(e) = collector.process(&uid).await {
                            tracing::debug!(%uid, error = %e, "garbage collection will be retried");
                            retry.insert(uid);
                        }
                    }
                    continue;
                }
            }
        } else {
            // Failed collections are retried a second later (no timer
            // while there are none, so an idle virtual cluster has none).
            let retry_due = async {
                if retry.is_empty() {
                    std::future::pending::<()>().await;
                }
                clock.sleep(RETRY).await;
            };
            tokio::select! {
                biased;
                next = events.next() => Some(next),
                () = retry_due => {
                    dirty.append(&mut retry);
                    None
                }
            }
        };
        let Some(next) = next else { continue };
        let Some((index, event)) = next else {
            return Err(Error::Invalid("the watch streams ended".into()));
        };
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                tracing::debug!(error = %e, "garbage collector watch error");
                continue;
            }
        };
        match event {
            watcher::Event::Init => {
                if !listed_before.insert(index) {
                    listing.insert(index, HashSet::new());
                }
            }
            watcher::Event::InitApply(object) => {
                let node = to_node(index, object);
                if let Some(seen) = listing.get_mut(&index) {
                    seen.insert(node.uid.clone());
                }
                dirty.extend(collector.graph.upsert(node));
            }
            watcher::Event::InitDone => {
                if let Some(seen) = listing.remove(&index) {
                    for uid in collector.graph.uids_of_resource(index) {
                        if !seen.contains(&uid) {
                            dirty.extend(collector.graph.remove(&uid));
                        }
                    }
                }
                synced.insert(index);
            }
            watcher::Event::Apply(object) => {
                let node = to_node(index, object);
                dirty.extend(collector.graph.upsert(node));
            }
            watcher::Event::Delete(object) => {
                let uid = object.metadata.uid.clone().unwrap_or_default();
                dirty.extend(collector.graph.remove(&uid));
            }
        }
    }
}

/// What the collector decodes of a watched object: its metadata alone;
/// every other field is skipped unparsed. (kube's `PartialObjectMeta` reads
/// its type fields through `#[serde(flatten)]`, which first buffers the whole
/// object, spec and status included, into a tree: for a restored cluster's
/// 100,000 pods that tree was most of the collector's start.)
#[derive(Clone, Debug, Default, serde::Deserialize)]
struct Owned {
    #[serde(default)]
    metadata: ObjectMeta,
}

impl kube::Resource for Owned {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(&dt.kind)
    }
    fn group(dt: &ApiResource) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(&dt.group)
    }
    fn version(dt: &ApiResource) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(&dt.version)
    }
    fn api_version(dt: &ApiResource) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(&dt.api_version)
    }
    fn plural(dt: &ApiResource) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(&dt.plural)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

fn to_node(resource: usize, object: WithoutManagedFields<Owned>) -> Node {
    let meta = object.0.metadata;
    Node {
        resource,
        namespace: meta.namespace,
        name: meta.name.unwrap_or_default(),
        uid: meta.uid.unwrap_or_default(),
        resource_version: meta.resource_version,
        owners: meta.owner_references.unwrap_or_default(),
        finalizers: meta.finalizers.unwrap_or_default(),
        deleting: meta.deletion_timestamp.is_some(),
    }
}

impl Collector {
    fn api_for(&self, resource: usize, namespace: Option<&str>) -> Option<Api<DynamicObject>> {
        let r = self.resources.get(resource)?;
        Some(match (r.namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &r.api),
            _ => Api::all_with(self.client.clone(), &r.api),
        })
    }

    async fn process(&mut self, uid: &str) -> Result<(), Error> {
        if self.graph.settled(uid) {
            return Ok(());
        }
        let Some(node) = self.graph.get(uid).cloned() else {
            return Ok(());
        };
        if node.deleting_dependents() {
            return self.process_deleting_dependents(&node).await;
        }
        if node.orphaning() {
            return self.orphan_dependents(&node).await;
        }
        if node.deleting || node.owners.is_empty() {
            return Ok(());
        }
        let mut states = Vec::with_capacity(node.owners.len());
        for owner in &node.owners {
            let state = match self.graph.owner_state(owner) {
                Some(state) => state,
                None => self.owner_state_from_api(&node, owner).await?,
            };
            states.push(state);
        }
        let has_dependents = self.graph.has_dependents(uid);
        match decide(&node, &states, has_dependents) {
            Decision::Nothing => Ok(()),
            Decision::RemoveOwners(owners) => self.remove_owner_references(&node, &owners).await,
            Decision::Delete { foreground } => {
                let Some(api) = self.api_for(node.resource, node.namespace.as_deref()) else {
                    return Ok(());
                };
                let params = DeleteParams {
                    propagation_policy: Some(if foreground {
                        PropagationPolicy::Foreground
                    } else {
                        PropagationPolicy::Background
                    }),
                    preconditions: Some(Preconditions {
                        uid: Some(node.uid.clone()),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                tracing::debug!(name = %node.name, "deleting object whose owners are gone");
                ignore_not_found(api.delete(&node.name, &params).await.map(|_| ()))
            }
        }
    }

    /// An owner absent from the graph: looked up live, as upstream does
    /// before it deletes anything.
    async fn owner_state_from_api(
        &self,
        node: &Node,
        owner: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
    ) -> Result<OwnerState, Error> {
        let group = owner
            .api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
            .to_string();
        let Some(&resource) = self.by_kind.get(&(group, owner.kind.clone())) else {
            return Ok(OwnerState::Unknown);
        };
        let Some(api) = self.api_for(resource, node.namespace.as_deref()) else {
            return Ok(OwnerState::Unknown);
        };
        match api.get_metadata_opt(&owner.name).await? {
            Some(found) if found.metadata.uid.as_deref() == Some(owner.uid.as_str()) => {
                let waiting = found.metadata.deletion_timestamp.is_some()
                    && found
                        .metadata
                        .finalizers
                        .iter()
                        .flatten()
                        .any(|f| f == FOREGROUND_FINALIZER);
                Ok(if waiting {
                    OwnerState::WaitingForDependents
                } else {
                    OwnerState::Solid
                })
            }
            _ => Ok(OwnerState::Dangling),
        }
    }

    async fn remove_owner_references(&self, node: &Node, owners: &[String]) -> Result<(), Error> {
        let Some(api) = self.api_for(node.resource, node.namespace.as_deref()) else {
            return Ok(());
        };
        let kept: Vec<_> = node
            .owners
            .iter()
            .filter(|o| !owners.contains(&o.uid))
            .collect();
        let patch = json!({"metadata": {"ownerReferences": kept, "uid": node.uid}});
        ignore_not_found(
            api.patch(&node.name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map(|_| ()),
        )
    }

    async fn remove_finalizer(&self, node: &Node, finalizer: &str) -> Result<(), Error> {
        let Some(api) = self.api_for(node.resource, node.namespace.as_deref()) else {
            return Ok(());
        };
        let kept: Vec<&String> = node.finalizers.iter().filter(|f| *f != finalizer).collect();
        let patch = json!({"metadata": {
            "finalizers": kept, "uid": node.uid, "resourceVersion": node.resource_version
        }});
        ignore_not_found(
            api.patch(&node.name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map(|_| ()),
        )
    }

    /// Foreground deletion: deletes the dependents, and removes the
    /// finalizer once no dependent blocks it.
    async fn process_deleting_dependents(&self, node: &Node) -> Result<(), Error> {
        let blocking = self.graph.blocking_dependents(&node.uid);
        if blocking.is_empty() {
            return self.remove_finalizer(node, FOREGROUND_FINALIZER).await;
        }
        for uid in self.graph.dependents_of(&node.uid) {
            let Some(dependent) = self.graph.get(&uid) else {
                continue;
            };
            if dependent.deleting {
                continue;
            }
            // A dependent with other, live owners only loses this reference.
            let others_alive = dependent
                .owners
                .iter()
                .filter(|o| o.uid != node.uid)
                .any(|o| self.graph.owner_state(o) == Some(OwnerState::Solid));
            if others_alive {
                self.remove_owner_references(dependent, std::slice::from_ref(&node.uid))
                    .await?;
                continue;
            }
            let Some(api) = self.api_for(dependent.resource, dependent.namespace.as_deref()) else {
                continue;
            };
            let foreground = self.graph.has_dependents(&uid);
            let params = DeleteParams {
                propagation_policy: Some(if foreground {
                    PropagationPolicy::Foreground
                } else {
                    PropagationPolicy::Background
                }),
                ..DeleteParams::default()
            };
            ignore_not_found(api.delete(&dependent.name, &params).await.map(|_| ()))?;
        }
        Ok(())
    }

    /// Orphaning deletion: every dependent loses its reference to the node,
    /// then the finalizer goes.
    async fn orphan_dependents(&self, node: &Node) -> Result<(), Error> {
        for uid in self.graph.dependents_of(&node.uid) {
            if let Some(dependent) = self.graph.get(&uid) {
                self.remove_owner_references(dependent, std::slice::from_ref(&node.uid))
                    .await?;
            }
        }
        self.remove_finalizer(node, ORPHAN_FINALIZER).await
    }
}

fn ignore_not_found(result: Result<(), kube::Error>) -> Result<(), Error> {
    match result.map_err(Error::from) {
        Err(e) if !e.is_not_found() => Err(e),
        _ => Ok(()),
    }
}
