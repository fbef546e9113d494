//! PodLifeTime: evicts pods older than maxPodLifeTimeSeconds (and/or in
//! given states, conditions or exit codes), oldest first across nodes.
//!
//! Order: upstream's sort by age is unstable, so pods created in the same
//! second go in a random order; here they keep node, then listing, order.

use k8s_openapi::api::core::v1::{ContainerStatus, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;

use crate::framework::{
    ArgsError, ClusterSnapshot, DeschedulePlugin, EvictionRequest, PluginStatus, PodEvictor,
    decode_args,
};
use crate::podutil::{self, AfterEviction, Namespaces, PodSelection, after_eviction};

/// The plugin's name.
pub const PLUGIN_NAME: &str = "PodLifeTime";

const ALLOWED_STATES: [&str; 24] = [
    "Completed",
    "ContainerCannotRun",
    "ContainerCreating",
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
    "DeadlineExceeded",
    "ErrImagePull",
    "Error",
    "Evicted",
    "Failed",
    "ImagePullBackOff",
    "InvalidImageName",
    "NodeAffinity",
    "NodeLost",
    "OOMKilled",
    "Pending",
    "PodInitializing",
    "Running",
    "Shutdown",
    "StartError",
    "Succeeded",
    "UnexpectedAdmissionError",
    "Unknown",
];

/// `ownerKinds`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct OwnerKinds {
    /// Only pods owned by these kinds.
    pub include: Vec<String>,
    /// No pods owned by these kinds.
    pub exclude: Vec<String>,
}

/// One entry of `conditions`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PodConditionFilter {
    /// The condition's type.
    #[serde(rename = "type")]
    pub type_: String,
    /// Its status.
    pub status: String,
    /// Its reason.
    pub reason: String,
    /// At least this long since its last transition.
    pub min_time_since_last_transition_seconds: Option<u64>,
}

/// The plugin's args.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PodLifeTimeArgs {
    /// Namespaces included or excluded.
    pub namespaces: Option<Namespaces>,
    /// Only pods with these labels.
    pub label_selector: Option<LabelSelector>,
    /// Owner kinds included or excluded.
    pub owner_kinds: Option<OwnerKinds>,
    /// Pods older than this are evicted.
    pub max_pod_life_time_seconds: Option<u64>,
    /// Only pods in these phases, reasons or container states.
    pub states: Vec<String>,
    /// Only pods with one of these conditions.
    pub conditions: Vec<PodConditionFilter>,
    /// Only pods with a container that exited with one of these codes.
    pub exit_codes: Vec<i32>,
    /// Look at init containers too.
    pub including_init_containers: bool,
    /// Look at ephemeral containers too.
    pub including_ephemeral_containers: bool,
}

/// The plugin.
#[derive(Debug)]
pub struct PodLifeTime {
    selection: PodSelection,
    args: PodLifeTimeArgs,
}

/// Builds the plugin from its args.
pub fn factory(args: Option<&serde_json::Value>) -> Result<Box<dyn DeschedulePlugin>, ArgsError> {
    let args: PodLifeTimeArgs = decode_args(args)?;
    let selection = PodSelection::new(args.namespaces.as_ref(), args.label_selector.as_ref())?;
    if let Some(kinds) = &args.owner_kinds
        && !kinds.include.is_empty()
        && !kinds.exclude.is_empty()
    {
        return Err(ArgsError::new(
            "ownerKinds",
            "only one of Include/Exclude ownerKinds can be set",
        ));
    }
    if let Some(index) = args
        .states
        .iter()
        .position(|state| !ALLOWED_STATES.contains(&state.as_str()))
    {
        return Err(ArgsError::new(
            format!("states[{index}]"),
            format!("states must be one of [{}]", ALLOWED_STATES.join(" ")),
        ));
    }
    for (index, condition) in args.conditions.iter().enumerate() {
        if condition.type_.is_empty()
            && condition.status.is_empty()
            && condition.reason.is_empty()
            && condition.min_time_since_last_transition_seconds.is_none()
        {
            return Err(ArgsError::new(
                format!("conditions[{index}]"),
                format!(
                    "conditions[{index}]: at least one of type, status, reason, or minTimeSinceLastTransitionSeconds must be set"
                ),
            ));
        }
    }
    if args.max_pod_life_time_seconds.is_none()
        && args.states.is_empty()
        && args.conditions.is_empty()
        && args.exit_codes.is_empty()
    {
        return Err(ArgsError::new(
            "",
            "at least one filtering criterion must be specified (maxPodLifeTimeSeconds, states, conditions, or exitCodes)",
        ));
    }
    Ok(Box::new(PodLifeTime { selection, args }))
}

