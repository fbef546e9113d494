//! What `pkg/apis/core/validation` checks inside a container besides its
//! name, image, ports and resources: probes and lifecycle handlers, pull
//! and termination-message policies, security contexts (the container's
//! and the pod's), and host port conflicts.

use std::collections::HashSet;

use serde_json::Value;

use crate::admission::field::{BadValue, FieldError, FieldErrors, child, index};
use crate::admission::json::{array_of, str_of};
use crate::admission::names::{is_valid_port_name, is_valid_port_num};

/// Which probe: liveness and startup probes must succeed once.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProbeKind {
    Liveness,
    Readiness,
    Startup,
}

impl ProbeKind {
    pub(crate) const ALL: [(ProbeKind, &'static str); 3] = [
        (ProbeKind::Liveness, "livenessProbe"),
        (ProbeKind::Readiness, "readinessProbe"),
        (ProbeKind::Startup, "startupProbe"),
    ];
}

fn is_set(object: &Value, key: &str) -> bool {
    object.get(key).is_some_and(|v| !v.is_null())
}

/// `validateLivenessProbe` / `validateReadinessProbe` / `validateStartupProbe`.
pub(crate) fn validate_probe(probe: &Value, kind: ProbeKind, path: &str, errors: &mut FieldErrors) {
    validate_handler(
        probe,
        &["exec", "httpGet", "tcpSocket", "grpc"],
        path,
        errors,
    );
    for field in [
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        if let Some(value) = probe.get(field).and_then(Value::as_i64)
            && value < 0
        {
            errors.push(FieldError::invalid(
                &child(path, field),
                BadValue::Int(value),
                "must be greater than or equal to 0",
            ));
        }
    }
    let grace = probe
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64);
    if let Some(grace) = grace
        && grace <= 0
    {
        errors.push(FieldError::invalid(
            &child(path, "terminationGracePeriodSeconds"),
            BadValue::Int(grace),
            "must be greater than 0",
        ));
    }
    match kind {
        ProbeKind::Liveness | ProbeKind::Startup => {
            let threshold = probe
                .get("successThreshold")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if threshold != 1 {
                errors.push(FieldError::invalid(
                    &child(path, "successThreshold"),
                    BadValue::Int(threshold),
                    "must be 1",
                ));
            }
        }
        ProbeKind::Readiness => {
            if let Some(grace) = grace {
                errors.push(FieldError::invalid(
                    &child(path, "terminationGracePeriodSeconds"),
                    BadValue::Int(grace),
                    "must not be set for readinessProbes",
                ));
            }
        }
    }
}

/// `validateLifecycle`: each hook is a handler.
pub(crate) fn validate_lifecycle(lifecycle: &Value, path: &str, errors: &mut FieldErrors) {
    for hook in ["postStart", "preStop"] {
        if let Some(handler) = lifecycle.get(hook).filter(|h| !h.is_null()) {
            validate_handler(
                handler,
                &["exec", "httpGet", "tcpSocket", "sleep"],
                &child(path, hook),
                errors,
            );
        }
    }
}

/// `validateHandler`: exactly one action, and that action's checks.
fn validate_handler(handler: &Value, actions: &[&str], path: &str, errors: &mut FieldErrors) {
    let mut count = 0;
    for action in actions {
        if !is_set(handler, action) {
            continue;
        }
        let action_path = child(path, action);
        if count > 0 {
            errors.push(FieldError::forbidden(
                &action_path,
                "may not specify more than 1 handler type",
            ));
            continue;
        }
        count += 1;
        let body = &handler[*action];
        match *action {
            "exec" if array_of(body, "command").is_empty() => {
                errors.push(FieldError::required(&child(&action_path, "command"), ""));
            }
            "httpGet" => {
                if str_of(body, "path").is_empty() {
                    errors.push(FieldError::required(&child(&action_path, "path"), ""));
                }
                validate_port_num_or_name(body.get("port"), &child(&action_path, "port"), errors);
                let scheme = str_of(body, "scheme");
                if !matches!(scheme, "HTTP" | "HTTPS") {
                    errors.push(FieldError::not_supported(
                        &child(&action_path, "scheme"),
                        BadValue::str(scheme),
                        &["HTTP", "HTTPS"],
                    ));
                }
            }
            "tcpSocket" | "grpc" => {
                validate_port_num_or_name(body.get("port"), &child(&action_path, "port"), errors);
            }
            _ => {}
        }
    }
    if count == 0 {
        errors.push(FieldError::required(path, "must specify a handler type"));
    }
}

