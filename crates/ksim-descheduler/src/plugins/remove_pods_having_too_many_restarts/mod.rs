//! RemovePodsHavingTooManyRestarts: evicts pods whose containers restarted
//! at least podRestartThreshold times, most restarted first on each node.
//!
//! Order: upstream's sort by restarts is unstable, so pods with as many
//! restarts go in a random order; here they keep listing order.

use k8s_openapi::api::core::v1::{ContainerStatus, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;

use crate::framework::{
    ArgsError, ClusterSnapshot, DeschedulePlugin, EvictionRequest, PluginStatus, PodEvictor,
    decode_args,
};
use crate::podutil::{self, AfterEviction, Namespaces, PodSelection, after_eviction};

/// The plugin's name.
pub const PLUGIN_NAME: &str = "RemovePodsHavingTooManyRestarts";
const ALLOWED_STATES: [&str; 2] = ["CrashLoopBackOff", "Running"];

/// The plugin's args.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RemovePodsHavingTooManyRestartsArgs {
    /// Namespaces included or excluded.
    pub namespaces: Option<Namespaces>,
    /// Only pods with these labels.
    pub label_selector: Option<LabelSelector>,
    /// Restarts at which a pod is evicted.
    pub pod_restart_threshold: i32,
    /// Count init containers' restarts too.
    pub including_init_containers: bool,
    /// Only pods in these phases or container waiting reasons.
    pub states: Vec<String>,
}

/// The plugin.
#[derive(Debug)]
pub struct RemovePodsHavingTooManyRestarts {
    selection: PodSelection,
    args: RemovePodsHavingTooManyRestartsArgs,
}

/// Builds the plugin from its args.
pub fn factory(args: Option<&serde_json::Value>) -> Result<Box<dyn DeschedulePlugin>, ArgsError> {
    let args: RemovePodsHavingTooManyRestartsArgs = decode_args(args)?;
    let selection = PodSelection::new(args.namespaces.as_ref(), args.label_selector.as_ref())?;
    if args.pod_restart_threshold < 1 {
        return Err(ArgsError::new(
            "podRestartThreshold",
            "invalid PodsHavingTooManyRestarts threshold",
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
    Ok(Box::new(RemovePodsHavingTooManyRestarts {
        selection,
        args,
    }))
}

fn restarts(statuses: &[ContainerStatus]) -> i64 {
    statuses.iter().map(|s| i64::from(s.restart_count)).sum()
}

impl RemovePodsHavingTooManyRestarts {
    fn total_restarts(&self, pod: &Pod) -> i64 {
        let mut total = restarts(podutil::container_statuses(pod));
        if self.args.including_init_containers {
            total += restarts(podutil::init_container_statuses(pod));
        }
        total
    }

    fn in_states(&self, pod: &Pod) -> bool {
        let states = &self.args.states;
        states.is_empty()
            || states.iter().any(|s| s == podutil::phase(pod))
            || podutil::has_waiting_reason(podutil::container_statuses(pod), states)
            || (self.args.including_init_containers
                && podutil::has_waiting_reason(podutil::init_container_statuses(pod), states))
    }
}

impl DeschedulePlugin for RemovePodsHavingTooManyRestarts {
    fn name(&self) -> &'static str {
        PLUGIN_NAME
    }

    fn deschedule(
        &self,
        snapshot: &ClusterSnapshot,
        nodes: &[&Node],
        evictor: &mut dyn PodEvictor,
    ) -> PluginStatus {
        let threshold = i64::from(self.args.pod_restart_threshold);
        for node in nodes {
            let node_name = node.metadata.name.as_deref().unwrap_or_default();
            tracing::debug!(node = node_name, plugin = PLUGIN_NAME, "Processing node");
            let mut pods: Vec<(i64, &Pod)> = snapshot
                .pods_on_node(node_name)
                .filter_map(|pod| {
                    let restarts = self.total_restarts(pod);
                    (restarts >= threshold
                        && self.selection.matches(pod)
                        && self.in_states(pod)
                        && evictor.filter(pod)
                        && evictor.pre_eviction_filter(pod))
                    .then_some((restarts, pod))
                })
                .collect();
            pods.sort_by_key(|(restarts, _)| std::cmp::Reverse(*restarts));
            for (_, pod) in pods {
                let request = EvictionRequest {
                    strategy: PLUGIN_NAME,
                    reason: "",
                };
                match after_eviction(evictor.evict(pod, request), PLUGIN_NAME) {
                    AfterEviction::Next => {}
                    AfterEviction::NextNode => break,
                    AfterEviction::Stop => return PluginStatus::Success,
                }
            }
        }
        PluginStatus::Success
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podutil::testing::{FakeEvictor, node, pod};
    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateWaiting};
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    fn restarted(name: &str, count: i32, init: i32, waiting: Option<&str>) -> Pod {
        let mut p = pod(name, "a");
        let status = p.status.as_mut().expect("status");
        status.container_statuses = Some(vec![ContainerStatus {
            name: "c".into(),
            restart_count: count,
            state: waiting.map(|reason| ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some(reason.into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }]);
        status.init_container_statuses = Some(vec![ContainerStatus {
            name: "i".into(),
            restart_count: init,
            ..Default::default()
        }]);
        p
    }

    fn run(args: serde_json::Value, pods: Vec<Pod>) -> Vec<String> {
        let plugin = factory(Some(&args)).expect("valid");
        let snapshot =
            ClusterSnapshot::new(vec![node("a", &[])], pods, vec![], Timestamp::UNIX_EPOCH);
        let nodes: Vec<&Node> = snapshot.nodes().iter().collect();
        let mut evictor = FakeEvictor::default();
        plugin.deschedule(&snapshot, &nodes, &mut evictor);
        evictor.evicted
    }

    #[test]
    fn pods_at_the_threshold_are_evicted_most_restarted_first() {
        let pods = vec![
            restarted("few", 2, 0, None),
            restarted("some", 3, 0, None),
            restarted("many", 10, 0, None),
            restarted("init", 1, 5, None),
        ];
        assert_eq!(
            run(json!({"podRestartThreshold": 3}), pods.clone()),
            ["many", "some"]
        );
        assert_eq!(
            run(
                json!({"podRestartThreshold": 3, "includingInitContainers": true}),
                pods
            ),
            ["many", "init", "some"]
        );
    }

    #[test]
    fn states_select_crash_looping_pods() {
        let pods = vec![restarted("looping", 5, 0, Some("CrashLoopBackOff")), {
            let mut p = restarted("pending", 5, 0, None);
            p.status.as_mut().expect("status").phase = Some("Pending".into());
            p
        }];
        assert_eq!(
            run(
                json!({"podRestartThreshold": 1, "states": ["CrashLoopBackOff"]}),
                pods
            ),
            ["looping"]
        );
    }

    #[test]
    fn bad_args_are_refused() {
        assert_eq!(
            factory(Some(&json!({})))
                .err()
                .expect("no threshold")
                .to_string(),
            "podRestartThreshold: invalid PodsHavingTooManyRestarts threshold"
        );
        assert_eq!(
            factory(Some(
                &json!({"podRestartThreshold": 1, "states": ["Pending"]})
            ))
            .err()
            .expect("bad state")
            .to_string(),
            "states[0]: states must be one of [CrashLoopBackOff Running]"
        );
    }
}
