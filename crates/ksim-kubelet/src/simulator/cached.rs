//! Nodes and Pods as the simulator caches them: the JSON text the server
//! sent, and a view holding only the fields that the simulator and the
//! current Stages' selectors, weights and delays read (see [`ReadFields`]).
//! Matching an object needs only the view; rendering a stage's next action
//! (rare beside matching: a restored cluster's 100,000 Running pods match no
//! stage) parses the whole object from the text. Building the view skips the
//! rest of the text without building it, which costs a fraction of decoding
//! the whole object into a JSON tree and keeps the cache small.
//!
//! `metadata.managedFields` is left out everywhere: no stage reads it, and it
//! is the largest part of a watched object.

use std::borrow::Cow;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::stage::ReadFields;

/// A cached Node or Pod.
#[derive(Debug)]
pub struct CachedObject {
    raw: Box<RawValue>,
    view: Value,
    fields_version: u64,
}

impl CachedObject {
    /// Caches the object of JSON text `raw`, with a view of `fields`
    /// (`fields_version` names them).
    pub fn new(raw: Box<RawValue>, fields: &ReadFields, fields_version: u64) -> Self {
        let view = project(raw.get(), fields);
        Self {
            raw,
            view,
            fields_version,
        }
    }

    /// The same object with a view of other `fields`.
    pub fn with_fields(&self, fields: &ReadFields, fields_version: u64) -> Self {
        Self::new(self.raw.clone(), fields, fields_version)
    }

    /// The fields the simulator and the Stages read.
    pub fn view(&self) -> &Value {
        &self.view
    }

    /// Which fields the view holds.
    pub fn fields_version(&self) -> u64 {
        self.fields_version
    }

    /// The whole object (without `metadata.managedFields`).
    pub fn full(&self) -> Value {
        project(self.raw.get(), &ReadFields::All)
    }
}

/// The `fields` of the object of JSON text `text` (valid JSON: text the
/// server sent, already parsed once).
pub fn project(text: &str, fields: &ReadFields) -> Value {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    Project {
        fields,
        place: Place::Root,
    }
    .deserialize(&mut deserializer)
    .unwrap_or_default()
}

/// Where a value sits in the object.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The object itself.
    Root,
    /// The object's `metadata`.
    Metadata,
    /// Anywhere else.
    Other,
}

/// Decodes the `fields` of a value at `place`.
struct Project<'f> {
    fields: &'f ReadFields,
    place: Place,
}

impl<'de> DeserializeSeed<'de> for Project<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        if self.place == Place::Other && self.fields == &ReadFields::All {
            return serde::Deserialize::deserialize(deserializer);
        }
        deserializer.deserialize_any(self)
    }
}

/// A map key, borrowed from the text when it can be.
pub(super) struct Key<'de>(pub(super) Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

impl<'de> Visitor<'de> for Project<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            let wanted = match self.fields.field(&key) {
                Some(_) if self.place == Place::Metadata && key == "managedFields" => None,
                wanted => wanted,
            };
            let Some(fields) = wanted else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            let place = if self.place == Place::Root && key == "metadata" {
                Place::Metadata
            } else {
                Place::Other
            };
            let value = map.next_value_seed(Project { fields, place })?;
            object.insert(key.into_owned(), value);
        }
        Ok(Value::Object(object))
    }

    // Anything but an object is kept whole (what a path through it reads is
    // the same in the view as in the object).
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Value>()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(value: &Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(value).expect("JSON")
    }

    #[test]
    fn views_hold_the_fields_read_and_full_objects_all_but_managed_fields() {
        let pod = json!({
            "metadata": {"name": "p", "uid": "u", "managedFields": [{"manager": "m"}],
                "labels": {"managedFields": "kept"}},
            "spec": {"nodeName": "n", "containers": [{"name": "c"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                "podIP": "10.0.0.1"},
        });
        let mut fields = ReadFields::none();
        fields.add(&["metadata", "name"]);
        fields.add(&["metadata", "managedFields"]);
        fields.add(&["spec", "nodeName"]);
        fields.add(&["status", "conditions"]);
        fields.add(&["status", "missing", "deeper"]);
        let cached = CachedObject::new(raw(&pod), &fields, 3);
        assert_eq!(cached.fields_version(), 3);
        assert_eq!(
            cached.view(),
            &json!({
                "metadata": {"name": "p"},
                "spec": {"nodeName": "n"},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            })
        );
        let mut whole = pod.clone();
        whole["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove("managedFields");
        assert_eq!(cached.full(), whole);
        let all = cached.with_fields(&ReadFields::All, 4);
        assert_eq!(all.view(), &whole);
        assert_eq!(all.fields_version(), 4);
        let mut metadata = ReadFields::none();
        metadata.add(&["metadata"]);
        assert_eq!(
            project(raw(&pod).get(), &metadata),
            json!({"metadata": whole["metadata"]})
        );
    }

    #[test]
    fn views_keep_values_that_are_not_objects_whole() {
        let mut fields = ReadFields::none();
        fields.add(&["a", "b"]);
        fields.add(&["c", "d"]);
        fields.add(&["e", "f"]);
        let text = r#"{"a": [{"b": 1}, 2], "c": "text", "e": {"f": 1.5, "g": null}, "h": 1}"#;
        assert_eq!(
            project(text, &fields),
            json!({"a": [{"b": 1}, 2], "c": "text", "e": {"f": 1.5}})
        );
        assert_eq!(project("[1, \"a\", null]", &fields), json!([1, "a", null]));
        assert_eq!(
            project(r#"{"metadata": 3}"#, &ReadFields::All),
            json!({"metadata": 3})
        );
        let escaped = r#"{"a\"b": {"x": 1}, "a": {"b": "\u00e9"}}"#;
        assert_eq!(project(escaped, &fields), json!({"a": {"b": "é"}}));
    }
}
