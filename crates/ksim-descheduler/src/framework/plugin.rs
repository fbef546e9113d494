//! The extension points: deschedule and balance plugins, and the evictor
//! they ask to evict pods.

use k8s_openapi::api::core::v1::{Node, Pod};

use super::ClusterSnapshot;

/// What a plugin's run ended with. Refused evictions are not failures; a
/// failure is a plugin that could not run at all (e.g. a selector in its
/// args that does not parse against this cluster).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginStatus {
    /// The plugin ran to its end (or stopped at an eviction limit).
    Success,
    /// The plugin could not run; logged with the plugin's name.
    Error(String),
}

/// A plugin of the `deschedule` extension point: evicts pods that violate a
/// rule on their own node (node affinity, taints, lifetime, restarts...).
pub trait DeschedulePlugin: Send + Sync {
    /// The plugin's name in the policy, e.g. `RemovePodsViolatingNodeTaints`.
    fn name(&self) -> &'static str;
    /// One pass over `nodes` (the nodes selected by the policy's
    /// nodeSelector, ready ones only).
    fn deschedule(
        &self,
        snapshot: &ClusterSnapshot,
        nodes: &[&Node],
        evictor: &mut dyn PodEvictor,
    ) -> PluginStatus;
}

/// A plugin of the `balance` extension point: evicts pods to even out the
/// cluster (duplicates, utilization, topology spread).
pub trait BalancePlugin: Send + Sync {
    /// The plugin's name in the policy, e.g. `LowNodeUtilization`.
    fn name(&self) -> &'static str;
    /// One pass over `nodes` (the nodes selected by the policy's
    /// nodeSelector, ready ones only).
    fn balance(
        &self,
        snapshot: &ClusterSnapshot,
        nodes: &[&Node],
        evictor: &mut dyn PodEvictor,
    ) -> PluginStatus;
}

/// Why the evictor did not evict a pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvictionError {
    /// maxNoOfPodsToEvictPerNode reached for the pod's node.
    #[error("maximum number of evicted pods per node reached")]
    NodeLimitReached,
    /// maxNoOfPodsToEvictPerNamespace reached for the pod's namespace.
    #[error("maximum number of evicted pods per namespace reached")]
    NamespaceLimitReached,
    /// maxNoOfPodsToEvictTotal reached.
    #[error("maximum number of evicted pods per a descheduling cycle reached")]
    TotalLimitReached,
    /// The API refused the eviction (a PodDisruptionBudget, a missing pod...):
    /// the API's message.
    #[error("{0}")]
    Refused(String),
}

/// Who asks for an eviction, for the log line and the event. The profile
/// is not the plugin's to say: the evictor a profile's plugins talk to
/// knows it and adds it to every log line, event and record.
#[derive(Debug, Clone, Copy)]
pub struct EvictionRequest<'a> {
    /// The plugin's name (upstream logs it as `strategy`).
    pub strategy: &'a str,
    /// Why, in a few words (upstream's `reason`, often empty).
    pub reason: &'a str,
}

/// The evictor a plugin talks to: upstream's `frameworktypes.Evictor` plus
/// `EvictPod` and `NodeLimitExceeded`.
pub trait PodEvictor {
    /// The filter extension point (DefaultEvictor's protections: DaemonSet,
    /// mirror, system-critical, local-storage, bare pods...): whether this
    /// pod may be considered for eviction at all.
    fn filter(&self, pod: &Pod) -> bool;
    /// The preEvictionFilter extension point (DefaultEvictor's nodeFit):
    /// checked just before evicting.
    fn pre_eviction_filter(&self, pod: &Pod) -> bool;
    /// Evicts `pod` through the eviction API (or only records it in dry-run
    /// mode), counting it against the limits. Logs and emits the event.
    fn evict(&mut self, pod: &Pod, request: EvictionRequest<'_>) -> Result<(), EvictionError>;
    /// Whether maxNoOfPodsToEvictPerNode is reached for `node_name`.
    fn node_limit_exceeded(&self, node_name: &str) -> bool;
    /// Whether maxNoOfPodsToEvictTotal is reached: plugins stop early.
    fn total_limit_exceeded(&self) -> bool;
}
