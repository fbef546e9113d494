//! [`Store`]: collections of objects under one revision counter, their
//! bounded watch histories, and the reads and writes on them.
//!
//! One `std::sync::Mutex` guards everything; it is held only for map
//! operations (never across an `.await`). A write compares and serializes
//! its object before taking the lock and only splices its revision in under
//! it; versions that fall out of a history are freed after it is released.

use std::collections::{BTreeMap, HashMap, VecDeque, btree_map};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::watch;

use crate::StoreError;
use crate::object::{ObjectKey, StoredObject, UnstampedObject, key_of, same_content};

/// How many events each collection keeps for watches to resume from.
pub const DEFAULT_HISTORY_LIMIT: usize = 20_000;

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Added,
    Modified,
    Deleted,
}

impl EventKind {
    /// `ADDED`, `MODIFIED`, `DELETED`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Added => "ADDED",
            EventKind::Modified => "MODIFIED",
            EventKind::Deleted => "DELETED",
        }
    }
}

/// One change of one object.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    pub kind: EventKind,
    /// The object after the change (for a deletion: its last version,
    /// stamped with the deletion's revision).
    pub object: Arc<StoredObject>,
    /// The version before the change (for selector transitions).
    pub previous: Option<Arc<StoredObject>>,
}

impl WatchEvent {
    /// The revision of the change.
    pub fn revision(&self) -> u64 {
        self.object.revision
    }
}

/// What an update did.
#[derive(Debug, Clone)]
pub enum UpdateOutcome {
    /// A new version was written.
    Updated(Arc<StoredObject>),
    /// The object was identical to the stored one: nothing was written.
    Unchanged(Arc<StoredObject>),
    /// The update removed the last finalizer of a terminating object, which
    /// is gone now.
    Deleted(Arc<StoredObject>),
}

impl UpdateOutcome {
    /// The resulting object version.
    pub fn object(&self) -> &Arc<StoredObject> {
        match self {
            UpdateOutcome::Updated(o) | UpdateOutcome::Unchanged(o) | UpdateOutcome::Deleted(o) => {
                o
            }
        }
    }
}

/// Preconditions of a delete.
#[derive(Debug, Clone, Default)]
pub struct Preconditions {
    pub uid: Option<String>,
    pub resource_version: Option<u64>,
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct ListPage {
    pub items: Vec<Arc<StoredObject>>,
    /// The store's revision when the page was read.
    pub revision: u64,
    /// The key of the last item when more items remain.
    pub continue_after: Option<ObjectKey>,
    /// How many items remain after this page, when paging a list that
    /// [`Store::list_counted`] counted.
    pub remaining: Option<usize>,
    /// For a counted list, how many items the pages so far served, this
    /// one included (what its next page is told, so it need not walk the
    /// keys); otherwise this page's items.
    pub served: usize,
}

/// A watch's position in a collection's history.
#[derive(Debug)]
pub struct WatchCursor {
    collection: String,
    /// The revision of the last event seen (events after it come next).
    pub revision: u64,
    changes: watch::Receiver<u64>,
}

impl WatchCursor {
    /// Waits until the collection changes. Call [`Store::next_events`] first
    /// (it returns what is already in history), then this, in a loop: no
    /// write is missed in between. Returns false if the store is gone.
    pub async fn changed(&mut self) -> bool {
        self.changes.changed().await.is_ok()
    }
}

struct Collection {
    objects: BTreeMap<ObjectKey, Arc<StoredObject>>,
    /// How many objects each namespace holds (`""` for cluster-scoped
    /// ones): a namespace's list is counted without walking it.
    namespace_counts: HashMap<String, usize>,
    history: VecDeque<WatchEvent>,
    /// Watches may resume from any revision >= this one.
    oldest_resumable: u64,
    changes: watch::Sender<u64>,
}

impl Collection {
    /// A collection first touched at `revision`. Nothing ever happened in it
    /// before, so a watch may resume from any earlier revision: a client
    /// that listed it (empty) at revision 5 and watches from 5 after other
    /// collections moved the store on must not get 410 Expired.
    fn new(revision: u64) -> Self {
        Collection {
            objects: BTreeMap::new(),
            namespace_counts: HashMap::new(),
            history: VecDeque::new(),
            oldest_resumable: 0,
            changes: watch::Sender::new(revision),
        }
    }

