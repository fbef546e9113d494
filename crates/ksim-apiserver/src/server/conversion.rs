//! Conversion between what a client reads and writes and what is stored.
//!
//! Two resources can share one storage collection: `events.k8s.io/v1`
//! Events are stored as core/v1 Events (as in kube-apiserver, both APIs see
//! the same objects), and every version of a custom resource shares its
//! CRD's collection (conversion strategy `None`: only `apiVersion` changes).

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use crate::resources::ResourceInfo;

/// Field renames between `events.k8s.io/v1` (left) and core/v1 (right).
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn is_events_v1(resource: &ResourceInfo) -> bool {
    resource.group == "events.k8s.io" && resource.kind == "Event"
}

fn rename(object: &Value, api_version: &str, to_core: bool) -> Value {
    rename_owned(object.clone(), api_version, to_core)
}

/// The name `key` takes between events.k8s.io and core Events (towards
/// core when `to_core`), None when it keeps its name.
fn renamed_key(key: &str, to_core: bool) -> Option<&'static str> {
    EVENT_FIELDS.iter().find_map(|&(events, core)| {
        let (from, to) = if to_core {
            (events, core)
        } else {
            (core, events)
        };
        (key == from).then_some(to)
    })
}

/// [`rename`] of an object not needed afterwards: its fields are moved,
/// not copied.
fn rename_owned(object: Value, api_version: &str, to_core: bool) -> Value {
    let Value::Object(map) = object else {
        return object;
    };
    let mut out = Map::new();
    for (key, value) in map {
        match renamed_key(&key, to_core) {
            Some(to) => out.insert(to.to_string(), value),
            None => out.insert(key, value),
        };
    }
    out.insert("apiVersion".into(), json!(api_version));
    Value::Object(out)
}

/// The stored form of an object a client sent (or a patch produced) for
/// `resource`: what kube's decoding into the Go type keeps, so a built-in
/// object loses its empty `omitempty` lists and maps here, on every write.
pub(crate) fn to_storage(resource: &ResourceInfo, object: Value) -> Value {
    let mut object = if is_events_v1(resource) {
        rename_owned(object, "v1", true)
    } else {
        object
    };
    if !resource.custom {
        crate::protobuf::drop_empty_fields(&mut object);
    }
    object
}

/// The form a client of `resource` reads of a stored object (with its
/// managedFields in the API form).
pub(crate) fn from_storage<'a>(resource: &ResourceInfo, stored: &'a Value) -> Cow<'a, Value> {
    let mut value = if is_events_v1(resource) {
        rename(stored, "events.k8s.io/v1", false)
    } else {
        let api_version = resource.api_version();
        let has_managed_fields = stored["metadata"]
            .get("managedFields")
            .is_some_and(|m| !m.is_null());
        if stored["apiVersion"].as_str() == Some(api_version.as_str()) && !has_managed_fields {
            return Cow::Borrowed(stored);
        }
        let mut value = stored.clone();
        value["apiVersion"] = json!(api_version);
        value
    };
    ksim_store::expand_managed_fields(&mut value);
    Cow::Owned(value)
}

/// The JSON of [`from_storage`] of a stored object, written from the stored
/// value without copying it (an events.k8s.io Event answered to its POST);
/// None when only the copy can make it.
pub(crate) fn json_for_version(
    resource: &ResourceInfo,
    object: &ksim_store::StoredObject,
) -> Option<Vec<u8>> {
    if is_events_v1(resource) {
        return object.renamed_json("events.k8s.io/v1", |name| renamed_key(name, false));
    }
    object.renamed_json(&resource.api_version(), |_| None)
}

/// [`from_storage`] leaving `metadata.managedFields` in the stored form (one
/// JSON text): for a patch that does not touch managedFields, which the
/// field manager reads in either form. No copy when the versions agree.
pub(crate) fn from_storage_for_patch<'a>(
    resource: &ResourceInfo,
    stored: &'a Value,
) -> Cow<'a, Value> {
    if is_events_v1(resource) {
        return from_storage(resource, stored);
    }
    let api_version = resource.api_version();
    if stored["apiVersion"].as_str() == Some(api_version.as_str()) {
        return Cow::Borrowed(stored);
    }
    let mut value = stored.clone();
    value["apiVersion"] = json!(api_version);
    Cow::Owned(value)
}

/// Takes stored-form managedFields (a JSON text, see
/// [`from_storage_for_patch`]) out of `object`, for checks that read the API
/// form; [`put_back_managed_fields`] restores it.
pub(crate) fn take_stored_managed_fields(object: &mut Value) -> Option<Value> {
    let metadata = object.get_mut("metadata")?.as_object_mut()?;
    if metadata.get("managedFields").is_some_and(Value::is_string) {
        metadata.remove("managedFields")
    } else {
        None
    }
}

