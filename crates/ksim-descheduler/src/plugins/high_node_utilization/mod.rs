//! HighNodeUtilization (upstream `nodeutilization/highnodeutilization.go`):
//! nodes whose requests are at or under `thresholds` for every resource are
//! underutilized; their evictable pods are evicted (least used node first)
//! while the other, schedulable nodes have room, so that the scheduler
//! packs them onto fewer nodes.

use k8s_openapi::api::core::v1::{Node, Pod};
use serde::Deserialize;

use crate::framework::{
    ArgsError, BalancePlugin, ClusterSnapshot, PluginStatus, PodEvictor, decode_args,
};
use crate::nodeutil::is_node_unschedulable;
use crate::plugins::node_utilization::{
    EvictionPass, MAX_RESOURCE_PERCENTAGE, NodeInfo, ResourceThresholds, align_thresholds,
    cap_capacity_to_threshold, enough_underutilized_nodes, evict_pods_from_source_nodes,
    is_below_threshold, log_classified, node_usages, requests_any_of, sort_nodes_by_usage,
    tracked_resource_names, validate_thresholds,
};
use crate::podutil::Namespaces;

/// The plugin's name in the policy.
pub const PLUGIN_NAME: &str = "HighNodeUtilization";

/// The only eviction mode upstream knows: evict only pods that request one
/// of the thresholded resources.
pub const EVICTION_MODE_ONLY_THRESHOLDING_RESOURCES: &str = "OnlyThresholdingResources";

/// Upstream `HighNodeUtilizationArgs`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct HighNodeUtilizationArgs {
    /// At or under these percentages (all of them) a node is underutilized.
    pub thresholds: ResourceThresholds,
    /// Do nothing unless more than this many nodes are underutilized.
    pub number_of_nodes: i64,
    /// `OnlyThresholdingResources`.
    pub eviction_modes: Vec<String>,
    /// Only `exclude` is supported.
    pub evictable_namespaces: Option<Namespaces>,
}

impl HighNodeUtilizationArgs {
    /// Upstream `ValidateHighNodeUtilizationArgs`.
    pub fn validate(&self) -> Result<(), ArgsError> {
        if self
            .evictable_namespaces
            .as_ref()
            .is_some_and(|ns| !ns.include.is_empty())
        {
            return Err(ArgsError::new(
                "evictableNamespaces.include",
                "only Exclude namespaces can be set, inclusion is not supported",
            ));
        }
        validate_thresholds("thresholds", &self.thresholds)?;
        for (index, mode) in self.eviction_modes.iter().enumerate() {
            if mode != EVICTION_MODE_ONLY_THRESHOLDING_RESOURCES {
                return Err(ArgsError::new(
                    format!("evictionModes[{index}]"),
                    format!("invalid eviction mode {mode}"),
                ));
            }
        }
        Ok(())
    }
}

/// The HighNodeUtilization balance plugin.
#[derive(Debug)]
pub struct HighNodeUtilization {
    args: HighNodeUtilizationArgs,
    resource_names: Vec<String>,
    thresholded: Vec<String>,
}

impl HighNodeUtilization {
    /// Builds the plugin from validated args.
    pub fn new(args: HighNodeUtilizationArgs) -> Result<Self, ArgsError> {
        args.validate()?;
        Ok(HighNodeUtilization {
            resource_names: tracked_resource_names(&args.thresholds),
            thresholded: args.thresholds.keys().cloned().collect(),
            args,
        })
    }

    /// The registry's factory.
    pub fn factory(args: Option<&serde_json::Value>) -> Result<Box<dyn BalancePlugin>, ArgsError> {
        Ok(Box::new(Self::new(decode_args(args)?)?))
    }
}

impl BalancePlugin for HighNodeUtilization {
    fn name(&self) -> &'static str {
        PLUGIN_NAME
    }

    fn balance(
        &self,
        snapshot: &ClusterSnapshot,
        nodes: &[&Node],
        evictor: &mut dyn PodEvictor,
    ) -> PluginStatus {
        let names = &self.resource_names;
        let usages = node_usages(snapshot, nodes, names);
        let low = align_thresholds(names, &self.args.thresholds);
        let high_thresholds: ResourceThresholds = self
            .args
            .thresholds
            .keys()
            .map(|name| (name.clone(), MAX_RESOURCE_PERCENTAGE))
            .collect();
        let high = align_thresholds(names, &high_thresholds);

        let mut low_nodes = Vec::new();
        let mut schedulable_nodes = Vec::new();
        for usage in &usages {
            let percent = usage.percentages();
            let (category, group) = if is_below_threshold(&percent, &low) {
                ("underutilized", &mut low_nodes)
            } else if is_node_unschedulable(usage.node) {
                tracing::debug!(node = usage.name, "Node is unschedulable");
                continue;
            } else {
                ("overutilized", &mut schedulable_nodes)
            };
            log_classified(category, usage, names);
            group.push(NodeInfo {
                usage,
                current: usage.usage.clone(),
                available: cap_capacity_to_threshold(usage, &high),
            });
        }

        tracing::debug!(criteria = ?self.args.thresholds, "Criteria for a node below target utilization");
        tracing::debug!(
            total_number = low_nodes.len(),
            "Number of underutilized nodes"
        );

        if !enough_underutilized_nodes(low_nodes.len(), nodes.len(), self.args.number_of_nodes) {
            return PluginStatus::Success;
        }
        if schedulable_nodes.is_empty() {
            tracing::debug!("No node is available to schedule the pods, nothing to do here");
            return PluginStatus::Success;
        }

        // Stop as soon as the schedulable nodes have no room left for
        // some resource.
        let continue_eviction = |_: &NodeInfo<'_, '_>, total_available: &[i64]| {
            total_available.iter().all(|available| *available > 0)
        };
        sort_nodes_by_usage(&mut low_nodes, true);
        let only_thresholding = self
            .args
            .eviction_modes
            .iter()
            .any(|mode| mode == EVICTION_MODE_ONLY_THRESHOLDING_RESOURCES);
        let pod_filter = |evictor: &dyn PodEvictor, pod: &Pod| {
            evictor.filter(pod) && (!only_thresholding || requests_any_of(pod, &self.thresholded))
        };
        let excluded: &[String] = self
            .args
            .evictable_namespaces
            .as_ref()
            .map(|ns| ns.exclude.as_slice())
            .unwrap_or_default();
        let pass = EvictionPass {
            snapshot,
            strategy: PLUGIN_NAME,
            resource_names: names,
            pod_filter: &pod_filter,
            excluded_namespaces: excluded,
            continue_eviction: &continue_eviction,
            max_per_node: None,
        };
        evict_pods_from_source_nodes(&mut low_nodes, &schedulable_nodes, evictor, &pass);
        PluginStatus::Success
    }
}

#[cfg(test)]
mod tests;
