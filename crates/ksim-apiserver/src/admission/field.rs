//! Field errors as apimachinery's `field.Error` renders them: the error
//! types, the Go-style rendering of bad values, and the list that becomes
//! the causes of a 422 `Invalid` status.

use serde_json::Value;

use crate::StatusCause;

/// A bad value, rendered as `field.Error.ErrorBody` renders it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum BadValue {
    /// A Go string: rendered quoted (`%q`).
    Str(String),
    /// A Go integer: rendered plain.
    Int(i64),
    /// Already rendered Go syntax (`%#v` of a map or struct).
    Raw(String),
}

impl BadValue {
    pub(crate) fn str(value: &str) -> Self {
        BadValue::Str(value.to_string())
    }

    /// A value of unstructured JSON as Go renders the decoded value
    /// (`"x"`, `3`, `1.5`, `true`, `map[string]interface {}{...}`).
    pub(crate) fn json(value: &Value) -> Self {
        match value {
            Value::String(s) => BadValue::Str(s.clone()),
            Value::Number(n) if n.as_i64().is_some() => {
                BadValue::Int(n.as_i64().unwrap_or_default())
            }
            other => BadValue::Raw(go_sharp_v(other)),
        }
    }

    fn render(&self) -> String {
        match self {
            BadValue::Str(s) => go_quote(s),
            BadValue::Int(i) => i.to_string(),
            BadValue::Raw(r) => r.clone(),
        }
    }
}

/// `%q` of a Go string (the common escapes; other characters as they are).
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A float as Go's `%v` prints it (plain up to 1e21).
pub(crate) fn go_float(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e21 {
        format!("{f:.0}")
    } else {
        f.to_string()
    }
}

/// `%#v` of decoded unstructured JSON (maps with sorted keys, as Go prints them).
pub(crate) fn go_sharp_v(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => go_float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => go_quote(s),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_sharp_v).collect();
            format!("[]interface {{}}{{{}}}", items.join(", "))
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let entries: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", go_quote(k), go_sharp_v(&map[k])))
                .collect();
            format!("map[string]interface {{}}{{{}}}", entries.join(", "))
        }
    }
}

/// `%#v` of a Go `map[string]string` (keys sorted, as Go prints maps).
pub(crate) fn go_string_map(map: Option<&serde_json::Map<String, Value>>) -> String {
    let Some(map) = map else {
        return "map[string]string(nil)".to_string();
    };
    let mut entries: Vec<(&String, String)> = map
        .iter()
        .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_string()))
        .collect();
    entries.sort();
    let body: Vec<String> = entries
        .iter()
        .map(|(k, v)| format!("{}:{}", go_quote(k), go_quote(v)))
        .collect();
    format!("map[string]string{{{}}}", body.join(", "))
}

/// One field error.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldError {
    reason: &'static str,
    field: String,
    body: String,
}

impl FieldError {
    fn with_value(
        reason: &'static str,
        kind: &str,
        field: &str,
        value: &BadValue,
        detail: &str,
    ) -> Self {
        let mut body = format!("{kind}: {}", value.render());
        if !detail.is_empty() {
            body.push_str(": ");
            body.push_str(detail);
        }
        FieldError {
            reason,
            field: field.to_string(),
            body,
        }
    }

    fn plain(reason: &'static str, kind: &str, field: &str, detail: &str) -> Self {
        let body = if detail.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}: {detail}")
        };
        FieldError {
            reason,
            field: field.to_string(),
            body,
        }
    }

    /// `Required value[: detail]`.
    pub(crate) fn required(field: &str, detail: &str) -> Self {
        Self::plain("FieldValueRequired", "Required value", field, detail)
    }

    /// `Invalid value: <value>: detail`.
    pub(crate) fn invalid(field: &str, value: BadValue, detail: &str) -> Self {
        Self::with_value("FieldValueInvalid", "Invalid value", field, &value, detail)
    }

    /// `Invalid value: <value>: detail`, of a value of the wrong type.
    pub(crate) fn type_invalid(field: &str, value: BadValue, detail: &str) -> Self {
        Self::with_value(
            "FieldValueTypeInvalid",
            "Invalid value",
            field,
            &value,
            detail,
        )
    }

    /// `Too many: <actual>: must have at most N items`.
    pub(crate) fn too_many(field: &str, actual: usize, max: i64) -> Self {
        let noun = if max == 1 { "item" } else { "items" };
        Self::with_value(
            "FieldValueTooMany",
            "Too many",
            field,
            &BadValue::Int(i64::try_from(actual).unwrap_or(i64::MAX)),
            &format!("must have at most {max} {noun}"),
        )
    }

    /// `Unsupported value: <value>: supported values: "a", "b"`.
    pub(crate) fn not_supported(field: &str, value: BadValue, supported: &[&str]) -> Self {
        let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        let detail = format!("supported values: {}", quoted.join(", "));
        Self::with_value(
            "FieldValueNotSupported",
            "Unsupported value",
            field,
            &value,
            &detail,
        )
    }

    /// `Forbidden: detail`.
    pub(crate) fn forbidden(field: &str, detail: &str) -> Self {
        Self::plain("FieldValueForbidden", "Forbidden", field, detail)
    }

    /// `Duplicate value: <value>`.
    pub(crate) fn duplicate(field: &str, value: BadValue) -> Self {
        Self::with_value("FieldValueDuplicate", "Duplicate value", field, &value, "")
    }

    /// `Not found: <value>`.
    pub(crate) fn not_found(field: &str, value: BadValue) -> Self {
        Self::with_value("FieldValueNotFound", "Not found", field, &value, "")
    }

    /// `Too long: may not be more than N bytes`.
    pub(crate) fn too_long(field: &str, max_bytes: usize) -> Self {
        let noun = if max_bytes == 1 { "byte" } else { "bytes" };
        Self::plain(
            "FieldValueTooLong",
            "Too long",
            field,
            &format!("may not be more than {max_bytes} {noun}"),
        )
    }

    /// The `field: body` rendering (as in the status message).
    #[cfg(test)]
    pub(crate) fn rendered(&self) -> String {
        format!("{}: {}", self.field, self.body)
    }

    pub(crate) fn into_cause(self) -> StatusCause {
        StatusCause {
            reason: self.reason.to_string(),
            message: self.body,
            field: self.field,
        }
    }
}

