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
    /// Where in `json` the resourceVersion's string starts (its opening
    /// quote), when it has one: a deletion restamps the last version there.
    version_at: Option<usize>,
    /// Whether `metadata.managedFields` is the stored text of a list (served
    /// by embedding it as it is).
    managed_fields_text: bool,
}

/// An object prepared for the store but not yet given its revision: compacted
/// and serialized with an empty resourceVersion, so that the store's lock is
/// held only to splice the revision in ([`Self::stamp`]).
#[derive(Debug)]
pub(crate) struct UnstampedObject {
    value: Value,
    json: Vec<u8>,
    version_at: Option<usize>,
    managed_fields_text: bool,
}

impl UnstampedObject {
    /// Compacts and serializes `value` (the expensive part of a write).
    pub(crate) fn new(value: Value) -> Self {
        Self::build(value, false)
    }

    /// [`Self::new`] of a value whose `metadata.managedFields`, when it is
    /// a string, is the compact text of its list as `ksim_core::apply`
    /// writes it (each `fieldsV1` an object): taken as the stored form as
    /// it is, without checking it (parsing it again cost about as much as
    /// serializing the rest of a new pod).
    pub(crate) fn written(value: Value) -> Self {
        Self::build(value, true)
    }

    fn build(mut value: Value, written: bool) -> Self {
        if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert("resourceVersion".to_string(), Value::String(String::new()));
        }
        let written_text = written
            && value
                .get("metadata")
                .and_then(|m| m.get("managedFields"))
                .is_some_and(Value::is_string);
        let managed_fields_text = if written_text {
            debug_assert!(
                value["metadata"]["managedFields"]
                    .as_str()
                    .is_some_and(is_list_text),
                "written managedFields are the text of a list"
            );
            true
        } else {
            compact(&mut value)
        };
        let (json, version_at) = api_json_with_room(&value, managed_fields_text);
        UnstampedObject {
            value,
            json,
            version_at,
            managed_fields_text,
        }
    }

    /// The value as it will be stored (its resourceVersion still empty).
    pub(crate) fn value(&self) -> &Value {
        &self.value
    }

    /// Gives the object its revision.
    pub(crate) fn stamp(self, revision: u64, key: ObjectKey) -> StoredObject {
        let UnstampedObject {
            mut value,
            json,
            version_at,
            managed_fields_text,
        } = self;
        let version = revision.to_string();
        let json = match version_at {
            Some(at) => {
                // The empty string `""` at `at` becomes `"<revision>"` in
                // place: `json` has the room for it (see [`REVISION_ROOM`]),
                // so that the store's lock is held for a move of bytes, not
                // an allocation and a copy. Kept in an allocation of its
                // length but for that room's unused part.
                let mut json = json;
                json.splice(at + 1..at + 1, version.bytes());
                Bytes::from(json.into_boxed_slice())
            }
            None => exact_bytes(json),
        };
        if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            match metadata.get_mut("resourceVersion") {
                Some(Value::String(stored)) => *stored = version,
                _ => {
                    metadata.insert("resourceVersion".to_string(), Value::String(version));
                }
            }
        }
        StoredObject {
            value,
            json,
            revision,
            key,
            version_at,
            managed_fields_text,
        }
    }
}

impl StoredObject {
    /// Stamps `value` with `revision` and serializes it.
    #[cfg(test)]
    pub(crate) fn new(value: Value, revision: u64, key: ObjectKey) -> Self {
        UnstampedObject::new(value).stamp(revision, key)
    }

    /// This version, to be stamped with another revision (a deletion's):
    /// the value is copied and the JSON spliced, nothing is serialized again.
    pub(crate) fn unstamped(&self) -> UnstampedObject {
        let Some(at) = self.version_at else {
            return UnstampedObject::new(self.value.clone());
        };
        let old_len = self.revision.to_string().len() + 2;
        let mut json = Vec::with_capacity(self.json.len() + REVISION_ROOM);
        json.extend_from_slice(&self.json[..at]);
        json.extend_from_slice(b"\"\"");
        json.extend_from_slice(&self.json[at + old_len..]);
        UnstampedObject {
            value: self.value.clone(),
            json,
            version_at: Some(at),
            managed_fields_text: self.managed_fields_text,
        }
    }

