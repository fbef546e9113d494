//! Conversion of a protobuf message's bytes into Kubernetes JSON, driven by the wire-facts
//! table: JSON names, inline flattening, Go's `omitempty` and the special apimachinery types.

use serde_json::{Map, Value};

use super::schema::{self, INLINE, Kind, OMIT, REP};
use super::wire::{Reader, WireValue};

/// Deeper nesting than any built-in kind has is refused rather than recursed into.
const MAX_DEPTH: usize = 64;

/// Seconds from the Unix epoch to Go's zero `time.Time` (0001-01-01T00:00:00Z).
const GO_ZERO_TIME_SECONDS: i64 = -62_135_596_800;

/// Decodes the message `name` from `bytes` into a JSON object.
pub(super) fn message_to_json(
    name: &str,
    bytes: &[u8],
    depth: usize,
) -> Result<Map<String, Value>, String> {
    if depth > MAX_DEPTH {
        return Err(format!("message nesting deeper than {MAX_DEPTH}"));
    }
    let facts = schema::message(name).ok_or_else(|| format!("no wire facts for message {name}"))?;
    let mut out = Map::new();
    let mut inlined = Map::new();
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = reader.next_field()? {
        // Fields this table does not know are skipped, as Go's decoder skips unknown fields.
        let Some(field) = facts.field(number) else {
            continue;
        };
        let context = || field.json_name;
        if let Kind::Map(value_kind) = field.kind {
            let (key, entry) =
                map_entry(value_kind, value, depth).map_err(|e| in_field(e, &context))?;
            let object = out
                .entry(field.json_name)
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(object) = object {
                object.insert(key, entry);
            }
        } else if field.is(REP) {
            let items = out
                .entry(field.json_name)
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(items) = items {
                repeated_values(field.kind, value, depth, items)
                    .map_err(|e| in_field(e, &context))?;
            }
        } else if field.is(INLINE) {
            let Kind::Message(inner) = field.kind else {
                return Err(format!("{}: inline field is not a message", facts.name));
            };
            let object = message_to_json(inner, bytes_of(value)?, depth + 1)?;
            inlined.extend(object);
        } else {
            let converted =
                value_to_json(field.kind, value, depth).map_err(|e| in_field(e, &context))?;
            if field.is(OMIT) && is_scalar(field.kind) && is_go_zero(&converted) {
                out.remove(field.json_name);
            } else {
                out.insert(field.json_name.to_string(), converted);
            }
        }
    }
    for (key, value) in inlined {
        out.entry(key).or_insert(value);
    }
    Ok(out)
}

/// Marks an error message that starts with a field path.
const PATH: char = '@';

/// Prefixes `error` with the field it happened in, joining nested paths with dots.
fn in_field(error: String, field: &dyn Fn() -> &'static str) -> String {
    match error.strip_prefix(PATH) {
        Some(rest) => format!("{PATH}{}.{rest}", field()),
        None => format!("{PATH}{}: {error}", field()),
    }
}

/// The error message without its path marker.
pub(super) fn user_message(error: String) -> String {
    match error.strip_prefix(PATH) {
        Some(rest) => rest.to_string(),
        None => error,
    }
}

/// Go's `omitempty` applies to scalars only: a struct such as `IntOrString` or `Quantity` is
/// always written.
fn is_scalar(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::String | Kind::Bytes | Kind::Bool | Kind::Int32 | Kind::Int64 | Kind::Double
    )
}

/// A scalar that Go's `omitempty` drops: "", 0, false (messages are never dropped).
fn is_go_zero(value: &Value) -> bool {
    match value {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Null | Value::Array(_) | Value::Object(_) => false,
    }
}

fn bytes_of<'a>(value: WireValue<'a>) -> Result<&'a [u8], String> {
    match value {
        WireValue::Bytes(bytes) => Ok(bytes),
        other => Err(format!(
            "expected a length-delimited value, got {}",
            other.type_name()
        )),
    }
}

fn varint_of(value: WireValue<'_>) -> Result<u64, String> {
    match value {
        WireValue::Varint(v) => Ok(v),
        other => Err(format!("expected a varint, got {}", other.type_name())),
    }
}

/// Appends the values of one occurrence of a repeated field (packed or not) to `items`.
fn repeated_values(
    kind: Kind,
    value: WireValue<'_>,
    depth: usize,
    items: &mut Vec<Value>,
) -> Result<(), String> {
    let packable = matches!(kind, Kind::Bool | Kind::Int32 | Kind::Int64 | Kind::Double);
    match (packable, value) {
        (true, WireValue::Bytes(packed)) if kind == Kind::Double => {
            if packed.len() % 8 != 0 {
                return Err("packed doubles not a multiple of 8 bytes".to_string());
            }
            for chunk in packed.chunks_exact(8) {
                let mut bits = [0u8; 8];
                bits.copy_from_slice(chunk);
                let element = WireValue::Fixed64(u64::from_le_bytes(bits));
                items.push(value_to_json(kind, element, depth)?);
            }
            Ok(())
        }
        (true, WireValue::Bytes(packed)) => {
            let mut reader = Reader::new(packed);
            while !reader.is_empty() {
                let element = WireValue::Varint(reader.varint()?);
                items.push(value_to_json(kind, element, depth)?);
            }
            Ok(())
        }
        _ => {
            items.push(value_to_json(kind, value, depth)?);
            Ok(())
        }
    }
}

