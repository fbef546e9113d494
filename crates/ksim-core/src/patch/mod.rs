//! Patches of Kubernetes objects: the patch metadata of the built-in types
//! (patch strategy and merge key per field, as Kubernetes declares them with
//! `patchStrategy`/`patchMergeKey`) and strategic merge patch.
//!
//! The table in [`metadata`] is the single source of truth: the API server's
//! strategic merge patch reads it, and so does the OpenAPI generator when it
//! writes `x-kubernetes-patch-strategy` / `x-kubernetes-patch-merge-key`.

mod go_format;
mod metadata;
mod strategic;

pub use metadata::{FieldPatchMeta, PatchStrategy, all_field_patch_meta, field_patch_meta};
pub use strategic::strategic_merge_patch;
