//! Profiles: which plugins a scheduler name runs, in which order, with which
//! score weights (upstream's default profile and weights), plus the
//! per-extension-point runners of the binding cycle.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::cycle_state::CycleState;
use super::interface::{Plugin, QueuedPodInfo};
use super::node_info::NodeInfo;
use super::pod_info::PodInfo;
use super::status::{Code, Status};
use crate::plugins::{self, PluginArgs};

/// The scheduler name of the default profile.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// The default plugins in upstream order (multiPoint), with their score
/// weights (0 for plugins that do not score).
pub const DEFAULT_PLUGINS: &[(&str, i64)] = &[
    (plugins::priority_sort::NAME, 0),
    (plugins::node_unschedulable::NAME, 0),
    (plugins::node_name::NAME, 0),
    (plugins::taint_toleration::NAME, 3),
    (plugins::node_affinity::NAME, 2),
    (plugins::node_ports::NAME, 0),
    (plugins::node_resources_fit::NAME, 1),
    (plugins::pod_topology_spread::NAME, 2),
    (plugins::inter_pod_affinity::NAME, 2),
    (plugins::default_preemption::NAME, 0),
    (plugins::balanced_allocation::NAME, 1),
    (plugins::image_locality::NAME, 1),
    (plugins::scheduling_gates::NAME, 0),
];

/// The extension points, as named in KubeSchedulerConfiguration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ExtensionPoint {
    QueueSort,
    PreEnqueue,
    PreFilter,
    Filter,
    PostFilter,
    PreScore,
    Score,
    Reserve,
    Permit,
    PreBind,
    Bind,
}

impl ExtensionPoint {
    /// Every extension point.
    pub const ALL: [ExtensionPoint; 11] = [
        ExtensionPoint::QueueSort,
        ExtensionPoint::PreEnqueue,
        ExtensionPoint::PreFilter,
        ExtensionPoint::Filter,
        ExtensionPoint::PostFilter,
        ExtensionPoint::PreScore,
        ExtensionPoint::Score,
        ExtensionPoint::Reserve,
        ExtensionPoint::Permit,
        ExtensionPoint::PreBind,
        ExtensionPoint::Bind,
    ];

    /// The field name in `plugins` of a profile (`preFilter`).
    pub fn config_name(self) -> &'static str {
        match self {
            ExtensionPoint::QueueSort => "queueSort",
            ExtensionPoint::PreEnqueue => "preEnqueue",
            ExtensionPoint::PreFilter => "preFilter",
            ExtensionPoint::Filter => "filter",
            ExtensionPoint::PostFilter => "postFilter",
            ExtensionPoint::PreScore => "preScore",
            ExtensionPoint::Score => "score",
            ExtensionPoint::Reserve => "reserve",
            ExtensionPoint::Permit => "permit",
            ExtensionPoint::PreBind => "preBind",
            ExtensionPoint::Bind => "bind",
        }
    }

    /// Whether the plugin implements this extension point.
    pub fn implemented_by(self, plugin: &dyn Plugin) -> bool {
        match self {
            ExtensionPoint::QueueSort => plugin.as_queue_sort().is_some(),
            ExtensionPoint::PreEnqueue => plugin.as_pre_enqueue().is_some(),
            ExtensionPoint::PreFilter => plugin.as_pre_filter().is_some(),
            ExtensionPoint::Filter => plugin.as_filter().is_some(),
            ExtensionPoint::PostFilter => plugin.as_post_filter().is_some(),
            ExtensionPoint::PreScore => plugin.as_pre_score().is_some(),
            ExtensionPoint::Score => plugin.as_score().is_some(),
            ExtensionPoint::Reserve => plugin.as_reserve().is_some(),
            ExtensionPoint::Permit => plugin.as_permit().is_some(),
            ExtensionPoint::PreBind => plugin.as_pre_bind().is_some(),
            ExtensionPoint::Bind => plugin.as_bind().is_some(),
        }
    }
}

/// One plugin of a profile: its score weight and the extension points it
/// runs at (`None`: every point it implements).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginEntry {
    pub name: String,
    pub weight: i64,
    pub points: Option<BTreeSet<ExtensionPoint>>,
}

