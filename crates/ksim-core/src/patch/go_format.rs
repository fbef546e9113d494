//! The error messages of Kubernetes' strategic merge patch print JSON values
//! the way Go's `fmt` prints decoded `interface{}` values (`%v`, `%s`, and
//! `reflect.TypeOf`). This module renders a `serde_json::Value` the same way,
//! so that the messages users see match kube-apiserver's word for word.

use serde_json::Value;

/// `fmt.Sprintf("%v", value)` of a decoded JSON value: `map[a:1 b:x]`,
/// `[1 2]`, `<nil>`; map keys sorted as Go prints them.
pub(crate) fn go_value(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_value).collect();
            format!("[{}]", items.join(" "))
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let entries: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| format!("{k}:{}", go_value(v)))
                .collect();
            format!("map[{}]", entries.join(" "))
        }
    }
}

/// `fmt.Sprintf("%s", value)`: strings print as themselves, anything else
/// with Go's `%!s(type=value)` marker.
pub(crate) fn go_string_verb(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "%!s(<nil>)".to_owned(),
        other => format!("%!s({}={})", go_type(other), go_value(other)),
    }
}

/// `reflect.TypeOf(value).String()` of a decoded JSON value.
pub(crate) fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_print_like_go_percent_v() {
        let cases = [
            (json!(null), "<nil>"),
            (json!(true), "true"),
            (json!(80), "80"),
            (json!(1.5), "1.5"),
            (json!("x"), "x"),
            (json!([1, "a"]), "[1 a]"),
            (json!({"b": 1, "a": {"c": null}}), "map[a:map[c:<nil>] b:1]"),
        ];
        for (value, expected) in cases {
            assert_eq!(go_value(&value), expected, "{value}");
        }
    }

    #[test]
    fn non_strings_print_with_the_bad_verb_marker() {
        assert_eq!(go_string_verb(&json!("foo")), "foo");
        assert_eq!(go_string_verb(&json!(1)), "%!s(int64=1)");
        assert_eq!(go_string_verb(&json!(null)), "%!s(<nil>)");
    }
}
