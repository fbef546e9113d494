//! The garbage collector: deletes objects whose owners are gone (background
//! propagation), carries out foreground deletion (the `foregroundDeletion`
//! finalizer: dependents first, blockOwnerDeletion honoured) and orphaning
//! (the `orphan` finalizer: owner references removed from the dependents).

mod collector;
mod graph;

pub use collector::run;
pub use graph::{
    Decision, FOREGROUND_FINALIZER, Graph, Node, ORPHAN_FINALIZER, OwnerState, decide,
};
