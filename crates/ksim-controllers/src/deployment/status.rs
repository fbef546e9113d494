//! A Deployment's status from its ReplicaSets (`calculateStatus`) and its
//! conditions: Available (MinimumReplicasAvailable/Unavailable) and
//! Progressing (NewReplicaSetCreated, FoundNewReplicaSet, ReplicaSetUpdated,
//! NewReplicaSetAvailable, ProgressDeadlineExceeded), as upstream's
//! `syncRolloutStatus` sets them.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// Progressing reason: a new ReplicaSet was created.
pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
/// Progressing reason: an existing ReplicaSet matches the template.
pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
/// Progressing reason: the rollout made progress.
pub const RS_UPDATED: &str = "ReplicaSetUpdated";
/// Progressing reason: the rollout completed.
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
/// Progressing reason: no progress within progressDeadlineSeconds.
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";

fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

fn desired(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// `Some` unless zero: the counts are `omitempty` in the API.
pub(crate) fn nonzero(n: i32) -> Option<i32> {
    (n != 0).then_some(n)
}

/// A condition of `type_` with both times at `now`.
pub fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// `SetDeploymentCondition`: no change when status and reason are the same;
/// the transition time kept when only the reason changes.
pub fn set_condition(status: &mut DeploymentStatus, mut new: DeploymentCondition) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    if let Some(current) = conditions.iter().find(|c| c.type_ == new.type_) {
        if current.status == new.status && current.reason == new.reason {
            return;
        }
        if current.status == new.status {
            new.last_transition_time = current.last_transition_time.clone();
        }
    }
    conditions.retain(|c| c.type_ != new.type_);
    conditions.push(new);
}

fn get_condition<'a>(status: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
}

/// Whether `progressDeadlineSeconds` is set (and not "never").
pub fn has_progress_deadline(d: &Deployment) -> bool {
    d.spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds)
        .is_some_and(|s| s != i32::MAX)
}

/// `calculateStatus`: counts from the ReplicaSets and the Available
/// condition; the other conditions are carried over from `d`.
pub fn calculate_status(
    d: &Deployment,
    all: &[&ReplicaSet],
    new: Option<&ReplicaSet>,
    max_unavailable: i32,
    now: Timestamp,
) -> DeploymentStatus {
    let sum =
        |f: &dyn Fn(&ReplicaSet) -> i32| all.iter().map(|rs| f(rs)).fold(0, i32::saturating_add);
    let status_of = |rs: &ReplicaSet| rs.status.clone().unwrap_or_default();
    let available = sum(&|rs| status_of(rs).available_replicas.unwrap_or(0));
    let total = sum(&spec_replicas);
    let previous = d.status.clone().unwrap_or_default();
    let mut status = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: nonzero(sum(&|rs| status_of(rs).replicas)),
        updated_replicas: nonzero(new.map_or(0, |rs| status_of(rs).replicas)),
        ready_replicas: nonzero(sum(&|rs| status_of(rs).ready_replicas.unwrap_or(0))),
        available_replicas: nonzero(available),
        unavailable_replicas: nonzero((total - available).max(0)),
        collision_count: previous.collision_count,
        conditions: previous.conditions.clone(),
        terminating_replicas: None,
    };
    if available >= desired(d) - max_unavailable {
        set_condition(
            &mut status,
            condition(
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.".into(),
                now,
            ),
        );
    } else {
        set_condition(
            &mut status,
            condition(
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.".into(),
                now,
            ),
        );
    }
    status
}

/// `DeploymentComplete`: every replica updated and available, and the
/// current generation observed.
pub fn is_complete(d: &Deployment, status: &DeploymentStatus) -> bool {
    let want = desired(d);
    status.updated_replicas.unwrap_or(0) == want
        && status.replicas.unwrap_or(0) == want
        && status.available_replicas.unwrap_or(0) == want
        && status.observed_generation >= d.metadata.generation
}

/// `DeploymentProgressing`: more updated, ready or available pods, or fewer old ones.
fn is_progressing(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let olds = |s: &DeploymentStatus| s.replicas.unwrap_or(0) - s.updated_replicas.unwrap_or(0);
    new.updated_replicas.unwrap_or(0) > old.updated_replicas.unwrap_or(0)
        || olds(new) < olds(&old)
        || new.ready_replicas.unwrap_or(0) > old.ready_replicas.unwrap_or(0)
        || new.available_replicas.unwrap_or(0) > old.available_replicas.unwrap_or(0)
}

/// When the rollout times out (`DeploymentTimedOut`), if it has not already.
pub fn deadline(d: &Deployment, status: &DeploymentStatus) -> Option<Timestamp> {
    let seconds = d.spec.as_ref()?.progress_deadline_seconds?;
    let current = get_condition(status, "Progressing")?;
    if current.reason.as_deref() == Some(NEW_RS_AVAILABLE)
        || current.reason.as_deref() == Some(TIMED_OUT)
    {
        return None;
    }
    let from = current.last_update_time.as_ref()?.0;
    from.checked_add(SignedDuration::from_secs(i64::from(seconds)))
        .ok()
}

