//! The one error type of ksim-store.

/// What a store operation can refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// No object with that key.
    #[error("not found")]
    NotFound,
    /// An object with that key exists already.
    #[error("already exists")]
    AlreadyExists,
    /// The object changed since the revision the write was computed from
    /// (or a UID precondition failed).
    #[error("{0}")]
    Conflict(String),
    /// A watch or list asked for a revision older than the retained history.
    #[error("too old resource version: {requested} ({oldest})")]
    Expired {
        /// The revision asked for.
        requested: u64,
        /// The oldest revision a watch can still start from.
        oldest: u64,
    },
    /// The object lacks what the store needs (a name).
    #[error("invalid object: {0}")]
    InvalidObject(String),
}
