//! Tables of custom resources from a CRD version's
//! `additionalPrinterColumns`, as apiextensions-apiserver's table convertor
//! builds them: NAME, then each declared column; a version that declares
//! none gets the single default column `Age` (`.metadata.creationTimestamp`).

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::columns::{Description, NAME, OBJECT_META, describe};
use super::duration::{age, parse_time};
use super::jsonpath::JsonPath;

/// One printer column with its parsed path (`None` when it does not parse:
/// its cells are then empty).
#[derive(Debug, Clone)]
struct PrinterColumn {
    definition: Value,
    kind: String,
    path: Option<JsonPath>,
}

/// The columns of a custom resource's table.
#[derive(Debug, Clone)]
pub struct CustomColumns {
    columns: Vec<PrinterColumn>,
}

impl CustomColumns {
    /// Reads `additionalPrinterColumns` (a JSON array; `None` or empty gives
    /// the default `Age` column).
    pub fn new(printer_columns: Option<&Value>) -> Self {
        let declared = printer_columns
            .and_then(Value::as_array)
            .filter(|columns| !columns.is_empty());
        let columns = match declared {
            Some(columns) => columns.iter().map(PrinterColumn::from_crd).collect(),
            None => vec![PrinterColumn {
                definition: json!({
                    "name": "Age",
                    "type": "date",
                    "format": "",
                    "description": describe(Description::Field(OBJECT_META, "creationTimestamp")),
                    "priority": 0,
                }),
                kind: "date".to_string(),
                path: JsonPath::parse(".metadata.creationTimestamp").ok(),
            }],
        };
        CustomColumns { columns }
    }

    /// The `TableColumnDefinition`s: NAME, then the printer columns.
    pub fn definitions(&self) -> Vec<Value> {
        std::iter::once(NAME.to_json())
            .chain(self.columns.iter().map(|c| c.definition.clone()))
            .collect()
    }

    /// The cells of one object.
    pub fn cells(&self, object: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let name = super::format::name(object);
        std::iter::once(json!(name))
            .chain(self.columns.iter().map(|c| c.cell(object, now)))
            .collect()
    }
}

impl PrinterColumn {
    fn from_crd(column: &Value) -> Self {
        let text = |field: &str| {
            column
                .get(field)
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let json_path = text("jsonPath");
        let description = match text("description") {
            "" => format!("Custom resource definition column (in JSONPath format): {json_path}"),
            declared => declared.to_string(),
        };
        PrinterColumn {
            definition: json!({
                "name": text("name"),
                "type": text("type"),
                "format": text("format"),
                "description": description,
                "priority": column.get("priority").and_then(Value::as_i64).unwrap_or(0),
            }),
            kind: text("type").to_string(),
            path: JsonPath::parse(json_path).ok(),
        }
    }

    fn cell(&self, object: &Value, now: DateTime<Utc>) -> Value {
        let Some(value) = self
            .path
            .as_ref()
            .and_then(|path| path.find(object).into_iter().next())
        else {
            return Value::Null;
        };
        if value.is_null() {
            return Value::Null;
        }
        match self.kind.as_str() {
            "string" => json!(print_value(value)),
            "integer" => match value {
                Value::Number(n) => n
                    .as_i64()
                    .or_else(|| n.as_f64().map(|f| f as i64))
                    .map_or(Value::Null, |i| json!(i)),
                _ => Value::Null,
            },
            "number" => value.as_f64().map_or(Value::Null, |f| json!(f)),
            "boolean" => value.as_bool().map_or(Value::Null, |b| json!(b)),
            "date" => match value.as_str() {
                Some(text) => match parse_time(text) {
                    Some(_) => json!(age(Some(text), now)),
                    None if text == "0001-01-01T00:00:00Z" => json!("<unknown>"),
                    None => json!("<invalid>"),
                },
                None => Value::Null,
            },
            _ => Value::Null,
        }
    }
}

/// How kube's JSONPath prints a value: strings as they are, maps and lists
/// as compact JSON, other scalars in their plain form.
fn print_value(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        parse_time("2024-01-01T00:10:00Z").expect("valid time")
    }

    #[test]
    fn declared_columns_follow_name() {
        let columns = json!([
            {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
            {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status",
             "description": "Whether it is ready"},
            {"name": "Paused", "type": "boolean", "jsonPath": ".spec.paused", "priority": 1},
            {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio"},
            {"name": "Ports", "type": "string", "jsonPath": ".spec.ports"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ]);
        let table = CustomColumns::new(Some(&columns));
        let definitions = table.definitions();
        let names: Vec<&str> = definitions
            .iter()
            .map(|d| d["name"].as_str().expect("name"))
            .collect();
        assert_eq!(
            names,
            [
                "Name", "Replicas", "Ready", "Paused", "Ratio", "Ports", "Age"
            ]
        );
        assert_eq!(definitions[0]["format"], json!("name"));
        assert_eq!(
            definitions[1]["description"],
            json!("Custom resource definition column (in JSONPath format): .spec.replicas")
        );
        assert_eq!(definitions[2]["description"], json!("Whether it is ready"));
        assert_eq!(definitions[3]["priority"], json!(1));

        let object = json!({
            "metadata": {"name": "x", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"replicas": 3, "ratio": 0.5, "ports": [80, 443]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        });
        assert_eq!(
            table.cells(&object, now()),
            vec![
                json!("x"),
                json!(3),
                json!("True"),
                Value::Null,
                json!(0.5),
                json!("[80,443]"),
                json!("10m"),
            ]
        );
    }

    #[test]
    fn no_declared_columns_gives_name_and_age() {
        for columns in [None, Some(json!([]))] {
            let table = CustomColumns::new(columns.as_ref());
            let definitions = table.definitions();
            assert_eq!(definitions.len(), 2);
            assert_eq!(definitions[1]["name"], json!("Age"));
            assert_eq!(definitions[1]["type"], json!("date"));
            let object =
                json!({"metadata": {"name": "x", "creationTimestamp": "2024-01-01T00:00:00Z"}});
            assert_eq!(table.cells(&object, now()), vec![json!("x"), json!("10m")]);
        }
    }

    #[test]
    fn cells_of_mismatched_types_are_null_and_bad_dates_invalid() {
        let columns = json!([
            {"name": "N", "type": "integer", "jsonPath": ".spec.text"},
            {"name": "D", "type": "date", "jsonPath": ".spec.text"},
            {"name": "Bad", "type": "string", "jsonPath": ".spec["},
        ]);
        let table = CustomColumns::new(Some(&columns));
        let object = json!({"metadata": {"name": "x"}, "spec": {"text": "abc"}});
        assert_eq!(
            table.cells(&object, now()),
            vec![json!("x"), Value::Null, json!("<invalid>"), Value::Null]
        );
    }
}
