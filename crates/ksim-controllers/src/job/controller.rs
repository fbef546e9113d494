//! The Job controller's sync (`syncJob`): count the Job's pods through the
//! `batch.kubernetes.io/job-tracking` finalizer and
//! `status.uncountedTerminatedPods`, judge where the Job stands (backoff
//! limit, active deadline, pod failure and success policies, completions,
//! suspension), create or delete pods, and write the status and conditions.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use crate::workloop::{Action, requests, run_work_queue};
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobSpec, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use ksim_core::status::is_pod_terminal;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{self};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use super::backoff::{
    BackoffRecord, DEFAULT_POD_FAILURE_BACKOFF, MAX_POD_FAILURE_BACKOFF, finished_time,
    remaining_for,
};
use super::informers::{FinalizerRemovals, JobFollower, PodFollower, follow_jobs, follow_pods};
use super::policy::{FailureAction, match_pod_failure_policy, match_success_policy};
use super::progress::{format_indexes, is_complete, parse_indexes, want_active};
use crate::Error;
use crate::cache::PodIndex;
use crate::common::{
    controller_reference, is_pod_active, is_pod_ready, key_of, parse_selector, pod_phase,
    selector_matches, update_status, watch_all,
};
use crate::common::{create_pod, delete_pod};
use crate::controller_ref::{ControllerRefManager, Owner, OwnerMapper, ReleaseHints};
use crate::events::Events;
use crate::informer::SharedInformers;
use crate::replicaset::{Expectations, PodKey};
use ksim_runtime::clock::Clock;

/// The annotation (and label) carrying an Indexed Job pod's index.
pub const COMPLETION_INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";
/// The finalizer that keeps a Job's pod until its outcome is counted.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// The counted failures of earlier pods of the same index.
pub const INDEX_FAILURE_COUNT_ANNOTATION: &str = "batch.kubernetes.io/job-index-failure-count";
/// The ignored failures of earlier pods of the same index.
pub const INDEX_IGNORED_FAILURE_COUNT_ANNOTATION: &str =
    "batch.kubernetes.io/job-index-ignored-failure-count";

/// How long to wait before retrying a failed sync.
const RETRY: Duration = Duration::from_millis(500);
/// At most this many pods enter `uncountedTerminatedPods` per sync
/// (`MaxUncountedPods`).
const MAX_UNCOUNTED_PODS: usize = 500;
/// At most this many pods are created or deleted per sync.
const MAX_POD_CREATE_DELETE_PER_SYNC: usize = 500;
/// The first batch of pod creations (`SlowStartInitialBatchSize`).
const SLOW_START_INITIAL_BATCH_SIZE: usize = 1;
/// Finalizer removals in flight at once.
const PARALLEL_WRITES: usize = 16;

/// What the Job controller can be tuned with (tests shorten the backoff).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobConfig {
    /// The delay before replacing the first failed pod; it doubles per
    /// failure since the last success (upstream: 10 s).
    pub pod_failure_backoff: Duration,
    /// The longest such delay (upstream: 6 minutes).
    pub max_pod_failure_backoff: Duration,
}

impl Default for JobConfig {
    fn default() -> Self {
        JobConfig {
            pod_failure_backoff: DEFAULT_POD_FAILURE_BACKOFF,
            max_pod_failure_backoff: MAX_POD_FAILURE_BACKOFF,
        }
    }
}

/// Each Job's backoff record, by uid.
type BackoffRecords = Arc<Mutex<HashMap<String, BackoffRecord>>>;

struct Context {
    client: Client,
    events: Events,
    config: JobConfig,
    /// Every pod, indexed by controller uid and as orphans (one watch).
    pods: Arc<RwLock<PodIndex>>,
    /// Whether the pod cache has listed once.
    pods_synced: tokio::sync::watch::Receiver<bool>,
    expectations: Arc<Expectations>,
    removals: Arc<FinalizerRemovals>,
    backoffs: BackoffRecords,
    /// Pods the watch saw stop matching: the cache finds them by
    /// controller uid, so these records are only dropped.
    hints: ReleaseHints,
    clock: Clock,
}

/// Runs the Job controller, as upstream configures it, until the watch
/// streams end.
pub async fn run(client: Client, informers: SharedInformers) {
    run_with(client, JobConfig::default(), informers).await;
}

/// Runs the Job controller with `config` until the watch streams end.
pub async fn run_with(client: Client, config: JobConfig, informers: SharedInformers) {
    let (job_store, job_writer) = reflector::store::<Job>();
    let pods = Arc::new(RwLock::new(PodIndex::of_controller_kind("Job")));
    let expectations = Arc::new(Expectations::default());
    let removals = Arc::new(FinalizerRemovals::default());
    let backoffs: BackoffRecords = Arc::default();
    let hints = ReleaseHints::default();
    let (queue, requests) = requests::<Job>(informers.clock());
    let (pods_synced_tx, pods_synced) = tokio::sync::watch::channel(false);
    let forget_backoff = Arc::clone(&backoffs);
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(follow_jobs(
        reflector::reflector(
            job_writer,
            watch_all::<Job>(client.clone(), informers.clock()),
        ),
        JobFollower {
            client: client.clone(),
            pods: Arc::clone(&pods),
            jobs: job_store.clone(),
            expectations: Arc::clone(&expectations),
            removals: Arc::clone(&removals),
            forget: Box::new(move |uid| {
                forget_backoff
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(uid);
            }),
            queue: queue.clone(),
        },
    ));
    tasks.spawn(follow_pods(
        informers.pods(),
        PodFollower {
            client: client.clone(),
            pods: Arc::clone(&pods),
            jobs: job_store.clone(),
            mapper: OwnerMapper::new(
                job_store.clone(),
                |job: &Job| job.spec.as_ref().and_then(|s| s.selector.as_ref()),
                hints.clone(),
            ),
            expectations: Arc::clone(&expectations),
            removals: Arc::clone(&removals),
            queue,
            synced: pods_synced_tx,
        },
    ));
    if job_store.wait_until_ready().await.is_err() {
        tracing::warn!("job controller cache never synced");
        return;
    }
    let context = Arc::new(Context {
        events: Events::new(client.clone(), "job-controller", informers.clock()),
        clock: informers.clock().clone(),
        client,
        config,
        pods,
        pods_synced,
        expectations,
        removals,
        backoffs,
        hints,
    });
    run_work_queue(
        "job",
        |job, context| Box::pin(reconcile(job, context)),
        error_policy,
        context,
        job_store,
        requests,
    )
    .await;
    tasks.abort_all();
}

