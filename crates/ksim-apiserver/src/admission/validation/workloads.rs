//! The apps and batch kinds: selectors against templates, replicas,
//! strategies, restart policies, and what may change on update.

use serde_json::Value;

use super::pod::{validate_pod_template, validate_pod_template_metadata};
use super::selector::{
    go_int_or_string, go_label_selector, is_empty_selector, selector_matches,
    validate_label_selector,
};
use crate::admission::field::{BadValue, FieldError, FieldErrors, go_string_map};
use crate::admission::json::str_of;
use crate::admission::names::max_len_error;

const NOT_NEGATIVE: &str = "must be greater than or equal to 0";
const PERCENT_MSG: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";

fn spec(object: &Value) -> &Value {
    static NULL: Value = Value::Null;
    object.get("spec").unwrap_or(&NULL)
}

fn template(spec: &Value) -> &Value {
    static NULL: Value = Value::Null;
    spec.get("template").unwrap_or(&NULL)
}

fn template_labels(template: &Value) -> Option<&Value> {
    template.get("metadata").and_then(|m| m.get("labels"))
}

/// `ValidateNonnegativeField` for an optional integer.
fn non_negative(object: &Value, field: &str, path: &str, errors: &mut FieldErrors) {
    if let Some(value) = object.get(field).and_then(Value::as_i64)
        && value < 0
    {
        errors.push(FieldError::invalid(
            path,
            BadValue::Int(value),
            NOT_NEGATIVE,
        ));
    }
}

/// Required, valid and non-empty selector (`empty selector is invalid for <what>`).
fn validate_required_selector(spec: &Value, what: &str, errors: &mut FieldErrors) {
    match spec.get("selector").filter(|s| !s.is_null()) {
        None => errors.push(FieldError::required("spec.selector", "")),
        Some(selector) => {
            validate_label_selector(Some(selector), "spec.selector", errors);
            if is_empty_selector(selector) {
                errors.push(FieldError::invalid(
                    "spec.selector",
                    go_label_selector(selector),
                    &format!("empty selector is invalid for {what}"),
                ));
            }
        }
    }
}

/// The template's labels must match a non-empty selector.
fn validate_selector_matches_template(spec: &Value, errors: &mut FieldErrors) {
    let selector = spec.get("selector").filter(|s| !s.is_null());
    if selector.is_some_and(|s| !is_empty_selector(s)) {
        let labels = template_labels(template(spec));
        if !selector_matches(selector, labels) {
            errors.push(FieldError::invalid(
                "spec.template.metadata.labels",
                BadValue::Raw(go_string_map(labels.and_then(Value::as_object))),
                "`selector` does not match template `labels`",
            ));
        }
    }
}

/// Template restart policy Always, no activeDeadlineSeconds (`<Kind> is not Supported`).
fn validate_long_running_template(spec: &Value, kind: &str, errors: &mut FieldErrors) {
    let pod_spec = template(spec).get("spec");
    let restart_policy = pod_spec
        .map(|s| str_of(s, "restartPolicy"))
        .unwrap_or_default();
    if restart_policy != "Always" {
        errors.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            BadValue::str(restart_policy),
            &["Always"],
        ));
    }
    if pod_spec
        .and_then(|s| s.get("activeDeadlineSeconds"))
        .is_some_and(|v| !v.is_null())
    {
        errors.push(FieldError::forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            &format!("activeDeadlineSeconds in {kind} is not Supported"),
        ));
    }
}

/// `ValidatePositiveIntOrPercent` and `IsNotMoreThan100Percent`.
pub(crate) fn validate_int_or_percent(value: &Value, path: &str, errors: &mut FieldErrors) {
    match value {
        Value::String(s) => {
            let digits = s
                .strip_suffix('%')
                .filter(|d| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()));
            match digits {
                None => errors.push(FieldError::invalid(
                    path,
                    go_int_or_string(value),
                    PERCENT_MSG,
                )),
                Some(d) => {
                    if d.parse::<u64>().map_or(true, |p| p > 100) {
                        errors.push(FieldError::invalid(
                            path,
                            go_int_or_string(value),
                            "must not be greater than 100%",
                        ));
                    }
                }
            }
        }
        Value::Number(n) => {
            let n = n.as_i64().unwrap_or(-1);
            if n < 0 {
                errors.push(FieldError::invalid(path, BadValue::Int(n), NOT_NEGATIVE));
            }
        }
        _ => {}
    }
}

fn is_zero_int_or_percent(value: Option<&Value>) -> bool {
    match value {
        Some(Value::String(s)) => s.trim_end_matches('%').parse::<u64>() == Ok(0),
        Some(Value::Number(n)) => n.as_i64() == Some(0),
        _ => false,
    }
}

