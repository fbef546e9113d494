//! Where a daemon pod belongs, as pure functions: whether a node should run
//! the set's pod (`NodeShouldRunDaemonPod`), the node a pod is meant for,
//! and the spec a daemon pod gets (automatic tolerations, node pinning).

use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    PodSpec, Taint, Toleration,
};
use ksim_core::node_affinity::RequiredNodeAffinity;
use ksim_core::status;
use ksim_core::toleration::find_matching_untolerated_taint;

/// Whether a node should run, or may keep running, the daemon pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeFit {
    /// A pod should be created there.
    pub should_run: bool,
    /// An existing pod may stay (only NoExecute taints evict).
    pub should_continue_running: bool,
}

/// The tolerations every daemon pod gets (`AddOrUpdateDaemonPodTolerations`).
fn daemon_tolerations(host_network: bool) -> Vec<Toleration> {
    let toleration = |key: &str, effect: &str| Toleration {
        key: Some(key.to_string()),
        operator: Some("Exists".to_string()),
        effect: Some(effect.to_string()),
        value: None,
        toleration_seconds: None,
    };
    let mut tolerations = vec![
        toleration(status::TAINT_NODE_NOT_READY, "NoExecute"),
        toleration(status::TAINT_NODE_UNREACHABLE, "NoExecute"),
        toleration(status::TAINT_NODE_DISK_PRESSURE, "NoSchedule"),
        toleration(status::TAINT_NODE_MEMORY_PRESSURE, "NoSchedule"),
        toleration(status::TAINT_NODE_PID_PRESSURE, "NoSchedule"),
        toleration(status::TAINT_NODE_UNSCHEDULABLE, "NoSchedule"),
    ];
    if host_network {
        tolerations.push(toleration(
            status::TAINT_NODE_NETWORK_UNAVAILABLE,
            "NoSchedule",
        ));
    }
    tolerations
}

/// The template's spec with the daemon tolerations added (those already
/// present, by key and effect, are kept as written).
fn with_daemon_tolerations(mut spec: PodSpec) -> PodSpec {
    let host_network = spec.host_network == Some(true);
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for extra in daemon_tolerations(host_network) {
        if !tolerations
            .iter()
            .any(|t| t.key == extra.key && t.effect == extra.effect)
        {
            tolerations.push(extra);
        }
    }
    spec
}

/// The spec of the daemon pod for `node`: the template's spec with the
/// daemon tolerations, and its required node affinity replaced by one term
/// pinning `metadata.name` to the node (`ReplaceDaemonSetPodNodeNameNodeAffinity`).
pub fn daemon_pod_spec(template: &PodSpec, node: &str) -> PodSpec {
    let mut spec = with_daemon_tolerations(template.clone());
    let affinity = spec.affinity.get_or_insert_with(Affinity::default);
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    node_affinity.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec![node.to_string()]),
            }]),
        }],
    });
    spec
}

/// What of a set's template decides where its pods run, prepared once per
/// sync so that judging each node copies nothing.
#[derive(Debug, Clone)]
pub struct Placement {
    node_name: Option<String>,
    affinity: RequiredNodeAffinity,
    tolerations: Vec<Toleration>,
}

impl Placement {
    /// The placement of pods built from `template`, with the daemon
    /// tolerations added.
    pub fn new(template: &PodSpec) -> Self {
        let spec = with_daemon_tolerations(template.clone());
        let node_name = spec.node_name.clone().filter(|n| !n.is_empty());
        let tolerations = spec.tolerations.clone().unwrap_or_default();
        let pod = Pod {
            spec: Some(spec),
            ..Pod::default()
        };
        Placement {
            node_name,
            affinity: RequiredNodeAffinity::from_pod(&pod),
            tolerations,
        }
    }

    /// Whether `node` should run the daemon pod: its nodeSelector and
    /// required affinity match and its tolerations (with the daemon ones)
    /// tolerate the node's NoSchedule and NoExecute taints.
    pub fn fit(&self, node: &Node) -> NodeFit {
        let node_name = node.metadata.name.as_deref().unwrap_or_default();
        let fits_name = self.node_name.as_deref().is_none_or(|n| n == node_name);
        let fits = fits_name && self.affinity.matches(node);
        let taints = ksim_core::toleration::node_taints(node);
        let schedulable = find_matching_untolerated_taint(
            taints,
            &self.tolerations,
            ksim_core::toleration::is_do_not_schedule_taint,
        )
        .is_none();
        let not_evicted =
            find_matching_untolerated_taint(taints, &self.tolerations, |t| t.effect == "NoExecute")
                .is_none();
        NodeFit {
            should_run: fits && schedulable,
            should_continue_running: fits && not_evicted,
        }
    }
}

/// Whether `node` should run the daemon pod of `template` (a pod built from
/// the set's template); see [`Placement::fit`].
pub fn node_fit(template: &PodSpec, node: &Node) -> NodeFit {
    Placement::new(template).fit(node)
}

/// Whether a change from `old` to `new` can change where daemons run: the
/// node's labels, taints or unschedulable flag changed (status and
/// heartbeats do not matter).
pub fn placement_changed(old: &Node, new: &Node) -> bool {
    fn spec(n: &Node) -> Option<(Option<&Vec<Taint>>, Option<bool>)> {
        n.spec
            .as_ref()
            .map(|s| (s.taints.as_ref(), s.unschedulable))
    }
    old.metadata.labels != new.metadata.labels || spec(old) != spec(new)
}

