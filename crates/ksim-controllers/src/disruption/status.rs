//! The arithmetic of a PodDisruptionBudget's status, as upstream's
//! disruption controller computes it: expectedPods and desiredHealthy
//! (`getExpectedPodCount`), the disruptedPods map with its 2-minute timeout
//! (`buildDisruptedPodMap`), currentHealthy (`countHealthyPods`),
//! disruptionsAllowed and the DisruptionAllowed condition.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{
    PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::Error;
use crate::common::{controller_of, is_pod_ready, scaled_value};

/// How long a pod listed in disruptedPods is not counted healthy while the
/// eviction's deletion is expected (upstream's `DeletionTimeout`).
pub const DELETION_TIMEOUT: SignedDuration = SignedDuration::from_secs(120);

/// The condition type the controller maintains.
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";
/// Reason: disruptions are allowed.
pub const SUFFICIENT_PODS: &str = "SufficientPods";
/// Reason: no disruption is allowed.
pub const INSUFFICIENT_PODS: &str = "InsufficientPods";
/// Reason: the status could not be computed.
pub const SYNC_FAILED: &str = "SyncFailed";

/// expectedPods, desiredHealthy, and the names of pods without a controller.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExpectedCount {
    pub expected: i32,
    pub desired_healthy: i32,
    pub unmanaged: Vec<String>,
}

/// The controller a pod's controller reference leads to, with its scale: a
/// ReplicaSet owned by a Deployment leads to the Deployment, so the
/// ReplicaSets of one rollout count once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerScale {
    /// The UID of the controller whose scale counts.
    pub uid: String,
    /// Its `spec.replicas`.
    pub scale: i32,
}

/// `getExpectedPodCount`. `scales` maps the UID in a pod's controller
/// reference to the controller that counts and its scale; a managed pod
/// whose reference is missing from it is an error ("found no controllers").
pub fn expected_pod_count<P: Borrow<Pod>>(
    spec: &PodDisruptionBudgetSpec,
    pods: &[P],
    scales: &HashMap<String, ControllerScale>,
) -> Result<ExpectedCount, Error> {
    let expected_scale = || -> Result<(i32, Vec<String>), Error> {
        let mut counted: HashMap<&str, i32> = HashMap::new();
        let mut unmanaged = Vec::new();
        for pod in pods {
            let pod: &Pod = pod.borrow();
            let name = pod.metadata.name.clone().unwrap_or_default();
            let Some(reference) = controller_of(&pod.metadata) else {
                unmanaged.push(name);
                continue;
            };
            let controller = scales
                .get(&reference.uid)
                .ok_or_else(|| Error::Invalid(format!("found no controllers for pod {name:?}")))?;
            counted.insert(controller.uid.as_str(), controller.scale);
        }
        let expected = counted
            .values()
            .fold(0i32, |sum, scale| sum.saturating_add(*scale));
        Ok((expected, unmanaged))
    };
    if let Some(max_unavailable) = &spec.max_unavailable {
        let (expected, unmanaged) = expected_scale()?;
        let unavailable = scaled_value(max_unavailable, expected, true)?;
        return Ok(ExpectedCount {
            expected,
            desired_healthy: (expected - unavailable).max(0),
            unmanaged,
        });
    }
    match &spec.min_available {
        Some(IntOrString::Int(n)) => Ok(ExpectedCount {
            expected: i32::try_from(pods.len()).unwrap_or(i32::MAX),
            desired_healthy: *n,
            unmanaged: Vec::new(),
        }),
        Some(percent @ IntOrString::String(_)) => {
            let (expected, unmanaged) = expected_scale()?;
            Ok(ExpectedCount {
                expected,
                desired_healthy: scaled_value(percent, expected, true)?,
                unmanaged,
            })
        }
        None => Ok(ExpectedCount::default()),
    }
}

