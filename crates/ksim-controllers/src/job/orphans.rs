//! Releasing orphaned pods (`handleOrphanPod`, `cleanupPodFinalizers`): a
//! pod still holding the `batch.kubernetes.io/job-tracking` finalizer whose
//! Job is gone, replaced or finished loses the finalizer, so it can be
//! deleted. Fed by the controller's one pod watch (`informers`): only pods
//! with the finalizer and a Job owner are looked at, and the API is asked
//! only when the cache does not vouch for the Job.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::controller::{TRACKING_FINALIZER, is_finished};
use crate::common::controller_of;
use ksim_runtime::clock::Clock;

/// The owning Job's name and uid, for a pod holding the tracking finalizer.
fn tracked_owner(pod: &Pod) -> Option<(&str, &str)> {
    if !pod.finalizers().iter().any(|f| f == TRACKING_FINALIZER) {
        return None;
    }
    let owner = controller_of(&pod.metadata)?;
    (owner.kind == "Job" && owner.api_version.starts_with("batch/"))
        .then_some((owner.name.as_str(), owner.uid.as_str()))
}

/// Whether the Job `name` with `uid` exists and is still running.
fn running(job: Option<&Job>, uid: &str) -> bool {
    job.is_some_and(|j| {
        j.metadata.uid.as_deref() == Some(uid) && !j.status.as_ref().is_some_and(is_finished)
    })
}

/// Releases `pod` when it holds the finalizer for a Job that is gone,
/// replaced or finished: the API is asked (in a task of its own) only when
/// the cache does not vouch for the Job.
pub(crate) fn release_if_orphaned(client: &Client, jobs: &Store<Job>, pod: &Pod, clock: &Clock) {
    let Some((job_name, uid)) = tracked_owner(pod) else {
        return;
    };
    let namespace = pod.namespace().unwrap_or_default();
    let cached = jobs.get(&ObjectRef::new(job_name).within(&namespace));
    if running(cached.as_deref(), uid) {
        return;
    }
    let client = client.clone();
    let (job_name, uid) = (job_name.to_string(), uid.to_string());
    let name = pod.name_any();
    let busy = clock.busy();
    tokio::spawn(async move {
        let _busy = busy;
        let jobs: Api<Job> = Api::namespaced(client.clone(), &namespace);
        match jobs.get_opt(&job_name).await {
            Ok(live) if running(live.as_ref(), &uid) => return,
            Ok(_) => {}
            Err(error) => {
                tracing::debug!(%error, job = %job_name, "cannot read a pod's job");
                return;
            }
        }
        let pods: Api<Pod> = Api::namespaced(client, &namespace);
        let patch =
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER]}});
        match pods
            .patch(&name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
        {
            Ok(_) => tracing::debug!(pod = %name, %namespace, "released an orphaned job pod"),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => tracing::debug!(%error, pod = %name, "cannot release a job pod"),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_pods_holding_the_finalizer_under_a_job_are_candidates() {
        let pod = |finalizers: serde_json::Value, kind: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p", "finalizers": finalizers,
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": kind, "name": "j", "uid": "u", "controller": true}]}}))
            .expect("pod")
        };
        assert_eq!(
            tracked_owner(&pod(json!([TRACKING_FINALIZER]), "Job")),
            Some(("j", "u"))
        );
        assert_eq!(tracked_owner(&pod(json!([]), "Job")), None);
        assert_eq!(
            tracked_owner(&pod(json!([TRACKING_FINALIZER]), "ReplicaSet")),
            None
        );
        let job: Job =
            serde_json::from_value(json!({"metadata": {"name": "j", "uid": "u"}})).expect("job");
        assert!(running(Some(&job), "u"));
        assert!(!running(Some(&job), "other"));
        assert!(!running(None, "u"));
    }
}
