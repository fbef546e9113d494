//! JSON text to [`Value`], as `serde_json::from_str::<Value>` parses it but
//! with each object's map built at once from its entries: a snapshot's
//! objects are written with their keys in order, and inserting them one by
//! one compares each new key with every key of its map's node so far (the
//! largest single cost of building a restored object), where building the
//! map from its collected entries checks their order and fills its nodes
//! without searching them. The same values, duplicate keys included (the
//! last one wins).

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Parses `text` (one JSON value, whitespace around it) into a [`Value`].
pub fn parse(text: &str) -> Result<Value, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = deserializer.deserialize_any(ValueVisitor)?;
    deserializer.end()?;
    Ok(value)
}

/// Builds one value (and those inside it).
#[derive(Clone, Copy)]
struct ValueVisitor;

impl<'de> DeserializeSeed<'de> for ValueVisitor {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Value, A::Error> {
        let mut list = Vec::with_capacity(items.size_hint().unwrap_or(0));
        while let Some(item) = items.next_element_seed(self)? {
            list.push(item);
        }
        Ok(Value::Array(list))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Value, A::Error> {
        let mut fields: Vec<(String, Value)> = Vec::new();
        while let Some(key) = entries.next_key::<String>()? {
            let value = entries.next_value_seed(self)?;
            fields.push((key, value));
        }
        // A map of its entries, sorted (stably: of two equal keys the
        // later one is kept, as inserting them in turn keeps it).
        Ok(Value::Object(
            fields.into_iter().collect::<Map<String, Value>>(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    #[test]
    fn values_are_those_serde_json_parses() {
        let texts = [
            r#"{"b": 1, "a": [true, false, null], "c": {"z": -1, "y": 1.5e3, "x": "s\u00e9\n"}}"#,
            r#"{"a": 1, "a": 2, "b": {"k": 1, "k": {"deeper": []}}}"#,
            r#"  [1, 18446744073709551615, -9223372036854775808, 0.1, 1e-400, "", {}]  "#,
            r#"{"metadata": {"name": "web", "labels": {"app": "a", "tier": "b"}}, "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "10m"}}}]}}"#,
            r#""just a string""#,
            "12",
            "null",
        ];
        for text in texts {
            let ours = super::parse(text).expect("parses");
            let theirs: Value = serde_json::from_str(text).expect("parses");
            assert_eq!(ours, theirs, "{text}");
            assert_eq!(ours.to_string(), theirs.to_string(), "{text}");
        }
        // Many keys, out of order: more than one node of the map.
        let keys: Vec<String> = (0..200)
            .map(|i| format!("\"k{:03}\": {i}", (i * 37) % 200))
            .collect();
        let text = format!("{{{}}}", keys.join(", "));
        let theirs: Value = serde_json::from_str(&text).expect("parses");
        assert_eq!(super::parse(&text).expect("parses"), theirs);
    }

    #[test]
    fn errors_are_those_serde_json_gives() {
        for text in [
            "{\"a\": }",
            "{\"a\": 1} trailing",
            "[1, 2",
            "[1e400]",
            "",
            &"[".repeat(200),
        ] {
            let ours = super::parse(text).expect_err("fails");
            let theirs = serde_json::from_str::<Value>(text).expect_err("fails");
            assert_eq!(ours.to_string(), theirs.to_string(), "{text}");
        }
    }
}
