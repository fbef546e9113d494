//! The scale-up simulation, pure code over the scheduler's `Snapshot`:
//! pending pods are tried on nodes still booting (upcoming), then, group by
//! group, on template nodes with the scheduler's own PreFilter and Filter
//! plugins (a binpacking estimate of how many new nodes each group needs,
//! within its max size); the expanders then choose one group.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use ksim_core::resources::{PodResourcesOptions, pod_requests};
use ksim_scheduler::framework::{Profile, Snapshot, Status, run_filter_plugins, run_pre_filter};
use rand::Rng;

use crate::config::NodeGroupSpec;

/// The reason a group at its max gives (upstream's wording).
pub const MAX_SIZE_REACHED: &str = "max node group size reached";
/// The reason a group backing off after a failed scale-up gives (upstream's wording).
pub const BACKOFF: &str = "in backoff after failed scale-up";
/// The taint cluster-autoscaler puts on nodes it deletes.
pub const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";
/// The taint a booting node carries.
pub use ksim_core::status::TAINT_NODE_NOT_READY as NOT_READY_TAINT;
/// The taint of a node whose kubelet stopped reporting.
pub use ksim_core::status::TAINT_NODE_UNREACHABLE as UNREACHABLE_TAINT;
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// A node group as the simulation sees it.
#[derive(Debug, Clone)]
pub struct GroupView {
    pub spec: Arc<NodeGroupSpec>,
    /// The nodes the group has (registered), booting ones included.
    pub target_size: usize,
    /// Why the group may not grow now, whatever the pods (upstream's
    /// skipped node groups, e.g. [`BACKOFF`]).
    pub skip: Option<String>,
}

impl GroupView {
    /// How many nodes the group may still add.
    pub fn room(&self) -> usize {
        self.spec.max_size.saturating_sub(self.target_size)
    }
}

/// What one group can do for a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A new node of the group would host the pod.
    Helps,
    /// Why not (a filter's reason, or [`MAX_SIZE_REACHED`]).
    Cannot(String),
}

/// One group's answer to the pending pods.
#[derive(Debug, Clone, Default)]
pub struct GroupOption {
    /// Index into the groups.
    pub group: usize,
    /// New nodes needed.
    pub node_count: usize,
    /// Indexes into the pending pods that the new nodes host.
    pub pods: Vec<usize>,
    /// Requested cpu (milli) and memory (bytes) of those pods.
    pub requested_cpu: i64,
    pub requested_memory: i64,
    /// What the new nodes offer.
    pub allocatable_cpu: i64,
    pub allocatable_memory: i64,
}

/// The scale-up simulation's result.
#[derive(Debug, Clone, Default)]
pub struct ScaleUpPlan {
    /// Pending pods (indexes) that fit on nodes still booting.
    pub fit_upcoming: Vec<usize>,
    /// Per group with something to offer, its option.
    pub options: Vec<GroupOption>,
    /// Per pending pod, per group, the verdict (empty for pods that fit
    /// upcoming nodes).
    pub verdicts: Vec<Vec<Verdict>>,
}

/// The node a group would add, for simulation: the template under a unique
/// name (also its hostname label), without the taints of a booting or
/// deleted node, with the allocatable the kubelet simulator gives a node
/// that does not say.
pub fn template_node(spec: &NodeGroupSpec, name: &str) -> Node {
    let mut node = spec.template.clone();
    node.metadata.name = Some(name.to_string());
    node.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(HOSTNAME_LABEL.to_string(), name.to_string());
    if let Some(spec) = node.spec.as_mut()
        && let Some(taints) = spec.taints.as_mut()
    {
        taints.retain(|t| {
            !matches!(
                t.key.as_str(),
                NOT_READY_TAINT | UNREACHABLE_TAINT | TO_BE_DELETED_TAINT
            )
        });
    }
    let status = node.status.get_or_insert_with(Default::default);
    if status.allocatable.is_none() {
        status.allocatable = status.capacity.clone();
    }
    let allocatable = status.allocatable.get_or_insert_with(Default::default);
    for (name, default) in [("cpu", "1k"), ("memory", "1Ti"), ("pods", "1M")] {
        allocatable
            .entry(name.to_string())
            .or_insert_with(|| Quantity(default.to_string()));
    }
    status.conditions = Some(vec![NodeCondition {
        type_: "Ready".into(),
        status: "True".into(),
        ..Default::default()
    }]);
    node
}

