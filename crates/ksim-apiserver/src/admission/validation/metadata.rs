//! Object metadata checks (`ValidateObjectMeta`, `ValidateObjectMetaUpdate`),
//! labels, annotations and the per-kind name rules.

use serde_json::Value;

use crate::admission::field::{BadValue, FieldError, FieldErrors, child, go_quote};
use crate::admission::json::str_of;
use crate::admission::names::{
    is_dns1035_label, is_dns1123_label, is_dns1123_subdomain, is_qualified_name,
    is_valid_label_value,
};

/// Total size of all annotations (keys and values), in bytes.
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// How a kind's names are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameRule {
    /// `NameIsDNSSubdomain`: most kinds.
    Subdomain,
    /// `NameIsDNSLabel`: namespaces.
    Label,
    /// `NameIsDNS1035Label`: services.
    Dns1035Label,
}

impl NameRule {
    /// The messages for a name (or a generateName prefix, which may end in `-`).
    fn check(self, name: &str, prefix: bool) -> Vec<String> {
        let masked;
        let name = if prefix && name.len() > 1 && name.ends_with('-') {
            // kube's maskTrailingDash drops the last two bytes before adding `a`
            let cut = name.len() - 2;
            masked = format!("{}a", name.get(..cut).unwrap_or_default());
            masked.as_str()
        } else {
            name
        };
        match self {
            NameRule::Subdomain => is_dns1123_subdomain(name),
            NameRule::Label => is_dns1123_label(name),
            NameRule::Dns1035Label => is_dns1035_label(name),
        }
    }
}

fn string_entries(map: Option<&Value>) -> Vec<(String, String)> {
    let mut entries: Vec<(String, String)> = map
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    entries.sort();
    entries
}

/// `ValidateLabels`: keys are qualified names, values label values.
pub(crate) fn validate_labels(labels: Option<&Value>, path: &str, errors: &mut FieldErrors) {
    for (key, value) in string_entries(labels) {
        for msg in is_qualified_name(&key) {
            errors.push(FieldError::invalid(path, BadValue::Str(key.clone()), &msg));
        }
        for msg in is_valid_label_value(&value) {
            errors.push(FieldError::invalid(
                path,
                BadValue::Str(value.clone()),
                &msg,
            ));
        }
    }
}

/// `ValidateAnnotations`: keys are qualified names (any case), total size bounded.
pub(crate) fn validate_annotations(
    annotations: Option<&Value>,
    path: &str,
    errors: &mut FieldErrors,
) {
    let entries = string_entries(annotations);
    let mut size = 0;
    for (key, value) in &entries {
        for msg in is_qualified_name(&key.to_lowercase()) {
            errors.push(FieldError::invalid(path, BadValue::Str(key.clone()), &msg));
        }
        size += key.len() + value.len();
    }
    if size > TOTAL_ANNOTATION_SIZE_LIMIT {
        errors.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
}

/// `ValidateObjectMeta` (without the namespace rules, which the server applies).
pub(crate) fn validate_object_meta(object: &Value, rule: NameRule, errors: &mut FieldErrors) {
    let null = Value::Null;
    let metadata = object.get("metadata").unwrap_or(&null);
    let generate_name = str_of(metadata, "generateName");
    if !generate_name.is_empty() {
        for msg in rule.check(generate_name, true) {
            errors.push(FieldError::invalid(
                "metadata.generateName",
                BadValue::str(generate_name),
                &msg,
            ));
        }
    }
    let name = str_of(metadata, "name");
    if name.is_empty() {
        errors.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for msg in rule.check(name, false) {
            errors.push(FieldError::invalid(
                "metadata.name",
                BadValue::str(name),
                &msg,
            ));
        }
    }
    if let Some(generation) = metadata.get("generation").and_then(Value::as_i64)
        && generation < 0
    {
        errors.push(FieldError::invalid(
            "metadata.generation",
            BadValue::Int(generation),
            "must be greater than or equal to 0",
        ));
    }
    validate_labels(metadata.get("labels"), "metadata.labels", errors);
    validate_annotations(metadata.get("annotations"), "metadata.annotations", errors);
}

/// `metav1.Time` as Go's `time.Time.String()` prints it.
fn go_time(text: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.to_utc().format("%Y-%m-%d %H:%M:%S +0000 UTC").to_string())
        .unwrap_or_else(|_| text.to_string())
}