fn error_policy(_job: Arc<Job>, error: &Error, _context: Arc<Context>) -> Action {
    tracing::debug!(%error, "job sync will be retried");
    Action::requeue(RETRY)
}

fn condition<'a>(status: &'a JobStatus, type_: &str) -> Option<&'a JobCondition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_ && c.status == "True")
}

/// Whether the Job has its terminal Complete or Failed condition.
pub(crate) fn is_finished(status: &JobStatus) -> bool {
    condition(status, "Complete").is_some() || condition(status, "Failed").is_some()
}

fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> JobCondition {
    JobCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// `ensureJobConditionStatus`: sets the condition of `type_` to this
/// status, reason and message; a False one is not added where none was.
/// Returns whether anything changed.
fn ensure_condition(
    status: &mut JobStatus,
    type_: &str,
    value: &str,
    (reason, message): (&str, &str),
    now: Timestamp,
) -> bool {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if existing.status != value
            || existing.reason.as_deref() != Some(reason)
            || existing.message.as_deref() != Some(message)
        {
            *existing = new_condition(type_, value, reason, message, now);
            return true;
        }
        return false;
    }
    if value != "False" {
        conditions.push(new_condition(type_, value, reason, message, now));
        return true;
    }
    false
}

/// An Indexed pod's completion index.
fn index_of(pod: &Pod) -> Option<i32> {
    pod.annotations()
        .get(COMPLETION_INDEX_ANNOTATION)
        .and_then(|i| i.parse().ok())
}

fn has_tracking_finalizer(pod: &Pod) -> bool {
    pod.finalizers().iter().any(|f| f == TRACKING_FINALIZER)
}

fn uid_of(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

/// Being deleted and not finished (`controller.CountTerminatingPods`).
fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some() && !is_pod_terminal(pod)
}

/// How the Job is finishing: its interim condition (FailureTarget or
/// SuccessCriteriaMet) or, once that is written, its terminal one.
#[derive(Debug, Clone)]
struct Finish {
    type_: &'static str,
    reason: String,
    message: String,
}

impl Finish {
    fn new(type_: &'static str, (reason, message): (&str, &str)) -> Self {
        Finish {
            type_,
            reason: reason.to_string(),
            message: message.to_string(),
        }
    }

    fn is_success(&self) -> bool {
        matches!(self.type_, "SuccessCriteriaMet" | "Complete")
    }
}

/// What one sync knows about the Job and its pods.
struct Sync<'a> {
    job: &'a Job,
    spec: &'a JobSpec,
    pods: &'a [Arc<Pod>],
    /// Pods whose finalizer removal the cache has not shown yet: already
    /// counted, so treated as released.
    removing: &'a HashSet<String>,
    indexed: bool,
    completions: i32,
    /// Pods are replaced only once Failed (`onlyReplaceFailedPods`).
    only_failed: bool,
    /// `backoffLimitPerIndex` (Indexed Jobs only).
    per_index: Option<i32>,
}

fn annotation_count(pod: &Pod, key: &str) -> i32 {
    pod.annotations()
        .get(key)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl Sync<'_> {
    /// Holds the tracking finalizer, as far as this sync knows.
    fn tracked(&self, pod: &Pod) -> bool {
        has_tracking_finalizer(pod) && !self.removing.contains(uid_of(pod))
    }

    /// `isPodFailed`: Failed, or (unless only failed pods are replaced)
    /// deleted before it succeeded.
    fn is_failed(&self, pod: &Pod) -> bool {
        pod_phase(pod) == "Failed"
            || (!self.only_failed
                && pod.metadata.deletion_timestamp.is_some()
                && pod_phase(pod) != "Succeeded")
    }

    /// Counted pods of Indexed Jobs carry an index below completions.
    fn has_valid_index(&self, pod: &Pod) -> bool {
        !self.indexed || index_of(pod).is_some_and(|i| i >= 0 && i < self.completions)
    }

    /// Whether this failure counts toward `backoffLimit`.
    fn failure_counts(&self, pod: &Pod) -> bool {
        match_pod_failure_policy(self.spec.pod_failure_policy.as_ref(), pod).counts
    }

    /// The `FailJob` message of the first failed pod matching such a rule.
    fn fail_job_message(&self) -> Option<String> {
        let policy = self.spec.pod_failure_policy.as_ref()?;
        self.pods
            .iter()
            .filter(|p| self.is_failed(p))
            .find_map(|p| match_pod_failure_policy(Some(policy), p).fail_job_message)
    }

    /// `isIndexFailed`: a FailIndex rule matched, or the index's counted
    /// failures reached `backoffLimitPerIndex`.
    fn is_index_failed(&self, pod: &Pod) -> bool {
        let Some(limit) = self.per_index else {
            return false;
        };
        if !self.is_failed(pod) {
            return false;
        }
        let matched = match_pod_failure_policy(self.spec.pod_failure_policy.as_ref(), pod);
        if matched.action == Some(FailureAction::FailIndex) {
            return true;
        }
        matched.counts && annotation_count(pod, INDEX_FAILURE_COUNT_ANNOTATION) >= limit
    }

    /// The failure counts (counted, ignored) a new pod of `index` carries:
    /// those of the index's failed pods, plus their own failures.
    fn index_failure_counts(&self, index: i32) -> (i32, i32) {
        self.pods
            .iter()
            .filter(|p| index_of(p) == Some(index) && self.is_failed(p))
            .map(|p| {
                let counts = self.failure_counts(p);
                (
                    annotation_count(p, INDEX_FAILURE_COUNT_ANNOTATION) + i32::from(counts),
                    annotation_count(p, INDEX_IGNORED_FAILURE_COUNT_ANNOTATION)
                        + i32::from(!counts),
                )
            })
            .fold((0, 0), |(a, b), (c, d)| (a.max(c), b.max(d)))
    }

    /// Each index's last failed pod (by finish time), in one pass.
    fn last_failed_by_index(&self) -> HashMap<i32, (&Pod, Timestamp)> {
        let mut last: HashMap<i32, (&Pod, Timestamp)> = HashMap::new();
        for pod in self.pods.iter().filter(|p| self.is_failed(p)) {
            let Some(index) = index_of(pod) else {
                continue;
            };
            let finished = finished_time(pod);
            let entry = last.entry(index).or_insert((pod, finished));
            if finished > entry.1 {
                *entry = (pod, finished);
            }
        }
        last
    }

    /// `pastBackoffLimitOnFailure`: restarts of running pods' containers
    /// reach the limit (restartPolicy OnFailure only).
    fn past_backoff_limit_on_failure(&self) -> bool {
        let restart_policy = self
            .spec
            .template
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.as_deref());
        if restart_policy != Some("OnFailure") {
            return false;
        }
        let restarts: i64 = self
            .pods
            .iter()
            .filter(|p| matches!(pod_phase(p), "Running" | "Pending"))
            .filter_map(|p| p.status.as_ref())
            .flat_map(|s| {
                s.init_container_statuses
                    .iter()
                    .flatten()
                    .chain(s.container_statuses.iter().flatten())
            })
            .map(|c| i64::from(c.restart_count))
            .sum();
        let limit = i64::from(self.spec.backoff_limit.unwrap_or(6));
        if limit == 0 {
            restarts > 0
        } else {
            restarts >= limit
        }
    }
}

