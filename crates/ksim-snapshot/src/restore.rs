//! Loading snapshot objects into a cluster through its API.
//!
//! The API server assigns a new uid to every object it creates and ignores
//! the one a client sends (kube-apiserver does; ksim's server does too), so
//! a restore cannot keep uids: it remaps them. Objects are created in tiers
//! — namespaces, definitions, nodes and the like first, then the rest from
//! the bottom of the ownership graph up (pods, then their ReplicaSets, then
//! Deployments) — without their owner references, so that a running
//! controller meets its objects already there and adopts them instead of
//! creating new ones. Each object's status is written back through its
//! `status` subresource (pods keep their phase, IPs and conditions on their
//! nodes), and at the end every owner reference is put back with the owner's
//! new uid. References to owners the snapshot does not hold are dropped (the
//! garbage collector would delete the object otherwise).
//!
//! Objects are created in bulk ([`crate::api::BulkCreate`]: ksim's bulk
//! path over HTTP, or the API server itself when the restore runs in its
//! process), falling back to a request or two per object on clusters
//! without it. Each object is moved out of its parsed document into the
//! bulk item, not copied: what is kept beside it is what messages, uid
//! remapping and a rollback need (its resource, namespace, name, old uid
//! and owner references). Only `Conflicts::Replace` keeps a copy of each
//! object, to create again those that existed.
//!
//! A restore into a cluster that already holds objects (beyond what every
//! cluster starts with) is refused unless merging (existing objects are
//! kept) or replacing (existing objects the snapshot names are deleted and
//! created from it). A failed restore deletes what it created and puts back
//! what it replaced (the rollback record keeps the original of each replaced
//! object, and only of those), and says how many of each and which could
//! not be. An object put back by deleting it and creating it again has a
//! new uid (the API gives no other way), so the owner references in the
//! cluster naming its old uid (its pods, say, which the restore did not
//! touch, and which the garbage collector would delete) are pointed at the
//! new one.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};

use crate::Error;
use crate::api::{BulkAnswer, BulkCreate, BulkObject, Created, Resource, Resources, Target};
use crate::document::{Body, Document, ScannedDocument};

/// What to do when the cluster already holds objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Conflicts {
    /// Refuse to restore into a cluster holding objects.
    #[default]
    Refuse,
    /// Keep existing objects; create the others.
    Merge,
    /// Delete the existing objects the snapshot names and create them from it.
    Replace,
}

/// How to restore.
#[derive(Debug, Clone)]
pub struct RestoreOptions {
    pub conflicts: Conflicts,
    /// Fail on kinds the cluster does not serve instead of skipping them.
    pub strict: bool,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Whether controllers may act on the cluster while it is restored. If
    /// not (a cluster whose components start after the restore), owners
    /// are created first and dependents with their references remapped,
    /// a third fewer requests.
    pub controllers_running: bool,
}

impl Default for RestoreOptions {
    fn default() -> Self {
        RestoreOptions {
            conflicts: Conflicts::Refuse,
            strict: false,
            concurrency: 64,
            controllers_running: true,
        }
    }
}

/// What a restore did.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Objects created, by kind.
    pub created: BTreeMap<String, usize>,
    /// Objects that already existed and were kept.
    pub existing: usize,
    /// Objects deleted and created again (`Conflicts::Replace`).
    pub replaced: usize,
    /// Objects skipped because their kind is not served, by `apiVersion/kind`.
    pub unserved: BTreeMap<String, usize>,
    /// Owner references dropped because the owner is not in the snapshot.
    pub dangling_owner_references: usize,
}

impl Report {
    /// How many objects were created.
    pub fn created_total(&self) -> usize {
        self.created.values().sum()
    }
}

/// Kinds created before everything else (group, kind), in this order of tiers.
const FOUNDATION: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("storage.k8s.io", "StorageClass"),
    ("node.k8s.io", "RuntimeClass"),
    ("", "Node"),
    ("", "ServiceAccount"),
    ("", "ConfigMap"),
    ("", "Secret"),
    ("", "LimitRange"),
    ("", "ResourceQuota"),
    ("", "PersistentVolume"),
];

/// Whether an object is one every cluster starts with (or runs on), not
/// something a user put there: the system namespaces and what is in them,
/// the system priority classes, the `kubernetes` service, default service
/// accounts, events and leases, the kubelet simulator's Stages, ksim's own
/// CRDs.
pub fn is_system_object(resource: &Resource, object: &Value) -> bool {
    is_system(
        resource,
        object["metadata"]["namespace"].as_str().unwrap_or_default(),
        object["metadata"]["name"].as_str().unwrap_or_default(),
    )
}

/// [`is_system_object`] by namespace (empty if none) and name.
fn is_system(resource: &Resource, namespace: &str, name: &str) -> bool {
    if matches!(namespace, "kube-system" | "kube-public" | "kube-node-lease") {
        return true;
    }
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Namespace") => matches!(
            name,
            "default" | "kube-system" | "kube-public" | "kube-node-lease"
        ),
        ("scheduling.k8s.io", "PriorityClass") => name.starts_with("system-"),
        ("", "Service" | "Endpoints") | ("discovery.k8s.io", "EndpointSlice") => {
            namespace == "default" && name == "kubernetes"
        }
        ("", "ServiceAccount") => name == "default",
        ("", "ConfigMap") => name == "kube-root-ca.crt",
        ("", "Event") | ("events.k8s.io", "Event") | ("coordination.k8s.io", "Lease") => true,
        // The kubelet simulator's own configuration (Stages and their CRDs).
        ("kwok.x-k8s.io", _) => true,
        // ksim's own CRDs (DistributedPodDisruptionBudgets) are served by
        // every cluster from start.
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            name.ends_with(".kwok.x-k8s.io") || name.ends_with(".ksim.io")
        }
        _ => false,
    }
}

/// One object to restore.
struct Item {
    document: usize,
    line: usize,
    resource: Arc<Resource>,
    /// Its namespace, for a namespaced resource.
    namespace: Option<String>,
    name: String,
    /// The uid the file gives it (taken out of the object).
    old_uid: Option<String>,
    /// Whether an item of the snapshot names it as its owner (its new uid
    /// is then remembered).
    owns: bool,
    /// Owner references to owners in the snapshot.
    owners: Vec<Value>,
    tier: usize,
    /// The object as the file holds it (built, or its text, built when it
    /// is created); moved into its bulk item when created (`Null` after).
    body: Body,
}

impl Item {
    /// `Kind namespace/name`, as messages name it.
    fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.resource.group_kind(), self.name),
            None => format!("{} {}", self.resource.group_kind(), self.name),
        }
    }

    /// The message of a failed request about this item.
    fn failed(&self, error: Error) -> Error {
        Error::Restore(format!(
            "document {} (line {}), {}: {error}",
            self.document,
            self.line,
            self.describe(),
        ))
    }
}

/// What creating one object did.
enum Outcome {
    Created {
        new_uid: String,
    },
    /// An existing object overwritten from the snapshot (`uid` is its uid
    /// now: kept in place, new if it was deleted and created again).
    Replaced {
        uid: String,
        original: Box<Original>,
    },
    Existing {
        uid: String,
    },
}

