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

/// Encodes entries in kube-apiserver's order (Apply before Update, then by
/// time, manager, apiVersion, subresource); entries with no fields are dropped.
pub fn encode(entries: &[ManagedEntry]) -> Value {
    let mut sorted: Vec<&ManagedEntry> = entries.iter().filter(|e| !e.set.is_empty()).collect();
    sorted.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    Value::Array(sorted.into_iter().map(ManagedEntry::encode).collect())
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
