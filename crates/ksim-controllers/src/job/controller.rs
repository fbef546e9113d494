//! The Job controller's sync: count the Job's pods, judge where it stands,
//! create or delete pods, and write the status and conditions.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};

use super::progress::{Counts, Verdict, format_indexes, judge};
use crate::Error;
use crate::common::{
    controller_reference, is_pod_active, is_pod_ready, key_of, parse_selector, pod_phase,
    selector_query, update_status,
};
use crate::common::{create_pod, delete_pod};
use crate::controller_ref::{ControllerRefManager, Owner, OwnerMapper, ReleaseHints};
use crate::events::Events;

/// The annotation (and label) carrying an Indexed Job pod's index.
pub const COMPLETION_INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";

/// How long to wait before retrying a failed sync.
const RETRY: Duration = Duration::from_millis(500);

const COMPLETIONS_REACHED: (&str, &str) = (
    "CompletionsReached",
    "Reached expected number of succeeded pods",
);
const BACKOFF_LIMIT_EXCEEDED: (&str, &str) = (
    "BackoffLimitExceeded",
    "Job has reached the specified backoff limit",
);

struct Context {
    client: Client,
    events: Events,
    /// Owned pods that stopped matching their Job's selector.
    hints: ReleaseHints,
}

/// Runs the Job controller until the watch streams end.
pub async fn run(client: Client) {
    let jobs: Api<Job> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    let hints = ReleaseHints::default();
    let controller = Controller::new(jobs, watcher::Config::default());
    let mapper = OwnerMapper::new(
        controller.store(),
        |job: &Job| job.spec.as_ref().and_then(|s| s.selector.as_ref()),
        hints.clone(),
    );
    controller
        .watches(pods, watcher::Config::default(), move |pod: Pod| {
            mapper.owners_of(&pod)
        })
        .run(
            reconcile,
            error_policy,
            Arc::new(Context {
                events: Events::new(client.clone(), "job-controller"),
                client,
                hints,
            }),
        )
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "job sync failed");
            }
        })
        .await;
}

fn error_policy(_job: Arc<Job>, error: &Error, _context: Arc<Context>) -> Action {
    tracing::debug!(%error, "job sync will be retried");
    Action::requeue(RETRY)
}