/// `syncRolloutStatus`: the status with the Progressing condition updated.
pub fn rollout_status(
    d: &Deployment,
    all: &[&ReplicaSet],
    new: Option<&ReplicaSet>,
    max_unavailable: i32,
    now: Timestamp,
) -> DeploymentStatus {
    let mut status = calculate_status(d, all, new, max_unavailable, now);
    if !has_progress_deadline(d) {
        if let Some(conditions) = status.conditions.as_mut() {
            conditions.retain(|c| c.type_ != "Progressing");
        }
        return status;
    }
    let previous = d.status.clone().unwrap_or_default();
    let current = get_condition(&previous, "Progressing").cloned();
    let complete_before = status.replicas == status.updated_replicas
        && current.as_ref().and_then(|c| c.reason.as_deref()) == Some(NEW_RS_AVAILABLE);
    if complete_before {
        return status;
    }
    let name = d.metadata.name.clone().unwrap_or_default();
    let subject = |verb: &str| match new {
        Some(rs) => format!(
            "ReplicaSet {:?} {verb}",
            rs.metadata.name.clone().unwrap_or_default()
        ),
        None => format!("Deployment {name:?} {verb}"),
    };
    if is_complete(d, &status) {
        let c = condition(
            "Progressing",
            "True",
            NEW_RS_AVAILABLE,
            subject("has successfully progressed."),
            now,
        );
        set_condition(&mut status, c);
    } else if is_progressing(d, &status) {
        let mut c = condition(
            "Progressing",
            "True",
            RS_UPDATED,
            subject("is progressing."),
            now,
        );
        if let Some(current) = current {
            if current.status == "True" {
                c.last_transition_time = current.last_transition_time;
            }
            if let Some(conditions) = status.conditions.as_mut() {
                conditions.retain(|c| c.type_ != "Progressing");
            }
        }
        set_condition(&mut status, c);
    } else if deadline(d, &status).is_some_and(|t| t < now) {
        let c = condition(
            "Progressing",
            "False",
            TIMED_OUT,
            subject("has timed out progressing."),
            now,
        );
        set_condition(&mut status, c);
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(replicas: i32, status: serde_json::Value) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "generation": 2},
            "spec": {"replicas": replicas, "progressDeadlineSeconds": 600,
                     "selector": {}, "template": {}},
            "status": status
        }))
        .expect("deployment")
    }

    fn rs(name: &str, replicas: i32, ready: i32, available: i32) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {}},
            "status": {"replicas": replicas, "readyReplicas": ready, "availableReplicas": available}
        }))
        .expect("rs")
    }

    fn reason(status: &DeploymentStatus, type_: &str) -> Option<String> {
        get_condition(status, type_).and_then(|c| c.reason.clone())
    }

    #[test]
    fn status_sums_the_replica_sets_and_judges_availability() {
        let d = deployment(3, json!({}));
        let (old, new) = (rs("web-old", 2, 2, 2), rs("web-new", 2, 1, 0));
        let now = Timestamp::now();
        let status = calculate_status(&d, &[&old, &new], Some(&new), 1, now);
        assert_eq!(status.replicas, Some(4));
        assert_eq!(status.updated_replicas, Some(2));
        assert_eq!(status.ready_replicas, Some(3));
        assert_eq!(status.available_replicas, Some(2));
        assert_eq!(status.unavailable_replicas, Some(2));
        assert_eq!(status.observed_generation, Some(2));
        assert_eq!(
            reason(&status, "Available").as_deref(),
            Some("MinimumReplicasAvailable")
        );
        let status = calculate_status(&d, &[&old, &new], Some(&new), 0, now);
        assert_eq!(
            reason(&status, "Available").as_deref(),
            Some("MinimumReplicasUnavailable")
        );
        let status = calculate_status(&d, &[], None, 1, now);
        assert_eq!((status.replicas, status.unavailable_replicas), (None, None));
    }

    #[test]
    fn progressing_follows_the_rollout_to_completion() {
        let now = Timestamp::now();
        let d = deployment(3, json!({"updatedReplicas": 0, "replicas": 3}));
        let (old, new) = (rs("web-old", 2, 2, 2), rs("web-new", 2, 0, 0));
        let status = rollout_status(&d, &[&old, &new], Some(&new), 1, now);
        let progressing = get_condition(&status, "Progressing").expect("progressing");
        assert_eq!(progressing.reason.as_deref(), Some(RS_UPDATED));
        assert_eq!(
            progressing.message.as_deref(),
            Some("ReplicaSet \"web-new\" is progressing.")
        );

        let done = rs("web-new", 3, 3, 3);
        let status = rollout_status(&d, &[&done], Some(&done), 1, now);
        let progressing = get_condition(&status, "Progressing").expect("progressing");
        assert_eq!(progressing.reason.as_deref(), Some(NEW_RS_AVAILABLE));
        assert_eq!(
            progressing.message.as_deref(),
            Some("ReplicaSet \"web-new\" has successfully progressed.")
        );
        assert!(is_complete(&d, &status));
    }

    #[test]
    fn a_stalled_rollout_times_out_after_its_deadline() {
        let now = Timestamp::now();
        let long_ago = "2020-01-01T00:00:00Z";
        let d = deployment(
            3,
            json!({"updatedReplicas": 1, "replicas": 4, "readyReplicas": 3, "availableReplicas": 3, "conditions": [
                {"type": "Progressing", "status": "True", "reason": RS_UPDATED,
                 "lastUpdateTime": long_ago, "lastTransitionTime": long_ago}
            ]}),
        );
        let (old, new) = (rs("web-old", 3, 3, 3), rs("web-new", 1, 0, 0));
        let status = rollout_status(&d, &[&old, &new], Some(&new), 1, now);
        assert_eq!(reason(&status, "Progressing").as_deref(), Some(TIMED_OUT));
    }
}
