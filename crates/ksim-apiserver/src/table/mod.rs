//! `meta.k8s.io/v1` Table output for `kubectl get`: the columns of every built-in kind and CRD printer columns.
//!
//! Interim version (NAME and CREATED AT for every kind); the per-kind columns land next.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::resources::ResourceInfo;

/// What each row carries besides its cells (`?includeObject=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    None,
    #[default]
    Metadata,
    Object,
}

/// How to build the table.
#[derive(Debug, Clone, Default)]
pub struct TableOptions {
    pub include_object: IncludeObject,
    pub no_headers: bool,
}

/// The Table for `objects`.
pub fn build_table(
    _resource: &ResourceInfo,
    _printer_columns: Option<&Value>,
    objects: &[&Value],
    options: &TableOptions,
    _now: DateTime<Utc>,
) -> Value {
    let columns = if options.no_headers {
        json!([])
    } else {
        json!([
            {"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0},
            {"name": "Created At", "type": "date", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0},
        ])
    };
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let metadata = object.get("metadata").cloned().unwrap_or(json!({}));
            let mut row = json!({
                "cells": [metadata.get("name").cloned().unwrap_or(Value::Null), metadata.get("creationTimestamp").cloned().unwrap_or(Value::Null)],
            });
            match options.include_object {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata});
                }
                IncludeObject::Object => row["object"] = (*object).clone(),
            }
            row
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {}, "columnDefinitions": columns, "rows": rows})
}
