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
    /// The object, with `metadata.resourceVersion` set to [`Self::revision`].
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
        let json = Bytes::from(serde_json::to_vec(&value).unwrap_or_default());
        StoredObject {
            value,
            json,
            revision,
            key,
        }
    }

    /// An object that is not stored (the answer of a dry run): revision 0,
    /// no resourceVersion.
    pub fn dry_run(value: Value) -> Self {
        let key = key_of(&value).unwrap_or_default();
        let json = Bytes::from(serde_json::to_vec(&value).unwrap_or_default());
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
                .all(|(k, v)| mb.get(k) == Some(v))
    })
}
