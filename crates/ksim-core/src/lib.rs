//! ksim-core: the pure logic every ksim component shares.
//!
//! Nothing here does I/O or needs an async runtime. Selectors, quantities,
//! patch metadata and strategic merge patch live here once, and the API
//! server, scheduler, controllers and kubelet simulator all call them.

pub mod apply;
pub mod crds;
pub mod duration;
mod error;
pub mod json_text;
pub mod node_affinity;
pub mod patch;
pub mod pod_affinity;
pub mod qos;
pub mod quantity;
pub mod resources;
pub mod schema;
pub mod selector;
pub mod status;
pub mod toleration;
pub mod topology_spread;

pub use error::Error;