    /// An object that is not stored (the answer of a dry run): revision 0,
    /// no resourceVersion.
    pub fn dry_run(mut value: Value) -> Self {
        let key = key_of(&value).unwrap_or_default();
        let managed_fields_text = compact(&mut value);
        let (json, _) = api_json(&value, managed_fields_text, Vec::new());
        StoredObject {
            value,
            json: exact_bytes(json),
            revision: 0,
            key,
            version_at: None,
            managed_fields_text,
        }
    }

    /// This version as a `PartialObjectMetadata` of `api_version`
    /// (`meta.k8s.io/v1` or `v1beta1`), serialized straight from the stored
    /// metadata: what serializing its API form gives, without copying it.
    pub fn partial_metadata_json(&self, api_version: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(512);
        out.extend_from_slice(b"{\"apiVersion\":");
        write_str(&mut out, api_version);
        out.extend_from_slice(b",\"kind\":\"PartialObjectMetadata\",\"metadata\":");
        match self.value.get("metadata") {
            Some(Value::Object(metadata)) => {
                write_metadata(&mut out, metadata, self.managed_fields_text);
            }
            Some(other) => write_json(&mut out, other),
            None => out.extend_from_slice(b"{}"),
        }
        out.push(b'}');
        out
    }

    /// This version in the API form with its top-level fields renamed
    /// (`rename` gives a field's new name, None keeps it) and `apiVersion`
    /// set to `api_version`: exactly the JSON of a copy renamed field by
    /// field in key order (a later field wins a name two fields get), its
    /// managedFields expanded, then serialized; written from the stored
    /// value without that copy. None when the object is not a JSON object
    /// or keeps managedFields as text not in the stored form (the copy
    /// must be made then).
    pub fn renamed_json(
        &self,
        api_version: &str,
        rename: impl Fn(&str) -> Option<&'static str>,
    ) -> Option<Vec<u8>> {
        let Value::Object(fields) = &self.value else {
            return None;
        };
        let managed_text = self
            .metadata()
            .and_then(|m| m.get("managedFields"))
            .is_some_and(Value::is_string);
        if managed_text && !self.managed_fields_text {
            return None;
        }
        // None: the new apiVersion.
        let mut renamed: std::collections::BTreeMap<&str, Option<&Value>> =
            std::collections::BTreeMap::new();
        for (name, field) in fields {
            renamed.insert(rename(name).unwrap_or(name), Some(field));
        }
        renamed.insert("apiVersion", None);
        let mut out = Vec::with_capacity(self.json.len() + 64);
        out.push(b'{');
        for (n, (name, field)) in renamed.into_iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            write_str(&mut out, name);
            out.push(b':');
            match field {
                None => write_str(&mut out, api_version),
                Some(Value::Object(metadata)) if name == "metadata" => {
                    write_metadata(&mut out, metadata, self.managed_fields_text);
                }
                Some(other) => write_json(&mut out, other),
            }
        }
        out.push(b'}');
        Some(out)
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
            // Serialized into bytes (`Display` goes through the formatting
            // machinery, several times slower), then kept for the object's
            // life: copied into an allocation of its length (shrinking in
            // place would keep the growth's spare capacity).
            let mut json = Vec::with_capacity(1024);
            write_json(&mut json, managed);
            match std::str::from_utf8(&json) {
                Ok(text) => *managed = Value::String(String::from(text)),
                // serde_json writes UTF-8; were it not, the list stays as it is.
                Err(_) => return false,
            }
            true
        }
        // Already stored (a version written back) or written as text (a
        // create's entries): used as it is when it is the text of a list
        // (an older stored form, fieldsV1 texts inside the list, is
        // rewritten first). The common case is checked without building
        // its values.
        Value::String(text) if is_list_text(text) => true,
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