/// `ValidatePortNumOrName`: a port number, or an IANA service name.
fn validate_port_num_or_name(port: Option<&Value>, path: &str, errors: &mut FieldErrors) {
    match port {
        Some(Value::String(name)) => {
            for msg in is_valid_port_name(name) {
                errors.push(FieldError::invalid(path, BadValue::str(name), &msg));
            }
        }
        other => {
            let number = other.and_then(Value::as_i64).unwrap_or(0);
            for msg in is_valid_port_num(number) {
                errors.push(FieldError::invalid(path, BadValue::Int(number), &msg));
            }
        }
    }
}

/// The terminationMessagePolicy check of `validateContainerCommon`.
pub(crate) fn validate_termination_message_policy(
    container: &Value,
    path: &str,
    errors: &mut FieldErrors,
) {
    let message_policy = str_of(container, "terminationMessagePolicy");
    let message_path = child(path, "terminationMessagePolicy");
    match message_policy {
        "File" | "FallbackToLogsOnError" => {}
        "" => errors.push(FieldError::required(&message_path, "")),
        other => errors.push(FieldError::not_supported(
            &message_path,
            BadValue::str(other),
            &["File", "FallbackToLogsOnError"],
        )),
    }
}

/// `validatePullPolicy`.
pub(crate) fn validate_pull_policy(container: &Value, path: &str, errors: &mut FieldErrors) {
    let pull_path = child(path, "imagePullPolicy");
    match str_of(container, "imagePullPolicy") {
        "Always" | "IfNotPresent" | "Never" => {}
        "" => errors.push(FieldError::required(&pull_path, "")),
        other => errors.push(FieldError::not_supported(
            &pull_path,
            BadValue::str(other),
            &["Always", "IfNotPresent", "Never"],
        )),
    }
}

/// `validation.IsValidUserID` / `IsValidGroupID`.
fn validate_id(object: &Value, key: &str, path: &str, errors: &mut FieldErrors) {
    if let Some(id) = object.get(key).and_then(Value::as_i64) {
        check_id(id, &child(path, key), errors);
    }
}

fn check_id(id: i64, path: &str, errors: &mut FieldErrors) {
    if !(0..=2_147_483_647).contains(&id) {
        errors.push(FieldError::invalid(
            path,
            BadValue::Int(id),
            "must be between 0 and 2147483647, inclusive",
        ));
    }
}

/// `ValidateSecurityContext` (a container's): user and group IDs.
pub(crate) fn validate_security_context(container: &Value, path: &str, errors: &mut FieldErrors) {
    let Some(context) = container.get("securityContext").filter(|c| c.is_object()) else {
        return;
    };
    let path = child(path, "securityContext");
    validate_id(context, "runAsUser", &path, errors);
    validate_id(context, "runAsGroup", &path, errors);
}

/// `validatePodSpecSecurityContext`: IDs, supplemental groups, the
/// fsGroup change policy, and a shared process namespace without hostPID.
pub(crate) fn validate_pod_security_context(spec: &Value, path: &str, errors: &mut FieldErrors) {
    let Some(context) = spec.get("securityContext").filter(|c| c.is_object()) else {
        return;
    };
    let path = child(path, "securityContext");
    validate_id(context, "fsGroup", &path, errors);
    validate_id(context, "runAsUser", &path, errors);
    validate_id(context, "runAsGroup", &path, errors);
    let groups_path = child(&path, "supplementalGroups");
    for (i, group) in array_of(context, "supplementalGroups").iter().enumerate() {
        if let Some(group) = group.as_i64() {
            check_id(group, &index(&groups_path, i), errors);
        }
    }
    if spec.get("hostPID").and_then(Value::as_bool) == Some(true)
        && spec.get("shareProcessNamespace").and_then(Value::as_bool) == Some(true)
    {
        errors.push(FieldError::invalid(
            &child(&path, "shareProcessNamespace"),
            BadValue::Raw("true".into()),
            "ShareProcessNamespace and HostPID cannot both be enabled",
        ));
    }
    let policy = str_of(context, "fsGroupChangePolicy");
    if is_set(context, "fsGroupChangePolicy") && !matches!(policy, "Always" | "OnRootMismatch") {
        errors.push(FieldError::not_supported(
            &child(&path, "fsGroupChangePolicy"),
            BadValue::str(policy),
            &["Always", "OnRootMismatch"],
        ));
    }
}

