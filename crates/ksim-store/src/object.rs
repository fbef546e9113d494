//! [`StoredObject`]: one immutable version of an object, with its JSON
//! serialized once at write time so that lists and watches copy bytes.

use bytes::Bytes;
use serde_json::Value;

/// Where an object lives in its collection: `(namespace, name)`, with an
/// empty namespace for cluster-scoped objects. Orders like etcd keys.
pub type ObjectKey = (String, String);

/// One version of an object as stored.
#[derive(Debug, Clone)]
pub struct StoredObject {
    /// The object, with `metadata.resourceVersion` set to [`Self::revision`],
    /// in its stored form: `metadata.managedFields` is kept as the JSON text
    /// of the whole list (its entries and FieldsV1 trees are most of a small
    /// object's nodes, nodes are what memory goes to, and only writes read
    /// them). [`expand_managed_fields`] turns it back into the API form;
    /// [`Self::json`] is in the API form.
    pub value: Value,
    /// `value` serialized as JSON.
    pub json: Bytes,
    /// The revision of the write that produced this version.
    pub revision: u64,
    /// Its key.
    pub key: ObjectKey,
}

impl StoredObject {
    /// Stamps `value` with `revision` and serializes it.
    pub(crate) fn new(mut value: Value, revision: u64, key: ObjectKey) -> Self {
        if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert(
                "resourceVersion".to_string(),
                Value::String(revision.to_string()),
            );
        }
        // A version written back from a stored one (a delete, a finalize)
        // carries the stored form: it is served in the API form all the same.
        let json = exact_bytes(api_json(&mut value));
        StoredObject {
            value,
            json,
            revision,
            key,
        }
    }

    /// An object that is not stored (the answer of a dry run): revision 0,
    /// no resourceVersion.
    pub fn dry_run(mut value: Value) -> Self {
        let key = key_of(&value).unwrap_or_default();
        let json = exact_bytes(api_json(&mut value));
        StoredObject {
            value,
            json,
            revision: 0,
            key,
        }
    }

    /// The namespace (`""` when cluster-scoped).
    pub fn namespace(&self) -> &str {
        &self.key.0
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.key.1
    }

    /// `metadata` of the object.
    pub fn metadata(&self) -> Option<&serde_json::Map<String, Value>> {
        self.value.get("metadata").and_then(Value::as_object)
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> Option<&str> {
        self.metadata()?.get("uid")?.as_str()
    }

    /// `metadata.labels`, when there are any.
    pub fn labels(&self) -> Option<&serde_json::Map<String, Value>> {
        self.metadata()?.get("labels")?.as_object()
    }
}

/// Turns `metadata.managedFields` into the stored form: the JSON text of
/// the whole list (the text of the API form).
pub fn compact_managed_fields(value: &mut Value) {
    compact(value);
}

/// [`compact_managed_fields`]; true when managedFields is in the stored form
/// now (a text of valid JSON, which the API form embeds as it is).
fn compact(value: &mut Value) -> bool {
    let Some(managed) = value
        .get_mut("metadata")
        .and_then(|m| m.get_mut("managedFields"))
    else {
        return false;
    };
    match managed {
        Value::Array(_) => {
            expand_fields_v1(managed);
            // Kept for the object's life: copied into an allocation of its
            // length (shrinking in place would keep the growth's spare capacity).
            let text = String::from(managed.to_string().as_str());
            *managed = Value::String(text);
            true
        }
        // Already stored (a version written back): its text is used as it
        // is when it is the text of a list (an older stored form, fieldsV1
        // texts inside the list, is rewritten first).
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(parsed @ Value::Array(_)) => {
                let fields_v1_as_text = parsed
                    .as_array()
                    .is_some_and(|entries| entries.iter().any(|e| e["fieldsV1"].is_string()));
                if fields_v1_as_text {
                    *managed = parsed;
                    return compact(value);
                }
                true
            }
            Ok(parsed) => {
                *managed = parsed;
                false
            }
            Err(_) => false,
        },
        _ => false,
    }
}

