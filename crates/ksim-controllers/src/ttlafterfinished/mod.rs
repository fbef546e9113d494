//! The TTL-after-finished controller (kube-controller-manager's
//! `ttl-after-finished-controller`): a Job with `ttlSecondsAfterFinished`
//! is deleted (foreground propagation, so its pods go first) that many
//! seconds after its Complete or Failed condition. Each Job is re-queued at
//! its expiry (a timer, not polling), and re-read before the delete, which
//! carries the read's resourceVersion as a precondition.

use std::sync::Arc;
use std::time::Duration;

use crate::workloop::{Action, Queued};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, Preconditions, PropagationPolicy};
use kube::{Client, ResourceExt};

use crate::Error;
use crate::informer::SharedInformers;
use ksim_runtime::clock::Clock;

/// How long to wait before retrying a failed sync.
const RETRY: Duration = Duration::from_secs(1);

/// When the Job finished: its True Complete or Failed condition's
/// lastTransitionTime (`jobFinishTime`).
fn finish_time(job: &Job) -> Option<Timestamp> {
    job.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
}

/// How long until the finished Job expires (zero or less: it has); `None`
/// when it has no TTL, is not finished or is already being deleted.
pub fn time_left(job: &Job, now: Timestamp) -> Option<SignedDuration> {
    if job.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let ttl = job.spec.as_ref()?.ttl_seconds_after_finished?;
    let finished = finish_time(job)?;
    let expires = finished
        .checked_add(SignedDuration::from_secs(i64::from(ttl)))
        .ok()?;
    Some(now.duration_until(expires))
}

struct Context {
    client: Client,
    clock: Clock,
}

/// Runs the controller until the watch ends.
pub async fn run(client: Client, informers: SharedInformers) {
    let clock = informers.clock().clone();
    Queued::<Job>::new(client.clone(), &clock)
        .run(
            "ttl-after-finished",
            |job, context| Box::pin(reconcile(job, context)),
            error_policy,
            Arc::new(Context { client, clock }),
        )
        .await;
}

fn error_policy(_job: Arc<Job>, error: &Error, _context: Arc<Context>) -> Action {
    tracing::debug!(%error, "ttl-after-finished sync will be retried");
    Action::requeue(RETRY)
}

fn not_expired(left: SignedDuration) -> Option<Action> {
    (left > SignedDuration::ZERO)
        .then(|| Action::requeue(Duration::try_from(left).unwrap_or(RETRY)))
}

async fn reconcile(job: Arc<Job>, context: Arc<Context>) -> Result<Action, Error> {
    let Some(left) = time_left(&job, context.clock.timestamp()) else {
        return Ok(Action::await_change());
    };
    if let Some(later) = not_expired(left) {
        return Ok(later);
    }
    // The cache may be stale: decide again on a fresh read.
    let namespace = job.namespace().unwrap_or_default();
    let jobs: Api<Job> = Api::namespaced(context.client.clone(), &namespace);
    let Some(fresh) = jobs.get_opt(&job.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let Some(left) = time_left(&fresh, context.clock.timestamp()) else {
        return Ok(Action::await_change());
    };
    if let Some(later) = not_expired(left) {
        return Ok(later);
    }
    tracing::info!(job = %fresh.name_any(), %namespace, "cleaning up a finished job past its TTL");
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        preconditions: Some(Preconditions {
            resource_version: fresh.resource_version(),
            uid: None,
        }),
        ..DeleteParams::default()
    };
    match jobs.delete(&fresh.name_any(), &params).await {
        Ok(_) => Ok(Action::await_change()),
        Err(e) => {
            let e = Error::from(e);
            if e.is_not_found() {
                Ok(Action::await_change())
            } else {
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_finished_job_expires_its_ttl_after_the_finish() {
        let now: Timestamp = "2026-01-01T12:00:00Z".parse().expect("time");
        let job = |ttl: serde_json::Value, condition: &str, deleting: bool| -> Job {
            let mut value = json!({"metadata": {"name": "j"},
                "spec": {"template": {}, "ttlSecondsAfterFinished": ttl},
                "status": {"conditions": [{"type": condition, "status": "True",
                    "lastTransitionTime": "2026-01-01T11:59:00Z"}]}});
            if deleting {
                value["metadata"]["deletionTimestamp"] = json!("2026-01-01T11:59:30Z");
            }
            serde_json::from_value(value).expect("job")
        };
        let cases = [
            (
                "complete, 100 s",
                job(json!(100), "Complete", false),
                Some(40),
            ),
            ("failed, 0 s", job(json!(0), "Failed", false), Some(-60)),
            (
                "not finished",
                job(json!(100), "SuccessCriteriaMet", false),
                None,
            ),
            ("no ttl", job(json!(null), "Complete", false), None),
            ("being deleted", job(json!(100), "Complete", true), None),
        ];
        for (what, job, want) in cases {
            assert_eq!(
                time_left(&job, now),
                want.map(SignedDuration::from_secs),
                "{what}"
            );
        }
    }
}
