//! The field manager: server-side apply of a configuration to an object
//! (merge, pruning of fields the manager no longer applies, conflicts with
//! other managers), the ownership bookkeeping of ordinary writes, the
//! upgrade path from kubectl client-side apply, and kube-apiserver's
//! conflict messages.

use serde_json::{Map, Value};

use super::fieldpath::{FieldSet, PathElement, field_key, path_string};
use super::managed::{
    ManagedEntry, Operation, decode, managed_fields_of, remove_managed_fields, set_managed_fields,
    set_managed_fields_text,
};
use super::types::{ObjectType, TypeRef};
use super::walk::{
    Comparison, Walk, compare, compare_field_skipping, compare_skipping, drop_typed_nulls,
    index_items, merge, prune, to_field_set, walk_of,
};
use crate::Error;

/// The annotation kubectl client-side apply keeps the last configuration in.
pub const LAST_APPLIED_CONFIG_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The manager name `kubectl apply --server-side` uses; only it upgrades
/// client-side apply ownership and keeps the last-applied annotation in sync.
const KUBECTL_MANAGER: &str = "kubectl";

/// A server-side apply request.
#[derive(Debug, Clone, Copy)]
pub struct ApplyRequest<'a> {
    /// OpenAPI definition of the kind (None: custom resource, lists atomic).
    pub definition: Option<&'a str>,
    /// The current object (None: apply creates it).
    pub live: Option<&'a Value>,
    /// The applied configuration, already parsed from YAML/JSON.
    pub applied: &'a Value,
    /// The field manager.
    pub manager: &'a str,
    /// `force=true`: take ownership of conflicting fields.
    pub force: bool,
    /// The apiVersion of the request, e.g. `apps/v1`, recorded in managedFields.
    pub api_version: &'a str,
    /// RFC3339 time recorded in managedFields.
    pub now: &'a str,
}

/// What an apply does.
#[derive(Debug, Clone, PartialEq)]
pub enum ApplyOutcome {
    /// The new object, with its managedFields.
    Applied(Value),
    /// Other managers own fields the configuration changes (409 Conflict).
    Conflicts(Vec<FieldConflict>),
}

/// A field the configuration changes that another manager owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldConflict {
    pub manager: String,
    /// The operation of the owning entry: `Update` owners are printed with
    /// their apiVersion (`"kubectl-edit" using apps/v1`).
    pub operation: Operation,
    pub api_version: String,
    /// The subresource the owner wrote through (`status`), or empty.
    pub subresource: String,
    /// The field, e.g. `.spec.replicas`.
    pub field: String,
}

impl FieldConflict {
    /// The owner as kube-apiserver prints it: `"name"`, or
    /// `"name" using apps/v1` for an Update entry, with
    /// ` with subresource "status"` after the name for subresource writes.
    pub fn printed_manager(&self) -> String {
        let mut name = Value::String(self.manager.clone()).to_string();
        if !self.subresource.is_empty() {
            name = format!(
                "{name} with subresource {}",
                Value::String(self.subresource.clone())
            );
        }
        match self.operation {
            Operation::Apply => name,
            Operation::Update => format!("{name} using {}", self.api_version),
        }
    }

    /// The message of this conflict's `FieldManagerConflict` status cause
    /// (its `field` is [`FieldConflict::field`]).
    pub fn cause_message(&self) -> String {
        format!("conflict with {}", self.printed_manager())
    }
}

/// kube-apiserver's 409 message for conflicts, e.g.
/// `Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas`.
pub fn conflict_message(conflicts: &[FieldConflict]) -> String {
    if let [only] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            only.printed_manager(),
            only.field
        );
    }
    let mut managers: Vec<String> = conflicts
        .iter()
        .map(FieldConflict::printed_manager)
        .collect();
    managers.sort();
    managers.dedup();
    let mut lines = Vec::new();
    for manager in &managers {
        lines.push(format!("conflicts with {manager}:"));
        for conflict in conflicts.iter().filter(|c| &c.printed_manager() == manager) {
            lines.push(format!("- {}", conflict.field));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// Fields never tracked in managedFields.
fn ignored_fields() -> &'static FieldSet {
    static IGNORED: std::sync::LazyLock<FieldSet> = std::sync::LazyLock::new(build_ignored_fields);
    &IGNORED
}

fn build_ignored_fields() -> FieldSet {
    let mut set = FieldSet::new();
    let field = |name: &str| PathElement::Field(name.to_owned());
    for name in IGNORED_TOP_LEVEL {
        set.insert(&[field(name)]);
    }
    for name in IGNORED_METADATA {
        set.insert(&[field("metadata"), field(name)]);
    }
    set
}

fn without_managed_fields(object: &Value) -> Value {
    let mut copy = object.clone();
    remove_managed_fields(&mut copy);
    copy
}

/// Applies a configuration: the new object with its managedFields, or the
/// conflicts with other managers. Bad configurations are errors.
pub fn server_side_apply(request: &ApplyRequest) -> Result<ApplyOutcome, Error> {
    let applied = request.applied;
    if !applied.is_object() {
        return Err(Error::InvalidPatch(
            "apply patch must be a JSON or YAML object".into(),
        ));
    }
    if managed_fields_of(applied).is_some() {
        return Err(Error::InvalidPatch(
            "metadata.managedFields must be nil".into(),
        ));
    }
    if let Some(version) = applied.get("apiVersion").and_then(Value::as_str)
        && version != request.api_version
    {
        return Err(Error::InvalidPatch(format!(
            "Incorrect version specified in apply patch. Specified patch version: {version}, expected: {}",
            request.api_version
        )));
    }
    let ty = TypeRef::root(request.definition);
    let live = request
        .live
        .map(without_managed_fields)
        .unwrap_or_else(|| Value::Object(Map::new()));
    // Entries that do not decode are dropped rather than failing the write.
    let managers = request
        .live
        .and_then(managed_fields_of)
        .and_then(|m| decode(m).ok())
        .unwrap_or_default();
    let config_set = to_field_set(applied, &ty)
        .map_err(Error::InvalidPatch)?
        .difference(ignored_fields());
    let mut merged = merge(&live, applied, &ty)
        .map_err(|e| Error::InvalidPatch(format!("failed to merge config: {e}")))?;
    drop_typed_nulls(&mut merged, &ty);
    keep_system_metadata(&live, &mut merged);

    let step = ApplyStep {
        ty: &ty,
        live: &live,
        merged: &merged,
        config_set: &config_set,
        request,
    };
    let (mut object, entries) = match step.run(&managers, request.force) {
        Ok(done) => done,
        Err(conflicts) => {
            if request.manager != KUBECTL_MANAGER || request.force {
                return Ok(ApplyOutcome::Conflicts(conflicts));
            }
            // Upgrade from client-side apply: conflicts on fields the
            // last-applied configuration set (to the live values) are taken.
            let Some(allowed) = allowed_by_last_applied(&live, &ty) else {
                return Ok(ApplyOutcome::Conflicts(conflicts));
            };
            let remaining: Vec<FieldConflict> = conflicts
                .into_iter()
                .filter(|c| !allowed.contains(&c.field))
                .collect();
            if !remaining.is_empty() {
                return Ok(ApplyOutcome::Conflicts(remaining));
            }
            match step.run(&managers, true) {
                Ok(done) => done,
                Err(conflicts) => return Ok(ApplyOutcome::Conflicts(conflicts)),
            }
        }
    };
    if request.manager == KUBECTL_MANAGER {
        sync_last_applied(&mut object, applied);
    }
    set_managed_fields(&mut object, &entries);
    Ok(ApplyOutcome::Applied(object))
}

/// Metadata the server sets and an apply configuration cannot change.
fn keep_system_metadata(live: &Value, merged: &mut Value) {
    let (Some(live_meta), Some(merged_meta)) = (
        live.get("metadata").and_then(Value::as_object),
        merged.get_mut("metadata").and_then(Value::as_object_mut),
    ) else {
        return;
    };
    for field in [
        "creationTimestamp",
        "uid",
        "generation",
        "selfLink",
        "deletionTimestamp",
    ] {
        match live_meta.get(field) {
            Some(value) => {
                merged_meta.insert(field.to_owned(), value.clone());
            }
            None => {
                merged_meta.remove(field);
            }
        }
    }
}

struct ApplyStep<'s> {
    ty: &'s TypeRef,
    live: &'s Value,
    merged: &'s Value,
    config_set: &'s FieldSet,
    request: &'s ApplyRequest<'s>,
}

