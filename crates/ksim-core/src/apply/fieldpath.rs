//! Field paths and field sets as server-side apply records them: path
//! elements (`.name`, `[name="nginx"]`, `[="value"]`, `[3]`), the set tree of
//! owned fields, and its `FieldsV1` encoding in `metadata.managedFields`
//! (`f:name`, `k:{"name":"nginx"}`, `v:"value"`, `i:3`, `.` for the node itself).

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

/// One step of a field path. The variant order is the order of the
/// `FieldsV1` encoding: field names first, then keys, values, indices.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElement {
    /// A struct field or map key.
    Field(String),
    /// An item of an associative list, by its key fields (sorted by name,
    /// values as compact JSON).
    Key(Vec<(String, String)>),
    /// An item of a set list, by its value (compact JSON).
    Value(String),
    /// An item of a list by position.
    Index(usize),
}

impl PathElement {
    /// The key of this element in a `FieldsV1` object.
    pub fn to_fields_v1_key(&self) -> String {
        match self {
            PathElement::Field(name) => field_key(name),
            PathElement::Key(fields) => {
                let length: usize = fields
                    .iter()
                    .map(|(name, value)| name.len() + value.len() + 4)
                    .sum();
                let mut key = String::with_capacity(length + 4);
                key.push_str("k:{");
                for (n, (name, value)) in fields.iter().enumerate() {
                    if n > 0 {
                        key.push(',');
                    }
                    key.push_str(&json_string(name));
                    key.push(':');
                    key.push_str(value);
                }
                key.push('}');
                key
            }
            PathElement::Value(value) => {
                let mut key = String::with_capacity(value.len() + 2);
                key.push_str("v:");
                key.push_str(value);
                key
            }
            PathElement::Index(index) => format!("i:{index}"),
        }
    }

    /// Parses a `FieldsV1` object key (not `.`).
    pub fn from_fields_v1_key(key: &str) -> Result<PathElement, String> {
        if let Some(name) = key.strip_prefix("f:") {
            return Ok(PathElement::Field(name.to_owned()));
        }
        if let Some(json) = key.strip_prefix("k:") {
            let fields: Map<String, Value> = serde_json::from_str(json)
                .map_err(|e| format!("invalid key {json:?} in FieldsV1: {e}"))?;
            let mut pairs: Vec<(String, String)> = fields
                .into_iter()
                .map(|(name, value)| (name, compact_json(&value)))
                .collect();
            pairs.sort();
            return Ok(PathElement::Key(pairs));
        }
        if let Some(json) = key.strip_prefix("v:") {
            let value: Value = serde_json::from_str(json)
                .map_err(|e| format!("invalid value {json:?} in FieldsV1: {e}"))?;
            return Ok(PathElement::Value(compact_json(&value)));
        }
        if let Some(index) = key.strip_prefix("i:") {
            let index = index
                .parse()
                .map_err(|e| format!("invalid index {index:?} in FieldsV1: {e}"))?;
            return Ok(PathElement::Index(index));
        }
        Err(format!("unknown path element {key:?} in FieldsV1"))
    }
}

/// `f:<name>`, the FieldsV1 key of a field.
pub(crate) fn field_key(name: &str) -> String {
    let mut key = String::with_capacity(name.len() + 2);
    key.push_str("f:");
    key.push_str(name);
    key
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// The compact JSON text of a value (serialized directly: `Display` goes
/// through the formatting machinery, several times slower).
/// Appends `text` as a JSON string exactly as serde_json writes it (only
/// quotes, backslashes and control characters are escaped, by serde_json).
pub(crate) fn write_json_str(out: &mut String, text: &str) {
    if crate::json_text::needs_escape(text) {
        out.push_str(&json_string(text));
    } else {
        out.reserve(text.len() + 2);
        out.push('"');
        out.push_str(text);
        out.push('"');
    }
}

pub(crate) fn compact_json(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

impl fmt::Display for PathElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let pairs: Vec<String> = fields
                    .iter()
                    .map(|(name, value)| format!("{name}={value}"))
                    .collect();
                write!(f, "[{}]", pairs.join(","))
            }
            PathElement::Value(value) => write!(f, "[={value}]"),
            PathElement::Index(index) => write!(f, "[{index}]"),
        }
    }
}

/// A field path, e.g. `.spec.template.spec.containers[name="nginx"].image`.
pub type FieldPath = Vec<PathElement>;