/// `AccumulateUniqueHostPorts`: a host port (with its protocol and IP)
/// used twice among `containers` (upstream checks each init container
/// alone, reported as index 0).
pub(crate) fn check_host_port_conflicts(
    containers: &[Value],
    path: &str,
    errors: &mut FieldErrors,
) {
    let mut seen = HashSet::new();
    for (c, container) in containers.iter().enumerate() {
        let ports_path = child(&index(path, c), "ports");
        for (p, port) in array_of(container, "ports").iter().enumerate() {
            let host_port = port.get("hostPort").and_then(Value::as_i64).unwrap_or(0);
            if host_port == 0 {
                continue;
            }
            let key = format!(
                "{}/{}/{host_port}",
                str_of(port, "protocol"),
                str_of(port, "hostIP")
            );
            if !seen.insert(key.clone()) {
                errors.push(FieldError::duplicate(
                    &child(&index(&ports_path, p), "hostPort"),
                    BadValue::Str(key),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rendered(errors: &FieldErrors) -> Vec<String> {
        errors.iter().map(FieldError::rendered).collect()
    }

    #[test]
    fn probes_have_one_handler_and_sane_numbers() {
        let mut errors = Vec::new();
        let probe = json!({"exec": {"command": ["true"]}, "tcpSocket": {"port": 80},
            "periodSeconds": -1, "successThreshold": 2, "timeoutSeconds": 1, "failureThreshold": 3});
        validate_probe(&probe, ProbeKind::Liveness, "p", &mut errors);
        assert_eq!(
            rendered(&errors),
            vec![
                "p.tcpSocket: Forbidden: may not specify more than 1 handler type",
                "p.periodSeconds: Invalid value: -1: must be greater than or equal to 0",
                "p.successThreshold: Invalid value: 2: must be 1",
            ]
        );
        let mut errors = Vec::new();
        let probe = json!({"httpGet": {"path": "/", "port": "http-alt-name-too-long", "scheme": "FTP"},
            "successThreshold": 1, "terminationGracePeriodSeconds": 5});
        validate_probe(&probe, ProbeKind::Readiness, "r", &mut errors);
        assert_eq!(
            rendered(&errors),
            vec![
                "r.httpGet.port: Invalid value: \"http-alt-name-too-long\": must be no more than 15 characters",
                "r.httpGet.scheme: Unsupported value: \"FTP\": supported values: \"HTTP\", \"HTTPS\"",
                "r.terminationGracePeriodSeconds: Invalid value: 5: must not be set for readinessProbes",
            ]
        );
        let mut errors = Vec::new();
        validate_probe(
            &json!({"successThreshold": 1}),
            ProbeKind::Startup,
            "s",
            &mut errors,
        );
        assert_eq!(
            rendered(&errors),
            vec!["s: Required value: must specify a handler type"]
        );
    }

    #[test]
    fn security_contexts_and_host_ports() {
        let mut errors = Vec::new();
        validate_security_context(
            &json!({"securityContext": {"runAsUser": -1}}),
            "c",
            &mut errors,
        );
        validate_pod_security_context(
            &json!({"hostPID": true, "shareProcessNamespace": true,
                "securityContext": {"supplementalGroups": [1, -5], "fsGroupChangePolicy": "Sometimes"}}),
            "spec",
            &mut errors,
        );
        check_host_port_conflicts(
            &[
                json!({"ports": [{"containerPort": 80, "hostPort": 80, "protocol": "TCP"}]}),
                json!({"ports": [{"containerPort": 81, "hostPort": 80, "protocol": "TCP"}]}),
            ],
            "spec.containers",
            &mut errors,
        );
        assert_eq!(
            rendered(&errors),
            vec![
                "c.securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive",
                "spec.securityContext.supplementalGroups[1]: Invalid value: -5: must be between 0 and 2147483647, inclusive",
                "spec.securityContext.shareProcessNamespace: Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled",
                "spec.securityContext.fsGroupChangePolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnRootMismatch\"",
                "spec.containers[1].ports[0].hostPort: Duplicate value: \"TCP//80\"",
            ]
        );
    }
}