impl ApplyStep<'_> {
    fn run(
        &self,
        managers: &[ManagedEntry],
        force: bool,
    ) -> Result<(Value, Vec<ManagedEntry>), Vec<FieldConflict>> {
        let applier = ManagedEntry {
            manager: self.request.manager.to_owned(),
            operation: Operation::Apply,
            api_version: self.request.api_version.to_owned(),
            time: Some(self.request.now.to_owned()),
            subresource: String::new(),
            set: self.config_set.clone(),
        };
        let previous = managers.iter().find(|e| e.same_manager(&applier));
        let mut others: Vec<ManagedEntry> = managers
            .iter()
            .filter(|e| !e.same_manager(&applier))
            .cloned()
            .collect();

        let mut object = self.merged.clone();
        if let Some(previous) = previous {
            let owned = others
                .iter()
                .fold(self.config_set.clone(), |all, e| all.union(&e.set));
            prune(&mut object, self.ty, &previous.set, &owned);
        }

        let comparison = tracked_comparison(self.live, &object, self.ty);
        let changed = comparison.added.union(&comparison.modified);
        let mut conflicts = Vec::new();
        for entry in &mut others {
            let taken = entry.set.intersection(&changed);
            for path in taken.paths() {
                conflicts.push(FieldConflict {
                    manager: entry.manager.clone(),
                    operation: entry.operation,
                    api_version: entry.api_version.clone(),
                    subresource: entry.subresource.clone(),
                    field: path_string(&path),
                });
            }
            entry.set = entry.set.difference(&taken).difference(&comparison.removed);
        }
        if !force && !conflicts.is_empty() {
            conflicts.sort_by_key(FieldConflict::printed_manager);
            return Err(conflicts);
        }

        let mut applier = applier;
        if let Some(previous) = previous
            && previous.set == applier.set
            && object == *self.live
        {
            applier.time.clone_from(&previous.time);
        }
        others.retain(|e| !e.set.is_empty());
        others.push(applier);
        Ok((object, others))
    }
}

/// The comparison of two versions without the fields managedFields never
/// tracks.
fn tracked_comparison(old: &Value, new: &Value, ty: &TypeRef) -> Comparison {
    compare_skipping(old, new, ty, is_ignored)
}

/// Whether managedFields never tracks the field at `path` (the same paths
/// as [`ignored_fields`]).
fn is_ignored(path: &[PathElement]) -> bool {
    match path {
        [PathElement::Field(name)] => IGNORED_TOP_LEVEL.contains(&name.as_str()),
        [PathElement::Field(metadata), PathElement::Field(name)] => {
            metadata == "metadata" && IGNORED_METADATA.contains(&name.as_str())
        }
        _ => false,
    }
}

fn last_applied_of(object: &Value) -> Option<&str> {
    object
        .get("metadata")?
        .get("annotations")?
        .get(LAST_APPLIED_CONFIG_ANNOTATION)?
        .as_str()
        .filter(|s| !s.is_empty())
}

/// The fields (as printed paths) the last client-side applied configuration
/// set to the values the live object still has.
fn allowed_by_last_applied(live: &Value, ty: &TypeRef) -> Option<Vec<String>> {
    let last_applied: Value = serde_json::from_str(last_applied_of(live)?).ok()?;
    let set = to_field_set(&last_applied, ty).ok()?;
    let modified = compare(&last_applied, live, ty).modified;
    Some(
        set.difference(&modified)
            .paths()
            .iter()
            .map(|path| path_string(path))
            .collect(),
    )
}

/// After `kubectl apply --server-side`, an existing last-applied annotation
/// is replaced by the applied configuration (as kube-apiserver encodes it:
/// sorted keys, compact, HTML characters escaped, a trailing newline).
fn sync_last_applied(object: &mut Value, applied: &Value) {
    if last_applied_of(object).is_none() {
        return;
    }
    let mut config = applied.clone();
    if let Some(annotations) = config
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        annotations.remove(LAST_APPLIED_CONFIG_ANNOTATION);
    }
    let encoded = format!("{}\n", go_json(&sorted(&config)));
    if let Some(annotations) = object
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        annotations.insert(
            LAST_APPLIED_CONFIG_ANNOTATION.into(),
            Value::String(encoded),
        );
    }
}

fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(fields) => {
            let mut pairs: Vec<(&String, &Value)> = fields.iter().collect();
            pairs.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                pairs
                    .into_iter()
                    .map(|(k, v)| (k.clone(), sorted(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// JSON as Go's encoder writes it (HTML characters escaped).
fn go_json(value: &Value) -> String {
    value
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// For create/update/patch (non-apply) writes: records in `new`'s
/// managedFields (operation `Update`) the fields `manager` set or changed
/// relative to `old` (None on create), removing them from other managers'
/// sets. managedFields sent in `new` replace the live ones, as upstream.
pub fn track_update(
    definition: Option<&str>,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    now: &str,
) {
    track_subresource_update(definition, old, new, manager, "", api_version, now);
}

/// [`track_update`] for a write through a subresource (`status`): the entry
/// records `subresource` and is kept apart from the manager's other entries.
pub fn track_subresource_update(
    definition: Option<&str>,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: &str,
    api_version: &str,
    now: &str,
) {
    track(
        definition,
        old,
        new,
        manager,
        subresource,
        api_version,
        now,
        false,
    );
}

/// [`track_update`] writing the managedFields in the store's form (the
/// compact JSON text of the list) without building the list first.
pub fn track_update_text(
    definition: Option<&str>,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    now: &str,
) {
    track(definition, old, new, manager, "", api_version, now, true);
}

/// [`track_subresource_update`] writing the managedFields in the store's
/// form, as [`track_update_text`] does.
pub fn track_subresource_update_text(
    definition: Option<&str>,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: &str,
    api_version: &str,
    now: &str,
) {
    track(
        definition,
        old,
        new,
        manager,
        subresource,
        api_version,
        now,
        true,
    );
}

/// [`track_subresource_update`]; `text`: the managedFields are written as
/// the compact JSON text of the list (what a store makes of the list).
#[allow(clippy::too_many_arguments)]
fn track(
    definition: Option<&str>,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: &str,
    api_version: &str,
    now: &str,
    text: bool,
) {
    if !new.is_object() {
        return;
    }
    let ty = TypeRef::root(definition);
    if old.is_none() && managed_fields_of(new).is_none() {
        track_create(&ty, new, manager, subresource, api_version, now);
        return;
    }
    let sent = managed_fields_of(new)
        .and_then(|m| decode(m).ok())
        .filter(|entries| !entries.is_empty());
    let entries = match sent {
        Some(entries) => entries,
        None => old
            .and_then(managed_fields_of)
            .and_then(|m| decode(m).ok())
            .unwrap_or_default(),
    };
    remove_managed_fields(new);
    let empty = Value::Object(Map::new());
    // compare() skips metadata.managedFields: old needs no copy without it.
    let comparison = tracked_comparison(old.unwrap_or(&empty), new, &ty);
    record_update(
        entries,
        comparison,
        new,
        manager,
        subresource,
        api_version,
        now,
        text,
    );
}

/// [`track_subresource_update`] of a write that changed nothing but the
/// top-level field `field` of `new`, whose managedFields are still those of
/// the object before the write; `old_field` is that field before it. Only
/// that field is compared (a create with its status merged in, as a
/// snapshot restore makes in bulk, is not walked whole a second time); the
/// managedFields are those [`track_subresource_update`] would write.
#[allow(clippy::too_many_arguments)]
pub fn track_field_update(
    definition: Option<&str>,
    old_field: Option<&Value>,
    new: &mut Value,
    field: &str,
    manager: &str,
    subresource: &str,
    api_version: &str,
    now: &str,
) {
    if !new.is_object() {
        return;
    }
    let ty = TypeRef::root(definition);
    // The common case: only the writer's entry is new, and what changed
    // under a tracked field is encoded straight from the two values.
    if !IGNORED_TOP_LEVEL.contains(&field)
        && let Some(position) =
            untouched_entries_position(new, field, manager, subresource, api_version, now)
    {
        let changed = match (old_field, new.get(field)) {
            (old, Some(value)) if old != Some(value) => {
                let (field_ty, _) = ty.child(field);
                changed_fields_v1(old, value, &field_ty)
            }
            _ => None,
        };
        if let Some(changed) = changed {
            let mut fields = Map::new();
            fields.insert(field_key(field), changed);
            let entry = update_entry(manager, subresource, api_version, now, fields);
            if let Some(Value::Array(entries)) = new
                .get_mut("metadata")
                .and_then(|m| m.get_mut("managedFields"))
            {
                entries.insert(position, entry);
            }
        }
        return;
    }
    let comparison = compare_field_skipping(old_field, new.get(field), &ty, field, is_ignored);
    let entries = managed_fields_of(new)
        .and_then(|m| decode(m).ok())
        .unwrap_or_default();
    remove_managed_fields(new);
    record_update(
        entries,
        comparison,
        new,
        manager,
        subresource,
        api_version,
        now,
        false,
    );
}

/// Where the writer's new entry goes in the common case of
/// [`track_field_update`], which needs no decoding and encoding of the
/// entries already there: when no entry owns anything under `field` (a
/// create's entry, whose status the server resets, owns none of it) and
/// none is the writer's, what changed under `field` is the writer's alone
/// and the other entries stay as they are. The entries must be as the
/// server writes them (in order, each a valid, non-empty FieldsV1 entry of
/// its own manager), which those of an object just tracked are. None when
/// this does not apply.
fn untouched_entries_position(
    new: &Value,
    field: &str,
    manager: &str,
    subresource: &str,
    api_version: &str,
    now: &str,
) -> Option<usize> {
    let Some(Value::Array(entries)) = managed_fields_of(new) else {
        return None;
    };
    let owned_key = field_key(field);
    let updater_sort_key = (Operation::Update, now, manager, api_version, subresource);
    let mut position = 0;
    for entry in entries {
        let fields = entry.get("fieldsV1").and_then(Value::as_object)?;
        let text = |name: &str| entry.get(name).and_then(Value::as_str).unwrap_or("");
        let operation = match text("operation") {
            "Update" => Operation::Update,
            "Apply" => Operation::Apply,
            _ => return None,
        };
        if fields.is_empty() || fields.contains_key(&owned_key) || text("fieldsType") != "FieldsV1"
        {
            return None;
        }
        let key = (
            operation,
            text("time"),
            text("manager"),
            text("apiVersion"),
            text("subresource"),
        );
        let same_manager = key.0 == Operation::Update
            && key.2 == manager
            && key.3 == api_version
            && key.4 == subresource;
        if same_manager {
            return None;
        }
        // Sorted as `encode` sorts (stable: the writer's entry after equals).
        if key <= updater_sort_key {
            position += 1;
        }
    }
    Some(position)
}

/// The managedFields after a write that made `comparison`: what changed
/// moves to the writer's entry (by manager and subresource); `text`: written
/// as the list's compact JSON text.
#[allow(clippy::too_many_arguments)]
fn record_update(
    mut entries: Vec<ManagedEntry>,
    comparison: Comparison,
    new: &mut Value,
    manager: &str,
    subresource: &str,
    api_version: &str,
    now: &str,
    text: bool,
) {
    let mut changed = comparison.added;
    changed.union_with(&comparison.modified);
    // In place: only the nodes the (usually small) change reaches are touched.
    for entry in &mut entries {
        entry.set.remove_all(&changed);
        entry.set.remove_all(&comparison.removed);
    }
    if !changed.is_empty() {
        let updater = ManagedEntry {
            manager: manager.to_owned(),
            operation: Operation::Update,
            api_version: api_version.to_owned(),
            time: Some(now.to_owned()),
            subresource: subresource.to_owned(),
            set: changed,
        };
        match entries.iter_mut().find(|e| e.same_manager(&updater)) {
            Some(entry) => {
                entry.set.union_with(&updater.set);
                entry.time = updater.time;
            }
            None => entries.push(updater),
        }
    }
    entries.retain(|e| !e.set.is_empty());
    if text {
        set_managed_fields_text(new, &entries);
    } else {
        set_managed_fields(new, &entries);
    }
}

/// Top-level fields managedFields never tracks (their children may be).
pub(super) const IGNORED_TOP_LEVEL: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Fields of `metadata` managedFields never tracks.
pub(super) const IGNORED_METADATA: [&str; 9] = [
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "clusterName",
    "generation",
    "managedFields",
    "resourceVersion",
];

/// The create case of [`track_subresource_update`] (no old object, no
/// managedFields sent): the writer owns every field of the new object, so
/// its single entry is encoded straight from the object, with no field sets
/// and no comparison against an empty object. Gives exactly what the general
/// path gives.
fn track_create(
    ty: &TypeRef,
    new: &mut Value,
    manager: &str,
    subresource: &str,
    api_version: &str,
    now: &str,
) {
    let Value::Object(fields) = &*new else {
        return;
    };
    let mut encoded = Map::new();
    let object_type = ObjectType::new(*ty);
    for (name, child) in fields {
        let (child_ty, _) = object_type.child(name);
        let member = !IGNORED_TOP_LEVEL.contains(&name.as_str());
        let ignored: &[&str] = if name == "metadata" {
            &IGNORED_METADATA
        } else {
            &[]
        };
        if let Some(child) = created_fields_v1(child, &child_ty, member, ignored) {
            encoded.insert(field_key(name), child);
        }
    }
    let Some(object) = new.as_object_mut() else {
        return;
    };
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    if encoded.is_empty() {
        metadata.remove("managedFields");
        return;
    }
    let entry = update_entry(manager, subresource, api_version, now, encoded);
    metadata.insert("managedFields".into(), Value::Array(vec![entry]));
}

/// The managedFields entry of an update by `manager` (what
/// [`ManagedEntry::encode`] gives) owning the fields `fields_v1` encodes.
fn update_entry(
    manager: &str,
    subresource: &str,
    api_version: &str,
    now: &str,
    fields_v1: Map<String, Value>,
) -> Value {
    let mut entry = Map::new();
    entry.insert("manager".into(), Value::String(manager.to_owned()));
    entry.insert(
        "operation".into(),
        Value::String(Operation::Update.as_str().into()),
    );
    entry.insert("apiVersion".into(), Value::String(api_version.to_owned()));
    entry.insert("time".into(), Value::String(now.to_owned()));
    entry.insert("fieldsType".into(), Value::String("FieldsV1".into()));
    entry.insert("fieldsV1".into(), Value::Object(fields_v1));
    if !subresource.is_empty() {
        entry.insert("subresource".into(), Value::String(subresource.to_owned()));
    }
    Value::Object(entry)
}

/// The FieldsV1 encoding of what a write added or modified at a node that
/// was `old` and is `new` (None when nothing): what encoding the added and
/// modified sets of [`compare_at`](super::walk) gives below a tracked node,
/// without building the sets. An added node is owned with everything below
/// it; a changed leaf (or list compared whole) is owned; a changed object or
/// associative list owns what changed in it; removals own nothing.
fn changed_fields_v1(old: Option<&Value>, new: &Value, ty: &TypeRef) -> Option<Value> {
    let Some(old) = old else {
        return created_fields_v1(new, ty, true, &[]);
    };
    if old == new {
        return None;
    }
    let walk = if std::mem::discriminant(old) == std::mem::discriminant(new) {
        walk_of(ty, new)
    } else {
        Walk::Leaf
    };
    let mut children = Map::new();
    match walk {
        Walk::Leaf => return Some(Value::Object(Map::new())),
        Walk::Object(ty, _) => {
            let (Value::Object(old_fields), Value::Object(new_fields)) = (old, new) else {
                return Some(Value::Object(Map::new()));
            };
            for (name, new_child) in new_fields {
                let old_child = old_fields.get(name);
                if old_child == Some(new_child) {
                    continue;
                }
                let (child_ty, _) = ty.child(name);
                if let Some(child) = changed_fields_v1(old_child, new_child, &child_ty) {
                    children.insert(field_key(name), child);
                }
            }
        }
        Walk::List(list_type, items) => {
            let (Value::Array(old_list), Value::Array(new_list)) = (old, new) else {
                return Some(Value::Object(Map::new()));
            };
            let indexed = (
                index_items(list_type, &items, old_list, &Vec::new(), false),
                index_items(list_type, &items, new_list, &Vec::new(), false),
            );
            let (Ok(Some(old_items)), Ok(Some(new_items))) = indexed else {
                // Items without keys: the list is compared as a whole.
                return Some(Value::Object(Map::new()));
            };
            // Short lists are searched; long ones indexed.
            let by_key: Option<std::collections::HashMap<&PathElement, &Value>> =
                (old_items.len() > 16).then(|| old_items.iter().map(|(e, v)| (e, *v)).collect());
            for (element, new_item) in &new_items {
                let old_item = match &by_key {
                    Some(by_key) => by_key.get(element).copied(),
                    None => old_items
                        .iter()
                        .find(|(old_element, _)| old_element == element)
                        .map(|(_, item)| *item),
                };
                if old_item == Some(*new_item) {
                    continue;
                }
                if let Some(child) = changed_fields_v1(old_item, new_item, &items) {
                    children.insert(element.to_fields_v1_key(), child);
                }
            }
        }
    }
    (!children.is_empty()).then_some(Value::Object(children))
}

/// The FieldsV1 encoding of a node a create adds with everything below it
/// (None when nothing in it is tracked). `member`: whether the node itself
/// is tracked; `ignored`: names of its fields that are not (their own
/// fields are).
fn created_fields_v1(value: &Value, ty: &TypeRef, member: bool, ignored: &[&str]) -> Option<Value> {
    let mut children = Map::new();
    match walk_of(ty, value) {
        Walk::Object(ty, _) => {
            if let Value::Object(fields) = value {
                for (name, child) in fields {
                    let (child_ty, _) = ty.child(name);
                    let child_member = !ignored.contains(&name.as_str());
                    if let Some(child) = created_fields_v1(child, &child_ty, child_member, &[]) {
                        children.insert(field_key(name), child);
                    }
                }
            }
        }
        Walk::List(list_type, items) => {
            if let Value::Array(list) = value
                && let Ok(Some(indexed)) = index_items(list_type, &items, list, &Vec::new(), false)
            {
                for (element, item) in indexed {
                    if let Some(child) = created_fields_v1(item, &items, true, &[]) {
                        children.insert(element.to_fields_v1_key(), child);
                    }
                }
            }
        }
        Walk::Leaf => {}
    }
    if children.is_empty() {
        return member.then(|| Value::Object(Map::new()));
    }
    if member {
        children.insert(".".to_owned(), Value::Object(Map::new()));
    }
    Some(Value::Object(children))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DEPLOYMENT: Option<&str> = Some("io.k8s.api.apps.v1.Deployment");

    fn deployment(replicas: i64, extra_spec: Value) -> Value {
        let mut spec = json!({
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}
            }
        });
        if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), extra_spec) {
            spec.extend(extra);
        }
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": spec
        })
    }

    fn apply(
        live: Option<&Value>,
        applied: &Value,
        manager: &str,
        force: bool,
        now: &str,
    ) -> Result<ApplyOutcome, Error> {
        server_side_apply(&ApplyRequest {
            definition: DEPLOYMENT,
            live,
            applied,
            manager,
            force,
            api_version: "apps/v1",
            now,
        })
    }

    fn applied(outcome: Result<ApplyOutcome, Error>) -> Value {
        match outcome {
            Ok(ApplyOutcome::Applied(object)) => object,
            other => panic!("expected Applied, got {other:?}"),
        }
    }

    fn conflicts(outcome: Result<ApplyOutcome, Error>) -> Vec<FieldConflict> {
        match outcome {
            Ok(ApplyOutcome::Conflicts(conflicts)) => conflicts,
            other => panic!("expected Conflicts, got {other:?}"),
        }
    }

    fn entry<'v>(object: &'v Value, manager: &str) -> Option<&'v Value> {
        object["metadata"]["managedFields"]
            .as_array()?
            .iter()
            .find(|e| e["manager"] == manager)
    }

    fn created_by_update(manager: &str, replicas: i64) -> Value {
        let mut object = deployment(replicas, json!({}));
        track_update(
            DEPLOYMENT,
            None,
            &mut object,
            manager,
            "apps/v1",
            "2026-01-01T00:00:00Z",
        );
        object
    }

    #[test]
    fn apply_creates_the_object_with_the_managers_entry() {
        let config = deployment(2, json!({}));
        let object = applied(apply(
            None,
            &config,
            "kubectl",
            false,
            "2026-01-01T00:00:00Z",
        ));
        let mut expected = config.clone();
        expected["metadata"]["managedFields"] = json!([{
            "manager": "kubectl",
            "operation": "Apply",
            "apiVersion": "apps/v1",
            "time": "2026-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {
                        "k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {}}
                    }}
                }
            }}
        }]);
        assert_eq!(object, expected);
    }

    #[test]
    fn nulls_and_system_metadata_in_the_config_do_not_reach_the_object() {
        let mut live = deployment(1, json!({}));
        live["metadata"]["uid"] = json!("u-1");
        live["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
        let mut config = deployment(1, json!({}));
        config["metadata"]["creationTimestamp"] = Value::Null;
        config["metadata"]["uid"] = json!("forged");
        config["spec"]["template"]["metadata"]["creationTimestamp"] = Value::Null;
        let object = applied(apply(Some(&live), &config, "kubectl", false, "t1"));
        assert_eq!(object["metadata"]["uid"], "u-1");
        assert_eq!(
            object["metadata"]["creationTimestamp"],
            "2026-01-01T00:00:00Z"
        );
        assert_eq!(
            object["spec"]["template"]["metadata"],
            json!({"labels": {"app": "web"}})
        );
    }

    #[test]
    fn reapply_without_a_field_removes_it_unless_another_manager_owns_it() {
        let first = deployment(2, json!({"paused": true, "minReadySeconds": 5}));
        let live = applied(apply(None, &first, "kubectl", false, "t1"));
        // Another manager sets minReadySeconds to the same value: shared ownership.
        let shared = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"}, "spec": {"minReadySeconds": 5}});
        let live = applied(apply(Some(&live), &shared, "other", false, "t2"));
        let second = deployment(2, json!({}));
        let object = applied(apply(Some(&live), &second, "kubectl", false, "t3"));
        assert_eq!(object["spec"].get("paused"), None);
        assert_eq!(object["spec"]["minReadySeconds"], 5);
        assert_eq!(object["spec"]["replicas"], 2);
    }

    #[test]
    fn removed_container_is_pruned_and_kept_ones_stay() {
        let mut two = deployment(1, json!({}));
        two["spec"]["template"]["spec"]["containers"] =
            json!([{"name": "nginx", "image": "nginx"}, {"name": "sidecar", "image": "envoy"}]);
        let live = applied(apply(None, &two, "kubectl", false, "t1"));
        let one = deployment(1, json!({}));
        let object = applied(apply(Some(&live), &one, "kubectl", false, "t2"));
        assert_eq!(
            object["spec"]["template"]["spec"]["containers"],
            json!([{"name": "nginx", "image": "nginx:1.27"}])
        );
    }

    #[test]
    fn two_managers_conflict_on_replicas_with_kube_apiserver_message() {
        let live = created_by_update("kubectl-client-side-apply", 3);
        let config = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"}, "spec": {"replicas": 5}});
        let found = conflicts(apply(Some(&live), &config, "other", false, "t2"));
        assert_eq!(
            found,
            vec![FieldConflict {
                manager: "kubectl-client-side-apply".into(),
                operation: Operation::Update,
                api_version: "apps/v1".into(),
                subresource: String::new(),
                field: ".spec.replicas".into(),
            }]
        );
        assert_eq!(
            conflict_message(&found),
            "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.replicas"
        );
        assert_eq!(
            found[0].cause_message(),
            "conflict with \"kubectl-client-side-apply\" using apps/v1"
        );
    }

    #[test]
    fn same_value_is_shared_without_conflict() {
        let live = created_by_update("kubectl-client-side-apply", 3);
        let config = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"}, "spec": {"replicas": 3}});
        let object = applied(apply(Some(&live), &config, "other", false, "t2"));
        for manager in ["other", "kubectl-client-side-apply"] {
            let owner = entry(&object, manager).expect("entry");
            assert!(
                owner["fieldsV1"]["f:spec"].get("f:replicas").is_some(),
                "{manager}"
            );
        }
    }

    #[test]
    fn force_takes_ownership() {
        let live = created_by_update("kubectl-client-side-apply", 3);
        let config = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"}, "spec": {"replicas": 5}});
        let object = applied(apply(Some(&live), &config, "other", true, "t2"));
        assert_eq!(object["spec"]["replicas"], 5);
        let other = entry(&object, "other").expect("applier entry");
        assert_eq!(other["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
        let previous = entry(&object, "kubectl-client-side-apply").expect("update entry");
        assert_eq!(previous["fieldsV1"]["f:spec"].get("f:replicas"), None);
        assert!(previous["fieldsV1"]["f:spec"].get("f:selector").is_some());
    }

    #[test]
    fn tracking_into_text_writes_the_text_of_the_list() {
        let pod = Some("io.k8s.api.core.v1.Pod");
        let live = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a\"b": "1", "c": "2"}, "managedFields": [
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "t0",
                    "fieldsType": "FieldsV1", "subresource": "status",
                    "fieldsV1": {"f:status": {"f:conditions": {".": {}, "k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}, "f:type": {}}}}}},
                {"manager": "creator", "operation": "Update", "apiVersion": "v1", "time": "t0",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:a\"b": {}, "f:c": {}}},
                        "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}]},
            "spec": {"containers": [{"name": "app", "image": "busybox"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let mut status = live.clone();
        status["status"]["conditions"] = json!([{"type": "Ready", "status": "False"},
            {"type": "PodScheduled", "status": "True", "message": "x\ny"}]);
        let mut spec = live.clone();
        spec["spec"]["containers"][0]["image"] = json!("nginx");
        spec["metadata"]["labels"]["c"] = json!("3");
        let mut unchanged = live.clone();
        unchanged["metadata"]["resourceVersion"] = json!("9");
        let mut none_left = live.clone();
        none_left["metadata"]["managedFields"] = json!([]);
        for (new, subresource) in [
            (status, "status"),
            (spec, ""),
            (unchanged, ""),
            (none_left, ""),
        ] {
            let mut as_list = new.clone();
            track_subresource_update(
                pod,
                Some(&live),
                &mut as_list,
                "m\u{1}",
                subresource,
                "v1",
                "t1",
            );
            let mut as_text = new.clone();
            track_subresource_update_text(
                pod,
                Some(&live),
                &mut as_text,
                "m\u{1}",
                subresource,
                "v1",
                "t1",
            );
            let list = as_list["metadata"]
                .as_object_mut()
                .expect("metadata")
                .remove("managedFields");
            let text = as_text["metadata"]
                .as_object_mut()
                .expect("metadata")
                .remove("managedFields");
            assert_eq!(as_text, as_list);
            assert_eq!(
                text,
                list.map(|list| Value::String(serde_json::to_string(&list).expect("json")))
            );
        }
    }

    #[test]
    fn track_update_moves_ownership_to_the_updater() {
        let live = applied(apply(
            None,
            &deployment(2, json!({})),
            "kubectl",
            false,
            "t1",
        ));
        let mut scaled = live.clone();
        scaled["spec"]["replicas"] = json!(4);
        track_update(
            DEPLOYMENT,
            Some(&live),
            &mut scaled,
            "kubectl-scale",
            "apps/v1",
            "t2",
        );
        let scale = entry(&scaled, "kubectl-scale").expect("updater entry");
        assert_eq!(scale["operation"], "Update");
        assert_eq!(scale["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
        let kubectl = entry(&scaled, "kubectl").expect("applier entry");
        assert_eq!(kubectl["fieldsV1"]["f:spec"].get("f:replicas"), None);
        // Applying the old replicas again now conflicts with the updater.
        let found = conflicts(apply(
            Some(&scaled),
            &deployment(2, json!({})),
            "kubectl",
            false,
            "t3",
        ));
        assert_eq!(
            conflict_message(&found),
            "Apply failed with 1 conflict: conflict with \"kubectl-scale\" using apps/v1: .spec.replicas"
        );
    }

    #[test]
    fn track_update_on_create_owns_everything_set() {
        let object = created_by_update("kubectl-create", 1);
        let owner = entry(&object, "kubectl-create").expect("entry");
        assert_eq!(owner["operation"], "Update");
        let fields = &owner["fieldsV1"];
        assert_eq!(
            fields["f:spec"]["f:template"]["f:metadata"]["f:labels"],
            json!({".": {}, "f:app": {}})
        );
        assert_eq!(
            fields["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"],
            json!({".": {}, "f:image": {}, "f:name": {}})
        );
        assert_eq!(fields["f:metadata"], Value::Null);
    }

    #[test]
    fn create_entry_is_what_comparing_with_an_empty_object_gives() {
        let pod = Some("io.k8s.api.core.v1.Pod");
        let cases = [
            (DEPLOYMENT, deployment(2, json!({"paused": null}))),
            (
                pod,
                json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "p", "namespace": "d", "uid": "u",
                        "labels": {"a": "1"}, "annotations": {}, "finalizers": ["x", "y", "x"],
                        "ownerReferences": [{"uid": "o", "name": "rs", "kind": "ReplicaSet", "apiVersion": "apps/v1"}]},
                    "spec": {"containers": [
                            {"name": "a", "image": "i", "ports": [{"containerPort": 80}], "env": []},
                            {"name": "a", "image": "dup"}],
                        "tolerations": [{"key": "k", "operator": "Exists"}],
                        "volumes": [{"noname": 1}],
                        "nodeSelector": {"n": "1"}},
                    "status": {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]}}),
            ),
            (
                pod,
                json!({"metadata": {"name": "only-ignored", "generation": 3}}),
            ),
            (pod, json!({})),
            (pod, json!({"metadata": "odd", "spec": 3, "status": []})),
            (
                None,
                json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "x", "name2": {"a": 1}},
                    "spec": {"items": [1, 2], "nested": {"m": {}}}}),
            ),
        ];
        for (definition, object) in cases {
            for subresource in ["", "status"] {
                let mut fast = object.clone();
                track_subresource_update(definition, None, &mut fast, "m", subresource, "v1", "t1");
                let mut general = object.clone();
                track_subresource_update(
                    definition,
                    Some(&json!({})),
                    &mut general,
                    "m",
                    subresource,
                    "v1",
                    "t1",
                );
                assert_eq!(fast, general, "{object}");
            }
        }
    }

    #[test]
    fn status_writes_get_their_own_entry() {
        let live = created_by_update("kubectl-create", 1);
        let mut with_status = live.clone();
        with_status["status"] = json!({"replicas": 1});
        track_subresource_update(
            DEPLOYMENT,
            Some(&live),
            &mut with_status,
            "kubectl-create",
            "status",
            "apps/v1",
            "t2",
        );
        let entries = with_status["metadata"]["managedFields"]
            .as_array()
            .expect("entries");
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1]["subresource"], "status");
        assert_eq!(
            entries[1]["fieldsV1"],
            json!({"f:status": {".": {}, "f:replicas": {}}})
        );
    }

    #[test]
    fn update_that_changes_nothing_keeps_managed_fields() {
        let live = created_by_update("kubectl-create", 1);
        let mut same = live.clone();
        remove_managed_fields(&mut same);
        track_update(DEPLOYMENT, Some(&live), &mut same, "other", "apps/v1", "t9");
        assert_eq!(same, live);
    }

    #[test]
    fn apply_of_the_same_config_twice_is_a_no_op() {
        let config = deployment(2, json!({}));
        let once = applied(apply(None, &config, "kubectl", false, "t1"));
        let twice = applied(apply(Some(&once), &config, "kubectl", false, "t2"));
        assert_eq!(twice, once);
    }

    #[test]
    fn apply_keeps_other_managers_entries_when_live_has_none() {
        let live = deployment(1, json!({}));
        let object = applied(apply(
            Some(&live),
            &deployment(3, json!({})),
            "mgr",
            false,
            "t1",
        ));
        let entries = object["metadata"]["managedFields"]
            .as_array()
            .expect("entries");
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0]["manager"], "mgr");
        assert_eq!(object["spec"]["replicas"], 3);
    }

    #[test]
    fn bad_apply_configurations_are_errors() {
        let mut with_managed = deployment(1, json!({}));
        with_managed["metadata"]["managedFields"] = json!([]);
        let mut other_version = deployment(1, json!({}));
        other_version["apiVersion"] = json!("apps/v1beta1");
        let mut unnamed_container = deployment(1, json!({}));
        unnamed_container["spec"]["template"]["spec"]["containers"] = json!([{"image": "x"}]);
        let cases = [
            (with_managed, "metadata.managedFields must be nil"),
            (
                other_version,
                "Incorrect version specified in apply patch. Specified patch version: apps/v1beta1, expected: apps/v1",
            ),
            (
                unnamed_container,
                ".spec.template.spec.containers: associative list with keys has an element that omits key field \"name\" (and doesn't have default value)",
            ),
            (json!("text"), "apply patch must be a JSON or YAML object"),
        ];
        for (config, message) in cases {
            assert_eq!(
                apply(None, &config, "kubectl", false, "t1"),
                Err(Error::InvalidPatch(message.into())),
                "{config}"
            );
        }
    }

    #[test]
    fn many_conflicts_are_grouped_by_manager() {
        let conflict = |manager: &str, operation, subresource: &str, field: &str| FieldConflict {
            manager: manager.into(),
            operation,
            api_version: "v1".into(),
            subresource: subresource.into(),
            field: field.into(),
        };
        let found = vec![
            conflict("b", Operation::Apply, "", ".spec.x"),
            conflict("a", Operation::Update, "", ".spec.y"),
            conflict("b", Operation::Apply, "", ".spec.z"),
            conflict("c", Operation::Update, "status", ".status.phase"),
        ];
        assert_eq!(
            conflict_message(&found),
            "Apply failed with 4 conflicts: conflicts with \"a\" using v1:\n- .spec.y\n\
             conflicts with \"b\":\n- .spec.x\n- .spec.z\n\
             conflicts with \"c\" with subresource \"status\" using v1:\n- .status.phase"
        );
    }

    #[test]
    fn kubectl_server_side_apply_upgrades_client_side_apply() {
        let last = deployment(3, json!({}));
        let mut live = deployment(3, json!({}));
        live["metadata"]["annotations"] =
            json!({LAST_APPLIED_CONFIG_ANNOTATION: format!("{}\n", sorted(&last))});
        track_update(
            DEPLOYMENT,
            None,
            &mut live,
            "kubectl-client-side-apply",
            "apps/v1",
            "t1",
        );
        let config = deployment(5, json!({}));
        // Another manager name gets the conflict ...
        let found = conflicts(apply(Some(&live), &config, "someone", false, "t2"));
        assert_eq!(found.len(), 1);
        // ... kubectl takes the fields client-side apply set.
        let object = applied(apply(Some(&live), &config, "kubectl", false, "t2"));
        assert_eq!(object["spec"]["replicas"], 5);
        let annotation = object["metadata"]["annotations"][LAST_APPLIED_CONFIG_ANNOTATION]
            .as_str()
            .expect("annotation kept");
        let recorded: Value = serde_json::from_str(annotation).expect("JSON");
        assert_eq!(recorded, config);
        assert!(annotation.ends_with("}\n"));
    }

    #[test]
    fn kubectl_still_conflicts_on_fields_changed_since_client_side_apply() {
        let last = deployment(3, json!({}));
        let mut live = deployment(3, json!({}));
        live["metadata"]["annotations"] =
            json!({LAST_APPLIED_CONFIG_ANNOTATION: sorted(&last).to_string()});
        track_update(
            DEPLOYMENT,
            None,
            &mut live,
            "kubectl-client-side-apply",
            "apps/v1",
            "t1",
        );
        let mut scaled = live.clone();
        scaled["spec"]["replicas"] = json!(4);
        track_update(
            DEPLOYMENT,
            Some(&live),
            &mut scaled,
            "kubectl-client-side-apply",
            "apps/v1",
            "t2",
        );
        let found = conflicts(apply(
            Some(&scaled),
            &deployment(5, json!({})),
            "kubectl",
            false,
            "t3",
        ));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].field, ".spec.replicas");
    }

    #[test]
    fn odd_shapes_never_panic() {
        let odd = [
            json!({"spec": "text"}),
            json!({"spec": {"template": {"spec": {"containers": "nginx"}}}}),
            json!({"spec": {"template": {"spec": {"containers": [1, null, []]}}}}),
            json!({"metadata": {"labels": ["a"], "finalizers": [{"x": 1}, {"x": 1}]}}),
            json!({"metadata": 7, "spec": {"replicas": {"deep": [{"a": null}]}}}),
            json!({"metadata": {"managedFields": [{"fieldsType": "FieldsV1", "fieldsV1": "x"}]}}),
        ];
        for live in &odd {
            for config in &odd {
                let _ = apply(Some(live), config, "kubectl", false, "t");
                let _ = apply(Some(live), config, "m", true, "t");
                let mut new = config.clone();
                track_update(DEPLOYMENT, Some(live), &mut new, "m", "apps/v1", "t");
                let mut new = config.clone();
                track_update(None, Some(live), &mut new, "m", "v1", "t");
            }
        }
    }

    #[test]
    fn custom_resources_treat_lists_as_atomic() {
        let config = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "finalizers": ["a"]}, "spec": {"items": [1, 2], "size": 1}});
        let object = applied(server_side_apply(&ApplyRequest {
            definition: None,
            live: None,
            applied: &config,
            manager: "m",
            force: false,
            api_version: "example.com/v1",
            now: "t1",
        }));
        assert_eq!(
            object["metadata"]["managedFields"][0]["fieldsV1"],
            json!({
                "f:metadata": {"f:finalizers": {"v:\"a\"": {}}},
                "f:spec": {".": {}, "f:items": {}, "f:size": {}}
            })
        );
    }

    #[test]
    fn a_write_of_one_field_tracks_what_a_whole_comparison_would() {
        let pod = Some("io.k8s.api.core.v1.Pod");
        let mut created = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "labels": {"app": "a"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Pending", "qosClass": "BestEffort"}});
        let status = created.as_object_mut().and_then(|m| m.remove("status"));
        track_update(pod, None, &mut created, "restorer", "v1", "t1");
        created["status"] = status.expect("a status");
        let merged = json!({"phase": "Running", "podIP": "10.0.0.7", "qosClass": null,
            "conditions": [{"type": "Ready", "status": "True"}],
            "podIPs": [{"ip": "10.0.0.7"}]});

        // A merge patch of the status (one level deep is enough here).
        let merge = |object: &mut Value| {
            let status = object["status"].as_object_mut().expect("a status");
            for (key, value) in merged.as_object().expect("fields") {
                if value.is_null() {
                    status.remove(key);
                } else {
                    status.insert(key.clone(), value.clone());
                }
            }
        };
        let mut general = created.clone();
        merge(&mut general);
        track_subresource_update(
            pod,
            Some(&created),
            &mut general,
            "restorer",
            "status",
            "v1",
            "t2",
        );
        let mut fast = created.clone();
        let before = fast.get("status").cloned();
        merge(&mut fast);
        track_field_update(
            pod,
            before.as_ref(),
            &mut fast,
            "status",
            "restorer",
            "status",
            "v1",
            "t2",
        );
        assert_eq!(fast, general);
        let entries = fast["metadata"]["managedFields"]
            .as_array()
            .expect("entries");
        assert_eq!(entries.len(), 2, "{fast}");
        assert_eq!(entries[1]["subresource"], "status");
        assert!(
            entries[1]["fieldsV1"]["f:status"].get("f:podIP").is_some(),
            "{fast}"
        );
    }

    #[test]
    fn a_write_of_one_field_over_entries_that_own_it_tracks_what_a_whole_comparison_would() {
        let pod = Some("io.k8s.api.core.v1.Pod");
        let entry = |manager: &str, subresource: &str, time: &str, fields: Value| {
            let mut entry = json!({"manager": manager, "operation": "Update", "apiVersion": "v1",
                "time": time, "fieldsType": "FieldsV1", "fieldsV1": fields});
            if !subresource.is_empty() {
                entry["subresource"] = json!(subresource);
            }
            entry
        };
        let spec = json!({"f:spec": {"f:nodeName": {}}});
        let status = json!({"f:status": {"f:phase": {}, "f:podIP": {}}});
        let cases = [
            // Another manager owns status fields: they change hands.
            vec![
                entry("creator", "", "t1", spec.clone()),
                entry("kubelet", "status", "t1", status.clone()),
            ],
            // The writer's own status entry already exists: it grows.
            vec![entry("restorer", "status", "t1", status.clone())],
            // Entries sorting after the writer's (a later time), and an apply.
            vec![
                entry("zeta", "", "t3", spec.clone()),
                json!({"manager": "applier", "operation": "Apply", "apiVersion": "v1", "time": "t0",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}}),
            ],
            // Equal sort keys but for the subresource.
            vec![entry("restorer", "", "t2", spec.clone())],
        ];
        for managed in cases {
            let mut created = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "default", "labels": {"app": "a"},
                    "managedFields": managed},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
                "status": {"phase": "Pending", "podIP": "10.0.0.1"}});
            // As the server writes them: canonical order.
            let entries = decode(&created["metadata"]["managedFields"]).expect("entries");
            set_managed_fields(&mut created, &entries);
            let mut general = created.clone();
            general["status"] = json!({"phase": "Running", "podIP": "10.0.0.7", "hostIP": "h"});
            track_subresource_update(
                pod,
                Some(&created),
                &mut general,
                "restorer",
                "status",
                "v1",
                "t2",
            );
            let mut fast = created.clone();
            fast["status"] = general["status"].clone();
            track_field_update(
                pod,
                created.get("status"),
                &mut fast,
                "status",
                "restorer",
                "status",
                "v1",
                "t2",
            );
            assert_eq!(fast, general);
            assert_eq!(fast.to_string(), general.to_string());
        }
    }

    #[test]
    fn the_fields_a_write_of_one_field_changed_are_those_a_whole_comparison_finds() {
        let statuses = |n: usize, image: &str| -> Value {
            (0..n)
                .map(|i| {
                    json!({"name": format!("c{i}"), "image": image, "ready": i % 2 == 0,
                    "state": {"running": {"startedAt": "t"}}})
                })
                .collect()
        };
        let pod_statuses = [
            json!(null),
            json!({}),
            json!({"phase": "Pending", "qosClass": "BestEffort"}),
            json!({"phase": "Running", "podIP": "10.0.0.7", "hostIP": "h",
                "podIPs": [{"ip": "10.0.0.7"}],
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"}],
                "containerStatuses": statuses(2, "busybox")}),
            json!({"phase": "Running", "podIP": "10.0.0.8",
                "conditions": [{"type": "Ready", "status": "False", "reason": "R"}],
                "containerStatuses": statuses(3, "nginx")}),
            json!({"phase": "Running", "containerStatuses": statuses(20, "busybox")}),
            json!({"phase": "Running", "containerStatuses": statuses(21, "nginx")}),
            // Items without their key, duplicates, a kind that does not fit.
            json!({"conditions": [{"status": "True"}], "podIPs": "odd"}),
            json!({"conditions": [{"type": "Ready", "status": "True"}, {"type": "Ready", "status": "False"}],
                "podIPs": [{"ip": "a"}, {"ip": "a"}], "phase": 3}),
            json!({"phase": {"nested": true}, "hostIPs": null, "resize": "x",
                "nominatedNodeName": [1, 2]}),
            json!("not an object"),
        ];
        let sets = [
            json!({"replicas": 1, "conditions": [{"type": "Available", "status": "True"}]}),
            json!({"replicas": 2, "readyReplicas": 2,
                "conditions": [{"type": "Available", "status": "False"}, {"type": "Progressing", "status": "True"}]}),
            json!({"replicas": 2, "collisionCount": 1}),
        ];
        let widgets = [
            json!({"a": {"b": [1, 2]}, "c": "d"}),
            json!({"a": {"b": [1, 3], "e": {}}, "f": null}),
        ];
        let kinds = [
            (Some("io.k8s.api.core.v1.Pod"), &pod_statuses[..]),
            (Some("io.k8s.api.apps.v1.Deployment"), &sets[..]),
            (None, &widgets[..]),
        ];
        for (definition, statuses) in kinds {
            for old in statuses {
                for new in statuses {
                    let mut created = json!({"apiVersion": "v1", "kind": "K",
                        "metadata": {"name": "p", "namespace": "default"},
                        "spec": {"x": 1}});
                    track_update(definition, None, &mut created, "restorer", "v1", "t1");
                    created["status"] = old.clone();
                    let mut general = created.clone();
                    general["status"] = new.clone();
                    track_subresource_update(
                        definition,
                        Some(&created),
                        &mut general,
                        "restorer",
                        "status",
                        "v1",
                        "t2",
                    );
                    let mut fast = created.clone();
                    fast["status"] = new.clone();
                    track_field_update(
                        definition,
                        created.get("status"),
                        &mut fast,
                        "status",
                        "restorer",
                        "status",
                        "v1",
                        "t2",
                    );
                    assert_eq!(fast, general, "{definition:?}: {old} -> {new}");
                }
            }
        }
    }
}
