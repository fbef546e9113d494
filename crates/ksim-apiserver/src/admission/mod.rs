//! Defaulting and validation of objects on create and update, as kube-apiserver does them.
//!
//! The server calls [`default_object`] then [`validate_create`] on create, and
//! [`default_object`] then [`validate_update`] on update. Custom resources
//! also get [`default_custom_resource`] (on write and read) and
//! [`validate_custom_resource`] against their CRD version's schema.

mod custom;
mod defaults;
mod field;
mod json;
mod names;
mod validation;

pub use custom::{default_custom_resource, validate_custom_resource};
pub use defaults::default_object;
pub use validation::{validate_create, validate_update};