/// One scheduling profile.
pub struct Profile {
    pub scheduler_name: String,
    /// Enabled plugins, in order.
    plugins: Vec<Arc<dyn Plugin>>,
    /// Per extension point (indexed by `ExtensionPoint as usize`), the
    /// plugins that run there, in order.
    at: Vec<Vec<Arc<dyn Plugin>>>,
    /// Score weights by plugin name (plugins without one weigh 1).
    weights: HashMap<&'static str, i64>,
    /// `percentageOfNodesToScore` (None or 0: adaptive, as upstream).
    pub percentage_of_nodes_to_score: Option<i32>,
}

impl std::fmt::Debug for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profile")
            .field("scheduler_name", &self.scheduler_name)
            .field(
                "plugins",
                &self.plugins.iter().map(|p| p.name()).collect::<Vec<_>>(),
            )
            .field("weights", &self.weights)
            .finish()
    }
}

impl Profile {
    /// kube-scheduler's default profile.
    pub fn default_profile() -> Self {
        Self::new(
            DEFAULT_SCHEDULER_NAME,
            DEFAULT_PLUGINS,
            &PluginArgs::default(),
        )
        .expect("the default plugins are all registered")
    }

    /// A profile running the named plugins (with weights) at every point
    /// they implement, built from the registry with `args`; an unknown
    /// plugin name is an error.
    pub fn new(
        scheduler_name: &str,
        enabled: &[(&str, i64)],
        args: &PluginArgs,
    ) -> Result<Self, String> {
        let entries: Vec<PluginEntry> = enabled
            .iter()
            .map(|(name, weight)| PluginEntry {
                name: name.to_string(),
                weight: *weight,
                points: None,
            })
            .collect();
        Self::from_entries(scheduler_name, &entries, args)
    }

    /// A profile from plugin entries (see [`PluginEntry`]).
    pub fn from_entries(
        scheduler_name: &str,
        entries: &[PluginEntry],
        args: &PluginArgs,
    ) -> Result<Self, String> {
        let registry = plugins::registry();
        let mut profile = Profile {
            scheduler_name: scheduler_name.to_string(),
            plugins: Vec::new(),
            at: vec![Vec::new(); ExtensionPoint::ALL.len()],
            weights: HashMap::new(),
            percentage_of_nodes_to_score: None,
        };
        for entry in entries {
            let (registered, factory) = registry
                .iter()
                .find(|(registered, _)| *registered == entry.name)
                .ok_or_else(|| format!("{:?} does not exist", entry.name))?;
            let plugin = factory(args);
            profile.weights.insert(registered, entry.weight);
            for point in ExtensionPoint::ALL {
                let wanted = entry.points.as_ref().is_none_or(|p| p.contains(&point));
                if wanted && point.implemented_by(plugin.as_ref()) {
                    profile.at[point as usize].push(plugin.clone());
                }
            }
            profile.plugins.push(plugin);
        }
        Ok(profile)
    }

    /// The enabled plugins, in order.
    pub fn plugins(&self) -> &[Arc<dyn Plugin>] {
        &self.plugins
    }

    /// The plugins that run at an extension point, in order.
    pub fn plugins_at(&self, point: ExtensionPoint) -> &[Arc<dyn Plugin>] {
        &self.at[point as usize]
    }

    /// The weight of a score plugin.
    pub fn weight(&self, plugin: &str) -> i64 {
        match self.weights.get(plugin) {
            Some(0) | None => 1,
            Some(weight) => *weight,
        }
    }

    /// Whether any plugin filters.
    pub fn has_filter_plugins(&self) -> bool {
        !self.plugins_at(ExtensionPoint::Filter).is_empty()
    }

