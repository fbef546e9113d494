//! The crate's error type.

/// What can go wrong with a clock.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Only a virtual clock can be moved by hand.
    #[error("the cluster's clock is real; only a virtual clock (--clock virtual) can be advanced")]
    NotVirtual,
    /// The cluster did not settle: some component kept working without end.
    #[error("the cluster did not settle within {0:?} of real time (a component keeps working)")]
    NotSettled(std::time::Duration),
}
