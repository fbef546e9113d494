//! The patch metadata table of the built-in types.

/// How a list (or map) field is merged by strategic merge patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchStrategy {
    /// Lists are merged element by element (by merge key, or as a set of scalars).
    Merge,
    /// The field is replaced as a whole.
    Replace,
    /// `merge,retainKeys`: merged, and `$retainKeys` directives are honoured.
    MergeRetainKeys,
    /// `retainKeys` only.
    RetainKeys,
}

impl PatchStrategy {
    /// The value as written in `x-kubernetes-patch-strategy`.
    pub fn as_str(self) -> &'static str {
        match self {
            PatchStrategy::Merge => "merge",
            PatchStrategy::Replace => "replace",
            PatchStrategy::MergeRetainKeys => "merge,retainKeys",
            PatchStrategy::RetainKeys => "retainKeys",
        }
    }
}

/// The patch metadata of one field of one OpenAPI definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldPatchMeta {
    pub strategy: PatchStrategy,
    /// The merge key of a list of objects (`x-kubernetes-patch-merge-key`).
    pub merge_key: Option<&'static str>,
}

/// (OpenAPI definition name, field name, strategy, merge key).
type Row = (
    &'static str,
    &'static str,
    PatchStrategy,
    Option<&'static str>,
);

const TABLE: &[Row] = &[
    (
        "io.k8s.api.core.v1.PodSpec",
        "containers",
        PatchStrategy::Merge,
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "initContainers",
        PatchStrategy::Merge,
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "volumes",
        PatchStrategy::MergeRetainKeys,
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.Container",
        "env",
        PatchStrategy::Merge,
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.Container",
        "ports",
        PatchStrategy::Merge,
        Some("containerPort"),
    ),
    (
        "io.k8s.api.core.v1.Container",
        "volumeMounts",
        PatchStrategy::Merge,
        Some("mountPath"),
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "finalizers",
        PatchStrategy::Merge,
        None,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "ownerReferences",
        PatchStrategy::Merge,
        Some("uid"),
    ),
];

/// The patch metadata of `field` in the OpenAPI definition `definition`
/// (e.g. `io.k8s.api.core.v1.PodSpec`, `containers`), if Kubernetes declares any.
pub fn field_patch_meta(definition: &str, field: &str) -> Option<FieldPatchMeta> {
    TABLE
        .iter()
        .find(|(d, f, _, _)| *d == definition && *f == field)
        .map(|(_, _, strategy, merge_key)| FieldPatchMeta {
            strategy: *strategy,
            merge_key: *merge_key,
        })
}
