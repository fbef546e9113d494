//! Defaulting and validation of objects on create and update, as kube-apiserver does them.
//!
//! The server calls [`default_object`] then [`validate_create`] on create, and
//! [`default_object`] then [`validate_update`] on update.

mod defaults;
mod field;
mod json;
mod names;
mod validation;

pub use defaults::default_object;
pub use validation::{validate_create, validate_update};