/// Compacts `value`'s managedFields ([`compact_managed_fields`]) and
/// serializes `value` in the API form, the stored managedFields text
/// embedded as the list it encodes (one serialization of it, no parse).
fn api_json(value: &mut Value) -> Vec<u8> {
    if !compact(value) {
        return serde_json::to_vec(value).unwrap_or_default();
    }
    let Value::Object(fields) = &*value else {
        return serde_json::to_vec(value).unwrap_or_default();
    };
    let mut out = Vec::with_capacity(1024);
    out.push(b'{');
    for (n, (name, field)) in fields.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        write_str(&mut out, name);
        out.push(b':');
        match field {
            Value::Object(metadata) if name == "metadata" => {
                out.push(b'{');
                for (m, (name, field)) in metadata.iter().enumerate() {
                    if m > 0 {
                        out.push(b',');
                    }
                    write_str(&mut out, name);
                    out.push(b':');
                    match field {
                        Value::String(text) if name == "managedFields" => {
                            out.extend_from_slice(text.as_bytes());
                        }
                        other => write_json(&mut out, other),
                    }
                }
                out.push(b'}');
            }
            other => write_json(&mut out, other),
        }
    }
    out.push(b'}');
    out
}

/// Appends the compact JSON of `value` (serializing a JSON value into a Vec
/// cannot fail).
fn write_json(out: &mut Vec<u8>, value: &Value) {
    if let Err(error) = serde_json::to_writer(&mut *out, value) {
        tracing::error!(%error, "cannot serialize a JSON value");
    }
}

/// Appends a JSON string.
fn write_str(out: &mut Vec<u8>, text: &str) {
    if let Err(error) = serde_json::to_writer(&mut *out, text) {
        tracing::error!(%error, "cannot serialize a JSON string");
    }
}

/// Bytes in an allocation of their length: a serialized object is kept for
/// its version's life, and the spare capacity of the growing buffer (a third
/// of it on average) would be kept with it. A copy, as allocators shrink a
/// block in place (keeping its size) when asked to.
fn exact_bytes(json: Vec<u8>) -> Bytes {
    Bytes::copy_from_slice(&json)
}

/// Turns stored `metadata.managedFields` back into the API form: the list,
/// each `fieldsV1` an object. Also reads the older stored form (each
/// `fieldsV1` kept as its text in a list).
pub fn expand_managed_fields(value: &mut Value) {
    let Some(managed) = value
        .get_mut("metadata")
        .and_then(|m| m.get_mut("managedFields"))
    else {
        return;
    };
    if let Some(text) = managed.as_str()
        && let Ok(parsed) = serde_json::from_str::<Value>(text)
    {
        *managed = parsed;
    }
    expand_fields_v1(managed);
}

/// Parses every `fieldsV1` kept as text in a managedFields list.
fn expand_fields_v1(managed: &mut Value) {
    let Some(entries) = managed.as_array_mut() else {
        return;
    };
    for entry in entries {
        if let Some(fields) = entry.get_mut("fieldsV1")
            && let Some(text) = fields.as_str()
            && let Ok(parsed) = serde_json::from_str::<Value>(text)
        {
            *fields = parsed;
        }
    }
}

/// The key of a JSON object: `metadata.namespace` and `metadata.name`.
pub(crate) fn key_of(value: &Value) -> Option<ObjectKey> {
    let metadata = value.get("metadata")?;
    let name = metadata.get("name")?.as_str()?;
    if name.is_empty() {
        return None;
    }
    let namespace = metadata
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some((namespace.to_string(), name.to_string()))
}

/// Whether two managedFields lists are the same, whichever form (stored
/// text or API list) each is in.
fn same_managed_fields(a: &Value, b: &Value) -> bool {
    if a.is_string() || b.is_string() || has_fields_v1_text(a) || has_fields_v1_text(b) {
        let api_form = |managed: &Value| {
            let mut value = serde_json::json!({"metadata": {"managedFields": managed}});
            expand_managed_fields(&mut value);
            value
        };
        return api_form(a) == api_form(b);
    }
    a == b
}

/// Whether a managedFields list keeps some `fieldsV1` as text.
fn has_fields_v1_text(managed: &Value) -> bool {
    managed
        .as_array()
        .is_some_and(|entries| entries.iter().any(|e| e["fieldsV1"].is_string()))
}

