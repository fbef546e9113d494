//! ksim-store: the versioned object store behind ksim's API server.
//!
//! Objects are JSON documents kept per collection (`apps/deployments`,
//! `/pods`, a CRD's `group/plural`), ordered by namespace and name like
//! etcd keys. One revision counter orders every write in the store: it is
//! the `resourceVersion` of objects, lists and watch events.
//!
//! - Writes are atomic and optimistic: an update may carry the revision it
//!   was computed from and fails with [`StoreError::Conflict`] if the object
//!   changed since.
//! - Every write becomes a [`WatchEvent`] in the collection's bounded
//!   history; a watch resumes from any revision still in it and gets
//!   [`StoreError::Expired`] (410 Gone) for an older one.
//! - Finalizers: an update that leaves a terminating object
//!   (`deletionTimestamp` set, grace period 0) without finalizers removes
//!   it, as kube-apiserver's registry does.
//!
//! Nothing here speaks HTTP; the API server owns validation and defaulting.

mod error;
mod object;
mod store;

pub use error::StoreError;
pub use object::{ObjectKey, StoredObject, compact_managed_fields, expand_managed_fields};
pub use store::{
    DEFAULT_HISTORY_LIMIT, EventKind, ListPage, Preconditions, Store, UpdateOutcome, WatchCursor,
    WatchEvent,
};
