//! Pod specs (`ValidatePodSpec`, templates) and pod updates
//! (`ValidatePodUpdate`: what may change in a pod's spec).

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::container::{
    ProbeKind, check_host_port_conflicts, validate_lifecycle, validate_pod_security_context,
    validate_probe, validate_pull_policy, validate_security_context,
    validate_termination_message_policy,
};
use super::metadata::{validate_annotations, validate_labels};
use super::volumes::{validate_volume_mounts, validate_volumes};
use crate::admission::field::{
    BadValue, FieldError, FieldErrors, child, go_quote, go_string_map, index, key,
};
use crate::admission::json::{array_of, str_of};
use crate::admission::names::{
    is_dns1123_label, is_qualified_name, is_valid_label_value, is_valid_port_name,
    is_valid_port_num,
};
use ksim_core::quantity::Quantity;

const MAX_INT32: i64 = 2_147_483_647;

/// A template's labels and annotations only: what
/// `ValidatePodTemplateSpecForStatefulSet` checks (its pod spec is not
/// validated upstream, since its mounts may name volumeClaimTemplates).
pub(crate) fn validate_pod_template_metadata(
    template: &Value,
    path: &str,
    errors: &mut FieldErrors,
) {
    let metadata = template.get("metadata");
    validate_labels(
        metadata.and_then(|m| m.get("labels")),
        &child(path, "labels"),
        errors,
    );
    validate_annotations(
        metadata.and_then(|m| m.get("annotations")),
        &child(path, "annotations"),
        errors,
    );
}

/// `ValidatePodTemplateSpec`: template labels/annotations and the pod spec.
pub(crate) fn validate_pod_template(template: &Value, path: &str, errors: &mut FieldErrors) {
    let metadata = template.get("metadata");
    validate_labels(
        metadata.and_then(|m| m.get("labels")),
        &child(path, "labels"),
        errors,
    );
    validate_annotations(
        metadata.and_then(|m| m.get("annotations")),
        &child(path, "annotations"),
        errors,
    );
    let null = Value::Null;
    validate_pod_spec(
        template.get("spec").unwrap_or(&null),
        &child(path, "spec"),
        errors,
    );
}

/// `ValidatePodSpec`, the parts ksim checks, in upstream's order.
pub(crate) fn validate_pod_spec(spec: &Value, path: &str, errors: &mut FieldErrors) {
    let volumes = validate_volumes(array_of(spec, "volumes"), &child(path, "volumes"), errors);
    let mut names = HashSet::new();
    let containers = array_of(spec, "containers");
    let containers_path = child(path, "containers");
    if containers.is_empty() {
        errors.push(FieldError::required(&containers_path, ""));
    }
    validate_containers(
        containers,
        &containers_path,
        &volumes,
        false,
        &mut names,
        errors,
    );
    check_host_port_conflicts(containers, &containers_path, errors);
    validate_containers(
        array_of(spec, "initContainers"),
        &child(path, "initContainers"),
        &volumes,
        true,
        &mut names,
        errors,
    );
    if spec.get("hostNetwork").and_then(Value::as_bool) == Some(true) {
        validate_host_network_ports(containers, &containers_path, errors);
    }

    let restart_policy = str_of(spec, "restartPolicy");
    let restart_path = child(path, "restartPolicy");
    match restart_policy {
        "Always" | "OnFailure" | "Never" => {}
        "" => errors.push(FieldError::required(&restart_path, "")),
        other => errors.push(FieldError::not_supported(
            &restart_path,
            BadValue::str(other),
            &["Always", "OnFailure", "Never"],
        )),
    }
    let dns_policy = str_of(spec, "dnsPolicy");
    let dns_path = child(path, "dnsPolicy");
    match dns_policy {
        "ClusterFirst" | "ClusterFirstWithHostNet" | "Default" | "None" => {}
        "" => errors.push(FieldError::required(&dns_path, "")),
        other => errors.push(FieldError::not_supported(
            &dns_path,
            BadValue::str(other),
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        )),
    }
    validate_labels(
        spec.get("nodeSelector"),
        &child(path, "nodeSelector"),
        errors,
    );
    validate_pod_security_context(spec, path, errors);
    validate_scheduling_gates(
        array_of(spec, "schedulingGates"),
        &child(path, "schedulingGates"),
        errors,
    );
    if let Some(deadline) = spec.get("activeDeadlineSeconds").and_then(Value::as_i64)
        && !(1..=MAX_INT32).contains(&deadline)
    {
        errors.push(FieldError::invalid(
            &child(path, "activeDeadlineSeconds"),
            BadValue::Int(deadline),
            "must be between 1 and 2147483647, inclusive",
        ));
    }
    validate_tolerations(
        array_of(spec, "tolerations"),
        &child(path, "tolerations"),
        errors,
    );
}