fn map_entry(
    value_kind: &Kind,
    value: WireValue<'_>,
    depth: usize,
) -> Result<(String, Value), String> {
    let mut reader = Reader::new(bytes_of(value)?);
    let mut key = String::new();
    let mut entry: Option<Value> = None;
    while let Some((number, field)) = reader.next_field()? {
        match number {
            1 => key = string_of(bytes_of(field)?),
            2 => entry = Some(value_to_json(*value_kind, field, depth)?),
            _ => {}
        }
    }
    // An entry without a value holds the value's zero.
    let entry = match entry {
        Some(entry) => entry,
        None => value_to_json(*value_kind, zero_wire_value(value_kind), depth)?,
    };
    Ok((key, entry))
}

fn zero_wire_value(kind: &Kind) -> WireValue<'static> {
    match kind {
        Kind::Bool | Kind::Int32 | Kind::Int64 => WireValue::Varint(0),
        Kind::Double => WireValue::Fixed64(0),
        _ => WireValue::Bytes(&[]),
    }
}

/// Go decodes invalid UTF-8 in a string as is and its JSON encoder replaces it with U+FFFD.
fn string_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn value_to_json(kind: Kind, value: WireValue<'_>, depth: usize) -> Result<Value, String> {
    Ok(match kind {
        Kind::String => Value::String(string_of(bytes_of(value)?)),
        Kind::Bytes => Value::String(base64(bytes_of(value)?)),
        Kind::Bool => Value::Bool(varint_of(value)? != 0),
        // Go truncates a varint to the field's width; so do we.
        Kind::Int32 => Value::from(varint_of(value)? as i32),
        Kind::Int64 => Value::from(varint_of(value)? as i64),
        Kind::Double => {
            let WireValue::Fixed64(bits) = value else {
                return Err(format!("expected fixed64, got {}", value.type_name()));
            };
            let number = f64::from_bits(bits);
            Value::Number(
                serde_json::Number::from_f64(number)
                    .ok_or_else(|| format!("{number} has no JSON form"))?,
            )
        }
        Kind::Message(name) => Value::Object(message_to_json(name, bytes_of(value)?, depth + 1)?),
        Kind::Time => time_to_json(bytes_of(value)?, false)?,
        Kind::MicroTime => time_to_json(bytes_of(value)?, true)?,
        Kind::Duration => {
            let nanos = int_field(bytes_of(value)?, 1)?;
            Value::String(go_duration(nanos))
        }
        Kind::Quantity => {
            let text = string_field(bytes_of(value)?, 1)?;
            Value::String(if text.is_empty() {
                "0".to_string()
            } else {
                text
            })
        }
        Kind::IntOrString => int_or_string(bytes_of(value)?)?,
        Kind::RawExtension => raw_json(bytes_of(value)?, depth)?,
        Kind::FieldsV1 => raw_json(bytes_of(value)?, depth)?,
        Kind::StringList => {
            let mut items = Vec::new();
            let mut reader = Reader::new(bytes_of(value)?);
            while let Some((number, field)) = reader.next_field()? {
                if number == 1 {
                    items.push(Value::String(string_of(bytes_of(field)?)));
                }
            }
            Value::Array(items)
        }
        Kind::Map(_) => return Err("a map value cannot itself be a map".to_string()),
    })
}

/// The last occurrence of varint field `number` in a small message (0 when absent).
fn int_field(bytes: &[u8], number: u32) -> Result<i64, String> {
    let mut out = 0;
    let mut reader = Reader::new(bytes);
    while let Some((n, value)) = reader.next_field()? {
        if n == number {
            out = varint_of(value)? as i64;
        }
    }
    Ok(out)
}

/// The last occurrence of string field `number` in a small message ("" when absent).
fn string_field(bytes: &[u8], number: u32) -> Result<String, String> {
    let mut out = String::new();
    let mut reader = Reader::new(bytes);
    while let Some((n, value)) = reader.next_field()? {
        if n == number {
            out = string_of(bytes_of(value)?);
        }
    }
    Ok(out)
}

