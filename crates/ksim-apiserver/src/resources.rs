//! The resource registry: every resource the server serves, built-in or
//! defined by a CustomResourceDefinition, with what discovery says of it.

use std::sync::Arc;

/// The verbs of a resource that supports everything.
pub const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// One served resource (e.g. `apps/v1` `deployments`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group, `""` for the core group.
    pub group: String,
    /// Version, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
    /// Plural resource name used in URLs, e.g. `deployments`.
    pub plural: String,
    /// Singular name, e.g. `deployment`.
    pub singular: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Short names, e.g. `deploy`.
    pub short_names: Vec<String>,
    /// Categories, e.g. `all`.
    pub categories: Vec<String>,
    /// Subresources served, e.g. `status`, `scale`.
    pub subresources: Vec<String>,
    /// Whether the resource comes from a CustomResourceDefinition.
    pub custom: bool,
}

impl ResourceInfo {
    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` or `deployments.apps`: how messages name the resource.
    pub fn qualified_plural(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Whether the subresource is served.
    pub fn has_subresource(&self, name: &str) -> bool {
        self.subresources.iter().any(|s| s == name)
    }
}

struct BuiltIn {
    /// `v1` or `group/version`.
    api_version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    subresources: &'static [&'static str],
}

const fn builtin(
    api_version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    subresources: &'static [&'static str],
) -> BuiltIn {
    BuiltIn {
        api_version,
        kind,
        plural,
        namespaced,
        short_names,
        categories,
        subresources,
    }
}

const ALL: &[&str] = &["all"];
const NONE: &[&str] = &[];
const STATUS: &[&str] = &["status"];
const STATUS_SCALE: &[&str] = &["status", "scale"];

const BUILT_INS: &[BuiltIn] = &[
    builtin(
        "v1",
        "Namespace",
        "namespaces",
        false,
        &["ns"],
        NONE,
        &["status", "finalize"],
    ),
    builtin("v1", "Node", "nodes", false, &["no"], NONE, STATUS),
    builtin(
        "v1",
        "Pod",
        "pods",
        true,
        &["po"],
        ALL,
        &[
            "status",
            "binding",
            "eviction",
            "log",
            "exec",
            "attach",
            "portforward",
        ],
    ),
    builtin("v1", "Event", "events", true, &["ev"], NONE, NONE),
    builtin("v1", "ConfigMap", "configmaps", true, &["cm"], NONE, NONE),
    builtin("v1", "Secret", "secrets", true, NONE, NONE, NONE),
    builtin("v1", "Service", "services", true, &["svc"], ALL, STATUS),
    builtin(
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        true,
        &["sa"],
        NONE,
        NONE,
    ),
    builtin("v1", "Endpoints", "endpoints", true, &["ep"], NONE, NONE),
    builtin(
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        true,
        &["pvc"],
        NONE,
        STATUS,
    ),
    builtin(
        "v1",
        "PersistentVolume",
        "persistentvolumes",
        false,
        &["pv"],
        NONE,
        STATUS,
    ),
    builtin(
        "v1",
        "ResourceQuota",
        "resourcequotas",
        true,
        &["quota"],
        NONE,
        STATUS,
    ),
    builtin(
        "v1",
        "LimitRange",
        "limitranges",
        true,
        &["limits"],
        NONE,
        NONE,
    ),
    builtin(
        "apps/v1",
        "Deployment",
        "deployments",
        true,
        &["deploy"],
        ALL,
        STATUS_SCALE,
    ),
    builtin(
        "apps/v1",
        "ReplicaSet",
        "replicasets",
        true,
        &["rs"],
        ALL,
        STATUS_SCALE,
    ),
    builtin(
        "apps/v1",
        "StatefulSet",
        "statefulsets",
        true,
        &["sts"],
        ALL,
        STATUS_SCALE,
    ),
    builtin(
        "apps/v1",
        "DaemonSet",
        "daemonsets",
        true,
        &["ds"],
        ALL,
        STATUS,
    ),
    builtin(
        "apps/v1",
        "ControllerRevision",
        "controllerrevisions",
        true,
        NONE,
        NONE,
        NONE,
    ),
    builtin("batch/v1", "Job", "jobs", true, NONE, ALL, STATUS),
    builtin(
        "batch/v1",
        "CronJob",
        "cronjobs",
        true,
        &["cj"],
        ALL,
        STATUS,
    ),
    builtin(
        "policy/v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
        &["pdb"],
        NONE,
        STATUS,
    ),
    builtin(
        "scheduling.k8s.io/v1",
        "PriorityClass",
        "priorityclasses",
        false,
        &["pc"],
        NONE,
        NONE,
    ),
    builtin(
        "coordination.k8s.io/v1",
        "Lease",
        "leases",
        true,
        NONE,
        NONE,
        NONE,
    ),
    builtin(
        "events.k8s.io/v1",
        "Event",
        "events",
        true,
        &["ev"],
        NONE,
        NONE,
    ),
    builtin(
        "networking.k8s.io/v1",
        "Ingress",
        "ingresses",
        true,
        &["ing"],
        NONE,
        STATUS,
    ),
    builtin(
        "rbac.authorization.k8s.io/v1",
        "Role",
        "roles",
        true,
        NONE,
        NONE,
        NONE,
    ),
    builtin(
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        "rolebindings",
        true,
        NONE,
        NONE,
        NONE,
    ),
    builtin(
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        "clusterroles",
        false,
        NONE,
        NONE,
        NONE,
    ),
    builtin(
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
        NONE,
        NONE,
        NONE,
    ),
    builtin(
        "storage.k8s.io/v1",
        "StorageClass",
        "storageclasses",
        false,
        &["sc"],
        NONE,
        NONE,
    ),
    builtin(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
        &["crd", "crds"],
        NONE,
        STATUS,
    ),
    builtin(
        "authentication.k8s.io/v1",
        "SelfSubjectReview",
        "selfsubjectreviews",
        false,
        NONE,
        NONE,
        NONE,
    ),
    builtin(
        "authentication.k8s.io/v1",
        "TokenReview",
        "tokenreviews",
        false,
        NONE,
        NONE,
        NONE,
    ),
    builtin(
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        false,
        NONE,
        NONE,
        NONE,
    ),
    builtin(
        "authorization.k8s.io/v1",
        "SelfSubjectRulesReview",
        "selfsubjectrulesreviews",
        false,
        NONE,
        NONE,
        NONE,
    ),
    builtin(
        "authorization.k8s.io/v1",
        "SubjectAccessReview",
        "subjectaccessreviews",
        false,
        NONE,
        NONE,
        NONE,
    ),
    builtin(
        "authorization.k8s.io/v1",
        "LocalSubjectAccessReview",
        "localsubjectaccessreviews",
        true,
        NONE,
        NONE,
        NONE,
    ),
];

/// Whether a resource is a review: created to get an answer, never stored
/// (authentication and authorization reviews).
pub fn is_review(resource: &ResourceInfo) -> bool {
    matches!(
        resource.group.as_str(),
        "authentication.k8s.io" | "authorization.k8s.io"
    )
}

/// The verbs a resource supports.
pub fn verbs(resource: &ResourceInfo) -> &'static [&'static str] {
    if is_review(resource) {
        &["create"]
    } else {
        ALL_VERBS
    }
}

/// Every built-in resource, in discovery order.
pub fn built_in_resources() -> Vec<Arc<ResourceInfo>> {
    BUILT_INS
        .iter()
        .map(|b| {
            let (group, version) = b
                .api_version
                .rsplit_once('/')
                .unwrap_or(("", b.api_version));
            Arc::new(ResourceInfo {
                group: group.to_string(),
                version: version.to_string(),
                kind: b.kind.to_string(),
                plural: b.plural.to_string(),
                singular: b.kind.to_lowercase(),
                namespaced: b.namespaced,
                short_names: b.short_names.iter().map(|s| s.to_string()).collect(),
                categories: b.categories.iter().map(|s| s.to_string()).collect(),
                subresources: b.subresources.iter().map(|s| s.to_string()).collect(),
                custom: false,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_plurals_are_unique_per_group_version() {
        let resources = built_in_resources();
        for (i, a) in resources.iter().enumerate() {
            for b in &resources[i + 1..] {
                assert!(
                    !(a.group == b.group && a.version == b.version && a.plural == b.plural),
                    "{} served twice",
                    a.qualified_plural()
                );
            }
        }
    }

    #[test]
    fn api_version_of_core_group_has_no_group() {
        let pods = built_in_resources()
            .into_iter()
            .find(|r| r.plural == "pods")
            .expect("pods are built in");
        assert_eq!(pods.api_version(), "v1");
        assert_eq!(pods.qualified_plural(), "pods");
    }
}