/// `validatePodHostNetworkDeps`: with the host's network a container's
/// host port is its container port.
fn validate_host_network_ports(containers: &[Value], path: &str, errors: &mut FieldErrors) {
    for (c, container) in containers.iter().enumerate() {
        let ports_path = child(&index(path, c), "ports");
        for (p, port) in array_of(container, "ports").iter().enumerate() {
            let host_port = port.get("hostPort").and_then(Value::as_i64).unwrap_or(0);
            let container_port = port
                .get("containerPort")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if host_port != 0 && host_port != container_port {
                errors.push(FieldError::invalid(
                    &child(&index(&ports_path, p), "hostPort"),
                    BadValue::Int(host_port),
                    "must match `containerPort` when `hostNetwork` is true",
                ));
            }
        }
    }
}

/// `validateSchedulingGates`: qualified names, no duplicates.
fn validate_scheduling_gates(gates: &[Value], path: &str, errors: &mut FieldErrors) {
    let mut seen = HashSet::new();
    for (i, gate) in gates.iter().enumerate() {
        let gate_path = index(path, i);
        let name = str_of(gate, "name");
        for msg in is_qualified_name(name) {
            errors.push(FieldError::invalid(&gate_path, BadValue::str(name), &msg));
        }
        if !seen.insert(name) {
            errors.push(FieldError::duplicate(&gate_path, BadValue::str(name)));
        }
    }
}

/// `ValidatePodCreate`'s own checks beyond the spec: a pod with scheduling
/// gates may not name its node.
pub(crate) fn validate_pod_create(pod: &Value, errors: &mut FieldErrors) {
    let spec = &pod["spec"];
    if !str_of(spec, "nodeName").is_empty() && !array_of(spec, "schedulingGates").is_empty() {
        errors.push(FieldError::forbidden(
            "spec.nodeName",
            "cannot be set until all schedulingGates have been cleared",
        ));
    }
}

/// `validateContainers` / `validateInitContainers`: `validateContainerCommon`
/// for each, unique names, probes and lifecycle where they are allowed.
fn validate_containers(
    containers: &[Value],
    path: &str,
    volumes: &HashSet<&str>,
    init: bool,
    names: &mut HashSet<String>,
    errors: &mut FieldErrors,
) {
    for (i, container) in containers.iter().enumerate() {
        let container_path = index(path, i);
        let name_path = child(&container_path, "name");
        let name = str_of(container, "name");
        if name.is_empty() {
            errors.push(FieldError::required(&name_path, ""));
        } else {
            for msg in is_dns1123_label(name) {
                errors.push(FieldError::invalid(&name_path, BadValue::str(name), &msg));
            }
        }
        if str_of(container, "image").is_empty() {
            errors.push(FieldError::required(&child(&container_path, "image"), ""));
        }
        validate_termination_message_policy(container, &container_path, errors);
        validate_container_ports(
            array_of(container, "ports"),
            &child(&container_path, "ports"),
            errors,
        );
        validate_volume_mounts(
            container,
            volumes,
            &child(&container_path, "volumeMounts"),
            errors,
        );
        validate_pull_policy(container, &container_path, errors);
        let null = Value::Null;
        validate_resources(
            container.get("resources").unwrap_or(&null),
            &child(&container_path, "resources"),
            errors,
        );
        validate_security_context(container, &container_path, errors);

        let restart_path = child(&container_path, "restartPolicy");
        let restart = container.get("restartPolicy").and_then(Value::as_str);
        if init
            && let Some(policy) = restart
            && policy != "Always"
        {
            errors.push(FieldError::not_supported(
                &restart_path,
                BadValue::str(policy),
                &["Always"],
            ));
        }
        if !name.is_empty() && !names.insert(name.to_string()) {
            errors.push(FieldError::duplicate(&name_path, BadValue::str(name)));
        }
        if init {
            check_host_port_conflicts(std::slice::from_ref(container), path, errors);
        }
        let is_set = |field: &str| container.get(field).is_some_and(|v| !v.is_null());
        if !init || restart == Some("Always") {
            if is_set("lifecycle") {
                validate_lifecycle(
                    &container["lifecycle"],
                    &child(&container_path, "lifecycle"),
                    errors,
                );
            }
            for (kind, field) in ProbeKind::ALL {
                if is_set(field) {
                    validate_probe(
                        &container[field],
                        kind,
                        &child(&container_path, field),
                        errors,
                    );
                }
            }
        } else {
            for field in [
                "lifecycle",
                "livenessProbe",
                "readinessProbe",
                "startupProbe",
            ] {
                if is_set(field) {
                    errors.push(FieldError::forbidden(
                        &child(&container_path, field),
                        "may not be set for init containers without restartPolicy=Always",
                    ));
                }
            }
        }
        if !init && restart.is_some() {
            errors.push(FieldError::forbidden(
                &restart_path,
                "may not be set for non-init containers",
            ));
        }
    }
}

