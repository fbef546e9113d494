//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) into JSON.
//!
//! A body is the magic `k8s\0` followed by a `runtime.Unknown` envelope holding the object's
//! apiVersion and kind and its raw message bytes. The bytes are read generically against
//! [`facts`], a table of wire facts per field that this project generates and owns, and turned
//! into the JSON Go's encoder would write for the same object. The same facts tell which empty
//! lists and maps a written object loses in kube's typed round trip ([`drop_empty_fields`]).

mod convert;
mod facts;
mod omitempty;
mod schema;
mod wire;

use serde_json::{Map, Value};

use crate::ApiError;
pub(crate) use omitempty::drop_empty_fields;
use wire::Reader;

/// The prefix of every Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\x00";

/// Decodes a Kubernetes protobuf body (with the `k8s\0` magic and runtime.Unknown envelope) into the
/// object's JSON form (with apiVersion and kind set from the envelope's TypeMeta).
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    decode_object(body, 0)
        .map(Value::Object)
        .map_err(|message| {
            let message = convert::user_message(message);
            ApiError::bad_request(format!("failed to decode protobuf body: {message}"))
        })
}

/// The envelope of a protobuf body: `runtime.Unknown`.
#[derive(Debug, Default)]
struct Envelope<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
    content_encoding: String,
}

fn envelope(bytes: &[u8]) -> Result<Envelope<'_>, String> {
    let mut out = Envelope::default();
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = reader.next_field()? {
        let wire::WireValue::Bytes(field) = value else {
            continue;
        };
        match number {
            1 => {
                let mut type_meta = Reader::new(field);
                while let Some((number, value)) = type_meta.next_field()? {
                    if let wire::WireValue::Bytes(text) = value {
                        let text = String::from_utf8_lossy(text).into_owned();
                        match number {
                            1 => out.api_version = text,
                            2 => out.kind = text,
                            _ => {}
                        }
                    }
                }
            }
            2 => out.raw = field,
            3 => out.content_encoding = String::from_utf8_lossy(field).into_owned(),
            _ => {}
        }
    }
    Ok(out)
}

/// Decodes a body (or a nested `RawExtension` holding one) into a JSON object.
fn decode_object(body: &[u8], depth: usize) -> Result<Map<String, Value>, String> {
    let bytes = body.strip_prefix(MAGIC).ok_or_else(|| {
        "the body does not start with the Kubernetes protobuf prefix k8s\\x00".to_string()
    })?;
    let envelope = envelope(bytes)?;
    if !envelope.content_encoding.is_empty() {
        return Err(format!(
            "content encoding {:?} is not supported",
            envelope.content_encoding
        ));
    }
    if envelope.kind.is_empty() {
        return Err("the envelope names no kind".to_string());
    }
    let message = schema::root_message(&envelope.api_version, &envelope.kind).ok_or_else(|| {
        format!(
            "kind {:?} of apiVersion {:?} cannot be sent as protobuf to this server; send it as JSON",
            envelope.kind, envelope.api_version
        )
    })?;
    let fields = convert::message_to_json(message, envelope.raw, depth)?;
    let mut object = Map::new();
    object.insert(
        "apiVersion".to_string(),
        Value::String(envelope.api_version),
    );
    object.insert("kind".to_string(), Value::String(envelope.kind));
    object.extend(fields);
    Ok(object)
}

#[cfg(test)]
mod tests;
