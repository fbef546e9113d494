//! The `metadata.managedFields` entries of an object: decoding them into
//! field sets per manager and encoding them back in kube-apiserver's order.

use std::fmt;

use serde_json::{Map, Value};

use super::fieldpath::FieldSet;

/// The operation a managedFields entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Create, update or (non-apply) patch.
    Update,
}

impl Operation {
    /// The value of the `operation` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One managedFields entry with its decoded field set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedEntry {
    pub manager: String,
    pub operation: Operation,
    pub api_version: String,
    pub time: Option<String>,
    pub subresource: String,
    pub set: FieldSet,
}

impl ManagedEntry {
    /// Whether two entries are the same manager as kube-apiserver keys them:
    /// manager, operation and subresource, plus the apiVersion for updates.
    pub fn same_manager(&self, other: &ManagedEntry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == Operation::Apply || self.api_version == other.api_version)
    }

    fn sort_key(&self) -> (Operation, &str, &str, &str, &str) {
        (
            self.operation,
            self.time.as_deref().unwrap_or(""),
            &self.manager,
            &self.api_version,
            &self.subresource,
        )
    }

    pub(crate) fn encode(&self) -> Value {
        let mut entry = Map::new();
        entry.insert("manager".into(), Value::String(self.manager.clone()));
        entry.insert(
            "operation".into(),
            Value::String(self.operation.as_str().into()),
        );
        entry.insert("apiVersion".into(), Value::String(self.api_version.clone()));
        if let Some(time) = &self.time {
            entry.insert("time".into(), Value::String(time.clone()));
        }
        entry.insert("fieldsType".into(), Value::String("FieldsV1".into()));
        entry.insert("fieldsV1".into(), self.set.to_fields_v1());
        if !self.subresource.is_empty() {
            entry.insert(
                "subresource".into(),
                Value::String(self.subresource.clone()),
            );
        }
        Value::Object(entry)
    }
}

/// The `metadata.managedFields` of an object, if it has any.
pub fn managed_fields_of(object: &Value) -> Option<&Value> {
    object
        .get("metadata")?
        .get("managedFields")
        .filter(|v| !v.is_null())
}

/// Decodes managedFields entries. Entries with no fields are dropped.
pub fn decode(managed_fields: &Value) -> Result<Vec<ManagedEntry>, String> {
    // A store may keep the whole list as its JSON text (ksim-store does, to
    // save memory); it reads the same.
    let parsed_list;
    let managed_fields = match managed_fields.as_str() {
        Some(text) => {
            if let Some(entries) = decode_text(text) {
                return Ok(entries);
            }
            parsed_list = serde_json::from_str::<Value>(text)
                .map_err(|e| format!("cannot decode managedFields: {e}"))?;
            &parsed_list
        }
        None => managed_fields,
    };
    let entries = managed_fields
        .as_array()
        .ok_or_else(|| "metadata.managedFields must be a list".to_owned())?;
    let mut out: Vec<ManagedEntry> = Vec::with_capacity(entries.len());
    for entry in entries {
        let text = |field: &str| {
            entry
                .get(field)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let Some(fields) = entry.get("fieldsV1").filter(|v| !v.is_null()) else {
            continue;
        };
        // A store may keep fieldsV1 as its JSON text (ksim-store does, to
        // save memory); it reads the same.
        let parsed;
        let fields = match fields.as_str() {
            Some(text) => {
                parsed = serde_json::from_str::<Value>(text)
                    .map_err(|e| format!("cannot decode fieldsV1: {e}"))?;
                &parsed
            }
            None => fields,
        };
        let fields_type = text("fieldsType");
        if fields_type != "FieldsV1" {
            return Err(format!("cannot decode fieldsType {fields_type:?}"));
        }
        let operation = match text("operation").as_str() {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            other => return Err(format!("unknown operation {other:?} in managedFields")),
        };
        let decoded = ManagedEntry {
            manager: text("manager"),
            operation,
            api_version: text("apiVersion"),
            time: entry.get("time").and_then(Value::as_str).map(str::to_owned),
            subresource: text("subresource"),
            set: FieldSet::from_fields_v1(fields)?,
        };
        if decoded.set.is_empty() {
            continue;
        }
        out.retain(|e| !e.same_manager(&decoded));
        out.push(decoded);
    }
    Ok(out)
}

/// [`decode`] of a list kept as JSON text (the store's form), parsed
/// straight into entries without building its JSON values first (a
/// write's largest part of tracking a small change). None when the text
/// holds anything but plain entries (a field of an unexpected type, a key
/// twice, a `fieldsV1` kept as text, an error): [`decode`]'s general path
/// then gives the entries or the error.
fn decode_text(text: &str) -> Option<Vec<ManagedEntry>> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let raw: Vec<RawEntry> = serde::Deserialize::deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    let mut out: Vec<ManagedEntry> = Vec::with_capacity(raw.len());
    for entry in raw {
        let Some(set) = entry.fields_v1 else {
            continue;
        };
        if entry.fields_type.as_deref() != Some("FieldsV1") {
            return None;
        }
        let operation = match entry.operation.as_deref() {
            Some("Apply") => Operation::Apply,
            Some("Update") => Operation::Update,
            _ => return None,
        };
        let decoded = ManagedEntry {
            manager: entry.manager.unwrap_or_default(),
            operation,
            api_version: entry.api_version.unwrap_or_default(),
            time: entry.time,
            subresource: entry.subresource.unwrap_or_default(),
            set,
        };
        if decoded.set.is_empty() {
            continue;
        }
        out.retain(|e| !e.same_manager(&decoded));
        out.push(decoded);
    }
    Some(out)
}

