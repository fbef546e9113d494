//! Services, ConfigMaps and Secrets, PodDisruptionBudgets and
//! PriorityClasses: their create checks and update rules.

use std::collections::HashSet;

use serde_json::Value;

use super::metadata::validate_labels;
use super::pod::validate_protocol;
use super::selector::validate_label_selector;
use super::workloads::validate_int_or_percent;
use crate::admission::field::{BadValue, FieldError, FieldErrors, child, go_quote, index, key};
use crate::admission::json::{array_of, str_of};
use crate::admission::names::{is_dns1123_label, is_valid_port_name, is_valid_port_num};

const IMMUTABLE_WHEN_SET: &str = "field is immutable when `immutable` is set";
/// `scheduling.HighestUserDefinablePriority`.
const HIGHEST_USER_DEFINABLE_PRIORITY: i64 = 1_000_000_000;

pub(crate) fn validate_service(object: &Value, errors: &mut FieldErrors) {
    static NULL: Value = Value::Null;
    let spec = object.get("spec").unwrap_or(&NULL);
    let service_type = str_of(spec, "type");
    let headless = str_of(spec, "clusterIP") == "None";
    let ports = array_of(spec, "ports");
    if ports.is_empty() && !headless && service_type != "ExternalName" {
        errors.push(FieldError::required("spec.ports", ""));
    }
    let require_name = ports.len() > 1;
    let mut names = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let port_path = index("spec.ports", i);
        let name = str_of(port, "name");
        let name_path = child(&port_path, "name");
        if require_name && name.is_empty() {
            errors.push(FieldError::required(&name_path, ""));
        } else if !name.is_empty() {
            for msg in is_dns1123_label(name) {
                errors.push(FieldError::invalid(&name_path, BadValue::str(name), &msg));
            }
            if !names.insert(name.to_string()) {
                errors.push(FieldError::duplicate(&name_path, BadValue::str(name)));
            }
        }
        let number = port.get("port").and_then(Value::as_i64).unwrap_or(0);
        for msg in is_valid_port_num(number) {
            errors.push(FieldError::invalid(
                &child(&port_path, "port"),
                BadValue::Int(number),
                &msg,
            ));
        }
        validate_protocol(port, &port_path, errors);
        let target_path = child(&port_path, "targetPort");
        match port.get("targetPort") {
            Some(Value::Number(n)) => {
                let n = n.as_i64().unwrap_or(0);
                for msg in is_valid_port_num(n) {
                    errors.push(FieldError::invalid(&target_path, BadValue::Int(n), &msg));
                }
            }
            Some(Value::String(s)) => {
                for msg in is_valid_port_name(s) {
                    errors.push(FieldError::invalid(&target_path, BadValue::str(s), &msg));
                }
            }
            _ => {}
        }
    }
    if !matches!(
        service_type,
        "ClusterIP" | "ExternalName" | "LoadBalancer" | "NodePort"
    ) {
        let field = "spec.type";
        if service_type.is_empty() {
            errors.push(FieldError::required(field, ""));
        } else {
            errors.push(FieldError::not_supported(
                field,
                BadValue::str(service_type),
                &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
            ));
        }
    }
    let affinity = str_of(spec, "sessionAffinity");
    if !matches!(affinity, "ClientIP" | "None") {
        let field = "spec.sessionAffinity";
        if affinity.is_empty() {
            errors.push(FieldError::required(field, ""));
        } else {
            errors.push(FieldError::not_supported(
                field,
                BadValue::str(affinity),
                &["ClientIP", "None"],
            ));
        }
    }
    if service_type != "ExternalName" {
        validate_labels(spec.get("selector"), "spec.selector", errors);
    }
}

pub(crate) fn validate_service_update(old: &Value, new: &Value, errors: &mut FieldErrors) {
    let before = old
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let after = new
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let to_external_name =
        new.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName");
    if !before.is_empty() && before != after && !to_external_name {
        let ips: Vec<String> = match new.pointer("/spec/clusterIPs").and_then(Value::as_array) {
            Some(list) => list
                .iter()
                .map(|ip| go_quote(ip.as_str().unwrap_or_default()))
                .collect(),
            None => vec![go_quote(after)],
        };
        errors.push(FieldError::invalid(
            "spec.clusterIPs[0]",
            BadValue::Raw(format!("[]string{{{}}}", ips.join(", "))),
            "may not change once set",
        ));
    }
}

/// `IsConfigMapKey`.
fn config_map_key_errors(key_name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if key_name.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    let valid = !key_name.is_empty()
        && key_name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    if !valid {
        errs.push("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')".to_string());
    }
    if key_name == "." {
        errs.push("must not be '.'".to_string());
    } else if key_name == ".." {
        errs.push("must not be '..'".to_string());
    } else if key_name.starts_with("..") {
        errs.push("must not start with '..'".to_string());
    }
    errs
}

