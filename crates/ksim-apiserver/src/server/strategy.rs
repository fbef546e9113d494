//! Per-kind rules of the REST storage, as kube-apiserver's registry
//! strategies have them: what the server sets on create, keeps on update,
//! takes from a status update; which fields selectors may name; which kinds
//! count generations. Pure functions over JSON objects.

use serde_json::{Map, Value, json};

use crate::resources::ResourceInfo;

/// Kinds whose `metadata.generation` counts spec changes.
fn has_generation(resource: &ResourceInfo) -> bool {
    resource.custom
        || matches!(
            (resource.group.as_str(), resource.kind.as_str()),
            (
                "apps",
                "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet"
            ) | ("batch", "Job" | "CronJob")
                | ("policy", "PodDisruptionBudget")
                | ("apiextensions.k8s.io", "CustomResourceDefinition")
                | ("networking.k8s.io", "Ingress")
        )
}

/// Whether the main resource ignores `status` (it has a status subresource).
fn status_is_separate(resource: &ResourceInfo) -> bool {
    resource.has_subresource("status")
}

fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.get("metadata").is_some_and(Value::is_object) {
        object["metadata"] = json!({});
    }
    object["metadata"]
        .as_object_mut()
        .expect("metadata was just made an object")
}

/// Sets what the server owns on a new object: uid, creationTimestamp,
/// generation; clears what a client may not set; resets status where the
/// kind has a status subresource.
pub(crate) fn prepare_for_create(
    resource: &ResourceInfo,
    object: &mut Value,
    uid: &str,
    now: &str,
) {
    let generation = has_generation(resource);
    let metadata = metadata_mut(object);
    metadata.insert("uid".into(), json!(uid));
    metadata.insert("creationTimestamp".into(), json!(now));
    for field in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        metadata.remove(field);
    }
    if generation {
        metadata.insert("generation".into(), json!(1));
    } else {
        metadata.remove("generation");
    }
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Pod") => {
            // The QoS class is set by `set_pod_qos_class` once defaulting
            // has filled requests in from limits.
            object["status"] = json!({"phase": "Pending"});
            apply_scheduling_gated_condition(object);
        }
        ("", "Namespace") => {
            object["status"] = json!({"phase": "Active"});
        }
        ("", "Secret") => merge_string_data(object),
        // "Nodes allow *all* fields, including status, to be set on create."
        ("", "Node") => {}
        _ if status_is_separate(resource) => {
            if let Some(map) = object.as_object_mut() {
                map.remove("status");
            }
        }
        _ => {}
    }
    drop_empty_metadata(object);
}

/// A Secret's `stringData` is a write-only convenience: its values are
/// merged into `data` (base64), overwriting keys there, and it is never
/// stored (what kube-apiserver's conversion of a v1 Secret does).
fn merge_string_data(secret: &mut Value) {
    let Some(Value::Object(strings)) = secret
        .as_object_mut()
        .and_then(|map| map.remove("stringData"))
    else {
        return;
    };
    if strings.is_empty() {
        return;
    }
    if !secret.get("data").is_some_and(Value::is_object) {
        secret["data"] = json!({});
    }
    for (key, value) in strings {
        let text = value.as_str().unwrap_or_default();
        secret["data"][key] = json!(super::handlers::base64_encode(text.as_bytes()));
    }
}

/// A new pod with scheduling gates is `PodScheduled=False` with reason
/// `SchedulingGated` (what kube-apiserver's pod strategy adds on create).
fn apply_scheduling_gated_condition(pod: &mut Value) {
    let gated = pod["spec"]["schedulingGates"]
        .as_array()
        .is_some_and(|gates| !gates.is_empty());
    if gated {
        pod["status"]["conditions"] = json!([{
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": null,
            "lastTransitionTime": null,
            "reason": "SchedulingGated",
            "message": "Scheduling is blocked due to non-empty scheduling gates",
        }]);
    }
}

/// ObjectMeta's lists and maps are `omitempty`: an emptied `labels`,
/// `annotations`, `finalizers` or `ownerReferences` is not stored.
pub(crate) fn drop_empty_metadata(object: &mut Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.retain(|key, value| {
            let omittable = matches!(
                key.as_str(),
                "labels" | "annotations" | "finalizers" | "ownerReferences" | "managedFields"
            );
            let empty = match value {
                Value::Null => true,
                Value::Object(map) => map.is_empty(),
                Value::Array(list) => list.is_empty(),
                _ => false,
            };
            !(omittable && empty)
        });
    }
}

/// Whether anything other than metadata and status differs.
fn spec_changed(old: &Value, new: &Value) -> bool {
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else {
        return old != new;
    };
    let significant =
        |key: &String| !matches!(key.as_str(), "metadata" | "status" | "apiVersion" | "kind");
    old.iter()
        .filter(|(k, _)| significant(k))
        .any(|(k, v)| new.get(k) != Some(v))
        || new
            .iter()
            .filter(|(k, _)| significant(k))
            .any(|(k, _)| !old.contains_key(k))
}

