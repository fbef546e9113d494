//! Walks of object values along their types: the field set of a value, the
//! merge of an applied configuration into a live object, the comparison of
//! two versions of an object (added, modified, removed fields) and the
//! pruning of fields a manager stopped applying.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::fieldpath::{FieldPath, FieldSet, PathElement, compact_json};
use super::types::{ListType, ObjectType, Shape, TypeRef};

/// How a value is walked, from its type and what it actually holds (a value
/// that does not fit its schema is a leaf).
pub(super) enum Walk {
    Object(ObjectType, bool),
    List(ListType, TypeRef),
    Leaf,
}

pub(super) fn walk_of(ty: &TypeRef, value: &Value) -> Walk {
    // Scalars are leaves whatever their type: most nodes of an object,
    // whose shapes need not be looked up.
    if !matches!(value, Value::Object(_) | Value::Array(_)) {
        return Walk::Leaf;
    }
    match (ty.shape(), value) {
        (shape @ Shape::Struct { .. }, Value::Object(_)) => {
            Walk::Object(ObjectType::with_shape(*ty, shape), false)
        }
        (shape @ (Shape::Map(_) | Shape::Untyped), Value::Object(_)) => {
            Walk::Object(ObjectType::with_shape(*ty, shape), true)
        }
        (Shape::List(list_type, items), Value::Array(_)) if list_type != ListType::Atomic => {
            Walk::List(list_type, items)
        }
        _ => Walk::Leaf,
    }
}

/// The path element of a list item, or why it has none.
pub fn item_element(
    list_type: ListType,
    items: &TypeRef,
    item: &Value,
) -> Result<PathElement, String> {
    match list_type {
        ListType::Set => Ok(PathElement::Value(compact_json(item))),
        ListType::Map(_) | ListType::MergeKey(_) => {
            let Value::Object(fields) = item else {
                return Err("associative list with keys may not have non-map elements".into());
            };
            let mut key = Vec::new();
            for name in list_type.keys() {
                let value = match fields.get(name) {
                    Some(value) => compact_json(value),
                    None => items.key_default(name).map(str::to_owned).ok_or_else(|| {
                        format!(
                            "associative list with keys has an element that omits key field {name:?} (and doesn't have default value)"
                        )
                    })?,
                };
                key.push((name.to_owned(), value));
            }
            key.sort();
            Ok(PathElement::Key(key))
        }
        ListType::Atomic => Err("atomic lists have no item keys".into()),
    }
}

/// The items of a list with their path elements. Strict: an item without a
/// key or a duplicate is an error; lenient: the list is treated as atomic
/// (None).
pub(super) fn index_items<'v>(
    list_type: ListType,
    items: &TypeRef,
    list: &'v [Value],
    path: &FieldPath,
    strict: bool,
) -> Result<Option<Vec<(PathElement, &'v Value)>>, String> {
    let mut out: Vec<(PathElement, &Value)> = Vec::with_capacity(list.len());
    // Short lists look for duplicates among the items so far; long ones index them.
    let mut seen = (list.len() > 16).then(HashMap::new);
    for item in list {
        let element = match item_element(list_type, items, item) {
            Ok(element) => element,
            Err(message) if strict => {
                return Err(format!(
                    "{}: {message}",
                    super::fieldpath::path_string(path)
                ));
            }
            Err(_) => return Ok(None),
        };
        let duplicate = match &mut seen {
            Some(seen) => seen.insert(element.clone(), ()).is_some(),
            None => out.iter().any(|(earlier, _)| *earlier == element),
        };
        if duplicate {
            if strict {
                return Err(format!(
                    "{}: duplicate entries for key {element}",
                    super::fieldpath::path_string(path)
                ));
            }
            continue;
        }
        out.push((element, item));
    }
    Ok(Some(out))
}

/// The set of fields a value sets (what an applier owns): leaves, list
/// items, map keys, and struct fields that are null or empty objects.
pub fn to_field_set(value: &Value, ty: &TypeRef) -> Result<FieldSet, String> {
    let mut set = FieldSet::new();
    let mut path = Vec::new();
    collect(value, ty, &mut path, &mut set)?;
    Ok(set)
}

