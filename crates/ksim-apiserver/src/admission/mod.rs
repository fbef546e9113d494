//! Defaulting and validation of objects on create and update, as kube-apiserver does them.
//!
//! The server calls [`default_object`] then [`validate_create`] on create, and
//! [`default_object`] then [`validate_update`] on update. Custom resources
//! also get [`default_custom_resource`] (on write and read) and
//! [`validate_custom_resource`] against their CRD version's schema. The
//! Priority admission plugin ([`admit_new_pod`], [`admit_pod_update`],
//! [`admit_priority_class`]) reads PriorityClasses through the server.

mod custom;
mod defaults;
mod field;
mod json;
mod names;
mod priority;
mod validation;

pub use custom::{default_custom_resource, validate_custom_resource};
pub use defaults::default_object;
pub use priority::{PriorityClasses, admit_new_pod, admit_pod_update, admit_priority_class};
pub use validation::{validate_create, validate_update};