/// The text of a path as kube-apiserver prints it in conflicts.
pub fn path_string(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// A set of field paths, stored as a tree. A node is a member when the path
/// that leads to it is in the set; it may also have members below it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    member: bool,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> FieldSet {
        FieldSet::default()
    }

    /// Whether no path is in the set.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    /// Whether the node itself (the path leading here) is in the set.
    pub fn is_member(&self) -> bool {
        self.member
    }

    /// Adds `path` to the set.
    pub fn insert(&mut self, path: &[PathElement]) {
        match path.split_first() {
            None => self.member = true,
            Some((first, rest)) => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Whether `path` is in the set.
    pub fn has(&self, path: &[PathElement]) -> bool {
        self.node(path).is_some_and(|node| node.member)
    }

    /// The subtree under `path` (the paths that start with it).
    pub fn node(&self, path: &[PathElement]) -> Option<&FieldSet> {
        match path.split_first() {
            None => Some(self),
            Some((first, rest)) => self.children.get(first)?.node(rest),
        }
    }

    /// The subtree under one element.
    pub fn child(&self, element: &PathElement) -> Option<&FieldSet> {
        self.children.get(element)
    }

    /// Paths in either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.union_with(other);
        out
    }

    /// Adds the paths of `other` to `self` in place.
    pub fn union_with(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (element, child) in &other.children {
            self.children
                .entry(element.clone())
                .or_default()
                .union_with(child);
        }
    }

    /// Paths in `self` that are not in `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (element, child) in &self.children {
            let rest = match other.children.get(element) {
                Some(other_child) => child.difference(other_child),
                None => child.clone(),
            };
            if !rest.is_empty() {
                out.children.insert(element.clone(), rest);
            }
        }
        out
    }

    /// Takes the paths of `other` out of `self` in place (what
    /// [`Self::difference`] gives, touching only the nodes `other` reaches);
    /// true if anything was taken out.
    pub fn remove_all(&mut self, other: &FieldSet) -> bool {
        let mut removed = self.member && other.member;
        if other.member {
            self.member = false;
        }
        for (element, other_child) in &other.children {
            if let Some(child) = self.children.get_mut(element) {
                removed |= child.remove_all(other_child);
                if child.is_empty() {
                    self.children.remove(element);
                }
            }
        }
        removed
    }

    /// Paths in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (element, child) in &self.children {
            if let Some(other_child) = other.children.get(element) {
                let both = child.intersection(other_child);
                if !both.is_empty() {
                    out.children.insert(element.clone(), both);
                }
            }
        }
        out
    }

    /// Every path in the set, in kube-apiserver's order: the members of a
    /// level first, then the paths below each child, children sorted.
    pub fn paths(&self) -> Vec<FieldPath> {
        let mut out = Vec::new();
        let mut prefix = Vec::new();
        self.collect_paths(&mut prefix, &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut FieldPath, out: &mut Vec<FieldPath>) {
        for (element, child) in &self.children {
            if child.member {
                let mut path = prefix.clone();
                path.push(element.clone());
                out.push(path);
            }
        }
        for (element, child) in &self.children {
            prefix.push(element.clone());
            child.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// The `FieldsV1` encoding of the set.
    pub fn to_fields_v1(&self) -> Value {
        let mut object = Map::new();
        if self.member {
            object.insert(".".to_owned(), Value::Object(Map::new()));
        }
        for (element, child) in &self.children {
            if child.is_empty() {
                continue;
            }
            let encoded = if child.children.values().all(FieldSet::is_empty) {
                Value::Object(Map::new())
            } else {
                child.to_fields_v1()
            };
            object.insert(element.to_fields_v1_key(), encoded);
        }
        Value::Object(object)
    }

    /// Appends the compact JSON of [`Self::to_fields_v1`] (as serde_json
    /// writes that value: keys in order, the last of equal keys kept)
    /// without building it.
    pub(crate) fn write_fields_v1(&self, out: &mut String) {
        let mut keys: Vec<(String, &FieldSet)> = Vec::with_capacity(self.children.len());
        for (element, child) in &self.children {
            if !child.is_empty() {
                keys.push((element.to_fields_v1_key(), child));
            }
        }
        // Stable: of equal keys the last (the one a map keeps) is written.
        keys.sort_by(|a, b| a.0.cmp(&b.0));
        out.push('{');
        let mut first = true;
        if self.member && !keys.iter().any(|(key, _)| key == ".") {
            out.push_str("\".\":{}");
            first = false;
        }
        for (n, (key, child)) in keys.iter().enumerate() {
            if keys.get(n + 1).is_some_and(|(next, _)| next == key) {
                continue;
            }
            if !first {
                out.push(',');
            }
            first = false;
            write_json_str(out, key);
            out.push(':');
            if child.children.values().all(FieldSet::is_empty) {
                out.push_str("{}");
            } else {
                child.write_fields_v1(out);
            }
        }
        out.push('}');
    }

    /// Parses a `FieldsV1` object.
    pub fn from_fields_v1(value: &Value) -> Result<FieldSet, String> {
        let object = value
            .as_object()
            .ok_or_else(|| "FieldsV1 must be a JSON object".to_owned())?;
        let mut set = FieldSet::new();
        for (key, child) in object {
            if key == "." {
                set.member = true;
                continue;
            }
            let element = PathElement::from_fields_v1_key(key)?;
            let mut node = FieldSet::from_fields_v1(child)?;
            if child.as_object().is_some_and(Map::is_empty) {
                node.member = true;
            }
            set.children.insert(element, node);
        }
        Ok(set)
    }
}

/// An object key, borrowed from the JSON text when it has no escapes.
pub(crate) struct BorrowedKey;

impl<'de> serde::de::DeserializeSeed<'de> for BorrowedKey {
    type Value = std::borrow::Cow<'de, str>;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> serde::de::Visitor<'de> for BorrowedKey {
    type Value = std::borrow::Cow<'de, str>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a string")
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, key: &'de str) -> Result<Self::Value, E> {
        Ok(std::borrow::Cow::Borrowed(key))
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(std::borrow::Cow::Owned(key.to_owned()))
    }

    fn visit_string<E: serde::de::Error>(self, key: String) -> Result<Self::Value, E> {
        Ok(std::borrow::Cow::Owned(key))
    }
}

/// Parses a `FieldsV1` object straight from JSON text into a [`FieldSet`],
/// giving what [`FieldSet::from_fields_v1`] gives of the parsed value, or
/// an error whenever that might differ or fail (a non-object node, a bad
/// key, two keys of one object naming the same element): the caller then
/// takes the general path, which decides.
pub(crate) struct FieldsV1Seed {
    /// The root of a FieldsV1 (an empty root is the empty set; an empty
    /// child is a member).
    pub(crate) root: bool,
}

impl<'de> serde::de::DeserializeSeed<'de> for FieldsV1Seed {
    type Value = FieldSet;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<FieldSet, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for FieldsV1Seed {
    type Value = FieldSet;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a FieldsV1 object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<FieldSet, A::Error> {
        use serde::de::Error as _;
        let mut set = FieldSet::new();
        let mut keys = 0usize;
        while let Some(key) = map.next_key_seed(BorrowedKey)? {
            keys += 1;
            if key == "." {
                map.next_value::<serde::de::IgnoredAny>()?;
                set.member = true;
                continue;
            }
            let element = PathElement::from_fields_v1_key(&key).map_err(A::Error::custom)?;
            let node = map.next_value_seed(FieldsV1Seed { root: false })?;
            if set.children.insert(element, node).is_some() {
                return Err(A::Error::custom("two keys name one element"));
            }
        }
        if keys == 0 && !self.root {
            set.member = true;
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_all_in_place_is_the_difference() {
        let set = |paths: &[&[&str]]| {
            let mut out = FieldSet::new();
            for path in paths {
                let path: Vec<PathElement> = path
                    .iter()
                    .map(|f| PathElement::Field((*f).to_owned()))
                    .collect();
                out.insert(&path);
            }
            out
        };
        let base = set(&[
            &["spec"],
            &["spec", "a"],
            &["spec", "b", "c"],
            &["status", "x"],
        ]);
        let cases = [
            set(&[&["spec", "b", "c"]]),
            set(&[&["status", "x"], &["spec"]]),
            set(&[&["other"]]),
            base.clone(),
            FieldSet::new(),
        ];
        for other in cases {
            let mut in_place = base.clone();
            let removed = in_place.remove_all(&other);
            assert_eq!(in_place, base.difference(&other), "{other:?}");
            assert_eq!(removed, in_place != base, "{other:?}");
        }
    }
    use serde_json::json;

    fn field(name: &str) -> PathElement {
        PathElement::Field(name.to_owned())
    }

    #[test]
    fn fields_v1_round_trips_members_with_children() {
        let encoded = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {
                "f:containers": {
                    "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:name": {}}
                },
                "f:finalizers": {"v:\"a\"": {}},
                "f:replicas": {}
            }
        });
        let set = FieldSet::from_fields_v1(&encoded).expect("valid FieldsV1");
        assert!(set.has(&[field("spec"), field("replicas")]));
        assert!(set.has(&[field("metadata"), field("labels")]));
        assert!(!set.has(&[field("metadata")]));
        assert_eq!(set.to_fields_v1(), encoded);
    }

    #[test]
    fn path_strings_read_like_kube_apiserver() {
        let path = vec![
            field("spec"),
            PathElement::Key(vec![("name".into(), "\"nginx\"".into())]),
            PathElement::Value("\"x\"".into()),
            PathElement::Index(2),
        ];
        assert_eq!(path_string(&path), ".spec[name=\"nginx\"][=\"x\"][2]");
    }

    #[test]
    fn difference_drops_emptied_nodes() {
        let mut a = FieldSet::new();
        a.insert(&[field("spec"), field("replicas")]);
        a.insert(&[field("spec"), field("paused")]);
        let mut b = FieldSet::new();
        b.insert(&[field("spec"), field("replicas")]);
        let rest = a.difference(&b);
        assert_eq!(rest.paths(), vec![vec![field("spec"), field("paused")]]);
        assert!(a.difference(&a).is_empty());
        assert_eq!(a.intersection(&b), b);
        assert_eq!(b.union(&rest), a);
    }

    #[test]
    fn bad_fields_v1_keys_are_errors() {
        for bad in [
            json!({"x:y": {}}),
            json!({"k:{": {}}),
            json!({"i:z": {}}),
            json!([]),
        ] {
            assert!(FieldSet::from_fields_v1(&bad).is_err(), "{bad}");
        }
    }
}
