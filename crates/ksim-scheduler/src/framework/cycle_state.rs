//! `CycleState`: what plugins compute in one scheduling cycle (PreFilter,
//! PreScore) and read back later (Filter, Score), keyed by plugin.

use std::any::Any;
use std::collections::{HashMap, HashSet};

use foldhash::fast::FixedState;

/// What a plugin stores in the state: any cloneable value (preemption
/// evaluates nodes on copies of the state).
pub trait StateData: Any + Send + Sync {
    /// A boxed copy.
    fn clone_box(&self) -> Box<dyn StateData>;
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;
    /// For downcasting.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any + Clone + Send + Sync> StateData for T {
    fn clone_box(&self) -> Box<dyn StateData> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Per-cycle plugin data, plus the plugins whose Filter/Score are skipped
/// because their PreFilter/PreScore returned Skip.
#[derive(Default)]
pub struct CycleState {
    data: HashMap<&'static str, Box<dyn StateData>, FixedState>,
    pub(crate) skip_filter_plugins: HashSet<&'static str, FixedState>,
    pub(crate) skip_score_plugins: HashSet<&'static str, FixedState>,
}

impl CycleState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores `value` under `key`, replacing what was there.
    pub fn write<T: Any + Clone + Send + Sync>(&mut self, key: &'static str, value: T) {
        self.data.insert(key, Box::new(value));
    }

    /// Reads the value under `key` when it has type `T`.
    pub fn read<T: Any>(&self, key: &'static str) -> Option<&T> {
        self.data
            .get(key)
            .and_then(|value| value.as_ref().as_any().downcast_ref::<T>())
    }

    /// Mutable access to the value under `key`.
    pub fn read_mut<T: Any>(&mut self, key: &'static str) -> Option<&mut T> {
        self.data
            .get_mut(key)
            .and_then(|value| value.as_mut().as_any_mut().downcast_mut::<T>())
    }

    /// Whether a plugin's Filter is skipped this cycle.
    pub fn skips_filter(&self, plugin: &str) -> bool {
        self.skip_filter_plugins.contains(plugin)
    }

    /// Whether a plugin's Score is skipped this cycle.
    pub fn skips_score(&self, plugin: &str) -> bool {
        self.skip_score_plugins.contains(plugin)
    }
}

impl Clone for CycleState {
    fn clone(&self) -> Self {
        CycleState {
            data: self
                .data
                .iter()
                .map(|(key, value)| (*key, value.as_ref().clone_box()))
                .collect(),
            skip_filter_plugins: self.skip_filter_plugins.clone(),
            skip_score_plugins: self.skip_score_plugins.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_back_typed_values_only() {
        let mut state = CycleState::new();
        state.write("PreFilterX", 42usize);
        assert_eq!(state.read::<usize>("PreFilterX"), Some(&42));
        assert_eq!(state.read::<String>("PreFilterX"), None);
        assert_eq!(state.read::<usize>("missing"), None);
        if let Some(v) = state.read_mut::<usize>("PreFilterX") {
            *v = 7;
        }
        assert_eq!(state.read::<usize>("PreFilterX"), Some(&7));
        let mut copy = state.clone();
        if let Some(v) = copy.read_mut::<usize>("PreFilterX") {
            *v = 9;
        }
        assert_eq!(state.read::<usize>("PreFilterX"), Some(&7));
        assert_eq!(copy.read::<usize>("PreFilterX"), Some(&9));
    }
}
