//! The autoscaler's error type.

/// What can go wrong reading the node groups or acting on the cluster.
#[derive(Debug, thiserror::Error)]
pub enum AutoscalerError {
    /// The kwok provider configuration or templates are invalid.
    #[error("{0}")]
    Config(String),
    /// An API call failed.
    #[error("{context}: {source}")]
    Api {
        context: String,
        #[source]
        source: kube::Error,
    },
}

impl AutoscalerError {
    pub(crate) fn api(context: impl Into<String>, source: kube::Error) -> Self {
        AutoscalerError::Api {
            context: context.into(),
            source,
        }
    }
}
