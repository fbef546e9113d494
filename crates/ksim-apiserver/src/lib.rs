//! ksim-apiserver: a Kubernetes-compatible REST API server over ksim-store.
//!
//! [`ApiServer`] owns the store and the resource registry; [`ApiServer::router`]
//! is an axum `Router` that serves it, over a socket ([`serve`]) or in process
//! as the transport of a `kube::Client`.
//!
//! The server runs on the cluster's clock ([`ApiServer::with_clock`]): the
//! times it writes and shows and the names and uids it generates come from
//! it, and it serves the clock at ksim's own path `/ksim/v1alpha1/clock`
//! (`POST /ksim/v1alpha1/clock/advance` with `{"by": "10m"}` moves a
//! virtual one).

pub mod admission;
mod error;
pub mod openapi;
pub mod protobuf;
pub mod resources;
mod server;
pub mod table;

pub use error::{ApiError, StatusCause};
pub use server::{ApiServer, BulkCreated, BulkItem, serve};

/// The Kubernetes version ksim serves (the version of its k8s-openapi types).
pub const KUBERNETES_VERSION: &str = "v1.33.0";