/// `ValidateObjectMetaUpdate`: name, namespace, uid and creationTimestamp are
/// immutable; labels and annotations are checked again (names are not).
pub(crate) fn validate_object_meta_update(old: &Value, new: &Value, errors: &mut FieldErrors) {
    let null = Value::Null;
    let old_meta = old.get("metadata").unwrap_or(&null);
    let new_meta = new.get("metadata").unwrap_or(&null);
    for field in ["name", "namespace", "uid", "creationTimestamp"] {
        let before = str_of(old_meta, field);
        let after = str_of(new_meta, field);
        if before != after {
            let value = if field == "creationTimestamp" {
                BadValue::Raw(go_time(after))
            } else {
                BadValue::str(after)
            };
            errors.push(FieldError::invalid(
                &child("metadata", field),
                value,
                "field is immutable",
            ));
        }
    }
    validate_labels(new_meta.get("labels"), "metadata.labels", errors);
    validate_annotations(new_meta.get("annotations"), "metadata.annotations", errors);
    if old_meta
        .get("deletionTimestamp")
        .is_some_and(Value::is_string)
    {
        let finalizers = |meta: &Value| -> Vec<String> {
            meta.get("finalizers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        };
        let before = finalizers(old_meta);
        let added: Vec<String> = finalizers(new_meta)
            .into_iter()
            .filter(|f| !before.contains(f))
            .map(|f| go_quote(&f))
            .collect();
        if !added.is_empty() {
            errors.push(FieldError::forbidden(
                "metadata.finalizers",
                &format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    added.join(", ")
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rendered(object: Value, rule: NameRule) -> Vec<String> {
        let mut errors = Vec::new();
        validate_object_meta(&object, rule, &mut errors);
        errors.iter().map(FieldError::rendered).collect()
    }

    #[test]
    fn terminating_objects_take_no_new_finalizers() {
        let old = json!({"metadata": {"name": "a", "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["x/a"]}});
        let new = json!({"metadata": {"name": "a", "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["x/a", "x/b"]}});
        let mut errors = Vec::new();
        validate_object_meta_update(&old, &new, &mut errors);
        let rendered: Vec<String> = errors.iter().map(FieldError::rendered).collect();
        assert_eq!(
            rendered,
            [
                "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"x/b\"}"
            ]
        );
        let mut errors = Vec::new();
        validate_object_meta_update(&old, &old, &mut errors);
        assert!(errors.is_empty());
    }

    #[test]
    fn metadata_errors_are_worded_as_kube() {
        let cases = [
            (
                json!({"metadata": {}}),
                NameRule::Subdomain,
                vec!["metadata.name: Required value: name or generateName is required"],
            ),
            (
                json!({"metadata": {"name": "ok", "generateName": "web-"}}),
                NameRule::Subdomain,
                vec![],
            ),
            (
                json!({"metadata": {"name": "Foo_Bar"}}),
                NameRule::Subdomain,
                vec![
                    "metadata.name: Invalid value: \"Foo_Bar\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                ],
            ),
            (
                json!({"metadata": {"name": "a_b"}}),
                NameRule::Label,
                vec![
                    "metadata.name: Invalid value: \"a_b\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                ],
            ),
            (
                json!({"metadata": {"name": "1web"}}),
                NameRule::Dns1035Label,
                vec![
                    "metadata.name: Invalid value: \"1web\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
                ],
            ),
            (
                json!({"metadata": {"name": "x", "labels": {"app": "a b"}}}),
                NameRule::Subdomain,
                vec![
                    "metadata.labels: Invalid value: \"a b\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                ],
            ),
            (
                json!({"metadata": {"name": "x", "labels": {"-app": "a"}}}),
                NameRule::Subdomain,
                vec![
                    "metadata.labels: Invalid value: \"-app\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                ],
            ),
            (
                json!({"metadata": {"name": "x", "annotations": {"Example.com/Key": "v"}}}),
                NameRule::Subdomain,
                vec![],
            ),
            (
                json!({"metadata": {"name": "x", "annotations": {"a/b/c": "v"}}}),
                NameRule::Subdomain,
                vec![
                    "metadata.annotations: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                ],
            ),
            (
                json!({"metadata": {"name": "x", "annotations": {"big": "v".repeat(262_145)}}}),
                NameRule::Subdomain,
                vec!["metadata.annotations: Too long: may not be more than 262144 bytes"],
            ),
        ];
        for (object, rule, want) in cases {
            assert_eq!(rendered(object.clone(), rule), want, "{object}");
        }
    }

    #[test]
    fn identity_fields_are_immutable() {
        let old = json!({"metadata": {"name": "a", "namespace": "n", "uid": "1", "creationTimestamp": "2025-01-02T03:04:05Z"}});
        let new = json!({"metadata": {"name": "b", "namespace": "n", "uid": "2", "creationTimestamp": "2025-01-02T03:04:06Z"}});
        let mut errors = Vec::new();
        validate_object_meta_update(&old, &new, &mut errors);
        let rendered: Vec<String> = errors.iter().map(FieldError::rendered).collect();
        assert_eq!(
            rendered,
            vec![
                "metadata.name: Invalid value: \"b\": field is immutable",
                "metadata.uid: Invalid value: \"2\": field is immutable",
                "metadata.creationTimestamp: Invalid value: 2025-01-02 03:04:06 +0000 UTC: field is immutable",
            ]
        );
    }
}
