//! RemovePodsViolatingNodeTaints: evicts pods that do not tolerate a
//! NoSchedule taint (and PreferNoSchedule with includePreferNoSchedule) of
//! the node they run on, e.g. after the node was tainted.

use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use ksim_core::status::is_terminal_phase;
use ksim_core::toleration::{
    EFFECT_NO_SCHEDULE, EFFECT_PREFER_NO_SCHEDULE, find_matching_untolerated_taint,
};
use serde::Deserialize;

use crate::framework::{
    ArgsError, ClusterSnapshot, DeschedulePlugin, EvictionRequest, PluginStatus, PodEvictor,
    decode_args,
};
use crate::podutil::{self, AfterEviction, Namespaces, PodSelection, after_eviction};

/// The plugin's name.
pub const PLUGIN_NAME: &str = "RemovePodsViolatingNodeTaints";

/// The plugin's args.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RemovePodsViolatingNodeTaintsArgs {
    /// Namespaces included or excluded.
    pub namespaces: Option<Namespaces>,
    /// Only pods with these labels.
    pub label_selector: Option<LabelSelector>,
    /// Also PreferNoSchedule taints.
    pub include_prefer_no_schedule: bool,
    /// Taints (`key` or `key=value`) ignored.
    pub excluded_taints: Vec<String>,
    /// Only these taints (`key` or `key=value`).
    pub included_taints: Option<Vec<String>>,
}

/// The plugin.
#[derive(Debug)]
pub struct RemovePodsViolatingNodeTaints {
    selection: PodSelection,
    args: RemovePodsViolatingNodeTaintsArgs,
}

/// Builds the plugin from its args.
pub fn factory(args: Option<&serde_json::Value>) -> Result<Box<dyn DeschedulePlugin>, ArgsError> {
    let args: RemovePodsViolatingNodeTaintsArgs = decode_args(args)?;
    let selection = PodSelection::new(args.namespaces.as_ref(), args.label_selector.as_ref())?;
    if !args.excluded_taints.is_empty()
        && args.included_taints.as_ref().is_some_and(|t| !t.is_empty())
    {
        return Err(ArgsError::new(
            "includedTaints",
            "either includedTaints or excludedTaints can be set, but not both",
        ));
    }
    Ok(Box::new(RemovePodsViolatingNodeTaints { selection, args }))
}

fn names_taint(names: &[String], taint: &Taint) -> bool {
    names.iter().any(|name| {
        *name == taint.key
            || taint
                .value
                .as_deref()
                .filter(|value| !value.is_empty())
                .is_some_and(|value| {
                    name.strip_prefix(taint.key.as_str())
                        .and_then(|rest| rest.strip_prefix('='))
                        == Some(value)
                })
    })
}

impl RemovePodsViolatingNodeTaints {
    fn considered(&self, taint: &Taint) -> bool {
        let effect_matches = taint.effect == EFFECT_NO_SCHEDULE
            || (self.args.include_prefer_no_schedule && taint.effect == EFFECT_PREFER_NO_SCHEDULE);
        effect_matches
            && !names_taint(&self.args.excluded_taints, taint)
            && self
                .args
                .included_taints
                .as_ref()
                .is_none_or(|included| names_taint(included, taint))
    }
}

