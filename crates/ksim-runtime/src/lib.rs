//! ksim-runtime: what every ksim component (scheduler, controllers, kubelet
//! simulator, descheduler) shares: informer streams over kube's watcher,
//! objects decoded without managedFields, a delaying work queue keyed by
//! object, a clock tests can drive and, with the `in-process` feature, a
//! `kube::Client` over an embedded API server (the components themselves
//! depend only on kube, so they run against any cluster).

#[cfg(feature = "in-process")]
pub mod client;
pub mod clock;
pub mod informer;
pub mod lean;
pub mod queue;

pub use clock::{Clock, RealClock, SharedClock, TestClock};
pub use informer::{Change, changes, object_key};
pub use lean::WithoutManagedFields;
pub use queue::WorkQueue;
