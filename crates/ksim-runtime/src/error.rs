//! The one error type of ksim-runtime: what can go wrong building a client
//! from a kubeconfig.

use std::path::PathBuf;

/// Errors of ksim-runtime.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig file cannot be read or parsed.
    #[error("cannot read the kubeconfig {}", path.display())]
    ReadKubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The kubeconfig has no such context.
    #[error("no context {context:?} in {}", path.display())]
    NoContext {
        /// The context asked for.
        context: String,
        /// The file.
        path: PathBuf,
    },
    /// The kubeconfig's context cannot be turned into a client configuration.
    #[error("invalid kubeconfig {}", path.display())]
    InvalidKubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No kubeconfig was given and none was found.
    #[error("cannot find a kubeconfig")]
    NoKubeconfig(#[source] Box<kube::config::InferConfigError>),
    /// The client's HTTP stack cannot be built (TLS, proxy, credentials).
    #[error("cannot build the API client")]
    Client(#[source] kube::Error),
}
