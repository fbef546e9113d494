//! Custom resources and their CustomResourceDefinitions: validation of a
//! custom resource against its CRD version's `openAPIV3Schema`, structural
//! defaulting, and the validation of CustomResourceDefinitions themselves.

mod crd;
mod defaults;
mod schema;

pub use defaults::default_custom_resource;
pub use schema::validate_custom_resource;

pub(crate) use crd::{is_crd, validate_crd, validate_crd_update};
