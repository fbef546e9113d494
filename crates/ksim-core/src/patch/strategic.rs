//! Strategic merge patch (`application/strategic-merge-patch+json`) as
//! kube-apiserver applies it to the built-in types
//! (`k8s.io/apimachinery/pkg/util/strategicpatch`, `StrategicMergeMapPatch`).
//!
//! The type graph comes from [`crate::schema::definitions`], the patch
//! strategy and merge key of each field from [`super::field_patch_meta`].
//! Maps merge recursively and `null` deletes a key; lists with the `merge`
//! strategy merge by merge key (lists of objects) or as a set (lists of
//! scalars); other lists are replaced. The directives `$patch`
//! (`replace`/`delete`), `$retainKeys`, `$deleteFromPrimitiveList/<field>` and
//! `$setElementOrder/<field>` are honoured. Fields the schema does not know
//! merge as plain maps and their lists are replaced.

use serde_json::{Map, Value};

use super::go_format::{go_string_verb, go_type, go_value};
use super::metadata::{FieldPatchMeta, PatchStrategy, field_patch_meta};
use crate::Error;
use crate::schema::{Definitions, definitions, referenced_definition};

const DIRECTIVE_MARKER: &str = "$patch";
const DELETE_DIRECTIVE: &str = "delete";
const REPLACE_DIRECTIVE: &str = "replace";
const MERGE_DIRECTIVE: &str = "merge";
const RETAIN_KEYS_DIRECTIVE: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST_PREFIX: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder";

const MAP_TYPE: &str = "map[string]interface {}";
const SLICE_TYPE: &str = "[]interface {}";

/// Applies a strategic merge patch to `original`, an object of the OpenAPI definition `definition`
/// (e.g. "io.k8s.api.apps.v1.Deployment"), walking the type graph of `ksim_core::schema::definitions()`
/// (`Definitions::field_definition`) and the patch metadata table.
///
/// A definition the schemas do not know (a custom resource) is patched as
/// plain maps. Invalid patches give [`Error::InvalidPatch`] with Kubernetes'
/// message.
pub fn strategic_merge_patch(
    definition: &str,
    original: &Value,
    patch: &Value,
) -> Result<Value, Error> {
    let Value::Object(original) = original else {
        return Err(invalid("invalid JSON document".to_owned()));
    };
    let patch = match patch {
        Value::Object(patch) => patch.clone(),
        Value::Null => Map::new(),
        other => {
            return Err(invalid(format!(
                "json: cannot unmarshal {} into Go value of type {MAP_TYPE}",
                json_kind(other)
            )));
        }
    };
    let patcher = Patcher {
        definitions: definitions(),
    };
    let node = patcher.root(definition);
    patcher
        .merge_map(original.clone(), patch, node)
        .map(Value::Object)
}

fn invalid(message: String) -> Error {
    Error::InvalidPatch(message)
}

/// The JSON kind as Go's decoder names it in "cannot unmarshal X" errors.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn bad_arg_type(expected: &str, actual: &Value) -> Error {
    invalid(format!(
        "expected a {expected}, but received a {}",
        go_type(actual)
    ))
}

fn no_merge_key(item: &Map<String, Value>, merge_key: &str) -> Error {
    invalid(format!(
        "map: {} does not contain declared merge key: {merge_key}",
        go_value(&Value::Object(item.clone()))
    ))
}

fn bad_patch_type(directive: &Value, map: &Map<String, Value>) -> Error {
    invalid(format!(
        "unknown patch type: {} in map: {}",
        go_string_verb(directive),
        go_value(&Value::Object(map.clone()))
    ))
}

/// Where in the type graph a value sits.
#[derive(Debug, Clone, Copy)]
enum Node<'a> {
    /// An object of this OpenAPI definition.
    Definition(&'a str),
    /// A map (`additionalProperties`) whose values are of this definition, if any.
    MapOf(Option<&'a str>),
    /// Nothing known: maps merge plainly, lists are replaced.
    Unknown,
}

/// What the patch needs to know about one field: the node of its value (or
/// of its list items) and its patch metadata.
struct Field<'a> {
    node: Node<'a>,
    meta: Option<FieldPatchMeta>,
}

impl Field<'_> {
    /// The list strategy Kubernetes derives from the tags: lists merge only
    /// with `merge` (alone or with `retainKeys`).
    fn merges_lists(&self) -> bool {
        matches!(
            self.meta.map(|m| m.strategy),
            Some(PatchStrategy::Merge | PatchStrategy::MergeRetainKeys)
        )
    }

    /// Maps are replaced whole only with the `replace` strategy.
    fn replaces_maps(&self) -> bool {
        matches!(self.meta.map(|m| m.strategy), Some(PatchStrategy::Replace))
    }

    fn merge_key(&self) -> Option<&'static str> {
        self.meta.and_then(|m| m.merge_key)
    }
}

/// Whether the items of a list are objects (merged by key) or scalars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ElementKind {
    Map,
    Scalar,
}

struct Patcher {
    definitions: &'static Definitions,
}