fn validate_rolling_update(rolling: &Value, path: &str, errors: &mut FieldErrors) {
    let max_unavailable = rolling.get("maxUnavailable").filter(|v| !v.is_null());
    let max_surge = rolling.get("maxSurge").filter(|v| !v.is_null());
    if let Some(v) = max_unavailable {
        validate_int_or_percent(v, &format!("{path}.maxUnavailable"), errors);
    }
    if let Some(v) = max_surge {
        validate_int_or_percent(v, &format!("{path}.maxSurge"), errors);
    }
    if is_zero_int_or_percent(max_surge)
        && is_zero_int_or_percent(max_unavailable)
        && let Some(v) = max_unavailable
    {
        errors.push(FieldError::invalid(
            &format!("{path}.maxUnavailable"),
            go_int_or_string(v),
            "may not be 0 when `maxSurge` is 0",
        ));
    }
}

pub(crate) fn validate_deployment(object: &Value, errors: &mut FieldErrors) {
    let spec = spec(object);
    non_negative(spec, "replicas", "spec.replicas", errors);
    validate_required_selector(spec, "deployment", errors);
    validate_selector_matches_template(spec, errors);
    validate_pod_template(template(spec), "spec.template", errors);
    validate_long_running_template(spec, "ReplicaSet", errors);
    if let Some(strategy) = spec.get("strategy") {
        let strategy_type = str_of(strategy, "type");
        let rolling = strategy.get("rollingUpdate").filter(|v| !v.is_null());
        match strategy_type {
            "Recreate" => {
                if rolling.is_some() {
                    errors.push(FieldError::forbidden(
                        "spec.strategy.rollingUpdate",
                        "may not be specified when strategy `type` is 'Recreate'",
                    ));
                }
            }
            "RollingUpdate" => match rolling {
                None => errors.push(FieldError::required(
                    "spec.strategy.rollingUpdate",
                    "this should be defaulted and never be nil",
                )),
                Some(rolling) => {
                    validate_rolling_update(rolling, "spec.strategy.rollingUpdate", errors)
                }
            },
            other => errors.push(FieldError::not_supported(
                "spec.strategy.type",
                BadValue::str(other),
                &["Recreate", "RollingUpdate"],
            )),
        }
    }
    non_negative(spec, "minReadySeconds", "spec.minReadySeconds", errors);
    non_negative(
        spec,
        "revisionHistoryLimit",
        "spec.revisionHistoryLimit",
        errors,
    );
    if let Some(deadline) = spec.get("progressDeadlineSeconds").and_then(Value::as_i64) {
        non_negative(
            spec,
            "progressDeadlineSeconds",
            "spec.progressDeadlineSeconds",
            errors,
        );
        let min_ready = spec
            .get("minReadySeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if deadline <= min_ready {
            errors.push(FieldError::invalid(
                "spec.progressDeadlineSeconds",
                BadValue::Int(deadline),
                "must be greater than minReadySeconds",
            ));
        }
    }
}

pub(crate) fn validate_replica_set(object: &Value, errors: &mut FieldErrors) {
    let spec = spec(object);
    non_negative(spec, "replicas", "spec.replicas", errors);
    non_negative(spec, "minReadySeconds", "spec.minReadySeconds", errors);
    validate_required_selector(spec, "deployment", errors);
    validate_selector_matches_template(spec, errors);
    validate_pod_template(template(spec), "spec.template", errors);
    validate_long_running_template(spec, "ReplicaSet", errors);
}

pub(crate) fn validate_stateful_set(object: &Value, errors: &mut FieldErrors) {
    let spec = spec(object);
    let policy = str_of(spec, "podManagementPolicy");
    if !matches!(policy, "OrderedReady" | "Parallel") {
        errors.push(FieldError::invalid(
            "spec.podManagementPolicy",
            BadValue::str(policy),
            "must be 'OrderedReady' or 'Parallel'",
        ));
    }
    if let Some(strategy) = spec.get("updateStrategy") {
        let strategy_type = str_of(strategy, "type");
        match strategy_type {
            "OnDelete" => {
                if strategy.get("rollingUpdate").is_some_and(|v| !v.is_null()) {
                    errors.push(FieldError::invalid(
                        "spec.updateStrategy.rollingUpdate",
                        BadValue::Raw("apps.RollingUpdateStatefulSetStrategy{...}".into()),
                        "only allowed for updateStrategy 'RollingUpdate'",
                    ));
                }
            }
            "RollingUpdate" => {
                if let Some(rolling) = strategy.get("rollingUpdate") {
                    non_negative(
                        rolling,
                        "partition",
                        "spec.updateStrategy.rollingUpdate.partition",
                        errors,
                    );
                }
            }
            other => errors.push(FieldError::invalid(
                "spec.updateStrategy",
                BadValue::str(other),
                "must be 'RollingUpdate' or 'OnDelete'",
            )),
        }
    }
    non_negative(spec, "replicas", "spec.replicas", errors);
    non_negative(spec, "minReadySeconds", "spec.minReadySeconds", errors);
    validate_required_selector(spec, "statefulset", errors);
    validate_selector_matches_template(spec, errors);
    validate_pod_template_metadata(template(spec), "spec.template", errors);
    validate_long_running_template(spec, "StatefulSet", errors);
}