/// Whether `text` is the JSON text of a list none of whose entries keeps
/// its `fieldsV1` as text (the stored form, embedded as it is), checked
/// without building values. A string key `fieldsV1` with a string value is
/// the only way `"fieldsV1"` can be followed by `:` and a quote in valid
/// JSON (inside strings quotes are escaped).
fn is_list_text(text: &str) -> bool {
    if !text.trim_start().starts_with('[')
        || serde_json::from_str::<serde::de::IgnoredAny>(text).is_err()
    {
        return false;
    }
    const KEY: &str = "\"fieldsV1\"";
    let mut rest = text;
    while let Some(at) = rest.find(KEY) {
        rest = &rest[at + KEY.len()..];
        let value = rest.trim_start().strip_prefix(':').map(str::trim_start);
        if value.is_some_and(|v| v.starts_with('"')) {
            return false;
        }
    }
    true
}

/// The room a serialized object leaves for its revision's digits (those of
/// the largest `u64`).
const REVISION_ROOM: usize = 20;

/// [`api_json`] into an allocation of its length and [`REVISION_ROOM`]:
/// serialized into this thread's reused buffer (a growing buffer is
/// reallocated and copied at each doubling), then copied once.
fn api_json_with_room(value: &Value, managed_fields_text: bool) -> (Vec<u8>, Option<usize>) {
    thread_local! {
        static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUFFER.with(|buffer| {
        let Ok(mut buffer) = buffer.try_borrow_mut() else {
            let (mut json, at) = api_json(value, managed_fields_text, Vec::new());
            json.reserve_exact(REVISION_ROOM);
            return (json, at);
        };
        let (mut written, at) = api_json(value, managed_fields_text, std::mem::take(&mut *buffer));
        let mut json = Vec::with_capacity(written.len() + REVISION_ROOM);
        json.extend_from_slice(&written);
        written.clear();
        // A buffer grown by an unusually large object is not kept.
        if written.capacity() <= 1 << 20 {
            *buffer = written;
        }
        (json, at)
    })
}

/// Serializes `value` (compacted: [`compact`] said whether managedFields
/// is the stored text) in the API form, the stored managedFields text
/// embedded as the list it encodes (one serialization of it, no parse).
/// Also says where `metadata.resourceVersion`'s string starts, if it is one.
fn api_json(
    value: &Value,
    managed_fields_text: bool,
    mut out: Vec<u8>,
) -> (Vec<u8>, Option<usize>) {
    let Value::Object(fields) = value else {
        write_json(&mut out, value);
        return (out, None);
    };
    out.reserve(1024);
    let mut version_at = None;
    out.push(b'{');
    for (n, (name, field)) in fields.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        write_str(&mut out, name);
        out.push(b':');
        match field {
            Value::Object(metadata) if name == "metadata" => {
                version_at = write_metadata(&mut out, metadata, managed_fields_text);
            }
            other => write_json(&mut out, other),
        }
    }
    out.push(b'}');
    (out, version_at)
}

/// Appends `metadata` in the API form (see [`api_json`]); returns where its
/// resourceVersion's string starts, if it is one.
fn write_metadata(
    out: &mut Vec<u8>,
    metadata: &serde_json::Map<String, Value>,
    managed_fields_text: bool,
) -> Option<usize> {
    let mut version_at = None;
    out.push(b'{');
    for (m, (name, field)) in metadata.iter().enumerate() {
        if m > 0 {
            out.push(b',');
        }
        write_str(out, name);
        out.push(b':');
        match field {
            Value::String(text) if name == "managedFields" && managed_fields_text => {
                out.extend_from_slice(text.as_bytes());
            }
            Value::String(_) if name == "resourceVersion" => {
                version_at = Some(out.len());
                write_json(out, field);
            }
            other => write_json(out, other),
        }
    }
    out.push(b'}');
    version_at
}

/// Appends the compact JSON of `value`, exactly as serde_json writes it:
/// strings that need no escaping (no quote, backslash or control
/// character, what serde_json escapes) are copied as they are, the rest
/// and numbers written by serde_json (its per-string formatter machinery
/// was the largest part of serializing an object).
fn write_json(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::String(text) => write_str(out, text),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(out, item);
            }
            out.push(b']');
        }
        Value::Object(fields) => {
            out.push(b'{');
            for (i, (name, field)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, name);
                out.push(b':');
                write_json(out, field);
            }
            out.push(b'}');
        }
        Value::Number(number) => {
            if let Err(error) = serde_json::to_writer(&mut *out, number) {
                tracing::error!(%error, "cannot serialize a JSON number");
            }
        }
    }
}