impl Patcher {
    fn root(&self, definition: &str) -> Node<'static> {
        match self
            .definitions
            .iter()
            .find(|(name, _)| *name == definition)
        {
            Some((name, _)) => Node::Definition(name),
            None => Node::Unknown,
        }
    }

    fn field(&self, node: Node<'static>, field: &str) -> Field<'static> {
        match node {
            Node::Unknown => Field {
                node: Node::Unknown,
                meta: None,
            },
            Node::MapOf(values) => Field {
                node: values.map_or(Node::Unknown, Node::Definition),
                meta: None,
            },
            Node::Definition(definition) => {
                let Some(property) = self.definitions.property(definition, field) else {
                    return Field {
                        node: Node::Unknown,
                        meta: None,
                    };
                };
                let meta = field_patch_meta(definition, field);
                let node = if let Some(values) = property.get("additionalProperties") {
                    Node::MapOf(referenced_definition(values))
                } else {
                    self.definitions
                        .field_definition(definition, field)
                        .map_or(Node::Unknown, Node::Definition)
                };
                Field { node, meta }
            }
        }
    }

    /// Merges `patch` into `original` (Kubernetes' `mergeMap`).
    fn merge_map(
        &self,
        mut original: Map<String, Value>,
        mut patch: Map<String, Value>,
        node: Node<'static>,
    ) -> Result<Map<String, Value>, Error> {
        if let Some(directive) = patch.get(DIRECTIVE_MARKER) {
            return match directive.as_str() {
                Some(REPLACE_DIRECTIVE) => {
                    patch.remove(DIRECTIVE_MARKER);
                    Ok(clean_map(patch))
                }
                Some(DELETE_DIRECTIVE) => Ok(Map::new()),
                _ => Err(bad_patch_type(directive, &patch)),
            };
        }

        apply_retain_keys(&mut original, &mut patch)?;
        self.apply_set_element_order(&mut original, &mut patch, node)?;

        for (key, patch_value) in patch {
            let (key, is_delete_list) = if key.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX) {
                (
                    directive_field(&key, DELETE_FROM_PRIMITIVE_LIST_PREFIX)?.to_owned(),
                    true,
                )
            } else {
                (key, false)
            };

            if patch_value.is_null() {
                original.remove(&key);
                continue;
            }
            let Some(original_value) = original.get_mut(&key) else {
                if !is_delete_list && let Some(value) = clean_new_value(patch_value) {
                    original.insert(key, value);
                }
                continue;
            };
            if !same_json_type(original_value, &patch_value) {
                if !is_delete_list {
                    match clean_new_value(patch_value) {
                        Some(value) => *original_value = value,
                        None => {
                            original.remove(&key);
                        }
                    }
                }
                continue;
            }
            match (original_value, patch_value) {
                (Value::Object(original_map), Value::Object(patch_map)) => {
                    let field = self.field(node, &key);
                    let merged = if field.replaces_maps() {
                        clean_map(patch_map)
                    } else {
                        self.merge_map(std::mem::take(original_map), patch_map, field.node)?
                    };
                    *original_map = merged;
                }
                (Value::Array(original_list), Value::Array(patch_list)) => {
                    let field = self.field(node, &key);
                    let merged = if field.merges_lists() || is_delete_list {
                        self.merge_list(
                            std::mem::take(original_list),
                            patch_list,
                            &field,
                            is_delete_list,
                        )?
                    } else {
                        patch_list.into_iter().map(strip_directive_keys).collect()
                    };
                    *original_list = merged;
                }
                (original_value, patch_value) => *original_value = patch_value,
            }
        }
        Ok(original)
    }

    /// Honours every `$setElementOrder/<field>` of `patch`, merging that
    /// field's patch list and ordering the result (Kubernetes'
    /// `mergePatchIntoOriginal`). Removes what it handled from `patch`.
    fn apply_set_element_order(
        &self,
        original: &mut Map<String, Value>,
        patch: &mut Map<String, Value>,
        node: Node<'static>,
    ) -> Result<(), Error> {
        let directives: Vec<String> = patch
            .keys()
            .filter(|k| k.starts_with(SET_ELEMENT_ORDER_PREFIX))
            .cloned()
            .collect();
        for directive in directives {
            let Some(order) = patch.remove(&directive) else {
                continue;
            };
            let Value::Array(order) = order else {
                return Err(bad_arg_type(SLICE_TYPE, &order));
            };
            let key = directive_field(&directive, SET_ELEMENT_ORDER_PREFIX)?.to_owned();
            let original_list = match original.get(&key) {
                None => None,
                Some(Value::Array(list)) => Some(list.clone()),
                Some(other) => return Err(bad_arg_type(SLICE_TYPE, other)),
            };
            let patch_list = match patch.get(&key) {
                None => None,
                Some(Value::Array(list)) => Some(list.clone()),
                Some(other) => return Err(bad_arg_type(SLICE_TYPE, other)),
            };
            let field = self.field(node, &key);
            let merge_key = field.merge_key();
            validate_patch_with_set_order(patch_list.as_deref().unwrap_or(&[]), &order, merge_key)?;

            let merged = match (&original_list, patch_list) {
                (None, None) => continue,
                (Some(original_list), None) => original_list.clone(),
                (None, Some(patch_list)) => {
                    patch_list.into_iter().filter_map(clean_new_value).collect()
                }
                (Some(original_list), Some(patch_list)) => {
                    if field.merges_lists() {
                        self.merge_list(original_list.clone(), patch_list, &field, false)?
                    } else {
                        patch_list.into_iter().map(strip_directive_keys).collect()
                    }
                }
            };
            let original_list = original_list.unwrap_or_default();
            let patch_items = patch.get(&key).and_then(Value::as_array);
            let kind = element_kind(&original_list, patch_items.map_or(&[], |v| v.as_slice()))?;
            let (in_order, server_only) = partition_by_presence(merged, &order, merge_key, kind)?;
            let ordered = normalize_element_order(
                in_order,
                server_only,
                &order,
                &original_list,
                merge_key,
                kind,
            )?;
            original.insert(key.clone(), Value::Array(ordered));
            patch.remove(&key);
        }
        Ok(())
    }

    /// Merges a list with the `merge` strategy, or applies a
    /// `$deleteFromPrimitiveList` (Kubernetes' `mergeSlice`).
    fn merge_list(
        &self,
        original: Vec<Value>,
        patch: Vec<Value>,
        field: &Field<'static>,
        is_delete_list: bool,
    ) -> Result<Vec<Value>, Error> {
        if original.is_empty() && patch.is_empty() {
            return Ok(original);
        }
        let kind = element_kind(&original, &patch)?;
        let merge_key = field.merge_key();
        let (server_order, patch, merged) = match kind {
            ElementKind::Scalar => {
                if is_delete_list {
                    return Ok(original
                        .into_iter()
                        .filter(|item| !patch.contains(item))
                        .collect());
                }
                let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
                for item in original.iter().chain(patch.iter()) {
                    if !merged.contains(item) {
                        merged.push(item.clone());
                    }
                }
                (original, patch, merged)
            }
            ElementKind::Map => {
                let Some(merge_key) = merge_key else {
                    let name = match field.node {
                        Node::Definition(_) => "struct",
                        _ => "map",
                    };
                    return Err(invalid(format!(
                        "cannot merge lists without merge key for {name}"
                    )));
                };
                let (original, patch) = apply_list_directives(original, patch, merge_key)?;
                let merged = self.merge_items_by_key(original.clone(), &patch, merge_key, field)?;
                (original, patch, merged)
            }
        };
        let (patch_items, server_only) = partition_by_presence(merged, &patch, merge_key, kind)?;
        normalize_element_order(
            patch_items,
            server_only,
            &patch,
            &server_order,
            merge_key,
            kind,
        )
    }

    /// Merges each patch item into the original item with the same merge key
    /// value, or appends it (Kubernetes' `mergeSliceWithoutSpecialElements`).
    fn merge_items_by_key(
        &self,
        mut original: Vec<Value>,
        patch: &[Value],
        merge_key: &str,
        field: &Field<'static>,
    ) -> Result<Vec<Value>, Error> {
        for item in patch {
            let Value::Object(item) = item else {
                return Err(bad_arg_type(MAP_TYPE, item));
            };
            let Some(key_value) = item.get(merge_key) else {
                return Err(no_merge_key(item, merge_key));
            };
            match find_by_key(&original, merge_key, key_value)? {
                Some(index) => {
                    let Value::Object(existing) = std::mem::take(&mut original[index]) else {
                        return Err(invalid(format!("value for key {index} is not a map")));
                    };
                    let merged = self.merge_map(existing, item.clone(), field.node)?;
                    original[index] = Value::Object(merged);
                }
                None => {
                    if let Some(value) = clean_new_value(Value::Object(item.clone())) {
                        original.push(value);
                    }
                }
            }
        }
        Ok(original)
    }
}

