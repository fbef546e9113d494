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

use PatchStrategy::{Merge, MergeRetainKeys, Replace, RetainKeys};

/// Every `patchStrategy`/`patchMergeKey` struct tag Kubernetes v1.33 declares
/// on the types reachable from the built-in kinds of [`crate::schema`]
/// (`k8s.io/api/*/v1/types.go`, `k8s.io/apimachinery/pkg/apis/meta/v1/types.go`).
/// Fields without a row have no strategy: their lists are replaced whole.
/// `EphemeralContainer` inlines `EphemeralContainerCommon`, so its rows repeat `Container`'s.
#[rustfmt::skip]
const TABLE: &[Row] = &[
    ("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "finalizers", Merge, None),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "ownerReferences", Merge, Some("uid")),
    ("io.k8s.api.core.v1.PodSpec", "volumes", MergeRetainKeys, Some("name")),
    ("io.k8s.api.core.v1.PodSpec", "initContainers", Merge, Some("name")),
    ("io.k8s.api.core.v1.PodSpec", "containers", Merge, Some("name")),
    ("io.k8s.api.core.v1.PodSpec", "ephemeralContainers", Merge, Some("name")),
    ("io.k8s.api.core.v1.PodSpec", "imagePullSecrets", Merge, Some("name")),
    ("io.k8s.api.core.v1.PodSpec", "hostAliases", Merge, Some("ip")),
    ("io.k8s.api.core.v1.PodSpec", "topologySpreadConstraints", Merge, Some("topologyKey")),
    ("io.k8s.api.core.v1.PodSpec", "schedulingGates", Merge, Some("name")),
    ("io.k8s.api.core.v1.PodSpec", "resourceClaims", MergeRetainKeys, Some("name")),
    ("io.k8s.api.core.v1.Container", "ports", Merge, Some("containerPort")),
    ("io.k8s.api.core.v1.Container", "env", Merge, Some("name")),
    ("io.k8s.api.core.v1.Container", "volumeMounts", Merge, Some("mountPath")),
    ("io.k8s.api.core.v1.Container", "volumeDevices", Merge, Some("devicePath")),
    ("io.k8s.api.core.v1.EphemeralContainer", "ports", Merge, Some("containerPort")),
    ("io.k8s.api.core.v1.EphemeralContainer", "env", Merge, Some("name")),
    ("io.k8s.api.core.v1.EphemeralContainer", "volumeMounts", Merge, Some("mountPath")),
    ("io.k8s.api.core.v1.EphemeralContainer", "volumeDevices", Merge, Some("devicePath")),
    ("io.k8s.api.core.v1.ContainerStatus", "volumeMounts", Merge, Some("mountPath")),
    ("io.k8s.api.core.v1.ContainerStatus", "allocatedResourcesStatus", Merge, Some("name")),
    ("io.k8s.api.core.v1.PodStatus", "conditions", Merge, Some("type")),
    ("io.k8s.api.core.v1.PodStatus", "hostIPs", Merge, Some("ip")),
    ("io.k8s.api.core.v1.PodStatus", "podIPs", Merge, Some("ip")),
    ("io.k8s.api.core.v1.PodStatus", "resourceClaimStatuses", MergeRetainKeys, Some("name")),
    ("io.k8s.api.core.v1.NodeSpec", "podCIDRs", Merge, None),
    ("io.k8s.api.core.v1.NodeStatus", "conditions", Merge, Some("type")),
    ("io.k8s.api.core.v1.NodeStatus", "addresses", Merge, Some("type")),
    ("io.k8s.api.core.v1.NamespaceStatus", "conditions", Merge, Some("type")),
    ("io.k8s.api.core.v1.PersistentVolumeClaimStatus", "conditions", Merge, Some("type")),
    ("io.k8s.api.core.v1.ServiceSpec", "ports", Merge, Some("port")),
    ("io.k8s.api.core.v1.ServiceStatus", "conditions", Merge, Some("type")),
    ("io.k8s.api.core.v1.ServiceAccount", "secrets", Merge, Some("name")),
    ("io.k8s.api.apps.v1.DeploymentSpec", "strategy", RetainKeys, None),
    ("io.k8s.api.apps.v1.DeploymentStatus", "conditions", Merge, Some("type")),
    ("io.k8s.api.apps.v1.ReplicaSetStatus", "conditions", Merge, Some("type")),
    ("io.k8s.api.apps.v1.StatefulSetStatus", "conditions", Merge, Some("type")),
    ("io.k8s.api.apps.v1.DaemonSetStatus", "conditions", Merge, Some("type")),
    ("io.k8s.api.batch.v1.JobStatus", "conditions", Merge, Some("type")),
    ("io.k8s.api.policy.v1.PodDisruptionBudgetSpec", "selector", Replace, None),
    ("io.k8s.api.policy.v1.PodDisruptionBudgetStatus", "conditions", Merge, Some("type")),
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

/// Every row of the table as (definition, field, metadata), for the OpenAPI
/// generator that writes `x-kubernetes-patch-strategy`/`-merge-key`.
pub fn all_field_patch_meta() -> impl Iterator<Item = (&'static str, &'static str, FieldPatchMeta)>
{
    TABLE
        .iter()
        .map(|(definition, field, strategy, merge_key)| {
            (
                *definition,
                *field,
                FieldPatchMeta {
                    strategy: *strategy,
                    merge_key: *merge_key,
                },
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::definitions;

    #[test]
    fn every_row_names_a_definition_and_field_of_the_schemas() {
        let definitions = definitions();
        for (definition, field, _, _) in TABLE {
            assert!(
                definitions.property(definition, field).is_some(),
                "{definition}.{field} is not in the generated schemas"
            );
        }
    }

    #[test]
    fn every_merge_key_is_a_field_of_the_list_items() {
        let definitions = definitions();
        for (definition, field, _, merge_key) in TABLE {
            let Some(merge_key) = merge_key else { continue };
            let items = definitions
                .field_definition(definition, field)
                .unwrap_or_else(|| panic!("{definition}.{field} has no item definition"));
            assert!(
                definitions.property(items, merge_key).is_some(),
                "{items} has no merge key field {merge_key}"
            );
        }
    }

    #[test]
    fn all_rows_are_listed_and_agree_with_the_lookup() {
        let rows: Vec<_> = all_field_patch_meta().collect();
        assert_eq!(rows.len(), TABLE.len());
        for (definition, field, meta) in rows {
            assert_eq!(field_patch_meta(definition, field), Some(meta));
        }
    }

    #[test]
    fn rows_are_unique() {
        for (i, (definition, field, _, _)) in TABLE.iter().enumerate() {
            assert!(
                !TABLE[i + 1..]
                    .iter()
                    .any(|(d, f, _, _)| d == definition && f == field),
                "{definition}.{field} appears twice"
            );
        }
    }

    #[test]
    fn field_patch_meta_answers_from_the_table() {
        let cases = [
            (
                "io.k8s.api.core.v1.PodSpec",
                "volumes",
                Some((MergeRetainKeys, Some("name"))),
            ),
            (
                "io.k8s.api.core.v1.Container",
                "ports",
                Some((Merge, Some("containerPort"))),
            ),
            (
                "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
                "finalizers",
                Some((Merge, None)),
            ),
            (
                "io.k8s.api.policy.v1.PodDisruptionBudgetSpec",
                "selector",
                Some((Replace, None)),
            ),
            ("io.k8s.api.core.v1.PodSpec", "tolerations", None),
            ("io.k8s.api.core.v1.NodeSpec", "taints", None),
            ("io.k8s.api.core.v1.PodSpec", "nodeSelector", None),
        ];
        for (definition, field, expected) in cases {
            let got = field_patch_meta(definition, field).map(|m| (m.strategy, m.merge_key));
            assert_eq!(got, expected, "{definition}.{field}");
        }
    }
}
