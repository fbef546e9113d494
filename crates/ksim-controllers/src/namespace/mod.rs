//! The namespace controller: once a namespace is deleted (Terminating with
//! the `kubernetes` finalizer in `spec.finalizers`), deletes every object of
//! every namespaced resource the server's discovery lists (custom resources
//! included), reports what remains with upstream's deletion conditions, and
//! removes the `kubernetes` finalizer through `/finalize` once it is empty.

mod controller;
mod status;
#[cfg(test)]
mod tests;

pub use controller::{FINALIZER, run};
pub use status::{ContentTotals, deletion_conditions};