/// The field a `$deleteFromPrimitiveList/<field>` or `$setElementOrder/<field>` key names.
fn directive_field<'k>(key: &'k str, prefix: &str) -> Result<&'k str, Error> {
    match key.split_once('/') {
        Some((head, field)) if head == prefix => Ok(field),
        _ if prefix == DELETE_FROM_PRIMITIVE_LIST_PREFIX => {
            Err(invalid("invalid patch format of primitive list".to_owned()))
        }
        _ => Err(invalid(
            "invalid patch format of setElementOrder list".to_owned(),
        )),
    }
}

/// Applies `$retainKeys`: keys of `original` missing from the list are
/// cleared; every key the patch sets must be in the list.
fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<(), Error> {
    let Some(retain) = patch.remove(RETAIN_KEYS_DIRECTIVE) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(invalid("invalid patch format of retainKeys".to_owned()));
    };
    let retained = |key: &str| retain.iter().any(|k| k.as_str() == Some(key));
    for (key, value) in patch.iter() {
        if value.is_null()
            || key.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
            || key.starts_with(SET_ELEMENT_ORDER_PREFIX)
        {
            continue;
        }
        if !retained(key) {
            return Err(invalid("invalid patch format of retainKeys".to_owned()));
        }
    }
    original.retain(|key, _| retained(key));
    Ok(())
}

/// Handles the `$patch` items of a patch list (Kubernetes'
/// `mergeSliceWithSpecialElements`): `delete` removes the original items with
/// the same merge key value, `replace` makes the patch items the whole list.
/// Returns the original and the patch without directive items.
fn apply_list_directives(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>), Error> {
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    for item in patch {
        let Value::Object(map) = &item else {
            return Err(bad_arg_type(MAP_TYPE, &item));
        };
        let Some(directive) = map.get(DIRECTIVE_MARKER) else {
            plain.push(item);
            continue;
        };
        match directive.as_str() {
            Some(DELETE_DIRECTIVE) => {
                let Some(key_value) = map.get(merge_key) else {
                    return Err(no_merge_key(map, merge_key));
                };
                let mut kept = Vec::with_capacity(original.len());
                for existing in original {
                    if let Value::Object(existing_map) = &existing {
                        if existing_map.get(merge_key) == Some(key_value) {
                            continue;
                        }
                    } else {
                        return Err(invalid("value for key 0 is not a map".to_owned()));
                    }
                    kept.push(existing);
                }
                original = kept;
            }
            Some(REPLACE_DIRECTIVE) => replace = true,
            Some(MERGE_DIRECTIVE) => {
                return Err(invalid(
                    "merging lists cannot yet be specified in the patch".to_owned(),
                ));
            }
            _ => return Err(bad_patch_type(directive, map)),
        }
    }
    if replace {
        let replacement = plain.into_iter().map(strip_directive_keys).collect();
        return Ok((replacement, Vec::new()));
    }
    Ok((original, plain))
}

