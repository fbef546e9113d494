//! The `YAML` template function: a template value printed as block YAML with sorted keys,
//! in the layout of Go's sigs.k8s.io/yaml (sequences not indented under their key).

use gotmpl::Value;

/// Renders `value` as YAML ending in a newline.
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Map(map) if !map.is_empty() => write_map(&mut out, map, 0),
        Value::List(items) if !items.is_empty() => write_list(&mut out, items, 0),
        other => {
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
    out
}

fn write_map(
    out: &mut String,
    map: &std::collections::BTreeMap<std::sync::Arc<str>, Value>,
    indent: usize,
) {
    for (key, value) in map.iter() {
        out.push_str(&" ".repeat(indent));
        out.push_str(&plain_or_quoted(key));
        out.push(':');
        write_value_after_key(out, value, indent);
    }
}

fn write_value_after_key(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Map(child) if !child.is_empty() => {
            out.push('\n');
            write_map(out, child, indent + 2);
        }
        Value::List(items) if !items.is_empty() => {
            out.push('\n');
            write_list(out, items, indent);
        }
        other => {
            out.push(' ');
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
}

fn write_list(out: &mut String, items: &[Value], indent: usize) {
    for item in items {
        out.push_str(&" ".repeat(indent));
        out.push_str("- ");
        match item {
            Value::Map(map) if !map.is_empty() => {
                let mut first = true;
                for (key, value) in map.iter() {
                    if !first {
                        out.push_str(&" ".repeat(indent + 2));
                    }
                    first = false;
                    out.push_str(&plain_or_quoted(key));
                    out.push(':');
                    write_value_after_key(out, value, indent + 2);
                }
            }
            Value::List(inner) if !inner.is_empty() => {
                // Nested sequences: start the inner list on its own lines.
                out.push('\n');
                write_list(out, inner, indent + 2);
            }
            other => {
                out.push_str(&scalar(other));
                out.push('\n');
            }
        }
    }
}

fn scalar(value: &Value) -> String {
    match value {
        Value::Nil => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Int(n) => n.to_string(),
        Value::Uint(n) => n.to_string(),
        Value::Float(f) if f.is_finite() => f.to_string(),
        Value::Float(_) => "null".to_owned(),
        Value::String(s) => plain_or_quoted(s),
        Value::Map(_) => "{}".to_owned(),
        Value::List(_) => "[]".to_owned(),
        Value::Function(_) => "null".to_owned(),
    }
}

/// Words YAML (1.1 or 1.2) would read as something other than a string.
const RESERVED: &[&str] = &[
    "true", "false", "yes", "no", "on", "off", "y", "n", "null", "~",
];

fn plain_or_quoted(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/'))
        && s.starts_with(|c: char| c.is_ascii_alphabetic())
        && !RESERVED.contains(&s.to_ascii_lowercase().as_str());
    if plain {
        s.to_owned()
    } else {
        serde_json::Value::String(s.to_owned()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::convert::to_template_value;
    use serde_json::json;

    #[test]
    fn layout_matches_go_yaml() {
        let value = to_template_value(&json!({
            "b": {"cpu": "1k", "pods": 110},
            "a": [{"address": "10.0.0.1", "type": "InternalIP"}],
            "c": [],
            "d": {},
            "e": "True",
            "f": null
        }));
        let want = "a:\n- address: \"10.0.0.1\"\n  type: InternalIP\nb:\n  cpu: \"1k\"\n  pods: 110\nc: []\nd: {}\ne: \"True\"\nf: null\n";
        assert_eq!(to_yaml(&value), want);
    }

    #[test]
    fn output_parses_back_to_the_same_json() {
        let cases = [
            json!({"x": ["a", 1, true, null, {"k": "v: w"}, [1, 2]], "weird key": "#not comment"}),
            json!([{"a": {"b": [{"c": "d"}]}}]),
            json!("yes"),
            json!(12.5),
        ];
        for case in cases {
            let yaml = to_yaml(&to_template_value(&case));
            let back: serde_json::Value = serde_saphyr::from_str(&yaml).expect("valid yaml");
            assert_eq!(back, case, "{yaml}");
        }
    }
}