/// Whether two versions differ only in `metadata.resourceVersion`: such a
/// write is a no-op.
pub(crate) fn same_content(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    if a.len() != b.len() {
        return false;
    }
    a.iter().all(|(key, value)| {
        let Some(other) = b.get(key) else {
            return false;
        };
        if key != "metadata" {
            return value == other;
        }
        let (Some(ma), Some(mb)) = (value.as_object(), other.as_object()) else {
            return value == other;
        };
        let significant = |m: &serde_json::Map<String, Value>| {
            m.iter().filter(|(k, _)| *k != "resourceVersion").count()
        };
        significant(ma) == significant(mb)
            && ma
                .iter()
                .filter(|(k, _)| *k != "resourceVersion")
                .all(|(k, v)| match mb.get(k) {
                    Some(other) if k == "managedFields" => same_managed_fields(v, other),
                    Some(other) => v == other,
                    None => false,
                })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rewriting_the_same_managed_fields_is_no_change() {
        let object = json!({"metadata": {"name": "a", "managedFields": [
            {"manager": "m", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}
        ]}});
        let stored = StoredObject::new(object.clone(), 5, ("".into(), "a".into()));
        assert!(same_content(&stored.value, &object));
        let mut other = object;
        other["metadata"]["managedFields"][0]["fieldsV1"] = json!({"f:spec": {}});
        assert!(!same_content(&stored.value, &other));
    }

    #[test]
    fn managed_fields_are_stored_as_one_text_and_served_as_a_list() {
        let object = json!({"metadata": {"name": "a", "managedFields": [
            {"manager": "m", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}
        ]}});
        let stored = StoredObject::new(object.clone(), 5, ("".into(), "a".into()));
        assert!(stored.value["metadata"]["managedFields"].is_string());
        let served: Value = serde_json::from_slice(&stored.json).expect("json");
        assert_eq!(
            served["metadata"]["managedFields"],
            object["metadata"]["managedFields"]
        );
        let mut expanded = stored.value.clone();
        expand_managed_fields(&mut expanded);
        assert_eq!(
            expanded["metadata"]["managedFields"],
            object["metadata"]["managedFields"]
        );
    }

    #[test]
    fn a_stored_version_written_again_is_served_in_the_api_form() {
        let object = json!({"metadata": {"name": "a", "managedFields": [
            {"manager": "m", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}
        ]}});
        let first = StoredObject::new(object.clone(), 5, ("".into(), "a".into()));
        let again = StoredObject::new(first.value.clone(), 6, ("".into(), "a".into()));
        let served: Value = serde_json::from_slice(&again.json).expect("json");
        assert_eq!(
            served["metadata"]["managedFields"],
            object["metadata"]["managedFields"]
        );
        assert!(again.value["metadata"]["managedFields"].is_string());
        let dry = StoredObject::dry_run(first.value.clone());
        let served: Value = serde_json::from_slice(&dry.json).expect("json");
        assert_eq!(
            served["metadata"]["managedFields"],
            object["metadata"]["managedFields"]
        );
    }

    #[test]
    fn served_json_is_the_plain_serialization_of_the_api_form() {
        let list = json!([{"manager": "m", "fieldsType": "FieldsV1", "fieldsV1": {"f:a": {"f:b\\\"": {}}}}]);
        let cases = [
            json!({"apiVersion": "v1", "metadata": {"labels": {"a": "é<"}, "managedFields": list, "name": "a"}, "spec": {"x": [1, null]}}),
            json!({"metadata": {"managedFields": list.to_string(), "name": "a"}}),
            json!({"metadata": {"managedFields": [{"manager": "m", "fieldsV1": "{\"f:a\":{}}"}], "name": "a"}}),
            json!({"metadata": {"managedFields": "not json", "name": "a"}}),
            json!({"metadata": {"managedFields": "{}", "name": "a"}}),
            json!({"metadata": {"name": "a"}}),
            json!({"metadata": "odd"}),
        ];
        for object in cases {
            let stored = StoredObject::new(object.clone(), 7, ("".into(), "a".into()));
            let mut expected = stored.value.clone();
            expand_managed_fields(&mut expected);
            assert_eq!(
                stored.json,
                serde_json::to_vec(&expected).expect("serializable"),
                "{object}"
            );
        }
    }

    #[test]
    fn managed_fields_compare_equal_across_forms() {
        let list = json!([{"manager": "m", "fieldsV1": {"f:a": {}}}]);
        let per_entry_text = json!([{"manager": "m", "fieldsV1": "{\"f:a\":{}}"}]);
        let whole_text = Value::String(list.to_string());
        let other = json!([{"manager": "n", "fieldsV1": {"f:a": {}}}]);
        let cases = [
            (&list, &whole_text, true),
            (&whole_text, &list, true),
            (&per_entry_text, &whole_text, true),
            (&list, &list, true),
            (&other, &whole_text, false),
            (&whole_text, &other, false),
        ];
        for (a, b, want) in cases {
            assert_eq!(same_managed_fields(a, b), want, "{a} vs {b}");
        }
    }
}