fn to_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

async fn reconcile(cached: Arc<Job>, context: Arc<Context>) -> Result<Action, Error> {
    let (namespace, name) = key_of(&cached.metadata);
    // As upstream, no sync before the pod cache has listed once.
    if context
        .pods_synced
        .clone()
        .wait_for(|synced| *synced)
        .await
        .is_err()
    {
        return Ok(Action::await_change());
    }
    context.hints.take(&namespace, &name);
    let jobs: Api<Job> = Api::namespaced(context.client.clone(), &namespace);
    let Some(job) = jobs.get_opt(&name).await? else {
        return Ok(Action::await_change());
    };
    if job.metadata.uid != cached.metadata.uid {
        return Ok(Action::await_change());
    }
    let mut status = job.status.clone().unwrap_or_default();
    if is_finished(&status) {
        return Ok(Action::await_change());
    }
    let spec = job
        .spec
        .as_ref()
        .ok_or_else(|| Error::Invalid(format!("job {namespace}/{name} has no spec")))?;
    if let Some(mode) = spec.completion_mode.as_deref()
        && mode != "NonIndexed"
        && mode != "Indexed"
    {
        context.events.warning(
            job.object_ref(&()),
            "UnknownCompletionMode",
            "Sync",
            "Skipped Job sync because completion mode is unknown".into(),
        );
        return Ok(Action::await_change());
    }
    let selector_spec = spec.selector.clone().unwrap_or_default();
    let selector = parse_selector(&selector_spec)?;
    let owner = controller_reference("batch/v1", "Job", &job.metadata);
    let pods_api: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    // Read before the cache, so that pods observed meanwhile only make the
    // expectations look less satisfied than they are, never more.
    let may_manage = context
        .expectations
        .satisfied(&owner.uid, context.clock.instant());
    let removing = context.removals.pending(&owner.uid);
    let pods = claim_pods(&context, &jobs, &job, &owner, &selector).await?;

    let sync = Sync {
        job: &job,
        spec,
        pods: &pods,
        removing: &removing,
        indexed: spec.completion_mode.as_deref() == Some("Indexed"),
        completions: spec.completions.unwrap_or(0),
        only_failed: spec.pod_replacement_policy.as_deref() == Some("Failed")
            || spec.pod_failure_policy.is_some(),
        per_index: spec
            .backoff_limit_per_index
            .filter(|_| spec.completion_mode.as_deref() == Some("Indexed")),
    };
    let now = context.clock.timestamp();
    let suspended = spec.suspend == Some(true);
    let uncounted = status.uncounted_terminated_pods.clone().unwrap_or_default();
    let uncounted_succeeded: HashSet<&str> = uncounted
        .succeeded
        .iter()
        .flatten()
        .map(String::as_str)
        .collect();
    let uncounted_failed: HashSet<&str> = uncounted
        .failed
        .iter()
        .flatten()
        .map(String::as_str)
        .collect();

    let active_pods: Vec<&Pod> = pods
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| is_pod_active(p))
        .collect();
    let mut terminating = to_i32(pods.iter().filter(|p| is_terminating(p)).count());
    // Finished pods not yet counted: they still carry the finalizer.
    let new_finished = |uncounted: &HashSet<&str>, finished: &dyn Fn(&Pod) -> bool| {
        pods.iter()
            .map(AsRef::as_ref)
            .filter(|p| sync.tracked(p) && !uncounted.contains(uid_of(p)))
            .filter(|p| sync.has_valid_index(p) && finished(p))
            .collect::<Vec<&Pod>>()
    };
    let new_succeeded = new_finished(&uncounted_succeeded, &|p| pod_phase(p) == "Succeeded");
    let new_failed = new_finished(&uncounted_failed, &|p| sync.is_failed(p));
    let backoff = context
        .backoffs
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&owner.uid)
        .copied()
        .unwrap_or_default()
        .advance(&new_succeeded, &new_failed);
    let mut succeeded =
        status.succeeded.unwrap_or(0) + to_i32(new_succeeded.len() + uncounted_succeeded.len());
    let failed = status.failed.unwrap_or(0)
        + to_i32(new_failed.iter().filter(|p| sync.failure_counts(p)).count())
        + to_i32(uncounted_failed.len());

    if status.start_time.is_none() && !suspended {
        status.start_time = Some(Time(now));
    }

    let mut requeue = None;
    let mut finish = condition(&status, "SuccessCriteriaMet").map(|c| Finish {
        type_: "SuccessCriteriaMet",
        reason: c.reason.clone().unwrap_or_default(),
        message: c.message.clone().unwrap_or_default(),
    });
    if finish.is_none() {
        if let Some(target) = condition(&status, "FailureTarget") {
            finish = Some(Finish {
                type_: "Failed",
                reason: target.reason.clone().unwrap_or_default(),
                message: target.message.clone().unwrap_or_default(),
            });
        } else if let Some(message) = sync.fail_job_message() {
            finish = Some(Finish::new("FailureTarget", ("PodFailurePolicy", &message)));
        }
    }
    if finish.is_none() {
        let backoff_limit = spec.backoff_limit.unwrap_or(6);
        if failed > backoff_limit || sync.past_backoff_limit_on_failure() {
            finish = Some(Finish::new(
                "FailureTarget",
                (
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                ),
            ));
        } else if let (Some(deadline), Some(start), false) = (
            spec.active_deadline_seconds,
            status.start_time.as_ref(),
            suspended,
        ) {
            let ends = start.0 + SignedDuration::from_secs(deadline);
            if now >= ends {
                finish = Some(Finish::new(
                    "FailureTarget",
                    (
                        "DeadlineExceeded",
                        "Job was active longer than specified deadline",
                    ),
                ));
            } else {
                requeue = Duration::try_from(now.duration_until(ends)).ok();
            }
        }
    }

    let previous_indexes = if sync.indexed {
        parse_indexes(
            status.completed_indexes.as_deref().unwrap_or_default(),
            sync.completions,
        )
    } else {
        BTreeSet::new()
    };
    let mut succeeded_indexes = previous_indexes.clone();
    let mut failed_indexes: Option<BTreeSet<i32>> = None;
    if sync.indexed {
        succeeded_indexes.extend(
            pods.iter()
                .filter(|p| pod_phase(p) == "Succeeded" && sync.has_valid_index(p))
                .filter_map(|p| index_of(p)),
        );
        succeeded = to_i32(succeeded_indexes.len());
        if sync.per_index.is_some() {
            failed_indexes = Some(calculate_failed_indexes(&sync, &status));
        }
        if let Some(failed_indexes) = &failed_indexes
            && finish.is_none()
        {
            let failed_count = to_i32(failed_indexes.len());
            if spec
                .max_failed_indexes
                .is_some_and(|max| failed_count > max)
            {
                finish = Some(Finish::new(
                    "FailureTarget",
                    (
                        "MaxFailedIndexesExceeded",
                        "Job has exceeded the specified maximal number of failed indexes",
                    ),
                ));
            } else if failed_count > 0 && failed_count + succeeded >= sync.completions {
                finish = Some(Finish::new(
                    "FailureTarget",
                    ("FailedIndexes", "Job has failed indexes"),
                ));
            }
        }
        if finish.is_none()
            && let Some(message) = match_success_policy(
                spec.success_policy.as_ref(),
                sync.completions,
                &succeeded_indexes,
            )
        {
            finish = Some(Finish::new(
                "SuccessCriteriaMet",
                ("SuccessPolicy", &message),
            ));
        }
    }

    let mut active = to_i32(active_pods.len());
    let mut ready = to_i32(active_pods.iter().filter(|p| is_pod_ready(p)).count());
    let mut failure: Option<Error> = None;
    let job_ref = job.object_ref(&());
    if finish.is_some() {
        // Remove the active pods, keeping their finalizers: they are
        // counted (as failed unless the Job succeeded) once terminating.
        let mut deleted = 0;
        for pod in &active_pods {
            match delete_pod(&pods_api, &context.events, job_ref.clone(), &pod.name_any()).await {
                Err(e) if !e.is_not_found() => failure = Some(e),
                _ => {
                    deleted += 1;
                    if is_pod_ready(pod) {
                        ready -= 1;
                    }
                }
            }
        }
        if deleted != active {
            finish = None;
        }
        active -= deleted;
        terminating += deleted;
    } else {
        if job.metadata.deletion_timestamp.is_none() && may_manage {
            let managed = manage_job(
                &sync,
                &context,
                &pods_api,
                &owner,
                &active_pods,
                Progress {
                    succeeded,
                    succeeded_indexes: &succeeded_indexes,
                    failed_indexes: failed_indexes.as_ref(),
                    terminating,
                    backoff: &backoff,
                },
            )
            .await;
            if let Some(wait) = managed.backoff {
                requeue = Some(requeue.map_or(wait, |r: Duration| r.min(wait)));
            }
            active += managed.created - managed.deleted;
            terminating += managed.deleted;
            ready -= managed.deleted_ready;
            failure = managed.error;
            if suspended {
                if ensure_condition(
                    &mut status,
                    "Suspended",
                    "True",
                    ("JobSuspended", "Job suspended"),
                    now,
                ) {
                    context.events.normal(
                        job_ref.clone(),
                        "Suspended",
                        "Suspend",
                        "Job suspended".into(),
                    );
                }
            } else if ensure_condition(
                &mut status,
                "Suspended",
                "False",
                ("JobResumed", "Job resumed"),
                now,
            ) {
                context
                    .events
                    .normal(job_ref.clone(), "Resumed", "Resume", "Job resumed".into());
                // The active deadline counts from the resume.
                status.start_time = Some(Time(now));
            }
        }
        if is_complete(spec.completions, succeeded, active) {
            finish = Some(Finish::new(
                "SuccessCriteriaMet",
                (
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                ),
            ));
        }
    }
    if let Some(failed_indexes) = &failed_indexes {
        let failed: Vec<i32> = failed_indexes.iter().copied().collect();
        status.failed_indexes = Some(format_indexes(&failed));
    }
    status.active = Some(active).filter(|n| *n > 0);
    status.ready = Some(ready.max(0));
    status.terminating = Some(terminating.max(0));

    let tracked = track_and_remove_finalizers(
        &sync,
        &context,
        &jobs,
        &pods_api,
        status,
        &previous_indexes,
        succeeded_indexes,
        finish,
        terminating,
    )
    .await;
    if tracked.is_ok() {
        context
            .backoffs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(owner.uid.clone(), backoff);
    }
    if let Err(e) = tracked {
        return if e.is_not_found() {
            Ok(Action::await_change())
        } else {
            Err(e)
        };
    }
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(requeue.map_or_else(Action::await_change, Action::requeue))
}

