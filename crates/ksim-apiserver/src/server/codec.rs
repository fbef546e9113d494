//! Request bodies in (JSON, YAML, protobuf) and responses out (JSON, YAML,
//! Table, PartialObjectMetadata), negotiated from `Content-Type` and
//! `Accept` as kube-apiserver does.

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::Value;

use crate::ApiError;

/// The largest request body accepted (kube-apiserver's limit is 3 MiB).
pub(crate) const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// How a body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyFormat {
    Json,
    Yaml,
    Protobuf,
}

/// The media type of a request (without parameters), lower-cased.
pub(crate) fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default()
}

/// Decodes an object body by its content type.
pub(crate) fn decode_object(headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    let media_type = content_type(headers);
    let format = match media_type.as_str() {
        "" | "application/json" | "*/*" => BodyFormat::Json,
        "application/yaml" | "text/yaml" | "application/x-yaml" => BodyFormat::Yaml,
        "application/vnd.kubernetes.protobuf" => BodyFormat::Protobuf,
        other => return Err(ApiError::unsupported_media_type(other)),
    };
    decode(format, body)
}

/// Decodes a body of a known format into JSON.
pub(crate) fn decode(format: BodyFormat, body: &[u8]) -> Result<Value, ApiError> {
    let value = match format {
        BodyFormat::Json => serde_json::from_slice::<Value>(body).map_err(|e| {
            ApiError::bad_request(format!(
                "couldn't get version/kind; json parse error: {}",
                go_json_error(body, &e)
            ))
        })?,
        BodyFormat::Yaml => {
            let text = std::str::from_utf8(body).map_err(|e| {
                ApiError::bad_request(format!("error converting YAML to JSON: {e}"))
            })?;
            serde_saphyr::from_str::<Value>(text)
                .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}")))?
        }
        BodyFormat::Protobuf => crate::protobuf::decode(body)?,
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "couldn't get version/kind; json parse error: the body is not a JSON object",
        ));
    }
    Ok(value)
}

/// A JSON syntax error worded as Go's encoding/json words it.
fn go_json_error(body: &[u8], error: &serde_json::Error) -> String {
    if error.is_eof() {
        return "unexpected end of JSON input".to_string();
    }
    // serde_json counts lines and columns from 1; find the offending byte.
    let offset = body
        .split(|b| *b == b'\n')
        .take(error.line().saturating_sub(1))
        .map(|line| line.len() + 1)
        .sum::<usize>()
        + error.column().saturating_sub(1);
    match body.get(offset) {
        Some(byte) if error.is_syntax() => {
            format!(
                "invalid character {:?} looking for beginning of value",
                char::from(*byte)
            )
        }
        _ => error.to_string(),
    }
}

/// What the client asked to get back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    Json,
    Yaml,
    /// `meta.k8s.io` Table (v1 or v1beta1).
    Table {
        v1beta1: bool,
    },
    /// `PartialObjectMetadata` / `PartialObjectMetadataList`.
    Metadata {
        v1beta1: bool,
    },
}

/// Negotiates the response form from `Accept`; 406 if nothing acceptable.
pub(crate) fn negotiate(headers: &HeaderMap) -> Result<Output, ApiError> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Ok(Output::Json);
    };
    for candidate in accept.split(',') {
        let mut parts = candidate.split(';').map(str::trim);
        let media_type = parts.next().unwrap_or_default().to_ascii_lowercase();
        let mut as_kind = None;
        let mut group = None;
        let mut version = None;
        for parameter in parts {
            if let Some((key, value)) = parameter.split_once('=') {
                match key.trim() {
                    "as" => as_kind = Some(value.trim().to_string()),
                    "g" => group = Some(value.trim().to_string()),
                    "v" => version = Some(value.trim().to_string()),
                    _ => {}
                }
            }
        }
        let json_like = matches!(
            media_type.as_str(),
            "application/json" | "*/*" | "application/*" | "application/vnd.kubernetes.protobuf"
        );
        match as_kind.as_deref() {
            Some("Table") if json_like && group.as_deref() == Some("meta.k8s.io") => {
                let v1beta1 = version.as_deref() == Some("v1beta1");
                return Ok(Output::Table { v1beta1 });
            }
            Some("PartialObjectMetadata" | "PartialObjectMetadataList")
                if json_like && group.as_deref() == Some("meta.k8s.io") =>
            {
                let v1beta1 = version.as_deref() == Some("v1beta1");
                return Ok(Output::Metadata { v1beta1 });
            }
            Some(_) => continue,
            None => {}
        }
        match media_type.as_str() {
            "application/yaml" => return Ok(Output::Yaml),
            "application/json"
            | "*/*"
            | "application/*"
            | "application/vnd.kubernetes.protobuf"
            | "application/json;stream=watch" => return Ok(Output::Json),
            _ => continue,
        }
    }
    Err(ApiError::not_acceptable(format!(
        "only the following media types are accepted: application/json, application/yaml (got {accept:?})"
    )))
}

/// A response with a body and content type.
pub(crate) fn respond(status: StatusCode, content_type: &'static str, body: Bytes) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// A JSON value in the negotiated plain form (JSON or YAML).
pub(crate) fn respond_value(status: StatusCode, output: Output, value: &Value) -> Response {
    if output == Output::Yaml {
        let text = serde_saphyr::to_string(value).unwrap_or_default();
        return respond(status, "application/yaml", Bytes::from(text));
    }
    respond(
        status,
        "application/json",
        Bytes::from(serde_json::to_vec(value).unwrap_or_default()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn kubectl_get_asks_for_a_table() {
        let headers = accept(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
        );
        assert_eq!(
            negotiate(&headers).expect("ok"),
            Output::Table { v1beta1: false }
        );
    }

    #[test]
    fn plain_and_yaml_and_unacceptable() {
        assert_eq!(negotiate(&HeaderMap::new()).expect("ok"), Output::Json);
        assert_eq!(
            negotiate(&accept("application/yaml")).expect("ok"),
            Output::Yaml
        );
        assert_eq!(
            negotiate(&accept(
                "application/vnd.kubernetes.protobuf,application/json"
            ))
            .expect("ok"),
            Output::Json
        );
        assert_eq!(negotiate(&accept("text/html")).expect_err("406").code, 406);
    }

    #[test]
    fn json_syntax_errors_are_worded_as_go_does() {
        let truncated = serde_json::from_slice::<Value>(br#"{"apiVersion":"#).expect_err("eof");
        assert_eq!(
            go_json_error(br#"{"apiVersion":"#, &truncated),
            "unexpected end of JSON input"
        );
        let body = b"{\"a\": x}";
        let invalid = serde_json::from_slice::<Value>(body).expect_err("syntax");
        assert_eq!(
            go_json_error(body, &invalid),
            "invalid character 'x' looking for beginning of value"
        );
    }

    #[test]
    fn malformed_bodies_are_bad_requests() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        assert_eq!(
            decode_object(&headers, b"{nope").expect_err("400").code,
            400
        );
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/yaml"),
        );
        assert_eq!(decode_object(&headers, b"a: [").expect_err("400").code, 400);
        let yaml = decode_object(&headers, b"apiVersion: v1\nkind: Pod\n").expect("yaml");
        assert_eq!(yaml["kind"], "Pod");
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        assert_eq!(decode_object(&headers, b"{}").expect_err("415").code, 415);
    }
}
