//! The plugins and their registry: one folder per plugin, tests beside it,
//! one registry line each. A plugin is built from its `args` in the policy
//! and serves the extension point it is enabled at.

use crate::framework::{ArgsError, BalancePlugin, DeschedulePlugin};

pub mod podlifetime;
pub mod removefailedpods;
pub mod removepodshavingtoomanyrestarts;
pub mod removepodsviolatinginterpodantiaffinity;
pub mod removepodsviolatingnodeaffinity;
pub mod removepodsviolatingnodetaints;

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
pub const REGISTRY: &[(&str, PluginFactory)] = &[
    (
        podlifetime::NAME,
        PluginFactory::Deschedule(podlifetime::new),
    ),
    (
        removefailedpods::NAME,
        PluginFactory::Deschedule(removefailedpods::new),
    ),
    (
        removepodshavingtoomanyrestarts::NAME,
        PluginFactory::Deschedule(removepodshavingtoomanyrestarts::new),
    ),
    (
        removepodsviolatinginterpodantiaffinity::NAME,
        PluginFactory::Deschedule(removepodsviolatinginterpodantiaffinity::new),
    ),
    (
        removepodsviolatingnodeaffinity::NAME,
        PluginFactory::Deschedule(removepodsviolatingnodeaffinity::new),
    ),
    (
        removepodsviolatingnodetaints::NAME,
        PluginFactory::Deschedule(removepodsviolatingnodetaints::new),
    ),
];

/// The registry entry called `name`.
pub fn lookup(name: &str) -> Option<PluginFactory> {
    REGISTRY
        .iter()
        .find(|(registered, _)| *registered == name)
        .map(|(_, factory)| *factory)
}