/// Keeps what a client may not change on update (uid, creationTimestamp,
/// deletion fields, generation), bumps generation on spec changes, and
/// keeps the stored status where the kind has a status subresource.
pub(crate) fn prepare_for_update(resource: &ResourceInfo, old: &Value, new: &mut Value) {
    if resource.group.is_empty() && resource.kind == "Secret" {
        merge_string_data(new);
    }
    let bump = has_generation(resource) && spec_changed(old, new);
    // Read in place: only the fields below are copied.
    let old_field = |field: &str| old.get("metadata").and_then(|m| m.get(field));
    let metadata = metadata_mut(new);
    for field in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match old_field(field) {
            Some(value) => {
                metadata.insert(field.into(), value.clone());
            }
            None => {
                metadata.remove(field);
            }
        }
    }
    if bump {
        let generation = old_field("generation").and_then(Value::as_i64).unwrap_or(0) + 1;
        metadata.insert("generation".into(), json!(generation));
    }
    drop_empty_metadata(new);
    if status_is_separate(resource)
        && let Some(map) = new.as_object_mut()
    {
        match old.get("status") {
            Some(status) => {
                map.insert("status".into(), status.clone());
            }
            None => {
                map.remove("status");
            }
        }
    }
}

/// A status update: the stored object with the new status (and the new
/// managedFields and resourceVersion); everything else is kept.
pub(crate) fn prepare_for_status_update(old: &Value, new: &Value) -> Value {
    // The stored object but its status (not copied only to be replaced).
    let mut result = match old.as_object() {
        Some(fields) => Value::Object(
            fields
                .iter()
                .filter(|(name, _)| name.as_str() != "status")
                .map(|(name, field)| (name.clone(), field.clone()))
                .collect(),
        ),
        None => old.clone(),
    };
    match new.get("status") {
        Some(status) => result["status"] = status.clone(),
        None => {
            if let Some(map) = result.as_object_mut() {
                map.remove("status");
            }
        }
    }
    let metadata = metadata_mut(&mut result);
    for field in ["resourceVersion", "managedFields"] {
        match new.get("metadata").and_then(|m| m.get(field)) {
            Some(value) => {
                metadata.insert(field.into(), value.clone());
            }
            None => {
                metadata.remove(field);
            }
        }
    }
    result
}

/// Sets a new pod's `status.qosClass` (upstream sets it in the pod
/// strategy's PrepareForCreate, on the defaulted pod: requests already
/// defaulted to limits). Runs after defaulting.
pub(crate) fn set_pod_qos_class(resource: &ResourceInfo, object: &mut Value) {
    if resource.group.is_empty() && resource.kind == "Pod" {
        let qos = ksim_core::qos::compute_pod_qos_json(object).as_str();
        object["status"]["qosClass"] = json!(qos);
    }
}

/// The fields a field selector may name for a kind, besides
/// `metadata.name` and `metadata.namespace`.
fn selectable_fields(resource: &ResourceInfo) -> &'static [&'static str] {
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Pod") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "Node") => &["spec.unschedulable"],
        ("", "Namespace") => &["status.phase"],
        ("", "Secret") => &["type"],
        ("", "Event") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("events.k8s.io", "Event") => &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "reason",
            "type",
            "reportingController",
        ],
        ("apps", "ReplicaSet") => &["status.replicas"],
        ("batch", "Job") => &["status.successful"],
        _ => &[],
    }
}

/// Checks that a field selector only names supported fields (400 otherwise).
pub(crate) fn check_field_selector(
    resource: &ResourceInfo,
    selector: &ksim_core::selector::FieldSelector,
) -> Result<(), crate::ApiError> {
    for requirement in &selector.requirements {
        let field = requirement.field.as_str();
        let supported = matches!(field, "metadata.name" | "metadata.namespace")
            || selectable_fields(resource).contains(&field);
        if !supported {
            return Err(crate::ApiError::bad_request(format!(
                "field label not supported: {field}"
            )));
        }
    }
    Ok(())
}

