//! `meta.k8s.io/v1` Table output for `kubectl get`: the columns of every built-in kind and CRD printer columns.
//!
//! [`build_table`] turns objects into the Table kube-apiserver would send
//! for them: the same column definitions (names, types, formats,
//! priorities) and the same cell formats as upstream's printers, always
//! with the wide columns (kubectl hides priority > 0 unless `-o wide`).

mod columns;
mod custom;
mod duration;
mod format;
mod jsonpath;
mod node;
mod pod;
mod printers;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use crate::ApiError;
use crate::resources::ResourceInfo;

pub use duration::human_duration;
pub use jsonpath::{JsonPath, ParseError as JsonPathParseError};

use columns::Column;
use custom::CustomColumns;

/// What each row carries besides its cells (the `includeObject` query
/// parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// No object.
    None,
    /// A `PartialObjectMetadata` with the object's metadata (the default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query parameter (`""` is the default,
    /// `Metadata`); `None` for an unknown value.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "" | "Metadata" => Some(IncludeObject::Metadata),
            "None" => Some(IncludeObject::None),
            "Object" => Some(IncludeObject::Object),
            _ => None,
        }
    }

    /// The `includeObject` query parameter, or kube-apiserver's 400 for an
    /// unknown value.
    pub fn from_query(value: Option<&str>) -> Result<Self, ApiError> {
        let value = value.unwrap_or_default();
        Self::parse(value).ok_or_else(|| {
            ApiError::bad_request(format!("unrecognized includeObject value: {value:?}"))
        })
    }
}

/// The `meta.k8s.io` versions kube-apiserver serves Tables in (kubectl asks
/// for `v1` and falls back to `v1beta1`).
pub const TABLE_VERSIONS: &[&str] = &["meta.k8s.io/v1", "meta.k8s.io/v1beta1"];

/// Re-labels a table from [`build_table`] as another `meta.k8s.io` version
/// (e.g. `meta.k8s.io/v1beta1`): the Table and its rows'
/// `PartialObjectMetadata` take the requested version, as upstream does.
pub fn set_table_version(table: &mut Value, api_version: &str) {
    table["apiVersion"] = json!(api_version);
    if let Some(rows) = table.get_mut("rows").and_then(Value::as_array_mut) {
        for row in rows {
            if let Some(object) = row
                .get_mut("object")
                .filter(|o| o.get("kind").and_then(Value::as_str) == Some("PartialObjectMetadata"))
            {
                object["apiVersion"] = json!(api_version);
            }
        }
    }
}

/// How to build a Table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TableOptions {
    pub include_object: IncludeObject,
    /// Leave `columnDefinitions` empty (watch events after the first).
    pub no_headers: bool,
}

type CellsFn = fn(&Value, DateTime<Utc>) -> Vec<Value>;

