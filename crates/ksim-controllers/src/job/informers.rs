//! The Job controller's one pod watch and the caches it feeds: every pod
//! in a [`PodIndex`] (a Job finds its pods by controller uid, adoption
//! candidates through the orphan index), the expectations (pod creations
//! and deletions a sync issued, observed here) and the finalizer-removal
//! expectations (pods whose tracking finalizer a sync removed: until the
//! cache shows it gone, a sync must not count them again, as upstream's
//! `uidTrackingExpectations`). Each pod event queues the Job it concerns,
//! and a pod left holding the finalizer by a Job that is gone or finished
//! is released ([`super::orphans`]).

use crate::workloop::Requests;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use futures::{Stream, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::{self, Event};

use super::controller::TRACKING_FINALIZER;
use super::orphans::release_if_orphaned;
use crate::cache::PodIndex;
use crate::common::{controller_of, key_of};
use crate::controller_ref::OwnerMapper;
use crate::replicaset::Expectations;

/// The uid of the Job controlling `pod`, if one does.
pub(crate) fn job_uid(pod: &Pod) -> Option<&str> {
    controller_of(&pod.metadata)
        .filter(|owner| owner.kind == "Job" && owner.api_version.starts_with("batch/"))
        .map(|owner| owner.uid.as_str())
}

fn holds_finalizer(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == TRACKING_FINALIZER)
}

/// Pods (by uid) whose tracking finalizer each Job (by uid) removed and
/// the cache still shows.
#[derive(Debug, Default)]
pub(crate) struct FinalizerRemovals {
    by_job: Mutex<HashMap<String, HashSet<String>>>,
}

impl FinalizerRemovals {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, HashSet<String>>) -> T) -> T {
        f(&mut self.by_job.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The Job is about to remove the finalizer of `pod_uid`.
    pub(crate) fn expect(&self, job_uid: &str, pod_uid: &str) {
        self.with(|map| {
            map.entry(job_uid.to_string())
                .or_default()
                .insert(pod_uid.to_string());
        });
    }

    /// The removal was observed (or will not happen).
    pub(crate) fn observed(&self, job_uid: &str, pod_uid: &str) {
        self.with(|map| {
            if let Some(pods) = map.get_mut(job_uid) {
                pods.remove(pod_uid);
                if pods.is_empty() {
                    map.remove(job_uid);
                }
            }
        });
    }

    /// The pods whose removal the Job still waits to observe.
    pub(crate) fn pending(&self, job_uid: &str) -> HashSet<String> {
        self.with(|map| map.get(job_uid).cloned().unwrap_or_default())
    }

    /// The Job is gone.
    pub(crate) fn forget(&self, job_uid: &str) {
        self.with(|map| {
            map.remove(job_uid);
        });
    }
}

/// What the pod watch updates.
pub(crate) struct PodFollower {
    pub(crate) client: Client,
    pub(crate) pods: Arc<RwLock<PodIndex>>,
    pub(crate) jobs: Store<Job>,
    pub(crate) mapper: OwnerMapper<Job>,
    pub(crate) expectations: Arc<Expectations>,
    pub(crate) removals: Arc<FinalizerRemovals>,
    pub(crate) queue: Requests<Job>,
    pub(crate) synced: tokio::sync::watch::Sender<bool>,
}

impl PodFollower {
    /// Records what a pod's new version (`None`: gone) shows of the
    /// creations, deletions and finalizer removals a sync waits for.
    fn observe(&self, old: Option<&Pod>, new: Option<&Pod>, gone: &Pod) {
        let pod = new.unwrap_or(gone);
        let Some(uid) = job_uid(pod) else {
            return;
        };
        let key = key_of(&pod.metadata);
        match new {
            Some(new) => {
                if old.is_none() {
                    self.expectations.creations_observed(uid, 1);
                }
                let was_deleting = old.is_some_and(|o| o.metadata.deletion_timestamp.is_some());
                if new.metadata.deletion_timestamp.is_some() && !was_deleting {
                    self.expectations.deletion_observed(uid, &key);
                }
                if !holds_finalizer(new) {
                    self.removals
                        .observed(uid, new.metadata.uid.as_deref().unwrap_or_default());
                }
            }
            None => {
                self.expectations.deletion_observed(uid, &key);
                self.removals
                    .observed(uid, gone.metadata.uid.as_deref().unwrap_or_default());
            }
        }
    }
}

/// Keeps the pod cache and the expectations, releases orphaned pods, and
/// queues the Jobs each change concerns.
pub(crate) async fn follow_pods(
    stream: impl Stream<Item = Event<Arc<Pod>>>,
    follower: PodFollower,
) {
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        let mut changed: Vec<Arc<Pod>> = Vec::new();
        {
            let mut pods = follower.pods.write().expect("pod index lock poisoned");
            match event {
                Event::Apply(pod) | Event::InitApply(pod) => {
                    let old = pods.apply(Arc::clone(&pod));
                    follower.observe(old.as_deref(), Some(&pod), &pod);
                    if let Some(old) = old
                        && (old.metadata.labels != pod.metadata.labels
                            || old.metadata.owner_references != pod.metadata.owner_references)
                    {
                        changed.push(old);
                    }
                    release_if_orphaned(
                        &follower.client,
                        &follower.jobs,
                        &pod,
                        follower.queue.clock(),
                    );
                    changed.push(pod);
                }
                Event::Delete(pod) => {
                    let cached = pods.delete(&pod);
                    follower.observe(cached.as_deref(), None, &pod);
                    changed.extend(cached);
                    changed.push(pod);
                }
                Event::Init => pods.start_relist(),
                Event::InitDone => {
                    for pod in pods.finish_relist() {
                        follower.observe(Some(&pod), None, &pod);
                        changed.push(pod);
                    }
                    tracing::debug!(pods = pods.len(), "job controller pod cache synced");
                    follower.synced.send_replace(true);
                }
            }
        }
        let mut seen = HashSet::new();
        for pod in &changed {
            for reference in follower.mapper.owners_of(pod.as_ref()) {
                if seen.insert(reference.clone())
                    && follower.queue.unbounded_send(reference).is_err()
                {
                    return;
                }
            }
        }
    }
}

