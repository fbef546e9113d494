//! Stages: the `Stage` kind, its compiled selector, delay and next action.

mod jq;
mod types;

pub use jq::{JqInput, JqOutput, JqQuery};
pub use types::*;
