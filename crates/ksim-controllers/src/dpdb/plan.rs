//! The DPDB controller's decisions as a pure function: from a budget, its
//! child PodDisruptionBudget, what is known of each federation member and
//! the time, the child to write (if any) and the new status. No I/O: the
//! controller gathers the inputs and performs the steps.
//!
//! The arithmetic: the federation expects `E` = the child's expectedPods
//! (this cluster's pods, counted by the disruption controller) plus every
//! member's expectedPods (the last known count when it is not observed);
//! `desired` is minAvailable (an integer, or a percentage of `E` rounded
//! up) or `E − maxUnavailable`; the pods healthy elsewhere are the members'
//! currentHealthy less their pending disruptedPods, and 0 for a member not
//! Observed. The child gets the integer minAvailable
//! `max(0, desired − healthy elsewhere)`, so the allowance upstream's
//! disruption controller computes for it from the local pods is exactly
//! what the federation allows here. An invalid budget gets a closed child
//! (maxUnavailable 0).

use std::collections::BTreeMap;

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::types::{
    API_VERSION, DistributedPodDisruptionBudget, DistributedPodDisruptionBudgetStatus,
    FederationMember, KIND, MemberState, MemberStatus,
};
use crate::common::{controller_of, controller_reference, scaled_value};

/// How long a member's last read stands without its cluster confirming it
/// (by a watch event or a successful probe); older, it counts as Stale
/// (0 healthy).
pub const STALENESS_BOUND: SignedDuration = SignedDuration::from_secs(5);

/// Condition: whether a disruption of this cluster's pods is allowed.
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";
/// Condition: whether every member is Observed.
pub const MEMBERS_OBSERVED: &str = "MembersObserved";
/// Condition: whether the child PodDisruptionBudget is as planned.
pub const CHILD_SYNCED: &str = "ChildSynced";
/// Condition: whether the spec and federation make sense.
pub const FEDERATION_VALID: &str = "FederationValid";
/// Condition: whether another PodDisruptionBudget selects this budget's pods.
pub const OVERLAPPING_BUDGET: &str = "OverlappingBudget";

/// The eviction API's answer for a pod with two budgets (kube's words).
pub const MULTIPLE_BUDGETS_MESSAGE: &str = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";

/// What the controller could read of one member.
#[derive(Clone, Debug, PartialEq)]
pub enum MemberRead {
    /// The member as its cluster's cache holds it; `confirmed_at`: when the
    /// cluster last confirmed that cache.
    Found {
        /// The member.
        pdb: Box<PodDisruptionBudget>,
        /// When its cluster last confirmed it.
        confirmed_at: Timestamp,
        /// Since when its status has been behind its generation, if it is.
        behind_since: Option<Timestamp>,
    },
    /// Its cluster answers and holds no such PodDisruptionBudget.
    NotFound,
    /// Its cluster cannot be reached (the reason).
    Unreachable(String),
    /// `cluster` names no context or ksim cluster (the reason).
    UnknownCluster(String),
}

/// Everything a plan is made from.
#[derive(Clone, Debug)]
pub struct PlanInput<'a> {
    /// The budget.
    pub dpdb: &'a DistributedPodDisruptionBudget,
    /// The PodDisruptionBudget of the budget's name in its namespace, if any.
    pub child: Option<&'a PodDisruptionBudget>,
    /// One read per entry of `spec.federation`, in order.
    pub members: Vec<MemberRead>,
    /// Other PodDisruptionBudgets in the namespace that select this budget's pods.
    pub overlapping: Vec<String>,
    /// The time.
    pub now: Timestamp,
    /// [`STALENESS_BOUND`] unless a test says otherwise.
    pub staleness: SignedDuration,
    /// Keep the child closed (Exclusive coordination without the claim).
    pub hold_closed: bool,
}

/// What to do with the child.
#[derive(Clone, Debug, PartialEq)]
pub enum ChildAction {
    /// It is as planned (or not ours to write).
    Keep,
    /// Create it.
    Create(PodDisruptionBudget),
    /// Replace its spec (the object carries the resourceVersion read).
    Update(PodDisruptionBudget),
}

/// The steps of one sync.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The child's write.
    pub child: ChildAction,
    /// The status to store (written only when it differs).
    pub status: DistributedPodDisruptionBudgetStatus,
    /// The child's planned minAvailable (None: closed or no child).
    pub child_min_available: Option<i32>,
    /// What the child would allow were it open (Exclusive coordination
    /// claims only when this is positive).
    pub open_allowance: i32,
    /// When to sync again without an event (a member behind its generation
    /// becomes Stale at the end of its grace).
    pub recheck_after: Option<SignedDuration>,
}