/// The field errors of one object, in the order kube reports them.
pub(crate) type FieldErrors = Vec<FieldError>;

/// A field path, built the way apimachinery's `field.Path` prints.
pub(crate) fn child(parent: &str, name: &str) -> String {
    // Pushed, not formatted: validation builds a path per field it looks at.
    if parent.is_empty() {
        name.to_string()
    } else {
        let mut path = String::with_capacity(parent.len() + name.len() + 1);
        path.push_str(parent);
        path.push('.');
        path.push_str(name);
        path
    }
}

/// `parent[i]`.
pub(crate) fn index(parent: &str, i: usize) -> String {
    let mut path = String::with_capacity(parent.len() + 8);
    path.push_str(parent);
    path.push('[');
    path.push_str(itoa_usize(i).as_str());
    path.push(']');
    path
}

/// The decimal digits of `i`, without the formatting machinery.
fn itoa_usize(mut i: usize) -> String {
    let mut digits = Vec::with_capacity(20);
    loop {
        digits.push(b'0' + (i % 10) as u8);
        i /= 10;
        if i == 0 {
            break;
        }
    }
    digits.reverse();
    String::from_utf8(digits).unwrap_or_default()
}

/// `parent[key]`.
pub(crate) fn key(parent: &str, key: &str) -> String {
    format!("{parent}[{key}]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_joined_as_field_paths_print() {
        assert_eq!(child("", "spec"), "spec");
        assert_eq!(child("spec", "containers"), "spec.containers");
        for (i, want) in [
            (0, "a[0]"),
            (7, "a[7]"),
            (10, "a[10]"),
            (1234567, "a[1234567]"),
        ] {
            assert_eq!(index("a", i), want);
        }
        assert_eq!(index("a", usize::MAX), format!("a[{}]", usize::MAX));
    }

    #[test]
    fn bodies_render_like_field_error_body() {
        let cases = [
            (
                FieldError::required("spec.containers", ""),
                "spec.containers: Required value",
            ),
            (
                FieldError::required("metadata.name", "name or generateName is required"),
                "metadata.name: Required value: name or generateName is required",
            ),
            (
                FieldError::invalid(
                    "spec.replicas",
                    BadValue::Int(-1),
                    "must be greater than or equal to 0",
                ),
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            ),
            (
                FieldError::not_supported(
                    "spec.restartPolicy",
                    BadValue::str("Sometimes"),
                    &["Always", "OnFailure", "Never"],
                ),
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            ),
            (
                FieldError::duplicate("spec.containers[1].name", BadValue::str("a")),
                "spec.containers[1].name: Duplicate value: \"a\"",
            ),
            (
                FieldError::too_long("metadata.annotations", 262144),
                "metadata.annotations: Too long: may not be more than 262144 bytes",
            ),
        ];
        for (error, want) in cases {
            assert_eq!(error.rendered(), want);
        }
    }

    #[test]
    fn string_maps_print_as_go_sorted_maps() {
        let map = serde_json::json!({"b": "2", "a": "x\"y"});
        assert_eq!(
            go_string_map(map.as_object()),
            "map[string]string{\"a\":\"x\\\"y\", \"b\":\"2\"}"
        );
        assert_eq!(go_string_map(None), "map[string]string(nil)");
    }
}