/// Appends a JSON string (see [`write_json`]).
fn write_str(out: &mut Vec<u8>, text: &str) {
    if !ksim_core::json_text::needs_escape(text) {
        out.reserve(text.len() + 2);
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
        return;
    }
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
/// text or API list) each is in. Stored texts are the compact serialization
/// of the API-form list (keys sorted), so two lists are the same exactly when
/// their texts are: the list side is serialized once, nothing is parsed.
fn same_managed_fields(a: &Value, b: &Value) -> bool {
    if has_fields_v1_text(a) || has_fields_v1_text(b) {
        let api_form = |managed: &Value| {
            let mut value = serde_json::json!({"metadata": {"managedFields": managed}});
            expand_managed_fields(&mut value);
            value
        };
        return api_form(a) == api_form(b);
    }
    match (a, b) {
        (Value::String(a), Value::String(b)) => a == b,
        (Value::String(text), list @ Value::Array(_))
        | (list @ Value::Array(_), Value::String(text)) => serializes_to(list, text.as_bytes()),
        _ => a == b,
    }
}

/// Whether `value`'s compact JSON is exactly `expected`, found by serializing
/// it into a comparison rather than into a buffer.
fn serializes_to(value: &Value, expected: &[u8]) -> bool {
    struct Compare<'a> {
        rest: &'a [u8],
    }
    impl std::io::Write for Compare<'_> {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            match self.rest.strip_prefix(bytes) {
                Some(rest) => {
                    self.rest = rest;
                    Ok(bytes.len())
                }
                None => Err(std::io::Error::other("differs")),
            }
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut compare = Compare { rest: expected };
    serde_json::to_writer(&mut compare, value).is_ok() && compare.rest.is_empty()
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
    // Everything but metadata first: a write usually changes spec or status,
    // and those compare without touching managedFields.
    let rest_same = a.iter().all(|(key, value)| match b.get(key) {
        None => false,
        Some(_) if key == "metadata" => true,
        Some(other) => value == other,
    });
    if !rest_same {
        return false;
    }
    let (Some(value), Some(other)) = (a.get("metadata"), b.get("metadata")) else {
        return true;
    };
    let (Some(ma), Some(mb)) = (value.as_object(), other.as_object()) else {
        return value == other;
    };
    let significant =
        |m: &serde_json::Map<String, Value>| m.keys().filter(|k| *k != "resourceVersion").count();
    significant(ma) == significant(mb)
        && ma
            .iter()
            .filter(|(k, _)| *k != "resourceVersion" && *k != "managedFields")
            .all(|(k, v)| mb.get(k) == Some(v))
        && match (ma.get("managedFields"), mb.get("managedFields")) {
            (Some(x), Some(y)) => same_managed_fields(x, y),
            (None, None) => true,
            _ => false,
        }
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
    fn renamed_json_is_the_json_of_a_renamed_copy() {
        let object = json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "a", "namespace": "n", "managedFields": [
                {"manager": "m", "operation": "Update", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:message": {}, "f:involvedObject": {}}}]},
            "involvedObject": {"kind": "Node", "name": "n1"}, "message": "a \"quoted\" note",
            "reportingComponent": "c", "zz": [1, 2.5, null, true], "regarding": "wins over involvedObject, later in key order"});
        let stored = StoredObject::new(object, 5, ("n".into(), "a".into()));
        let rename = |name: &str| match name {
            "involvedObject" => Some("regarding"),
            "message" => Some("note"),
            "reportingComponent" => Some("reportingController"),
            _ => None,
        };
        // The copy as a caller would make it: renamed in key order, the new
        // apiVersion, managedFields expanded, serialized.
        let mut copy = serde_json::Map::new();
        for (key, value) in stored.value.as_object().expect("an object") {
            copy.insert(rename(key).unwrap_or(key).to_string(), value.clone());
        }
        copy.insert("apiVersion".into(), json!("events.k8s.io/v1"));
        let mut copy = Value::Object(copy);
        expand_managed_fields(&mut copy);
        assert_eq!(
            stored.renamed_json("events.k8s.io/v1", rename),
            Some(serde_json::to_vec(&copy).expect("json"))
        );
        assert_eq!(
            StoredObject::new(json!("text"), 5, ("".into(), "".into())).renamed_json("v1", rename),
            None
        );
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
            json!({"metadata": {"managedFields": json!([{"manager": "m", "fieldsV1": "{\"f:a\":{}}"}]).to_string(), "name": "a"}}),
            json!({"metadata": {"managedFields": "[{\"manager\": \"m\", \"fieldsV1\" : \"{}\"}]", "name": "a"}}),
            json!({"metadata": {"managedFields": "[{\"manager\":\"m\",\"fieldsV1\":{}}", "name": "a"}}),
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
    fn values_are_written_as_serde_json_writes_them() {
        let values = [
            json!(null),
            json!({"a": [1, -2, 18446744073709551615u64, -9223372036854775808i64, 0.5, 1e300, -0.0],
                "b": {"quote\"d": "back\\slash", "ctl": "\u{1}\n\t\u{1f}", "del": "\u{7f}"},
                "c": "sl/ash é 日本 😀", "d": [], "e": {}, "f": [true, false, null, [[]]]}),
            json!("plain"),
            json!(12.25),
        ];
        for value in values {
            let mut ours = Vec::new();
            write_json(&mut ours, &value);
            assert_eq!(ours, serde_json::to_vec(&value).expect("json"), "{value}");
        }
    }

    #[test]
    fn list_texts_are_recognized_without_parsing_them_into_values() {
        let cases = [
            ("[]", true),
            (" [{\"manager\":\"m\",\"fieldsV1\":{\"f:a\":{}}}]", true),
            ("[{\"manager\":\"m\",\"fieldsV1\":\"{}\"}]", false),
            ("[{\"manager\":\"m\",\"fieldsV1\" :  \"{}\"}]", false),
            (
                "[{\"manager\":\"\\\"fieldsV1\\\":\\\"\",\"fieldsV1\":{}}]",
                true,
            ),
            ("[{\"manager\":\"m\"}", false),
            ("{}", false),
            ("not json", false),
        ];
        for (text, want) in cases {
            assert_eq!(is_list_text(text), want, "{text}");
        }
    }

    #[test]
    fn a_restamped_version_serves_its_new_resource_version() {
        let object = json!({"apiVersion": "v1", "metadata": {"name": "a", "managedFields": [
            {"manager": "m", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}
        ], "uid": "u"}, "spec": {"x": 1}});
        let first = StoredObject::new(object.clone(), 9, ("".into(), "a".into()));
        let deleted = first.unstamped().stamp(12345, first.key.clone());
        let served: Value = serde_json::from_slice(&deleted.json).expect("json");
        assert_eq!(served["metadata"]["resourceVersion"], "12345");
        assert_eq!(deleted.value["metadata"]["resourceVersion"], "12345");
        let mut expected = deleted.value.clone();
        expand_managed_fields(&mut expected);
        assert_eq!(deleted.json, serde_json::to_vec(&expected).expect("json"));
        // And again, from a version whose revision has more digits.
        let again = deleted.unstamped().stamp(7, first.key.clone());
        let served: Value = serde_json::from_slice(&again.json).expect("json");
        assert_eq!(served["metadata"]["resourceVersion"], "7");
        assert_eq!(served["spec"], json!({"x": 1}));
    }

    #[test]
    fn partial_metadata_is_the_serialization_of_the_api_form_metadata() {
        let list = json!([{"manager": "m", "fieldsType": "FieldsV1", "fieldsV1": {"f:a": {}}}]);
        let cases = [
            json!({"apiVersion": "v1", "metadata": {"labels": {"a": "b"}, "managedFields": list, "name": "a"}, "spec": {}}),
            json!({"metadata": {"managedFields": "not json", "name": "a"}}),
            json!({"metadata": {"name": "a"}}),
            json!({"metadata": "odd"}),
            json!({"spec": {}}),
        ];
        for object in cases {
            let stored = StoredObject::new(object.clone(), 7, ("".into(), "a".into()));
            let mut expanded = stored.value.clone();
            expand_managed_fields(&mut expanded);
            let expected = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": expanded.get("metadata").cloned().unwrap_or(json!({})),
            });
            assert_eq!(
                stored.partial_metadata_json("meta.k8s.io/v1"),
                serde_json::to_vec(&expected).expect("json"),
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