fn collect(
    value: &Value,
    ty: &TypeRef,
    path: &mut FieldPath,
    set: &mut FieldSet,
) -> Result<(), String> {
    match walk_of(ty, value) {
        Walk::Object(ty, granular) => {
            let Value::Object(fields) = value else {
                return Ok(());
            };
            for (name, child) in fields {
                let (child_ty, declared) = ty.child(name);
                path.push(PathElement::Field(name.clone()));
                collect(child, &child_ty, path, set)?;
                let empty = child.is_null() || child.as_object().is_some_and(Map::is_empty);
                if granular || !declared || empty {
                    set.insert(path);
                }
                path.pop();
            }
        }
        Walk::List(list_type, items) => {
            let Value::Array(list) = value else {
                return Ok(());
            };
            let Some(indexed) = index_items(list_type, &items, list, path, true)? else {
                return Ok(());
            };
            for (element, item) in indexed {
                path.push(element);
                collect(item, &items, path, set)?;
                set.insert(path);
                path.pop();
            }
        }
        Walk::Leaf => set.insert(path),
    }
    Ok(())
}

/// `config` merged into `live`: objects field by field, associative lists
/// item by item (live order kept for items the config does not name),
/// everything else replaced by the config.
pub fn merge(live: &Value, config: &Value, ty: &TypeRef) -> Result<Value, String> {
    let mut path = Vec::new();
    merge_at(live, config, ty, &mut path)
}

fn merge_at(
    live: &Value,
    config: &Value,
    ty: &TypeRef,
    path: &mut FieldPath,
) -> Result<Value, String> {
    match (walk_of(ty, config), live, config) {
        (Walk::Object(ty, _), Value::Object(live_fields), Value::Object(config_fields)) => {
            let mut out = live_fields.clone();
            for (name, config_child) in config_fields {
                let merged = match live_fields.get(name) {
                    Some(live_child) => {
                        let (child_ty, _) = ty.child(name);
                        path.push(PathElement::Field(name.clone()));
                        let merged = merge_at(live_child, config_child, &child_ty, path)?;
                        path.pop();
                        merged
                    }
                    None => config_child.clone(),
                };
                out.insert(name.clone(), merged);
            }
            Ok(Value::Object(out))
        }
        (Walk::List(list_type, items), Value::Array(live_list), Value::Array(config_list)) => {
            let Some(config_items) = index_items(list_type, &items, config_list, path, true)?
            else {
                return Ok(config.clone());
            };
            let Some(live_items) = index_items(list_type, &items, live_list, path, false)? else {
                return Ok(config.clone());
            };
            let in_config: HashMap<&PathElement, &Value> =
                config_items.iter().map(|(e, v)| (e, *v)).collect();
            let in_live: HashMap<&PathElement, &Value> =
                live_items.iter().map(|(e, v)| (e, *v)).collect();
            // Live-only items stay just before the shared item that followed
            // them in the live list (or at the end).
            let mut before: HashMap<&PathElement, Vec<&Value>> = HashMap::new();
            let mut pending = Vec::new();
            for (element, item) in &live_items {
                if in_config.contains_key(element) {
                    before.insert(element, std::mem::take(&mut pending));
                } else {
                    pending.push(*item);
                }
            }
            let mut out = Vec::with_capacity(live_items.len() + config_items.len());
            for (element, config_item) in &config_items {
                if let Some(earlier) = before.remove(element) {
                    out.extend(earlier.into_iter().cloned());
                }
                match in_live.get(element) {
                    Some(live_item) => {
                        path.push(element.clone());
                        out.push(merge_at(live_item, config_item, &items, path)?);
                        path.pop();
                    }
                    None => out.push((*config_item).clone()),
                }
            }
            out.extend(pending.into_iter().cloned());
            Ok(Value::Array(out))
        }
        _ => Ok(config.clone()),
    }
}