/// An object as it was before the restore replaced it (for rollback).
struct Original {
    /// The object as read before it was replaced.
    object: Value,
    /// Deleted and created again (the API refused the change in place).
    recreated: bool,
}

/// An object that was created or replaced (for rollback).
struct Applied {
    resource: Arc<Resource>,
    namespace: Option<String>,
    name: String,
    /// What it replaced; `None` for an object the restore created new.
    original: Option<Box<Original>>,
}

/// An object whose owner references are put back at the end.
struct Owned {
    resource: Arc<Resource>,
    namespace: Option<String>,
    name: String,
    owners: Vec<Value>,
}

/// What a restore has done so far.
#[derive(Default)]
struct Progress {
    report: Report,
    applied: Vec<Applied>,
    /// Old uid → new uid of every owner created or found.
    uids: HashMap<String, String>,
    /// Objects whose owner references wait for [`restore_owner_references`].
    owned: Vec<Owned>,
    /// How objects are created in bulk; `None` once the cluster said it
    /// has no bulk path.
    bulk: Option<Arc<dyn BulkCreate>>,
    /// Objects put back by creating them again, whose dependents must name
    /// their new uid (see [`Renamed`]).
    renamed: Renamed,
}

/// Old uid → new uid of every object put back by deleting it and creating
/// it again (the API assigns a new uid): the owner references of its
/// dependents are pointed at the new uid by [`roll_back`], or the garbage
/// collector would delete them. Written by concurrent put-backs.
type Renamed = std::sync::Mutex<HashMap<String, String>>;

/// Restores `documents` into `target`.
pub async fn restore(
    target: &Target,
    documents: Vec<Document>,
    options: &RestoreOptions,
) -> Result<Report, Error> {
    let documents = documents.into_iter().map(ScannedDocument::from).collect();
    restore_scanned(target, documents, options).await
}

/// Restores documents as [`crate::document::scan_documents`] reads them:
/// each object is built from its text as its tier is created, a chunk at a
/// time off the async runtime, while the chunks before it are created.
pub async fn restore_scanned(
    target: &Target,
    mut documents: Vec<ScannedDocument>,
    options: &RestoreOptions,
) -> Result<Report, Error> {
    // The kinds of CRDs are read before anything is created.
    for document in &mut documents {
        if document.head.kind == "CustomResourceDefinition"
            && let Body::Text { .. } = document.body
        {
            let object = std::mem::take(&mut document.body)
                .into_object()
                .map_err(|message| Error::Document {
                    document: document.number,
                    line: document.line,
                    message,
                })?;
            document.body = Body::Object(object);
        }
    }
    let mut progress = Progress {
        bulk: Some(target.bulk_creation()),
        ..Progress::default()
    };
    let mut resources = target.resources().await?;

    // Kinds the file's CRDs define become served once those are created.
    let defined: HashSet<(String, String)> = documents
        .iter()
        .filter_map(|d| match &d.body {
            Body::Object(object) if d.head.kind == "CustomResourceDefinition" => Some(object),
            _ => None,
        })
        .flat_map(crd_kinds)
        .collect();
    let mut unserved = Vec::new();
    for document in &documents {
        let (api_version, kind) = (
            document.head.api_version.as_str(),
            document.head.kind.as_str(),
        );
        if resources.find(api_version, kind).is_none()
            && !defined.contains(&(api_version.to_string(), kind.to_string()))
        {
            unserved.push(document);
        }
    }
    if options.strict
        && let Some(first) = unserved.first()
    {
        return Err(Error::NotServed(format!(
            "document {} (line {}): the cluster does not serve {} {} ({} such objects in the file; nothing was applied)",
            first.number,
            first.line,
            first.head.api_version,
            first.head.kind,
            unserved.len()
        )));
    }
    let report = &mut progress.report;
    for document in &unserved {
        let key = format!("{}/{}", document.head.api_version, document.head.kind);
        *report.unserved.entry(key).or_default() += 1;
    }
    for (kind, count) in &report.unserved {
        tracing::warn!(%kind, count, "skipped: the cluster does not serve this kind");
    }

    if options.conflicts == Conflicts::Refuse {
        ensure_empty(target, &resources).await?;
    }

    let result = async {
        // CRDs first, then the kinds they define are discovered.
        let (crds, rest): (Vec<ScannedDocument>, Vec<ScannedDocument>) = documents
            .into_iter()
            .partition(|d| d.head.kind == "CustomResourceDefinition");
        if !crds.is_empty() {
            let items = plan(
                crds,
                &resources,
                &mut progress.report,
                options.controllers_running,
            );
            apply_tiers(target, items, options, &mut progress).await?;
            resources = wait_for_kinds(target, &defined).await?;
        }
        let items = plan(
            rest,
            &resources,
            &mut progress.report,
            options.controllers_running,
        );
        apply_tiers(target, items, options, &mut progress).await?;
        if !options.controllers_running {
            return Ok(());
        }
        let owned = std::mem::take(&mut progress.owned);
        restore_owner_references(target, owned, &progress.uids, options.concurrency).await
    }
    .await;
    match result {
        Ok(()) => Ok(progress.report),
        Err(error) => {
            let renamed = progress
                .renamed
                .into_inner()
                .unwrap_or_else(|e| e.into_inner());
            Err(roll_back(target, progress.applied, renamed, error).await)
        }
    }
}

/// The (apiVersion, kind) pairs a CRD defines.
pub(crate) fn crd_kinds(crd: &Value) -> Vec<(String, String)> {
    let group = crd["spec"]["group"].as_str().unwrap_or_default();
    let kind = crd["spec"]["names"]["kind"].as_str().unwrap_or_default();
    crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .map(|v| (format!("{group}/{v}"), kind.to_string()))
        .collect()
}

