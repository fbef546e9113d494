//! DefaultPreemption: when no node fits, finds nodes where evicting
//! lower-priority pods makes room, picks the victims on each (reprieving as
//! many as possible, PodDisruptionBudget-violating ones first), and chooses
//! the node as upstream does (fewest PDB violations, lowest highest victim
//! priority, smallest priority sum, fewest victims, latest start time).
//! The caller evicts the victims and sets `nominatedNodeName`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::framework::{
    Code, CycleState, Diagnosis, DisruptionBudget, FitError, NodeInfo, Plugin, PodInfo,
    PostFilterPlugin, PostFilterResult, Profile, Snapshot, Status,
    run_filter_plugins_with_nominated_pods,
};

/// The plugin name.
pub const NAME: &str = "DefaultPreemption";
/// A node without lower-priority pods.
pub const ERR_NO_VICTIMS: &str = "No preemption victims found for incoming pod";
/// A node whose rejection preemption cannot fix.
pub const ERR_NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";

/// `DefaultPreemptionArgs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultPreemptionArgs {
    /// Candidates to find, as a percentage of the potential nodes (default 10).
    pub min_candidate_nodes_percentage: usize,
    /// At least this many candidates (default 100).
    pub min_candidate_nodes_absolute: usize,
}

impl Default for DefaultPreemptionArgs {
    fn default() -> Self {
        DefaultPreemptionArgs {
            min_candidate_nodes_percentage: 10,
            min_candidate_nodes_absolute: 100,
        }
    }
}

/// The plugin.
#[derive(Debug, Clone)]
pub struct DefaultPreemption {
    args: DefaultPreemptionArgs,
}

impl DefaultPreemption {
    /// With these arguments.
    pub fn new(args: &DefaultPreemptionArgs) -> Self {
        DefaultPreemption { args: args.clone() }
    }

    fn num_candidates(&self, potential: usize) -> usize {
        let n = potential * self.args.min_candidate_nodes_percentage / 100;
        n.max(self.args.min_candidate_nodes_absolute).min(potential)
    }
}

/// A node where preemption would make room, with its victims (most
/// important first).
#[derive(Debug, Clone)]
pub struct Candidate {
    pub node: String,
    pub victims: Vec<Arc<PodInfo>>,
    pub num_pdb_violations: i64,
}

use ksim_core::status::pod_priority as priority;

/// Start time in nanoseconds; a pod not started counts as starting now
/// (later than any started pod).
fn start_time(pod: &Pod) -> i128 {
    pod.status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| t.0.as_nanosecond())
        .unwrap_or(i128::MAX)
}

/// Upstream `MoreImportantPod`: higher priority, then earlier start.
fn more_important(a: &Pod, b: &Pod) -> std::cmp::Ordering {
    priority(b)
        .cmp(&priority(a))
        .then_with(|| start_time(a).cmp(&start_time(b)))
}

/// Splits victims into those whose eviction would violate a budget and the
/// rest, keeping order (upstream `filterPodsWithPDBViolation`).
fn split_by_pdb_violation(
    victims: Vec<Arc<PodInfo>>,
    budgets: &[DisruptionBudget],
) -> (Vec<Arc<PodInfo>>, Vec<Arc<PodInfo>>) {
    let mut allowed: Vec<i64> = budgets
        .iter()
        .map(|b| i64::from(b.disruptions_allowed))
        .collect();
    let (mut violating, mut non_violating) = (Vec::new(), Vec::new());
    for victim in victims {
        let name = victim.pod.metadata.name.as_deref().unwrap_or_default();
        let mut violated = false;
        for (budget, allowed) in budgets.iter().zip(allowed.iter_mut()) {
            if !budget.covers(&victim.pod) || budget.disrupted_pods.contains(name) {
                continue;
            }
            *allowed -= 1;
            if *allowed < 0 {
                violated = true;
            }
        }
        if violated {
            violating.push(victim);
        } else {
            non_violating.push(victim);
        }
    }
    (violating, non_violating)
}