/// Removes fields set to null where the schema declares them: a typed
/// object cannot hold null (`creationTimestamp: null` means unset).
pub fn drop_typed_nulls(value: &mut Value, ty: &TypeRef) {
    match walk_of(ty, value) {
        Walk::Object(ty, _) => {
            let Value::Object(fields) = value else {
                return;
            };
            fields.retain(|name, child| {
                let (child_ty, _) = ty.child(name);
                if child.is_null() && child_ty.is_typed() {
                    return false;
                }
                drop_typed_nulls(child, &child_ty);
                true
            });
        }
        Walk::List(_, items) => {
            if let Value::Array(list) = value {
                for item in list {
                    drop_typed_nulls(item, &items);
                }
            }
        }
        Walk::Leaf => {}
    }
}

/// What changed from one version of an object to the next.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

/// Compares `old` with `new`: leaves that appear, change or disappear, and
/// objects, maps and list items that appear or disappear.
pub fn compare(old: &Value, new: &Value, ty: &TypeRef) -> Comparison {
    compare_skipping(old, new, ty, |_| false)
}

/// [`compare`] leaving out the paths `skip` says (they are still walked):
/// the same as taking them out of each set afterwards, without the copies.
pub fn compare_skipping(
    old: &Value,
    new: &Value,
    ty: &TypeRef,
    skip: fn(&[PathElement]) -> bool,
) -> Comparison {
    let mut recorder = Recorder {
        comparison: Comparison::default(),
        skip,
    };
    let mut path = Vec::new();
    compare_at(Some(old), Some(new), ty, &mut path, &mut recorder);
    recorder.comparison
}

/// [`compare_skipping`] of two objects that differ in nothing but their
/// top-level field `name` (`old` and `new` are that field's values): only
/// that field is walked, and the comparison is the whole objects' one.
pub fn compare_field_skipping(
    old: Option<&Value>,
    new: Option<&Value>,
    ty: &TypeRef,
    name: &str,
    skip: fn(&[PathElement]) -> bool,
) -> Comparison {
    let mut recorder = Recorder {
        comparison: Comparison::default(),
        skip,
    };
    if old != new {
        let (child_ty, _) = ty.child(name);
        let mut path = vec![PathElement::Field(name.to_string())];
        compare_at(old, new, &child_ty, &mut path, &mut recorder);
    }
    recorder.comparison
}

/// Collects a comparison, leaving out skipped paths.
struct Recorder {
    comparison: Comparison,
    skip: fn(&[PathElement]) -> bool,
}

impl Recorder {
    fn added(&mut self, path: &[PathElement]) {
        if !(self.skip)(path) {
            self.comparison.added.insert(path);
        }
    }

    fn removed(&mut self, path: &[PathElement]) {
        if !(self.skip)(path) {
            self.comparison.removed.insert(path);
        }
    }

    fn modified(&mut self, path: &[PathElement]) {
        if !(self.skip)(path) {
            self.comparison.modified.insert(path);
        }
    }
}

