//! Stages: the `Stage` kind, its compiled selector, delay and next action.

mod compiled;
mod duration;
mod fields;
mod jq;
mod next;
mod path;
mod types;

pub use compiled::{
    CompiledStage, ObjectSnapshot, Requirement, SelectorOperator, choose_stage, compile_stages,
    matching_stages, select_stage,
};
pub use duration::parse_go_duration;
pub use fields::ReadFields;
pub use jq::{JqInput, JqOutput, JqQuery};
pub use next::{NextAction, PatchType, RenderedPatch, finalizers_patch, next_action};
pub use types::*;