/// The index of the first item whose merge key equals `value`.
fn find_by_key(list: &[Value], merge_key: &str, value: &Value) -> Result<Option<usize>, Error> {
    for (index, item) in list.iter().enumerate() {
        let Value::Object(map) = item else {
            return Err(invalid(format!("value for key {index} is not a map")));
        };
        if map.get(merge_key) == Some(value) {
            return Ok(Some(index));
        }
    }
    Ok(None)
}

/// Checks that the items of the lists are all of one JSON type, and not lists
/// (Kubernetes' `sliceElementType`).
fn element_kind(original: &[Value], patch: &[Value]) -> Result<ElementKind, Error> {
    let mut first: Option<&Value> = None;
    for item in original.iter().chain(patch) {
        match first {
            None => {
                if item.is_array() {
                    return Err(invalid("lists of lists are not supported".to_owned()));
                }
                first = Some(item);
            }
            Some(first) if !same_json_type(first, item) => {
                let lists = Value::Array(vec![
                    Value::Array(original.to_vec()),
                    Value::Array(patch.to_vec()),
                ]);
                return Err(invalid(format!(
                    "list element types are not identical: {}",
                    go_value(&lists)
                )));
            }
            Some(_) => {}
        }
    }
    match first {
        None => Err(invalid("no elements in any of the given slices".to_owned())),
        Some(Value::Object(_)) => Ok(ElementKind::Map),
        Some(_) => Ok(ElementKind::Scalar),
    }
}

fn same_json_type(a: &Value, b: &Value) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// The identity of a list item: its merge key value for objects, itself for scalars.
fn identity<'v>(item: &'v Value, merge_key: Option<&str>, kind: ElementKind) -> Option<&'v Value> {
    match (kind, merge_key) {
        (ElementKind::Map, Some(key)) => item.get(key),
        (ElementKind::Map, None) => None,
        (ElementKind::Scalar, _) => Some(item),
    }
}

/// The position of `item` in `list`, by identity.
fn position(
    list: &[Value],
    item: &Value,
    merge_key: Option<&str>,
    kind: ElementKind,
) -> Option<usize> {
    let wanted = identity(item, merge_key, kind);
    list.iter()
        .position(|candidate| identity(candidate, merge_key, kind) == wanted)
}

/// Splits `merged` into the items present in `by` and the others (the
/// server-only items), keeping their order.
fn partition_by_presence(
    merged: Vec<Value>,
    by: &[Value],
    merge_key: Option<&str>,
    kind: ElementKind,
) -> Result<(Vec<Value>, Vec<Value>), Error> {
    let mut present = Vec::with_capacity(merged.len());
    let mut server_only = Vec::new();
    for item in merged {
        let found = match (kind, merge_key) {
            (ElementKind::Map, Some(key)) => {
                let Value::Object(map) = &item else {
                    return Err(bad_arg_type(MAP_TYPE, &item));
                };
                let Some(value) = map.get(key) else {
                    return Err(no_merge_key(map, key));
                };
                find_by_key(by, key, value)?.is_some()
            }
            _ => by.contains(&item),
        };
        if found {
            present.push(item);
        } else {
            server_only.push(item);
        }
    }
    Ok((present, server_only))
}

/// Orders the patch items by `patch_order` and the server-only items by
/// `server_order`, then interleaves them (Kubernetes' `normalizeElementOrder`
/// and `mergeSortedSlice`): a server-only item goes before a patch item only
/// when both are in `server_order` and it comes first there.
fn normalize_element_order(
    patch_items: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: Option<&str>,
    kind: ElementKind,
) -> Result<Vec<Value>, Error> {
    let patch_items = sort_by_order(patch_items, patch_order, merge_key, kind)?;
    let server_only = sort_by_order(server_only, server_order, merge_key, kind)?;

    let mut result = Vec::with_capacity(patch_items.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = patch_items.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => {
                match (
                    position(server_order, l, merge_key, kind),
                    position(server_order, r, merge_key, kind),
                ) {
                    (Some(li), Some(ri)) => li < ri,
                    _ => false,
                }
            }
        };
        let next = if take_left { left.next() } else { right.next() };
        result.extend(next);
    }
    Ok(result)
}

/// Stable-sorts `items` by their position in `order` (Kubernetes'
/// `normalizeSliceOrder`); for objects every item must carry the merge key,
/// and `$patch: delete` items go last.
fn sort_by_order(
    items: Vec<Value>,
    order: &[Value],
    merge_key: Option<&str>,
    kind: ElementKind,
) -> Result<Vec<Value>, Error> {
    let mut to_delete = Vec::new();
    let mut items = if kind == ElementKind::Map {
        if let Some(key) = merge_key {
            for item in items.iter().chain(order) {
                let Value::Object(map) = item else {
                    return Err(bad_arg_type(MAP_TYPE, item));
                };
                if !map.contains_key(key) {
                    return Err(no_merge_key(map, key));
                }
            }
        }
        let mut kept = Vec::with_capacity(items.len());
        for item in items {
            if item.get(DIRECTIVE_MARKER).and_then(Value::as_str) == Some(DELETE_DIRECTIVE) {
                to_delete.push(item);
            } else {
                kept.push(item);
            }
        }
        kept
    } else {
        items
    };
    items.sort_by_key(|item| position(order, item, merge_key, kind).unwrap_or(usize::MAX));
    items.extend(to_delete);
    Ok(items)
}