/// How one resource's rows are printed.
enum Printer {
    BuiltIn(&'static [Column], CellsFn),
    Events { new_api: bool },
    Custom(CustomColumns),
}

impl Printer {
    fn for_resource(resource: &ResourceInfo, printer_columns: Option<&Value>) -> Self {
        if resource.custom {
            return Printer::Custom(CustomColumns::new(printer_columns));
        }
        let (columns, cells): (&'static [Column], CellsFn) =
            match (resource.group.as_str(), resource.kind.as_str()) {
                ("", "Event") => return Printer::Events { new_api: false },
                ("events.k8s.io", "Event") => return Printer::Events { new_api: true },
                ("", "Pod") => (columns::POD, pod::cells),
                ("", "Node") => (columns::NODE, node::cells),
                ("", "Namespace") => (columns::NAMESPACE, printers::namespace),
                ("", "ConfigMap") => (columns::CONFIG_MAP, printers::config_map),
                ("", "Secret") => (columns::SECRET, printers::secret),
                ("", "Service") => (columns::SERVICE, printers::service),
                ("", "ServiceAccount") => (columns::SERVICE_ACCOUNT, printers::service_account),
                ("", "Endpoints") => (columns::ENDPOINTS, printers::endpoints),
                ("", "PersistentVolume") => {
                    (columns::PERSISTENT_VOLUME, printers::persistent_volume)
                }
                ("", "PersistentVolumeClaim") => (
                    columns::PERSISTENT_VOLUME_CLAIM,
                    printers::persistent_volume_claim,
                ),
                ("", "ResourceQuota") => (columns::RESOURCE_QUOTA, printers::resource_quota),
                ("apps", "Deployment") => (columns::DEPLOYMENT, printers::deployment),
                ("apps", "ReplicaSet") => (columns::REPLICA_SET, printers::replica_set),
                ("apps", "StatefulSet") => (columns::STATEFUL_SET, printers::stateful_set),
                ("apps", "DaemonSet") => (columns::DAEMON_SET, printers::daemon_set),
                ("apps", "ControllerRevision") => {
                    (columns::CONTROLLER_REVISION, printers::controller_revision)
                }
                ("batch", "Job") => (columns::JOB, printers::job),
                ("batch", "CronJob") => (columns::CRON_JOB, printers::cron_job),
                ("policy", "PodDisruptionBudget") => (
                    columns::POD_DISRUPTION_BUDGET,
                    printers::pod_disruption_budget,
                ),
                ("scheduling.k8s.io", "PriorityClass") => {
                    (columns::PRIORITY_CLASSES, printers::priority_class)
                }
                ("coordination.k8s.io", "Lease") => (columns::LEASE, printers::lease),
                ("networking.k8s.io", "Ingress") => (columns::INGRESS, printers::ingress),
                ("rbac.authorization.k8s.io", "RoleBinding") => {
                    (columns::ROLE_BINDING, printers::role_binding)
                }
                ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
                    (columns::CLUSTER_ROLE_BINDING, printers::role_binding)
                }
                ("storage.k8s.io", "StorageClass") => {
                    (columns::STORAGE_CLASSES, printers::storage_class)
                }
                _ => (columns::DEFAULT, printers::default_row),
            };
        Printer::BuiltIn(columns, cells)
    }

    fn definitions(&self) -> Vec<Value> {
        match self {
            Printer::BuiltIn(columns, _) => columns.iter().map(|c| c.to_json()).collect(),
            Printer::Events { .. } => columns::EVENTS.iter().map(|c| c.to_json()).collect(),
            Printer::Custom(custom) => custom.definitions(),
        }
    }

    fn cells(&self, object: &Value, now: DateTime<Utc>) -> Vec<Value> {
        match self {
            Printer::BuiltIn(_, cells) => cells(object, now),
            Printer::Events { new_api } => printers::event(object, *new_api, now),
            Printer::Custom(custom) => custom.cells(object, now),
        }
    }
}

/// The `PartialObjectMetadata` of an object.
/// A row's `PartialObjectMetadata`: the object's metadata without its
/// managedFields (no printer reads them).
fn partial_object_metadata(object: &Value) -> Value {
    let mut metadata = object.get("metadata").cloned().unwrap_or_else(|| json!({}));
    if let Some(map) = metadata.as_object_mut() {
        map.remove("managedFields");
    }
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
    })
}

/// The Table for a list or a single object (`objects` in order).
/// `printer_columns`: a CRD version's `additionalPrinterColumns` (JSON
/// array) for custom resources, else None for built-ins.
/// Returns a complete `{"kind":"Table","apiVersion":"meta.k8s.io/v1",
/// "metadata":{},"columnDefinitions":[...],"rows":[...]}`; the server fills
/// metadata.resourceVersion/continue. With no_headers, columnDefinitions is
/// empty (watch events after the first).
pub fn build_table(
    resource: &ResourceInfo,
    printer_columns: Option<&Value>,
    objects: &[&Value],
    options: &TableOptions,
    now: DateTime<Utc>,
) -> Value {
    let printer = Printer::for_resource(resource, printer_columns);
    let definitions = if options.no_headers {
        Vec::new()
    } else {
        printer.definitions()
    };
    let is_pod = !resource.custom && resource.group.is_empty() && resource.kind == "Pod";
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let mut row = Map::new();
            row.insert(
                "cells".to_string(),
                Value::Array(printer.cells(object, now)),
            );
            if is_pod && let Some(conditions) = pod::row_conditions(object) {
                row.insert("conditions".to_string(), conditions);
            }
            match options.include_object {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    row.insert("object".to_string(), partial_object_metadata(object));
                }
                IncludeObject::Object => {
                    row.insert("object".to_string(), (*object).clone());
                }
            }
            Value::Object(row)
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

