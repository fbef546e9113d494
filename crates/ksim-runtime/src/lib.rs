//! ksim-runtime: what every ksim component (scheduler, controllers, kubelet
//! simulator, descheduler) shares: informer streams over kube's watcher,
//! objects decoded without managedFields, a delaying work queue keyed by
//! object, the cluster's clock (real or virtual; `ksim-clock`), and client construction: from a
//! kubeconfig (with client-go's retry rule, the one way every kubeconfig
//! client is built) and, with the `in-process` feature, over an embedded API
//! server (the components themselves depend only on kube, so they run
//! against any cluster).

pub mod client;
pub mod clock;
mod error;
pub mod informer;
pub mod lean;
pub mod queue;

pub use clock::{Clock, ClockMode, Random};
pub use error::Error;
pub use informer::{Change, changes, object_key};
pub use lean::WithoutManagedFields;
pub use queue::WorkQueue;