/// `calculateFailedIndexes`: the recorded failed indexes and those of
/// newly failed pods.
fn calculate_failed_indexes(sync: &Sync<'_>, status: &JobStatus) -> BTreeSet<i32> {
    let mut failed = parse_indexes(
        status.failed_indexes.as_deref().unwrap_or_default(),
        sync.completions,
    );
    failed.extend(
        sync.pods
            .iter()
            .filter(|p| sync.tracked(p) && sync.has_valid_index(p))
            .filter(|p| sync.is_index_failed(p))
            .filter_map(|p| index_of(p)),
    );
    failed
}

/// What `manage_job` did.
#[derive(Default)]
struct Managed {
    created: i32,
    deleted: i32,
    deleted_ready: i32,
    error: Option<Error>,
    /// Creations wait this long for the pod failure backoff.
    backoff: Option<Duration>,
}

/// Where the Job stands, for `manage_job`.
struct Progress<'a> {
    succeeded: i32,
    succeeded_indexes: &'a BTreeSet<i32>,
    failed_indexes: Option<&'a BTreeSet<i32>>,
    terminating: i32,
    backoff: &'a BackoffRecord,
}

/// `manageJob`: delete every active pod of a suspended Job; otherwise
/// delete the surplus (and duplicate indexes) or create the missing pods.
async fn manage_job(
    sync: &Sync<'_>,
    context: &Context,
    pods_api: &Api<Pod>,
    owner: &OwnerReference,
    active_pods: &[&Pod],
    progress: Progress<'_>,
) -> Managed {
    let Progress {
        succeeded,
        succeeded_indexes,
        failed_indexes,
        terminating,
        backoff,
    } = progress;
    let job = sync.job;
    let active = to_i32(active_pods.len());
    let mut managed = Managed::default();
    let want = if sync.spec.suspend == Some(true) {
        0
    } else {
        want_active(
            sync.spec.parallelism.unwrap_or(1),
            sync.spec.completions,
            succeeded,
            active,
        )
    };
    let removals = pods_for_removal(
        sync,
        active_pods,
        usize::try_from(active - want).unwrap_or(0),
    );
    if !removals.is_empty() {
        let removals: Vec<&Pod> = removals
            .into_iter()
            .take(MAX_POD_CREATE_DELETE_PER_SYNC)
            .collect();
        let keys: HashSet<PodKey> = removals.iter().map(|p| key_of(&p.metadata)).collect();
        context
            .expectations
            .expect(&owner.uid, 0, keys, context.clock.instant());
        for pod in removals {
            // Surplus pods are not failures: uncount them first.
            let removed = remove_finalizer_expected(context, &owner.uid, pods_api, pod).await;
            let result = match removed {
                Ok(()) => {
                    delete_pod(
                        pods_api,
                        &context.events,
                        job.object_ref(&()),
                        &pod.name_any(),
                    )
                    .await
                }
                Err(e) => Err(e),
            };
            if result.is_err() {
                context
                    .expectations
                    .deletion_observed(&owner.uid, &key_of(&pod.metadata));
            }
            match result {
                Err(e) if !e.is_not_found() => managed.error = Some(e),
                _ => {
                    managed.deleted += 1;
                    if is_pod_ready(pod) {
                        managed.deleted_ready += 1;
                    }
                }
            }
        }
        return managed;
    }
    let replacing = if sync.only_failed { terminating } else { 0 };
    let missing = usize::try_from(want - replacing - active).unwrap_or(0);
    if missing == 0 {
        return managed;
    }
    let (base, max) = (
        context.config.pod_failure_backoff,
        context.config.max_pod_failure_backoff,
    );
    let now = context.clock.timestamp();
    let wait = backoff.remaining(now, base, max);
    if !wait.is_zero() {
        managed.backoff = Some(wait);
        return managed;
    }
    let missing = missing.min(MAX_POD_CREATE_DELETE_PER_SYNC);
    let indexes: Vec<Option<i32>> = if sync.indexed {
        let busy: BTreeSet<i32> = active_pods.iter().filter_map(|p| index_of(p)).collect();
        let pending = (0..sync.completions)
            .filter(|i| !succeeded_indexes.contains(i) && !busy.contains(i))
            .filter(|i| failed_indexes.is_none_or(|f| !f.contains(i)))
            .take(missing);
        if sync.per_index.is_some() {
            // Each index waits by its own failures
            // (`getPodCreationInfoForIndependentIndexes`).
            let last_failed = sync.last_failed_by_index();
            let mut ready = Vec::new();
            for index in pending {
                match index_backoff(last_failed.get(&index).copied(), now, base, max) {
                    wait if wait.is_zero() => ready.push(Some(index)),
                    wait => {
                        managed.backoff = Some(managed.backoff.map_or(wait, |w| w.min(wait)));
                    }
                }
            }
            ready
        } else {
            pending.map(Some).collect()
        }
    } else {
        vec![None; missing]
    };
    if indexes.is_empty() {
        return managed;
    }
    let mut pods: Vec<Pod> = Vec::with_capacity(indexes.len());
    for index in indexes {
        let mut pod = job_pod(job, owner, index);
        if let (Some(index), Some(_)) = (index, sync.per_index) {
            let (counted, ignored) = sync.index_failure_counts(index);
            let annotations = pod
                .metadata
                .annotations
                .get_or_insert_with(Default::default);
            annotations.insert(INDEX_FAILURE_COUNT_ANNOTATION.into(), counted.to_string());
            if ignored > 0 {
                annotations.insert(
                    INDEX_IGNORED_FAILURE_COUNT_ANNOTATION.into(),
                    ignored.to_string(),
                );
            }
        }
        pods.push(pod);
    }
    // Slow start, as upstream: batches of 1, 2, 4, ... created at once;
    // a failed batch stops the rest until the next sync.
    context
        .expectations
        .expect_creations(&owner.uid, pods.len(), context.clock.instant());
    let mut batch = SLOW_START_INITIAL_BATCH_SIZE;
    let mut rest = pods.as_slice();
    while !rest.is_empty() {
        let (now, later) = rest.split_at(batch.min(rest.len()));
        let results = futures::future::join_all(
            now.iter()
                .map(|pod| create_pod(pods_api, &context.events, job.object_ref(&()), pod)),
        )
        .await;
        for result in results {
            match result {
                Ok(_) => managed.created += 1,
                Err(e) => managed.error = Some(e),
            }
        }
        if managed.error.is_some() {
            // The creations that failed or will not be tried are not
            // waited for.
            let skipped = pods.len() - usize::try_from(managed.created).unwrap_or(0);
            context.expectations.creations_observed(&owner.uid, skipped);
            break;
        }
        rest = later;
        batch *= 2;
    }
    managed
}