    fn insert(&mut self, key: ObjectKey, object: Arc<StoredObject>) {
        let namespace = key.0.clone();
        if self.objects.insert(key, object).is_none() {
            *self.namespace_counts.entry(namespace).or_default() += 1;
        }
    }

    fn remove(&mut self, key: &ObjectKey) {
        if self.objects.remove(key).is_some()
            && let Some(count) = self.namespace_counts.get_mut(&key.0)
        {
            *count -= 1;
            if *count == 0 {
                self.namespace_counts.remove(&key.0);
            }
        }
    }

    /// How many objects a list of `namespace` (or of all) covers.
    fn len_in(&self, namespace: Option<&str>) -> usize {
        match namespace {
            Some(ns) => self.namespace_counts.get(ns).copied().unwrap_or(0),
            None => self.objects.len(),
        }
    }
}

/// How a list page counts the items after it.
#[derive(Clone, Copy)]
enum Count {
    /// Not at all (a filtered list).
    No,
    /// By walking their keys.
    Walk,
    /// As the collection's size less what the pages so far served.
    Served(usize),
}

struct Inner {
    revision: u64,
    collections: HashMap<String, Collection>,
}

impl Inner {
    fn collection(&mut self, name: &str) -> &mut Collection {
        self.collection_at(name, self.revision)
    }