/// One managedFields entry as [`decode_text`] reads it: every known field a
/// string (or `fieldsV1` an object), each at most once.
#[derive(Default)]
struct RawEntry {
    manager: Option<String>,
    operation: Option<String>,
    api_version: Option<String>,
    time: Option<String>,
    subresource: Option<String>,
    fields_type: Option<String>,
    fields_v1: Option<FieldSet>,
}

impl<'de> serde::Deserialize<'de> for RawEntry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(RawEntryVisitor)
    }
}

struct RawEntryVisitor;

impl<'de> serde::de::Visitor<'de> for RawEntryVisitor {
    type Value = RawEntry;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a managedFields entry")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<RawEntry, A::Error> {
        use serde::de::Error as _;
        let mut entry = RawEntry::default();
        while let Some(key) = map.next_key_seed(super::fieldpath::BorrowedKey)? {
            let slot = match key.as_ref() {
                "manager" => &mut entry.manager,
                "operation" => &mut entry.operation,
                "apiVersion" => &mut entry.api_version,
                "time" => &mut entry.time,
                "subresource" => &mut entry.subresource,
                "fieldsType" => &mut entry.fields_type,
                "fieldsV1" => {
                    if entry.fields_v1.is_some() {
                        return Err(A::Error::custom("fieldsV1 twice"));
                    }
                    let set = map.next_value_seed(super::fieldpath::FieldsV1Seed { root: true })?;
                    entry.fields_v1 = Some(set);
                    continue;
                }
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    continue;
                }
            };
            if slot.is_some() {
                return Err(A::Error::custom("a field twice"));
            }
            *slot = Some(map.next_value::<String>()?);
        }
        Ok(entry)
    }
}

/// Encodes entries in kube-apiserver's order (Apply before Update, then by
/// time, manager, apiVersion, subresource); entries with no fields are dropped.
pub fn encode(entries: &[ManagedEntry]) -> Value {
    let mut sorted: Vec<&ManagedEntry> = entries.iter().filter(|e| !e.set.is_empty()).collect();
    sorted.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    Value::Array(sorted.into_iter().map(ManagedEntry::encode).collect())
}