/// Whether `pod` passes the PreFilter and Filter plugins on `node_name` in
/// `snapshot`: the rejection otherwise.
pub fn fits(
    profile: &Profile,
    snapshot: &Snapshot,
    pod: &Pod,
    node_name: &str,
) -> Result<(), Status> {
    let (state, narrowed, status) =
        run_pre_filter(profile, pod, snapshot).map_err(|e| Status::error(e.to_string()))?;
    if !status.is_success() {
        return Err(status);
    }
    if let Some(names) = &narrowed.node_names
        && !names.contains(node_name)
    {
        return Err(Status::unresolvable("node(s) didn't satisfy plugin(s)"));
    }
    let Some(node) = snapshot.get(node_name) else {
        return Err(Status::error(format!("node {node_name} not found")));
    };
    let status = run_filter_plugins(profile, &state, pod, node);
    if status.is_success() {
        Ok(())
    } else {
        Err(status)
    }
}

/// The first reason of a rejection (what a histogram counts).
pub fn first_reason(status: &Status) -> String {
    status
        .reasons()
        .next()
        .map(str::to_string)
        .unwrap_or_else(|| status.message())
}

fn milli_and_bytes(list: &ksim_core::resources::ResourceList) -> (i64, i64) {
    (
        list.get("cpu").map_or(0, |q| q.milli_value()),
        list.get("memory").map_or(0, |q| q.value()),
    )
}

fn allocatable_of(node: &Node) -> (i64, i64) {
    let map = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .map(ksim_core::resources::resource_list)
        .unwrap_or_default();
    milli_and_bytes(&map)
}

/// Runs the scale-up simulation: `snapshot` holds the cluster (booting
/// nodes of the groups listed in `upcoming` already without their
/// not-ready taint), `pending` the unschedulable pods.
pub fn plan_scale_up(
    profile: &Profile,
    snapshot: &Snapshot,
    upcoming: &[String],
    groups: &[GroupView],
    pending: &[Arc<Pod>],
) -> ScaleUpPlan {
    let mut plan = ScaleUpPlan {
        verdicts: vec![Vec::new(); pending.len()],
        ..Default::default()
    };
    let mut base = snapshot.clone();
    let mut remaining: Vec<usize> = Vec::with_capacity(pending.len());
    for (index, pod) in pending.iter().enumerate() {
        let placed = upcoming
            .iter()
            .find(|node| fits(profile, &base, pod, node).is_ok());
        match placed {
            Some(node) => {
                base.bind_pod(Pod::clone(pod), node);
                plan.fit_upcoming.push(index);
            }
            None => remaining.push(index),
        }
    }
    for (group_index, group) in groups.iter().enumerate() {
        if let Some(reason) = &group.skip {
            for &index in &remaining {
                plan.verdicts[index].push(Verdict::Cannot(reason.clone()));
            }
            continue;
        }
        let room = group.room();
        if room == 0 {
            for &index in &remaining {
                plan.verdicts[index].push(Verdict::Cannot(MAX_SIZE_REACHED.into()));
            }
            continue;
        }
        let probe_name = format!("template-node-for-{}-probe", group.spec.name);
        let mut probe = base.clone();
        let probe_node = template_node(&group.spec, &probe_name);
        let (cpu, memory) = allocatable_of(&probe_node);
        probe.upsert_node(probe_node);
        let mut sim = base.clone();
        let mut added: Vec<String> = Vec::new();
        let mut option = GroupOption {
            group: group_index,
            ..Default::default()
        };
        for &index in &remaining {
            let pod = &pending[index];
            if let Err(status) = fits(profile, &probe, pod, &probe_name) {
                plan.verdicts[index].push(Verdict::Cannot(first_reason(&status)));
                continue;
            }
            let on_last = added
                .last()
                .filter(|last| fits(profile, &sim, pod, last).is_ok())
                .cloned();
            let host = match on_last {
                Some(last) => Some(last),
                None if added.len() < room => {
                    let name = format!("template-node-for-{}-{}", group.spec.name, added.len());
                    sim.upsert_node(template_node(&group.spec, &name));
                    match fits(profile, &sim, pod, &name) {
                        Ok(()) => {
                            added.push(name.clone());
                            Some(name)
                        }
                        Err(status) => {
                            sim.remove_node(&name);
                            plan.verdicts[index].push(Verdict::Cannot(first_reason(&status)));
                            continue;
                        }
                    }
                }
                None => None,
            };
            match host {
                Some(host) => {
                    sim.bind_pod(Pod::clone(pod), &host);
                    let (pod_cpu, pod_memory) =
                        milli_and_bytes(&pod_requests(pod, &PodResourcesOptions::default()));
                    option.requested_cpu += pod_cpu;
                    option.requested_memory += pod_memory;
                    option.pods.push(index);
                    plan.verdicts[index].push(Verdict::Helps);
                }
                None => plan.verdicts[index].push(Verdict::Cannot(MAX_SIZE_REACHED.into())),
            }
        }
        if !option.pods.is_empty() {
            option.node_count = added.len();
            let count = i64::try_from(added.len()).unwrap_or(i64::MAX);
            option.allocatable_cpu = cpu.saturating_mul(count);
            option.allocatable_memory = memory.saturating_mul(count);
            plan.options.push(option);
        }
    }
    plan
}

