//! RemoveFailedPods: evicts pods in phase Failed, older than
//! minPodLifetimeSeconds (default 3600), optionally only for given reasons
//! or exit codes and not for excluded owner kinds.

use k8s_openapi::api::core::v1::{ContainerStatus, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;

use crate::framework::{
    ArgsError, ClusterSnapshot, DeschedulePlugin, EvictionRequest, PluginStatus, PodEvictor,
    decode_args,
};
use crate::podutil::{self, AfterEviction, Namespaces, PodSelection, after_eviction};

/// The plugin's name.
pub const PLUGIN_NAME: &str = "RemoveFailedPods";
/// minPodLifetimeSeconds when not given.
pub const DEFAULT_MIN_POD_LIFETIME_SECONDS: u64 = 3600;

/// The plugin's args.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RemoveFailedPodsArgs {
    /// Namespaces included or excluded.
    pub namespaces: Option<Namespaces>,
    /// Only pods with these labels.
    pub label_selector: Option<LabelSelector>,
    /// Pods owned by these kinds are kept.
    pub exclude_owner_kinds: Vec<String>,
    /// Only pods at least this old (default 3600).
    pub min_pod_lifetime_seconds: Option<u64>,
    /// Only pods failed for one of these reasons.
    pub reasons: Vec<String>,
    /// Only pods with a container that exited with one of these codes.
    pub exit_codes: Vec<i32>,
    /// Look at init containers too.
    pub including_init_containers: bool,
}

/// The plugin.
#[derive(Debug)]
pub struct RemoveFailedPods {
    selection: PodSelection,
    args: RemoveFailedPodsArgs,
    min_age: u64,
}

/// Builds the plugin from its args.
pub fn factory(args: Option<&serde_json::Value>) -> Result<Box<dyn DeschedulePlugin>, ArgsError> {
    let args: RemoveFailedPodsArgs = decode_args(args)?;
    let selection = PodSelection::new(args.namespaces.as_ref(), args.label_selector.as_ref())?;
    let min_age = args
        .min_pod_lifetime_seconds
        .unwrap_or(DEFAULT_MIN_POD_LIFETIME_SECONDS);
    Ok(Box::new(RemoveFailedPods {
        selection,
        args,
        min_age,
    }))
}

fn failure_reasons(statuses: &[ContainerStatus], into: &mut Vec<String>) {
    for status in statuses {
        let Some(state) = status.state.as_ref() else {
            continue;
        };
        if let Some(reason) = state.waiting.as_ref().and_then(|w| w.reason.clone()) {
            into.push(reason);
        }
        if let Some(reason) = state.terminated.as_ref().and_then(|t| t.reason.clone()) {
            into.push(reason);
        }
    }
}

fn exit_codes(statuses: &[ContainerStatus]) -> impl Iterator<Item = i32> + '_ {
    statuses.iter().filter_map(|status| {
        status
            .state
            .as_ref()
            .and_then(|state| state.terminated.as_ref())
            .map(|terminated| terminated.exit_code)
    })
}

impl RemoveFailedPods {
    /// Upstream's `validateCanEvict`.
    fn can_evict(&self, pod: &Pod, now: k8s_openapi::jiff::Timestamp) -> bool {
        let args = &self.args;
        if podutil::age_seconds(pod, now).unwrap_or_default() < self.min_age {
            return false;
        }
        if podutil::owner_refs(pod)
            .iter()
            .any(|owner| args.exclude_owner_kinds.contains(&owner.kind))
        {
            return false;
        }
        if !args.reasons.is_empty() {
            let mut reasons = Vec::new();
            failure_reasons(podutil::container_statuses(pod), &mut reasons);
            if let Some(reason) = pod.status.as_ref().and_then(|s| s.reason.clone()) {
                reasons.push(reason);
            }
            if args.including_init_containers {
                failure_reasons(podutil::init_container_statuses(pod), &mut reasons);
            }
            if !reasons.iter().any(|reason| args.reasons.contains(reason)) {
                return false;
            }
        }
        if !args.exit_codes.is_empty() {
            let mut found = exit_codes(podutil::container_statuses(pod))
                .any(|code| args.exit_codes.contains(&code));
            if args.including_init_containers {
                found |= exit_codes(podutil::init_container_statuses(pod))
                    .any(|code| args.exit_codes.contains(&code));
            }
            if !found {
                return false;
            }
        }
        true
    }
}

impl DeschedulePlugin for RemoveFailedPods {
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
        for node in nodes {
            let node_name = node.metadata.name.as_deref().unwrap_or_default();
            tracing::debug!(node = node_name, plugin = PLUGIN_NAME, "Processing node");
            for pod in snapshot.pods_on_node(node_name) {
                if podutil::phase(pod) != "Failed"
                    || !self.selection.matches(pod)
                    || !evictor.filter(pod)
                    || !evictor.pre_eviction_filter(pod)
                    || !self.can_evict(pod, now)
                {
                    continue;
                }
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
    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated};
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    fn failed(name: &str, reason: &str, exit_code: i32) -> Pod {
        let mut p = pod(name, "a");
        let status = p.status.as_mut().expect("status");
        status.phase = Some("Failed".into());
        status.container_statuses = Some(vec![ContainerStatus {
            name: "c".into(),
            state: Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    reason: Some(reason.into()),
                    exit_code,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }]);
        p
    }

    fn run(args: serde_json::Value, pods: Vec<Pod>, now: i64) -> Vec<String> {
        let plugin = factory(Some(&args)).expect("valid");
        let now = Timestamp::from_second(now).expect("valid");
        let snapshot = ClusterSnapshot::new(vec![node("a", &[])], pods, vec![], now);
        let nodes: Vec<&Node> = snapshot.nodes().iter().collect();
        let mut evictor = FakeEvictor::default();
        plugin.deschedule(&snapshot, &nodes, &mut evictor);
        evictor.evicted
    }

    #[test]
    fn failed_pods_older_than_an_hour_by_default_are_evicted() {
        let pods = vec![failed("oom", "OOMKilled", 137), pod("running", "a")];
        assert!(run(json!({}), pods.clone(), 3599).is_empty());
        assert_eq!(run(json!({}), pods, 3600), ["oom"]);
    }

    #[test]
    fn reasons_exit_codes_and_owner_kinds_narrow_the_pods() {
        let pods = vec![failed("oom", "OOMKilled", 137), failed("error", "Error", 1)];
        let young = json!({"minPodLifetimeSeconds": 0});
        let with = |extra: serde_json::Value| {
            let mut args = young.clone();
            args.as_object_mut()
                .expect("object")
                .extend(extra.as_object().expect("object").clone());
            args
        };
        assert_eq!(
            run(with(json!({"reasons": ["OOMKilled"]})), pods.clone(), 0),
            ["oom"]
        );
        assert_eq!(
            run(with(json!({"exitCodes": [1]})), pods.clone(), 0),
            ["error"]
        );
        assert!(run(with(json!({"excludeOwnerKinds": ["ReplicaSet"]})), pods, 0).is_empty());
    }
}
