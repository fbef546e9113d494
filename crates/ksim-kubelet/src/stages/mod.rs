//! The stage sets ksim ships.