/// ConfigMap `data`/`binaryData` and Secret `data` keys.
pub(crate) fn validate_data_keys(object: &Value, fields: &[&str], errors: &mut FieldErrors) {
    for field in fields {
        let mut keys: Vec<&String> = object
            .get(*field)
            .and_then(Value::as_object)
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        keys.sort();
        for key_name in keys {
            for msg in config_map_key_errors(key_name) {
                errors.push(FieldError::invalid(
                    &key(field, key_name),
                    BadValue::str(key_name),
                    &msg,
                ));
            }
        }
    }
}

/// ConfigMaps and Secrets marked `immutable: true` keep their data (and stay immutable).
pub(crate) fn validate_immutable_data_update(
    old: &Value,
    new: &Value,
    fields: &[&str],
    errors: &mut FieldErrors,
) {
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return;
    }
    if new.get("immutable").and_then(Value::as_bool) != Some(true) {
        errors.push(FieldError::forbidden("immutable", IMMUTABLE_WHEN_SET));
    }
    for field in fields {
        let empty = |v: Option<&Value>| v.and_then(Value::as_object).is_none_or(|m| m.is_empty());
        let (before, after) = (old.get(*field), new.get(*field));
        let same = before == after || (empty(before) && empty(after));
        if !same {
            errors.push(FieldError::forbidden(field, IMMUTABLE_WHEN_SET));
        }
    }
}

pub(crate) fn validate_secret_update(old: &Value, new: &Value, errors: &mut FieldErrors) {
    let (before, after) = (str_of(old, "type"), str_of(new, "type"));
    if before != after {
        errors.push(FieldError::invalid(
            "type",
            BadValue::str(after),
            "field is immutable",
        ));
    }
    validate_immutable_data_update(old, new, &["data"], errors);
}

