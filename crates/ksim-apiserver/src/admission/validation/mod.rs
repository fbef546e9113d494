//! Validation: the checks kube-apiserver makes on create and update, per
//! kind, turned into a 422 `Invalid` status with kube's causes.

mod container;
mod core;
mod metadata;
mod pod;
mod selector;
mod volumes;
mod workloads;

use serde_json::Value;

use crate::ApiError;
use crate::admission::custom;
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

/// Custom resources are checked against their CRD schema by
/// [`crate::admission::validate_custom_resource`]; CRDs get theirs here.
fn validate_crd_create(resource: &ResourceInfo, object: &Value, errors: &mut FieldErrors) {
    if custom::is_crd(resource) {
        custom::validate_crd(object, errors);
    }
}

fn result(resource: &ResourceInfo, object: &Value, errors: FieldErrors) -> Result<(), ApiError> {
    if errors.is_empty() {
        return Ok(());
    }
    Err(invalid_error(resource, object, errors))
}

/// The 422 Invalid status of field errors of `object` (causes deduplicated).
pub(crate) fn invalid_error(
    resource: &ResourceInfo,
    object: &Value,
    errors: FieldErrors,
) -> ApiError {
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
    ApiError::invalid(&resource.group, &resource.kind, name, causes)
}

/// Validation of a new object: 422 Invalid with causes, in kube-apiserver's wording.
/// Custom resources get the metadata checks only.
pub fn validate_create(resource: &ResourceInfo, object: &Value) -> Result<(), ApiError> {
    let mut errors = FieldErrors::new();
    metadata::validate_object_meta(object, name_rule(resource), &mut errors);
    if !resource.custom {
        validate_kind(resource, object, &mut errors);
        validate_crd_create(resource, object, &mut errors);
        if resource.group.is_empty() && resource.kind == "Pod" {
            pod::validate_pod_create(object, &mut errors);
        }
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
            _ if custom::is_crd(resource) => custom::validate_crd_update(old, new, &mut errors),
            _ => {}
        }
    }
    result(resource, new, errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::default_object;
    use crate::resources::built_in_resources;
    use serde_json::json;

    fn built_in(kind: &str) -> ResourceInfo {
        built_in_resources()
            .into_iter()
            .find(|r| r.kind == kind)
            .map(|r| (*r).clone())
            .expect("a built-in kind")
    }

    fn create(kind: &str, mut object: Value) -> Result<(), ApiError> {
        let resource = built_in(kind);
        default_object(&resource, &mut object);
        validate_create(&resource, &object)
    }

    #[test]
    fn defaulted_objects_pass_validation() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}]}});
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
        let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi", "uid": "3f6e"},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "perl"}]}}}});
        let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}});
        for (kind, object) in [
            ("Pod", pod),
            ("Deployment", deployment),
            ("Job", job),
            ("Service", service),
        ] {
            assert!(create(kind, object).is_ok(), "{kind}");
        }
    }

    #[test]
    fn invalid_messages_are_kubes_word_for_word() {
        let cases = [
            (
                "Pod",
                json!({"metadata": {"name": "p"}, "spec": {"containers": []}}),
                "Pod \"p\" is invalid: spec.containers: Required value",
            ),
            (
                "Pod",
                json!({"metadata": {"name": "p"}, "spec": {"restartPolicy": "Sometimes", "containers": [{"name": "c"}]}}),
                "Pod \"p\" is invalid: [spec.containers[0].image: Required value, spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"]",
            ),
            (
                "Deployment",
                json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "x"}},
                "template": {"metadata": {"labels": {"app": "y"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
                "Deployment.apps \"web\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"y\"}: `selector` does not match template `labels`",
            ),
            (
                "Job",
                json!({"metadata": {"name": "pi", "uid": "u"}, "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
                "Job.batch \"pi\" is invalid: spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\"",
            ),
            (
                "Namespace",
                json!({"metadata": {"name": "Team"}}),
                "Namespace \"Team\" is invalid: metadata.name: Invalid value: \"Team\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            ),
        ];
        for (kind, object, want) in cases {
            let error = create(kind, object).expect_err(kind);
            assert_eq!(error.code, 422);
            assert_eq!(error.reason, "Invalid");
            assert_eq!(error.message, want);
        }
    }

    #[test]
    fn causes_carry_reason_field_and_body() {
        let error = create("ConfigMap", json!({"metadata": {"name": "Foo_Bar"}}))
            .expect_err("invalid name");
        let details = error.details.expect("details");
        assert_eq!(details["name"], "Foo_Bar");
        assert_eq!(details["kind"], "ConfigMap");
        assert_eq!(details["causes"][0]["reason"], "FieldValueInvalid");
        assert_eq!(details["causes"][0]["field"], "metadata.name");
        assert!(
            details["causes"][0]["message"]
                .as_str()
                .expect("message")
                .starts_with("Invalid value: \"Foo_Bar\": a lowercase RFC 1123 subdomain")
        );
    }

    #[test]
    fn updates_check_immutable_fields() {
        let resource = built_in("Pod");
        let mut old = json!({"metadata": {"name": "p", "uid": "1"}, "spec": {"containers": [{"name": "c", "image": "a"}]}});
        default_object(&resource, &mut old);
        let mut new = old.clone();
        new["spec"]["containers"][0]["image"] = json!("b");
        assert!(validate_update(&resource, &old, &new).is_ok());
        new["spec"]["restartPolicy"] = json!("Never");
        let error = validate_update(&resource, &old, &new).expect_err("restartPolicy is immutable");
        assert!(error.message.starts_with("Pod \"p\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"), "{}", error.message);

        let config_map = built_in("ConfigMap");
        let old = json!({"metadata": {"name": "c"}, "immutable": true, "data": {"a": "1"}});
        let new = json!({"metadata": {"name": "c"}, "immutable": true, "data": {"a": "2"}});
        let error = validate_update(&config_map, &old, &new).expect_err("immutable data");
        assert_eq!(
            error.message,
            "ConfigMap \"c\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
        );
    }

    #[test]
    fn crds_are_validated_on_create_and_update() {
        let crd = built_in("CustomResourceDefinition");
        let object = json!({"metadata": {"name": "nos.example.com"}, "spec": {"group": "example.com",
            "names": {"kind": "No", "plural": "nos"}, "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true}]}});
        let error = validate_create(&crd, &object).expect_err("no schema");
        assert_eq!(
            error.message,
            "CustomResourceDefinition.apiextensions.k8s.io \"nos.example.com\" is invalid: spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"
        );
        let error = validate_update(&crd, &object, &object).expect_err("no schema");
        assert_eq!(error.code, 422);
    }

    #[test]
    fn custom_resources_get_metadata_checks_only() {
        let mut resource = built_in("Deployment");
        resource.custom = true;
        assert!(
            validate_create(&resource, &json!({"metadata": {"name": "x"}, "spec": {}})).is_ok()
        );
        assert!(validate_create(&resource, &json!({"metadata": {}})).is_err());
    }
}
