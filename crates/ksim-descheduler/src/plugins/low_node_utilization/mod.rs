//! LowNodeUtilization (upstream `nodeutilization/lownodeutilization.go`):
//! nodes whose requests are under `thresholds` for every resource are
//! underutilized, nodes over `targetThresholds` for some resource are
//! overutilized; pods are evicted from the overutilized nodes (most used
//! first, lowest priority and QoS first) until they drop under the target
//! or the underutilized nodes' room is used up.
//!
//! `metricsUtilization` is accepted and validated as upstream, but ksim has
//! no metrics source: usage is always computed from pod requests.

use k8s_openapi::api::core::v1::{Node, Pod};
use serde::Deserialize;

use crate::framework::{
    ArgsError, BalancePlugin, ClusterSnapshot, PluginStatus, PodEvictor, decode_args,
};
use crate::nodeutil::is_node_unschedulable;
use crate::plugins::node_utilization::{
    EvictionPass, NodeInfo, ResourceThresholds, align_thresholds, cap_capacity_to_threshold,
    deviation_thresholds, enough_underutilized_nodes, evict_pods_from_source_nodes,
    is_above_threshold, is_below_threshold, log_classified, node_usages, rounded_percentages,
    sort_nodes_by_usage, tracked_resource_names, usage_fields, validate_thresholds,
};
use crate::podutil::Namespaces;

/// The plugin's name in the policy.
pub const PLUGIN_NAME: &str = "LowNodeUtilization";

/// Upstream `MetricsUtilization` (accepted, not used by ksim).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MetricsUtilization {
    /// Deprecated: use `source: KubernetesMetrics`.
    pub metrics_server: bool,
    /// `KubernetesMetrics` or `Prometheus`.
    pub source: String,
    /// The Prometheus query.
    pub prometheus: Option<Prometheus>,
}

/// Upstream `Prometheus` args.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Prometheus {
    /// A query returning one sample per node.
    pub query: String,
}

/// Upstream `EvictionLimits`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct EvictionLimits {
    /// At most this many evictions per node by this plugin.
    pub node: Option<u32>,
}

/// Upstream `LowNodeUtilizationArgs`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LowNodeUtilizationArgs {
    /// Thresholds are deviations from the average usage, not absolute.
    pub use_deviation_thresholds: bool,
    /// Under these percentages (all of them) a node is underutilized.
    pub thresholds: ResourceThresholds,
    /// Over one of these percentages a node is overutilized.
    pub target_thresholds: ResourceThresholds,
    /// Do nothing unless more than this many nodes are underutilized.
    pub number_of_nodes: i64,
    /// Accepted for compatibility; usage comes from requests.
    pub metrics_utilization: Option<MetricsUtilization>,
    /// Only `exclude` is supported.
    pub evictable_namespaces: Option<Namespaces>,
    /// Per-node eviction limit of this plugin.
    pub eviction_limits: Option<EvictionLimits>,
}

impl LowNodeUtilizationArgs {
    /// Upstream `ValidateLowNodeUtilizationArgs`.
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
        validate_thresholds("thresholds", &self.thresholds).map_err(|error| {
            ArgsError::new(
                error.field,
                format!("thresholds config is not valid: {}", error.message),
            )
        })?;
        validate_thresholds("targetThresholds", &self.target_thresholds).map_err(|error| {
            ArgsError::new(
                error.field,
                format!("targetThresholds config is not valid: {}", error.message),
            )
        })?;
        if self.thresholds.len() != self.target_thresholds.len() {
            return Err(ArgsError::new(
                "targetThresholds",
                "thresholds and targetThresholds configured different resources",
            ));
        }
        for (name, value) in &self.thresholds {
            match self.target_thresholds.get(name) {
                None => {
                    return Err(ArgsError::new(
                        "targetThresholds",
                        "thresholds and targetThresholds configured different resources",
                    ));
                }
                Some(target) if value > target && !self.use_deviation_thresholds => {
                    return Err(ArgsError::new(
                        format!("thresholds.{name}"),
                        format!("thresholds' {name} percentage is greater than targetThresholds'"),
                    ));
                }
                Some(_) => {}
            }
        }
        if let Some(metrics) = &self.metrics_utilization {
            let field = "metricsUtilization";
            if metrics.source == "KubernetesMetrics" && metrics.metrics_server {
                return Err(ArgsError::new(
                    field,
                    "it is not allowed to set both \"KubernetesMetrics\" source and metricsServer",
                ));
            }
            if metrics.source == "KubernetesMetrics" && metrics.prometheus.is_some() {
                return Err(ArgsError::new(
                    field,
                    "prometheus configuration is not allowed to set when source is set to \"KubernetesMetrics\"",
                ));
            }
            if metrics.source == "Prometheus"
                && metrics
                    .prometheus
                    .as_ref()
                    .is_none_or(|p| p.query.is_empty())
            {
                return Err(ArgsError::new(
                    field,
                    "prometheus query is required when metrics source is set to \"Prometheus\"",
                ));
            }
        }
        Ok(())
    }
}