fn compare_at(
    old: Option<&Value>,
    new: Option<&Value>,
    ty: &TypeRef,
    path: &mut FieldPath,
    out: &mut Recorder,
) {
    let Some(shape_from) = new.or(old) else {
        return;
    };
    // When the two sides are of different kinds the node is a changed leaf.
    let same_kind = match (old, new) {
        (Some(a), Some(b)) => std::mem::discriminant(a) == std::mem::discriminant(b),
        _ => true,
    };
    let walk = if same_kind {
        walk_of(ty, shape_from)
    } else {
        Walk::Leaf
    };
    match walk {
        Walk::Leaf => match (old, new) {
            (None, Some(_)) => out.added(path),
            (Some(_), None) => out.removed(path),
            (Some(a), Some(b)) if a != b => out.modified(path),
            _ => {}
        },
        Walk::Object(ty, _) => {
            let empty = Map::new();
            let old_fields = old.and_then(Value::as_object).unwrap_or(&empty);
            let new_fields = new.and_then(Value::as_object).unwrap_or(&empty);
            // metadata.managedFields is never compared: the bookkeeping of
            // ownership is not a field anybody owns.
            let in_metadata = matches!(path.as_slice(), [PathElement::Field(m)] if m == "metadata");
            let skip = |name: &str| in_metadata && name == "managedFields";
            for (name, new_child) in new_fields {
                let old_child = old_fields.get(name);
                // An unchanged child records nothing: skip its walk.
                if skip(name) || old_child == Some(new_child) {
                    continue;
                }
                let (child_ty, _) = ty.child(name);
                path.push(PathElement::Field(name.clone()));
                compare_at(old_child, Some(new_child), &child_ty, path, out);
                path.pop();
            }
            for (name, old_child) in old_fields {
                if !new_fields.contains_key(name) && !skip(name) {
                    let (child_ty, _) = ty.child(name);
                    path.push(PathElement::Field(name.clone()));
                    compare_at(Some(old_child), None, &child_ty, path, out);
                    path.pop();
                }
            }
            mark_node(old, new, path, out);
        }
        Walk::List(list_type, items) => {
            let empty = Vec::new();
            let old_list = old.and_then(Value::as_array).unwrap_or(&empty);
            let new_list = new.and_then(Value::as_array).unwrap_or(&empty);
            let indexed = (
                index_items(list_type, &items, old_list, path, false),
                index_items(list_type, &items, new_list, path, false),
            );
            let (Ok(Some(old_items)), Ok(Some(new_items))) = indexed else {
                // Items without keys: the list is compared as a whole.
                match (old, new) {
                    (None, Some(_)) => out.added(path),
                    (Some(_), None) => out.removed(path),
                    (Some(a), Some(b)) if a != b => out.modified(path),
                    _ => {}
                }
                return;
            };
            let old_by_key: HashMap<&PathElement, &Value> =
                old_items.iter().map(|(e, v)| (e, *v)).collect();
            let new_keys: HashMap<&PathElement, ()> =
                new_items.iter().map(|(e, _)| (e, ())).collect();
            for (element, new_item) in &new_items {
                let old_item = old_by_key.get(element).copied();
                if old_item == Some(*new_item) {
                    continue;
                }
                path.push(element.clone());
                compare_at(old_item, Some(new_item), &items, path, out);
                path.pop();
            }
            for (element, old_item) in &old_items {
                if !new_keys.contains_key(element) {
                    path.push(element.clone());
                    compare_at(Some(old_item), None, &items, path, out);
                    path.pop();
                }
            }
            mark_node(old, new, path, out);
        }
    }
}

fn mark_node(old: Option<&Value>, new: Option<&Value>, path: &FieldPath, out: &mut Recorder) {
    if path.is_empty() {
        return;
    }
    match (old, new) {
        (None, Some(_)) => out.added(path),
        (Some(_), None) => out.removed(path),
        _ => {}
    }
}

