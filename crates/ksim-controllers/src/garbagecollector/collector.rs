//! The garbage collector's loop: discovers every deletable resource, keeps
//! a metadata watch on each feeding the ownership [`Graph`], and acts on the
//! objects whose state changed once every initial list is in: deletes
//! objects whose owners are gone, finishes foreground deletions (dependents
//! first) and orphaning deletions (owner references removed).
//!
//! Its lists and watches ask for metadata alone, as upstream's metadata
//! informers do (`PartialObjectMetadataList` / `PartialObjectMetadata`,
//! served by kube-apiserver and ksim alike), and decode only the fields the
//! graph reads.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use http::HeaderValue;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
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
    let metadata = metadata_client(client);
    let streams = resources.iter().enumerate().map(|(i, r)| {
        // Metadata only: owners and finalizers are all it reads.
        let api: Api<Owned> = Api::all_with(metadata.clone(), &r.api);
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

/// `Accept` of a list whose items are metadata alone; full objects from a
/// server that cannot (an aggregated API, say), as client-go's metadata
/// client asks ([`Owned`] decodes either).
const METADATA_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
/// `Accept` of a watch whose objects are metadata alone (else full objects).
const METADATA: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

/// Whether a request is a watch (`watch=true` or `watch=1` in its query).
fn is_watch(uri: &http::Uri) -> bool {
    uri.query().is_some_and(|query| {
        query
            .split('&')
            .any(|pair| matches!(pair, "watch=true" | "watch=1"))
    })
}

/// A client over `client` whose GETs ask for metadata alone: the list and
/// watch requests of kube's watcher then bring `PartialObjectMetadataList`s
/// and `PartialObjectMetadata` events, which [`Owned`] decodes. (kube's
/// `metadata_watcher` asks the same, but decodes every item through
/// `PartialObjectMeta`, whose `#[serde(flatten)]` type fields buffer it,
/// and whose `ObjectMeta` builds labels, annotations and managedFields.)
fn metadata_client(client: &Client) -> Client {
    let inner = client.clone();
    let service = tower::service_fn(move |mut request: http::Request<kube::client::Body>| {
        let inner = inner.clone();
        async move {
            if request.method() == http::Method::GET {
                let accept = if is_watch(request.uri()) {
                    METADATA
                } else {
                    METADATA_LIST
                };
                request
                    .headers_mut()
                    .insert(http::header::ACCEPT, HeaderValue::from_static(accept));
            }
            inner.send(request).await
        }
    });
    Client::new(service, client.default_namespace())
}

/// What the collector decodes of a watched object: the metadata fields the
/// graph reads; every other field (labels, annotations, managedFields, and
/// spec and status should a server send them) is skipped unparsed.
#[derive(Clone, Debug, Default)]
struct Owned {
    metadata: ObjectMeta,
}

/// The decoded form of [`Owned`].
#[derive(serde::Deserialize)]
struct LeanObject {
    #[serde(default)]
    metadata: LeanMeta,
}

#[derive(Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct LeanMeta {
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    finalizers: Option<Vec<String>>,
    deletion_timestamp: Option<Time>,
}

impl<'de> serde::Deserialize<'de> for Owned {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let LeanMeta {
            namespace,
            name,
            uid,
            resource_version,
            owner_references,
            finalizers,
            deletion_timestamp,
        } = LeanObject::deserialize(deserializer)?.metadata;
        Ok(Owned {
            metadata: ObjectMeta {
                namespace,
                name,
                uid,
                resource_version,
                owner_references,
                finalizers,
                deletion_timestamp,
                ..ObjectMeta::default()
            },
        })
    }
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

fn to_node(resource: usize, object: Owned) -> Node {
    let meta = object.metadata;
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
                // The graph may lag the object (an owner reference just
                // removed by an orphaning deletion, whose owner's own
                // deletion arrived first on another watch): as upstream,
                // the object is read as it is now, and deleted only if it
                // still names the owners the graph does, unchanged since.
                let Some(latest) = api.get_metadata_opt(&node.name).await? else {
                    return Ok(());
                };
                let owners_now = latest
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .map(|owner| owner.uid.as_str());
                let owners_seen = node.owners.iter().map(|owner| owner.uid.as_str());
                if latest.metadata.uid.as_deref() != Some(node.uid.as_str())
                    || !owners_now.eq(owners_seen)
                {
                    tracing::debug!(name = %node.name, "owners changed since the graph saw them: not deleted");
                    return Ok(());
                }
                let params = DeleteParams {
                    propagation_policy: Some(if foreground {
                        PropagationPolicy::Foreground
                    } else {
                        PropagationPolicy::Background
                    }),
                    preconditions: Some(Preconditions {
                        uid: Some(node.uid.clone()),
                        resource_version: latest.metadata.resource_version.clone(),
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
        owner: &OwnerReference,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_are_told_from_lists_by_their_query() {
        let uri = |s: &str| s.parse::<http::Uri>().expect("uri");
        assert!(is_watch(&uri(
            "/api/v1/pods?&watch=true&timeoutSeconds=290&resourceVersion=5"
        )));
        assert!(is_watch(&uri("/api/v1/pods?watch=1")));
        assert!(!is_watch(&uri("/api/v1/pods?&limit=500")));
        assert!(!is_watch(&uri("/api/v1/pods?watch=false")));
        assert!(!is_watch(&uri("/api/v1/pods")));
    }

    /// The `Accept` of every request a recording server received.
    type Accepts = std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>;

    /// A client whose server records each request's path and `Accept` and
    /// answers `body`.
    fn recording_client(body: &'static str) -> (Client, Accepts) {
        let accepts = Accepts::default();
        let seen = accepts.clone();
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let accept = request
                .headers()
                .get(http::header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            seen.lock()
                .expect("lock")
                .push((request.uri().to_string(), accept));
            let response = http::Response::new(kube::client::Body::from(body.as_bytes().to_vec()));
            std::future::ready(Ok::<_, std::convert::Infallible>(response))
        });
        (Client::new(service, "default"), accepts)
    }

    #[tokio::test]
    async fn lists_and_watches_ask_for_metadata_alone() {
        let pods = ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());
        let list = r#"{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadataList",
            "metadata":{"resourceVersion":"9"},
            "items":[{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata",
                "metadata":{"name":"a","namespace":"default","uid":"u1"}}]}"#;
        let (client, accepts) = recording_client(list);
        let api: Api<Owned> = Api::all_with(metadata_client(&client), &pods);
        let listed = api
            .list(&kube::api::ListParams::default().limit(500))
            .await
            .expect("list");
        assert_eq!(listed.items[0].metadata.uid.as_deref(), Some("u1"));

        // One line: watch events are newline-delimited.
        let event = concat!(
            r#"{"type":"ADDED","object":{"apiVersion":"meta.k8s.io/v1","#,
            r#""kind":"PartialObjectMetadata","metadata":{"name":"b","uid":"u2"}}}"#,
            "\n"
        );
        let (client, watch_accepts) = recording_client(event);
        let api: Api<Owned> = Api::all_with(metadata_client(&client), &pods);
        let mut events = api
            .watch(&kube::api::WatchParams::default(), "9")
            .await
            .expect("watch")
            .boxed();
        match events.next().await {
            Some(Ok(kube::api::WatchEvent::Added(object))) => {
                assert_eq!(object.metadata.uid.as_deref(), Some("u2"));
            }
            other => panic!("an ADDED event: {other:?}"),
        }
        let accepts = accepts.lock().expect("lock").clone();
        let watch_accepts = watch_accepts.lock().expect("lock").clone();
        assert_eq!(accepts.len(), 1);
        assert!(accepts[0].0.starts_with("/api/v1/pods?"), "{accepts:?}");
        assert_eq!(accepts[0].1, METADATA_LIST);
        assert!(
            watch_accepts[0].0.contains("watch=true"),
            "{watch_accepts:?}"
        );
        assert_eq!(watch_accepts[0].1, METADATA);
        assert!(
            METADATA_LIST
                .starts_with("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,")
        );
        assert!(
            METADATA.starts_with("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,")
        );
    }

    #[test]
    fn a_partial_object_metadata_decodes_to_what_the_graph_reads() {
        let item = json!({
            "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
            "metadata": {
                "name": "web-1", "namespace": "default", "uid": "u1", "resourceVersion": "7",
                "labels": {"app": "web"}, "annotations": {"a": "b"},
                "managedFields": [{"manager": "m", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}],
                "finalizers": ["foregroundDeletion"],
                "deletionTimestamp": "2026-01-01T00:00:00Z",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                    "uid": "u0", "controller": true, "blockOwnerDeletion": true}]
            }
        });
        let owned: Owned = serde_json::from_value(item).expect("decodes");
        let node = to_node(3, owned);
        assert_eq!(node.resource, 3);
        assert_eq!(node.namespace.as_deref(), Some("default"));
        assert_eq!(node.name, "web-1");
        assert_eq!(node.uid, "u1");
        assert_eq!(node.resource_version.as_deref(), Some("7"));
        assert_eq!(node.finalizers, ["foregroundDeletion"]);
        assert!(node.deleting);
        assert_eq!(node.owners.len(), 1);
        assert_eq!(node.owners[0].uid, "u0");
        // A full object (a server that ignores the metadata media type)
        // decodes the same way.
        let full = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "uid": "u2"}, "spec": {"containers": []}, "status": {}});
        let node = to_node(0, serde_json::from_value(full).expect("decodes"));
        assert_eq!((node.name.as_str(), node.uid.as_str()), ("p", "u2"));
        assert!(!node.deleting && node.owners.is_empty());
    }
}