/// The node a daemon pod is for: its nodeName, else the node its required
/// affinity pins on `metadata.name` (`GetTargetNodeName`).
pub fn target_node(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(name) = spec.node_name.as_ref().filter(|n| !n.is_empty()) {
        return Some(name.clone());
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|r| r.key == "metadata.name" && r.operator == "In")
        .and_then(|r| r.values.as_ref()?.first().cloned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(labels: serde_json::Value, taints: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "node-1", "labels": labels},
            "spec": {"taints": taints}
        }))
        .expect("node")
    }

    fn spec(value: serde_json::Value) -> PodSpec {
        serde_json::from_value(value).expect("spec")
    }

    #[test]
    fn nodes_fit_by_selector_affinity_and_taints() {
        let plain = spec(json!({"containers": []}));
        let selective = spec(json!({"containers": [], "nodeSelector": {"disk": "ssd"}}));
        let affine = spec(json!({"containers": [], "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
        ]}}}}));
        let tolerant = spec(json!({"containers": [], "tolerations": [
            {"key": "dedicated", "operator": "Exists"}
        ]}));
        let run = NodeFit {
            should_run: true,
            should_continue_running: true,
        };
        let no = NodeFit {
            should_run: false,
            should_continue_running: false,
        };
        let stay_only = NodeFit {
            should_run: false,
            should_continue_running: true,
        };
        let cases = [
            ("a plain node", &plain, node(json!({}), json!([])), run),
            (
                "a selector match",
                &selective,
                node(json!({"disk": "ssd"}), json!([])),
                run,
            ),
            (
                "a selector miss",
                &selective,
                node(json!({"disk": "hdd"}), json!([])),
                no,
            ),
            (
                "an affinity match",
                &affine,
                node(json!({"zone": "a"}), json!([])),
                run,
            ),
            (
                "an affinity miss",
                &affine,
                node(json!({"zone": "b"}), json!([])),
                no,
            ),
            (
                "an untolerated NoSchedule taint keeps running pods",
                &plain,
                node(
                    json!({}),
                    json!([{"key": "dedicated", "effect": "NoSchedule"}]),
                ),
                stay_only,
            ),
            (
                "an untolerated NoExecute taint evicts",
                &plain,
                node(
                    json!({}),
                    json!([{"key": "dedicated", "effect": "NoExecute"}]),
                ),
                no,
            ),
            (
                "a tolerated taint",
                &tolerant,
                node(
                    json!({}),
                    json!([{"key": "dedicated", "effect": "NoExecute"}]),
                ),
                run,
            ),
            (
                "cordoned and not-ready nodes still run daemons",
                &plain,
                node(
                    json!({}),
                    json!([
                        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
                    ]),
                ),
                run,
            ),
            (
                "PreferNoSchedule is ignored",
                &plain,
                node(
                    json!({}),
                    json!([{"key": "x", "effect": "PreferNoSchedule"}]),
                ),
                run,
            ),
        ];
        for (what, spec, node, want) in cases {
            assert_eq!(node_fit(spec, &node), want, "{what}");
        }
    }

    #[test]
    fn only_labels_taints_and_unschedulable_change_placement() {
        let base = node(json!({"a": "1"}), json!([]));
        let mut heartbeat = base.clone();
        heartbeat.status = Some(
            serde_json::from_value(json!({"conditions": [
                {"type": "Ready", "status": "True"}
            ]}))
            .expect("status"),
        );
        heartbeat.metadata.resource_version = Some("7".into());
        let cases = [
            ("a heartbeat", heartbeat, false),
            ("a label", node(json!({"a": "2"}), json!([])), true),
            (
                "a taint",
                node(
                    json!({"a": "1"}),
                    json!([{"key": "k", "effect": "NoSchedule"}]),
                ),
                true,
            ),
        ];
        for (what, new, want) in cases {
            assert_eq!(placement_changed(&base, &new), want, "{what}");
        }
        let mut cordoned = base.clone();
        cordoned
            .spec
            .get_or_insert_with(Default::default)
            .unschedulable = Some(true);
        assert!(placement_changed(&base, &cordoned));
    }

    #[test]
    fn daemon_pods_are_pinned_to_their_node_and_tolerate_node_conditions() {
        let template = spec(
            json!({"containers": [], "hostNetwork": true, "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}
            ], "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ]}}}}),
        );
        let pod_spec = daemon_pod_spec(&template, "node-7");
        let tolerations = pod_spec.tolerations.clone().expect("tolerations");
        assert_eq!(
            tolerations.len(),
            7,
            "six daemon tolerations plus network-unavailable"
        );
        assert_eq!(
            tolerations[0].toleration_seconds,
            Some(5),
            "the template's own is kept"
        );
        let pod = Pod {
            spec: Some(pod_spec),
            ..Pod::default()
        };
        assert_eq!(target_node(&pod).as_deref(), Some("node-7"));
        let terms = &pod
            .spec
            .as_ref()
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .expect("required")
            .node_selector_terms;
        assert_eq!(terms.len(), 1);
    }
}
