//! The managedFields of a new object written straight into the text a
//! store keeps (the compact JSON of the list): what tracking its create and
//! then a write of one of its top-level fields (a bulk create's status)
//! records, serialized, without building entries, field sets or JSON
//! values on the way (most of a bulk create's allocations otherwise).

use serde_json::{Map, Value};

use super::fieldmanager::{IGNORED_METADATA, IGNORED_TOP_LEVEL};
use super::types::{ObjectType, TypeRef};
use super::walk::{Walk, index_items, walk_of};

/// The managedFields of `object`, as the compact JSON text of their list,
/// when `manager` created it without its top-level field `field` (at
/// `created_at`) and then wrote `field` through `subresource` (at
/// `written_at`), `field` having been `created_field` after the create:
/// exactly what [`track_update`](super::track_update) of the create (no old
/// object) followed by [`track_field_update`](super::track_field_update) of
/// the write give, serialized. None when no entry owns anything (the object
/// has no managedFields).
///
/// `object` carries no managedFields (it is ignored if it does), `field` is
/// not one managedFields never tracks, and `subresource` is not empty (the
/// write is not the creator's own entry): callers check.
#[allow(clippy::too_many_arguments)]
pub fn created_then_field_written(
    definition: Option<&str>,
    object: &Value,
    field: &str,
    created_field: Option<&Value>,
    manager: &str,
    subresource: &str,
    api_version: &str,
    created_at: &str,
    written_at: &str,
) -> Option<String> {
    debug_assert!(!subresource.is_empty() && !IGNORED_TOP_LEVEL.contains(&field));
    let Value::Object(fields) = object else {
        return None;
    };
    let ty = TypeRef::root(definition);
    let mut created = Vec::with_capacity(1024);
    let has_created = write_entry(&mut created, manager, "", api_version, created_at, |out| {
        write_created_root(out, fields, &ty, Some(field))
    });
    let mut written = Vec::with_capacity(512);
    let has_written = match fields.get(field) {
        Some(value) if created_field != Some(value) => {
            let (field_ty, _) = ty.child(field);
            write_entry(
                &mut written,
                manager,
                subresource,
                api_version,
                written_at,
                |out| {
                    out.push(b'{');
                    write_field_key(out, field);
                    out.push(b':');
                    let changed = write_changed(out, created_field, value, &field_ty);
                    out.push(b'}');
                    changed
                },
            )
        }
        _ => false,
    };
    let mut list = Vec::with_capacity(created.len() + written.len() + 3);
    list.push(b'[');
    match (has_created, has_written) {
        (false, false) => return None,
        (true, false) => list.extend_from_slice(&created),
        (false, true) => list.extend_from_slice(&written),
        (true, true) => {
            // In kube-apiserver's order of entries (both are updates by one
            // manager with one apiVersion): by time, then subresource.
            let (first, second) = if (created_at, "") <= (written_at, subresource) {
                (&created, &written)
            } else {
                (&written, &created)
            };
            list.extend_from_slice(first);
            list.push(b',');
            list.extend_from_slice(second);
        }
    }
    list.push(b']');
    String::from_utf8(list).ok()
}

/// The managedFields of `object` created by `manager` (at `now`), as the
/// compact JSON text of their list, its top-level field `skip` left out (a
/// status the server resets): exactly what [`track_update`](super::track_update)
/// of the create (no old object) gives, serialized. None when the entry would
/// own nothing (the object has no managedFields). `object` carries no
/// managedFields (it is ignored if it does).
pub fn created_text(
    definition: Option<&str>,
    object: &Value,
    skip: Option<&str>,
    manager: &str,
    api_version: &str,
    now: &str,
) -> Option<String> {
    let Value::Object(fields) = object else {
        return None;
    };
    let ty = TypeRef::root(definition);
    let mut list = Vec::with_capacity(1024);
    list.push(b'[');
    let created = write_entry(&mut list, manager, "", api_version, now, |out| {
        write_created_root(out, fields, &ty, skip)
    });
    list.push(b']');
    created.then(|| String::from_utf8(list).ok()).flatten()
}

