//! The error every controller's sync returns: an API failure or an object
//! the controller cannot act on (bad selector, bad intOrString...).

/// Why one sync of a controller failed; the work is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or failed a request.
    #[error("{0}")]
    Api(#[from] kube::Error),
    /// The object cannot be acted on as it is.
    #[error("{0}")]
    Invalid(String),
    /// A (de)serialization of an object failed.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
}

impl Error {
    /// Whether the API answered 404 Not Found.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Api(kube::Error::Api(s)) if s.code == 404)
    }

    /// Whether the API answered 409 Conflict (or AlreadyExists).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Api(kube::Error::Api(s)) if s.code == 409)
    }
}
