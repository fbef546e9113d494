//! ksim-runtime: what every ksim component (scheduler, controllers, kubelet
//! simulator, descheduler) shares: how it gets a `kube::Client`, informer
//! streams over kube's watcher, a delaying work queue keyed by object, and a
//! clock tests can drive.

pub mod client;
pub mod clock;
pub mod informer;
pub mod queue;

pub use clock::{Clock, RealClock, SharedClock, TestClock};
pub use informer::{Change, changes, object_key};
pub use queue::WorkQueue;