    /// QueueSort: whether `a` goes before `b` (FIFO when no plugin sorts).
    pub fn queue_less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        match self
            .plugins_at(ExtensionPoint::QueueSort)
            .iter()
            .find_map(|p| p.as_queue_sort())
        {
            Some(sort) => sort.less(a, b),
            None => a.timestamp < b.timestamp,
        }
    }

    /// PreEnqueue: the first rejection, with its plugin.
    pub fn run_pre_enqueue_plugins(&self, pod: &Pod) -> Status {
        for plugin in self.plugins_at(ExtensionPoint::PreEnqueue) {
            if let Some(pre_enqueue) = plugin.as_pre_enqueue() {
                let status = pre_enqueue.pre_enqueue(pod);
                if !status.is_success() {
                    return status.with_plugin(plugin.name());
                }
            }
        }
        Status::success()
    }

    /// PreFilter extensions: `added` now runs on `node`.
    pub fn run_pre_filter_extension_add_pod(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        added: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        for plugin in self.plugins_at(ExtensionPoint::PreFilter) {
            if let Some(pre_filter) = plugin.as_pre_filter()
                && !state.skips_filter(plugin.name())
            {
                let status = pre_filter.add_pod(state, pod, added, node);
                if !status.is_success() {
                    return status.with_plugin(plugin.name());
                }
            }
        }
        Status::success()
    }

    /// PreFilter extensions: `removed` no longer runs on `node`.
    pub fn run_pre_filter_extension_remove_pod(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        removed: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        for plugin in self.plugins_at(ExtensionPoint::PreFilter) {
            if let Some(pre_filter) = plugin.as_pre_filter()
                && !state.skips_filter(plugin.name())
            {
                let status = pre_filter.remove_pod(state, pod, removed, node);
                if !status.is_success() {
                    return status.with_plugin(plugin.name());
                }
            }
        }
        Status::success()
    }

    /// Reserve on every plugin; on failure, Unreserve all in reverse order.
    pub fn run_reserve_plugins(&self, state: &mut CycleState, pod: &Pod, node: &str) -> Status {
        for plugin in self.plugins_at(ExtensionPoint::Reserve) {
            if let Some(reserve) = plugin.as_reserve() {
                let status = reserve.reserve(state, pod, node);
                if !status.is_success() {
                    self.run_unreserve_plugins(state, pod, node);
                    return status.with_plugin(plugin.name());
                }
            }
        }
        Status::success()
    }

    /// Unreserve, in reverse order.
    pub fn run_unreserve_plugins(&self, state: &mut CycleState, pod: &Pod, node: &str) {
        for plugin in self.plugins_at(ExtensionPoint::Reserve).iter().rev() {
            if let Some(reserve) = plugin.as_reserve() {
                reserve.unreserve(state, pod, node);
            }
        }
    }

    /// Permit: a rejection wins; otherwise Wait with the shortest timeout.
    pub fn run_permit_plugins(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        node: &str,
    ) -> (Status, Option<Duration>) {
        let mut wait: Option<(Status, Duration)> = None;
        for plugin in self.plugins_at(ExtensionPoint::Permit) {
            if let Some(permit) = plugin.as_permit() {
                let (status, timeout) = permit.permit(state, pod, node);
                match status.code() {
                    Code::Success => {}
                    Code::Wait => {
                        let shorter = wait.as_ref().is_none_or(|(_, t)| timeout < *t);
                        if shorter {
                            wait = Some((status.with_plugin(plugin.name()), timeout));
                        }
                    }
                    _ => return (status.with_plugin(plugin.name()), None),
                }
            }
        }
        match wait {
            Some((status, timeout)) => (status, Some(timeout)),
            None => (Status::success(), None),
        }
    }

    /// PreBind: the first failure.
    pub fn run_pre_bind_plugins(&self, state: &mut CycleState, pod: &Pod, node: &str) -> Status {
        for plugin in self.plugins_at(ExtensionPoint::PreBind) {
            if let Some(pre_bind) = plugin.as_pre_bind() {
                let status = pre_bind.pre_bind(state, pod, node);
                if !status.is_success() {
                    return status.with_plugin(plugin.name());
                }
            }
        }
        Status::success()
    }

    /// Bind: the first binder that does not Skip decides; Skip when all skip.
    pub fn run_bind_plugins(&self, state: &mut CycleState, pod: &Pod, node: &str) -> Status {
        for plugin in self.plugins_at(ExtensionPoint::Bind) {
            if let Some(bind) = plugin.as_bind() {
                let status = bind.bind(state, pod, node);
                if !status.is_skip() {
                    return status.with_plugin(plugin.name());
                }
            }
        }
        Status::skip()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_profile_has_upstream_plugins_and_weights() {
        let profile = Profile::default_profile();
        let names: Vec<_> = profile.plugins().iter().map(|p| p.name()).collect();
        assert_eq!(
            names,
            DEFAULT_PLUGINS.iter().map(|(n, _)| *n).collect::<Vec<_>>()
        );
        assert_eq!(profile.weight("TaintToleration"), 3);
        assert_eq!(profile.weight("PodTopologySpread"), 2);
        assert_eq!(profile.weight("NodeResourcesFit"), 1);
        assert!(profile.has_filter_plugins());
        assert!(Profile::new("x", &[("NoSuchPlugin", 1)], &PluginArgs::default()).is_err());
    }
}
