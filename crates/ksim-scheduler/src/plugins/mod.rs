//! kube-scheduler's default plugins, one module each, and the registry
//! that builds them by name.

use std::sync::Arc;

use crate::framework::Plugin;

pub mod balanced_allocation;
pub mod default_preemption;
pub mod image_locality;
pub mod inter_pod_affinity;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_resources_fit;
pub mod node_unschedulable;
pub mod pod_topology_spread;
pub mod priority_sort;
pub mod scheduling_gates;
pub mod taint_toleration;

/// Plugin arguments (KubeSchedulerConfiguration `pluginConfig`).
#[derive(Debug, Clone, Default)]
pub struct PluginArgs {
    pub pod_topology_spread: pod_topology_spread::PodTopologySpreadArgs,
    pub node_resources_fit: node_resources_fit::NodeResourcesFitArgs,
    pub balanced_allocation: balanced_allocation::NodeResourcesBalancedAllocationArgs,
    pub inter_pod_affinity: inter_pod_affinity::InterPodAffinityArgs,
    pub default_preemption: default_preemption::DefaultPreemptionArgs,
}

/// Builds a plugin from the arguments.
pub type PluginFactory = fn(&PluginArgs) -> Arc<dyn Plugin>;

/// Every plugin ksim knows, by name: one line each.
#[rustfmt::skip]
pub fn registry() -> Vec<(&'static str, PluginFactory)> {
    vec![
        (priority_sort::NAME, |_| Arc::new(priority_sort::PrioritySort)),
        (scheduling_gates::NAME, |_| Arc::new(scheduling_gates::SchedulingGates)),
        (node_unschedulable::NAME, |_| Arc::new(node_unschedulable::NodeUnschedulable)),
        (node_name::NAME, |_| Arc::new(node_name::NodeName)),
        (taint_toleration::NAME, |_| Arc::new(taint_toleration::TaintToleration)),
        (node_affinity::NAME, |_| Arc::new(node_affinity::NodeAffinity)),
        (node_ports::NAME, |_| Arc::new(node_ports::NodePorts)),
        (node_resources_fit::NAME, |a| Arc::new(node_resources_fit::Fit::new(&a.node_resources_fit))),
        (balanced_allocation::NAME, |a| Arc::new(balanced_allocation::BalancedAllocation::new(&a.balanced_allocation))),
        (image_locality::NAME, |_| Arc::new(image_locality::ImageLocality)),
        (pod_topology_spread::NAME, |a| Arc::new(pod_topology_spread::PodTopologySpread::new(&a.pod_topology_spread))),
        (inter_pod_affinity::NAME, |a| Arc::new(inter_pod_affinity::InterPodAffinity::new(&a.inter_pod_affinity))),
        (default_preemption::NAME, |a| Arc::new(default_preemption::DefaultPreemption::new(&a.default_preemption))),
    ]
}