fn ephemeral_statuses(pod: &Pod) -> &[ContainerStatus] {
    pod.status
        .as_ref()
        .and_then(|status| status.ephemeral_container_statuses.as_deref())
        .unwrap_or_default()
}

fn exited_with(statuses: &[ContainerStatus], codes: &[i32]) -> bool {
    statuses.iter().any(|status| {
        status
            .state
            .as_ref()
            .and_then(|state| state.terminated.as_ref())
            .is_some_and(|terminated| codes.contains(&terminated.exit_code))
    })
}

impl PodLifeTime {
    fn selected(&self, pod: &Pod, now: k8s_openapi::jiff::Timestamp) -> bool {
        let args = &self.args;
        if let Some(max) = args.max_pod_life_time_seconds
            && podutil::age_seconds(pod, now).is_none_or(|age| age <= max)
        {
            return false;
        }
        if !args.states.is_empty() {
            let states = &args.states;
            let reason = pod.status.as_ref().and_then(|s| s.reason.as_deref());
            let in_state = |statuses: &[ContainerStatus]| {
                podutil::has_waiting_reason(statuses, states)
                    || podutil::has_terminated_reason(statuses, states)
            };
            let matches = states.iter().any(|s| s == podutil::phase(pod))
                || reason.is_some_and(|r| states.iter().any(|s| s == r))
                || in_state(podutil::container_statuses(pod))
                || (args.including_init_containers
                    && in_state(podutil::init_container_statuses(pod)))
                || (args.including_ephemeral_containers && in_state(ephemeral_statuses(pod)));
            if !matches {
                return false;
            }
        }
        if let Some(kinds) = &args.owner_kinds {
            let owners = podutil::owner_refs(pod);
            if !kinds.include.is_empty() && !owners.iter().any(|o| kinds.include.contains(&o.kind))
            {
                return false;
            }
            if owners.iter().any(|o| kinds.exclude.contains(&o.kind)) {
                return false;
            }
        }
        if !args.conditions.is_empty() && !self.matches_a_condition(pod, now) {
            return false;
        }
        args.exit_codes.is_empty()
            || exited_with(podutil::container_statuses(pod), &args.exit_codes)
            || (args.including_init_containers
                && exited_with(podutil::init_container_statuses(pod), &args.exit_codes))
    }

    fn matches_a_condition(&self, pod: &Pod, now: k8s_openapi::jiff::Timestamp) -> bool {
        let conditions = pod
            .status
            .as_ref()
            .and_then(|status| status.conditions.as_deref())
            .unwrap_or_default();
        self.args.conditions.iter().any(|filter| {
            conditions.iter().any(|condition| {
                if (!filter.type_.is_empty() && condition.type_ != filter.type_)
                    || (!filter.status.is_empty() && condition.status != filter.status)
                    || (!filter.reason.is_empty()
                        && condition.reason.as_deref().unwrap_or_default() != filter.reason)
                {
                    return false;
                }
                match filter.min_time_since_last_transition_seconds {
                    None => true,
                    Some(min) => condition.last_transition_time.as_ref().is_some_and(|t| {
                        u64::try_from(now.as_second() - t.0.as_second())
                            .is_ok_and(|idle| idle >= min)
                    }),
                }
            })
        })
    }
}

