//! Server-side apply and `metadata.managedFields`: field sets per manager,
//! merging an applied configuration into the live object, conflicts between
//! field managers, and the ownership bookkeeping of ordinary writes, with the
//! semantics of kube-apiserver's field manager (structured-merge-diff v4).

mod created;
mod fieldmanager;
mod fieldpath;
mod managed;
mod types;
mod walk;

pub use created::{created_text, created_then_field_written};
pub use fieldmanager::{
    ApplyOutcome, ApplyRequest, FieldConflict, LAST_APPLIED_CONFIG_ANNOTATION, conflict_message,
    server_side_apply, track_field_update, track_subresource_update, track_subresource_update_text,
    track_update, track_update_text,
};
pub use fieldpath::{FieldPath, FieldSet, PathElement, path_string};
pub use managed::Operation;
