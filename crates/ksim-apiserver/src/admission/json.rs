//! Small helpers over `serde_json` objects shared by defaulting and validation.

use serde_json::{Map, Value};

/// Whether a field is absent, `null` or the empty string (Go's zero for strings and pointers).
pub(crate) fn is_unset(object: &Map<String, Value>, key: &str) -> bool {
    match object.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(_) => false,
    }
}

/// Sets `key` to `value` when it is unset.
pub(crate) fn default_field(object: &mut Map<String, Value>, key: &str, value: Value) {
    if is_unset(object, key) {
        object.insert(key.to_string(), value);
    }
}

/// The object at `key`, created empty when absent or `null`; `None` if it holds a non-object.
pub(crate) fn object_entry<'a>(
    object: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    let entry = object
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if entry.is_null() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut()
}

/// The object at a path of keys, if every step is an object.
pub(crate) fn object_at_mut<'a>(
    value: &'a mut Value,
    path: &[&str],
) -> Option<&'a mut Map<String, Value>> {
    let mut current = value;
    for key in path {
        current = current.get_mut(*key)?;
    }
    current.as_object_mut()
}

/// The string at `key`, `""` if absent or not a string.
pub(crate) fn str_of<'a>(object: &'a Value, key: &str) -> &'a str {
    object.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The array at `key`, empty if absent.
pub(crate) fn array_of<'a>(object: &'a Value, key: &str) -> &'a [Value] {
    object
        .get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Each object of the array at `key` (mutable).
pub(crate) fn each_object_mut<'a>(
    object: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    object
        .get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// Rebuilds a string map with its keys sorted (as Go writes maps).
pub(crate) fn sort_keys(object: &mut Map<String, Value>) {
    let mut entries: Vec<(String, Value)> = std::mem::take(object).into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    object.extend(entries);
}
