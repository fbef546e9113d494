//! The scheduling framework: extension-point traits, `Status`,
//! `CycleState`, the `NodeInfo` snapshot, profiles and `schedule_one`.

mod cycle_state;
mod domain_counts;
mod interface;
mod node_info;
mod pod_info;
mod profile;
mod schedule_one;
mod status;
mod topology_layout;

pub use cycle_state::CycleState;
pub use domain_counts::{DomainCountIndex, DomainCounts, KeptDomainCounts};
pub use interface::{
    BindPlugin, FilterPlugin, MAX_NODE_SCORE, MIN_NODE_SCORE, PermitPlugin, Plugin,
    PostFilterPlugin, PostFilterResult, PreBindPlugin, PreEnqueuePlugin, PreFilterPlugin,
    PreFilterResult, PreScorePlugin, QueueSortPlugin, QueuedPodInfo, ReservePlugin, ScorePlugin,
    default_normalize_score,
};
pub use node_info::{
    DisruptionBudget, HostPortInfo, NamespaceLabels, NodeInfo, Snapshot, WorkloadKind,
    WorkloadSelector, zone_key,
};
pub use pod_info::{
    AffinityTerm, HostPort, PodInfo, Resource, WeightedAffinityTerm, host_ports, pod_labels,
    pod_namespace,
};
pub use profile::{DEFAULT_PLUGINS, DEFAULT_SCHEDULER_NAME, ExtensionPoint, PluginEntry, Profile};
pub use schedule_one::{
    Diagnosis, FitError, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND, MIN_FEASIBLE_NODES_TO_FIND,
    NodePluginScores, NodeToStatus, ScheduleError, ScheduleResult, ScheduleState,
    num_feasible_nodes_to_find, run_filter_plugins, run_filter_plugins_with_nominated_pods,
    run_pre_filter, schedule_one, scheduled_message, select_host,
};
pub use status::{Code, Status};
pub use topology_layout::TopologyLayout;