/// An expander: how one group is chosen among those that help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expander {
    Random,
    MostPods,
    LeastWaste,
    Priority,
}

impl Expander {
    /// Parses `--expander` (comma-separated, applied in order).
    pub fn parse_list(text: &str) -> Result<Vec<Expander>, String> {
        text.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|name| match name {
                "random" => Ok(Expander::Random),
                "most-pods" => Ok(Expander::MostPods),
                "least-waste" => Ok(Expander::LeastWaste),
                "priority" => Ok(Expander::Priority),
                other => Err(format!(
                    "Expander {other} not supported (ksim has random, most-pods, least-waste, priority)"
                )),
            })
            .collect()
    }
}

fn waste(option: &GroupOption) -> f64 {
    let part = |requested: i64, available: i64| {
        if available <= 0 {
            0.0
        } else {
            (available - requested) as f64 / available as f64
        }
    };
    part(option.requested_cpu, option.allocatable_cpu)
        + part(option.requested_memory, option.allocatable_memory)
}

/// Chooses among `options` with the expanders in order (each keeps its best
/// options; ties end with a random pick, as upstream's fallback).
pub fn choose<'a>(
    expanders: &[Expander],
    options: &'a [GroupOption],
    groups: &[GroupView],
    priorities: &[(i64, Vec<regex::Regex>)],
    rng: &mut impl Rng,
) -> Option<&'a GroupOption> {
    let mut candidates: Vec<&GroupOption> = options.iter().collect();
    for expander in expanders {
        if candidates.len() <= 1 {
            break;
        }
        candidates = match expander {
            Expander::Random => {
                let pick = rng.random_range(0..candidates.len());
                vec![candidates[pick]]
            }
            Expander::MostPods => {
                let best = candidates.iter().map(|o| o.pods.len()).max().unwrap_or(0);
                candidates
                    .into_iter()
                    .filter(|o| o.pods.len() == best)
                    .collect()
            }
            Expander::LeastWaste => {
                let best = candidates
                    .iter()
                    .map(|o| waste(o))
                    .fold(f64::INFINITY, f64::min);
                candidates
                    .into_iter()
                    .filter(|o| (waste(o) - best).abs() < 1e-9)
                    .collect()
            }
            Expander::Priority => {
                let name_of = |o: &GroupOption| groups[o.group].spec.name.clone();
                let matched = priorities.iter().find_map(|(_, regexes)| {
                    let hits: Vec<&GroupOption> = candidates
                        .iter()
                        .copied()
                        .filter(|o| regexes.iter().any(|r| r.is_match(&name_of(o))))
                        .collect();
                    (!hits.is_empty()).then_some(hits)
                });
                matched.unwrap_or(candidates)
            }
        };
    }
    match candidates.len() {
        0 => None,
        1 => Some(candidates[0]),
        n => Some(candidates[rng.random_range(0..n)]),
    }
}