fn validate_container_ports(ports: &[Value], path: &str, errors: &mut FieldErrors) {
    let mut names = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let port_path = index(path, i);
        let name = str_of(port, "name");
        if !name.is_empty() {
            let problems = is_valid_port_name(name);
            for msg in &problems {
                errors.push(FieldError::invalid(
                    &child(&port_path, "name"),
                    BadValue::str(name),
                    msg,
                ));
            }
            if problems.is_empty() && !names.insert(name) {
                errors.push(FieldError::duplicate(
                    &child(&port_path, "name"),
                    BadValue::str(name),
                ));
            }
        }
        let container_port = port
            .get("containerPort")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if container_port == 0 {
            errors.push(FieldError::required(
                &child(&port_path, "containerPort"),
                "",
            ));
        } else {
            for msg in is_valid_port_num(container_port) {
                errors.push(FieldError::invalid(
                    &child(&port_path, "containerPort"),
                    BadValue::Int(container_port),
                    &msg,
                ));
            }
        }
        let host_port = port.get("hostPort").and_then(Value::as_i64).unwrap_or(0);
        if host_port != 0 {
            for msg in is_valid_port_num(host_port) {
                errors.push(FieldError::invalid(
                    &child(&port_path, "hostPort"),
                    BadValue::Int(host_port),
                    &msg,
                ));
            }
        }
        validate_protocol(port, &port_path, errors);
    }
}

/// A port's `protocol`: required, one of SCTP, TCP, UDP.
pub(crate) fn validate_protocol(port: &Value, port_path: &str, errors: &mut FieldErrors) {
    let protocol = str_of(port, "protocol");
    let protocol_path = child(port_path, "protocol");
    match protocol {
        "TCP" | "UDP" | "SCTP" => {}
        "" => errors.push(FieldError::required(&protocol_path, "")),
        other => errors.push(FieldError::not_supported(
            &protocol_path,
            BadValue::str(other),
            &["SCTP", "TCP", "UDP"],
        )),
    }
}

fn sorted_quantities(list: Option<&Value>) -> Vec<(String, String)> {
    let mut entries: Vec<(String, String)> = list
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), quantity_text(v)))
                .collect()
        })
        .unwrap_or_default();
    entries.sort();
    entries
}

fn quantity_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Quantities non-negative and well formed; requests not above limits.
fn validate_resources(resources: &Value, path: &str, errors: &mut FieldErrors) {
    let limits_path = child(path, "limits");
    let requests_path = child(path, "requests");
    let limits = sorted_quantities(resources.get("limits"));
    let check_value = |text: &str, field: &str, errors: &mut FieldErrors| {
        match Quantity::parse(text).ok() {
        None => errors.push(FieldError::invalid(
            field,
            BadValue::str(text),
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        )),
        Some(q) if q.nanos() < 0 => errors.push(FieldError::invalid(
            field,
            BadValue::str(text),
            "must be greater than or equal to 0",
        )),
        Some(_) => {}
    }
    };
    for (name, text) in &limits {
        check_value(text, &key(&limits_path, name), errors);
    }
    for (name, text) in sorted_quantities(resources.get("requests")) {
        check_value(&text, &key(&requests_path, &name), errors);
        let Some((_, limit_text)) = limits.iter().find(|(n, _)| *n == name) else {
            continue;
        };
        let (Ok(request), Ok(limit)) = (Quantity::parse(&text), Quantity::parse(limit_text)) else {
            continue;
        };
        let overcommit_allowed = is_native(&name) && !name.starts_with("hugepages-");
        if request != limit && !overcommit_allowed {
            errors.push(FieldError::invalid(
                &requests_path,
                BadValue::str(&text),
                &format!("must be equal to {name} limit of {limit_text}"),
            ));
        } else if request > limit {
            errors.push(FieldError::invalid(
                &requests_path,
                BadValue::str(&text),
                &format!("must be less than or equal to {name} limit of {limit_text}"),
            ));
        }
    }
}