impl DeschedulePlugin for PodLifeTime {
    fn name(&self) -> &'static str {
        PLUGIN_NAME
    }

    fn deschedule(
        &self,
        snapshot: &ClusterSnapshot,
        nodes: &[&Node],
        evictor: &mut dyn PodEvictor,
    ) -> PluginStatus {
        let now = snapshot.now();
        let mut pods: Vec<&Pod> = Vec::new();
        for node in nodes {
            let node_name = node.metadata.name.as_deref().unwrap_or_default();
            tracing::debug!(node = node_name, plugin = PLUGIN_NAME, "Processing node");
            pods.extend(snapshot.pods_on_node(node_name).filter(|pod| {
                self.selection.matches(pod)
                    && self.selected(pod, now)
                    && evictor.filter(pod)
                    && evictor.pre_eviction_filter(pod)
            }));
        }
        podutil::sort_by_age(&mut pods);
        for pod in pods {
            let request = EvictionRequest {
                strategy: PLUGIN_NAME,
                reason: "",
            };
            if after_eviction(evictor.evict(pod, request), PLUGIN_NAME) == AfterEviction::Stop {
                break;
            }
        }
        PluginStatus::Success
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podutil::testing::{FakeEvictor, node, pod};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    fn created(name: &str, node: &str, second: i64) -> Pod {
        let mut p = pod(name, node);
        p.metadata.creation_timestamp =
            Some(Time(Timestamp::from_second(second).expect("valid second")));
        p
    }

    fn run(args: serde_json::Value, pods: Vec<Pod>, evictor: &mut FakeEvictor) {
        let plugin = factory(Some(&args)).expect("valid");
        let now = Timestamp::from_second(1000).expect("valid");
        let snapshot =
            ClusterSnapshot::new(vec![node("a", &[]), node("b", &[])], pods, vec![], now);
        let nodes: Vec<&Node> = snapshot.nodes().iter().collect();
        plugin.deschedule(&snapshot, &nodes, evictor);
    }

    #[test]
    fn pods_older_than_the_limit_are_evicted_oldest_first_across_nodes() {
        let pods = vec![
            created("young", "a", 950),
            created("old", "a", 500),
            created("oldest", "b", 100),
            created("exactly", "b", 900),
        ];
        let mut evictor = FakeEvictor::default();
        run(json!({"maxPodLifeTimeSeconds": 100}), pods, &mut evictor);
        assert_eq!(evictor.evicted, ["oldest", "old"]);
    }

    #[test]
    fn a_node_limit_skips_to_the_next_pod_and_the_total_limit_stops() {
        let pods = vec![
            created("a1", "a", 1),
            created("a2", "a", 2),
            created("b1", "b", 3),
            created("b2", "b", 4),
        ];
        let mut evictor = FakeEvictor {
            node_limit: Some(1),
            ..Default::default()
        };
        run(
            json!({"maxPodLifeTimeSeconds": 10}),
            pods.clone(),
            &mut evictor,
        );
        assert_eq!(evictor.evicted, ["a1", "b1"]);
        let mut evictor = FakeEvictor {
            total_limit: Some(1),
            ..Default::default()
        };
        run(json!({"maxPodLifeTimeSeconds": 10}), pods, &mut evictor);
        assert_eq!(evictor.evicted, ["a1"]);
    }

    #[test]
    fn states_and_owner_kinds_narrow_the_pods() {
        let mut pending = created("pending", "a", 1);
        pending.status.as_mut().expect("status").phase = Some("Pending".into());
        let pods = vec![pending, created("running", "a", 1)];
        let mut evictor = FakeEvictor::default();
        run(json!({"states": ["Pending"]}), pods.clone(), &mut evictor);
        assert_eq!(evictor.evicted, ["pending"]);
        let mut evictor = FakeEvictor::default();
        run(
            json!({"maxPodLifeTimeSeconds": 1, "ownerKinds": {"exclude": ["ReplicaSet"]}}),
            pods,
            &mut evictor,
        );
        assert!(evictor.evicted.is_empty());
    }

    #[test]
    fn a_criterion_is_required_and_states_are_checked() {
        assert!(
            factory(Some(&json!({})))
                .err()
                .expect("no criterion")
                .message
                .starts_with("at least one filtering criterion")
        );
        assert_eq!(
            factory(Some(&json!({"states": ["Sleeping"]})))
                .err()
                .expect("bad state")
                .field,
            "states[0]"
        );
    }
}