/// Waits until discovery serves every kind in `kinds` (created CRDs).
async fn wait_for_kinds(
    target: &Target,
    kinds: &HashSet<(String, String)>,
) -> Result<Resources, Error> {
    let mut attempts = 0;
    loop {
        let resources = target.resources().await?;
        let missing: Vec<_> = kinds
            .iter()
            .filter(|(v, k)| resources.find(v, k).is_none())
            .collect();
        if missing.is_empty() {
            return Ok(resources);
        }
        attempts += 1;
        if attempts > 150 {
            return Err(Error::Restore(format!(
                "the created CustomResourceDefinitions are not served: {missing:?}"
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await; // wall-clock: polls a remote server
    }
}

/// Refuses a cluster holding objects other than system ones.
async fn ensure_empty(target: &Target, resources: &Resources) -> Result<(), Error> {
    for resource in &resources.preferred {
        if !resource.can_list || !resource.can_create {
            continue;
        }
        if matches!(
            (resource.group.as_str(), resource.kind.as_str()),
            ("", "Event") | ("events.k8s.io", "Event") | ("coordination.k8s.io", "Lease")
        ) {
            continue;
        }
        let found = target
            .list_pages(resource, None, None, 100, |items| {
                match items.iter().find(|o| !is_system_object(resource, o)) {
                    Some(object) => {
                        let name = object["metadata"]["name"].as_str().unwrap_or_default();
                        let at = match object["metadata"]["namespace"].as_str() {
                            Some(ns) => format!("{} {ns}/{name}", resource.group_kind()),
                            None => format!("{} {name}", resource.group_kind()),
                        };
                        Err(Error::NotEmpty(format!(
                            "the cluster already holds objects ({at}, ...): restore into an empty cluster, or pass --merge to keep them or --replace to replace those the snapshot names"
                        )))
                    }
                    None => Ok(()),
                }
            })
            .await;
        match found {
            Ok(()) => {}
            Err(error @ Error::NotEmpty(_)) => return Err(error),
            Err(error) => {
                tracing::warn!(kind = %resource.group_kind(), %error, "cannot check for objects");
            }
        }
    }
    Ok(())
}

/// Resolves documents to resources, splits owner references, and assigns
/// tiers. Each document's object is moved into its item.
fn plan(
    documents: Vec<ScannedDocument>,
    resources: &Resources,
    report: &mut Report,
    bottom_up: bool,
) -> Vec<Item> {
    // One shared resource per kind: (apiVersion, kind, resource).
    let mut kinds: Vec<(String, String, Arc<Resource>)> = Vec::new();
    let mut items: Vec<Item> = Vec::with_capacity(documents.len());
    let mut references: Vec<Option<Value>> = Vec::with_capacity(documents.len());
    for document in documents {
        let ScannedDocument {
            number,
            line,
            head,
            body,
        } = document;
        let (api_version, kind) = (head.api_version.as_str(), head.kind.as_str());
        let resource = match kinds.iter().find(|(v, k, _)| v == api_version && k == kind) {
            Some((_, _, resource)) => resource.clone(),
            None => {
                let Some(resource) = resources.find(api_version, kind) else {
                    continue;
                };
                let resource = Arc::new(resource.clone());
                kinds.push((api_version.to_string(), kind.to_string(), resource.clone()));
                resource
            }
        };
        // The uid and owner references stay in the object until it is
        // created: `creation` drops them.
        let namespace = head.namespace.filter(|_| resource.namespaced);
        references.push(head.owner_references);
        items.push(Item {
            document: number,
            line,
            resource,
            namespace,
            name: head.name,
            old_uid: head.uid,
            owns: false,
            owners: Vec::new(),
            tier: 0,
            body,
        });
    }
    // dependents[i]: the items item i owns.
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
    let mut owners: Vec<Vec<Value>> = vec![Vec::new(); items.len()];
    {
        let known: HashMap<&str, usize> = items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| Some((item.old_uid.as_deref()?, i)))
            .collect();
        for (index, references) in references.into_iter().enumerate() {
            let Some(Value::Array(references)) = references else {
                continue;
            };
            for reference in references {
                match reference["uid"].as_str().and_then(|u| known.get(u)) {
                    Some(&owner) => {
                        dependents[owner].push(index);
                        owners[index].push(reference);
                    }
                    None => report.dangling_owner_references += 1,
                }
            }
        }
    }
    for ((item, owners), dependents) in items.iter_mut().zip(owners).zip(&dependents) {
        item.owners = owners;
        item.owns = !dependents.is_empty();
    }
    // (Top down, the same walk runs over owners instead of dependents.)
    // depth: how many levels of dependents are below an item.
    if !bottom_up {
        // Owners first: an item's tier follows its longest chain of owners.
        let mut owners_of: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
        for (owner, list) in dependents.iter().enumerate() {
            for &dependent in list {
                owners_of[dependent].push(owner);
            }
        }
        dependents = owners_of;
    }
    let mut depth: Vec<Option<usize>> = vec![None; items.len()];
    fn depth_of(
        i: usize,
        dependents: &[Vec<usize>],
        depth: &mut [Option<usize>],
        visiting: &mut HashSet<usize>,
    ) -> usize {
        if let Some(d) = depth[i] {
            return d;
        }
        if !visiting.insert(i) {
            return 0; // a cycle: cut it
        }
        let d = dependents[i]
            .iter()
            .map(|&c| depth_of(c, dependents, depth, visiting) + 1)
            .max()
            .unwrap_or(0);
        visiting.remove(&i);
        depth[i] = Some(d);
        d
    }
    let mut visiting = HashSet::new();
    for (index, item) in items.iter_mut().enumerate() {
        let d = depth_of(index, &dependents, &mut depth, &mut visiting);
        let foundation = FOUNDATION
            .iter()
            .position(|(g, k)| *g == item.resource.group && *k == item.resource.kind);
        item.tier = match foundation {
            Some(position) if item.owners.is_empty() => position,
            _ => FOUNDATION.len() + d,
        };
    }
    items.sort_by_key(|i| i.tier);
    items
}

/// [`prepare`] of an item, its object and owner references moved out of it.
#[cfg(test)]
fn creation(item: &mut Item, uids: Option<&HashMap<String, String>>) -> BulkObject {
    let owners = match uids {
        Some(_) => std::mem::take(&mut item.owners),
        None => Vec::new(),
    };
    prepare(&item.resource, std::mem::take(&mut item.body), owners, uids).expect("a built object")
}

/// What is created for an item's object (built from its text if need be;
/// the message if it cannot be): server-owned metadata out (its old uid
/// and owner references too); its in-snapshot `owners` back with the
/// owners' new uids when `uids` is given (nothing puts them back later); a
/// Job's generated selector kept as a manual one (it names the old uid);
/// the status written after the create split off.
fn prepare(
    resource: &Resource,
    body: Body,
    owners: Vec<Value>,
    uids: Option<&HashMap<String, String>>,
) -> Result<BulkObject, String> {
    let mut object = body.into_object()?;
    let old_generation = object["metadata"]["generation"].as_i64();
    let owners: Vec<Value> = match uids {
        Some(uids) => owners
            .into_iter()
            .filter_map(|mut r| {
                let new = uids.get(r["uid"].as_str()?)?;
                r["uid"] = json!(new);
                Some(r)
            })
            .collect(),
        None => Vec::new(),
    };
    if let Some(metadata) = object["metadata"].as_object_mut() {
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
            "ownerReferences",
        ] {
            metadata.remove(field);
        }
        if !owners.is_empty() {
            metadata.insert("ownerReferences".into(), Value::Array(owners));
        }
    }
    if resource.group == "batch" && resource.kind == "Job" {
        let labels = &object["spec"]["selector"]["matchLabels"];
        let generated = labels.get("batch.kubernetes.io/controller-uid").is_some()
            || labels.get("controller-uid").is_some();
        if generated && object["spec"]["manualSelector"] != json!(true) {
            object["spec"]["manualSelector"] = json!(true);
        }
    }
    let status = split_status(resource, &mut object, old_generation);
    Ok(BulkObject { object, status })
}

/// Takes out of `object` the status to write back after creating it, if
/// any: that of a kind with a `status` subresource (a create resets it),
/// but for namespaces, nodes and CRDs, whose create keeps it.
/// `observedGeneration` follows the generation a create starts at (1) from
/// the object's old `generation`.
fn split_status(
    resource: &Resource,
    object: &mut Value,
    old_generation: Option<i64>,
) -> Option<Value> {
    if !resource.has_status {
        return None;
    }
    let skip = matches!(
        (resource.group.as_str(), resource.kind.as_str()),
        ("", "Namespace" | "Node") | ("apiextensions.k8s.io", "CustomResourceDefinition")
    );
    let map = object.as_object_mut()?;
    let written = map
        .get("status")
        .and_then(Value::as_object)
        .is_some_and(|status| !status.is_empty());
    if skip || !written {
        return None;
    }
    let mut status = map.remove("status")?;
    if let (Some(old), Some(observed)) = (old_generation, status["observedGeneration"].as_i64()) {
        status["observedGeneration"] = json!((1 - (old - observed)).max(0));
    }
    Some(status)
}

/// The body of a merge patch of the status subresource.
#[derive(serde::Serialize)]
struct StatusPatch<'a> {
    status: &'a Value,
}

/// Writes an item's status back after its create.
async fn write_status(target: &Target, item: &Item, object: &BulkObject) -> Result<(), Error> {
    let Some(status) = &object.status else {
        return Ok(());
    };
    target
        .merge_patch(
            &item.resource,
            item.namespace.as_deref(),
            &item.name,
            Some("status"),
            &StatusPatch { status },
        )
        .await
        .map_err(|e| item.failed(Error::from_kube(e)))
}

/// Creates one item with a request (and writes its status back).
async fn create_one(
    target: &Target,
    item: &Item,
    object: &BulkObject,
    conflicts: Conflicts,
    renamed: &Renamed,
) -> Result<Outcome, Error> {
    match target.create_brief(&item.resource, &object.object).await {
        Ok(created) => {
            write_status(target, item, object).await?;
            Ok(Outcome::Created {
                new_uid: created.metadata.uid,
            })
        }
        Err(e) if Error::is_already_exists(&e) => {
            settle_existing(target, item, Some(object), conflicts, renamed).await
        }
        Err(e) => Err(item.failed(Error::from_kube(e))),
    }
}

/// An item that already exists: kept (its uid read), or under
/// `Conflicts::Replace` overwritten from `object` in place, keeping its uid
/// (so that no controller sees it vanish and makes another under the same
/// name, as a Deployment does its ReplicaSet), or deleted and created again
/// where the API refuses the change (a pod's spec). A replaced object's
/// original comes back in the outcome for a rollback; a failure half way
/// through (its status refused, its re-creation refused) puts it back at once
/// (noting in `renamed` if that gave it a new uid).
async fn settle_existing(
    target: &Target,
    item: &Item,
    object: Option<&BulkObject>,
    conflicts: Conflicts,
    renamed: &Renamed,
) -> Result<Outcome, Error> {
    let fail = |e: kube::Error| item.failed(Error::from_kube(e));
    let replace = conflicts == Conflicts::Replace
        && !is_system(
            &item.resource,
            item.namespace.as_deref().unwrap_or_default(),
            &item.name,
        )
        && item.resource.kind != "Namespace";
    let namespace = item.namespace.as_deref();
    let Some(object) = object.filter(|_| replace) else {
        let existing = target
            .get(&item.resource, namespace, &item.name)
            .await
            .map_err(fail)?;
        let uid = existing["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        return Ok(Outcome::Existing { uid });
    };
    let mut refused = None;
    for _ in 0..5 {
        let existing = target
            .get(&item.resource, namespace, &item.name)
            .await
            .map_err(fail)?;
        let mut body = object.object.clone();
        body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"].clone();
        match target
            .replace(&item.resource, namespace, &item.name, None, &body)
            .await
        {
            Ok(()) => {
                let uid = existing["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let original = Original {
                    object: existing,
                    recreated: false,
                };
                if let Err(error) = write_status(target, item, object).await {
                    return Err(put_back_after(target, item, &original, error, renamed).await);
                }
                return Ok(Outcome::Replaced {
                    uid,
                    original: Box::new(original),
                });
            }
            // Changed meanwhile: read it again.
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            // A change the API refuses in place: delete and create.
            Err(kube::Error::Api(status)) if status.code == 422 => {
                refused = Some(existing);
                break;
            }
            Err(e) => return Err(fail(e)),
        }
    }
    let existing = match refused {
        Some(existing) => existing,
        None => target
            .get(&item.resource, namespace, &item.name)
            .await
            .map_err(fail)?,
    };
    let original = Original {
        object: existing,
        recreated: true,
    };
    target
        .delete(&item.resource, namespace, &item.name)
        .await
        .map_err(fail)?;
    let created = match create_again(target, &item.resource, &object.object).await {
        Ok(created) => created,
        Err(e) => return Err(put_back_after(target, item, &original, fail(e), renamed).await),
    };
    if let Err(error) = write_status(target, item, object).await {
        return Err(put_back_after(target, item, &original, error, renamed).await);
    }
    Ok(Outcome::Replaced {
        uid: created.metadata.uid,
        original: Box::new(original),
    })
}

/// Creates `object`, waiting while an object of its name is still being
/// deleted.
async fn create_again(
    target: &Target,
    resource: &Resource,
    object: &Value,
) -> Result<Created, kube::Error> {
    let mut attempt = 0;
    loop {
        match target.create_brief(resource, object).await {
            Ok(created) => return Ok(created),
            Err(e) if Error::is_already_exists(&e) && attempt < 100 => {
                attempt += 1;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await; // wall-clock: polls a remote server
            }
            Err(e) => return Err(e),
        }
    }
}

/// `error`, after putting back the object that replacing `item` changed
/// (or saying that it could not be); a new uid it got is noted in `renamed`.
async fn put_back_after(
    target: &Target,
    item: &Item,
    original: &Original,
    error: Error,
    renamed: &Renamed,
) -> Error {
    match put_back(
        target,
        &item.resource,
        item.namespace.as_deref(),
        &item.name,
        original,
    )
    .await
    {
        Ok(new_uid) => {
            note_renamed(renamed, original, new_uid);
            error
        }
        Err(e) => Error::Restore(format!(
            "{error}; it could not be put back as it was: {}",
            Error::from_kube(e)
        )),
    }
}

/// Metadata the server owns, dropped from an original created again.
const SERVER_OWNED: [&str; 5] = [
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "generation",
];

/// Notes that `original` was put back under `new_uid` (if it was created again).
fn note_renamed(renamed: &Renamed, original: &Original, new_uid: Option<String>) {
    let (Some(old), Some(new)) = (original.object["metadata"]["uid"].as_str(), new_uid) else {
        return;
    };
    renamed
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(old.to_string(), new);
}

/// Puts an object the restore replaced back as it was: PUT at its current
/// resourceVersion if it was replaced in place, else deleted and created
/// again from its original (its new uid is returned); its status written
/// back where it had one.
async fn put_back(
    target: &Target,
    resource: &Resource,
    namespace: Option<&str>,
    name: &str,
    original: &Original,
) -> Result<Option<String>, kube::Error> {
    let status = original
        .object
        .get("status")
        .filter(|status| status.as_object().is_some_and(|s| !s.is_empty()))
        .filter(|_| resource.has_status);
    let mut new_uid = None;
    if original.recreated {
        target.delete(resource, namespace, name).await?;
        let mut body = original.object.clone();
        if let Some(metadata) = body["metadata"].as_object_mut() {
            for field in SERVER_OWNED {
                metadata.remove(field);
            }
        }
        if let Some(map) = body.as_object_mut() {
            map.remove("status");
        }
        new_uid = Some(create_again(target, resource, &body).await?.metadata.uid);
    } else {
        replace_current(target, resource, namespace, name, false, &original.object).await?;
    }
    if let Some(status) = status {
        let mut body = original.object.clone();
        body["status"] = status.clone();
        replace_current(target, resource, namespace, name, true, &body).await?;
    }
    Ok(new_uid)
}

/// PUTs `object` over object `name` (or over its status) at its current
/// resourceVersion, reading it again while it changes meanwhile.
async fn replace_current(
    target: &Target,
    resource: &Resource,
    namespace: Option<&str>,
    name: &str,
    status: bool,
    object: &Value,
) -> Result<(), kube::Error> {
    let mut attempt = 0;
    loop {
        let current = target.get(resource, namespace, name).await?;
        let mut body = object.clone();
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
        body["metadata"]["uid"] = current["metadata"]["uid"].clone();
        let subresource = status.then_some("status");
        let result = target
            .replace(resource, namespace, name, subresource, &body)
            .await;
        match result {
            Err(kube::Error::Api(status)) if status.code == 409 && attempt < 5 => attempt += 1,
            result => return result,
        }
    }
}

/// An item's parts moved out of it to be built off the async runtime.
struct Pending {
    /// Its index in the tier.
    index: usize,
    resource: Arc<Resource>,
    body: Body,
    /// Its owner references, when they are sent with it (remapped).
    owners: Vec<Value>,
}

/// A chunk of a tier made ready for creation.
#[derive(Default)]
struct Prepared {
    /// The index in the tier of each object.
    indices: Vec<usize>,
    objects: Vec<BulkObject>,
    /// A copy of each object, for `Conflicts::Replace` (else empty).
    kept: Vec<BulkObject>,
    /// Items whose object could not be built, and why.
    failed: Vec<(usize, String)>,
}

/// Builds a chunk's objects as they are created ([`prepare`]).
fn prepare_chunk(
    chunk: Vec<Pending>,
    uids: Option<&HashMap<String, String>>,
    keep: bool,
) -> Prepared {
    let mut prepared = Prepared {
        indices: Vec::with_capacity(chunk.len()),
        objects: Vec::with_capacity(chunk.len()),
        ..Prepared::default()
    };
    for Pending {
        index,
        resource,
        body,
        owners,
    } in chunk
    {
        match prepare(&resource, body, owners, uids) {
            Ok(object) => {
                if keep {
                    prepared.kept.push(object.clone());
                }
                prepared.indices.push(index);
                prepared.objects.push(object);
            }
            Err(message) => prepared.failed.push((index, message)),
        }
    }
    prepared
}

/// One bulk call on a task of its own (so that a server in process works
/// on every core).
fn send(
    bulk: &Arc<dyn BulkCreate>,
    objects: Vec<BulkObject>,
) -> impl Future<Output = Result<BulkAnswer, Error>> + use<> {
    let call = bulk.create(objects);
    async move {
        tokio::spawn(call)
            .await
            .map_err(|e| Error::Invalid(format!("a restore task failed: {e}")))
            .and_then(|answer| answer)
    }
}

/// What a tier's creation has given so far, by index in the tier.
struct Outcomes<'a> {
    batch: &'a [Item],
    results: Vec<Option<Result<Outcome, Error>>>,
    /// Copies of the objects (`Conflicts::Replace`; else empty).
    kept: Vec<Option<BulkObject>>,
    /// Items that exist already.
    existing: Vec<usize>,
}

impl Outcomes<'_> {
    /// Records a chunk's failures and copies; its indices and objects.
    fn made(&mut self, prepared: Prepared) -> (Vec<usize>, Vec<BulkObject>) {
        let Prepared {
            indices,
            objects,
            kept,
            failed,
        } = prepared;
        for (i, message) in failed {
            let error = Error::Invalid(format!("cannot read the object: {message}"));
            self.results[i] = Some(Err(self.batch[i].failed(error)));
        }
        for (&i, object) in indices.iter().zip(kept) {
            self.kept[i] = Some(object);
        }
        (indices, objects)
    }

    /// Records what a bulk call answered for the items at `indices`.
    fn answered(&mut self, indices: &[usize], answer: Result<BulkAnswer, Error>) {
        let created = match answer {
            Ok(BulkAnswer::Created(created)) if created.len() == indices.len() => created,
            other => {
                let message = match other {
                    Err(error) => error.to_string(),
                    Ok(_) => "the bulk creation answered a different number of items".into(),
                };
                for &i in indices {
                    let error = Error::Transport(message.clone());
                    self.results[i] = Some(Err(self.batch[i].failed(error)));
                }
                return;
            }
        };
        for (&i, result) in indices.iter().zip(created) {
            self.results[i] = match result {
                Ok(created) => Some(Ok(Outcome::Created {
                    new_uid: created.uid,
                })),
                Err(status) if status.code == 409 && status.reason == "AlreadyExists" => {
                    self.existing.push(i);
                    None
                }
                Err(status) => Some(Err(
                    self.batch[i].failed(Error::from_kube(kube::Error::Api(status)))
                )),
            };
        }
    }
}