fn has_condition(status: &JobStatus, type_: &str) -> bool {
    status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// Adds a True condition unless it is already there.
fn set_condition(
    status: &mut JobStatus,
    type_: &str,
    (reason, message): (&str, &str),
    now: Timestamp,
) {
    if has_condition(status, type_) {
        return;
    }
    status
        .conditions
        .get_or_insert_with(Vec::new)
        .push(JobCondition {
            type_: type_.to_string(),
            status: "True".to_string(),
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            last_probe_time: Some(Time(now)),
            last_transition_time: Some(Time(now)),
        });
}

/// An Indexed pod's completion index.
fn index_of(pod: &Pod) -> Option<i32> {
    pod.annotations()
        .get(COMPLETION_INDEX_ANNOTATION)
        .and_then(|i| i.parse().ok())
}

async fn reconcile(cached: Arc<Job>, context: Arc<Context>) -> Result<Action, Error> {
    let (namespace, name) = key_of(&cached.metadata);
    let jobs: Api<Job> = Api::namespaced(context.client.clone(), &namespace);
    let Some(job) = jobs.get_opt(&name).await? else {
        return Ok(Action::await_change());
    };
    if job.metadata.uid != cached.metadata.uid || job.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let previous = job.status.clone().unwrap_or_default();
    if has_condition(&previous, "Complete") || has_condition(&previous, "Failed") {
        return Ok(Action::await_change());
    }
    let spec = job
        .spec
        .as_ref()
        .ok_or_else(|| Error::Invalid(format!("job {namespace}/{name} has no spec")))?;
    let selector_spec = spec.selector.clone().unwrap_or_default();
    let selector = parse_selector(&selector_spec)?;
    let owner = controller_reference("batch/v1", "Job", &job.metadata);
    let indexed = spec.completion_mode.as_deref() == Some("Indexed");
    let completions = spec.completions;

    let pods_api: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    let listed = pods_api
        .list(&ListParams::default().labels(&selector_query(&selector_spec)))
        .await?
        .items;
    let pods: Vec<Pod> = claim_pods(&context, &jobs, &job, &owner, &selector, listed).await?;
    let mut active: Vec<&Pod> = pods.iter().filter(|p| is_pod_active(p)).collect();
    let failed = pods.iter().filter(|p| pod_phase(p) == "Failed").count();
    let succeeded_pods = pods.iter().filter(|p| pod_phase(p) == "Succeeded");
    let succeeded_indexes: BTreeSet<i32> = if indexed {
        succeeded_pods
            .clone()
            .filter_map(index_of)
            .filter(|i| completions.is_none_or(|c| *i < c) && *i >= 0)
            .collect()
    } else {
        BTreeSet::new()
    };
    let succeeded = if indexed {
        succeeded_indexes.len()
    } else {
        succeeded_pods.count()
    };
    let to_i32 = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    // Counts never go down when finished pods are removed.
    let succeeded = to_i32(succeeded).max(if indexed {
        0
    } else {
        previous.succeeded.unwrap_or(0)
    });
    let failed = to_i32(failed).max(previous.failed.unwrap_or(0));
    let counts = Counts {
        parallelism: spec.parallelism.unwrap_or(1),
        completions,
        backoff_limit: spec.backoff_limit.unwrap_or(6),
        suspended: spec.suspend == Some(true),
        active: to_i32(active.len()),
        succeeded,
        failed,
    };
    let now = Timestamp::now();
    let mut status = previous.clone();
    if status.start_time.is_none() && !counts.suspended {
        status.start_time = Some(Time(now));
    }
    let verdict = judge(&counts);
    let mut deletions: Vec<String> = Vec::new();
    let mut creations: Vec<Option<i32>> = Vec::new();
    match verdict {
        Verdict::Run(want) => {
            if indexed {
                let busy: BTreeSet<i32> = active.iter().filter_map(|p| index_of(p)).collect();
                let missing = (0..completions.unwrap_or(0))
                    .filter(|i| !succeeded_indexes.contains(i) && !busy.contains(i));
                let room = usize::try_from(want - counts.active).unwrap_or(0);
                creations.extend(missing.take(room).map(Some));
            } else if want > counts.active {
                let count = usize::try_from(want - counts.active).unwrap_or(0);
                creations.extend(std::iter::repeat_n(None, count));
            } else if want < counts.active {
                active.sort_by_key(|p| {
                    std::cmp::Reverse(p.metadata.creation_timestamp.as_ref().map(|t| t.0))
                });
                let surplus = usize::try_from(counts.active - want).unwrap_or(0);
                deletions.extend(active.iter().take(surplus).map(|p| p.name_any()));
            }
        }
        Verdict::Succeeded | Verdict::BackoffLimitExceeded => {
            let (interim, terminal, reason) = if verdict == Verdict::Succeeded {
                ("SuccessCriteriaMet", "Complete", COMPLETIONS_REACHED)
            } else {
                ("FailureTarget", "Failed", BACKOFF_LIMIT_EXCEEDED)
            };
            set_condition(&mut status, interim, reason, now);
            deletions.extend(active.iter().map(|p| p.name_any()));
            let terminating = pods.iter().any(|p| {
                p.metadata.deletion_timestamp.is_some()
                    && !matches!(pod_phase(p), "Succeeded" | "Failed")
            });
            if active.is_empty() && !terminating {
                set_condition(&mut status, terminal, reason, now);
                if verdict == Verdict::Succeeded {
                    status.completion_time = Some(Time(now));
                    context.events.normal(
                        job.object_ref(&()),
                        "Completed",
                        "Complete",
                        "Job completed".into(),
                    );
                } else {
                    context
                        .events
                        .warning(job.object_ref(&()), reason.0, "Fail", reason.1.into());
                }
            }
        }
    }

    let mut failure = None;
    for index in creations {
        let pod = job_pod(&job, &owner, index);
        if let Err(e) = create_pod(&pods_api, &context.events, job.object_ref(&()), &pod).await {
            failure = Some(e);
            break;
        }
    }
    for pod_name in &deletions {
        let owner = job.object_ref(&());
        match delete_pod(&pods_api, &context.events, owner, pod_name).await {
            Err(e) if !e.is_not_found() => failure = Some(e),
            _ => {}
        }
    }

    let finished = has_condition(&status, "Complete") || has_condition(&status, "Failed");
    let still_active: Vec<&Pod> = active
        .iter()
        .copied()
        .filter(|p| !deletions.contains(&p.name_any()))
        .collect();
    status.active = (!finished)
        .then(|| to_i32(still_active.len()))
        .filter(|n| *n > 0);
    status.ready = Some(if finished {
        0
    } else {
        to_i32(still_active.iter().filter(|p| is_pod_ready(p)).count())
    });
    status.succeeded = Some(counts.succeeded).filter(|n| *n > 0);
    status.failed = Some(counts.failed).filter(|n| *n > 0);
    if indexed {
        let done: Vec<i32> = succeeded_indexes.iter().copied().collect();
        status.completed_indexes = Some(format_indexes(&done)).filter(|s| !s.is_empty());
    }
    if status != previous {
        match update_status(&jobs, &name, |fresh| fresh.status = Some(status.clone())).await {
            Ok(_) => {}
            Err(e) if e.is_not_found() => return Ok(Action::await_change()),
            Err(e) => return Err(e),
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(Action::await_change())
}

/// A pod of `job` (of completion `index` when Indexed).
fn job_pod(job: &Job, owner: &OwnerReference, index: Option<i32>) -> Pod {
    let (namespace, name) = key_of(&job.metadata);
    let template = job
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let template_meta = template.metadata.unwrap_or_default();
    let mut labels = template_meta.labels.unwrap_or_default();
    let mut annotations = template_meta.annotations.unwrap_or_default();
    let mut spec = template.spec.unwrap_or_default();
    let generate_name = match index {
        Some(index) => {
            labels.insert(COMPLETION_INDEX_ANNOTATION.into(), index.to_string());
            annotations.insert(COMPLETION_INDEX_ANNOTATION.into(), index.to_string());
            spec.hostname = Some(format!("{name}-{index}"));
            format!("{name}-{index}-")
        }
        None => format!("{name}-"),
    };
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(generate_name),
            namespace: Some(namespace),
            labels: Some(labels),
            annotations: Some(annotations).filter(|a| !a.is_empty()),
            finalizers: template_meta.finalizers,
            owner_references: Some(vec![owner.clone()]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// Claims the Job's pods (upstream's `ClaimPods` in `getPodsForJob`):
/// matching orphans are adopted, owned pods that stopped matching (named by
/// the pod watch) released.
async fn claim_pods(
    context: &Context,
    jobs: &Api<Job>,
    job: &Job,
    owner: &OwnerReference,
    selector: &ksim_core::selector::LabelSelectorRequirements,
    mut listed: Vec<Pod>,
) -> Result<Vec<Pod>, Error> {
    let (namespace, name) = key_of(&job.metadata);
    let pods_api: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    context
        .hints
        .add_recorded(&pods_api, &namespace, &name, &mut listed)
        .await?;
    let owner = Owner {
        reference: owner,
        namespace: &namespace,
        deleting: job.metadata.deletion_timestamp.is_some(),
    };
    ControllerRefManager::new(owner, "Job", jobs.clone(), selector)
        .claim(&pods_api, listed, |_| true)
        .await
}