impl DeschedulePlugin for RemovePodsViolatingNodeTaints {
    fn name(&self) -> &'static str {
        PLUGIN_NAME
    }

    fn deschedule(
        &self,
        snapshot: &ClusterSnapshot,
        nodes: &[&Node],
        evictor: &mut dyn PodEvictor,
    ) -> PluginStatus {
        for node in nodes {
            let node_name = node.metadata.name.as_deref().unwrap_or_default();
            let taints = ksim_core::toleration::node_taints(node);
            if !taints.iter().any(|taint| self.considered(taint)) {
                continue;
            }
            tracing::debug!(node = node_name, plugin = PLUGIN_NAME, "Processing node");
            for pod in snapshot.pods_on_node(node_name) {
                let phase = podutil::phase(pod);
                if is_terminal_phase(phase) {
                    continue;
                }
                if !self.selection.matches(pod)
                    || !evictor.filter(pod)
                    || !evictor.pre_eviction_filter(pod)
                {
                    continue;
                }
                let tolerations = ksim_core::toleration::pod_tolerations(pod);
                if find_matching_untolerated_taint(taints, tolerations, |t| self.considered(t))
                    .is_none()
                {
                    continue;
                }
                tracing::debug!(
                    pod = %podutil::pod_key(pod),
                    node = node_name,
                    "Not all taints with NoSchedule effect are tolerated after update for pod on node"
                );
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
    use k8s_openapi::api::core::v1::Toleration;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    fn tainted(name: &str, key: &str, value: &str, effect: &str) -> Node {
        let mut node = node(name, &[]);
        node.spec.get_or_insert_default().taints = Some(vec![Taint {
            key: key.into(),
            value: Some(value.into()),
            effect: effect.into(),
            ..Default::default()
        }]);
        node
    }

    fn run(
        args: serde_json::Value,
        nodes: Vec<Node>,
        pods: Vec<k8s_openapi::api::core::v1::Pod>,
        evictor: &mut FakeEvictor,
    ) {
        let plugin = factory(Some(&args)).expect("valid args");
        let snapshot = ClusterSnapshot::new(nodes, pods, vec![], Timestamp::UNIX_EPOCH);
        let nodes: Vec<&Node> = snapshot.nodes().iter().collect();
        assert_eq!(
            plugin.deschedule(&snapshot, &nodes, evictor),
            PluginStatus::Success
        );
    }

    #[test]
    fn pods_not_tolerating_a_no_schedule_taint_are_evicted() {
        let mut tolerating = pod("tolerating", "a");
        tolerating.spec.as_mut().expect("spec").tolerations = Some(vec![Toleration {
            key: Some("dedicated".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        }]);
        let mut evictor = FakeEvictor {
            protected: ["protected".to_string()].into(),
            ..Default::default()
        };
        run(
            json!({}),
            vec![
                tainted("a", "dedicated", "gpu", "NoSchedule"),
                node("b", &[]),
            ],
            vec![
                pod("p1", "a"),
                tolerating,
                pod("protected", "a"),
                pod("p2", "b"),
            ],
            &mut evictor,
        );
        assert_eq!(evictor.evicted, ["p1"]);
    }

    #[test]
    fn prefer_no_schedule_counts_only_when_included() {
        let nodes = || vec![tainted("a", "k", "v", "PreferNoSchedule")];
        let mut evictor = FakeEvictor::default();
        run(json!({}), nodes(), vec![pod("p", "a")], &mut evictor);
        assert!(evictor.evicted.is_empty());
        run(
            json!({"includePreferNoSchedule": true}),
            nodes(),
            vec![pod("p", "a")],
            &mut evictor,
        );
        assert_eq!(evictor.evicted, ["p"]);
    }

    #[test]
    fn excluded_and_included_taints_match_key_or_key_value() {
        let nodes = || vec![tainted("a", "dedicated", "gpu", "NoSchedule")];
        for (args, evicted) in [
            (json!({"excludedTaints": ["dedicated"]}), false),
            (json!({"excludedTaints": ["dedicated=gpu"]}), false),
            (json!({"excludedTaints": ["dedicated=cpu"]}), true),
            (json!({"includedTaints": ["dedicated=gpu"]}), true),
            (json!({"includedTaints": ["other"]}), false),
        ] {
            let mut evictor = FakeEvictor::default();
            run(args.clone(), nodes(), vec![pod("p", "a")], &mut evictor);
            assert_eq!(!evictor.evicted.is_empty(), evicted, "{args}");
        }
    }

    #[test]
    fn the_node_limit_moves_on_to_the_next_node() {
        let mut evictor = FakeEvictor {
            node_limit: Some(1),
            ..Default::default()
        };
        run(
            json!({}),
            vec![
                tainted("a", "k", "", "NoSchedule"),
                tainted("b", "k", "", "NoSchedule"),
            ],
            vec![pod("a1", "a"), pod("a2", "a"), pod("b1", "b")],
            &mut evictor,
        );
        assert_eq!(evictor.evicted, ["a1", "b1"]);
    }

    #[test]
    fn included_and_excluded_together_are_refused() {
        let error = factory(Some(
            &json!({"includedTaints": ["a"], "excludedTaints": ["b"]}),
        ))
        .err()
        .expect("both set");
        assert_eq!(error.field, "includedTaints");
    }
}
