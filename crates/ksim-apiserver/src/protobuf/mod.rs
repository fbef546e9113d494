//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) into JSON.
//!
//! Interim version: refuses protobuf bodies; the decoder lands next.

/// Decodes a Kubernetes protobuf body into the object's JSON form.
pub fn decode(_body: &[u8]) -> Result<serde_json::Value, crate::ApiError> {
    Err(crate::ApiError::unsupported_media_type(
        "application/vnd.kubernetes.protobuf",
    ))
}
