//! The error of the descheduler crate: a bad policy, or an API failure while
//! listing the cluster.

use crate::framework::ArgsError;

/// Why a descheduling run could not start or a cycle failed as a whole.
/// Single evictions refused by the API are not errors: they are logged and
/// counted by the evictor.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The DeschedulerPolicy is malformed; the message names the field.
    #[error("invalid DeschedulerPolicy: {0}")]
    Policy(String),
    /// A plugin's args are malformed.
    #[error("invalid DeschedulerPolicy: {0}")]
    Args(#[from] ArgsError),
    /// The API server refused or failed a request.
    #[error("{0}")]
    Api(#[from] kube::Error),
}
