//! Validation: the checks kube-apiserver makes on create and update, per
//! kind, turned into a 422 `Invalid` status with kube's causes.

mod core;
mod metadata;
mod pod;
mod selector;
mod workloads;

use serde_json::Value;

use crate::ApiError;
use crate::admission::field::FieldErrors;
use crate::resources::ResourceInfo;
use metadata::NameRule;

fn name_rule(resource: &ResourceInfo) -> NameRule {
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Namespace") => NameRule::Label,
        ("", "Service") => NameRule::Dns1035Label,
        _ => NameRule::Subdomain,
    }
}

/// The kind's own checks of a (new or updated) object.
fn validate_kind(resource: &ResourceInfo, object: &Value, errors: &mut FieldErrors) {
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Pod") => {
            let null = Value::Null;
            pod::validate_pod_spec(object.get("spec").unwrap_or(&null), "spec", errors);
        }
        ("", "Service") => core::validate_service(object, errors),
        ("", "ConfigMap") => core::validate_data_keys(object, &["data", "binaryData"], errors),
        ("", "Secret") => core::validate_data_keys(object, &["data"], errors),
        ("apps", "Deployment") => workloads::validate_deployment(object, errors),
        ("apps", "ReplicaSet") => workloads::validate_replica_set(object, errors),
        ("apps", "StatefulSet") => workloads::validate_stateful_set(object, errors),
        ("apps", "DaemonSet") => workloads::validate_daemon_set(object, errors),
        ("batch", "Job") => workloads::validate_job(object, errors),
        ("batch", "CronJob") => workloads::validate_cron_job(object, errors),
        ("policy", "PodDisruptionBudget") => core::validate_pod_disruption_budget(object, errors),
        ("scheduling.k8s.io", "PriorityClass") => core::validate_priority_class(object, errors),
        _ => {}
    }
}

fn result(resource: &ResourceInfo, object: &Value, errors: FieldErrors) -> Result<(), ApiError> {
    if errors.is_empty() {
        return Ok(());
    }
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut causes = Vec::with_capacity(errors.len());
    for error in errors {
        let cause = error.into_cause();
        if !causes.contains(&cause) {
            causes.push(cause);
        }
    }
    Err(ApiError::invalid(
        &resource.group,
        &resource.kind,
        name,
        causes,
    ))
}

/// Validation of a new object: 422 Invalid with causes, in kube-apiserver's wording.
/// Custom resources get the metadata checks only.
pub fn validate_create(resource: &ResourceInfo, object: &Value) -> Result<(), ApiError> {
    let mut errors = FieldErrors::new();
    metadata::validate_object_meta(object, name_rule(resource), &mut errors);
    if !resource.custom {
        validate_kind(resource, object, &mut errors);
    }
    result(resource, object, errors)
}

/// Validation of an update (main resource; `old` is the stored object, `new`
/// after defaulting): everything [`validate_create`] checks plus immutable fields.
pub fn validate_update(resource: &ResourceInfo, old: &Value, new: &Value) -> Result<(), ApiError> {
    let mut errors = FieldErrors::new();
    metadata::validate_object_meta_update(old, new, &mut errors);
    if !resource.custom {
        validate_kind(resource, new, &mut errors);
        match (resource.group.as_str(), resource.kind.as_str()) {
            ("", "Pod") => pod::validate_pod_update(old, new, &mut errors),
            ("", "Service") => core::validate_service_update(old, new, &mut errors),
            ("", "ConfigMap") => {
                core::validate_immutable_data_update(old, new, &["data", "binaryData"], &mut errors)
            }
            ("", "Secret") => core::validate_secret_update(old, new, &mut errors),
            ("apps", kind) | ("batch", kind) => {
                workloads::validate_workload_update(kind, old, new, &mut errors)
            }
            ("scheduling.k8s.io", "PriorityClass") => {
                core::validate_priority_class_update(old, new, &mut errors)
            }
            _ => {}
        }
    }
    result(resource, new, errors)
}
