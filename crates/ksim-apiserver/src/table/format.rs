//! Small formatting helpers shared by the printers: reading fields out of
//! JSON objects, label maps and selectors, container lists, access modes.

use serde_json::Value;

/// The value at `path` (object keys) in `object`.
pub fn at<'a>(object: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(object, |v, key| v.get(key))
}

/// The string at `path`, if it is one.
pub fn str_at<'a>(object: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(object, path).and_then(Value::as_str)
}

/// The string at `path`, or `""`.
pub fn string_at(object: &Value, path: &[&str]) -> String {
    str_at(object, path).unwrap_or_default().to_string()
}

/// The integer at `path`, if it is one.
pub fn int_at(object: &Value, path: &[&str]) -> Option<i64> {
    at(object, path).and_then(Value::as_i64)
}

/// The boolean at `path`, if it is one.
pub fn bool_at(object: &Value, path: &[&str]) -> Option<bool> {
    at(object, path).and_then(Value::as_bool)
}

/// The array at `path`, or an empty slice.
pub fn array_at<'a>(object: &'a Value, path: &[&str]) -> &'a [Value] {
    at(object, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The number of entries of the map (or array) at `path`.
pub fn len_at(object: &Value, path: &[&str]) -> usize {
    match at(object, path) {
        Some(Value::Object(map)) => map.len(),
        Some(Value::Array(items)) => items.len(),
        _ => 0,
    }
}

/// `metadata.name`.
pub fn name(object: &Value) -> String {
    string_at(object, &["metadata", "name"])
}

/// `metadata.creationTimestamp`.
pub fn creation_timestamp(object: &Value) -> Option<&str> {
    str_at(object, &["metadata", "creationTimestamp"])
}

/// Whether `metadata.deletionTimestamp` is set.
pub fn is_deleting(object: &Value) -> bool {
    at(object, &["metadata", "deletionTimestamp"]).is_some_and(|v| !v.is_null())
}

/// `labels.FormatLabels`: `k=v` pairs sorted by key, `<none>` when empty.
pub fn format_labels(labels: Option<&Value>) -> String {
    let mut pairs: Vec<String> = labels
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    if pairs.is_empty() {
        return "<none>".to_string();
    }
    pairs.sort();
    pairs.join(",")
}

/// The string form of a `LabelSelector` as `labels.Selector.String()`
/// prints it (requirements sorted by key; `""` for a nil or empty selector),
/// or `None` when the selector is invalid.
pub fn label_selector_string(selector: Option<&Value>) -> Option<String> {
    let Some(selector) = selector.filter(|s| !s.is_null()) else {
        return Some(String::new());
    };
    let selector = serde_json::from_value(selector.clone()).ok()?;
    ksim_core::selector::label_selector_string(&selector).ok()
}

/// `metav1.FormatLabelSelector`: `<none>` for an empty selector, `<error>`
/// for an invalid one.
pub fn format_label_selector(selector: Option<&Value>) -> String {
    match label_selector_string(selector) {
        None => "<error>".to_string(),
        Some(s) if s.is_empty() => "<none>".to_string(),
        Some(s) => s,
    }
}

/// `layoutContainerCells`: container names and images, comma-separated.
pub fn container_cells(containers: &[Value]) -> (String, String) {
    let names: Vec<&str> = containers
        .iter()
        .map(|c| str_at(c, &["name"]).unwrap_or_default())
        .collect();
    let images: Vec<&str> = containers
        .iter()
        .map(|c| str_at(c, &["image"]).unwrap_or_default())
        .collect();
    (names.join(","), images.join(","))
}

/// `helper.GetAccessModesAsString`: `RWO,ROX,RWX,RWOP` in that order.
pub fn access_modes(modes: &[Value]) -> String {
    let has = |mode: &str| modes.iter().any(|m| m.as_str() == Some(mode));
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| has(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// An `IntOrString` as Go's `String()` prints it.
pub fn int_or_string(value: &Value) -> Option<String> {
    match value {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// A quantity as stored (ksim keeps quantities in the form written).
pub fn quantity(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "0".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_string_sorts_requirements_by_key() {
        let cases = [
            (json!(null), Some("")),
            (json!({}), Some("")),
            (
                json!({"matchLabels": {"b": "2", "a": "1"}}),
                Some("a=1,b=2"),
            ),
            (
                json!({"matchLabels": {"z": "1"}, "matchExpressions": [
                    {"key": "env", "operator": "In", "values": ["prod", "dev"]},
                    {"key": "tier", "operator": "NotIn", "values": ["x"]},
                    {"key": "a", "operator": "Exists"},
                    {"key": "b", "operator": "DoesNotExist"}
                ]}),
                Some("a,!b,env in (dev,prod),tier notin (x),z=1"),
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "In"}]}),
                None,
            ),
        ];
        for (selector, want) in cases {
            assert_eq!(
                label_selector_string(Some(&selector)).as_deref(),
                want,
                "{selector}"
            );
        }
    }

    #[test]
    fn format_label_selector_uses_placeholders() {
        assert_eq!(format_label_selector(None), "<none>");
        assert_eq!(format_label_selector(Some(&json!({}))), "<none>");
        assert_eq!(
            format_label_selector(Some(&json!({"matchExpressions": [{"key": "a"}]}))),
            "<error>"
        );
        assert_eq!(
            format_label_selector(Some(&json!({"matchLabels": {"app": "web"}}))),
            "app=web"
        );
    }

    #[test]
    fn format_labels_sorts_and_shows_none() {
        assert_eq!(format_labels(None), "<none>");
        assert_eq!(format_labels(Some(&json!({}))), "<none>");
        assert_eq!(format_labels(Some(&json!({"b": "2", "a": "1"}))), "a=1,b=2");
    }

    #[test]
    fn access_modes_print_in_fixed_order() {
        let modes = json!(["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"]);
        assert_eq!(access_modes(modes.as_array().expect("array")), "RWO,RWX");
        assert_eq!(access_modes(&[]), "");
    }
}
