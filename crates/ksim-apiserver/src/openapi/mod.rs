//! The OpenAPI v3 documents (`/openapi/v3`), generated from the k8s-openapi types and CRDs, and server-side field validation.
//!
//! Interim version: an empty index; the documents land next.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use crate::ApiError;
use crate::resources::ResourceInfo;

/// The served OpenAPI documents.
#[derive(Clone, Default)]
pub struct OpenApi {}

impl OpenApi {
    /// Documents for these resources and CRDs.
    pub fn new(_resources: &[Arc<ResourceInfo>], _crds: &[Value]) -> Self {
        OpenApi {}
    }

    /// `GET /openapi/v3`.
    pub fn index(&self) -> Bytes {
        Bytes::from_static(br#"{"paths":{}}"#)
    }

    /// `GET /openapi/v3/<path>`.
    pub fn document(&self, _path: &str) -> Option<(Bytes, String)> {
        None
    }

    /// Unknown fields of `object`.
    pub fn unknown_fields(&self, _resource: &ResourceInfo, _object: &Value) -> Vec<String> {
        Vec::new()
    }
}

/// The 400 of `fieldValidation=Strict`.
pub fn strict_error(resource: &ResourceInfo, problems: &[String]) -> ApiError {
    ApiError::bad_request(format!(
        "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
        resource.kind,
        resource.version,
        resource.kind,
        problems.join(", ")
    ))
}

/// The `Warning` headers of `fieldValidation=Warn`.
pub fn warning_headers(problems: &[String]) -> Vec<String> {
    problems.iter().map(|p| format!("299 - {:?}", p)).collect()
}
