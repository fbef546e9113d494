//! The plugins and their registry: one folder per plugin, tests beside it,
//! one registry line each. A plugin is built from its `args` in the policy
//! and serves the extension point it is enabled at.

use crate::framework::{ArgsError, BalancePlugin, DeschedulePlugin};

pub mod high_node_utilization;
pub mod low_node_utilization;
pub mod node_utilization;
pub mod pod_lifetime;
pub mod remove_duplicates;
pub mod remove_failed_pods;
pub mod remove_pods_having_too_many_restarts;
pub mod remove_pods_violating_inter_pod_anti_affinity;
pub mod remove_pods_violating_node_affinity;
pub mod remove_pods_violating_node_taints;
pub mod remove_pods_violating_topology_spread_constraint;

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
        remove_duplicates::PLUGIN_NAME,
        PluginFactory::Balance(remove_duplicates::RemoveDuplicates::factory),
    ),
    (
        low_node_utilization::PLUGIN_NAME,
        PluginFactory::Balance(low_node_utilization::LowNodeUtilization::factory),
    ),
    (
        high_node_utilization::PLUGIN_NAME,
        PluginFactory::Balance(high_node_utilization::HighNodeUtilization::factory),
    ),
    (
        remove_pods_violating_topology_spread_constraint::PLUGIN_NAME,
        PluginFactory::Balance(
            remove_pods_violating_topology_spread_constraint::RemovePodsViolatingTopologySpreadConstraint::factory,
        ),
    ),
    (
        pod_lifetime::PLUGIN_NAME,
        PluginFactory::Deschedule(pod_lifetime::factory),
    ),
    (
        remove_failed_pods::PLUGIN_NAME,
        PluginFactory::Deschedule(remove_failed_pods::factory),
    ),
    (
        remove_pods_having_too_many_restarts::PLUGIN_NAME,
        PluginFactory::Deschedule(remove_pods_having_too_many_restarts::factory),
    ),
    (
        remove_pods_violating_inter_pod_anti_affinity::PLUGIN_NAME,
        PluginFactory::Deschedule(remove_pods_violating_inter_pod_anti_affinity::factory),
    ),
    (
        remove_pods_violating_node_affinity::PLUGIN_NAME,
        PluginFactory::Deschedule(remove_pods_violating_node_affinity::factory),
    ),
    (
        remove_pods_violating_node_taints::PLUGIN_NAME,
        PluginFactory::Deschedule(remove_pods_violating_node_taints::factory),
    ),
];

/// The registry entry called `name`.
pub fn lookup(name: &str) -> Option<PluginFactory> {
    REGISTRY
        .iter()
        .find(|(registered, _)| *registered == name)
        .map(|(_, factory)| *factory)
}