/// Upstream `SelectVictimsOnNode`, on copies of the state and node.
fn select_victims_on_node(
    profile: &Profile,
    snapshot: &Snapshot,
    state: &mut CycleState,
    pod: &Pod,
    node: &mut NodeInfo,
    budgets: &[DisruptionBudget],
) -> Result<(Vec<Arc<PodInfo>>, i64), Status> {
    let pod_priority = priority(pod);
    let mut potential: Vec<Arc<PodInfo>> = node
        .pods
        .iter()
        .filter(|p| priority(&p.pod) < pod_priority)
        .cloned()
        .collect();
    for victim in &potential {
        let (namespace, name) = victim.key();
        node.remove_pod(namespace, name);
        let status = profile.run_pre_filter_extension_remove_pod(state, pod, victim, node);
        if !status.is_success() {
            return Err(status);
        }
    }
    if potential.is_empty() {
        return Err(Status::unresolvable(ERR_NO_VICTIMS));
    }
    let status = run_filter_plugins_with_nominated_pods(profile, state, pod, node, snapshot);
    if !status.is_success() {
        return Err(status);
    }
    potential.sort_by(|a, b| more_important(&a.pod, &b.pod));
    let (violating, non_violating) = split_by_pdb_violation(potential, budgets);
    let had_both = !violating.is_empty() && !non_violating.is_empty();
    let mut victims = Vec::new();
    let mut num_violating = 0;
    let mut reprieve = |candidate: Arc<PodInfo>, state: &mut CycleState, node: &mut NodeInfo| {
        node.add_pod(candidate.clone());
        let status = profile.run_pre_filter_extension_add_pod(state, pod, &candidate, node);
        if !status.is_success() {
            return Err(status);
        }
        if run_filter_plugins_with_nominated_pods(profile, state, pod, node, snapshot).is_success()
        {
            return Ok(true);
        }
        let (namespace, name) = candidate.key();
        node.remove_pod(namespace, name);
        let status = profile.run_pre_filter_extension_remove_pod(state, pod, &candidate, node);
        if !status.is_success() {
            return Err(status);
        }
        victims.push(candidate);
        Ok(false)
    };
    for candidate in violating {
        if !reprieve(candidate, state, node)? {
            num_violating += 1;
        }
    }
    for candidate in non_violating {
        reprieve(candidate, state, node)?;
    }
    if had_both {
        victims.sort_by(|a, b| more_important(&a.pod, &b.pod));
    }
    Ok((victims, num_violating))
}

/// The earliest start time among the highest-priority victims.
fn earliest_start_of_top_victims(victims: &[Arc<PodInfo>]) -> i128 {
    let Some(top) = victims.iter().map(|v| priority(&v.pod)).max() else {
        return i128::MIN;
    };
    victims
        .iter()
        .filter(|v| priority(&v.pod) == top)
        .map(|v| start_time(&v.pod))
        .min()
        .unwrap_or(i128::MIN)
}

/// Upstream `pickOneNodeForPreemption`: successive criteria, the first
/// candidate winning remaining ties.
pub fn pick_one_node_for_preemption(candidates: &[Candidate]) -> Option<&Candidate> {
    let criteria: [&dyn Fn(&Candidate) -> i128; 5] = [
        &|c| -i128::from(c.num_pdb_violations),
        &|c| -i128::from(c.victims.first().map(|v| priority(&v.pod)).unwrap_or(0)),
        &|c| {
            -c.victims
                .iter()
                .map(|v| i128::from(priority(&v.pod)) + i128::from(i32::MAX) + 1)
                .sum::<i128>()
        },
        &|c| -(c.victims.len() as i128),
        &|c| earliest_start_of_top_victims(&c.victims),
    ];
    let mut remaining: Vec<&Candidate> = candidates.iter().collect();
    for score in criteria {
        let best = remaining.iter().map(|c| score(c)).max()?;
        remaining.retain(|c| score(c) == best);
        if remaining.len() == 1 {
            break;
        }
    }
    remaining.first().copied()
}

impl Plugin for DefaultPreemption {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        Some(self)
    }
}