/// A `LabelSelector` as Go's `%v` prints it in the UnmanagedPods event
/// (`&LabelSelector{MatchLabels:map[string]string{app: web,},...}`).
pub fn go_selector_string(selector: Option<&LabelSelector>) -> String {
    let Some(selector) = selector else {
        return "nil".into();
    };
    let labels: String = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}: {v},"))
        .collect();
    let expressions: String = selector
        .match_expressions
        .iter()
        .flatten()
        .map(|e| {
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}},",
                e.key,
                e.operator,
                e.values.clone().unwrap_or_default().join(" ")
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{expressions}}},}}"
    )
}

/// `buildDisruptedPodMap`: the entries of disruptedPods still within the
/// deletion timeout for pods not yet terminating, and when the earliest
/// one expires (to sync again then).
pub fn disrupted_pod_map<P: Borrow<Pod>>(
    pods: &[P],
    pdb: &PodDisruptionBudget,
    now: Timestamp,
) -> (BTreeMap<String, Time>, Option<Timestamp>) {
    let listed = pdb
        .status
        .as_ref()
        .and_then(|s| s.disrupted_pods.clone())
        .unwrap_or_default();
    let mut result = BTreeMap::new();
    let mut recheck: Option<Timestamp> = None;
    for pod in pods {
        let pod: &Pod = pod.borrow();
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(since) = listed.get(&name) else {
            continue;
        };
        let Ok(expires) = since.0.checked_add(DELETION_TIMEOUT) else {
            continue;
        };
        if expires < now {
            tracing::info!(pod = %name, "pod was expected to be deleted but it was not");
            continue;
        }
        recheck = Some(recheck.map_or(expires, |r| r.min(expires)));
        result.insert(name, since.clone());
    }
    (result, recheck)
}

/// `countHealthyPods`: Ready, not terminating, not just disrupted.
pub fn count_healthy<P: Borrow<Pod>>(
    pods: &[P],
    disrupted: &BTreeMap<String, Time>,
    now: Timestamp,
) -> i32 {
    let healthy = pods
        .iter()
        .map(|pod| -> &Pod { pod.borrow() })
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter(|pod| {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            disrupted
                .get(name)
                .and_then(|since| since.0.checked_add(DELETION_TIMEOUT).ok())
                .is_none_or(|expires| expires <= now)
        })
        .filter(|pod| is_pod_ready(pod))
        .count();
    i32::try_from(healthy).unwrap_or(i32::MAX)
}

/// Sets the DisruptionAllowed condition as `meta.SetStatusCondition` does
/// (the transition time changes only with the status).
fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition) {
    if let Some(current) = conditions.iter_mut().find(|c| c.type_ == new.type_) {
        if current.status == new.status {
            new.last_transition_time = current.last_transition_time.clone();
        }
        *current = new;
    } else {
        conditions.push(new);
    }
}

fn disruption_condition(
    observed_generation: Option<i64>,
    status: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) -> Condition {
    Condition {
        type_: DISRUPTION_ALLOWED.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        observed_generation,
        last_transition_time: Time(now),
    }
}

/// `updatePdbStatus`: the new status (disruptionsAllowed is 0 while no pod
/// is expected) with its DisruptionAllowed condition.
pub fn budget_status(
    pdb: &PodDisruptionBudget,
    count: &ExpectedCount,
    current_healthy: i32,
    disrupted: BTreeMap<String, Time>,
    now: Timestamp,
) -> PodDisruptionBudgetStatus {
    let mut allowed = current_healthy - count.desired_healthy;
    if count.expected <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let mut conditions = pdb
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let condition = if allowed > 0 {
        disruption_condition(
            pdb.metadata.generation,
            "True",
            SUFFICIENT_PODS,
            String::new(),
            now,
        )
    } else {
        disruption_condition(
            pdb.metadata.generation,
            "False",
            INSUFFICIENT_PODS,
            String::new(),
            now,
        )
    };
    set_condition(&mut conditions, condition);
    PodDisruptionBudgetStatus {
        current_healthy,
        desired_healthy: count.desired_healthy,
        expected_pods: count.expected,
        disruptions_allowed: allowed,
        disrupted_pods: (!disrupted.is_empty()).then_some(disrupted),
        observed_generation: pdb.metadata.generation,
        conditions: Some(conditions),
    }
}