/// How long a new pod of an index must still wait, by the failures of the
/// index's last failed pod and its finish time (`getRemainingTimePerIndex`).
fn index_backoff(
    last_failed: Option<(&Pod, Timestamp)>,
    now: Timestamp,
    base: Duration,
    max: Duration,
) -> Duration {
    let Some((pod, finished)) = last_failed else {
        return Duration::ZERO;
    };
    let failures = annotation_count(pod, INDEX_FAILURE_COUNT_ANNOTATION)
        .saturating_add(annotation_count(
            pod,
            INDEX_IGNORED_FAILURE_COUNT_ANNOTATION,
        ))
        .saturating_add(1);
    remaining_for(failures, Some(finished), now, base, max)
}

/// `activePodsForRemoval`: pods of duplicate or invalid indexes first, then
/// the least advanced (unscheduled, pending, not ready, newest).
fn pods_for_removal<'a>(sync: &Sync<'_>, active_pods: &[&'a Pod], at_least: usize) -> Vec<&'a Pod> {
    let mut remove: Vec<&Pod> = Vec::new();
    let mut left: Vec<&Pod> = Vec::new();
    if sync.indexed {
        let mut seen = HashSet::new();
        let mut sorted = active_pods.to_vec();
        sorted.sort_by_key(|p| (index_of(p), is_pod_ready(p), std::cmp::Reverse(creation(p))));
        // The newest and least ready pod of a repeated index goes; sorted
        // by readiness and age, the last of an index is the one kept.
        for pod in sorted.into_iter().rev() {
            match index_of(pod) {
                Some(i) if i >= 0 && i < sync.completions && seen.insert(i) => left.push(pod),
                _ => remove.push(pod),
            }
        }
    } else {
        left = active_pods.to_vec();
    }
    if remove.len() < at_least {
        left.sort_by_key(|p| {
            let scheduled = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
            let running = pod_phase(p) == "Running";
            (
                scheduled,
                running,
                is_pod_ready(p),
                std::cmp::Reverse(creation(p)),
            )
        });
        let more = at_least - remove.len();
        remove.extend(left.into_iter().take(more));
    }
    remove
}

fn creation(pod: &Pod) -> Option<Timestamp> {
    pod.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

/// Removes the tracking finalizer (a gone pod needs none removed).
async fn remove_tracking_finalizer(pods_api: &Api<Pod>, pod: &Pod) -> Result<(), Error> {
    if !has_tracking_finalizer(pod) {
        return Ok(());
    }
    let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER]}});
    match pods_api
        .patch(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(e) => {
            let e = Error::from(e);
            if e.is_not_found() { Ok(()) } else { Err(e) }
        }
    }
}

