//! `CycleState`: what plugins compute in one scheduling cycle (PreFilter,
//! PreScore) and read back later (Filter, Score), keyed by plugin.

use std::any::Any;
use std::collections::{HashMap, HashSet};

/// Per-cycle plugin data, plus the plugins whose Filter/Score are skipped
/// because their PreFilter/PreScore returned Skip.
#[derive(Default)]
pub struct CycleState {
    data: HashMap<&'static str, Box<dyn Any + Send + Sync>>,
    pub(crate) skip_filter_plugins: HashSet<&'static str>,
    pub(crate) skip_score_plugins: HashSet<&'static str>,
}

impl CycleState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores `value` under `key`, replacing what was there.
    pub fn write<T: Any + Send + Sync>(&mut self, key: &'static str, value: T) {
        self.data.insert(key, Box::new(value));
    }

    /// Reads the value under `key` when it has type `T`.
    pub fn read<T: Any>(&self, key: &'static str) -> Option<&T> {
        self.data
            .get(key)
            .and_then(|value| value.downcast_ref::<T>())
    }

    /// Mutable access to the value under `key`.
    pub fn read_mut<T: Any>(&mut self, key: &'static str) -> Option<&mut T> {
        self.data
            .get_mut(key)
            .and_then(|value| value.downcast_mut::<T>())
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
    }
}