/// Creates one tier's items: in bulk while the cluster has a bulk path, a
/// chunk per call, a few calls in flight, each chunk's objects built (from
/// the file's text) on the blocking pool while the chunks before it are
/// created; else a request or two per object. Those that exist are kept or
/// replaced. A result per item, in order.
async fn apply_batch(
    target: &Target,
    batch: &mut [Item],
    options: &RestoreOptions,
    progress: &mut Progress,
) -> Result<Vec<Result<Outcome, Error>>, Error> {
    // Without controllers, dependents are sent with their owners' new uids.
    let remap = !options.controllers_running;
    let uids = match remap && batch.iter().any(|item| !item.owners.is_empty()) {
        true => Some(Arc::new(progress.uids.clone())),
        false => remap.then(|| Arc::new(HashMap::new())),
    };
    // Replacing creates again those that exist: only then is a copy kept.
    let keep = options.conflicts == Conflicts::Replace;
    let size = match &progress.bulk {
        Some(bulk) => bulk.chunk_size().max(1),
        None => batch.len().max(1),
    };
    let mut chunks = Vec::with_capacity(batch.len() / size + 1);
    for (number, items) in batch.chunks_mut(size).enumerate() {
        let chunk: Vec<Pending> = items
            .iter_mut()
            .enumerate()
            .map(|(offset, item)| Pending {
                index: number * size + offset,
                resource: item.resource.clone(),
                body: std::mem::take(&mut item.body),
                owners: match remap {
                    true => std::mem::take(&mut item.owners),
                    false => Vec::new(),
                },
            })
            .collect();
        chunks.push(chunk);
    }
    let batch = &*batch;
    let make = |chunk: Vec<Pending>| {
        let uids = uids.clone();
        let made = tokio::task::spawn_blocking(move || prepare_chunk(chunk, uids.as_deref(), keep));
        async move {
            made.await
                .map_err(|e| Error::Invalid(format!("a restore task failed: {e}")))
        }
    };
    // Chunks are built two ahead of their creation.
    let mut made = futures::stream::iter(chunks).map(make).buffered(2);
    let mut outcomes = Outcomes {
        batch,
        results: (0..batch.len()).map(|_| None).collect(),
        kept: match keep {
            true => (0..batch.len()).map(|_| None).collect(),
            false => Vec::new(),
        },
        existing: Vec::new(),
    };
    let mut unsent: Vec<(usize, BulkObject)> = Vec::new();
    if let Some(bulk) = progress.bulk.clone()
        && let Some(first) = made.next().await
    {
        let (indices, objects) = outcomes.made(first?);
        // The first call alone: it tells whether there is a bulk path.
        match send(&bulk, objects).await {
            Ok(BulkAnswer::Unsupported(returned)) => {
                progress.bulk = None;
                unsent.extend(indices.into_iter().zip(returned));
            }
            answer => {
                outcomes.answered(&indices, answer);
                let answers: Vec<_> = made
                    .by_ref()
                    .map(|prepared| {
                        let bulk = bulk.clone();
                        async move {
                            let mut prepared = prepared?;
                            let objects = std::mem::take(&mut prepared.objects);
                            let answer = send(&bulk, objects).await;
                            Ok::<_, Error>((prepared, answer))
                        }
                    })
                    .buffer_unordered(bulk.in_flight().max(1))
                    .collect()
                    .await;
                let mut broken = None;
                for answer in answers {
                    match answer {
                        Ok((prepared, answer)) => {
                            let (indices, _) = outcomes.made(prepared);
                            outcomes.answered(&indices, answer);
                        }
                        Err(error) => broken = broken.or(Some(error)),
                    }
                }
                if let Some(error) = broken {
                    // Its items have no result: said below, after
                    // what the others did is recorded.
                    tracing::warn!(%error, "a chunk of the restore was not built");
                }
            }
        }
    }
    // Without a bulk path: every object (left) built, then created alone.
    while let Some(prepared) = made.next().await {
        let (indices, objects) = outcomes.made(prepared?);
        unsent.extend(indices.into_iter().zip(objects));
    }
    let concurrency = options.concurrency.max(1);
    let renamed = &progress.renamed;
    let mut done: Vec<(usize, Result<Outcome, Error>)> = futures::stream::iter(unsent)
        .map(|(i, object)| async move {
            (
                i,
                create_one(target, &batch[i], &object, options.conflicts, renamed).await,
            )
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let Outcomes {
        mut results,
        kept,
        existing,
        ..
    } = outcomes;
    let kept = &kept;
    done.extend(
        futures::stream::iter(existing)
            .map(|i| async move {
                let object = kept.get(i).and_then(Option::as_ref);
                (
                    i,
                    settle_existing(target, &batch[i], object, options.conflicts, renamed).await,
                )
            })
            .buffer_unordered(concurrency)
            .collect::<Vec<_>>()
            .await,
    );
    for (i, result) in done {
        results[i] = Some(result);
    }
    Ok(results
        .into_iter()
        .map(|result| {
            result.unwrap_or_else(|| {
                Err(Error::Transport(
                    "the bulk creation answered no result for an object".into(),
                ))
            })
        })
        .collect())
}

/// Creates items tier by tier, each tier's objects concurrently.
async fn apply_tiers(
    target: &Target,
    items: Vec<Item>,
    options: &RestoreOptions,
    progress: &mut Progress,
) -> Result<(), Error> {
    let mut items = items.into_iter().peekable();
    while let Some(first) = items.next() {
        let tier = first.tier;
        let mut batch = vec![first];
        while let Some(item) = items.next_if(|i| i.tier == tier) {
            batch.push(item);
        }
        let results = apply_batch(target, &mut batch, options, progress).await?;
        let mut first_error: Option<(usize, Error)> = None;
        for (item, result) in batch.into_iter().zip(results) {
            let (uid, created, original) = match result {
                Ok(Outcome::Created { new_uid }) => (new_uid, true, None),
                Ok(Outcome::Replaced { uid, original }) => {
                    progress.report.replaced += 1;
                    (uid, true, Some(original))
                }
                Ok(Outcome::Existing { uid }) => {
                    progress.report.existing += 1;
                    (uid, false, None)
                }
                Err(error) => {
                    if first_error.as_ref().is_none_or(|(d, _)| item.document < *d) {
                        first_error = Some((item.document, error));
                    }
                    continue;
                }
            };
            if created {
                let created = &mut progress.report.created;
                match created.get_mut(&item.resource.kind) {
                    Some(count) => *count += 1,
                    None => {
                        created.insert(item.resource.kind.clone(), 1);
                    }
                }
            }
            if item.owns
                && let Some(old) = item.old_uid
            {
                progress.uids.insert(old, uid);
            }
            let Item {
                resource,
                namespace,
                name,
                owners,
                ..
            } = item;
            if options.controllers_running && !owners.is_empty() {
                if created {
                    progress.applied.push(Applied {
                        resource: resource.clone(),
                        namespace: namespace.clone(),
                        name: name.clone(),
                        original,
                    });
                }
                progress.owned.push(Owned {
                    resource,
                    namespace,
                    name,
                    owners,
                });
            } else if created {
                progress.applied.push(Applied {
                    resource,
                    namespace,
                    name,
                    original,
                });
            }
        }
        if let Some((_, error)) = first_error {
            return Err(error);
        }
    }
    Ok(())
}

/// Puts every in-snapshot owner reference back with the owner's new uid.
async fn restore_owner_references(
    target: &Target,
    owned: Vec<Owned>,
    uids: &HashMap<String, String>,
    concurrency: usize,
) -> Result<(), Error> {
    let results: Vec<Result<(), Error>> = futures::stream::iter(owned)
        .map(|object| async move {
            let Owned {
                resource,
                namespace,
                name,
                owners,
            } = object;
            let references: Vec<Value> = owners
                .into_iter()
                .filter_map(|mut r| {
                    let new = uids.get(r["uid"].as_str()?)?;
                    r["uid"] = json!(new);
                    Some(r)
                })
                .collect();
            if references.is_empty() {
                return Ok(());
            }
            let patch = json!({"metadata": {"ownerReferences": references}});
            target
                .merge_patch(&resource, namespace.as_deref(), &name, None, &patch)
                .await
                .map_err(|e| {
                    Error::Restore(format!(
                        "{} {}{name}: cannot restore its owner references: {}",
                        resource.group_kind(),
                        namespace.map(|n| format!("{n}/")).unwrap_or_default(),
                        Error::from_kube(e)
                    ))
                })
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    results.into_iter().collect()
}

/// Undoes what a failed restore applied, newest first: deletes the objects
/// it created and puts back those it replaced; then points the owner
/// references of every object that names one put back under a new uid (in
/// `renamed`, and those this puts back) at that uid; says exactly what
/// happened.
async fn roll_back(
    target: &Target,
    applied: Vec<Applied>,
    mut renamed: HashMap<String, String>,
    error: Error,
) -> Error {
    let mut created = 0;
    let mut replaced = 0;
    let mut not_deleted = Vec::new();
    let mut not_put_back = Vec::new();
    for object in applied.into_iter().rev() {
        let Applied {
            resource,
            namespace,
            name,
            original,
        } = object;
        let namespace = namespace.as_deref();
        let (result, left) = match &original {
            None => {
                created += 1;
                (
                    target.delete(&resource, namespace, &name).await,
                    &mut not_deleted,
                )
            }
            Some(original) => {
                replaced += 1;
                let result = put_back(target, &resource, namespace, &name, original).await;
                (
                    result.map(|new_uid| {
                        if let (Some(old), Some(new)) =
                            (original.object["metadata"]["uid"].as_str(), new_uid)
                        {
                            renamed.insert(old.to_string(), new);
                        }
                    }),
                    &mut not_put_back,
                )
            }
        };
        if let Err(e) = result {
            left.push(format!(
                "{} {}{name} ({})",
                resource.group_kind(),
                namespace.map(|n| format!("{n}/")).unwrap_or_default(),
                Error::from_kube(e)
            ));
        }
    }
    let mut summary = if created + replaced == 0 {
        "nothing was applied".to_string()
    } else {
        rollback_summary(created, &not_deleted, replaced, &not_put_back)
    };
    if !renamed.is_empty() {
        let (owners, pointed, not_pointed) = point_at_new_uids(target, &renamed).await;
        if let Some(words) = renamed_summary(owners, pointed, &not_pointed) {
            summary.push_str("; ");
            summary.push_str(&words);
        }
    }
    Error::Restore(format!("restore failed: {error}; {summary}"))
}

/// Points every owner reference in the cluster that names an old uid of
/// `renamed` at its new uid (a PUT at the object's resourceVersion, read
/// again while it changes meanwhile). How many owners were named, how many
/// objects were changed, and those that could not be (or the kinds that
/// could not be listed).
async fn point_at_new_uids(
    target: &Target,
    renamed: &HashMap<String, String>,
) -> (usize, usize, Vec<String>) {
    let resources = match target.resources().await {
        Ok(resources) => resources,
        Err(error) => {
            return (
                renamed.len(),
                0,
                vec![format!("cannot discover the served kinds: {error}")],
            );
        }
    };
    let mut owners = HashSet::new();
    let names = |object: &Value| {
        object["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|refs| {
                refs.iter()
                    .any(|r| r["uid"].as_str().is_some_and(|u| renamed.contains_key(u)))
            })
    };
    let mut pointed = 0;
    let mut failed = Vec::new();
    for resource in resources.preferred.iter().filter(|r| r.can_list) {
        let mut found = Vec::new();
        let listed = target
            .list_pages(resource, None, None, 500, |items| {
                found.extend(items.into_iter().filter(|o| names(o)));
                Ok(())
            })
            .await;
        if let Err(error) = listed {
            failed.push(format!("{} (cannot list: {error})", resource.group_kind()));
            continue;
        }
        for object in found {
            owners.extend(
                object["metadata"]["ownerReferences"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|r| r["uid"].as_str())
                    .filter(|u| renamed.contains_key(*u))
                    .map(str::to_string),
            );
            let namespace = object["metadata"]["namespace"].as_str().map(str::to_string);
            let name = object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            match point_owner_references(
                target,
                resource,
                namespace.as_deref(),
                &name,
                object,
                renamed,
            )
            .await
            {
                Ok(true) => pointed += 1,
                Ok(false) => {}
                Err(error) => failed.push(format!(
                    "{} {}{name} ({})",
                    resource.group_kind(),
                    namespace.map(|n| format!("{n}/")).unwrap_or_default(),
                    Error::from_kube(error)
                )),
            }
        }
    }
    (owners.len(), pointed, failed)
}

/// Points the owner references of `object` (as last read) that name an old
/// uid of `renamed` at the new one; whether it changed anything (it may
/// have been deleted or changed by someone else meanwhile).
async fn point_owner_references(
    target: &Target,
    resource: &Resource,
    namespace: Option<&str>,
    name: &str,
    mut object: Value,
    renamed: &HashMap<String, String>,
) -> Result<bool, kube::Error> {
    let mut attempt = 0;
    loop {
        let mut changed = false;
        if let Some(references) = object["metadata"]["ownerReferences"].as_array_mut() {
            for reference in references {
                if let Some(new) = reference["uid"].as_str().and_then(|u| renamed.get(u)) {
                    reference["uid"] = json!(new);
                    changed = true;
                }
            }
        }
        if !changed {
            return Ok(false);
        }
        // List items may come without their kind.
        object["apiVersion"] = json!(resource.api_version);
        object["kind"] = json!(resource.kind);
        match target
            .replace(resource, namespace, name, None, &object)
            .await
        {
            Ok(()) => return Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 && attempt < 5 => {
                attempt += 1;
                object = target.get(resource, namespace, name).await?;
            }
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(false),
            Err(error) => return Err(error),
        }
    }
}

/// What pointing dependents at new uids did, in words (`None` if there was
/// nothing to say): `owners` objects were put back under new uids, the owner
/// references of `pointed` objects now name them, and those that could not.
fn renamed_summary(owners: usize, pointed: usize, failed: &[String]) -> Option<String> {
    let objects = |n: usize| if n == 1 { "object" } else { "objects" };
    let (uids, it) = if owners == 1 {
        ("uid", "it")
    } else {
        ("uids", "them")
    };
    let put_back = format!(
        "the {owners} {} put back by creating {it} again",
        objects(owners)
    );
    let mut parts = Vec::new();
    if pointed > 0 {
        parts.push(format!(
            "the owner references of {pointed} {} now name the new {uids} of {put_back}",
            objects(pointed)
        ));
    }
    if !failed.is_empty() {
        parts.push(format!(
            "these could not be made to name the new {uids} of {put_back}: {}",
            failed.join(", ")
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// What a rollback did, in words: how many created objects were deleted
/// again, how many replaced ones were put back, and those that could not be.
fn rollback_summary(
    created: usize,
    not_deleted: &[String],
    replaced: usize,
    not_put_back: &[String],
) -> String {
    let objects = |n: usize| if n == 1 { "object" } else { "objects" };
    let were = |n: usize| if n == 1 { "was" } else { "were" };
    let mut parts = Vec::new();
    if created > 0 {
        parts.push(if not_deleted.is_empty() {
            format!(
                "the {created} {} it had created {} deleted again",
                objects(created),
                were(created)
            )
        } else {
            format!(
                "of the {created} {} it had created, these could not be deleted: {}",
                objects(created),
                not_deleted.join(", ")
            )
        });
    }
    if replaced > 0 {
        let noun = if created > 0 { "" } else { objects(replaced) };
        let the = if noun.is_empty() {
            format!("{replaced}")
        } else {
            format!("{replaced} {noun}")
        };
        parts.push(if not_put_back.is_empty() {
            format!("the {the} it had replaced {} put back", were(replaced))
        } else {
            format!(
                "of the {the} it had replaced, these could not be put back: {}",
                not_put_back.join(", ")
            )
        });
    }
    let joiner = if not_deleted.is_empty() && not_put_back.is_empty() {
        " and "
    } else {
        "; "
    };
    parts.join(joiner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rollback_says_what_it_deleted_and_what_it_put_back() {
        assert_eq!(
            rollback_summary(3, &[], 2, &[]),
            "the 3 objects it had created were deleted again and the 2 it had replaced were put back"
        );
        assert_eq!(
            rollback_summary(1, &[], 0, &[]),
            "the 1 object it had created was deleted again"
        );
        assert_eq!(
            rollback_summary(0, &[], 1, &[]),
            "the 1 object it had replaced was put back"
        );
        assert_eq!(
            rollback_summary(2, &[], 2, &["ConfigMap default/a (forbidden)".to_string()]),
            "the 2 objects it had created were deleted again; of the 2 it had replaced, these could not be put back: ConfigMap default/a (forbidden)"
        );
        assert_eq!(
            rollback_summary(2, &["Pod default/p (timeout)".to_string()], 0, &[]),
            "of the 2 objects it had created, these could not be deleted: Pod default/p (timeout)"
        );
    }

    #[test]
    fn a_rollback_says_whose_owner_references_name_new_uids() {
        assert_eq!(renamed_summary(1, 0, &[]), None);
        assert_eq!(
            renamed_summary(1, 2, &[]).as_deref(),
            Some(
                "the owner references of 2 objects now name the new uid of the 1 object put back by creating it again"
            )
        );
        assert_eq!(
            renamed_summary(2, 1, &["Pod default/p (forbidden)".to_string()]).as_deref(),
            Some(
                "the owner references of 1 object now name the new uids of the 2 objects put back by creating them again; these could not be made to name the new uids of the 2 objects put back by creating them again: Pod default/p (forbidden)"
            )
        );
    }

    fn resources() -> Resources {
        Resources::for_tests(&[
            ("", "v1", "Namespace", "namespaces", false),
            ("", "v1", "Node", "nodes", false),
            ("", "v1", "Pod", "pods", true),
            ("apps", "v1", "ReplicaSet", "replicasets", true),
            ("apps", "v1", "Deployment", "deployments", true),
        ])
    }

    fn scanned(documents: Vec<Document>) -> Vec<ScannedDocument> {
        documents.into_iter().map(ScannedDocument::from).collect()
    }

    fn doc(number: usize, object: Value) -> Document {
        Document {
            number,
            line: number,
            object,
        }
    }

    #[test]
    fn dependents_come_before_their_owners_and_keep_only_known_owners() {
        let documents = vec![
            doc(
                1,
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "a", "uid": "d"}}),
            ),
            doc(
                2,
                json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-1", "namespace": "a", "uid": "r",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d", "controller": true}]}}),
            ),
            doc(
                3,
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1-x", "namespace": "a", "uid": "p",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "r", "controller": true},
                                    {"apiVersion": "v1", "kind": "Thing", "name": "gone", "uid": "missing"}]}}),
            ),
            doc(
                4,
                json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "uid": "n"}}),
            ),
            doc(
                5,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "uid": "ns"}}),
            ),
        ];
        let mut report = Report::default();
        let items = plan(scanned(documents), &resources(), &mut report, true);
        let order: Vec<&str> = items.iter().map(|i| i.resource.kind.as_str()).collect();
        assert_eq!(
            order,
            ["Namespace", "Node", "Pod", "ReplicaSet", "Deployment"]
        );
        assert_eq!(report.dangling_owner_references, 1);
        let pod = &items[2];
        assert_eq!(pod.owners.len(), 1);
        // Only those with dependents remember their new uid.
        let owns: Vec<bool> = items.iter().map(|i| i.owns).collect();
        assert_eq!(owns, [false, false, false, true, true]);
        assert_eq!(pod.old_uid.as_deref(), Some("p"));
        assert_eq!(
            (pod.namespace.as_deref(), pod.name.as_str()),
            (Some("a"), "web-1-x")
        );
        // Its references are put back later, not sent with it.
        let mut items = items;
        let body = creation(&mut items[2], None).object;
        assert!(body["metadata"].get("ownerReferences").is_none(), "{body}");
        assert!(body["metadata"].get("uid").is_none(), "{body}");
    }

    #[test]
    fn without_controllers_owners_come_first_and_dependents_carry_new_uids() {
        let documents = vec![
            doc(
                1,
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1-x", "namespace": "a", "uid": "p",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "r", "controller": true}]}}),
            ),
            doc(
                2,
                json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-1", "namespace": "a", "uid": "r",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d", "controller": true}]}}),
            ),
            doc(
                3,
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "a", "uid": "d"}}),
            ),
        ];
        let mut report = Report::default();
        let items = plan(scanned(documents), &resources(), &mut report, false);
        let order: Vec<&str> = items.iter().map(|i| i.resource.kind.as_str()).collect();
        assert_eq!(order, ["Deployment", "ReplicaSet", "Pod"]);
        let uids = HashMap::from([("r".to_string(), "new-r".to_string())]);
        let mut items = items;
        let created = creation(&mut items[2], Some(&uids));
        let body = created.object;
        assert_eq!(body["metadata"]["ownerReferences"][0]["uid"], "new-r");
        assert!(body["metadata"].get("uid").is_none());
        // The object was moved out of the item, not copied.
        assert!(matches!(items[2].body, Body::Object(Value::Null)));
    }

    #[test]
    fn the_crds_every_ksim_cluster_serves_are_system_objects() {
        let crds = Resources::for_tests(&[(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
        )]);
        let crd = &crds.preferred[0];
        let named = |name: &str| json!({"metadata": {"name": name}});
        assert!(is_system_object(
            crd,
            &named("distributedpoddisruptionbudgets.policy.ksim.io")
        ));
        assert!(!is_system_object(crd, &named("widgets.example.com")));
    }

    fn item(resource: Resource, object: Value) -> Item {
        Item {
            document: 1,
            line: 1,
            resource: Arc::new(resource),
            namespace: None,
            name: object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            old_uid: None,
            owns: false,
            owners: vec![],
            tier: 0,
            body: Body::Object(object),
        }
    }

    #[test]
    fn a_generated_job_selector_becomes_manual() {
        let mut job = item(
            Resources::for_tests(&[("batch", "v1", "Job", "jobs", true)]).preferred[0].clone(),
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "uid": "u", "resourceVersion": "3"},
                "spec": {"selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}}}}),
        );
        let body = creation(&mut job, None).object;
        assert_eq!(body["spec"]["manualSelector"], true);
        assert!(body["metadata"].get("uid").is_none());
        assert!(body["metadata"].get("resourceVersion").is_none());
    }

    #[test]
    fn observed_generation_follows_the_new_generation() {
        let mut deployment = item(
            resources().preferred[4].clone(),
            json!({"metadata": {"name": "web", "generation": 7}, "status": {"observedGeneration": 7, "replicas": 3}}),
        );
        let created = creation(&mut deployment, None);
        assert_eq!(
            created.status,
            Some(json!({"observedGeneration": 1, "replicas": 3}))
        );
        // The status is written after the create, not sent with it.
        assert!(created.object.get("status").is_none());
        assert!(created.object["metadata"].get("generation").is_none());
    }

    #[test]
    fn a_node_keeps_its_status_in_the_created_object() {
        let mut node = item(
            resources().preferred[1].clone(),
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "status": {"capacity": {"cpu": "4"}}}),
        );
        let created = creation(&mut node, None);
        assert_eq!(created.status, None);
        assert_eq!(created.object["status"]["capacity"]["cpu"], "4");
    }
}