pub(crate) fn validate_pod_disruption_budget(object: &Value, errors: &mut FieldErrors) {
    static NULL: Value = Value::Null;
    let spec = object.get("spec").unwrap_or(&NULL);
    let min_available = spec.get("minAvailable").filter(|v| !v.is_null());
    let max_unavailable = spec.get("maxUnavailable").filter(|v| !v.is_null());
    if min_available.is_some() && max_unavailable.is_some() {
        errors.push(FieldError::invalid(
            "spec",
            BadValue::Raw("policy.PodDisruptionBudgetSpec{...}".into()),
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    if let Some(value) = min_available {
        validate_int_or_percent(value, "spec.minAvailable", errors);
    }
    if let Some(value) = max_unavailable {
        validate_int_or_percent(value, "spec.maxUnavailable", errors);
    }
    validate_label_selector(spec.get("selector"), "spec.selector", errors);
    let policy = str_of(spec, "unhealthyPodEvictionPolicy");
    if !policy.is_empty() && !matches!(policy, "AlwaysAllow" | "IfHealthyBudget") {
        errors.push(FieldError::not_supported(
            "spec.unhealthyPodEvictionPolicy",
            BadValue::str(policy),
            &["AlwaysAllow", "IfHealthyBudget"],
        ));
    }
}

/// `IsKnownSystemPriorityClass`: a `system-` class must be one of the two
/// built-in ones, with their value and not the global default.
fn known_system_priority_class(name: &str, value: i64, global_default: bool) -> Result<(), String> {
    let expected = match name {
        "system-node-critical" => 2_000_001_000,
        "system-cluster-critical" => 2_000_000_000,
        _ => return Err(format!("{name} is not a known system priority class")),
    };
    if value != expected {
        return Err(format!("value of {name} PriorityClass must be {expected}"));
    }
    if global_default {
        return Err(format!(
            "globalDefault of {name} PriorityClass must be false"
        ));
    }
    Ok(())
}

pub(crate) fn validate_priority_class(object: &Value, errors: &mut FieldErrors) {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let value = object.get("value").and_then(Value::as_i64).unwrap_or(0);
    if name.starts_with("system-") {
        let global_default = object.get("globalDefault").and_then(Value::as_bool) == Some(true);
        if let Err(why) = known_system_priority_class(name, value, global_default) {
            errors.push(FieldError::forbidden(
                "metadata.name",
                &format!(
                    "priority class names with 'system-' prefix are reserved for system use only. error: {why}"
                ),
            ));
        }
    } else if value > HIGHEST_USER_DEFINABLE_PRIORITY {
        errors.push(FieldError::forbidden(
            "value",
            &format!("maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"),
        ));
    }
    let policy = str_of(object, "preemptionPolicy");
    if !policy.is_empty() && !matches!(policy, "Never" | "PreemptLowerPriority") {
        errors.push(FieldError::not_supported(
            "preemptionPolicy",
            BadValue::str(policy),
            &["Never", "PreemptLowerPriority"],
        ));
    }
}

pub(crate) fn validate_priority_class_update(old: &Value, new: &Value, errors: &mut FieldErrors) {
    if old.get("value") != new.get("value") {
        errors.push(FieldError::forbidden(
            "value",
            "may not be changed in an update.",
        ));
    }
    let (before, after) = (
        str_of(old, "preemptionPolicy"),
        str_of(new, "preemptionPolicy"),
    );
    if before != after {
        errors.push(FieldError::invalid(
            "preemptionPolicy",
            BadValue::str(after),
            "field is immutable",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    type CheckCase<'a> = (fn(&Value, &mut FieldErrors), Value, Vec<&'a str>);

    fn rendered(check: fn(&Value, &mut FieldErrors), object: &Value) -> Vec<String> {
        let mut errors = Vec::new();
        check(object, &mut errors);
        errors.iter().map(FieldError::rendered).collect()
    }

    #[test]
    fn create_errors_are_worded_as_kube() {
        let cases: Vec<CheckCase> = vec![
            (
                validate_service,
                json!({"spec": {"type": "ClusterIP", "sessionAffinity": "None", "ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}]}}),
                vec![],
            ),
            (
                validate_service,
                json!({"spec": {"type": "ClusterIP", "sessionAffinity": "None"}}),
                vec!["spec.ports: Required value"],
            ),
            (
                validate_service,
                json!({"spec": {"type": "Internal", "sessionAffinity": "None", "ports": [
                {"port": 80, "protocol": "TCP"}, {"port": 0, "protocol": "TCP", "name": "b"}]}}),
                vec![
                    "spec.ports[0].name: Required value",
                    "spec.ports[1].port: Invalid value: 0: must be between 1 and 65535, inclusive",
                    "spec.type: Unsupported value: \"Internal\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"",
                ],
            ),
            (
                validate_pod_disruption_budget,
                json!({"spec": {"minAvailable": 1, "maxUnavailable": "10%", "selector": {"matchLabels": {"app": "a"}}}}),
                vec![
                    "spec: Invalid value: policy.PodDisruptionBudgetSpec{...}: minAvailable and maxUnavailable cannot be both set",
                ],
            ),
            (
                validate_pod_disruption_budget,
                json!({"spec": {"minAvailable": -1}}),
                vec!["spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"],
            ),
            (
                validate_priority_class,
                json!({"metadata": {"name": "high"}, "value": 2_000_000_000}),
                vec![
                    "value: Forbidden: maximum allowed value of a user defined priority is 1000000000",
                ],
            ),
            (
                validate_priority_class,
                json!({"metadata": {"name": "system-mine"}, "value": 1}),
                vec![
                    "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class",
                ],
            ),
            (
                validate_priority_class,
                json!({"metadata": {"name": "system-node-critical"}, "value": 5}),
                vec![
                    "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: value of system-node-critical PriorityClass must be 2000001000",
                ],
            ),
            (
                validate_priority_class,
                json!({"metadata": {"name": "system-cluster-critical"}, "value": 2_000_000_000}),
                vec![],
            ),
            (
                |o, e| validate_data_keys(o, &["data"], e),
                json!({"data": {"ok.key": "1", "bad key": "2"}}),
                vec![
                    "data[bad key]: Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                ],
            ),
        ];
        for (check, object, want) in cases {
            assert_eq!(rendered(check, &object), want, "{object}");
        }
    }

    #[test]
    fn updates_guard_immutable_fields() {
        let mut errors = Vec::new();
        validate_service_update(
            &json!({"spec": {"clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"]}}),
            &json!({"spec": {"clusterIP": "10.0.0.2", "clusterIPs": ["10.0.0.2"]}}),
            &mut errors,
        );
        validate_immutable_data_update(
            &json!({"immutable": true, "data": {"a": "1"}}),
            &json!({"immutable": false, "data": {"a": "2"}}),
            &["data", "binaryData"],
            &mut errors,
        );
        validate_secret_update(
            &json!({"type": "Opaque"}),
            &json!({"type": "kubernetes.io/tls"}),
            &mut errors,
        );
        validate_priority_class_update(&json!({"value": 1}), &json!({"value": 2}), &mut errors);
        let rendered: Vec<String> = errors.iter().map(FieldError::rendered).collect();
        assert_eq!(
            rendered,
            vec![
                "spec.clusterIPs[0]: Invalid value: []string{\"10.0.0.2\"}: may not change once set",
                "immutable: Forbidden: field is immutable when `immutable` is set",
                "data: Forbidden: field is immutable when `immutable` is set",
                "type: Invalid value: \"kubernetes.io/tls\": field is immutable",
                "value: Forbidden: may not be changed in an update.",
            ]
        );
        let mut errors = Vec::new();
        validate_immutable_data_update(
            &json!({"data": {"a": "1"}}),
            &json!({"data": {"a": "2"}}),
            &["data"],
            &mut errors,
        );
        assert!(errors.is_empty());
    }
}