/// `metav1.Time`/`MicroTime` (a Timestamp: seconds 1, nanos 2); Go marshals a zero time as null.
fn time_to_json(bytes: &[u8], micro: bool) -> Result<Value, String> {
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    let seconds = int_field(bytes, 1)?;
    let nanos = int_field(bytes, 2)? as i32;
    if seconds == GO_ZERO_TIME_SECONDS && nanos == 0 {
        return Ok(Value::Null);
    }
    let nanos = u32::try_from(nanos)
        .ok()
        .filter(|n| *n < 1_000_000_000)
        .ok_or_else(|| format!("timestamp nanos {nanos} out of range"))?;
    let time = chrono::DateTime::from_timestamp(seconds, nanos)
        .ok_or_else(|| format!("timestamp {seconds} out of range"))?;
    let format = if micro {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Ok(Value::String(time.format(format).to_string()))
}

/// `intstr.IntOrString`: type 1 (0 int, 1 string), intVal 2, strVal 3.
fn int_or_string(bytes: &[u8]) -> Result<Value, String> {
    if int_field(bytes, 1)? == 1 {
        Ok(Value::String(string_field(bytes, 3)?))
    } else {
        Ok(Value::from(int_field(bytes, 2)? as i32))
    }
}

/// `runtime.RawExtension`/`metav1.FieldsV1`: raw 1 holds JSON, or a nested protobuf object.
fn raw_json(bytes: &[u8], depth: usize) -> Result<Value, String> {
    let mut raw: &[u8] = &[];
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = reader.next_field()? {
        if number == 1 {
            raw = bytes_of(value)?;
        }
    }
    if raw.is_empty() {
        return Ok(Value::Null);
    }
    if raw.starts_with(super::MAGIC) {
        return super::decode_object(raw, depth + 1).map(Value::Object);
    }
    serde_json::from_slice(raw).map_err(|e| format!("embedded object is not JSON: {e}"))
}

/// Go's `time.Duration.String()`: `1h2m3.5s`, `1.5ms`, `0s`.
pub(super) fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".to_string();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let abs = nanos.unsigned_abs();
    if abs < 1_000_000_000 {
        let (unit, scale) = if abs < 1_000 {
            ("ns", 1)
        } else if abs < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        return format!("{sign}{}{unit}", fraction(abs, scale));
    }
    let hours = abs / 3_600_000_000_000;
    let minutes = abs / 60_000_000_000 % 60;
    let seconds = fraction(abs % 60_000_000_000, 1_000_000_000);
    let mut out = sign.to_string();
    if hours > 0 {
        out.push_str(&format!("{hours}h{minutes}m"));
    } else if minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&format!("{seconds}s"));
    out
}

/// `value / scale` with the fraction's trailing zeros dropped.
fn fraction(value: u64, scale: u64) -> String {
    let whole = value / scale;
    let rest = value % scale;
    if rest == 0 {
        return whole.to_string();
    }
    let width = scale.to_string().len() - 1;
    let digits = format!("{rest:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// Standard base64 with padding, as Go's `encoding/json` writes `[]byte`.
pub(super) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk.first().copied().unwrap_or(0),
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (index, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if index <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn base64_matches_go_encoding() {
        for (input, expected) in [
            (&b""[..], ""),
            (b"y", "eQ=="),
            (b"ab", "YWI="),
            (b"abc", "YWJj"),
            (b"bin\x00\xff\xfe data", "YmluAP/+IGRhdGE="),
        ] {
            assert_eq!(base64(input), expected);
        }
    }

    #[test]
    fn go_duration_matches_go_strings() {
        for (nanos, expected) in [
            (0, "0s"),
            (1, "1ns"),
            (1_500, "1.5µs"),
            (2_000_000, "2ms"),
            (1_000_000_000, "1s"),
            (90_000_000_000, "1m30s"),
            (3_600_000_000_000, "1h0m0s"),
            (3_723_500_000_000, "1h2m3.5s"),
            (-5_000_000_000, "-5s"),
        ] {
            assert_eq!(go_duration(nanos), expected, "{nanos}");
        }
    }

    #[test]
    fn time_zero_is_null_and_set_time_is_rfc3339() {
        assert_eq!(time_to_json(&[], false), Ok(Value::Null));
        // seconds = 1700000000, nanos = 123456000
        let mut bytes = vec![0x08];
        let mut v: u64 = 1_700_000_000;
        while v >= 0x80 {
            bytes.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        bytes.push(v as u8);
        bytes.extend([0x10, 0x80, 0x94, 0xef, 0x3a]);
        assert_eq!(
            time_to_json(&bytes, false),
            Ok(json!("2023-11-14T22:13:20Z"))
        );
        assert_eq!(
            time_to_json(&bytes, true),
            Ok(json!("2023-11-14T22:13:20.123456Z"))
        );
    }

    #[test]
    fn int_or_string_follows_its_type() {
        assert_eq!(int_or_string(&[0x08, 0x00, 0x10, 0x50]), Ok(json!(80)));
        assert_eq!(
            int_or_string(&[0x08, 0x01, 0x1a, 0x02, b'5', b'%']),
            Ok(json!("5%"))
        );
        assert_eq!(int_or_string(&[]), Ok(json!(0)));
    }

    #[test]
    fn omitempty_drops_only_scalar_zeros() {
        assert!(is_go_zero(&json!("")));
        assert!(is_go_zero(&json!(0)));
        assert!(is_go_zero(&json!(false)));
        assert!(!is_go_zero(&json!({})));
        assert!(!is_go_zero(&Value::Null));
        assert!(!is_go_zero(&json!("x")));
    }
}