/// Removes from `value` the fields applied before (`last`) that nobody owns
/// any more (nothing in `owned` at or below them).
pub fn prune(value: &mut Value, ty: &TypeRef, last: &FieldSet, owned: &FieldSet) {
    match walk_of(ty, value) {
        Walk::Object(ty, _) => {
            let Value::Object(fields) = value else {
                return;
            };
            fields.retain(|name, child| {
                let element = PathElement::Field(name.clone());
                let Some(last_child) = last.child(&element) else {
                    return true;
                };
                let Some(owned_child) = owned.child(&element).filter(|o| !o.is_empty()) else {
                    return false;
                };
                let (child_ty, _) = ty.child(name);
                prune(child, &child_ty, last_child, owned_child);
                true
            });
        }
        Walk::List(list_type, items) => {
            let Value::Array(list) = value else {
                return;
            };
            let elements: Vec<Option<PathElement>> = list
                .iter()
                .map(|item| item_element(list_type, &items, item).ok())
                .collect();
            let mut kept = Vec::with_capacity(list.len());
            for (item, element) in list.drain(..).zip(elements) {
                let Some(element) = element else {
                    kept.push(item);
                    continue;
                };
                let Some(last_child) = last.child(&element) else {
                    kept.push(item);
                    continue;
                };
                let Some(owned_child) = owned.child(&element).filter(|o| !o.is_empty()) else {
                    continue;
                };
                let mut item = item;
                prune(&mut item, &items, last_child, owned_child);
                kept.push(item);
            }
            *list = kept;
        }
        Walk::Leaf => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DEPLOYMENT: &str = "io.k8s.api.apps.v1.Deployment";

    fn fields_v1(value: &Value) -> Value {
        to_field_set(value, &TypeRef::root(Some(DEPLOYMENT)))
            .expect("valid value")
            .to_fields_v1()
    }

    #[test]
    fn field_set_of_a_deployment_keys_containers_by_name() {
        let deployment = json!({
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [
                    {"name": "nginx", "image": "nginx", "ports": [{"containerPort": 80}]}
                ]}}
            }
        });
        assert_eq!(
            fields_v1(&deployment),
            json!({"f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {"f:spec": {"f:containers": {
                    "k:{\"name\":\"nginx\"}": {
                        ".": {},
                        "f:image": {},
                        "f:name": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                            ".": {}, "f:containerPort": {}
                        }}
                    }
                }}}
            }})
        );
    }

    #[test]
    fn bad_list_items_are_errors_when_strict() {
        let ty = TypeRef::root(Some(DEPLOYMENT));
        for containers in [
            json!([{"image": "x"}]),
            json!([{"name": "a"}, {"name": "a"}]),
            json!(["a"]),
        ] {
            let value = json!({"spec": {"template": {"spec": {"containers": containers}}}});
            assert!(to_field_set(&value, &ty).is_err(), "{value}");
            assert!(merge(&value, &value, &ty).is_err(), "{value}");
            // Comparisons never fail: such lists compare as a whole.
            let _ = compare(&json!({}), &value, &ty);
        }
    }

    #[test]
    fn merge_keeps_live_only_items_in_place() {
        let ty = TypeRef::root(Some("io.k8s.api.core.v1.Pod"));
        let live = json!({"spec": {"containers": [
            {"name": "a", "image": "a:1"}, {"name": "side", "image": "s"}, {"name": "b", "image": "b:1"}
        ]}});
        let config = json!({"spec": {"containers": [
            {"name": "b", "image": "b:2"}, {"name": "a", "image": "a:2"}, {"name": "c", "image": "c"}
        ]}});
        let merged = merge(&live, &config, &ty).expect("mergeable");
        let names: Vec<&str> = merged["spec"]["containers"]
            .as_array()
            .expect("list")
            .iter()
            .map(|c| c["image"].as_str().expect("image"))
            .collect();
        assert_eq!(names, vec!["s", "b:2", "a:2", "c"]);
    }

    #[test]
    fn typed_nulls_are_dropped_and_untyped_kept() {
        let mut value = json!({
            "metadata": {"creationTimestamp": null, "labels": {"a": null}},
            "spec": {"template": {"metadata": {"creationTimestamp": null}}, "x": null}
        });
        drop_typed_nulls(&mut value, &TypeRef::root(Some(DEPLOYMENT)));
        assert_eq!(
            value,
            json!({"metadata": {"labels": {}}, "spec": {"template": {"metadata": {}}, "x": null}})
        );
    }

    #[test]
    fn compare_reports_added_modified_removed() {
        let ty = TypeRef::root(Some(DEPLOYMENT));
        let old = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"replicas": 1}});
        let new = json!({"metadata": {"labels": {"a": "1", "c": "3"}}, "spec": {"replicas": 2, "paused": true}});
        let comparison = compare(&old, &new, &ty);
        assert_eq!(
            comparison.added.to_fields_v1(),
            json!({"f:metadata": {"f:labels": {"f:c": {}}}, "f:spec": {"f:paused": {}}})
        );
        assert_eq!(
            comparison.modified.to_fields_v1(),
            json!({"f:spec": {"f:replicas": {}}})
        );
        assert_eq!(
            comparison.removed.to_fields_v1(),
            json!({"f:metadata": {"f:labels": {"f:b": {}}}})
        );
    }
}
