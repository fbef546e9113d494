//! The plugins and their registry: one folder per plugin, tests beside it,
//! one registry line each. A plugin is built from its `args` in the policy
//! and serves the extension point it is enabled at.

use crate::framework::{ArgsError, BalancePlugin, DeschedulePlugin};

/// Builds a deschedule plugin from its args.
pub type DeschedulePluginFactory =
    fn(Option<&serde_json::Value>) -> Result<Box<dyn DeschedulePlugin>, ArgsError>;
/// Builds a balance plugin from its args.
pub type BalancePluginFactory =
    fn(Option<&serde_json::Value>) -> Result<Box<dyn BalancePlugin>, ArgsError>;

/// The extension point a registered plugin serves, and how to build it.
#[derive(Clone, Copy)]
pub enum PluginFactory {
    /// A `deschedule` plugin.
    Deschedule(DeschedulePluginFactory),
    /// A `balance` plugin.
    Balance(BalancePluginFactory),
}

/// Every plugin a policy may name (DefaultEvictor, the filter and
/// preEvictionFilter plugin, is built by the evictor, not from here).
pub const REGISTRY: &[(&str, PluginFactory)] = &[];

/// The registry entry called `name`.
pub fn lookup(name: &str) -> Option<PluginFactory> {
    REGISTRY
        .iter()
        .find(|(registered, _)| *registered == name)
        .map(|(_, factory)| *factory)
}