/// `failSafe`: no disruption allowed, with the SyncFailed reason and why.
pub fn failed_status(
    pdb: &PodDisruptionBudget,
    why: &str,
    now: Timestamp,
) -> PodDisruptionBudgetStatus {
    let mut status = pdb.status.clone().unwrap_or_default();
    status.disruptions_allowed = 0;
    let mut conditions = status.conditions.take().unwrap_or_default();
    set_condition(
        &mut conditions,
        disruption_condition(
            status.observed_generation,
            "False",
            SYNC_FAILED,
            why.to_string(),
            now,
        ),
    );
    status.conditions = Some(conditions);
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, owner: Option<&str>, ready: bool) -> Pod {
        let owners = owner.map_or(json!([]), |uid| {
            json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": uid, "controller": true}])
        });
        serde_json::from_value(json!({
            "metadata": {"name": name, "ownerReferences": owners},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        }))
        .expect("pod")
    }

    fn spec(value: serde_json::Value) -> PodDisruptionBudgetSpec {
        serde_json::from_value(value).expect("spec")
    }

    fn scale(uid: &str, scale: i32) -> ControllerScale {
        ControllerScale {
            uid: uid.into(),
            scale,
        }
    }

    #[test]
    fn expected_and_desired_follow_min_available_and_max_unavailable() {
        // Four pods of one ReplicaSet whose Deployment wants 10.
        let pods: Vec<Pod> = (0..4)
            .map(|i| pod(&format!("p{i}"), Some("rs1"), true))
            .collect();
        let scales: HashMap<String, ControllerScale> =
            [("rs1".to_string(), scale("d1", 10))].into();
        let cases = [
            // integer minAvailable: expected is the number of pods
            (json!({"minAvailable": 2}), 4, 2),
            (json!({"minAvailable": 0}), 4, 0),
            // percentages are of the controllers' scale, rounded up
            (json!({"minAvailable": "95%"}), 10, 10),
            (json!({"minAvailable": "50%"}), 10, 5),
            (json!({"minAvailable": "33%"}), 10, 4),
            (json!({"minAvailable": "1%"}), 10, 1),
            (json!({"minAvailable": "100%"}), 10, 10),
            // maxUnavailable: desired = expected - ceil(percent), never below 0
            (json!({"maxUnavailable": 1}), 10, 9),
            (json!({"maxUnavailable": 0}), 10, 10),
            (json!({"maxUnavailable": "25%"}), 10, 7),
            (json!({"maxUnavailable": "1%"}), 10, 9),
            (json!({"maxUnavailable": "100%"}), 10, 0),
            (json!({"maxUnavailable": 20}), 10, 0),
            // neither: nothing expected
            (json!({}), 0, 0),
        ];
        for (value, expected, desired) in cases {
            let count = expected_pod_count(&spec(value.clone()), &pods, &scales).expect("count");
            assert_eq!(
                (count.expected, count.desired_healthy),
                (expected, desired),
                "{value}"
            );
        }
    }

    #[test]
    fn replica_sets_of_one_deployment_count_its_scale_once() {
        let pods = [
            pod("old", Some("rs-old"), true),
            pod("new", Some("rs-new"), true),
            pod("other", Some("rs-other"), true),
        ];
        let scales: HashMap<String, ControllerScale> = [
            ("rs-old".to_string(), scale("deploy", 5)),
            ("rs-new".to_string(), scale("deploy", 5)),
            ("rs-other".to_string(), scale("rs-other", 2)),
        ]
        .into();
        let count = expected_pod_count(&spec(json!({"minAvailable": "50%"})), &pods, &scales)
            .expect("count");
        assert_eq!((count.expected, count.desired_healthy), (7, 4));
    }

    #[test]
    fn unmanaged_pods_are_reported_and_unknown_controllers_fail() {
        let pods = [pod("managed", Some("rs1"), true), pod("loose", None, true)];
        let scales: HashMap<String, ControllerScale> =
            [("rs1".to_string(), scale("rs1", 3))].into();
        let count =
            expected_pod_count(&spec(json!({"maxUnavailable": 1})), &pods, &scales).expect("count");
        assert_eq!(count.unmanaged, vec!["loose".to_string()]);
        assert_eq!((count.expected, count.desired_healthy), (3, 2));
        // An integer minAvailable counts pods and does not look at controllers.
        let count = expected_pod_count(&spec(json!({"minAvailable": 1})), &pods, &HashMap::new())
            .expect("count");
        assert_eq!((count.expected, count.desired_healthy), (2, 1));
        assert!(count.unmanaged.is_empty());
        let error = expected_pod_count(
            &spec(json!({"minAvailable": "50%"})),
            &pods,
            &HashMap::new(),
        )
        .expect_err("no controller scale");
        assert_eq!(
            error.to_string(),
            "found no controllers for pod \"managed\""
        );
    }

    #[test]
    fn selectors_print_as_go_prints_them() {
        let selector: LabelSelector = serde_json::from_value(json!({
            "matchLabels": {"app": "web", "tier": "front"},
            "matchExpressions": [{"key": "env", "operator": "In", "values": ["a", "b"]}]
        }))
        .expect("selector");
        assert_eq!(
            go_selector_string(Some(&selector)),
            "&LabelSelector{MatchLabels:map[string]string{app: web,tier: front,},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:env,Operator:In,Values:[a b],},},}"
        );
        assert_eq!(go_selector_string(None), "nil");
    }

    #[test]
    fn healthy_pods_exclude_unready_terminating_and_recently_disrupted() {
        let now: Timestamp = "2026-01-01T12:00:00Z".parse().expect("time");
        let mut terminating = pod("terminating", None, true);
        terminating.metadata.deletion_timestamp = Some(Time(now));
        let pods = [
            pod("ready", None, true),
            pod("unready", None, false),
            pod("disrupted", None, true),
            pod("stale-disruption", None, true),
            terminating,
        ];
        let old = now
            .checked_sub(SignedDuration::from_secs(600))
            .expect("time");
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": "b"},
            "status": {"currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0, "disruptionsAllowed": 0,
                       "disruptedPods": {"disrupted": Time(now), "stale-disruption": Time(old), "gone": Time(now)}}
        }))
        .expect("pdb");
        let (disrupted, recheck) = disrupted_pod_map(&pods, &pdb, now);
        assert_eq!(disrupted.keys().collect::<Vec<_>>(), ["disrupted"]);
        assert_eq!(recheck, now.checked_add(DELETION_TIMEOUT).ok());
        assert_eq!(count_healthy(&pods, &disrupted, now), 2);
    }

    #[test]
    fn disruptions_allowed_needs_expected_pods_and_spare_health() {
        let now = Timestamp::now();
        let pdb: PodDisruptionBudget =
            serde_json::from_value(json!({"metadata": {"name": "b", "generation": 3}}))
                .expect("pdb");
        let count = |expected, desired_healthy| ExpectedCount {
            expected,
            desired_healthy,
            unmanaged: vec![],
        };
        let status = budget_status(&pdb, &count(5, 3), 5, BTreeMap::new(), now);
        assert_eq!(status.disruptions_allowed, 2);
        assert_eq!(status.observed_generation, Some(3));
        let condition = &status.conditions.expect("condition")[0];
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("True", SUFFICIENT_PODS)
        );
        let status = budget_status(&pdb, &count(0, 0), 2, BTreeMap::new(), now);
        assert_eq!(status.disruptions_allowed, 0);
        let status = budget_status(&pdb, &count(10, 10), 9, BTreeMap::new(), now);
        assert_eq!(status.disruptions_allowed, 0);
        assert_eq!(
            status.conditions.expect("condition")[0].reason,
            INSUFFICIENT_PODS
        );
        let failed = failed_status(&pdb, "boom", now);
        assert_eq!(failed.conditions.expect("condition")[0].reason, SYNC_FAILED);
    }
}