/// Keeps the Job store (the reflector does) and queues every Job that
/// changes; a deleted Job's expectations are forgotten and its pods still
/// holding the finalizer released.
pub(crate) async fn follow_jobs(
    stream: impl Stream<Item = Result<Event<Job>, watcher::Error>>,
    context: JobFollower,
) {
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        let job = match event {
            Ok(Event::Apply(job) | Event::InitApply(job)) => job,
            Ok(Event::Delete(job)) => {
                let (namespace, _) = key_of(&job.metadata);
                if let Some(uid) = job.metadata.uid.as_deref() {
                    context.expectations.forget(uid);
                    context.removals.forget(uid);
                    (context.forget)(uid);
                    let owned = context
                        .pods
                        .read()
                        .expect("pod index lock poisoned")
                        .controlled_by(&namespace, uid);
                    for pod in owned {
                        release_if_orphaned(
                            &context.client,
                            &context.jobs,
                            &pod,
                            context.queue.clock(),
                        );
                    }
                }
                continue;
            }
            Ok(Event::Init | Event::InitDone) => continue,
            Err(error) => {
                tracing::debug!(%error, "job watch failed");
                continue;
            }
        };
        if context
            .queue
            .unbounded_send(ObjectRef::from_obj(&job))
            .is_err()
        {
            return;
        }
    }
}

/// What the Job watch updates.
pub(crate) struct JobFollower {
    pub(crate) client: Client,
    pub(crate) pods: Arc<RwLock<PodIndex>>,
    pub(crate) jobs: Store<Job>,
    pub(crate) expectations: Arc<Expectations>,
    pub(crate) removals: Arc<FinalizerRemovals>,
    /// Forgets what else the controller keeps per Job (its backoff record).
    pub(crate) forget: Box<dyn Fn(&str) + Send + Sync>,
    pub(crate) queue: Requests<Job>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finalizer_removals_are_pending_until_observed() {
        let removals = FinalizerRemovals::default();
        assert!(removals.pending("job").is_empty());
        removals.expect("job", "a");
        removals.expect("job", "b");
        removals.expect("other", "c");
        assert_eq!(removals.pending("job").len(), 2);
        removals.observed("job", "a");
        removals.observed("job", "a");
        assert_eq!(
            removals.pending("job"),
            HashSet::from(["b".to_string()]),
            "b is still shown with its finalizer"
        );
        removals.forget("job");
        assert!(removals.pending("job").is_empty());
        assert_eq!(removals.pending("other").len(), 1, "other jobs keep theirs");
    }
}