/// Resource names in the `kubernetes.io/` namespace (or without one) are native;
/// extended resources (other domains) may not be overcommitted.
fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// `%#v` of a `core.Toleration`.
fn go_toleration(toleration: &Value) -> BadValue {
    let seconds = match toleration.get("tolerationSeconds").and_then(Value::as_i64) {
        Some(s) => format!("(*int64)({s})"),
        None => "(*int64)(nil)".to_string(),
    };
    BadValue::Raw(format!(
        "core.Toleration{{Key:{}, Operator:{}, Value:{}, Effect:{}, TolerationSeconds:{seconds}}}",
        go_quote(str_of(toleration, "key")),
        go_quote(str_of(toleration, "operator")),
        go_quote(str_of(toleration, "value")),
        go_quote(str_of(toleration, "effect")),
    ))
}

/// `ValidateTolerations`.
pub(crate) fn validate_tolerations(tolerations: &[Value], path: &str, errors: &mut FieldErrors) {
    for (i, toleration) in tolerations.iter().enumerate() {
        let toleration_path = index(path, i);
        let key_name = str_of(toleration, "key");
        let operator = str_of(toleration, "operator");
        let effect = str_of(toleration, "effect");
        let value = str_of(toleration, "value");
        if !key_name.is_empty() {
            for msg in is_qualified_name(key_name) {
                errors.push(FieldError::invalid(
                    &child(&toleration_path, "key"),
                    BadValue::str(key_name),
                    &msg,
                ));
            }
        }
        if key_name.is_empty() && operator != "Exists" {
            errors.push(FieldError::invalid(
                &child(&toleration_path, "operator"),
                BadValue::str(operator),
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if toleration
            .get("tolerationSeconds")
            .is_some_and(|s| !s.is_null())
            && effect != "NoExecute"
        {
            errors.push(FieldError::invalid(
                &child(&toleration_path, "effect"),
                BadValue::str(effect),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match operator {
            "Equal" | "" => {
                let msgs = is_valid_label_value(value);
                if !msgs.is_empty() {
                    errors.push(FieldError::invalid(
                        &child(&toleration_path, "operator"),
                        BadValue::str(value),
                        &msgs.join(";"),
                    ));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errors.push(FieldError::invalid(
                        &child(&toleration_path, "operator"),
                        go_toleration(toleration),
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => errors.push(FieldError::not_supported(
                &child(&toleration_path, "operator"),
                BadValue::str(other),
                &["Equal", "Exists"],
            )),
        }
        if !effect.is_empty() && !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute")
        {
            errors.push(FieldError::not_supported(
                &child(&toleration_path, "effect"),
                BadValue::str(effect),
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            ));
        }
    }
}

const POD_UPDATE_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// `ValidatePodUpdate` (spec part): only images, activeDeadlineSeconds,
/// added tolerations, terminationGracePeriodSeconds (negative to 1) and
/// removed schedulingGates may change.
pub(crate) fn validate_pod_update(old: &Value, new: &Value, errors: &mut FieldErrors) {
    let empty = Map::new();
    let old_spec = old.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    let new_spec = new.get("spec").and_then(Value::as_object).unwrap_or(&empty);

    let old_deadline = old_spec
        .get("activeDeadlineSeconds")
        .and_then(Value::as_i64);
    match new_spec
        .get("activeDeadlineSeconds")
        .and_then(Value::as_i64)
    {
        Some(deadline) => {
            if !(0..=MAX_INT32).contains(&deadline) {
                errors.push(FieldError::invalid(
                    "spec.activeDeadlineSeconds",
                    BadValue::Int(deadline),
                    "must be between 0 and 2147483647, inclusive",
                ));
                return;
            }
            if old_deadline.is_some_and(|old| old < deadline) {
                errors.push(FieldError::invalid(
                    "spec.activeDeadlineSeconds",
                    BadValue::Int(deadline),
                    "must be less than or equal to previous value",
                ));
                return;
            }
        }
        None if old_deadline.is_some() => errors.push(FieldError::invalid(
            "spec.activeDeadlineSeconds",
            BadValue::Raw("null".into()),
            "must not update from a positive integer to nil value",
        )),
        None => {}
    }

    // The new spec with every field allowed to change set back to the old value.
    let mut masked = new_spec.clone();
    for list in ["containers", "initContainers"] {
        let old_list = old_spec.get(list).and_then(Value::as_array);
        if let (Some(old_list), Some(new_list)) =
            (old_list, masked.get_mut(list).and_then(Value::as_array_mut))
            && old_list.len() == new_list.len()
        {
            for (old_container, new_container) in old_list.iter().zip(new_list.iter_mut()) {
                if let (Some(new_container), Some(image)) =
                    (new_container.as_object_mut(), old_container.get("image"))
                {
                    new_container.insert("image".into(), image.clone());
                }
            }
        }
    }
    restore(&mut masked, old_spec, "activeDeadlineSeconds");
    let old_grace = old_spec
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64);
    let new_grace = new_spec
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64);
    if old_grace.is_some_and(|g| g < 0) && new_grace == Some(1) {
        restore(&mut masked, old_spec, "terminationGracePeriodSeconds");
    }
    let gate_names = |spec: &Map<String, Value>| -> Vec<String> {
        spec.get("schedulingGates")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|gate| str_of(gate, "name").to_string())
            .collect()
    };
    let old_gates = gate_names(old_spec);
    for (i, gate) in gate_names(new_spec).iter().enumerate() {
        if !old_gates.contains(gate) {
            errors.push(FieldError::forbidden(
                &format!("spec.schedulingGates[{i}].name"),
                &format!("only deletion is allowed, but found new scheduling gate '{gate}'"),
            ));
        }
    }
    restore(&mut masked, old_spec, "schedulingGates");
    // A gated pod's node selector may grow (queueing systems narrow where
    // it may run before releasing it).
    if !old_gates.is_empty() {
        let old_selector = old_spec.get("nodeSelector").and_then(Value::as_object);
        let new_selector = new_spec.get("nodeSelector").and_then(Value::as_object);
        let only_added = old_selector
            .into_iter()
            .flatten()
            .all(|(key, value)| new_selector.and_then(|selector| selector.get(key)) == Some(value));
        if !only_added {
            errors.push(FieldError::invalid(
                "spec.nodeSelector",
                BadValue::Raw(go_string_map(new_selector)),
                "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
            ));
        }
        restore(&mut masked, old_spec, "nodeSelector");
    }
    let old_tolerations = array_of(&Value::Object(old_spec.clone()), "tolerations").to_vec();
    let new_tolerations = array_of(&Value::Object(new_spec.clone()), "tolerations").to_vec();
    let only_added = old_tolerations.iter().all(|old_toleration| {
        new_tolerations.iter().any(|new_toleration| {
            let mut clone = old_toleration.clone();
            if let Some(clone) = clone.as_object_mut() {
                clone.remove("tolerationSeconds");
                if let Some(seconds) = new_toleration.get("tolerationSeconds") {
                    clone.insert("tolerationSeconds".into(), seconds.clone());
                }
            }
            &clone == new_toleration
        })
    });
    if only_added {
        restore(&mut masked, old_spec, "tolerations");
    } else {
        errors.push(FieldError::forbidden(
            "spec.tolerations",
            "existing toleration can not be modified except its tolerationSeconds",
        ));
        restore(&mut masked, old_spec, "tolerations");
    }
    if &masked != old_spec {
        let diff = spec_diff(old_spec, &masked);
        errors.push(FieldError::forbidden(
            "spec",
            &format!("{POD_UPDATE_FORBIDDEN}\n{diff}"),
        ));
    }
}

fn restore(masked: &mut Map<String, Value>, old: &Map<String, Value>, field: &str) {
    match old.get(field) {
        Some(value) => {
            masked.insert(field.to_string(), value.clone());
        }
        None => {
            masked.remove(field);
        }
    }
}

/// A short `-`/`+` listing of the spec fields that differ (kube prints a cmp.Diff here).
fn spec_diff(old: &Map<String, Value>, new: &Map<String, Value>) -> String {
    let mut fields: Vec<&String> = old.keys().chain(new.keys()).collect();
    fields.sort();
    fields.dedup();
    let mut lines = Vec::new();
    for field in fields {
        let (before, after) = (old.get(field), new.get(field));
        if before != after {
            let render = |v: Option<&Value>| v.map_or("null".to_string(), Value::to_string);
            lines.push(format!("-  {field}: {}", render(before)));
            lines.push(format!("+  {field}: {}", render(after)));
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The errors of `spec` with the container defaults validation relies on.
    fn spec_errors(mut spec: Value) -> Vec<String> {
        for container in spec["containers"].as_array_mut().into_iter().flatten() {
            if let Some(container) = container.as_object_mut() {
                for (field, value) in [
                    ("imagePullPolicy", "IfNotPresent"),
                    ("terminationMessagePolicy", "File"),
                ] {
                    container.entry(field).or_insert_with(|| Value::from(value));
                }
            }
        }
        let mut errors = Vec::new();
        validate_pod_spec(&spec, "spec", &mut errors);
        errors.iter().map(FieldError::rendered).collect()
    }

    fn base() -> Value {
        json!({"restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
               "containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80, "protocol": "TCP"}]}]})
    }

    fn with(patch: Value) -> Value {
        let mut spec = base();
        if let (Some(spec), Some(patch)) = (spec.as_object_mut(), patch.as_object()) {
            for (k, v) in patch {
                spec.insert(k.clone(), v.clone());
            }
        }
        spec
    }

    #[test]
    fn valid_spec_has_no_errors() {
        assert_eq!(spec_errors(base()), Vec::<String>::new());
    }

    #[test]
    fn pod_spec_errors_are_worded_as_kube() {
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (
                with(json!({"containers": []})),
                vec!["spec.containers: Required value"],
            ),
            (
                with(json!({"containers": [{"name": "c"}]})),
                vec!["spec.containers[0].image: Required value"],
            ),
            (
                with(json!({"containers": [{"image": "x"}]})),
                vec!["spec.containers[0].name: Required value"],
            ),
            (
                with(
                    json!({"containers": [{"name": "a", "image": "x"}, {"name": "a", "image": "x"}]}),
                ),
                vec!["spec.containers[1].name: Duplicate value: \"a\""],
            ),
            (
                with(json!({"containers": [{"name": "A", "image": "x"}]})),
                vec![
                    "spec.containers[0].name: Invalid value: \"A\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                ],
            ),
            (
                with(json!({"restartPolicy": "Sometimes"})),
                vec![
                    "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
                ],
            ),
            (
                with(
                    json!({"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 70000, "protocol": "TCP"}]}]}),
                ),
                vec![
                    "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
                ],
            ),
            (
                with(
                    json!({"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80, "protocol": "HTTP"}]}]}),
                ),
                vec![
                    "spec.containers[0].ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
                ],
            ),
            (
                with(
                    json!({"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]}),
                ),
                vec![
                    "spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1",
                ],
            ),
            (
                with(
                    json!({"containers": [{"name": "c", "image": "x", "resources": {"requests": {"memory": "-1"}}}]}),
                ),
                vec![
                    "spec.containers[0].resources.requests[memory]: Invalid value: \"-1\": must be greater than or equal to 0",
                ],
            ),
            (
                with(json!({"tolerations": [{"key": "k", "operator": "Is", "effect": "Never"}]})),
                vec![
                    "spec.tolerations[0].operator: Unsupported value: \"Is\": supported values: \"Equal\", \"Exists\"",
                    "spec.tolerations[0].effect: Unsupported value: \"Never\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
                ],
            ),
            (
                with(json!({"tolerations": [{"operator": "Equal", "value": "v"}]})),
                vec![
                    "spec.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
                ],
            ),
            (
                with(
                    json!({"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]}),
                ),
                vec![
                    "spec.tolerations[0].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set",
                ],
            ),
            (
                with(json!({"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]})),
                vec![
                    "spec.tolerations[0].operator: Invalid value: core.Toleration{Key:\"k\", Operator:\"Exists\", Value:\"v\", Effect:\"\", TolerationSeconds:(*int64)(nil)}: value must be empty when `operator` is 'Exists'",
                ],
            ),
            (
                with(json!({"nodeSelector": {"zone": "a b"}})),
                vec![
                    "spec.nodeSelector: Invalid value: \"a b\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                ],
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(spec_errors(spec.clone()), want, "{spec}");
        }
    }

    fn update_errors(old: Value, new: Value) -> Vec<String> {
        let mut errors = Vec::new();
        validate_pod_update(&json!({"spec": old}), &json!({"spec": new}), &mut errors);
        errors.iter().map(FieldError::rendered).collect()
    }

    #[test]
    fn pod_updates_allow_only_kubes_mutable_fields() {
        let allowed = [
            with(
                json!({"containers": [{"name": "c", "image": "nginx:2", "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}),
            ),
            with(json!({"activeDeadlineSeconds": 30})),
            with(json!({"tolerations": [{"key": "k", "operator": "Exists"}]})),
        ];
        for new in allowed {
            assert_eq!(
                update_errors(base(), new.clone()),
                Vec::<String>::new(),
                "{new}"
            );
        }
        let forbidden = update_errors(base(), with(json!({"nodeName": "n1"})));
        assert_eq!(forbidden.len(), 1);
        assert!(
            forbidden[0].starts_with(&format!("spec: Forbidden: {POD_UPDATE_FORBIDDEN}\n")),
            "{}",
            forbidden[0]
        );
        assert!(forbidden[0].contains("+  nodeName: \"n1\""));
    }

    #[test]
    fn scheduling_gates_may_only_be_removed() {
        let old = with(json!({"schedulingGates": [{"name": "a"}, {"name": "b"}]}));
        assert_eq!(
            update_errors(
                old.clone(),
                with(json!({"schedulingGates": [{"name": "b"}]}))
            ),
            Vec::<String>::new()
        );
        assert_eq!(update_errors(old.clone(), base()), Vec::<String>::new());
        assert_eq!(
            update_errors(
                old,
                with(json!({"schedulingGates": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}))
            ),
            vec![
                "spec.schedulingGates[2].name: Forbidden: only deletion is allowed, but found new scheduling gate 'c'"
            ]
        );
        assert_eq!(
            spec_errors(with(
                json!({"schedulingGates": [{"name": "a"}, {"name": "a"}, {"name": "b c"}]})
            )),
            vec![
                "spec.schedulingGates[1]: Duplicate value: \"a\"",
                "spec.schedulingGates[2]: Invalid value: \"b c\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ]
        );
        let gated =
            with(json!({"schedulingGates": [{"name": "a"}], "nodeSelector": {"zone": "a"}}));
        assert_eq!(
            update_errors(
                gated.clone(),
                with(
                    json!({"schedulingGates": [{"name": "a"}], "nodeSelector": {"zone": "a", "disk": "ssd"}})
                )
            ),
            Vec::<String>::new()
        );
        assert_eq!(
            update_errors(
                gated,
                with(json!({"schedulingGates": [{"name": "a"}], "nodeSelector": {"zone": "b"}}))
            ),
            vec![
                "spec.nodeSelector: Invalid value: map[string]string{\"zone\":\"b\"}: only additions to spec.nodeSelector are allowed (no mutations or deletions)"
            ]
        );
        let mut errors = Vec::new();
        validate_pod_create(
            &json!({"spec": {"nodeName": "n1", "schedulingGates": [{"name": "a"}]}}),
            &mut errors,
        );
        assert_eq!(
            errors.iter().map(FieldError::rendered).collect::<Vec<_>>(),
            vec![
                "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"
            ]
        );
    }

    #[test]
    fn pod_updates_keep_existing_tolerations_and_deadlines() {
        let old = with(
            json!({"tolerations": [{"key": "k", "operator": "Exists"}], "activeDeadlineSeconds": 10}),
        );
        assert_eq!(
            update_errors(
                old.clone(),
                with(json!({"tolerations": [], "activeDeadlineSeconds": 10}))
            ),
            vec![
                "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"
            ]
        );
        assert_eq!(
            update_errors(
                old.clone(),
                with(
                    json!({"tolerations": [{"key": "k", "operator": "Exists"}], "activeDeadlineSeconds": 20})
                )
            ),
            vec![
                "spec.activeDeadlineSeconds: Invalid value: 20: must be less than or equal to previous value"
            ]
        );
    }
}