pub(crate) fn validate_daemon_set(object: &Value, errors: &mut FieldErrors) {
    let spec = spec(object);
    let selector = spec.get("selector").filter(|s| !s.is_null());
    validate_label_selector(selector, "spec.selector", errors);
    let labels = template_labels(template(spec));
    if !selector_matches(selector, labels) {
        errors.push(FieldError::invalid(
            "spec.template.metadata.labels",
            BadValue::Raw(go_string_map(labels.and_then(Value::as_object))),
            "`selector` does not match template `labels`",
        ));
    }
    if let Some(selector) = selector.filter(|s| is_empty_selector(s)) {
        errors.push(FieldError::invalid(
            "spec.selector",
            go_label_selector(selector),
            "empty selector is invalid for daemonset",
        ));
    }
    validate_pod_template(template(spec), "spec.template", errors);
    validate_long_running_template(spec, "DaemonSet", errors);
    non_negative(spec, "minReadySeconds", "spec.minReadySeconds", errors);
    non_negative(
        spec,
        "revisionHistoryLimit",
        "spec.revisionHistoryLimit",
        errors,
    );
    if let Some(strategy) = spec.get("updateStrategy") {
        match str_of(strategy, "type") {
            "OnDelete" => {}
            "RollingUpdate" => {
                if let Some(rolling) = strategy.get("rollingUpdate").filter(|v| !v.is_null()) {
                    validate_rolling_update(rolling, "spec.updateStrategy.rollingUpdate", errors);
                }
            }
            other => errors.push(FieldError::not_supported(
                "spec.updateStrategy.type",
                BadValue::str(other),
                &["OnDelete", "RollingUpdate"],
            )),
        }
    }
}

/// Job spec at `path` (`spec` of a Job, `spec.jobTemplate.spec` of a CronJob).
fn validate_job_spec(spec: &Value, path: &str, errors: &mut FieldErrors) {
    for field in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
    ] {
        non_negative(spec, field, &format!("{path}.{field}"), errors);
    }
    let selector = spec.get("selector").filter(|s| !s.is_null());
    let template = template(spec);
    if path == "spec" && selector.is_none() {
        errors.push(FieldError::required("spec.selector", ""));
    }
    if selector.is_some() {
        validate_label_selector(selector, &format!("{path}.selector"), errors);
        let labels = template_labels(template);
        if !selector_matches(selector, labels) {
            errors.push(FieldError::invalid(
                &format!("{path}.template.metadata.labels"),
                BadValue::Raw(go_string_map(labels.and_then(Value::as_object))),
                "`selector` does not match template `labels`",
            ));
        }
    }
    let mode = str_of(spec, "completionMode");
    if !mode.is_empty() && !matches!(mode, "NonIndexed" | "Indexed") {
        errors.push(FieldError::not_supported(
            &format!("{path}.completionMode"),
            BadValue::str(mode),
            &["NonIndexed", "Indexed"],
        ));
    }
    validate_pod_template(template, &format!("{path}.template"), errors);
    let restart_policy = template
        .get("spec")
        .map(|s| str_of(s, "restartPolicy"))
        .unwrap_or_default();
    if !matches!(restart_policy, "OnFailure" | "Never") {
        errors.push(FieldError::not_supported(
            &format!("{path}.template.spec.restartPolicy"),
            BadValue::str(restart_policy),
            &["OnFailure", "Never"],
        ));
    }
}

pub(crate) fn validate_job(object: &Value, errors: &mut FieldErrors) {
    validate_job_spec(spec(object), "spec", errors);
}