/// The value of a selectable field (`spec.nodeName`), as a string.
pub(crate) fn field_value(object: &Value, field: &str) -> Option<String> {
    if field == "source" {
        return object["source"]["component"].as_str().map(str::to_string);
    }
    let mut value = object;
    for part in field.split('.') {
        value = value.get(part)?;
    }
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Null => Some(String::new()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::built_in_resources;

    fn resource(plural: &str) -> std::sync::Arc<ResourceInfo> {
        built_in_resources()
            .into_iter()
            .find(|r| r.plural == plural)
            .expect("built in")
    }

    #[test]
    fn generation_bumps_on_spec_change_only() {
        let deployments = resource("deployments");
        let mut old = json!({"metadata": {"name": "d"}, "spec": {"replicas": 1}});
        prepare_for_create(&deployments, &mut old, "u1", "2026-01-01T00:00:00Z");
        assert_eq!(old["metadata"]["generation"], 1);

        let mut relabelled = old.clone();
        relabelled["metadata"]["labels"] = json!({"a": "b"});
        prepare_for_update(&deployments, &old, &mut relabelled);
        assert_eq!(relabelled["metadata"]["generation"], 1);

        let mut scaled = old.clone();
        scaled["spec"]["replicas"] = json!(3);
        scaled["metadata"]["uid"] = json!("forged");
        scaled["status"] = json!({"replicas": 9});
        prepare_for_update(&deployments, &old, &mut scaled);
        assert_eq!(scaled["metadata"]["generation"], 2);
        assert_eq!(scaled["metadata"]["uid"], "u1");
        assert!(
            scaled.get("status").is_none(),
            "main resource ignores status"
        );
    }

    #[test]
    fn emptied_labels_and_finalizers_are_not_stored() {
        let config_maps = resource("configmaps");
        let old = json!({"metadata": {"name": "c", "labels": {"a": "b"}}});
        let mut new =
            json!({"metadata": {"name": "c", "labels": {}, "annotations": {}, "finalizers": []}});
        prepare_for_update(&config_maps, &old, &mut new);
        assert_eq!(new["metadata"], json!({"name": "c"}));
    }

    #[test]
    fn nodes_keep_the_status_they_are_created_with() {
        let nodes = resource("nodes");
        let mut node = json!({"metadata": {"name": "n"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        prepare_for_create(&nodes, &mut node, "u", "2026-01-01T00:00:00Z");
        assert_eq!(node["status"]["conditions"][0]["type"], "Ready");
    }

    #[test]
    fn status_update_ignores_spec_and_labels() {
        let old = json!({"metadata": {"name": "p", "labels": {"a": "1"}}, "spec": {"x": 1}, "status": {"phase": "Pending"}});
        let new = json!({"metadata": {"name": "p", "labels": {"a": "2"}, "resourceVersion": "5"}, "spec": {"x": 2}, "status": {"phase": "Running"}});
        let result = prepare_for_status_update(&old, &new);
        assert_eq!(result["spec"]["x"], 1);
        assert_eq!(result["metadata"]["labels"]["a"], "1");
        assert_eq!(result["status"]["phase"], "Running");
        assert_eq!(result["metadata"]["resourceVersion"], "5");
    }

    #[test]
    fn new_pods_are_pending_with_a_qos_class() {
        let pods = resource("pods");
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}
        ]}, "status": {"phase": "Running"}});
        prepare_for_create(&pods, &mut pod, "u", "2026-01-01T00:00:00Z");
        assert_eq!(pod["status"], json!({"phase": "Pending"}));
        // Defaulting fills the requests in from the limits first.
        crate::admission::default_object(&pods, &mut pod);
        set_pod_qos_class(&pods, &mut pod);
        assert_eq!(
            pod["status"],
            json!({"phase": "Pending", "qosClass": "Guaranteed"})
        );
        let mut gated = json!({"metadata": {"name": "g"}, "spec": {"schedulingGates": [{"name": "example.com/quota"}],
            "containers": [{"name": "c"}]}});
        prepare_for_create(&pods, &mut gated, "u", "2026-01-01T00:00:00Z");
        assert_eq!(
            gated["status"]["conditions"][0],
            json!({"type": "PodScheduled", "status": "False", "lastProbeTime": null, "lastTransitionTime": null,
                "reason": "SchedulingGated", "message": "Scheduling is blocked due to non-empty scheduling gates"})
        );
        let mut storage_only = json!({"spec": {"containers": [{"name": "c", "resources":
            {"requests": {"ephemeral-storage": "1Gi"}}}]}});
        set_pod_qos_class(&pods, &mut storage_only);
        assert_eq!(storage_only["status"]["qosClass"], "BestEffort");
        let mut burstable = json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}});
        set_pod_qos_class(&pods, &mut burstable);
        assert_eq!(burstable["status"]["qosClass"], "Burstable");
    }

    #[test]
    fn field_selectors_name_supported_fields_only() {
        let pods = resource("pods");
        let ok = ksim_core::selector::FieldSelector::parse("spec.nodeName=n1").expect("parse");
        assert!(check_field_selector(&pods, &ok).is_ok());
        let bad = ksim_core::selector::FieldSelector::parse("spec.bogus=1").expect("parse");
        let error = check_field_selector(&pods, &bad).expect_err("unsupported");
        assert_eq!(error.message, "field label not supported: spec.bogus");
        let pod = json!({"spec": {"nodeName": "n1", "hostNetwork": true}});
        assert_eq!(field_value(&pod, "spec.nodeName").as_deref(), Some("n1"));
        assert_eq!(
            field_value(&pod, "spec.hostNetwork").as_deref(),
            Some("true")
        );
        assert_eq!(field_value(&pod, "status.phase"), None);
    }
}