/// Checks that the patch list follows the relative order of its
/// `$setElementOrder` list and holds no item missing from it.
fn validate_patch_with_set_order(
    patch_list: &[Value],
    order: &[Value],
    merge_key: Option<&str>,
) -> Result<(), Error> {
    if order.is_empty() || patch_list.is_empty() {
        return Ok(());
    }
    let items: Vec<&Value> = match merge_key {
        Some(_) => {
            let mut kept = Vec::with_capacity(patch_list.len());
            for item in patch_list {
                let Value::Object(map) = item else {
                    return Err(bad_arg_type(MAP_TYPE, item));
                };
                if map.get(DIRECTIVE_MARKER).and_then(Value::as_str) != Some(DELETE_DIRECTIVE) {
                    kept.push(item);
                }
            }
            kept
        }
        None => patch_list.iter().collect(),
    };
    let (mut patch_index, mut order_index) = (0, 0);
    while patch_index < items.len() && order_index < order.len() {
        let item = items[patch_index];
        if item.get(DIRECTIVE_MARKER).is_some() {
            patch_index += 1;
            continue;
        }
        if merge_key_equal(item, &order[order_index], merge_key)? {
            patch_index += 1;
        }
        order_index += 1;
    }
    if patch_index < items.len() && order_index >= order.len() {
        return Err(invalid(format!(
            "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER_PREFIX} list:\n{}\n",
            go_value(&Value::Array(patch_list.to_vec())),
            go_value(&Value::Array(order.to_vec()))
        )));
    }
    Ok(())
}

fn merge_key_equal(left: &Value, right: &Value, merge_key: Option<&str>) -> Result<bool, Error> {
    let Some(key) = merge_key else {
        return Ok(left == right);
    };
    let Value::Object(left) = left else {
        return Err(bad_arg_type(MAP_TYPE, left));
    };
    let Value::Object(right) = right else {
        return Err(bad_arg_type(MAP_TYPE, right));
    };
    let Some(left_value) = left.get(key) else {
        return Err(no_merge_key(left, key));
    };
    let Some(right_value) = right.get(key) else {
        return Err(no_merge_key(right, key));
    };
    Ok(left_value == right_value)
}

/// Whether a key of a patch map is a directive rather than a field.
fn is_directive_key(key: &str) -> bool {
    key == DIRECTIVE_MARKER
        || key == RETAIN_KEYS_DIRECTIVE
        || key.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
        || key.starts_with(SET_ELEMENT_ORDER_PREFIX)
}

/// A patch value that lands where the original has nothing: `null`s are
/// dropped, maps carrying `$patch` vanish (Kubernetes' `removeDirectives`),
/// and leftover directive keys are dropped. `None` when the value vanishes.
fn clean_new_value(value: Value) -> Option<Value> {
    match value {
        Value::Object(map) => {
            if map.contains_key(DIRECTIVE_MARKER) {
                return None;
            }
            let cleaned = map
                .into_iter()
                .filter(|(k, v)| !v.is_null() && !is_directive_key(k))
                .filter_map(|(k, v)| clean_new_value(v).map(|v| (k, v)))
                .collect();
            Some(Value::Object(cleaned))
        }
        Value::Array(items) => Some(Value::Array(
            items.into_iter().filter_map(clean_new_value).collect(),
        )),
        other => Some(other),
    }
}