/// The compact JSON text of [`encode`] of `entries` (what serde_json writes
/// of that list), written without building it; None when no entry has
/// fields (the list is empty).
pub fn encode_text(entries: &[ManagedEntry]) -> Option<String> {
    use super::fieldpath::write_json_str;
    let mut sorted: Vec<&ManagedEntry> = entries.iter().filter(|e| !e.set.is_empty()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    let mut out = String::with_capacity(256 * sorted.len());
    out.push('[');
    for (n, entry) in sorted.into_iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        // The keys in the order a map of them serializes in.
        out.push_str("{\"apiVersion\":");
        write_json_str(&mut out, &entry.api_version);
        out.push_str(",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":");
        entry.set.write_fields_v1(&mut out);
        out.push_str(",\"manager\":");
        write_json_str(&mut out, &entry.manager);
        out.push_str(",\"operation\":");
        write_json_str(&mut out, entry.operation.as_str());
        if !entry.subresource.is_empty() {
            out.push_str(",\"subresource\":");
            write_json_str(&mut out, &entry.subresource);
        }
        if let Some(time) = &entry.time {
            out.push_str(",\"time\":");
            write_json_str(&mut out, time);
        }
        out.push('}');
    }
    out.push(']');
    Some(out)
}

/// [`set_managed_fields`] in the store's form: the list as its compact JSON
/// text ([`encode_text`]), the text a store would make of the list.
pub fn set_managed_fields_text(object: &mut Value, entries: &[ManagedEntry]) {
    let Some(object) = object.as_object_mut() else {
        return;
    };
    let encoded = encode_text(entries);
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    match encoded {
        Some(text) => {
            metadata.insert("managedFields".into(), Value::String(text));
        }
        None => {
            metadata.remove("managedFields");
        }
    }
}

/// Removes `metadata.managedFields` from an object.
pub fn remove_managed_fields(object: &mut Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
}

/// Sets `metadata.managedFields` of an object (removing it when empty).
pub fn set_managed_fields(object: &mut Value, entries: &[ManagedEntry]) {
    let Some(object) = object.as_object_mut() else {
        return;
    };
    let encoded = encode(entries);
    let empty = encoded.as_array().is_some_and(Vec::is_empty);
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    if empty {
        metadata.remove("managedFields");
    } else {
        metadata.insert("managedFields".into(), encoded);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn entries_round_trip_in_kube_apiserver_order() {
        let managed = json!([
            {"manager": "kubectl-edit", "operation": "Update", "apiVersion": "v1",
             "time": "2026-01-01T00:00:02Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:b": {}}}},
            {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
             "time": "2026-01-01T00:00:01Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}},
             "subresource": "status"},
            {"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
             "time": "2026-01-01T00:00:03Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:a": {}}}}
        ]);
        let entries = decode(&managed).expect("valid managedFields");
        let encoded = encode(&entries);
        let managers: Vec<&str> = encoded
            .as_array()
            .expect("list")
            .iter()
            .map(|e| e["manager"].as_str().expect("manager"))
            .collect();
        assert_eq!(
            managers,
            vec!["kubectl", "kube-controller-manager", "kubectl-edit"]
        );
        assert_eq!(encoded[1], managed[1]);
    }

    #[test]
    fn a_list_kept_as_text_decodes_as_its_parsed_value() {
        let texts = [
            // Plain entries: the text is parsed straight into entries.
            r#"[{"apiVersion":"coordination.k8s.io/v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:ownerReferences":{".":{},"k:{\"uid\":\"u1\"}":{}}},"f:spec":{"f:holderIdentity":{},"f:renewTime":{}}},"manager":"kubelet","operation":"Update","time":"2026-01-01T00:00:00Z"}]"#,
            r#"[{"manager":"a","operation":"Apply","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:x":{}}},"extra":[1,{"y":2}]},{"manager":"a","operation":"Apply","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:z":{}}},"subresource":"status"},{"manager":"a","operation":"Apply","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:y":{".":5,"i:0":{},"v:\"q\"":{}}}}}]"#,
            r#"[{"manager":"e","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{}},{"manager":"m"}]"#,
            "[]",
            // Anything unusual: the general path decides.
            r#"[{"manager":5,"operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"f:a":{}}}]"#,
            r#"[{"manager":"m","operation":"Update","fieldsType":"FieldsV1","time":null,"fieldsV1":{"f:a":{}}}]"#,
            r#"[{"manager":"m","manager":"n","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"f:a":{}}}]"#,
            r#"[{"manager":"m","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"f:a":{},"f:a":{"f:b":{}}}}]"#,
            r#"[{"manager":"m","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"i:1":{},"i:01":{"f:b":{}}}}]"#,
            r#"[{"manager":"m","operation":"Update","fieldsType":"FieldsV1","fieldsV1":"{\"f:a\":{}}"}]"#,
            r#"[{"manager":"m","operation":"Update","fieldsType":"FieldsV1","fieldsV1":null}, 7]"#,
            r#"[{"manager":"m","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"f:a":1}}]"#,
            r#"[{"manager":"m","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"x:a":{}}}]"#,
            r#"[{"manager":"m","operation":"Delete","fieldsType":"FieldsV1","fieldsV1":{"f:a":{}}}]"#,
            r#"[{"manager":"m","operation":"Update","fieldsV1":{"f:a":{}}}]"#,
            r#"{"manager":"m"}"#,
            "[] trailing",
        ];
        for text in texts {
            let parsed: Option<Value> = serde_json::from_str(text).ok();
            let from_value = parsed.as_ref().map(decode);
            let from_text = decode(&Value::String(text.to_owned()));
            match from_value {
                Some(expected) => assert_eq!(from_text, expected, "{text}"),
                None => assert!(from_text.is_err(), "{text}"),
            }
        }
        assert!(decode_text(texts[0]).is_some() && decode_text(texts[4]).is_none());
    }

    #[test]
    fn bad_entries_are_errors_and_empty_ones_dropped() {
        assert!(decode(&json!({})).is_err());
        assert!(
            decode(
                &json!([{"operation": "Delete", "fieldsType": "FieldsV1", "fieldsV1": {"f:a": {}}}])
            )
            .is_err()
        );
        assert!(
            decode(
                &json!([{"operation": "Update", "fieldsType": "FieldsV2", "fieldsV1": {"f:a": {}}}])
            )
            .is_err()
        );
        assert_eq!(
            decode(&json!([{}])).expect("empty entry is dropped"),
            vec![]
        );
    }
}