/// Removes the tracking finalizer, expecting the cache to show it gone
/// (the expectation is dropped again when the patch fails).
async fn remove_finalizer_expected(
    context: &Context,
    job_uid: &str,
    pods_api: &Api<Pod>,
    pod: &Pod,
) -> Result<(), Error> {
    if !has_tracking_finalizer(pod) {
        return Ok(());
    }
    let pod_uid = uid_of(pod);
    context.removals.expect(job_uid, pod_uid);
    let result = remove_tracking_finalizer(pods_api, pod).await;
    if result.is_err() {
        context.removals.observed(job_uid, pod_uid);
    }
    result
}

/// `cleanUncountedPodsWithoutFinalizers`: pods listed as uncounted whose
/// finalizer is gone move into the counters. Returns whether any moved.
fn count_uncounted(status: &mut JobStatus, with_finalizer: &HashSet<String>) -> bool {
    let uncounted = status
        .uncounted_terminated_pods
        .get_or_insert_with(UncountedTerminatedPods::default);
    let mut moved = false;
    for (list, counter) in [
        (&mut uncounted.succeeded, &mut status.succeeded),
        (&mut uncounted.failed, &mut status.failed),
    ] {
        let uids = list.take().unwrap_or_default();
        let before = uids.len();
        let kept: Vec<String> = uids
            .into_iter()
            .filter(|u| with_finalizer.contains(u))
            .collect();
        if kept.len() != before {
            moved = true;
            *counter = Some(counter.unwrap_or(0) + to_i32(before - kept.len()));
        }
        *list = Some(kept).filter(|k| !k.is_empty());
    }
    moved
}