/// A map that replaces the original whole: `null`s and directive keys dropped.
fn clean_map(map: Map<String, Value>) -> Map<String, Value> {
    match strip_directive_keys(Value::Object(map)) {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Drops `null` fields and directive keys from a value, keeping every item.
fn strip_directive_keys(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(k, v)| !v.is_null() && !is_directive_key(k))
                .map(|(k, v)| (k, strip_directive_keys(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(strip_directive_keys).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const POD: &str = "io.k8s.api.core.v1.Pod";
    const NODE: &str = "io.k8s.api.core.v1.Node";
    const DEPLOYMENT: &str = "io.k8s.api.apps.v1.Deployment";

    fn pod_spec(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
    }

    /// (behaviour, definition, original, patch, expected result).
    fn cases() -> Vec<(&'static str, &'static str, Value, Value, Value)> {
        vec![
            (
                "containers merge by name and keep the original order",
                POD,
                pod_spec(
                    json!({"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}),
                ),
                json!({"spec": {"containers": [{"name": "b", "image": "b:2"}]}}),
                pod_spec(
                    json!({"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"}]}),
                ),
            ),
            (
                "a new container goes before the server-only ones",
                POD,
                pod_spec(json!({"containers": [{"name": "a"}, {"name": "b"}]})),
                json!({"spec": {"containers": [{"name": "c", "image": "c:1"}]}}),
                pod_spec(
                    json!({"containers": [{"name": "c", "image": "c:1"}, {"name": "a"}, {"name": "b"}]}),
                ),
            ),
            (
                "env merges by name inside a container",
                POD,
                pod_spec(
                    json!({"containers": [{"name": "a", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]}]}),
                ),
                json!({"spec": {"containers": [{"name": "a", "env": [{"name": "Y", "value": "3"}]}]}}),
                pod_spec(
                    json!({"containers": [{"name": "a", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "3"}]}]}),
                ),
            ),
            (
                "ports merge by containerPort",
                POD,
                pod_spec(
                    json!({"containers": [{"name": "a", "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 443}]}]}),
                ),
                json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "name": "http"}]}]}}),
                pod_spec(
                    json!({"containers": [{"name": "a", "ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"}, {"containerPort": 443}]}]}),
                ),
            ),
            (
                "$patch delete removes the container with that name",
                POD,
                pod_spec(json!({"containers": [{"name": "a"}, {"name": "b"}]})),
                json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}),
                pod_spec(json!({"containers": [{"name": "b"}]})),
            ),
            (
                "$patch replace in a list makes the patch items the whole list",
                POD,
                pod_spec(json!({"containers": [{"name": "a", "image": "a"}, {"name": "b"}]})),
                json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "c"}]}}),
                pod_spec(json!({"containers": [{"name": "c"}]})),
            ),
            (
                "$retainKeys on a volume clears the other volume source",
                POD,
                pod_spec(
                    json!({"volumes": [{"name": "v", "hostPath": {"path": "/a"}}, {"name": "w", "emptyDir": {}}]}),
                ),
                json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}, "$retainKeys": ["emptyDir", "name"]}]}}),
                pod_spec(
                    json!({"volumes": [{"name": "v", "emptyDir": {}}, {"name": "w", "emptyDir": {}}]}),
                ),
            ),
            (
                "$retainKeys on the deployment strategy drops rollingUpdate",
                DEPLOYMENT,
                json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}),
                json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
                json!({"spec": {"strategy": {"type": "Recreate"}}}),
            ),
            (
                "$setElementOrder orders patch items and interleaves server-only ones",
                POD,
                pod_spec(
                    json!({"containers": [{"name": "1", "other": "a"}, {"name": "2", "value": "2"}, {"name": "9"}, {"name": "3", "value": "3"}, {"name": "4", "value": "4"}]}),
                ),
                json!({"spec": {"$setElementOrder/containers": [{"name": "2"}, {"name": "1"}, {"name": "4"}, {"name": "3"}]}}),
                pod_spec(
                    json!({"containers": [{"name": "2", "value": "2"}, {"name": "1", "other": "a"}, {"name": "9"}, {"name": "4", "value": "4"}, {"name": "3", "value": "3"}]}),
                ),
            ),
            (
                "$setElementOrder with an added and a deleted item",
                POD,
                pod_spec(
                    json!({"containers": [{"name": "1", "other": "a"}, {"name": "2", "value": "2", "other": "b"}, {"name": "3", "value": "3"}]}),
                ),
                json!({"spec": {
                    "$setElementOrder/containers": [{"name": "4"}, {"name": "2"}, {"name": "1"}],
                    "containers": [{"name": "4", "value": "4"}, {"name": "3", "$patch": "delete"}]
                }}),
                pod_spec(
                    json!({"containers": [{"name": "4", "value": "4"}, {"name": "2", "value": "2", "other": "b"}, {"name": "1", "other": "a"}]}),
                ),
            ),
            (
                "$setElementOrder on a list of scalars",
                NODE,
                json!({"spec": {"podCIDRs": ["a", "d", "b"]}}),
                json!({"spec": {"$setElementOrder/podCIDRs": ["c", "a", "b"], "podCIDRs": ["c"]}}),
                json!({"spec": {"podCIDRs": ["c", "a", "d", "b"]}}),
            ),
            (
                "$setElementOrder with $deleteFromPrimitiveList",
                NODE,
                json!({"spec": {"podCIDRs": ["1", "2", "3"]}}),
                json!({"spec": {"$setElementOrder/podCIDRs": ["2", "1"], "$deleteFromPrimitiveList/podCIDRs": ["3"]}}),
                json!({"spec": {"podCIDRs": ["2", "1"]}}),
            ),
            (
                "finalizers merge as a set",
                POD,
                json!({"metadata": {"name": "p", "finalizers": ["a", "b"]}}),
                json!({"metadata": {"finalizers": ["c", "a"]}}),
                json!({"metadata": {"name": "p", "finalizers": ["c", "a", "b"]}}),
            ),
            (
                "$deleteFromPrimitiveList removes finalizers",
                POD,
                json!({"metadata": {"name": "p", "finalizers": ["a", "b", "a"]}}),
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a", "x"]}}),
                json!({"metadata": {"name": "p", "finalizers": ["b"]}}),
            ),
            (
                "$deleteFromPrimitiveList of a missing list adds nothing",
                POD,
                json!({"metadata": {"name": "p"}}),
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
                json!({"metadata": {"name": "p"}}),
            ),
            (
                "tolerations have no strategy and are replaced",
                POD,
                pod_spec(
                    json!({"tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]}),
                ),
                json!({"spec": {"tolerations": [{"key": "c", "operator": "Exists"}]}}),
                pod_spec(json!({"tolerations": [{"key": "c", "operator": "Exists"}]})),
            ),
            (
                "node taints have no strategy and are replaced",
                NODE,
                json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}}),
                json!({"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}}),
                json!({"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}}),
            ),
            (
                "null removes a label and other labels stay",
                POD,
                json!({"metadata": {"name": "p", "labels": {"app": "web", "tier": "front"}}}),
                json!({"metadata": {"labels": {"tier": null, "new": "x"}}}),
                json!({"metadata": {"name": "p", "labels": {"app": "web", "new": "x"}}}),
            ),
            (
                "kubectl cordon",
                NODE,
                json!({"metadata": {"name": "n"}, "spec": {"podCIDR": "10.0.0.0/24"}}),
                json!({"spec": {"unschedulable": true}}),
                json!({"metadata": {"name": "n"}, "spec": {"podCIDR": "10.0.0.0/24", "unschedulable": true}}),
            ),
            (
                "kubectl rollout restart",
                DEPLOYMENT,
                json!({"spec": {"replicas": 2, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}),
                json!({"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2025-01-01T00:00:00Z"}}}}}),
                json!({"spec": {"replicas": 2, "template": {"metadata": {"labels": {"app": "web"}, "annotations": {"kubectl.kubernetes.io/restartedAt": "2025-01-01T00:00:00Z"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}),
            ),
            (
                "kubectl apply of a deployment with a changed image",
                DEPLOYMENT,
                json!({
                    "metadata": {"name": "web", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "old", "deployment.kubernetes.io/revision": "1"}},
                    "spec": {"replicas": 1, "template": {"spec": {"containers": [
                        {"name": "web", "image": "nginx:1.25", "imagePullPolicy": "IfNotPresent", "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                        {"name": "sidecar", "image": "busybox"}
                    ]}}}
                }),
                json!({
                    "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "new"}},
                    "spec": {"template": {"spec": {
                        "$setElementOrder/containers": [{"name": "web"}, {"name": "sidecar"}],
                        "containers": [{"image": "nginx:1.26", "name": "web"}]
                    }}}
                }),
                json!({
                    "metadata": {"name": "web", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "new", "deployment.kubernetes.io/revision": "1"}},
                    "spec": {"replicas": 1, "template": {"spec": {"containers": [
                        {"name": "web", "image": "nginx:1.26", "imagePullPolicy": "IfNotPresent", "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                        {"name": "sidecar", "image": "busybox"}
                    ]}}}
                }),
            ),
            (
                "$patch replace on a map replaces it",
                POD,
                json!({"metadata": {"name": "p", "labels": {"a": "1", "b": "2"}}}),
                json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}}),
                json!({"metadata": {"name": "p", "labels": {"c": "3"}}}),
            ),
            (
                "$patch delete on a map empties it",
                POD,
                json!({"metadata": {"name": "p", "labels": {"a": "1"}}}),
                json!({"metadata": {"labels": {"$patch": "delete"}}}),
                json!({"metadata": {"name": "p", "labels": {}}}),
            ),
            (
                "the PDB selector has the replace strategy",
                "io.k8s.api.policy.v1.PodDisruptionBudget",
                json!({"spec": {"selector": {"matchLabels": {"a": "1"}}, "minAvailable": 1}}),
                json!({"spec": {"selector": {"matchLabels": {"b": "2"}}}}),
                json!({"spec": {"selector": {"matchLabels": {"b": "2"}}, "minAvailable": 1}}),
            ),
            (
                "node conditions merge by type",
                NODE,
                json!({"status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "MemoryPressure", "status": "False"}]}}),
                json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
                json!({"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "status": "False"}]}}),
            ),
            (
                "a new field takes the patch value without nulls or directives",
                POD,
                pod_spec(json!({})),
                json!({"spec": {"containers": [{"name": "a", "image": null}, {"name": "b", "$patch": "delete"}]}}),
                pod_spec(json!({"containers": [{"name": "a"}]})),
            ),
            (
                "unknown kinds merge maps and replace lists",
                "example.com.v1.Widget",
                json!({"spec": {"a": {"x": 1}, "items": [{"name": "a"}]}}),
                json!({"spec": {"a": {"y": 2}, "items": [{"name": "b"}]}}),
                json!({"spec": {"a": {"x": 1, "y": 2}, "items": [{"name": "b"}]}}),
            ),
            (
                "a scalar replaces a value of another type",
                POD,
                pod_spec(json!({"nodeName": {"odd": true}})),
                json!({"spec": {"nodeName": "n1"}}),
                pod_spec(json!({"nodeName": "n1"})),
            ),
            (
                "an empty list leaves a merging list alone",
                POD,
                pod_spec(json!({"containers": [{"name": "a"}]})),
                json!({"spec": {"containers": []}}),
                pod_spec(json!({"containers": [{"name": "a"}]})),
            ),
            (
                "an empty list clears a list without strategy",
                POD,
                pod_spec(json!({"tolerations": [{"key": "a"}]})),
                json!({"spec": {"tolerations": []}}),
                pod_spec(json!({"tolerations": []})),
            ),
            (
                "a null patch changes nothing",
                POD,
                pod_spec(json!({"nodeName": "n1"})),
                Value::Null,
                pod_spec(json!({"nodeName": "n1"})),
            ),
        ]
    }

    #[test]
    fn patches_apply_as_kubernetes_applies_them() {
        for (behaviour, definition, original, patch, expected) in cases() {
            let got = strategic_merge_patch(definition, &original, &patch)
                .unwrap_or_else(|e| panic!("{behaviour}: {e}"));
            assert_eq!(got, expected, "{behaviour}");
        }
    }

    /// (behaviour, definition, original, patch, expected message).
    fn invalid_cases() -> Vec<(&'static str, &'static str, Value, Value, &'static str)> {
        vec![
            (
                "an unknown $patch value on a map",
                DEPLOYMENT,
                json!({"metadata": {"labels": {"a": "1"}}}),
                json!({"metadata": {"labels": {"$patch": "foo"}}}),
                "unknown patch type: foo in map: map[$patch:foo]",
            ),
            (
                "an unknown $patch value in a list item",
                POD,
                pod_spec(json!({"containers": [{"name": "a"}]})),
                json!({"spec": {"containers": [{"name": "a", "$patch": "bar"}]}}),
                "unknown patch type: bar in map: map[$patch:bar name:a]",
            ),
            (
                "$patch merge in a list",
                POD,
                pod_spec(json!({"containers": [{"name": "a"}]})),
                json!({"spec": {"containers": [{"$patch": "merge"}]}}),
                "merging lists cannot yet be specified in the patch",
            ),
            (
                "a list item without its merge key",
                POD,
                pod_spec(json!({"containers": [{"name": "a"}]})),
                json!({"spec": {"containers": [{"image": "x"}]}}),
                "map: map[image:x] does not contain declared merge key: name",
            ),
            (
                "a field missing from $retainKeys",
                DEPLOYMENT,
                json!({"spec": {"strategy": {"type": "RollingUpdate"}}}),
                json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}}),
                "invalid patch format of retainKeys",
            ),
            (
                "$retainKeys that is not a list",
                DEPLOYMENT,
                json!({"spec": {"strategy": {"type": "RollingUpdate"}}}),
                json!({"spec": {"strategy": {"$retainKeys": "type"}}}),
                "invalid patch format of retainKeys",
            ),
            (
                "a patch list out of the $setElementOrder order",
                POD,
                pod_spec(json!({"containers": [{"name": "a"}, {"name": "b"}]})),
                json!({"spec": {"$setElementOrder/containers": [{"name": "a"}, {"name": "b"}], "containers": [{"name": "b"}, {"name": "a"}]}}),
                "The order in patch list:\n[map[name:b] map[name:a]]\n doesn't match $setElementOrder list:\n[map[name:a] map[name:b]]\n",
            ),
            (
                "$setElementOrder without a field",
                POD,
                pod_spec(json!({})),
                json!({"spec": {"$setElementOrder": []}}),
                "invalid patch format of setElementOrder list",
            ),
            (
                "$deleteFromPrimitiveList without a field",
                POD,
                json!({"metadata": {"finalizers": ["a"]}}),
                json!({"metadata": {"$deleteFromPrimitiveListfinalizers": ["a"]}}),
                "invalid patch format of primitive list",
            ),
            (
                "a list mixing objects and scalars",
                POD,
                pod_spec(json!({"containers": [{"name": "a"}]})),
                json!({"spec": {"containers": ["b"]}}),
                "list element types are not identical: [[map[name:a]] [b]]",
            ),
            (
                "lists of lists",
                POD,
                json!({"metadata": {"finalizers": [["a"]]}}),
                json!({"metadata": {"finalizers": [["b"]]}}),
                "lists of lists are not supported",
            ),
            (
                "a patch that is not an object",
                POD,
                json!({}),
                json!([1]),
                "json: cannot unmarshal array into Go value of type map[string]interface {}",
            ),
        ]
    }

    #[test]
    fn invalid_patches_give_kubernetes_messages() {
        for (behaviour, definition, original, patch, message) in invalid_cases() {
            let got = strategic_merge_patch(definition, &original, &patch);
            assert_eq!(
                got,
                Err(Error::InvalidPatch(message.to_owned())),
                "{behaviour}"
            );
        }
    }

    #[test]
    fn odd_patches_never_panic() {
        let originals = [
            pod_spec(
                json!({"containers": [{"name": "a", "ports": [{"containerPort": 1}]}], "volumes": [1, 2]}),
            ),
            json!({"metadata": {"finalizers": [null, 1, "a"]}, "spec": {"containers": "x"}}),
        ];
        let patches = [
            json!({"spec": {"containers": [null, {"name": "a"}]}}),
            json!({"spec": {"containers": [{"name": {"x": 1}, "$patch": "delete"}]}}),
            json!({"spec": {"volumes": [{"name": "v"}], "$setElementOrder/volumes": "x"}}),
            json!({"spec": {"$setElementOrder/containers": [1, 2], "containers": [{"name": "a"}]}}),
            json!({"spec": {"$setElementOrder/containers": [{"name": "a"}]}}),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [{"a": 1}]}}),
            json!({"metadata": {"finalizers": [{"$patch": "delete"}]}}),
            json!({"$patch": 1}),
            json!({"$retainKeys": [1, null]}),
            json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 1, "$patch": "replace"}]}]}}),
        ];
        for original in &originals {
            for patch in &patches {
                for definition in [POD, DEPLOYMENT, "unknown"] {
                    let _ = strategic_merge_patch(definition, original, patch);
                }
            }
        }
    }

    #[test]
    fn the_original_is_not_modified() {
        let original = pod_spec(json!({"containers": [{"name": "a"}]}));
        let before = original.clone();
        let patched = strategic_merge_patch(
            POD,
            &original,
            &json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}),
        );
        assert_eq!(patched, Ok(pod_spec(json!({"containers": []}))));
        assert_eq!(original, before);
    }
}