pub(crate) fn validate_cron_job(object: &Value, errors: &mut FieldErrors) {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if name.len() > 52 {
        errors.push(FieldError::invalid(
            "metadata.name",
            BadValue::str(name),
            &max_len_error(52),
        ));
    }
    let spec = spec(object);
    if str_of(spec, "schedule").is_empty() {
        errors.push(FieldError::required("spec.schedule", ""));
    }
    let policy = str_of(spec, "concurrencyPolicy");
    if !matches!(policy, "Allow" | "Forbid" | "Replace") {
        let field = "spec.concurrencyPolicy";
        if policy.is_empty() {
            errors.push(FieldError::required(field, ""));
        } else {
            errors.push(FieldError::not_supported(
                field,
                BadValue::str(policy),
                &["Allow", "Forbid", "Replace"],
            ));
        }
    }
    non_negative(
        spec,
        "startingDeadlineSeconds",
        "spec.startingDeadlineSeconds",
        errors,
    );
    non_negative(
        spec,
        "successfulJobsHistoryLimit",
        "spec.successfulJobsHistoryLimit",
        errors,
    );
    non_negative(
        spec,
        "failedJobsHistoryLimit",
        "spec.failedJobsHistoryLimit",
        errors,
    );
    let job_spec = spec
        .pointer("/jobTemplate/spec")
        .cloned()
        .unwrap_or(Value::Null);
    validate_job_spec(&job_spec, "spec.jobTemplate.spec", errors);
}

/// `field is immutable` on `spec.selector`.
fn immutable_selector(old: &Value, new: &Value, errors: &mut FieldErrors) {
    let (before, after) = (spec(old).get("selector"), spec(new).get("selector"));
    if before != after {
        let value = after.map_or(BadValue::Raw("null".into()), go_label_selector);
        errors.push(FieldError::invalid(
            "spec.selector",
            value,
            "field is immutable",
        ));
    }
}

