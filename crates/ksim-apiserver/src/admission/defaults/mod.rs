//! Defaulting: the values kube-apiserver fills in on create and update, per
//! group (`pod.rs` for pod specs, `workloads.rs` for apps and batch,
//! `core.rs` for the other core kinds).

mod core;
mod pod;
mod workloads;

use serde_json::Value;

use crate::resources::ResourceInfo;

/// Fills defaults exactly as kube-apiserver v1.33 does for the built-in kinds
/// (no-op for custom resources).
pub fn default_object(resource: &ResourceInfo, object: &mut Value) {
    if resource.custom || !object.is_object() {
        return;
    }
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Pod") => pod::default_pod(object),
        ("", "PodTemplate") => workloads::default_template_at(object, &["template"]),
        ("", "ReplicationController") => {
            workloads::default_template_at(object, &["spec", "template"])
        }
        ("", "Service") => core::default_service(object),
        ("", "Namespace") => core::default_namespace(object),
        ("", "Secret") => core::default_secret(object),
        ("", "Endpoints") => core::default_endpoints(object),
        ("", "PersistentVolumeClaim") => core::default_persistent_volume_claim(object),
        ("", "Node") => core::default_node(object),
        ("apps", "Deployment") => workloads::default_deployment(object),
        ("apps", "ReplicaSet") => workloads::default_replica_set(object),
        ("apps", "StatefulSet") => workloads::default_stateful_set(object),
        ("apps", "DaemonSet") => workloads::default_daemon_set(object),
        ("batch", "Job") => workloads::default_job(object),
        ("batch", "CronJob") => workloads::default_cron_job(object),
        ("scheduling.k8s.io", "PriorityClass") => core::default_priority_class(object),
        _ => {}
    }
}