/// The NotTriggerScaleUp message: `pod didn't trigger scale-up: ` and the
/// groups' reasons counted (`1 max node group size reached, 2 ...`).
pub fn not_triggered_message(verdicts: &[Verdict]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for verdict in verdicts {
        if let Verdict::Cannot(reason) = verdict {
            *counts.entry(reason.as_str()).or_default() += 1;
        }
    }
    let parts: Vec<String> = counts
        .into_iter()
        .map(|(reason, count)| format!("{count} {reason}"))
        .collect();
    format!("pod didn't trigger scale-up: {}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksim_testutils::builders;
    use serde_json::json;

    fn node(name: &str, cpu: &str, group: &str) -> Node {
        builders::node(name)
            .label("group", group)
            .cpu(cpu)
            .memory("8Gi")
            .obj()
    }

    /// A pod requesting `cpu`, with `extra`'s keys set in its spec.
    fn pod(name: &str, cpu: &str, extra: serde_json::Value) -> Pod {
        let pod = builders::pod(name)
            .image("i")
            .label("app", "web")
            .cpu(cpu)
            .obj();
        let mut value = serde_json::to_value(pod).expect("a pod serializes");
        if let (Some(spec), Some(extra)) = (value["spec"].as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                spec.insert(k.clone(), v.clone());
            }
        }
        serde_json::from_value(value).expect("pod")
    }

    fn group(name: &str, cpu: &str, target: usize, max: usize) -> GroupView {
        GroupView {
            spec: Arc::new(NodeGroupSpec {
                name: name.into(),
                group_value: name.into(),
                min_size: 0,
                max_size: max,
                desired_size: 0,
                template: node(&format!("{name}-template"), cpu, name),
            }),
            target_size: target,
            skip: None,
        }
    }

    #[test]
    fn pods_are_packed_onto_as_few_new_nodes_as_fit() {
        let profile = Profile::default_profile();
        let snapshot = Snapshot::new([node("a", "1", "g")], []);
        let pending: Vec<Arc<Pod>> = (0..5)
            .map(|i| Arc::new(pod(&format!("p{i}"), "900m", json!({}))))
            .collect();
        let groups = [group("g", "2", 1, 10)];
        let plan = plan_scale_up(&profile, &snapshot, &[], &groups, &pending);
        assert_eq!(plan.options.len(), 1);
        assert_eq!(plan.options[0].node_count, 3);
        assert_eq!(plan.options[0].pods.len(), 5);
    }

    #[test]
    fn a_hostname_spread_puts_one_pod_per_new_node_while_an_empty_node_exists() {
        let profile = Profile::default_profile();
        let full = pod("filler", "1", json!({"nodeName": "a"}));
        let mut full = full;
        full.metadata.labels = None;
        let snapshot = Snapshot::new([node("a", "1", "g")], [full]);
        let spread = json!({"topologySpreadConstraints": [{
            "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}}]});
        let pending: Vec<Arc<Pod>> = (0..3)
            .map(|i| Arc::new(pod(&format!("p{i}"), "100m", spread.clone())))
            .collect();
        let groups = [group("g", "2", 1, 10)];
        let plan = plan_scale_up(&profile, &snapshot, &[], &groups, &pending);
        assert_eq!(plan.options[0].node_count, 3, "{plan:?}");
    }

    #[test]
    fn a_group_at_its_max_and_a_group_too_small_say_why() {
        let profile = Profile::default_profile();
        let snapshot = Snapshot::new([node("a", "1", "g")], []);
        let pending = vec![Arc::new(pod("p", "3", json!({})))];
        let groups = [group("full", "4", 2, 2), group("small", "2", 0, 5)];
        let plan = plan_scale_up(&profile, &snapshot, &[], &groups, &pending);
        assert!(plan.options.is_empty());
        assert_eq!(
            not_triggered_message(&plan.verdicts[0]),
            "pod didn't trigger scale-up: 1 Insufficient cpu, 1 max node group size reached"
        );
    }

    #[test]
    fn the_room_left_bounds_the_new_nodes() {
        let profile = Profile::default_profile();
        let snapshot = Snapshot::new([], []);
        let pending: Vec<Arc<Pod>> = (0..4)
            .map(|i| Arc::new(pod(&format!("p{i}"), "1500m", json!({}))))
            .collect();
        let groups = [group("g", "2", 8, 10)];
        let plan = plan_scale_up(&profile, &snapshot, &[], &groups, &pending);
        assert_eq!(plan.options[0].node_count, 2);
        assert_eq!(plan.options[0].pods, [0, 1]);
        assert_eq!(plan.verdicts[3], [Verdict::Cannot(MAX_SIZE_REACHED.into())]);
    }

    #[test]
    fn a_pod_that_fits_a_booting_node_triggers_nothing() {
        let profile = Profile::default_profile();
        let snapshot = Snapshot::new([node("booting", "2", "g")], []);
        let pending = vec![Arc::new(pod("p", "1", json!({})))];
        let groups = [group("g", "2", 1, 10)];
        let plan = plan_scale_up(&profile, &snapshot, &["booting".into()], &groups, &pending);
        assert_eq!(plan.fit_upcoming, [0]);
        assert!(plan.options.is_empty());
    }

    #[test]
    fn node_selectors_rule_groups_out_with_the_filter_reason() {
        let profile = Profile::default_profile();
        let snapshot = Snapshot::new([], []);
        let pending = vec![Arc::new(pod(
            "p",
            "1",
            json!({"nodeSelector": {"group": "gpu"}}),
        ))];
        let groups = [group("cpu", "2", 0, 10), group("gpu", "2", 0, 10)];
        let plan = plan_scale_up(&profile, &snapshot, &[], &groups, &pending);
        assert_eq!(plan.options.len(), 1);
        assert_eq!(plan.options[0].group, 1);
        assert_eq!(
            plan.verdicts[0][0],
            Verdict::Cannot("node(s) didn't match Pod's node affinity/selector".into())
        );
    }

    #[test]
    fn expanders_choose_as_upstream() {
        let groups = [
            group("a", "2", 0, 10),
            group("b", "16", 0, 10),
            group("c", "2", 0, 10),
        ];
        let option = |group: usize, pods: usize, cpu: i64, alloc: i64| GroupOption {
            group,
            node_count: 1,
            pods: (0..pods).collect(),
            requested_cpu: cpu,
            requested_memory: 0,
            allocatable_cpu: alloc,
            allocatable_memory: 0,
        };
        let options = [
            option(0, 2, 1000, 2000),
            option(1, 3, 1000, 16000),
            option(2, 2, 1900, 2000),
        ];
        let mut rng = rand::rng();
        let most = choose(&[Expander::MostPods], &options, &groups, &[], &mut rng).expect("one");
        assert_eq!(most.group, 1);
        let least = choose(&[Expander::LeastWaste], &options, &groups, &[], &mut rng).expect("one");
        assert_eq!(least.group, 2);
        let priorities =
            crate::config::parse_priorities("10:\n  - ^a$\n5:\n  - .*\n").expect("valid");
        let by_priority = choose(
            &[Expander::Priority],
            &options,
            &groups,
            &priorities,
            &mut rng,
        )
        .expect("one");
        assert_eq!(by_priority.group, 0);
        assert!(Expander::parse_list("price").is_err());
        assert_eq!(
            Expander::parse_list("priority,least-waste"),
            Ok(vec![Expander::Priority, Expander::LeastWaste])
        );
    }
}
