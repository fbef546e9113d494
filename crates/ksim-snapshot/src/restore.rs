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
//! A restore into a cluster that already holds objects (beyond what every
//! cluster starts with) is refused unless merging (existing objects are
//! kept) or replacing (existing objects the snapshot names are deleted and
//! created from it). A failed restore deletes what it created and says so.

use std::collections::{BTreeMap, HashMap, HashSet};

use futures::StreamExt;
use serde_json::{Value, json};

use crate::Error;
use crate::api::{Resource, Resources, Target};
use crate::document::Document;

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
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
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
    resource: Resource,
    object: Value,
    old_uid: Option<String>,
    /// Owner references to owners in the snapshot.
    owners: Vec<Value>,
    tier: usize,
}

impl Item {
    fn namespace(&self) -> Option<&str> {
        self.object["metadata"]["namespace"]
            .as_str()
            .filter(|_| self.resource.namespaced)
    }

    fn name(&self) -> &str {
        self.object["metadata"]["name"].as_str().unwrap_or_default()
    }

    /// `Kind namespace/name`, as messages name it.
    fn describe(&self) -> String {
        match self.namespace() {
            Some(ns) => format!("{} {ns}/{}", self.resource.group_kind(), self.name()),
            None => format!("{} {}", self.resource.group_kind(), self.name()),
        }
    }
}

/// What creating one object did.
enum Outcome {
    Created { new_uid: String, replaced: bool },
    Existing { uid: String },
}

/// An object that was created (for rollback).
struct Applied {
    resource: Resource,
    namespace: Option<String>,
    name: String,
}

