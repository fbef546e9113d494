//! Nodes and Pods as the simulator caches them: the JSON text the server
//! sent, and a view holding only the fields that the simulator and the
//! current Stages' selectors, weights and delays read (see [`ReadFields`]).
//! Matching an object needs only the view; rendering a stage's next action
//! (rare beside matching: a restored cluster's 100,000 Running pods match no
//! stage) parses the whole object from the text. Building the view skips the
//! rest of the text without decoding it (see [`super::scan`]), which costs a
//! fraction of decoding the whole object into a JSON tree and keeps the
//! cache small.
//!
//! `metadata.managedFields` is left out everywhere: no stage reads it, and it
//! is the largest part of a watched object.

use serde_json::Value;
use serde_json::value::RawValue;

use super::scan::Scanner;
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
/// server sent, already parsed once); what is not read is skipped by
/// [`Scanner`], without decoding it.
pub fn project(text: &str, fields: &ReadFields) -> Value {
    project_value(&mut Scanner::new(text), fields, Place::Root).unwrap_or_default()
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

/// The `fields` of the next value, at `place`: an object keeps the fields
/// read (and `metadata` never its `managedFields`); anything but an object
/// is kept whole (what a path through it reads is the same in the view as
/// in the object).
fn project_value(scanner: &mut Scanner<'_>, fields: &ReadFields, place: Place) -> Option<Value> {
    if scanner.peek()? != b'{' || (place == Place::Other && fields == &ReadFields::All) {
        return scanner.value();
    }
    let mut object = serde_json::Map::new();
    scanner.object(|key, scanner| {
        let wanted = match fields.field(&key) {
            Some(_) if place == Place::Metadata && key == "managedFields" => None,
            wanted => wanted,
        };
        let Some(fields) = wanted else {
            return scanner.skip_value();
        };
        let place = if place == Place::Root && key == "metadata" {
            Place::Metadata
        } else {
            Place::Other
        };
        let value = project_value(scanner, fields, place)?;
        object.insert(key.into_owned(), value);
        Some(())
    })?;
    Some(Value::Object(object))
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

    /// The projection as a walk of the decoded object: what `project` must give.
    fn projected(value: &Value, fields: &ReadFields, place: Place) -> Value {
        match value {
            Value::Object(map) if !(place == Place::Other && fields == &ReadFields::All) => map
                .iter()
                .filter(|(key, _)| !(place == Place::Metadata && *key == "managedFields"))
                .filter_map(|(key, value)| {
                    let fields = fields.field(key)?;
                    let place = if place == Place::Root && key == "metadata" {
                        Place::Metadata
                    } else {
                        Place::Other
                    };
                    Some((key.clone(), projected(value, fields, place)))
                })
                .collect(),
            _ => value.clone(),
        }
    }

    #[test]
    fn views_agree_with_a_walk_of_the_decoded_object() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p\"q", "namespace": "ns", "uid": "u", "resourceVersion": "12",
                "labels": {"app": "a", "x/y": "{\"]"}, "ownerReferences": [{"kind": "ReplicaSet", "name": "rs"}],
                "managedFields": [{"manager": "m", "fieldsV1": {"f:status": {"f:phase": {}}}}],
                "deletionTimestamp": null},
            "spec": {"nodeName": "n", "hostNetwork": false, "priority": -5, "overhead": 1.5e3,
                "containers": [{"name": "c", "args": ["a,b", "}", "\\"], "ports": []}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}],
                "conditions": [{"type": "Ready", "status": "True"}], "empty": {}},
        });
        let mut simulator = ReadFields::none();
        for path in [
            &["metadata", "name"][..],
            &["metadata", "namespace"],
            &["metadata", "deletionTimestamp"],
            &["metadata", "ownerReferences"],
            &["spec", "nodeName"],
            &["spec", "hostNetwork"],
            &["status", "podIPs"],
            &["status", "conditions"],
            &["status", "empty", "deeper"],
        ] {
            simulator.add(path);
        }
        let mut whole_metadata = ReadFields::none();
        whole_metadata.add(&["metadata"]);
        whole_metadata.add(&["spec", "containers"]);
        for text in [
            serde_json::to_string(&pod).expect("JSON"),
            serde_json::to_string_pretty(&pod).expect("JSON"),
        ] {
            for fields in [
                &simulator,
                &whole_metadata,
                &ReadFields::All,
                &ReadFields::none(),
            ] {
                assert_eq!(
                    project(&text, fields),
                    projected(&pod, fields, Place::Root),
                    "{fields:?}"
                );
            }
        }
    }
}