/// A list's Table serialized straight to JSON: the same document as
/// [`build_table`] with `metadata` and `apiVersion` set, but rows are written
/// from the objects as they are (no copy of each object's metadata), which
/// keeps a 100,000-row list to one pass over the objects.
pub fn write_table(
    resource: &ResourceInfo,
    printer_columns: Option<&Value>,
    objects: &[&Value],
    options: &TableOptions,
    now: DateTime<Utc>,
    api_version: &str,
    list_metadata: &Value,
) -> Vec<u8> {
    let printer = Printer::for_resource(resource, printer_columns);
    let table = TableDocument {
        kind: "Table",
        api_version,
        metadata: list_metadata,
        column_definitions: if options.no_headers {
            Vec::new()
        } else {
            printer.definitions()
        },
        rows: Rows {
            printer: &printer,
            objects,
            include_object: options.include_object,
            is_pod: !resource.custom && resource.group.is_empty() && resource.kind == "Pod",
            now,
            api_version,
        },
    };
    serde_json::to_vec(&table).unwrap_or_default()
}

#[derive(serde::Serialize)]
struct TableDocument<'a> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: &'a str,
    metadata: &'a Value,
    #[serde(rename = "columnDefinitions")]
    column_definitions: Vec<Value>,
    rows: Rows<'a>,
}

struct Rows<'a> {
    printer: &'a Printer,
    objects: &'a [&'a Value],
    include_object: IncludeObject,
    is_pod: bool,
    now: DateTime<Utc>,
    api_version: &'a str,
}

#[derive(serde::Serialize)]
struct Row<'a> {
    cells: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    conditions: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    object: Option<RowObject<'a>>,
}

#[derive(serde::Serialize)]
#[serde(untagged)]
enum RowObject<'a> {
    Metadata {
        kind: &'static str,
        #[serde(rename = "apiVersion")]
        api_version: &'a str,
        metadata: WithoutManagedFields<'a>,
    },
    Object(&'a Value),
}

/// Metadata serialized without `managedFields`, borrowing the rest.
struct WithoutManagedFields<'a>(&'a Value);

impl serde::Serialize for WithoutManagedFields<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Some(map) = self.0.as_object() else {
            return self.0.serialize(serializer);
        };
        let mut out = serializer.serialize_map(None)?;
        for (key, value) in map.iter().filter(|(key, _)| *key != "managedFields") {
            out.serialize_entry(key, value)?;
        }
        out.end()
    }
}

impl serde::Serialize for Rows<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let empty = json!({});
        let mut seq = serializer.serialize_seq(Some(self.objects.len()))?;
        for object in self.objects {
            let row = Row {
                cells: self.printer.cells(object, self.now),
                conditions: if self.is_pod {
                    pod::row_conditions(object)
                } else {
                    None
                },
                object: match self.include_object {
                    IncludeObject::None => None,
                    IncludeObject::Metadata => Some(RowObject::Metadata {
                        kind: "PartialObjectMetadata",
                        api_version: self.api_version,
                        metadata: WithoutManagedFields(object.get("metadata").unwrap_or(&empty)),
                    }),
                    IncludeObject::Object => Some(RowObject::Object(object)),
                },
            };
            seq.serialize_element(&row)?;
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests;