/// Restores `documents` into `target`.
pub async fn restore(
    target: &Target,
    documents: Vec<Document>,
    options: &RestoreOptions,
) -> Result<Report, Error> {
    let mut report = Report::default();
    let mut resources = target.resources().await?;

    // Kinds the file's CRDs define become served once those are created.
    let defined: HashSet<(String, String)> = documents
        .iter()
        .filter(|d| d.object["kind"] == "CustomResourceDefinition")
        .flat_map(|d| crd_kinds(&d.object))
        .collect();
    let mut unserved = Vec::new();
    for document in &documents {
        let api_version = document.object["apiVersion"].as_str().unwrap_or_default();
        let kind = document.object["kind"].as_str().unwrap_or_default();
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
            first.object["apiVersion"].as_str().unwrap_or_default(),
            first.object["kind"].as_str().unwrap_or_default(),
            unserved.len()
        )));
    }
    for document in &unserved {
        let key = format!(
            "{}/{}",
            document.object["apiVersion"].as_str().unwrap_or_default(),
            document.object["kind"].as_str().unwrap_or_default()
        );
        *report.unserved.entry(key).or_default() += 1;
    }
    for (kind, count) in &report.unserved {
        tracing::warn!(%kind, count, "skipped: the cluster does not serve this kind");
    }

    if options.conflicts == Conflicts::Refuse {
        ensure_empty(target, &resources).await?;
    }

    let mut applied: Vec<Applied> = Vec::new();
    let mut uids: HashMap<String, String> = HashMap::new();
    let mut bulk = true;
    let result = async {
        // CRDs first, then the kinds they define are discovered.
        let (crds, rest): (Vec<Document>, Vec<Document>) = documents
            .into_iter()
            .partition(|d| d.object["kind"] == "CustomResourceDefinition");
        if !crds.is_empty() {
            let items = plan(crds, &resources, &mut report, options.controllers_running);
            apply_tiers(
                target,
                items,
                options,
                &mut report,
                &mut applied,
                &mut uids,
                &mut bulk,
            )
            .await?;
            resources = wait_for_kinds(target, &defined).await?;
        }
        let items = plan(rest, &resources, &mut report, options.controllers_running);
        let with_owners: Vec<(Resource, Option<String>, String, Vec<Value>)> = items
            .iter()
            .filter(|i| !i.owners.is_empty())
            .map(|i| {
                (
                    i.resource.clone(),
                    i.namespace().map(str::to_string),
                    i.name().to_string(),
                    i.owners.clone(),
                )
            })
            .collect();
        apply_tiers(
            target,
            items,
            options,
            &mut report,
            &mut applied,
            &mut uids,
            &mut bulk,
        )
        .await?;
        if !options.controllers_running {
            return Ok(());
        }
        restore_owner_references(target, with_owners, &uids, options.concurrency).await
    }
    .await;
    match result {
        Ok(()) => Ok(report),
        Err(error) => Err(roll_back(target, applied, error).await),
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

/// Resolves documents to resources, splits owner references, and assigns tiers.
fn plan(
    documents: Vec<Document>,
    resources: &Resources,
    report: &mut Report,
    bottom_up: bool,
) -> Vec<Item> {
    let mut items: Vec<Item> = documents
        .into_iter()
        .filter_map(|d| {
            let api_version = d.object["apiVersion"].as_str().unwrap_or_default();
            let kind = d.object["kind"].as_str().unwrap_or_default();
            let resource = resources.find(api_version, kind)?.clone();
            let old_uid = d.object["metadata"]["uid"].as_str().map(str::to_string);
            Some(Item {
                document: d.number,
                line: d.line,
                resource,
                object: d.object,
                old_uid,
                owners: Vec::new(),
                tier: 0,
            })
        })
        .collect();
    let known: HashMap<String, usize> = items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| item.old_uid.clone().map(|u| (u, i)))
        .collect();
    // dependents[i]: the items item i owns.
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
    // (Top down, the same walk runs over owners instead of dependents.)
    for (index, item) in items.iter_mut().enumerate() {
        let references = item.object["metadata"]
            .as_object_mut()
            .and_then(|m| m.remove("ownerReferences"));
        for reference in references
            .and_then(|r| r.as_array().cloned())
            .unwrap_or_default()
        {
            match reference["uid"].as_str().and_then(|u| known.get(u)) {
                Some(&owner) => {
                    dependents[owner].push(index);
                    item.owners.push(reference);
                }
                None => report.dangling_owner_references += 1,
            }
        }
    }
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

/// The body to create for an item: server-owned metadata and owner
/// references out; a Job's generated selector kept as a manual one (it
/// names the old uid).
fn creation_body(item: &Item, uids: Option<&HashMap<String, String>>) -> Value {
    let mut object = item.object.clone();
    let owners: Vec<Value> = uids
        .map(|uids| {
            item.owners
                .iter()
                .filter_map(|r| {
                    let mut r = r.clone();
                    r["uid"] = json!(uids.get(r["uid"].as_str()?)?);
                    Some(r)
                })
                .collect()
        })
        .unwrap_or_default();
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
    if item.resource.group == "batch" && item.resource.kind == "Job" {
        let labels = &object["spec"]["selector"]["matchLabels"];
        let generated = labels.get("batch.kubernetes.io/controller-uid").is_some()
            || labels.get("controller-uid").is_some();
        if generated && object["spec"]["manualSelector"] != json!(true) {
            object["spec"]["manualSelector"] = json!(true);
        }
    }
    object
}

/// The status to write back after creating, if any.
fn status_patch(item: &Item, created_generation: Option<i64>) -> Option<Value> {
    if !item.resource.has_status {
        return None;
    }
    let skip = matches!(
        (item.resource.group.as_str(), item.resource.kind.as_str()),
        ("", "Namespace" | "Node") | ("apiextensions.k8s.io", "CustomResourceDefinition")
    );
    let status = item.object.get("status")?;
    if skip || status.as_object().is_none_or(serde_json::Map::is_empty) {
        return None;
    }
    let mut status = status.clone();
    // observedGeneration follows the generation the server restarted at.
    if let (Some(old), Some(new), Some(observed)) = (
        item.object["metadata"]["generation"].as_i64(),
        created_generation,
        status["observedGeneration"].as_i64(),
    ) {
        status["observedGeneration"] = json!((new - (old - observed)).max(0));
    }
    Some(json!({ "status": status }))
}

/// Creates one item (and writes its status back).
async fn apply_one(
    target: &Target,
    item: &Item,
    conflicts: Conflicts,
    uids: Option<&HashMap<String, String>>,
) -> Result<Outcome, Error> {
    let body = creation_body(item, uids);
    let fail = |e: kube::Error| {
        Error::Restore(format!(
            "document {} (line {}), {}: {}",
            item.document,
            item.line,
            item.describe(),
            Error::from_kube(e)
        ))
    };
    let mut replaced = false;
    let created = match target.create_brief(&item.resource, &body).await {
        Ok(created) => created,
        Err(e) if Error::is_already_exists(&e) => {
            let replace = conflicts == Conflicts::Replace
                && !is_system_object(&item.resource, &item.object)
                && item.resource.kind != "Namespace";
            if !replace {
                let existing = target
                    .get(&item.resource, item.namespace(), item.name())
                    .await
                    .map_err(fail)?;
                let uid = existing["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                return Ok(Outcome::Existing { uid });
            }
            target
                .delete(&item.resource, item.namespace(), item.name())
                .await
                .map_err(fail)?;
            replaced = true;
            let mut attempt = 0;
            loop {
                match target.create_brief(&item.resource, &body).await {
                    Ok(created) => break created,
                    Err(e) if Error::is_already_exists(&e) && attempt < 100 => {
                        attempt += 1;
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await; // wall-clock: polls a remote server
                    }
                    Err(e) => return Err(fail(e)),
                }
            }
        }
        Err(e) => return Err(fail(e)),
    };
    if let Some(patch) = status_patch(item, created.metadata.generation) {
        target
            .merge_patch(
                &item.resource,
                item.namespace(),
                item.name(),
                Some("status"),
                &patch,
            )
            .await
            .map_err(fail)?;
    }
    Ok(Outcome::Created {
        new_uid: created.metadata.uid,
        replaced,
    })
}

/// Creates `indices` of `batch` one request (or two) per object, concurrently.
async fn apply_each(
    target: &Target,
    batch: &[Item],
    indices: impl Iterator<Item = usize>,
    options: &RestoreOptions,
    uids: Option<&HashMap<String, String>>,
) -> Vec<(usize, Result<Outcome, Error>)> {
    futures::stream::iter(indices)
        .map(|i| async move {
            (
                i,
                apply_one(target, &batch[i], options.conflicts, uids).await,
            )
        })
        .buffer_unordered(options.concurrency.max(1))
        .collect()
        .await
}

/// Objects a bulk request carries.
const BULK_CHUNK: usize = 500;
/// Bulk requests in flight at once (each on its own task, so that an
/// in-process server works on all cores).
const BULK_IN_FLIGHT: usize = 4;

/// One item of a bulk request: the body to create and the status to write.
fn bulk_item(item: &Item, uids: Option<&HashMap<String, String>>) -> Value {
    let mut entry = json!({ "object": creation_body(item, uids) });
    // A create starts every kind with a generation at 1.
    let generation = item.object["metadata"]["generation"].as_i64().map(|_| 1);
    if let Some(mut patch) = status_patch(item, generation) {
        entry["status"] = patch["status"].take();
    }
    entry
}

/// Creates a tier's objects through ksim's bulk path, a few hundred per
/// request; those that already exist go through [`apply_one`] (merge,
/// replace). `None` if the cluster has no bulk path (nothing was created).
async fn apply_bulk(
    target: &Target,
    batch: &[Item],
    options: &RestoreOptions,
    uids: Option<&HashMap<String, String>>,
) -> Result<Option<Vec<(usize, Result<Outcome, Error>)>>, Error> {
    let send = |start: usize| {
        let body: Vec<Value> = batch[start..(start + BULK_CHUNK).min(batch.len())]
            .iter()
            .map(|item| bulk_item(item, uids))
            .collect();
        let target = target.clone();
        async move {
            let answer = tokio::spawn(async move { target.create_many(&body).await })
                .await
                .map_err(|e| Error::Invalid(format!("a restore task failed: {e}")))
                .and_then(|answer| answer.map_err(Error::from_kube));
            (start, answer)
        }
    };
    let starts: Vec<usize> = (0..batch.len()).step_by(BULK_CHUNK).collect();
    let Some((&first, rest)) = starts.split_first() else {
        return Ok(Some(Vec::new()));
    };
    // The first request alone: it tells whether the path is there.
    let mut answers = vec![send(first).await];
    if matches!(answers[0].1, Ok(None)) {
        return Ok(None);
    }
    answers.extend(
        futures::stream::iter(rest.iter().copied())
            .map(send)
            .buffer_unordered(BULK_IN_FLIGHT)
            .collect::<Vec<_>>()
            .await,
    );
    let mut results = Vec::with_capacity(batch.len());
    let mut existing = Vec::new();
    for (start, answer) in answers {
        let created = match answer {
            Ok(Some(created)) if created.len() == (batch.len() - start).min(BULK_CHUNK) => created,
            Ok(_) => {
                return Err(Error::Transport(
                    "the bulk creation answered a different number of items".into(),
                ));
            }
            Err(error) => return Err(error),
        };
        for (offset, result) in created.into_iter().enumerate() {
            let i = start + offset;
            match result {
                Ok(created) => results.push((
                    i,
                    Ok(Outcome::Created {
                        new_uid: created.uid,
                        replaced: false,
                    }),
                )),
                Err(status) if status.code == 409 && status.reason == "AlreadyExists" => {
                    existing.push(i);
                }
                Err(status) => {
                    let item = &batch[i];
                    results.push((
                        i,
                        Err(Error::Restore(format!(
                            "document {} (line {}), {}: {}",
                            item.document,
                            item.line,
                            item.describe(),
                            Error::from_kube(kube::Error::Api(status))
                        ))),
                    ));
                }
            }
        }
    }
    results.extend(apply_each(target, batch, existing.into_iter(), options, uids).await);
    Ok(Some(results))
}

/// Creates items tier by tier, each tier's objects concurrently: through
/// ksim's bulk path while `bulk` (cleared when the cluster has none), else
/// a request or two per object.
async fn apply_tiers(
    target: &Target,
    items: Vec<Item>,
    options: &RestoreOptions,
    report: &mut Report,
    applied: &mut Vec<Applied>,
    uids: &mut HashMap<String, String>,
    bulk: &mut bool,
) -> Result<(), Error> {
    let mut start = 0;
    while start < items.len() {
        let tier = items[start].tier;
        let end = items[start..]
            .iter()
            .position(|i| i.tier != tier)
            .map_or(items.len(), |p| start + p);
        let batch = &items[start..end];
        let remap = (!options.controllers_running).then_some(&*uids);
        let bulk_results = if *bulk {
            apply_bulk(target, batch, options, remap).await?
        } else {
            None
        };
        let results: Vec<(usize, Result<Outcome, Error>)> = match bulk_results {
            Some(results) => results,
            None => {
                *bulk = false;
                apply_each(target, batch, 0..batch.len(), options, remap).await
            }
        };
        let mut first_error: Option<(usize, Error)> = None;
        for (i, result) in results {
            let item = &batch[i];
            match result {
                Ok(Outcome::Created { new_uid, replaced }) => {
                    *report
                        .created
                        .entry(item.resource.kind.clone())
                        .or_default() += 1;
                    if replaced {
                        report.replaced += 1;
                    }
                    applied.push(Applied {
                        resource: item.resource.clone(),
                        namespace: item.namespace().map(str::to_string),
                        name: item.name().to_string(),
                    });
                    if let Some(old) = &item.old_uid {
                        uids.insert(old.clone(), new_uid);
                    }
                }
                Ok(Outcome::Existing { uid }) => {
                    report.existing += 1;
                    if let Some(old) = &item.old_uid {
                        uids.insert(old.clone(), uid);
                    }
                }
                Err(error) => {
                    if first_error.as_ref().is_none_or(|(d, _)| item.document < *d) {
                        first_error = Some((item.document, error));
                    }
                }
            }
        }
        if let Some((_, error)) = first_error {
            return Err(error);
        }
        start = end;
    }
    Ok(())
}

/// Puts every in-snapshot owner reference back with the owner's new uid.
async fn restore_owner_references(
    target: &Target,
    with_owners: Vec<(Resource, Option<String>, String, Vec<Value>)>,
    uids: &HashMap<String, String>,
    concurrency: usize,
) -> Result<(), Error> {
    let results: Vec<Result<(), Error>> = futures::stream::iter(with_owners)
        .map(|(resource, namespace, name, owners)| async move {
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

/// Deletes what a failed restore created, newest first, and says what happened.
async fn roll_back(target: &Target, applied: Vec<Applied>, error: Error) -> Error {
    let count = applied.len();
    if count == 0 {
        return Error::Restore(format!("restore failed: {error}; nothing was applied"));
    }
    let mut left = Vec::new();
    for object in applied.into_iter().rev() {
        if let Err(e) = target
            .delete(&object.resource, object.namespace.as_deref(), &object.name)
            .await
        {
            left.push(format!(
                "{} {}{} ({})",
                object.resource.group_kind(),
                object
                    .namespace
                    .map(|n| format!("{n}/"))
                    .unwrap_or_default(),
                object.name,
                Error::from_kube(e)
            ));
        }
    }
    if left.is_empty() {
        Error::Restore(format!(
            "restore failed: {error}; the {count} objects it had created were deleted again"
        ))
    } else {
        Error::Restore(format!(
            "restore failed: {error}; of the {count} objects it had created, these could not be deleted: {}",
            left.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resources() -> Resources {
        Resources::for_tests(&[
            ("", "v1", "Namespace", "namespaces", false),
            ("", "v1", "Node", "nodes", false),
            ("", "v1", "Pod", "pods", true),
            ("apps", "v1", "ReplicaSet", "replicasets", true),
            ("apps", "v1", "Deployment", "deployments", true),
        ])
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
        let items = plan(documents, &resources(), &mut report, true);
        let order: Vec<&str> = items.iter().map(|i| i.resource.kind.as_str()).collect();
        assert_eq!(
            order,
            ["Namespace", "Node", "Pod", "ReplicaSet", "Deployment"]
        );
        assert_eq!(report.dangling_owner_references, 1);
        let pod = &items[2];
        assert_eq!(pod.owners.len(), 1);
        assert!(pod.object["metadata"].get("ownerReferences").is_none());
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
        let items = plan(documents, &resources(), &mut report, false);
        let order: Vec<&str> = items.iter().map(|i| i.resource.kind.as_str()).collect();
        assert_eq!(order, ["Deployment", "ReplicaSet", "Pod"]);
        let uids = HashMap::from([("r".to_string(), "new-r".to_string())]);
        let body = creation_body(&items[2], Some(&uids));
        assert_eq!(body["metadata"]["ownerReferences"][0]["uid"], "new-r");
        assert!(body["metadata"].get("uid").is_none());
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

    #[test]
    fn a_generated_job_selector_becomes_manual() {
        let item = Item {
            document: 1,
            line: 1,
            resource: Resources::for_tests(&[("batch", "v1", "Job", "jobs", true)]).preferred[0]
                .clone(),
            object: json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "uid": "u", "resourceVersion": "3"},
                "spec": {"selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}}}}),
            old_uid: Some("u".into()),
            owners: vec![],
            tier: 0,
        };
        let body = creation_body(&item, None);
        assert_eq!(body["spec"]["manualSelector"], true);
        assert!(body["metadata"].get("uid").is_none());
        assert!(body["metadata"].get("resourceVersion").is_none());
    }

    #[test]
    fn observed_generation_follows_the_new_generation() {
        let item = Item {
            document: 1,
            line: 1,
            resource: resources().preferred[4].clone(),
            object: json!({"metadata": {"name": "web", "generation": 7}, "status": {"observedGeneration": 7, "replicas": 3}}),
            old_uid: None,
            owners: vec![],
            tier: 0,
        };
        let patch = status_patch(&item, Some(1)).expect("a status");
        assert_eq!(
            patch,
            json!({"status": {"observedGeneration": 1, "replicas": 3}})
        );
    }
}