/// Appends an entry of an update by `manager` whose FieldsV1 `fields_v1`
/// writes (keys in the order serialization sorts them); false, appending
/// nothing, when `fields_v1` says the entry owns nothing.
fn write_entry(
    out: &mut Vec<u8>,
    manager: &str,
    subresource: &str,
    api_version: &str,
    time: &str,
    fields_v1: impl FnOnce(&mut Vec<u8>) -> bool,
) -> bool {
    let start = out.len();
    out.extend_from_slice(b"{\"apiVersion\":");
    write_json_str(out, api_version);
    out.extend_from_slice(b",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":");
    if !fields_v1(out) {
        out.truncate(start);
        return false;
    }
    out.extend_from_slice(b",\"manager\":");
    write_json_str(out, manager);
    out.extend_from_slice(b",\"operation\":\"Update\"");
    if !subresource.is_empty() {
        out.extend_from_slice(b",\"subresource\":");
        write_json_str(out, subresource);
    }
    out.extend_from_slice(b",\"time\":");
    write_json_str(out, time);
    out.push(b'}');
    true
}

/// The FieldsV1 of a whole new object (but its field `skip`), as the
/// create's entry records it: apiVersion, kind and metadata are not owned
/// themselves, nor the metadata fields managedFields never tracks.
fn write_created_root(
    out: &mut Vec<u8>,
    object: &Map<String, Value>,
    ty: &TypeRef,
    skip: Option<&str>,
) -> bool {
    let object_type = ObjectType::new(*ty);
    let start = out.len();
    out.push(b'{');
    let mut children = 0;
    for (name, child) in object {
        if skip == Some(name.as_str()) {
            continue;
        }
        let (child_ty, _) = object_type.child(name);
        let member = !IGNORED_TOP_LEVEL.contains(&name.as_str());
        let ignored: &[&str] = if name == "metadata" {
            &IGNORED_METADATA
        } else {
            &[]
        };
        let mark = out.len();
        if children > 0 {
            out.push(b',');
        }
        write_field_key(out, name);
        out.push(b':');
        if write_created(out, child, &child_ty, member, ignored) {
            children += 1;
        } else {
            out.truncate(mark);
        }
    }
    if children == 0 {
        out.truncate(start);
        return false;
    }
    out.push(b'}');
    true
}

/// Appends the FieldsV1 of a node a write adds with everything below it
/// (`member`: whether the node itself is owned; `ignored`: names of its
/// fields that are not); false, appending nothing, when nothing in it is.
fn write_created(
    out: &mut Vec<u8>,
    value: &Value,
    ty: &TypeRef,
    member: bool,
    ignored: &[&str],
) -> bool {
    let start = out.len();
    out.push(b'{');
    let mut children = 0;
    match walk_of(ty, value) {
        Walk::Object(ty, _) => {
            if let Value::Object(fields) = value {
                for (name, child) in fields {
                    let (child_ty, _) = ty.child(name);
                    let child_member = !ignored.contains(&name.as_str());
                    let mark = out.len();
                    open_child(out, children, member);
                    write_field_key(out, name);
                    out.push(b':');
                    if write_created(out, child, &child_ty, child_member, &[]) {
                        children += 1;
                    } else {
                        out.truncate(mark);
                    }
                }
            }
        }
        Walk::List(list_type, items) => {
            if let Value::Array(list) = value
                && let Ok(Some(indexed)) = index_items(list_type, &items, list, &Vec::new(), false)
            {
                let mut keyed: Vec<(String, &Value)> = indexed
                    .into_iter()
                    .map(|(element, item)| (element.to_fields_v1_key(), item))
                    .collect();
                keyed.sort_by(|a, b| a.0.cmp(&b.0));
                for (key, item) in keyed {
                    let mark = out.len();
                    open_child(out, children, member);
                    write_json_str(out, &key);
                    out.push(b':');
                    if write_created(out, item, &items, true, &[]) {
                        children += 1;
                    } else {
                        out.truncate(mark);
                    }
                }
            }
        }
        Walk::Leaf => {}
    }
    if children == 0 {
        out.truncate(start);
        if member {
            out.extend_from_slice(b"{}");
        }
        return member;
    }
    out.push(b'}');
    true
}

/// Appends the FieldsV1 of what a write that made a node `new` from `old`
/// added or modified (see `changed_fields_v1` of the field manager); false,
/// appending nothing, when nothing.
fn write_changed(out: &mut Vec<u8>, old: Option<&Value>, new: &Value, ty: &TypeRef) -> bool {
    let Some(old) = old else {
        return write_created(out, new, ty, true, &[]);
    };
    if old == new {
        return false;
    }
    let walk = if std::mem::discriminant(old) == std::mem::discriminant(new) {
        walk_of(ty, new)
    } else {
        Walk::Leaf
    };
    let start = out.len();
    out.push(b'{');
    let mut children = 0;
    match walk {
        // A changed leaf is owned itself.
        Walk::Leaf => {
            out.push(b'}');
            return true;
        }
        Walk::Object(ty, _) => {
            let (Value::Object(old_fields), Value::Object(new_fields)) = (old, new) else {
                out.push(b'}');
                return true;
            };
            for (name, new_child) in new_fields {
                let old_child = old_fields.get(name);
                if old_child == Some(new_child) {
                    continue;
                }
                let (child_ty, _) = ty.child(name);
                let mark = out.len();
                if children > 0 {
                    out.push(b',');
                }
                write_field_key(out, name);
                out.push(b':');
                if write_changed(out, old_child, new_child, &child_ty) {
                    children += 1;
                } else {
                    out.truncate(mark);
                }
            }
        }
        Walk::List(list_type, items) => {
            let (Value::Array(old_list), Value::Array(new_list)) = (old, new) else {
                out.push(b'}');
                return true;
            };
            let indexed = (
                index_items(list_type, &items, old_list, &Vec::new(), false),
                index_items(list_type, &items, new_list, &Vec::new(), false),
            );
            let (Ok(Some(old_items)), Ok(Some(new_items))) = indexed else {
                // Items without keys: the list is compared as a whole.
                out.push(b'}');
                return true;
            };
            let by_key: Option<std::collections::HashMap<_, &Value>> =
                (old_items.len() > 16).then(|| old_items.iter().map(|(e, v)| (e, *v)).collect());
            let mut keyed = Vec::with_capacity(new_items.len());
            for (element, new_item) in &new_items {
                let old_item = match &by_key {
                    Some(by_key) => by_key.get(element).copied(),
                    None => old_items
                        .iter()
                        .find(|(old_element, _)| old_element == element)
                        .map(|(_, item)| *item),
                };
                if old_item != Some(*new_item) {
                    keyed.push((element.to_fields_v1_key(), old_item, *new_item));
                }
            }
            keyed.sort_by(|a, b| a.0.cmp(&b.0));
            for (key, old_item, new_item) in keyed {
                let mark = out.len();
                if children > 0 {
                    out.push(b',');
                }
                write_json_str(out, &key);
                out.push(b':');
                if write_changed(out, old_item, new_item, &items) {
                    children += 1;
                } else {
                    out.truncate(mark);
                }
            }
        }
    }
    if children == 0 {
        out.truncate(start);
        return false;
    }
    out.push(b'}');
    true
}

/// Before a node's child: the comma, or, before its first child, the
/// node's own `"."` when it is owned (`"."` sorts before every key).
fn open_child(out: &mut Vec<u8>, children: usize, member: bool) {
    if children > 0 {
        out.push(b',');
    } else if member {
        out.extend_from_slice(b"\".\":{},");
    }
}

/// Appends `"f:<name>"`, escaped as JSON.
fn write_field_key(out: &mut Vec<u8>, name: &str) {
    if !crate::json_text::needs_escape(name) {
        out.reserve(name.len() + 4);
        out.extend_from_slice(b"\"f:");
        out.extend_from_slice(name.as_bytes());
        out.push(b'"');
        return;
    }
    let at = out.len();
    write_json_str(out, name);
    // The opening quote is at `at`: the prefix goes right after it.
    out.splice(at + 1..at + 1, *b"f:");
}

/// Appends a JSON string as serde_json writes it.
fn write_json_str(out: &mut Vec<u8>, text: &str) {
    if !crate::json_text::needs_escape(text) {
        out.reserve(text.len() + 2);
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
        return;
    }
    if serde_json::to_writer(&mut *out, text).is_err() {
        // Writing into a Vec cannot fail.
        out.extend_from_slice(b"\"\"");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::{track_field_update, track_update};
    use serde_json::json;

    /// What the general path stores: the create tracked without `status`,
    /// then the write of `status` tracked, the list serialized.
    fn tracked(
        definition: Option<&str>,
        created: &Value,
        status: Option<&Value>,
        times: (&str, &str),
    ) -> Option<String> {
        let mut object = created.clone();
        let created_status = object.as_object_mut().and_then(|m| m.remove("status"));
        track_update(definition, None, &mut object, "restorer", "v1", times.0);
        if let Some(created_status) = &created_status {
            object["status"] = created_status.clone();
        }
        if let Some(status) = status {
            let before = object.get("status").cloned();
            object["status"] = status.clone();
            track_field_update(
                definition,
                before.as_ref(),
                &mut object,
                "status",
                "restorer",
                "status",
                "v1",
                times.1,
            );
        }
        object["metadata"]
            .get("managedFields")
            .map(|managed| serde_json::to_string(managed).expect("serializable"))
    }

    fn written(
        definition: Option<&str>,
        created: &Value,
        status: Option<&Value>,
        times: (&str, &str),
    ) -> Option<String> {
        let mut object = created.clone();
        let created_status = object.get("status").cloned();
        if let Some(status) = status {
            object["status"] = status.clone();
        }
        created_then_field_written(
            definition,
            &object,
            "status",
            created_status.as_ref(),
            "restorer",
            "status",
            "v1",
            times.0,
            times.1,
        )
    }

    #[test]
    fn the_text_is_what_tracking_the_create_and_the_write_stores() {
        let pod = |spec: Value, status: Value| {
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "default", "uid": "u",
                    "creationTimestamp": "t", "generation": 1,
                    "labels": {"app": "a", "we\"ird\\key\n": "é"},
                    "annotations": {}, "finalizers": ["x", "y"],
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                        "name": "rs", "uid": "ru", "controller": true}]},
                "spec": spec, "status": status})
        };
        let spec = json!({"nodeName": "n1", "restartPolicy": "Always",
            "containers": [
                {"name": "c", "image": "busybox", "ports": [{"containerPort": 80}, {"containerPort": 81, "protocol": "UDP"}],
                    "env": [{"name": "A", "value": "1"}], "resources": {}},
                {"name": "d", "image": "nginx", "args": ["a", "b"]}],
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "volumes": [{"name": "v", "emptyDir": {}}], "nodeSelector": null});
        let odd_spec = json!({"containers": [{"image": "no name"}, {"name": "c"}, {"name": "c"}],
            "unknownField": {"a": [1, {"b": 2}]}});
        let created_statuses = [
            None,
            Some(json!({"phase": "Pending", "qosClass": "BestEffort"})),
            Some(
                json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}),
            ),
        ];
        let statuses = [
            None,
            Some(json!({"phase": "Pending", "qosClass": "BestEffort"})),
            Some(
                json!({"phase": "Running", "podIP": "10.0.0.7", "qosClass": "BestEffort",
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [{"name": "c", "ready": true, "state": {"running": {"startedAt": "t"}}}]}),
            ),
            Some(
                json!({"phase": 7, "conditions": [{"status": "True"}], "podIPs": [{"ip": "a"}, {"ip": "a"}]}),
            ),
            Some(json!({})),
            Some(json!("odd")),
        ];
        let times = [("t1", "t2"), ("t2", "t2"), ("t3", "t2")];
        let mut cases = Vec::new();
        for spec in [&spec, &odd_spec, &json!({})] {
            for created_status in &created_statuses {
                let mut object = pod(spec.clone(), json!(null));
                match created_status {
                    Some(status) => object["status"] = status.clone(),
                    None => {
                        object.as_object_mut().map(|m| m.remove("status"));
                    }
                }
                cases.push((Some("io.k8s.api.core.v1.Pod"), object.clone()));
                cases.push((None, object));
            }
        }
        cases.push((
            Some("io.k8s.api.apps.v1.Deployment"),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "a"}},
                    "template": {"metadata": {"labels": {"app": "a"}}, "spec": spec}}}),
        ));
        cases.push((
            Some("io.k8s.api.core.v1.Node"),
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
                "status": {"capacity": {"cpu": "4"}, "addresses": [{"type": "InternalIP", "address": "a"}]}}),
        ));
        // Nothing tracked but the status.
        cases.push((
            Some("io.k8s.api.core.v1.Pod"),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
        ));
        for (definition, created) in &cases {
            for skip in [None, Some("status")] {
                let mut object = created.clone();
                if let Some(skip) = skip {
                    object.as_object_mut().map(|m| m.remove(skip));
                }
                track_update(*definition, None, &mut object, "restorer", "v1", "t1");
                let want = object["metadata"]
                    .get("managedFields")
                    .map(|managed| serde_json::to_string(managed).expect("serializable"));
                let got = created_text(*definition, created, skip, "restorer", "v1", "t1");
                assert_eq!(got, want, "{definition:?}: {created} without {skip:?}");
            }
        }
        let mut compared = 0;
        for (definition, created) in &cases {
            for status in &statuses {
                for times in times {
                    let want = tracked(*definition, created, status.as_ref(), times);
                    let got = written(*definition, created, status.as_ref(), times);
                    assert_eq!(
                        got, want,
                        "{definition:?}: {created} then {status:?} at {times:?}"
                    );
                    compared += usize::from(want.is_some());
                }
            }
        }
        assert!(compared > 100, "{compared}");
    }
}
