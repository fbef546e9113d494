//! The one error type of ksim-core.

/// What can go wrong in ksim-core's pure functions.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// A label or field selector that does not parse.
    #[error("unable to parse requirement: {0}")]
    InvalidSelector(String),
    /// A patch document that cannot be applied to the object.
    #[error("{0}")]
    InvalidPatch(String),
}
