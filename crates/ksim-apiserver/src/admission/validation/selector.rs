//! Label selectors in validation: `ValidateLabelSelector`, matching a
//! template's labels, and the Go rendering of selectors and int-or-strings
//! that kube prints as bad values.

use ksim_core::selector::{LabelSelectorRequirements, NoLabels};
use serde_json::Value;

use super::metadata::validate_labels;
use crate::admission::field::{
    BadValue, FieldError, FieldErrors, child, go_quote, go_string_map, index,
};
use crate::admission::json::{array_of, str_of};
use crate::admission::names::{is_qualified_name, is_valid_label_value};

/// `ValidateLabelSelector` (strict label values).
pub(crate) fn validate_label_selector(
    selector: Option<&Value>,
    path: &str,
    errors: &mut FieldErrors,
) {
    let Some(selector) = selector.filter(|s| !s.is_null()) else {
        return;
    };
    validate_labels(
        selector.get("matchLabels"),
        &child(path, "matchLabels"),
        errors,
    );
    let expressions_path = child(path, "matchExpressions");
    for (i, requirement) in array_of(selector, "matchExpressions").iter().enumerate() {
        let requirement_path = index(&expressions_path, i);
        let operator = str_of(requirement, "operator");
        let values = array_of(requirement, "values");
        match operator {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errors.push(FieldError::required(
                        &child(&requirement_path, "values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errors.push(FieldError::forbidden(
                        &child(&requirement_path, "values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            _ => errors.push(FieldError::invalid(
                &child(&requirement_path, "operator"),
                BadValue::str(operator),
                "not a valid selector operator",
            )),
        }
        let key = str_of(requirement, "key");
        for msg in is_qualified_name(key) {
            errors.push(FieldError::invalid(
                &child(&requirement_path, "key"),
                BadValue::str(key),
                &msg,
            ));
        }
        let values_path = child(&requirement_path, "values");
        for (j, value) in values.iter().enumerate() {
            let value = value.as_str().unwrap_or_default();
            for msg in is_valid_label_value(value) {
                errors.push(FieldError::invalid(
                    &index(&values_path, j),
                    BadValue::str(value),
                    &msg,
                ));
            }
        }
    }
}

/// Whether a selector has neither matchLabels nor matchExpressions.
pub(crate) fn is_empty_selector(selector: &Value) -> bool {
    selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| m.is_empty())
        && array_of(selector, "matchExpressions").is_empty()
}

/// Whether a (valid) selector matches a set of labels; a missing or
/// malformed selector matches nothing. Matching is ksim-core's.
pub(crate) fn selector_matches(selector: Option<&Value>, labels: Option<&Value>) -> bool {
    let Some(selector) = selector.filter(|s| !s.is_null()) else {
        return false;
    };
    let Ok(requirements) = LabelSelectorRequirements::from_json(selector) else {
        return false;
    };
    match labels.and_then(Value::as_object) {
        Some(labels) => requirements.matches(labels),
        None => requirements.matches(&NoLabels),
    }
}

/// `%#v` of a `v1.LabelSelector`.
pub(crate) fn go_label_selector(selector: &Value) -> BadValue {
    let match_labels = go_string_map(selector.get("matchLabels").and_then(Value::as_object));
    let expressions = match selector.get("matchExpressions").and_then(Value::as_array) {
        None => "[]v1.LabelSelectorRequirement(nil)".to_string(),
        Some(list) => {
            let items: Vec<String> = list
                .iter()
                .map(|r| {
                    let values = match r.get("values").and_then(Value::as_array) {
                        None => "[]string(nil)".to_string(),
                        Some(v) => format!(
                            "[]string{{{}}}",
                            v.iter()
                                .map(|x| go_quote(x.as_str().unwrap_or_default()))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    };
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{values}}}",
                        go_quote(str_of(r, "key")),
                        go_quote(str_of(r, "operator"))
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
    };
    BadValue::Raw(format!(
        "v1.LabelSelector{{MatchLabels:{match_labels}, MatchExpressions:{expressions}}}"
    ))
}

/// `%#v` of an `intstr.IntOrString`.
pub(crate) fn go_int_or_string(value: &Value) -> BadValue {
    match value {
        Value::String(s) => BadValue::Raw(format!(
            "intstr.IntOrString{{Type:1, IntVal:0, StrVal:{}}}",
            go_quote(s)
        )),
        other => BadValue::Raw(format!(
            "intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}",
            other.as_i64().unwrap_or_default()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selector_errors_are_worded_as_kube() {
        let selector = json!({"matchExpressions": [
            {"key": "a", "operator": "Like", "values": ["x"]},
            {"key": "b", "operator": "In"},
            {"key": "c", "operator": "Exists", "values": ["x"]},
        ]});
        let mut errors = Vec::new();
        validate_label_selector(Some(&selector), "spec.selector", &mut errors);
        let rendered: Vec<String> = errors.iter().map(FieldError::rendered).collect();
        assert_eq!(
            rendered,
            vec![
                "spec.selector.matchExpressions[0].operator: Invalid value: \"Like\": not a valid selector operator",
                "spec.selector.matchExpressions[1].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
                "spec.selector.matchExpressions[2].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            ]
        );
    }

    #[test]
    fn selectors_match_labels() {
        let labels = json!({"app": "web", "tier": "front"});
        let cases = [
            (json!({"matchLabels": {"app": "web"}}), true),
            (json!({"matchLabels": {"app": "db"}}), false),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "back"]}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}),
                false,
            ),
        ];
        for (selector, want) in cases {
            assert_eq!(
                selector_matches(Some(&selector), Some(&labels)),
                want,
                "{selector}"
            );
        }
        assert!(!selector_matches(None, Some(&labels)));
    }

    #[test]
    fn go_renderings() {
        assert_eq!(
            go_label_selector(&json!({})),
            BadValue::Raw("v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}".into())
        );
        assert_eq!(
            go_int_or_string(&json!("50")),
            BadValue::Raw("intstr.IntOrString{Type:1, IntVal:0, StrVal:\"50\"}".into())
        );
    }
}
