//! The cluster's clock and random source (the `ksim-clock` crate): every
//! component reads time, sleeps, and draws random numbers through it.

pub use ksim_clock::*;
