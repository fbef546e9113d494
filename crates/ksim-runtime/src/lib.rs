//! ksim-runtime: what every ksim component (scheduler, controllers, kubelet
//! simulator, descheduler) shares, starting with how it gets a `kube::Client`.

pub mod client;
