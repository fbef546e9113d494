//! Defaulting and validation of objects on create and update, as kube-apiserver does them.
//!
//! Interim version: no defaults, no checks; the real ones land next.

use serde_json::Value;

use crate::ApiError;
use crate::resources::ResourceInfo;

/// Fills defaults as kube-apiserver does for the built-in kinds.
pub fn default_object(_resource: &ResourceInfo, _object: &mut Value) {}

/// Validation of a new object.
pub fn validate_create(_resource: &ResourceInfo, _object: &Value) -> Result<(), ApiError> {
    Ok(())
}

/// Validation of an update.
pub fn validate_update(
    _resource: &ResourceInfo,
    _old: &Value,
    _new: &Value,
) -> Result<(), ApiError> {
    Ok(())
}