/// `trackJobStatusAndRemoveFinalizers`: records newly finished pods in
/// `uncountedTerminatedPods` (with the interim condition) and writes that,
/// removes their finalizers, moves them into the counters, and once nothing
/// is uncounted or terminating adds the terminal condition.
#[allow(clippy::too_many_arguments)]
async fn track_and_remove_finalizers(
    sync: &Sync<'_>,
    context: &Context,
    jobs: &Api<Job>,
    pods_api: &Api<Pod>,
    mut status: JobStatus,
    previous_indexes: &BTreeSet<i32>,
    mut succeeded_indexes: BTreeSet<i32>,
    mut finish: Option<Finish>,
    terminating: i32,
) -> Result<(), Error> {
    let job = sync.job;
    let name = job.name_any();
    let original = job.status.clone().unwrap_or_default();
    let mut with_finalizer: HashSet<String> = sync
        .pods
        .iter()
        .filter(|p| sync.tracked(p))
        .map(|p| uid_of(p).to_string())
        .collect();
    count_uncounted(&mut status, &with_finalizer);
    let uncounted = status
        .uncounted_terminated_pods
        .get_or_insert_with(UncountedTerminatedPods::default);
    let mut uncounted_succeeded = uncounted.succeeded.take().unwrap_or_default();
    let mut uncounted_failed = uncounted.failed.take().unwrap_or_default();
    let failing = finish.as_ref().is_some_and(|f| !f.is_success());
    let mut to_release: Vec<&Pod> = Vec::new();
    let mut reached_max = false;
    for pod in sync.pods.iter().filter(|p| sync.tracked(p)) {
        let failed = sync.is_failed(pod);
        let releasable = job.metadata.deletion_timestamp.is_some()
            || finish.is_some()
            || pod_phase(pod) == "Succeeded"
            || failed;
        if !releasable {
            continue;
        }
        to_release.push(pod);
        let uid = uid_of(pod).to_string();
        if pod_phase(pod) == "Succeeded" && !uncounted_failed.contains(&uid) {
            if sync.indexed {
                if let Some(i) = index_of(pod).filter(|_| sync.has_valid_index(pod))
                    && !previous_indexes.contains(&i)
                {
                    succeeded_indexes.insert(i);
                }
            } else if !uncounted_succeeded.contains(&uid) {
                uncounted_succeeded.push(uid);
            }
        } else if (failed || failing)
            && !uncounted_failed.contains(&uid)
            && sync.has_valid_index(pod)
            && sync.failure_counts(pod)
        {
            uncounted_failed.push(uid);
        }
        if uncounted_succeeded.len() + uncounted_failed.len() >= MAX_UNCOUNTED_PODS {
            reached_max = true;
            break;
        }
    }
    status.uncounted_terminated_pods = Some(UncountedTerminatedPods {
        succeeded: Some(uncounted_succeeded),
        failed: Some(uncounted_failed),
    });
    if sync.indexed {
        let done: Vec<i32> = succeeded_indexes.iter().copied().collect();
        status.completed_indexes = Some(format_indexes(&done));
        status.succeeded = Some(to_i32(done.len()));
    }
    let now = context.clock.timestamp();
    if let Some(f) = finish.as_mut() {
        if f.type_ == "FailureTarget" {
            ensure_condition(
                &mut status,
                "FailureTarget",
                "True",
                (&f.reason, &f.message),
                now,
            );
            f.type_ = "Failed";
        } else if f.type_ == "SuccessCriteriaMet" {
            ensure_condition(
                &mut status,
                "SuccessCriteriaMet",
                "True",
                (&f.reason, &f.message),
                now,
            );
            f.type_ = "Complete";
        }
    }
    if normalized(&status) != normalized(&original) {
        write_status(jobs, &name, &status).await?;
    }
    let mut release_error = None;
    for chunk in to_release.chunks(PARALLEL_WRITES) {
        let job_uid = job.metadata.uid.as_deref().unwrap_or_default();
        let results = futures::future::join_all(
            chunk
                .iter()
                .map(|pod| remove_finalizer_expected(context, job_uid, pods_api, pod)),
        )
        .await;
        for (pod, result) in chunk.iter().zip(results) {
            match result {
                Ok(()) => {
                    with_finalizer.remove(uid_of(pod));
                }
                Err(e) => release_error = Some(e),
            }
        }
    }
    let moved = count_uncounted(&mut status, &with_finalizer);
    let uncounted_left = status
        .uncounted_terminated_pods
        .as_ref()
        .is_some_and(|u| u.succeeded.is_some() || u.failed.is_some());
    let finished = match &finish {
        Some(f) if !reached_max && !uncounted_left && terminating <= 0 => {
            ensure_condition(&mut status, f.type_, "True", (&f.reason, &f.message), now);
            if f.type_ == "Complete" {
                status.completion_time = Some(Time(now));
            }
            Some(f.clone())
        }
        _ => None,
    };
    if moved || finished.is_some() {
        write_status(jobs, &name, &status).await?;
    }
    if let Some(f) = finished {
        let job_ref = job.object_ref(&());
        if f.type_ == "Complete" {
            let too_many = sync
                .spec
                .completions
                .is_some_and(|c| status.succeeded.unwrap_or(0) > c);
            if too_many {
                context.events.warning(
                    job_ref.clone(),
                    "TooManySucceededPods",
                    "Complete",
                    "Too many succeeded pods running after completion count reached".into(),
                );
            }
            context
                .events
                .normal(job_ref, "Completed", "Complete", "Job completed".into());
        } else {
            context
                .events
                .warning(job_ref, &f.reason, "Fail", f.message.clone());
        }
    }
    match release_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The status as written: empty uncounted lists and zero counters left out.
fn normalized(status: &JobStatus) -> JobStatus {
    let mut status = status.clone();
    status.succeeded = status.succeeded.filter(|n| *n > 0);
    status.failed = status.failed.filter(|n| *n > 0);
    status.active = status.active.filter(|n| *n > 0);
    status.completed_indexes = status.completed_indexes.filter(|s| !s.is_empty());
    if let Some(u) = status.uncounted_terminated_pods.as_mut() {
        u.succeeded = u.succeeded.take().filter(|l| !l.is_empty());
        u.failed = u.failed.take().filter(|l| !l.is_empty());
    }
    if status
        .uncounted_terminated_pods
        .as_ref()
        .is_some_and(|u| u.succeeded.is_none() && u.failed.is_none())
    {
        status.uncounted_terminated_pods = Some(UncountedTerminatedPods::default());
    }
    status
}

async fn write_status(jobs: &Api<Job>, name: &str, status: &JobStatus) -> Result<(), Error> {
    let status = normalized(status);
    update_status(jobs, name, |fresh| fresh.status = Some(status.clone())).await?;
    Ok(())
}

/// A pod of `job` (of completion `index` when Indexed), with the tracking
/// finalizer.
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
    let mut finalizers = template_meta.finalizers.unwrap_or_default();
    if !finalizers.iter().any(|f| f == TRACKING_FINALIZER) {
        finalizers.push(TRACKING_FINALIZER.to_string());
    }
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(generate_name),
            namespace: Some(namespace),
            labels: Some(labels),
            annotations: Some(annotations).filter(|a| !a.is_empty()),
            finalizers: Some(finalizers),
            owner_references: Some(vec![owner.clone()]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// Claims the Job's pods (upstream's `ClaimPods` in `getPodsForJob`) from
/// the pod cache: the pods it controls that its selector matches, plus the
/// matching orphans it adopts (adding the tracking finalizer); the owned
/// pods that stopped matching are released.
async fn claim_pods(
    context: &Context,
    jobs: &Api<Job>,
    job: &Job,
    owner: &OwnerReference,
    selector: &ksim_core::selector::LabelSelectorRequirements,
) -> Result<Vec<Arc<Pod>>, Error> {
    let (namespace, _) = key_of(&job.metadata);
    let deleting = job.metadata.deletion_timestamp.is_some();
    let (mut pods, unmatched, orphans) = {
        let cache = context.pods.read().expect("pod index lock poisoned");
        let (matched, unmatched): (Vec<Arc<Pod>>, Vec<Arc<Pod>>) = cache
            .controlled_by(&namespace, &owner.uid)
            .into_iter()
            .partition(|p| selector_matches(selector, p.metadata.labels.as_ref()));
        let orphans = if selector.is_empty() || deleting {
            Vec::new()
        } else {
            cache.orphans(&namespace, selector)
        };
        (matched, unmatched, orphans)
    };
    if unmatched.is_empty() && orphans.is_empty() {
        return Ok(pods);
    }
    let candidates: Vec<Pod> = unmatched
        .iter()
        .chain(orphans.iter())
        .map(|p| Pod::clone(p))
        .collect();
    let pods_api: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    let owner = Owner {
        reference: owner,
        namespace: &namespace,
        deleting,
    };
    let adopted = ControllerRefManager::new(owner, "Job", jobs.clone(), selector)
        .with_finalizers(&[TRACKING_FINALIZER])
        .claim(&pods_api, candidates, |_| true)
        .await?;
    pods.extend(adopted.into_iter().map(Arc::new));
    Ok(pods)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncounted_pods_without_finalizers_move_into_the_counters() {
        let mut status = JobStatus {
            succeeded: Some(1),
            uncounted_terminated_pods: Some(UncountedTerminatedPods {
                succeeded: Some(vec!["a".into(), "b".into()]),
                failed: Some(vec!["c".into()]),
            }),
            ..JobStatus::default()
        };
        let with_finalizer: HashSet<String> = ["b".to_string()].into_iter().collect();
        assert!(count_uncounted(&mut status, &with_finalizer));
        assert_eq!(status.succeeded, Some(2));
        assert_eq!(status.failed, Some(1));
        let uncounted = status.uncounted_terminated_pods.expect("uncounted");
        assert_eq!(uncounted.succeeded, Some(vec!["b".to_string()]));
        assert_eq!(uncounted.failed, None);
    }

    #[test]
    fn an_index_waits_by_its_last_failed_pods_failure_count() {
        let pod = |counted: &str, ignored: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p", "annotations": {
                INDEX_FAILURE_COUNT_ANNOTATION: counted,
                INDEX_IGNORED_FAILURE_COUNT_ANNOTATION: ignored,
            }}}))
            .expect("pod")
        };
        let failed = Timestamp::from_second(1_800_000_000).expect("time");
        let after = |s: i64| failed + SignedDuration::from_secs(s);
        let (base, max) = (Duration::from_secs(10), Duration::from_secs(360));
        let (first, third, ignored) = (pod("0", "0"), pod("2", "0"), pod("1", "1"));
        let cases = [
            ("no failed pod", None, 0, 0),
            ("a first failure", Some(&first), 4, 6),
            ("a third failure", Some(&third), 0, 40),
            ("ignored failures count too", Some(&ignored), 30, 10),
            ("past the delay", Some(&first), 11, 0),
        ];
        for (what, pod, elapsed, want) in cases {
            let got = index_backoff(pod.map(|p| (p, failed)), after(elapsed), base, max);
            assert_eq!(got, Duration::from_secs(want), "{what}");
        }
    }

    #[test]
    fn a_false_condition_is_not_added_but_a_true_one_flips() {
        let now = Timestamp::now();
        let mut status = JobStatus::default();
        assert!(!ensure_condition(
            &mut status,
            "Suspended",
            "False",
            ("JobResumed", "Job resumed"),
            now
        ));
        assert!(status.conditions.as_ref().is_none_or(Vec::is_empty));
        assert!(ensure_condition(
            &mut status,
            "Suspended",
            "True",
            ("JobSuspended", "Job suspended"),
            now
        ));
        assert!(!ensure_condition(
            &mut status,
            "Suspended",
            "True",
            ("JobSuspended", "Job suspended"),
            now
        ));
        assert!(ensure_condition(
            &mut status,
            "Suspended",
            "False",
            ("JobResumed", "Job resumed"),
            now
        ));
        let conditions = status.conditions.expect("conditions");
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].status, "False");
    }
}
