//! ksim-core: the pure logic every ksim component shares.
//!
//! Nothing here does I/O or needs an async runtime. Selectors, quantities,
//! patch metadata and strategic merge patch live here once, and the API
//! server, scheduler, controllers and kubelet simulator all call them.

pub mod apply;
mod error;
pub mod patch;
pub mod schema;
pub mod selector;

pub use error::Error;