/// Restores what [`take_stored_managed_fields`] took.
pub(crate) fn put_back_managed_fields(object: &mut Value, managed_fields: Option<Value>) {
    if let Some(managed_fields) = managed_fields
        && let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
    {
        metadata.insert("managedFields".into(), managed_fields);
    }
}

/// The form a Table row reads of a stored object: as the client's version,
/// without managedFields (no printer reads them; rows' metadata leaves
/// them out).
pub(crate) fn for_table<'a>(resource: &ResourceInfo, stored: &'a Value) -> Cow<'a, Value> {
    if is_identity(resource, stored) {
        Cow::Borrowed(stored)
    } else {
        let mut value = if is_events_v1(resource) {
            rename(stored, "events.k8s.io/v1", false)
        } else {
            let mut value = stored.clone();
            value["apiVersion"] = json!(resource.api_version());
            value
        };
        if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("managedFields");
        }
        Cow::Owned(value)
    }
}

/// Whether stored objects are served to `resource` as they are (their
/// serialized bytes can be sent unchanged).
pub(crate) fn is_identity(resource: &ResourceInfo, stored: &Value) -> bool {
    // `resource.api_version()` without formatting it (once per listed item).
    let served = |api_version: &str| {
        if resource.group.is_empty() {
            api_version == resource.version
        } else {
            api_version
                .strip_prefix(resource.group.as_str())
                .and_then(|rest| rest.strip_prefix('/'))
                == Some(resource.version.as_str())
        }
    };
    !is_events_v1(resource) && stored["apiVersion"].as_str().is_some_and(served)
}

/// A field selector's field, as named in the stored form.
pub(crate) fn storage_field(resource: &ResourceInfo, field: &str) -> String {
    if is_events_v1(resource) {
        for (events, core) in EVENT_FIELDS {
            if field == *events {
                return (*core).to_string();
            }
            if let Some(rest) = field.strip_prefix(&format!("{events}.")) {
                return format!("{core}.{rest}");
            }
        }
    }
    field.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::built_in_resources;

    fn events_v1() -> std::sync::Arc<ResourceInfo> {
        built_in_resources()
            .into_iter()
            .find(|r| r.group == "events.k8s.io")
            .expect("events.k8s.io is served")
    }

    #[test]
    fn events_v1_round_trips_through_core_events() {
        let resource = events_v1();
        let sent = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "regarding": {"kind": "Pod", "name": "p"},
            "note": "Successfully assigned default/p to n1",
            "reason": "Scheduled", "type": "Normal",
            "reportingController": "default-scheduler",
        });
        let stored = to_storage(&resource, sent.clone());
        assert_eq!(stored["apiVersion"], "v1");
        assert_eq!(stored["involvedObject"]["name"], "p");
        assert_eq!(stored["message"], "Successfully assigned default/p to n1");
        assert_eq!(stored["reportingComponent"], "default-scheduler");
        assert_eq!(from_storage(&resource, &stored).into_owned(), sent);
        assert_eq!(
            storage_field(&resource, "regarding.name"),
            "involvedObject.name"
        );
        assert!(!is_identity(&resource, &stored));
    }

    #[test]
    fn renaming_a_sent_object_moves_what_a_copy_would_hold() {
        let sent = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e"}, "regarding": {"name": "p"}, "note": "n",
            "involvedObject": "later in key order: kept", "deprecatedCount": 2, "reason": "r"});
        for to_core in [true, false] {
            assert_eq!(
                rename_owned(sent.clone(), "v1", to_core),
                rename(&sent, "v1", to_core)
            );
        }
        assert_eq!(rename_owned(json!([1]), "v1", true), json!([1]));
    }

    #[test]
    fn json_for_version_is_the_json_of_from_storage() {
        let resource = events_v1();
        let sent = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default", "managedFields": [
                {"manager": "m", "operation": "Update", "apiVersion": "events.k8s.io/v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:note": {}, "f:regarding": {}}}]},
            "regarding": {"kind": "Node", "name": "n1"}, "note": "Registered Node n1",
            "reason": "RegisteredNode", "type": "Normal", "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "node-controller", "reportingInstance": "node-controller",
        });
        let stored = ksim_store::StoredObject::dry_run(to_storage(&resource, sent.clone()));
        let expected =
            serde_json::to_vec(from_storage(&resource, &stored.value).as_ref()).expect("json");
        assert_eq!(json_for_version(&resource, &stored), Some(expected.clone()));
        assert_eq!(
            serde_json::from_slice::<Value>(&expected).expect("json"),
            sent
        );
    }
}