/// The LowNodeUtilization balance plugin.
#[derive(Debug)]
pub struct LowNodeUtilization {
    args: LowNodeUtilizationArgs,
    resource_names: Vec<String>,
}

impl LowNodeUtilization {
    /// Builds the plugin from validated args.
    pub fn new(args: LowNodeUtilizationArgs) -> Result<Self, ArgsError> {
        args.validate()?;
        if args.metrics_utilization.is_some() {
            tracing::warn!(
                plugin = PLUGIN_NAME,
                "metricsUtilization is not supported by ksim; node usage is computed from pod requests"
            );
        }
        let resource_names = tracked_resource_names(&args.thresholds);
        Ok(LowNodeUtilization {
            args,
            resource_names,
        })
    }

    /// The registry's factory.
    pub fn factory(args: Option<&serde_json::Value>) -> Result<Box<dyn BalancePlugin>, ArgsError> {
        Ok(Box::new(Self::new(decode_args(args)?)?))
    }
}

impl BalancePlugin for LowNodeUtilization {
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
        let percentages: Vec<Vec<Option<f64>>> =
            usages.iter().map(|usage| usage.percentages()).collect();
        let (low, high) = if self.args.use_deviation_thresholds {
            deviation_thresholds(
                names,
                &percentages,
                &self.args.thresholds,
                &self.args.target_thresholds,
            )
        } else {
            (
                align_thresholds(names, &self.args.thresholds),
                align_thresholds(names, &self.args.target_thresholds),
            )
        };

        let mut low_nodes = Vec::new();
        let mut high_nodes = Vec::new();
        for (usage, percent) in usages.iter().zip(&percentages) {
            let underutilized = if is_node_unschedulable(usage.node) {
                tracing::debug!(
                    node = usage.name,
                    "Node is unschedulable, thus not considered as underutilized"
                );
                false
            } else {
                is_below_threshold(percent, &low)
            };
            let category = if underutilized {
                Some(("underutilized", &mut low_nodes))
            } else if is_above_threshold(percent, &high) {
                Some(("overutilized", &mut high_nodes))
            } else {
                None
            };
            match category {
                Some((category, group)) => {
                    log_classified(category, usage, names);
                    group.push(NodeInfo {
                        usage,
                        current: usage.usage.clone(),
                        available: cap_capacity_to_threshold(usage, &high),
                    });
                }
                None => tracing::info!(
                    node = usage.name,
                    usage = ?usage_fields(names, &usage.usage),
                    usage_percentage = ?rounded_percentages(names, percent),
                    "Node is appropriately utilized"
                ),
            }
        }

        tracing::debug!(criteria = ?self.args.thresholds, "Criteria for a node under utilization");
        tracing::debug!(
            total_number = low_nodes.len(),
            "Number of underutilized nodes"
        );
        tracing::debug!(criteria = ?self.args.target_thresholds, "Criteria for a node above target utilization");
        tracing::debug!(
            total_number = high_nodes.len(),
            "Number of overutilized nodes"
        );

        if !enough_underutilized_nodes(low_nodes.len(), nodes.len(), self.args.number_of_nodes) {
            return PluginStatus::Success;
        }
        if high_nodes.is_empty() {
            tracing::debug!("All nodes are under target utilization, nothing to do here");
            return PluginStatus::Success;
        }

        // Go on while the node is above its target for some resource and
        // the underutilized nodes have room left for every resource.
        let continue_eviction = |node: &NodeInfo<'_, '_>, total_available: &[i64]| {
            let above_target = node
                .current
                .iter()
                .zip(&node.available)
                .any(|(used, available)| used > available);
            above_target && total_available.iter().all(|available| *available > 0)
        };
        sort_nodes_by_usage(&mut high_nodes, false);
        let excluded: &[String] = self
            .args
            .evictable_namespaces
            .as_ref()
            .map(|ns| ns.exclude.as_slice())
            .unwrap_or_default();
        let pod_filter = |evictor: &dyn PodEvictor, pod: &Pod| evictor.filter(pod);
        let pass = EvictionPass {
            snapshot,
            strategy: PLUGIN_NAME,
            resource_names: names,
            pod_filter: &pod_filter,
            excluded_namespaces: excluded,
            continue_eviction: &continue_eviction,
            max_per_node: self.args.eviction_limits.as_ref().and_then(|l| l.node),
        };
        evict_pods_from_source_nodes(&mut high_nodes, &low_nodes, evictor, &pass);
        PluginStatus::Success
    }
}

#[cfg(test)]
mod tests;