/// Update rules of the workload kinds (after the create checks on `new`).
pub(crate) fn validate_workload_update(
    kind: &str,
    old: &Value,
    new: &Value,
    errors: &mut FieldErrors,
) {
    match kind {
        "Deployment" | "ReplicaSet" | "DaemonSet" => immutable_selector(old, new, errors),
        "StatefulSet" => {
            let mut masked = spec(new).clone();
            let old_spec = spec(old);
            if let Some(masked) = masked.as_object_mut() {
                for field in [
                    "replicas",
                    "template",
                    "updateStrategy",
                    "minReadySeconds",
                    "ordinals",
                    "revisionHistoryLimit",
                    "persistentVolumeClaimRetentionPolicy",
                ] {
                    match old_spec.get(field) {
                        Some(v) => masked.insert(field.to_string(), v.clone()),
                        None => masked.remove(field),
                    };
                }
            }
            if &masked != old_spec {
                errors.push(FieldError::forbidden(
                    "spec",
                    "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
                ));
            }
        }
        "Job" => {
            immutable_selector(old, new, errors);
            let (old_spec, new_spec) = (spec(old), spec(new));
            let suspended = new_spec.get("suspend").and_then(Value::as_bool) == Some(true);
            if old_spec.get("template") != new_spec.get("template") && !suspended {
                errors.push(FieldError::invalid(
                    "spec.template",
                    BadValue::Raw("core.PodTemplateSpec{...}".into()),
                    "field is immutable",
                ));
            }
            for field in ["completionMode", "completions"] {
                let (before, after) = (old_spec.get(field), new_spec.get(field));
                if before != after {
                    let value = match after {
                        Some(Value::String(s)) => BadValue::Str(s.clone()),
                        Some(Value::Number(n)) => BadValue::Int(n.as_i64().unwrap_or_default()),
                        _ => BadValue::Raw("null".into()),
                    };
                    errors.push(FieldError::invalid(
                        &format!("spec.{field}"),
                        value,
                        "field is immutable",
                    ));
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    type CheckCase<'a> = (fn(&Value, &mut FieldErrors), Value, Vec<&'a str>);

    fn deployment(selector: Value, labels: Value, replicas: i64, restart: &str) -> Value {
        json!({"metadata": {"name": "d"}, "spec": {"replicas": replicas, "selector": selector,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
            "template": {"metadata": {"labels": labels}, "spec": {"restartPolicy": restart, "dnsPolicy": "ClusterFirst",
                "containers": [{"name": "c", "image": "x", "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File"}]}}}})
    }

    fn rendered(check: fn(&Value, &mut FieldErrors), object: &Value) -> Vec<String> {
        let mut errors = Vec::new();
        check(object, &mut errors);
        errors.iter().map(FieldError::rendered).collect()
    }

    #[test]
    fn workload_errors_are_worded_as_kube() {
        let ok = json!({"matchLabels": {"app": "x"}});
        let cases: Vec<CheckCase> = vec![
            (
                validate_deployment,
                deployment(ok.clone(), json!({"app": "x"}), 1, "Always"),
                vec![],
            ),
            (
                validate_deployment,
                deployment(ok.clone(), json!({"app": "y"}), 1, "Always"),
                vec![
                    "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"y\"}: `selector` does not match template `labels`",
                ],
            ),
            (
                validate_deployment,
                deployment(ok.clone(), json!({"app": "x"}), -1, "Always"),
                vec!["spec.replicas: Invalid value: -1: must be greater than or equal to 0"],
            ),
            (
                validate_deployment,
                deployment(ok.clone(), json!({"app": "x"}), 1, "Never"),
                vec![
                    "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
                ],
            ),
            (
                validate_deployment,
                deployment(json!({}), json!({"app": "x"}), 1, "Always"),
                vec![
                    "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment",
                ],
            ),
            (
                validate_deployment,
                deployment(Value::Null, json!({"app": "x"}), 1, "Always"),
                vec!["spec.selector: Required value"],
            ),
            (
                validate_replica_set,
                deployment(ok.clone(), json!({"app": "x"}), 1, "OnFailure"),
                vec![
                    "spec.template.spec.restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\"",
                ],
            ),
            (
                validate_daemon_set,
                deployment(ok.clone(), json!({"app": "z"}), 1, "Always"),
                vec![
                    "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"z\"}: `selector` does not match template `labels`",
                ],
            ),
            (
                validate_job,
                deployment(ok.clone(), json!({"app": "x"}), 1, "Always"),
                vec![
                    "spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\"",
                ],
            ),
            (
                validate_job,
                deployment(ok.clone(), json!({"app": "x"}), 1, "Never"),
                vec![],
            ),
        ];
        for (check, object, want) in cases {
            assert_eq!(rendered(check, &object), want, "{object}");
        }
    }

    #[test]
    fn stateful_sets_check_policy_and_selector() {
        let mut set = deployment(
            json!({"matchLabels": {"app": "x"}}),
            json!({"app": "x"}),
            1,
            "Always",
        );
        set["spec"]["podManagementPolicy"] = json!("Random");
        assert_eq!(
            rendered(validate_stateful_set, &set),
            vec![
                "spec.podManagementPolicy: Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'",
            ]
        );
        set["spec"]["podManagementPolicy"] = json!("Parallel");
        set["spec"]["selector"] = json!({"matchLabels": {"app": "other"}});
        assert_eq!(
            rendered(validate_stateful_set, &set),
            vec![
                "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"x\"}: `selector` does not match template `labels`",
            ]
        );
    }

    #[test]
    fn rolling_update_values_are_checked() {
        let mut errors = Vec::new();
        validate_rolling_update(
            &json!({"maxUnavailable": 0, "maxSurge": "0%"}),
            "spec.strategy.rollingUpdate",
            &mut errors,
        );
        validate_rolling_update(
            &json!({"maxUnavailable": "150%", "maxSurge": "x"}),
            "spec.strategy.rollingUpdate",
            &mut errors,
        );
        let rendered: Vec<String> = errors.iter().map(FieldError::rendered).collect();
        assert_eq!(
            rendered,
            vec![
                "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: may not be 0 when `maxSurge` is 0",
                "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%",
                &format!(
                    "spec.strategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{{Type:1, IntVal:0, StrVal:\"x\"}}: {PERCENT_MSG}"
                ),
            ]
        );
    }

    #[test]
    fn workload_updates_guard_immutable_fields() {
        let old = deployment(
            json!({"matchLabels": {"app": "x"}}),
            json!({"app": "x"}),
            1,
            "Always",
        );
        let mut new = old.clone();
        new["spec"]["selector"] = json!({"matchLabels": {"app": "y"}});
        let mut errors = Vec::new();
        validate_workload_update("Deployment", &old, &new, &mut errors);
        assert_eq!(
            errors.iter().map(FieldError::rendered).collect::<Vec<_>>(),
            vec![
                "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"y\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable",
            ]
        );

        let mut scaled = old.clone();
        scaled["spec"]["replicas"] = json!(5);
        scaled["spec"]["template"]["spec"]["containers"][0]["image"] = json!("y");
        let mut errors = Vec::new();
        validate_workload_update("StatefulSet", &old, &scaled, &mut errors);
        assert!(errors.is_empty());
        let mut renamed = old.clone();
        renamed["spec"]["serviceName"] = json!("other");
        validate_workload_update("StatefulSet", &old, &renamed, &mut errors);
        assert_eq!(
            errors.iter().map(FieldError::rendered).collect::<Vec<_>>(),
            vec![
                "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
            ]
        );
    }
}