    /// [`Self::collection`], a new one first touched at `revision`.
    fn collection_at(&mut self, name: &str, revision: u64) -> &mut Collection {
        // Looked up first: the name is copied only for a new collection.
        if !self.collections.contains_key(name) {
            self.collections
                .insert(name.to_string(), Collection::new(revision));
        }
        self.collections
            .get_mut(name)
            .expect("the collection was just made")
    }
}

/// The object store. Cheap to share behind an `Arc`.
pub struct Store {
    inner: Mutex<Inner>,
    history_limit: usize,
}

impl Default for Store {
    fn default() -> Self {
        Store::new(DEFAULT_HISTORY_LIMIT)
    }
}

impl Store {
    /// An empty store keeping `history_limit` events per collection.
    pub fn new(history_limit: usize) -> Self {
        Store {
            inner: Mutex::new(Inner {
                revision: 1,
                collections: HashMap::new(),
            }),
            history_limit: history_limit.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves maps consistent (every
        // mutation is a single insert/remove), so poisoning is ignored.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current revision of the whole store.
    pub fn revision(&self) -> u64 {
        self.lock().revision
    }

    /// Appends `event` to the collection's history; the events that fall
    /// out of it go to `dropped`, to be freed once the lock is released.
    fn record(
        &self,
        collection: &mut Collection,
        event: WatchEvent,
        dropped: &mut Vec<WatchEvent>,
    ) {
        let revision = event.revision();
        collection.history.push_back(event);
        while collection.history.len() > self.history_limit {
            if let Some(old) = collection.history.pop_front() {
                collection.oldest_resumable = old.revision();
                dropped.push(old);
            }
        }
        collection.changes.send_replace(revision);
    }

    /// Creates an object. `metadata.name` must be set; `resourceVersion` is
    /// assigned.
    pub fn create(&self, collection: &str, value: Value) -> Result<Arc<StoredObject>, StoreError> {
        let key = key_of(&value)
            .ok_or_else(|| StoreError::InvalidObject("metadata.name is required".into()))?;
        self.insert_new(collection, key, UnstampedObject::new(value))
    }

    /// [`Self::create`] of an object whose `metadata.managedFields`, when
    /// it is a string, was written by `ksim_core::apply` for it (the
    /// compact text of the list, each `fieldsV1` an object): stored and
    /// served as it is, not checked again as [`Self::create`] checks a
    /// string it is given.
    pub fn create_written(
        &self,
        collection: &str,
        value: Value,
    ) -> Result<Arc<StoredObject>, StoreError> {
        let key = key_of(&value)
            .ok_or_else(|| StoreError::InvalidObject("metadata.name is required".into()))?;
        self.insert_new(collection, key, UnstampedObject::written(value))
    }

    /// Inserts a new object prepared for the store under `key`.
    fn insert_new(
        &self,
        collection: &str,
        key: ObjectKey,
        prepared: UnstampedObject,
    ) -> Result<Arc<StoredObject>, StoreError> {
        let mut dropped = Vec::new();
        let mut inner = self.lock();
        let revision = inner.revision + 1;
        // One search of the collection's objects finds whether the key is
        // taken and where a new object goes.
        let target = inner.collection_at(collection, revision);
        let stored = match target.objects.entry(key) {
            btree_map::Entry::Occupied(_) => return Err(StoreError::AlreadyExists),
            btree_map::Entry::Vacant(place) => {
                let stored = Arc::new(prepared.stamp(revision, place.key().clone()));
                let namespace = &place.key().0;
                match target.namespace_counts.get_mut(namespace) {
                    Some(count) => *count += 1,
                    None => {
                        target.namespace_counts.insert(namespace.clone(), 1);
                    }
                }
                place.insert(stored.clone());
                stored
            }
        };
        let event = WatchEvent {
            kind: EventKind::Added,
            object: stored.clone(),
            previous: None,
        };
        self.record(target, event, &mut dropped);
        inner.revision = revision;
        drop(inner);
        drop(dropped);
        Ok(stored)
    }

    /// Reads an object.
    pub fn get(&self, collection: &str, namespace: &str, name: &str) -> Option<Arc<StoredObject>> {
        let inner = self.lock();
        inner
            .collections
            .get(collection)?
            .objects
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// The stored version of an object.
    fn current(&self, collection: &str, key: &ObjectKey) -> Result<Arc<StoredObject>, StoreError> {
        self.lock()
            .collections
            .get(collection)
            .and_then(|c| c.objects.get(key))
            .cloned()
            .ok_or(StoreError::NotFound)
    }

    /// Replaces an object. With `expected_revision`, fails with `Conflict`
    /// unless the stored version has exactly that revision.
    ///
    /// The new version is compared with the stored one and serialized
    /// without the lock; if another write lands meanwhile, an update with
    /// `expected_revision` is a conflict and one without starts over.
    pub fn update(
        &self,
        collection: &str,
        value: Value,
        expected_revision: Option<u64>,
    ) -> Result<UpdateOutcome, StoreError> {
        self.update_prepared(collection, value, expected_revision, false)
    }

    /// [`Self::update`] of an object whose `metadata.managedFields`, when it
    /// is a string, was written by `ksim_core::apply` for it (as
    /// [`Self::create_written`] takes it): stored as it is, not checked.
    pub fn update_written(
        &self,
        collection: &str,
        value: Value,
        expected_revision: Option<u64>,
    ) -> Result<UpdateOutcome, StoreError> {
        self.update_prepared(collection, value, expected_revision, true)
    }

    fn update_prepared(
        &self,
        collection: &str,
        value: Value,
        expected_revision: Option<u64>,
        written: bool,
    ) -> Result<UpdateOutcome, StoreError> {
        let key = key_of(&value)
            .ok_or_else(|| StoreError::InvalidObject("metadata.name is required".into()))?;
        let finished = is_finished_terminating(&value);
        let prepared = if written {
            UnstampedObject::written(value)
        } else {
            UnstampedObject::new(value)
        };
        let mut current = self.current(collection, &key)?;
        loop {
            if let Some(expected) = expected_revision
                && expected != current.revision
            {
                return Err(conflict());
            }
            if same_content(&current.value, prepared.value()) {
                return Ok(UpdateOutcome::Unchanged(current));
            }
            let mut dropped = Vec::new();
            let mut inner = self.lock();
            let now = inner
                .collections
                .get(collection)
                .and_then(|c| c.objects.get(&key))
                .cloned()
                .ok_or(StoreError::NotFound)?;
            if now.revision != current.revision {
                // Written meanwhile: compare with that version instead.
                drop(inner);
                current = now;
                continue;
            }
            inner.revision += 1;
            let revision = inner.revision;
            let stored = Arc::new(prepared.stamp(revision, key.clone()));
            let target = inner.collection(collection);
            let kind = if finished {
                target.remove(&key);
                EventKind::Deleted
            } else {
                target.insert(key, stored.clone());
                EventKind::Modified
            };
            let event = WatchEvent {
                kind,
                object: stored.clone(),
                previous: Some(current),
            };
            self.record(inner.collection(collection), event, &mut dropped);
            drop(inner);
            drop(dropped);
            return Ok(if finished {
                UpdateOutcome::Deleted(stored)
            } else {
                UpdateOutcome::Updated(stored)
            });
        }
    }

    /// Removes an object now (the API server decides beforehand whether a
    /// delete only marks it terminating).
    pub fn delete(
        &self,
        collection: &str,
        namespace: &str,
        name: &str,
        preconditions: &Preconditions,
    ) -> Result<Arc<StoredObject>, StoreError> {
        let key = (namespace.to_string(), name.to_string());
        let mut current = self.current(collection, &key)?;
        loop {
            check_preconditions(&current, preconditions)?;
            // The last version, stamped with the deletion's revision below.
            let last = current.unstamped();
            let mut dropped = Vec::new();
            let mut inner = self.lock();
            let now = inner
                .collections
                .get(collection)
                .and_then(|c| c.objects.get(&key))
                .cloned()
                .ok_or(StoreError::NotFound)?;
            if now.revision != current.revision {
                drop(inner);
                current = now;
                continue;
            }
            inner.revision += 1;
            let stored = Arc::new(last.stamp(inner.revision, key.clone()));
            let target = inner.collection(collection);
            target.remove(&key);
            let event = WatchEvent {
                kind: EventKind::Deleted,
                object: stored.clone(),
                previous: Some(current),
            };
            self.record(inner.collection(collection), event, &mut dropped);
            drop(inner);
            drop(dropped);
            return Ok(stored);
        }
    }

    /// Lists objects in key order: all of them, or those of one namespace,
    /// starting after `continue_after`, keeping those `filter` accepts, at
    /// most `limit` of them. A page says whether more items follow but not
    /// how many (with a filter the count would be a guess, and kube-apiserver
    /// leaves it out then); [`Store::list_counted`] counts them.
    pub fn list(
        &self,
        collection: &str,
        namespace: Option<&str>,
        continue_after: Option<&ObjectKey>,
        limit: Option<usize>,
        filter: impl Fn(&StoredObject) -> bool,
    ) -> ListPage {
        self.list_page(
            collection,
            namespace,
            continue_after,
            limit,
            filter,
            Count::No,
        )
    }

    /// Lists objects as [`Store::list`] does with no filter, and counts the
    /// items after the page (`remainingItemCount`). `served_before`: how
    /// many items the earlier pages served ([`ListPage::served`] of the
    /// last one), which makes the count the collection's size less what
    /// was served, without a walk. That is exact unless objects before the
    /// page changed while paging; kube-apiserver too calls the count an
    /// estimate. Without it, the keys after a continued page are walked.
    pub fn list_counted(
        &self,
        collection: &str,
        namespace: Option<&str>,
        continue_after: Option<&ObjectKey>,
        limit: Option<usize>,
        served_before: Option<usize>,
    ) -> ListPage {
        let count = match (continue_after, served_before) {
            (None, _) => Count::Served(0),
            (Some(_), Some(served)) => Count::Served(served),
            (Some(_), None) => Count::Walk,
        };
        self.list_page(
            collection,
            namespace,
            continue_after,
            limit,
            |_| true,
            count,
        )
    }

    fn list_page(
        &self,
        collection: &str,
        namespace: Option<&str>,
        continue_after: Option<&ObjectKey>,
        limit: Option<usize>,
        filter: impl Fn(&StoredObject) -> bool,
        count: Count,
    ) -> ListPage {
        let inner = self.lock();
        let revision = inner.revision;
        let Some(target) = inner.collections.get(collection) else {
            return ListPage {
                items: Vec::new(),
                revision,
                continue_after: None,
                remaining: None,
                served: 0,
            };
        };
        let lower = match (continue_after, namespace) {
            (Some(key), _) => Bound::Excluded(key.clone()),
            (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        let mut candidates = target
            .objects
            .range((lower, Bound::Unbounded))
            .take_while(|(key, _)| namespace.is_none_or(|ns| key.0 == ns))
            .map(|(_, object)| object);
        let limit = limit.filter(|l| *l > 0);
        let mut items = Vec::with_capacity(limit.unwrap_or(0).min(10_000));
        for object in candidates.by_ref() {
            if !filter(object) {
                continue;
            }
            items.push(object.clone());
            if limit.is_some_and(|l| items.len() >= l) {
                break;
            }
        }
        // Items after a full page: counted (keys only), or the first one
        // the filter accepts looked for.
        let (more, remaining) = match count {
            Count::No => (candidates.any(|object| filter(object)), None),
            Count::Walk => {
                let rest = candidates.count();
                (rest > 0, Some(rest))
            }
            Count::Served(before) => {
                let more = candidates.next().is_some();
                let rest = target
                    .len_in(namespace)
                    .saturating_sub(before + items.len())
                    .max(usize::from(more));
                (more, Some(rest))
            }
        };
        let served = match count {
            Count::Served(before) => before + items.len(),
            // Everything in scope but what follows.
            Count::Walk => target
                .len_in(namespace)
                .saturating_sub(remaining.unwrap_or(0)),
            // Not counted: what this page served.
            Count::No => items.len(),
        };
        let continue_after = if more {
            items.last().map(|o| o.key.clone())
        } else {
            None
        };
        ListPage {
            items,
            revision,
            continue_after,
            remaining: remaining.filter(|_| more),
            served,
        }
    }

    /// Starts a watch on a collection after `from_revision` (default: now).
    /// Fails with `Expired` if that revision is older than the history.
    pub fn watch(
        &self,
        collection: &str,
        from_revision: Option<u64>,
    ) -> Result<WatchCursor, StoreError> {
        let mut inner = self.lock();
        let now = inner.revision;
        let target = inner.collection(collection);
        let revision = match from_revision {
            Some(requested) if requested < target.oldest_resumable => {
                return Err(StoreError::Expired {
                    requested,
                    oldest: target.oldest_resumable,
                });
            }
            Some(requested) => requested.min(now),
            None => now,
        };
        // Events already in history after `revision` come with the first
        // `next_events`; the channel only signals writes after this point.
        let changes = target.changes.subscribe();
        Ok(WatchCursor {
            collection: collection.to_string(),
            revision,
            changes,
        })
    }

    /// The events after the cursor's position (advancing it), or `Expired`
    /// if the watch fell behind the history.
    pub fn next_events(&self, cursor: &mut WatchCursor) -> Result<Vec<WatchEvent>, StoreError> {
        let inner = self.lock();
        let Some(target) = inner.collections.get(&cursor.collection) else {
            return Ok(Vec::new());
        };
        if cursor.revision < target.oldest_resumable {
            return Err(StoreError::Expired {
                requested: cursor.revision,
                oldest: target.oldest_resumable,
            });
        }
        let start = target
            .history
            .partition_point(|event| event.revision() <= cursor.revision);
        let events: Vec<WatchEvent> = target.history.range(start..).cloned().collect();
        if let Some(last) = events.last() {
            cursor.revision = last.revision();
        }
        Ok(events)
    }

    /// Number of objects in a collection.
    pub fn len(&self, collection: &str) -> usize {
        self.lock()
            .collections
            .get(collection)
            .map_or(0, |c| c.objects.len())
    }

    /// Whether a collection holds no object.
    pub fn is_empty(&self, collection: &str) -> bool {
        self.len(collection) == 0
    }
}

/// The conflict of a write against a version it did not expect.
fn conflict() -> StoreError {
    StoreError::Conflict(
        "the object has been modified; please apply your changes to the latest version and try again"
            .into(),
    )
}

fn check_preconditions(
    current: &StoredObject,
    preconditions: &Preconditions,
) -> Result<(), StoreError> {
    if let Some(uid) = &preconditions.uid
        && current.uid() != Some(uid.as_str())
    {
        return Err(StoreError::Conflict(format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            current.uid().unwrap_or_default()
        )));
    }
    if let Some(version) = preconditions.resource_version
        && version != current.revision
    {
        return Err(StoreError::Conflict(format!(
            "Precondition failed: ResourceVersion in precondition: {version}, ResourceVersion in object meta: {}",
            current.revision
        )));
    }
    Ok(())
}

/// A terminating object with no finalizers left (in `metadata.finalizers`,
/// or a namespace's `spec.finalizers`) and no grace period to wait for.
fn is_finished_terminating(value: &Value) -> bool {
    let Some(metadata) = value.get("metadata") else {
        return false;
    };
    let terminating = metadata
        .get("deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    let empty = |list: Option<&Value>| list.and_then(Value::as_array).is_none_or(|f| f.is_empty());
    // Namespaces are also held by `spec.finalizers` (`kubernetes`).
    let no_finalizers = empty(metadata.get("finalizers"))
        && empty(value.get("spec").and_then(|s| s.get("finalizers")));
    let no_grace = metadata
        .get("deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .is_none_or(|g| g == 0);
    terminating && no_finalizers && no_grace
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")}})
    }

    #[test]
    fn a_written_managed_fields_text_is_stored_and_served_as_a_checked_one() {
        let text = r#"[{"manager":"m","operation":"Update","apiVersion":"v1","time":"2026-01-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:x":{}}}}]"#;
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "n", "managedFields": text},
            "data": {"x": "1"}});
        let checked = Store::default()
            .create("/configmaps", object.clone())
            .expect("create");
        let written = Store::default()
            .create_written("/configmaps", object)
            .expect("create");
        assert_eq!(written.json, checked.json);
        assert_eq!(written.value, checked.value);
        assert_eq!(written.revision, checked.revision);
        let served: Value = serde_json::from_slice(&written.json).expect("json");
        assert_eq!(
            served["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {"f:x": {}}})
        );
        assert_eq!(
            served["metadata"]["resourceVersion"],
            written.revision.to_string()
        );
        // The served object is the stored one, its managedFields the list.
        let mut expected = written.value.clone();
        crate::expand_managed_fields(&mut expected);
        assert_eq!(served, expected);
    }

    #[test]
    fn a_written_managed_fields_text_is_updated_as_a_checked_one() {
        let text = r#"[{"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:x":{}}},"manager":"m","operation":"Update","time":"2026-01-01T00:00:00Z"}]"#;
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "n"}, "data": {"x": "1"}});
        let mut changed = object.clone();
        changed["data"]["x"] = json!("2");
        changed["metadata"]["managedFields"] = json!(text);
        let (checked_store, written_store) = (Store::default(), Store::default());
        for store in [&checked_store, &written_store] {
            store.create("/configmaps", object.clone()).expect("create");
        }
        let checked = checked_store
            .update("/configmaps", changed.clone(), None)
            .expect("update");
        let written = written_store
            .update_written("/configmaps", changed, None)
            .expect("update");
        assert!(matches!(written, UpdateOutcome::Updated(_)));
        assert_eq!(written.object().json, checked.object().json);
        assert_eq!(written.object().value, checked.object().value);
        let served: Value = serde_json::from_slice(&written.object().json).expect("json");
        assert_eq!(served["metadata"]["managedFields"][0]["manager"], "m");
    }

    #[test]
    fn every_write_gets_a_higher_resource_version() {
        let store = Store::default();
        let a = store.create("/pods", pod("a")).expect("create a");
        let b = store.create("/pods", pod("b")).expect("create b");
        assert!(b.revision > a.revision);
        assert_eq!(
            b.value["metadata"]["resourceVersion"],
            json!(b.revision.to_string())
        );
        assert_eq!(
            store.create("/pods", pod("a")).err(),
            Some(StoreError::AlreadyExists)
        );
    }

    #[test]
    fn watch_of_an_untouched_collection_resumes_from_an_older_revision() {
        let store = Store::default();
        let listed_at = store.revision();
        store
            .create("/configmaps", pod("other"))
            .expect("create elsewhere");
        let mut cursor = store
            .watch("/pods", Some(listed_at))
            .expect("nothing happened in /pods since it was listed");
        store.create("/pods", pod("a")).expect("create a");
        let events = store.next_events(&mut cursor).expect("events");
        assert_eq!(events.len(), 1);
    }

    #[test]
    fn stale_update_is_a_conflict() {
        let store = Store::default();
        let a = store.create("/pods", pod("a")).expect("create");
        let mut changed = pod("a");
        changed["metadata"]["labels"] = json!({"x": "1"});
        let updated = store
            .update("/pods", changed.clone(), Some(a.revision))
            .expect("first update");
        assert!(matches!(updated, UpdateOutcome::Updated(_)));
        changed["metadata"]["labels"] = json!({"x": "2"});
        let stale = store.update("/pods", changed, Some(a.revision));
        assert!(matches!(stale, Err(StoreError::Conflict(_))));
    }

    #[test]
    fn concurrent_read_modify_writes_lose_no_increment() {
        let store = Arc::new(Store::default());
        store
            .create(
                "pods",
                json!({"metadata": {"name": "a"}, "spec": {"count": 0}}),
            )
            .expect("created");
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let store = store.clone();
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        loop {
                            let current = store.get("pods", "", "a").expect("exists");
                            let mut next = current.value.clone();
                            next["spec"]["count"] =
                                json!(current.value["spec"]["count"].as_i64().expect("count") + 1);
                            match store.update("pods", next, Some(current.revision)) {
                                Ok(_) => break,
                                Err(StoreError::Conflict(_)) => continue,
                                Err(other) => panic!("unexpected {other}"),
                            }
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("no panic");
        }
        let last = store.get("pods", "", "a").expect("exists");
        assert_eq!(last.value["spec"]["count"], 400);
        let served: Value = serde_json::from_slice(&last.json).expect("json");
        assert_eq!(
            served["metadata"]["resourceVersion"],
            last.revision.to_string()
        );
    }

    #[test]
    fn identical_update_writes_nothing() {
        let store = Store::default();
        let a = store.create("/pods", pod("a")).expect("create");
        let before = store.revision();
        let outcome = store
            .update("/pods", a.value.clone(), None)
            .expect("update");
        assert!(matches!(outcome, UpdateOutcome::Unchanged(_)));
        assert_eq!(store.revision(), before);
    }

    #[test]
    fn removing_last_finalizer_of_terminating_object_deletes_it() {
        let store = Store::default();
        let mut object = pod("a");
        object["metadata"]["finalizers"] = json!(["example.com/hold"]);
        store.create("/pods", object.clone()).expect("create");
        object["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        object["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        let marked = store.update("/pods", object.clone(), None).expect("mark");
        assert!(matches!(marked, UpdateOutcome::Updated(_)));
        assert!(store.get("/pods", "default", "a").is_some());
        object["metadata"]["finalizers"] = json!([]);
        let gone = store.update("/pods", object, None).expect("unfinalize");
        assert!(matches!(gone, UpdateOutcome::Deleted(_)));
        assert!(store.get("/pods", "default", "a").is_none());
    }

    #[test]
    fn terminating_namespace_waits_for_its_spec_finalizers() {
        let store = Store::default();
        let mut namespace =
            json!({"metadata": {"name": "t"}, "spec": {"finalizers": ["kubernetes"]}});
        store
            .create("/namespaces", namespace.clone())
            .expect("create");
        namespace["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        namespace["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        let marked = store
            .update("/namespaces", namespace.clone(), None)
            .expect("mark");
        assert!(matches!(marked, UpdateOutcome::Updated(_)));
        namespace["spec"]["finalizers"] = json!([]);
        let finalized = store
            .update("/namespaces", namespace, None)
            .expect("finalize");
        assert!(matches!(finalized, UpdateOutcome::Deleted(_)));
    }

    #[test]
    fn delete_preconditions_are_checked() {
        let store = Store::default();
        store.create("/pods", pod("a")).expect("create");
        let wrong_uid = Preconditions {
            uid: Some("other".into()),
            resource_version: None,
        };
        assert!(matches!(
            store.delete("/pods", "default", "a", &wrong_uid),
            Err(StoreError::Conflict(_))
        ));
        store
            .delete("/pods", "default", "a", &Preconditions::default())
            .expect("delete");
        assert_eq!(
            store
                .delete("/pods", "default", "a", &Preconditions::default())
                .err(),
            Some(StoreError::NotFound)
        );
    }

    #[test]
    fn list_pages_in_key_order_within_a_namespace() {
        let store = Store::default();
        for name in ["c", "a", "b"] {
            store.create("/pods", pod(name)).expect("create");
        }
        let mut other = pod("z");
        other["metadata"]["namespace"] = json!("other");
        store.create("/pods", other).expect("create");
        let first = store.list("/pods", Some("default"), None, Some(2), |_| true);
        let names: Vec<&str> = first.items.iter().map(|o| o.name()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(first.remaining, None, "a filtered list does not count");
        assert!(first.continue_after.is_some());
        let second = store.list(
            "/pods",
            Some("default"),
            first.continue_after.as_ref(),
            Some(2),
            |_| true,
        );
        let names: Vec<&str> = second.items.iter().map(|o| o.name()).collect();
        assert_eq!(names, ["c"]);
        assert!(second.continue_after.is_none());
        assert_eq!(
            store.list("/pods", None, None, None, |_| true).items.len(),
            4
        );
    }

    #[test]
    fn counted_pages_say_how_many_items_follow_in_scope() {
        let store = Store::default();
        for i in 0..7 {
            store
                .create("/pods", pod(&format!("p{i}")))
                .expect("create");
        }
        let mut other = pod("z");
        other["metadata"]["namespace"] = json!("other");
        store.create("/pods", other).expect("create");
        // Told what earlier pages served, or walking the keys: the same counts.
        for told in [true, false] {
            let mut after = None;
            let mut served = None;
            let mut seen = Vec::new();
            loop {
                let page =
                    store.list_counted("/pods", Some("default"), after.as_ref(), Some(3), served);
                seen.extend(page.items.iter().map(|o| o.name().to_string()));
                assert_eq!(page.served, seen.len());
                match page.continue_after {
                    Some(key) => {
                        assert_eq!(page.remaining, Some(7 - seen.len()), "told: {told}");
                        after = Some(key);
                        served = told.then_some(page.served);
                    }
                    None => {
                        assert_eq!(page.remaining, None);
                        break;
                    }
                }
            }
            assert_eq!(seen.len(), 7);
        }
        // Everywhere: the other namespace's pod counts too.
        let first = store.list_counted("/pods", None, None, Some(3), None);
        assert_eq!(first.remaining, Some(5));
        let second = store.list_counted(
            "/pods",
            None,
            first.continue_after.as_ref(),
            Some(3),
            Some(3),
        );
        assert_eq!(second.remaining, Some(2));
        // A page that ends at the last item has no continuation.
        let all = store.list_counted("/pods", None, None, Some(8), None);
        assert!(all.continue_after.is_none());
        // Deleted objects leave the counts; an estimate never says none
        // remain while more do.
        store
            .delete("/pods", "other", "z", &Preconditions::default())
            .expect("delete");
        let first = store.list_counted("/pods", None, None, Some(3), None);
        assert_eq!(first.remaining, Some(4));
        let late = store.list_counted(
            "/pods",
            None,
            first.continue_after.as_ref(),
            Some(3),
            Some(9),
        );
        assert_eq!(late.remaining, Some(1));
    }

    #[test]
    fn watch_resumes_from_history_and_expires_past_it() {
        let store = Store::new(3);
        let start = store.revision();
        let mut cursor = store.watch("/pods", Some(start)).expect("watch");
        for name in ["a", "b", "c", "d"] {
            store.create("/pods", pod(name)).expect("create");
        }
        // history holds the last 3 events; the cursor at `start` fell behind.
        assert!(matches!(
            store.next_events(&mut cursor),
            Err(StoreError::Expired { .. })
        ));
        let recent = store.revision() - 2;
        let mut cursor = store.watch("/pods", Some(recent)).expect("resume");
        let events = store.next_events(&mut cursor).expect("events");
        assert_eq!(events.len(), 2);
        assert!(events.iter().all(|e| e.kind == EventKind::Added));
        assert!(store.next_events(&mut cursor).expect("none").is_empty());
        assert!(matches!(
            store.watch("/pods", Some(start)),
            Err(StoreError::Expired { .. })
        ));
    }

    #[tokio::test]
    async fn watch_wakes_on_change() {
        let store = Arc::new(Store::default());
        let mut cursor = store.watch("/pods", None).expect("watch");
        assert!(store.next_events(&mut cursor).expect("empty").is_empty());
        let writer = store.clone();
        tokio::spawn(async move {
            writer.create("/pods", pod("a")).expect("create");
        });
        assert!(cursor.changed().await);
        let events = store.next_events(&mut cursor).expect("events");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].object.name(), "a");
    }
}
