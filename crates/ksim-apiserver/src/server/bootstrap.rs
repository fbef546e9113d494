//! The objects every cluster starts with: the four system namespaces, the
//! two system priority classes, the `kubernetes` service and ksim's own
//! CustomResourceDefinitions (`ksim_core::crds`).

use serde_json::{Value, json};

use crate::resources::ResourceInfo;

use super::State;
use super::handlers::create_cluster_object;

/// The namespaces kube-apiserver creates and never lets anyone delete.
pub(crate) const SYSTEM_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

pub(crate) fn create_initial_objects(state: &State) {
    let registry = state.registry();
    let find = |group: &str, plural: &str| -> Option<std::sync::Arc<ResourceInfo>> {
        registry
            .resources()
            .iter()
            .find(|r| r.group == group && r.plural == plural)
            .cloned()
    };
    let mut objects: Vec<(&str, &str, Value)> = SYSTEM_NAMESPACES
        .iter()
        .map(|name| {
            (
                "",
                "namespaces",
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
            )
        })
        .collect();
    for (name, value, description) in [
        (
            "system-node-critical",
            2_000_001_000,
            "Used for system critical pods that must not be moved from their current node.",
        ),
        (
            "system-cluster-critical",
            2_000_000_000,
            "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
        ),
    ] {
        objects.push((
            "scheduling.k8s.io",
            "priorityclasses",
            json!({
                "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
                "description": description,
            }),
        ));
    }
    objects.push((
        "",
        "services",
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"],
                     "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]},
        }),
    ));
    for crd in ksim_core::crds::builtin_crds() {
        objects.push(("apiextensions.k8s.io", "customresourcedefinitions", crd));
    }
    for (group, plural, object) in objects {
        let Some(resource) = find(group, plural) else {
            continue;
        };
        if let Err(error) = create_cluster_object(state, &resource, object) {
            tracing::error!(%error, plural, "cannot create an initial object");
        }
    }
}