impl DefaultPreemption {
    fn eligible(
        &self,
        pod: &Pod,
        snapshot: &Snapshot,
        diagnosis: &Diagnosis,
    ) -> Result<(), String> {
        if pod
            .spec
            .as_ref()
            .and_then(|s| s.preemption_policy.as_deref())
            == Some("Never")
        {
            return Err("not eligible due to preemptionPolicy=Never.".to_string());
        }
        let nominated = pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref())
            .filter(|n| !n.is_empty());
        if let Some(nominated) = nominated {
            let status = diagnosis
                .node_to_status
                .get(nominated)
                .or(diagnosis.absent_nodes_status.as_ref());
            if status.is_some_and(|s| s.code() == Code::UnschedulableAndUnresolvable) {
                return Ok(());
            }
            if let Some(node) = snapshot.get(nominated) {
                let pod_priority = priority(pod);
                let terminating = node.pods.iter().any(|p| {
                    priority(&p.pod) < pod_priority && p.pod.metadata.deletion_timestamp.is_some()
                });
                if terminating {
                    return Err(
                        "not eligible due to a terminating pod on the nominated node.".to_string(),
                    );
                }
            }
        }
        Ok(())
    }

    fn preempt(
        &self,
        state: &CycleState,
        pod: &Pod,
        snapshot: &Snapshot,
        profile: &Profile,
        diagnosis: &Diagnosis,
    ) -> (Option<PostFilterResult>, Status) {
        if let Err(message) = self.eligible(pod, snapshot, diagnosis) {
            return (None, Status::unschedulable(message));
        }
        let status_of = |node: &NodeInfo| {
            diagnosis
                .node_to_status
                .get(node.name())
                .or(diagnosis.absent_nodes_status.as_ref())
                .map(Status::code)
                .unwrap_or(Code::UnschedulableAndUnresolvable)
        };
        let potential: Vec<&NodeInfo> = snapshot
            .nodes()
            .iter()
            .filter(|n| status_of(n) == Code::Unschedulable)
            .collect();
        let wanted = self.num_candidates(potential.len());
        let mut candidates: Vec<Candidate> = Vec::new();
        let mut non_violating = 0;
        let mut statuses = Diagnosis::default();
        for node in potential {
            let mut node_copy = node.clone();
            let mut state_copy = state.clone();
            match select_victims_on_node(
                profile,
                snapshot,
                &mut state_copy,
                pod,
                &mut node_copy,
                &snapshot.disruption_budgets,
            ) {
                Ok((victims, violations)) if !victims.is_empty() => {
                    if violations == 0 {
                        non_violating += 1;
                    }
                    candidates.push(Candidate {
                        node: node.name().to_string(),
                        victims,
                        num_pdb_violations: violations,
                    });
                    if non_violating > 0 && candidates.len() >= wanted {
                        break;
                    }
                }
                Ok(_) => {
                    return (
                        None,
                        Status::error(format!(
                            "expected at least one victim pod on node {:?}",
                            node.name()
                        )),
                    );
                }
                Err(status) if status.code() == Code::Error => return (None, status),
                Err(status) => {
                    statuses
                        .node_to_status
                        .insert(node.name().to_string(), status);
                }
            }
        }
        let Some(best) = pick_one_node_for_preemption(&candidates) else {
            statuses.absent_nodes_status = Some(Status::unresolvable(ERR_NOT_HELPFUL));
            let fit = FitError {
                num_all_nodes: snapshot.len(),
                diagnosis: statuses,
                post_filter_result: None,
            };
            return (
                Some(PostFilterResult {
                    nominated_node_name: Some(String::new()),
                    victims: Vec::new(),
                }),
                Status::unschedulable(fit.message()),
            );
        };
        (
            Some(PostFilterResult {
                nominated_node_name: Some(best.node.clone()),
                victims: best.victims.iter().map(|v| v.pod.clone()).collect(),
            }),
            Status::success(),
        )
    }
}

impl PostFilterPlugin for DefaultPreemption {
    fn post_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        snapshot: &Snapshot,
        profile: &Profile,
        diagnosis: &Diagnosis,
    ) -> (Option<PostFilterResult>, Status) {
        let (result, status) = self.preempt(state, pod, snapshot, profile, diagnosis);
        let message = status.message();
        if message.is_empty() {
            (result, status)
        } else {
            (
                result,
                Status::new(status.code(), [format!("preemption: {message}")]),
            )
        }
    }
}

#[cfg(test)]
mod tests;
