//! The crate's error type: what is wrong with a scenario file (always
//! naming the file, and the step and field when there is one). What fails
//! while running is a step's outcome in the report, not an error.

use std::path::PathBuf;

/// What can go wrong with a scenario.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file cannot be read.
    #[error("{}: cannot read the scenario: {source}", file.display())]
    Read {
        /// The scenario file.
        file: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Something outside the steps is wrong (not YAML, wrong kind, a bad
    /// `spec` field).
    #[error("{}: {field}: {message}", file.display())]
    Invalid {
        /// The scenario file.
        file: PathBuf,
        /// The field, as a path (`spec.clock`).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A step is wrong.
    #[error("{}: step {step}: {field}: {message}", file.display())]
    InvalidStep {
        /// The scenario file.
        file: PathBuf,
        /// The step's number, from 1.
        step: usize,
        /// The field, as a path inside the step (`waitFor.timeout`).
        field: String,
        /// What is wrong.
        message: String,
    },
}