/// Why a budget is invalid (FederationValid=False), if it is.
fn invalid_reason(input: &PlanInput<'_>) -> Option<(&'static str, String)> {
    let dpdb = input.dpdb;
    let spec = &dpdb.spec;
    let namespace = dpdb.metadata.namespace.as_deref().unwrap_or_default();
    let name = dpdb.metadata.name.as_deref().unwrap_or_default();
    let selector_empty = spec.selector.as_ref().is_none_or(|s| {
        s.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
            && s.match_expressions.as_ref().is_none_or(Vec::is_empty)
    });
    if selector_empty {
        return Some((
            "InvalidSelector",
            "spec.selector: a non-empty selector is required".into(),
        ));
    }
    match (&spec.min_available, &spec.max_unavailable) {
        (Some(_), Some(_)) => {
            return Some((
                "MinAvailableAndMaxUnavailable",
                "spec: minAvailable and maxUnavailable cannot be both set".into(),
            ));
        }
        (None, None) => {
            return Some((
                "NoBudget",
                "spec: one of minAvailable or maxUnavailable is required".into(),
            ));
        }
        (Some(v), None) | (None, Some(v)) => {
            if let Err(e) = scaled_value(v, 100, true) {
                return Some(("InvalidValue", e.to_string()));
            }
            if scaled_value(v, 100, true).is_ok_and(|n| n < 0) {
                return Some(("InvalidValue", "the budget must not be negative".into()));
            }
            if matches!(v, IntOrString::String(_))
                && scaled_value(v, 100, true).is_ok_and(|n| n > 100)
            {
                return Some(("InvalidValue", "a percentage must not exceed 100%".into()));
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    for (i, member) in spec.federation.iter().enumerate() {
        let resolved = member.resolved(namespace);
        if member.name.is_empty() {
            return Some((
                "InvalidMember",
                format!("spec.federation[{i}].name: a member needs a name"),
            ));
        }
        if resolved.cluster.is_empty() && resolved.namespace == namespace && resolved.name == name {
            return Some((
                "SelfReference",
                format!(
                    "spec.federation[{i}] names this budget's own child; its pods are counted already"
                ),
            ));
        }
        if !seen.insert(resolved.clone()) {
            return Some((
                "DuplicateMember",
                format!("spec.federation[{i}]: {resolved} is listed twice"),
            ));
        }
        if let Some(MemberRead::UnknownCluster(why)) = input.members.get(i) {
            return Some(("UnknownCluster", format!("spec.federation[{i}]: {why}")));
        }
    }
    None
}

/// Whether the budget's controller reference is on `child`.
pub fn owns(dpdb: &DistributedPodDisruptionBudget, child: &PodDisruptionBudget) -> bool {
    controller_of(&child.metadata)
        .is_some_and(|r| r.kind == KIND && Some(r.uid.as_str()) == dpdb.metadata.uid.as_deref())
}

/// The counts a PodDisruptionBudget's status gives for its pods: healthy
/// (currentHealthy less pending disruptions, which an eviction records
/// before the disruption controller recounts) and expected.
fn counts_of(pdb: &PodDisruptionBudget) -> (i32, i32) {
    let Some(status) = &pdb.status else {
        return (0, 0);
    };
    let pending = status
        .disrupted_pods
        .as_ref()
        .map_or(0, |d| i32::try_from(d.len()).unwrap_or(i32::MAX));
    (
        (status.current_healthy - pending).max(0),
        status.expected_pods.max(0),
    )
}

/// Whether a PodDisruptionBudget's status was computed for its current spec.
fn status_current(pdb: &PodDisruptionBudget) -> bool {
    let observed = pdb.status.as_ref().and_then(|s| s.observed_generation);
    match (observed, pdb.metadata.generation) {
        (Some(o), Some(g)) => o >= g,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// One member's status entry from what was read of it and its previous entry.
fn member_status(
    member: &FederationMember,
    read: &MemberRead,
    previous: Option<&MemberStatus>,
    now: Timestamp,
    staleness: SignedDuration,
) -> MemberStatus {
    let last_expected = previous.map_or(0, |p| p.expected_pods);
    let last_observed = previous.and_then(|p| p.last_observed.clone());
    let mut entry = MemberStatus {
        cluster: member.cluster.clone(),
        namespace: member.namespace.clone(),
        name: member.name.clone(),
        state: MemberState::Unreachable,
        current_healthy: 0,
        expected_pods: last_expected,
        last_observed,
        message: None,
    };
    match read {
        MemberRead::Found {
            pdb,
            confirmed_at,
            behind_since,
        } => {
            let (healthy, expected) = counts_of(pdb);
            entry.expected_pods = expected;
            let age = now.duration_since(*confirmed_at);
            // A member whose status is behind its generation (its budget
            // was just rewritten, usually by its own DPDB) keeps, for the
            // staleness bound, no more than it last confirmed: counting it 0
            // at once would make neighbouring federations rewrite each
            // other's children forever.
            let confirmed_healthy = previous
                .filter(|p| p.state == MemberState::Observed)
                .map(|p| p.current_healthy);
            let in_grace = behind_since.is_some_and(|since| now.duration_since(since) <= staleness);
            if age > staleness {
                entry.state = MemberState::Stale;
                entry.message = Some(format!(
                    "not confirmed for {}s (the staleness bound is {}s)",
                    age.as_secs(),
                    staleness.as_secs()
                ));
            } else if !(status_current(pdb) || in_grace && confirmed_healthy.is_some()) {
                entry.state = MemberState::Stale;
                entry.message = Some(format!(
                    "its status (observedGeneration {}) is behind its generation {}",
                    pdb.status
                        .as_ref()
                        .and_then(|s| s.observed_generation)
                        .unwrap_or(0),
                    pdb.metadata.generation.unwrap_or(0)
                ));
            } else {
                let healthy = if status_current(pdb) {
                    healthy
                } else {
                    healthy.min(confirmed_healthy.unwrap_or(0))
                };
                entry.state = MemberState::Observed;
                entry.current_healthy = healthy;
                let unchanged = previous.is_some_and(|p| {
                    p.state == MemberState::Observed
                        && p.current_healthy == healthy
                        && p.expected_pods == expected
                });
                if !unchanged || entry.last_observed.is_none() {
                    entry.last_observed = Some(Time(*confirmed_at));
                }
            }
        }
        MemberRead::NotFound => {
            entry.state = MemberState::NotFound;
            entry.message = Some(format!(
                "PodDisruptionBudget {}/{} not found",
                member.namespace, member.name
            ));
        }
        MemberRead::Unreachable(why) | MemberRead::UnknownCluster(why) => {
            entry.state = MemberState::Unreachable;
            entry.message = Some(why.clone());
        }
    }
    entry
}

fn condition(
    type_: &str,
    ok: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: Timestamp,
) -> Condition {
    Condition {
        type_: type_.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time: Time(now),
    }
}

/// The conditions with each transition time kept while its status stays.
fn keep_transition_times(previous: &[Condition], mut conditions: Vec<Condition>) -> Vec<Condition> {
    for c in &mut conditions {
        if let Some(p) = previous.iter().find(|p| p.type_ == c.type_)
            && p.status == c.status
        {
            c.last_transition_time = p.last_transition_time.clone();
        }
    }
    conditions
}

/// The child's spec for a given budget: open to `min_available` pods, or
/// closed (`maxUnavailable: 0`) when `None`.
fn child_spec(
    dpdb: &DistributedPodDisruptionBudget,
    min_available: Option<i32>,
) -> PodDisruptionBudgetSpec {
    PodDisruptionBudgetSpec {
        selector: dpdb.spec.selector.clone(),
        min_available: min_available.map(IntOrString::Int),
        max_unavailable: if min_available.is_none() {
            Some(IntOrString::Int(0))
        } else {
            None
        },
        unhealthy_pod_eviction_policy: dpdb.spec.unhealthy_pod_eviction_policy.clone(),
    }
}

/// Whether the parts of a child's spec the controller sets are as wanted.
fn spec_matches(have: Option<&PodDisruptionBudgetSpec>, want: &PodDisruptionBudgetSpec) -> bool {
    let Some(have) = have else {
        return false;
    };
    have.selector == want.selector
        && have.min_available == want.min_available
        && have.max_unavailable == want.max_unavailable
        && have.unhealthy_pod_eviction_policy == want.unhealthy_pod_eviction_policy
}

/// A new child for `dpdb` with `spec`.
fn new_child(
    dpdb: &DistributedPodDisruptionBudget,
    spec: PodDisruptionBudgetSpec,
) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: dpdb.metadata.name.clone(),
            namespace: dpdb.metadata.namespace.clone(),
            labels: Some(BTreeMap::from([(
                "policy.ksim.io/distributed-budget".to_string(),
                dpdb.metadata.name.clone().unwrap_or_default(),
            )])),
            owner_references: Some(vec![controller_reference(
                API_VERSION,
                KIND,
                &dpdb.metadata,
            )]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The plan of one sync.
pub fn plan(input: &PlanInput<'_>) -> Plan {
    let dpdb = input.dpdb;
    let now = input.now;
    let generation = dpdb.metadata.generation;
    let namespace = dpdb.metadata.namespace.as_deref().unwrap_or_default();
    let previous = dpdb.status.clone().unwrap_or_default();
    let invalid = invalid_reason(input);

    // Members.
    let members: Vec<MemberStatus> = dpdb
        .spec
        .federation
        .iter()
        .enumerate()
        .map(|(i, member)| {
            let resolved = member.resolved(namespace);
            let read = input
                .members
                .get(i)
                .cloned()
                .unwrap_or_else(|| MemberRead::Unreachable("not read".into()));
            let prior = previous.members.iter().find(|p| {
                p.cluster == resolved.cluster
                    && p.namespace == resolved.namespace
                    && p.name == resolved.name
            });
            member_status(&resolved, &read, prior, now, input.staleness)
        })
        .collect();
    let observed = members
        .iter()
        .filter(|m| m.state == MemberState::Observed)
        .count();
    let all_observed = observed == members.len();

    // The child: ours, foreign, or missing.
    let foreign = input.child.filter(|c| !owns(dpdb, c));
    let ours = input.child.filter(|c| owns(dpdb, c));
    let (local_healthy, local_expected) = ours.map_or((0, 0), counts_of);

    let expected = members
        .iter()
        .fold(local_expected, |sum, m| sum.saturating_add(m.expected_pods));
    let healthy_elsewhere = members
        .iter()
        .fold(0i32, |sum, m| sum.saturating_add(m.current_healthy));
    let desired = match (&dpdb.spec.min_available, &dpdb.spec.max_unavailable) {
        (Some(min), None) => scaled_value(min, expected, true).ok(),
        (None, Some(max)) => scaled_value(max, expected, true)
            .ok()
            .map(|m| (expected - m).max(0)),
        _ => None,
    };
    let desired = if invalid.is_some() { None } else { desired };

    let mut child_min = desired.map(|d| (d - healthy_elsewhere).max(0));
    // Tighten at once; loosen only on a confirmed (fully observed) view.
    let current_min = ours.and_then(|c| c.spec.as_ref()).and_then(|s| {
        match (&s.min_available, &s.max_unavailable) {
            (Some(IntOrString::Int(n)), None) => Some(Some(*n)),
            (None, Some(IntOrString::Int(0))) => Some(None),
            _ => None,
        }
    });
    if let (Some(want), Some(have)) = (child_min, current_min)
        && !all_observed
    {
        child_min = have.map(|have| want.max(have));
    }

    let open_allowance = match child_min {
        Some(min) if local_expected > 0 => (local_healthy - min).max(0),
        _ => 0,
    };
    let held = input.hold_closed && open_allowance > 0;
    if held {
        child_min = child_min.map(|m| m.max(local_expected).max(local_healthy));
    }

    let want_spec = child_spec(dpdb, child_min);
    let child = match (foreign, ours) {
        (Some(_), _) => ChildAction::Keep,
        (None, None) => ChildAction::Create(new_child(dpdb, want_spec.clone())),
        (None, Some(c)) if spec_matches(c.spec.as_ref(), &want_spec) => ChildAction::Keep,
        (None, Some(c)) => {
            let mut updated = c.clone();
            updated.spec = Some(want_spec.clone());
            ChildAction::Update(updated)
        }
    };

    // What is allowed now: what the child allows once it is synced and
    // recounted, never more than the plan (while the child catches up).
    let planned_allowance = match child_min {
        Some(min) if local_expected > 0 => (local_healthy - min).max(0),
        _ => 0,
    };
    let child_allowance = ours
        .and_then(|c| c.status.as_ref())
        .map_or(0, |s| s.disruptions_allowed.max(0));
    let synced = ours
        .is_some_and(|c| spec_matches(c.spec.as_ref(), &want_spec) && status_current(c))
        && matches!(child, ChildAction::Keep);
    let disruptions_allowed = if foreign.is_some() {
        0
    } else if synced {
        child_allowance
    } else {
        child_allowance.min(planned_allowance)
    };

    // Conditions.
    let mut conditions = Vec::new();
    conditions.push(match &invalid {
        None => condition(
            FEDERATION_VALID,
            true,
            "Valid",
            "the spec and federation are valid".into(),
            generation,
            now,
        ),
        Some((reason, message)) => condition(
            FEDERATION_VALID,
            false,
            reason,
            format!("{message}; no disruption is allowed"),
            generation,
            now,
        ),
    });
    let unobserved: Vec<String> = members
        .iter()
        .filter(|m| m.state != MemberState::Observed)
        .map(|m| {
            let who = FederationMember {
                cluster: m.cluster.clone(),
                namespace: m.namespace.clone(),
                name: m.name.clone(),
            };
            format!(
                "{who} is {:?}{}",
                m.state,
                m.message
                    .as_ref()
                    .map(|s| format!(": {s}"))
                    .unwrap_or_default()
            )
        })
        .collect();
    conditions.push(if all_observed {
        condition(
            MEMBERS_OBSERVED,
            true,
            "AllMembersObserved",
            format!("{observed} of {} members observed", members.len()),
            generation,
            now,
        )
    } else {
        condition(
            MEMBERS_OBSERVED,
            false,
            "MembersNotObserved",
            format!(
                "{observed} of {} members observed; the others count 0 healthy pods: {}",
                members.len(),
                unobserved.join("; ")
            ),
            generation,
            now,
        )
    });
    let child_name = format!(
        "{namespace}/{}",
        dpdb.metadata.name.as_deref().unwrap_or_default()
    );
    conditions.push(if foreign.is_some() {
        condition(
            CHILD_SYNCED,
            false,
            "ChildNotOwned",
            format!("PodDisruptionBudget {child_name} exists and is not controlled by this DistributedPodDisruptionBudget; delete or rename it"),
            generation,
            now,
        )
    } else if synced {
        condition(CHILD_SYNCED, true, "Synced", format!("PodDisruptionBudget {child_name} is as planned"), generation, now)
    } else {
        condition(CHILD_SYNCED, false, "Syncing", format!("PodDisruptionBudget {child_name} is being written or recounted"), generation, now)
    });
    if !input.overlapping.is_empty() {
        conditions.push(condition(
            OVERLAPPING_BUDGET,
            true,
            "MultiplePodDisruptionBudgets",
            format!(
                "PodDisruptionBudget(s) {} also select this budget's pods; their evictions fail: {MULTIPLE_BUDGETS_MESSAGE}",
                input.overlapping.join(", ")
            ),
            generation,
            now,
        ));
    }
    conditions.push(if disruptions_allowed > 0 {
        condition(
            DISRUPTION_ALLOWED,
            true,
            "SufficientPods",
            format!("{disruptions_allowed} disruption(s) allowed"),
            generation,
            now,
        )
    } else {
        let why = if foreign.is_some() {
            "the child is not ours".to_string()
        } else if let Some((reason, _)) = &invalid {
            format!("the budget is invalid ({reason})")
        } else if held {
            "Exclusive coordination: waiting to claim the federation".to_string()
        } else if !synced {
            "the child is being synced".to_string()
        } else {
            format!(
                "{} healthy of {} desired over the federation",
                local_healthy.saturating_add(healthy_elsewhere),
                desired.unwrap_or_default()
            )
        };
        condition(
            DISRUPTION_ALLOWED,
            false,
            "InsufficientPods",
            format!("no disruption allowed: {why}"),
            generation,
            now,
        )
    });
    let conditions = keep_transition_times(&previous.conditions, conditions);

    let status = DistributedPodDisruptionBudgetStatus {
        observed_generation: generation,
        expected_pods: expected,
        desired_healthy: desired.unwrap_or_default(),
        current_healthy: local_healthy.saturating_add(healthy_elsewhere),
        disruptions_allowed,
        members_observed: format!("{observed}/{}", members.len()),
        members,
        conditions,
    };
    let recheck_after = input
        .members
        .iter()
        .filter_map(|read| match read {
            MemberRead::Found {
                pdb,
                behind_since: Some(since),
                ..
            } if !status_current(pdb) => {
                let left = input.staleness - now.duration_since(*since);
                (left >= SignedDuration::ZERO).then_some(left)
            }
            _ => None,
        })
        .min()
        .map(|left| left + SignedDuration::from_millis(10));
    Plan {
        child,
        status,
        child_min_available: child_min,
        open_allowance,
        recheck_after,
    }
}
