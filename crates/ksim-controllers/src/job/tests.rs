//! In-process: the Job controller runs pods to completion or failure (pod
//! phases and exit codes set by the test, as the kubelet simulator's stages
//! would): completions, backoff limit, active deadline, pod failure and
//! success policies, the tracking finalizer and suspension.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use std::time::Duration;

use crate::ControllerName;
use crate::job::{JobConfig, run_with};
use crate::statefulset::testing::{Cluster, eventually};

/// The pod failure backoff the tests run with (upstream's 10 s would
/// only slow them down).
const TEST_BACKOFF: Duration = Duration::from_millis(200);

/// A cluster running the Job controller with [`TEST_BACKOFF`].
fn start() -> Cluster {
    start_with_backoff(TEST_BACKOFF)
}

fn start_with_backoff(backoff: Duration) -> Cluster {
    let config = JobConfig {
        pod_failure_backoff: backoff,
        ..JobConfig::default()
    };
    Cluster::start_with(move |client| {
        run_with(client.clone(), config, crate::SharedInformers::new(client))
    })
}

fn job(name: &str, spec: serde_json::Value) -> Job {
    let mut value = json!({
        "metadata": {"name": name},
        "spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
        }
    });
    for (k, v) in spec.as_object().expect("object") {
        value["spec"][k] = v.clone();
    }
    serde_json::from_value(value).expect("job")
}

fn conditions(job: &Job) -> Vec<(String, String)> {
    job.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .map(|c| (c.type_.clone(), c.reason.clone().unwrap_or_default()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runs_parallelism_pods_until_completions_succeed() {
    let cluster = start();
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &job("pi", json!({"completions": 3, "parallelism": 2})),
    )
    .await
    .expect("create");
    let mut done = Vec::new();
    while done.len() < 3 {
        let running = eventually("active pods", || async {
            let pods = cluster.pods("job-name=pi").await;
            let active: Vec<String> = pods
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Succeeded"))
                .map(|p| p.name_any())
                .collect();
            let want = (3 - done.len()).min(2);
            (active.len() == want).then_some(active)
        })
        .await;
        let pod = running[0].clone();
        assert!(pod.starts_with("pi-"), "{pod}");
        cluster.set_phase(&pod, "Running").await;
        cluster.set_phase(&pod, "Succeeded").await;
        done.push(pod);
    }
    let finished = eventually("Complete", || async {
        let job = jobs.get("pi").await.ok()?;
        conditions(&job)
            .iter()
            .any(|(t, _)| t == "Complete")
            .then_some(job)
    })
    .await;
    assert_eq!(
        conditions(&finished),
        [
            (
                "SuccessCriteriaMet".to_string(),
                "CompletionsReached".to_string()
            ),
            ("Complete".to_string(), "CompletionsReached".to_string())
        ]
    );
    let status = finished.status.expect("status");
    assert_eq!(status.succeeded, Some(3));
    assert_eq!(status.active, None);
    assert!(status.start_time.is_some() && status.completion_time.is_some());
    assert_eq!(
        cluster.pods("job-name=pi").await.len(),
        3,
        "no pod beyond completions"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_beyond_the_backoff_limit_fail_the_job() {
    let cluster = start();
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &job("flaky", json!({"backoffLimit": 1})),
    )
    .await
    .expect("create");
    for attempt in 1..=2 {
        let pod = eventually("a pod to fail", || async {
            let pods = cluster.pods("job-name=flaky").await;
            (pods.len() == attempt).then(|| {
                pods.into_iter()
                    .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Failed"))
            })?
        })
        .await;
        cluster.set_phase(&pod.name_any(), "Failed").await;
    }
    let failed = eventually("Failed", || async {
        let job = jobs.get("flaky").await.ok()?;
        conditions(&job)
            .iter()
            .any(|(t, _)| t == "Failed")
            .then_some(job)
    })
    .await;
    assert_eq!(
        conditions(&failed),
        [
            (
                "FailureTarget".to_string(),
                "BackoffLimitExceeded".to_string()
            ),
            ("Failed".to_string(), "BackoffLimitExceeded".to_string())
        ]
    );
    assert_eq!(failed.status.and_then(|s| s.failed), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_indexed_job_runs_one_pod_per_index() {
    let cluster = start();
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &job(
            "idx",
            json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed"}),
        ),
    )
    .await
    .expect("create");
    let pods = eventually("three indexed pods", || async {
        let pods = cluster.pods("job-name=idx").await;
        (pods.len() == 3).then_some(pods)
    })
    .await;
    let mut indexes: Vec<String> = pods
        .iter()
        .map(|p| p.annotations()["batch.kubernetes.io/job-completion-index"].clone())
        .collect();
    indexes.sort();
    assert_eq!(indexes, ["0", "1", "2"]);
    for pod in &pods {
        cluster.set_phase(&pod.name_any(), "Succeeded").await;
    }
    let status = eventually("Complete", || async {
        let job = jobs.get("idx").await.ok()?;
        conditions(&job)
            .iter()
            .any(|(t, _)| t == "Complete")
            .then_some(job.status?)
    })
    .await;
    assert_eq!(status.completed_indexes.as_deref(), Some("0-2"));
}

async fn wait_for_condition(jobs: &Api<Job>, name: &str, type_: &str) -> Job {
    eventually(type_, || async {
        let job = jobs.get(name).await.ok()?;
        conditions(&job)
            .iter()
            .any(|(t, _)| t == type_)
            .then_some(job)
    })
    .await
}

fn message_of(job: &Job, type_: &str) -> String {
    job.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .find(|c| c.type_ == type_)
        .and_then(|c| c.message.clone())
        .unwrap_or_default()
}

/// Fails a pod as the kubelet would: phase Failed, the container
/// terminated with `exit_code`, and extra pod conditions.
async fn fail_pod(cluster: &Cluster, name: &str, exit_code: i32, conditions: serde_json::Value) {
    let api: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Failed", "conditions": conditions,
            "containerStatuses": [{"name": "c", "image": "busybox", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"terminated": {"exitCode": exit_code, "reason": "Error"}}}]}})),
    )
    .await
    .expect("fail pod");
}

/// The one pod of the job not yet finished, once there are `count` pods.
async fn next_pod(cluster: &Cluster, job: &str, count: usize) -> Pod {
    eventually("the next pod", || async {
        let pods = cluster.pods(&format!("job-name={job}")).await;
        (pods.len() == count).then(|| {
            pods.into_iter().find(|p| {
                !matches!(
                    p.status.as_ref().and_then(|s| s.phase.as_deref()),
                    Some("Failed" | "Succeeded")
                )
            })
        })?
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_active_deadline_fails_the_job_and_deletes_its_pods() {
    let cluster = start();
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &job(
            "slow",
            json!({"completions": 2, "parallelism": 2, "activeDeadlineSeconds": 1}),
        ),
    )
    .await
    .expect("create");
    let failed = wait_for_condition(&jobs, "slow", "Failed").await;
    assert_eq!(
        conditions(&failed),
        [
            ("FailureTarget".to_string(), "DeadlineExceeded".to_string()),
            ("Failed".to_string(), "DeadlineExceeded".to_string())
        ]
    );
    assert_eq!(
        message_of(&failed, "Failed"),
        "Job was active longer than specified deadline"
    );
    let status = failed.status.expect("status");
    assert_eq!(
        status.failed,
        Some(2),
        "the deleted active pods count as failed"
    );
    assert_eq!(status.active, None);
    eventually("the pods gone", || async {
        cluster.pods("job-name=slow").await.is_empty().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fail_job_rule_fails_the_job_on_the_pods_exit_code() {
    let cluster = start();
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &job(
            "pfp",
            json!({"backoffLimit": 6, "podFailurePolicy": {"rules": [
                {"action": "FailJob", "onExitCodes": {"containerName": "c", "operator": "In", "values": [42]}}
            ]}}),
        ),
    )
    .await
    .expect("create");
    let pod = next_pod(&cluster, "pfp", 1).await;
    assert!(
        pod.finalizers()
            .iter()
            .any(|f| f == "batch.kubernetes.io/job-tracking"),
        "job pods carry the tracking finalizer"
    );
    fail_pod(&cluster, &pod.name_any(), 42, json!([])).await;
    let failed = wait_for_condition(&jobs, "pfp", "Failed").await;
    assert_eq!(
        conditions(&failed),
        [
            ("FailureTarget".to_string(), "PodFailurePolicy".to_string()),
            ("Failed".to_string(), "PodFailurePolicy".to_string())
        ]
    );
    assert_eq!(
        message_of(&failed, "Failed"),
        format!(
            "Container c for pod default/{} failed with exit code 42 matching FailJob rule at index 0",
            pod.name_any()
        )
    );
    assert_eq!(failed.status.and_then(|s| s.failed), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_failures_do_not_count_toward_the_backoff_limit() {
    let cluster = start();
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &job(
            "disrupted",
            json!({"backoffLimit": 0, "podFailurePolicy": {"rules": [
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
            ]}}),
        ),
    )
    .await
    .expect("create");
    let first = next_pod(&cluster, "disrupted", 1).await;
    fail_pod(
        &cluster,
        &first.name_any(),
        137,
        json!([{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}]),
    )
    .await;
    // A replacement comes although backoffLimit is 0, and nothing is counted.
    let second = next_pod(&cluster, "disrupted", 2).await;
    let job = jobs.get("disrupted").await.expect("job");
    assert!(conditions(&job).is_empty(), "{:?}", conditions(&job));
    assert_eq!(job.status.as_ref().and_then(|s| s.failed), None);
    fail_pod(&cluster, &second.name_any(), 1, json!([])).await;
    let failed = wait_for_condition(&jobs, "disrupted", "Failed").await;
    assert_eq!(
        conditions(&failed).last().map(|(_, r)| r.as_str()),
        Some("BackoffLimitExceeded")
    );
    assert_eq!(failed.status.and_then(|s| s.failed), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_survive_the_deletion_of_finished_pods() {
    let cluster = start();
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &job("tracked", json!({"completions": 2, "parallelism": 1})),
    )
    .await
    .expect("create");
    let first = next_pod(&cluster, "tracked", 1).await;
    cluster.set_phase(&first.name_any(), "Succeeded").await;
    // Counted, the pod loses its finalizer.
    eventually("the first success counted", || async {
        let job = jobs.get("tracked").await.ok()?;
        let pod = pods.get(&first.name_any()).await.ok()?;
        let released = !pod
            .finalizers()
            .iter()
            .any(|f| f == "batch.kubernetes.io/job-tracking");
        (job.status?.succeeded == Some(1) && released).then_some(())
    })
    .await;
    pods.delete(&first.name_any(), &Default::default())
        .await
        .expect("delete");
    let second = next_pod(&cluster, "tracked", 1).await;
    cluster.set_phase(&second.name_any(), "Succeeded").await;
    let done = wait_for_condition(&jobs, "tracked", "Complete").await;
    let status = done.status.expect("status");
    assert_eq!(status.succeeded, Some(2));
    let uncounted = status.uncounted_terminated_pods.unwrap_or_default();
    assert!(uncounted.succeeded.unwrap_or_default().is_empty());
    assert!(uncounted.failed.unwrap_or_default().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspending_deletes_the_active_pods_and_resuming_recreates_them() {
    let cluster = start();
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &job("pausable", json!({"completions": 4, "parallelism": 2})),
    )
    .await
    .expect("create");
    eventually("two pods", || async {
        (cluster.pods("job-name=pausable").await.len() == 2).then_some(())
    })
    .await;
    let suspend = |value: bool| {
        let jobs = jobs.clone();
        async move {
            jobs.patch(
                "pausable",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"suspend": value}})),
            )
            .await
            .expect("patch suspend");
        }
    };
    suspend(true).await;
    let suspended = eventually("suspended with no pods", || async {
        let job = jobs.get("pausable").await.ok()?;
        let pods = cluster.pods("job-name=pausable").await;
        (pods.is_empty() && conditions(&job).contains(&("Suspended".into(), "JobSuspended".into())))
            .then_some(job)
    })
    .await;
    let status = suspended.status.expect("status");
    assert_eq!(status.failed, None, "suspended pods are not failures");
    assert_eq!(status.active, None);
    suspend(false).await;
    let resumed = eventually("resumed with two pods", || async {
        let job = jobs.get("pausable").await.ok()?;
        let pods = cluster.pods("job-name=pausable").await;
        (pods.len() == 2 && conditions(&job).contains(&("Suspended".into(), "JobResumed".into())))
            .then_some(job)
    })
    .await;
    let suspended_condition = resumed
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .find(|c| c.type_ == "Suspended")
        .expect("condition");
    assert_eq!(suspended_condition.status, "False");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_success_policy_completes_an_indexed_job_early() {
    let cluster = start();
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &job(
            "leader",
            json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed",
                   "successPolicy": {"rules": [{"succeededIndexes": "0"}]}}),
        ),
    )
    .await
    .expect("create");
    let pods = eventually("three indexed pods", || async {
        let pods = cluster.pods("job-name=leader").await;
        (pods.len() == 3).then_some(pods)
    })
    .await;
    let leader = pods
        .iter()
        .find(|p| p.annotations()["batch.kubernetes.io/job-completion-index"] == "0")
        .expect("index 0");
    cluster.set_phase(&leader.name_any(), "Succeeded").await;
    let done = wait_for_condition(&jobs, "leader", "Complete").await;
    assert_eq!(
        conditions(&done),
        [
            (
                "SuccessCriteriaMet".to_string(),
                "SuccessPolicy".to_string()
            ),
            ("Complete".to_string(), "SuccessPolicy".to_string())
        ]
    );
    assert_eq!(message_of(&done, "Complete"), "Matched rules at index 0");
    let status = done.status.expect("status");
    assert_eq!(status.completed_indexes.as_deref(), Some("0"));
    assert_eq!(
        status.failed, None,
        "the pods stopped on success are not failures"
    );
    eventually("the other pods gone", || async {
        (cluster.pods("job-name=leader").await.len() == 1).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_job_is_deleted_with_its_pods_after_its_ttl() {
    let cluster = Cluster::start(&[
        ControllerName::Job,
        ControllerName::TtlAfterFinished,
        ControllerName::GarbageCollector,
    ]);
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &job("shortlived", json!({"ttlSecondsAfterFinished": 1})),
    )
    .await
    .expect("create");
    let pod = next_pod(&cluster, "shortlived", 1).await;
    cluster.set_phase(&pod.name_any(), "Succeeded").await;
    // A slow poll may find the Job already deleted by its TTL.
    eventually("Complete, or already gone", || async {
        match jobs.get_opt("shortlived").await.ok()? {
            None => Some(()),
            Some(job) => conditions(&job)
                .iter()
                .any(|(t, _)| t == "Complete")
                .then_some(()),
        }
    })
    .await;
    eventually("the job and its pod gone", || async {
        let gone = jobs.get_opt("shortlived").await.ok()?.is_none();
        (gone && cluster.pods("job-name=shortlived").await.is_empty()).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_past_its_backoff_limit_fails_and_the_job_ends_with_failed_indexes() {
    let cluster = start();
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &job(
            "perindex",
            json!({"completions": 2, "parallelism": 2, "completionMode": "Indexed",
                   "backoffLimitPerIndex": 1}),
        ),
    )
    .await
    .expect("create");
    let of_index = |pods: &[Pod], index: &str| -> Vec<Pod> {
        pods.iter()
            .filter(|p| p.annotations()["batch.kubernetes.io/job-completion-index"] == index)
            .cloned()
            .collect()
    };
    let pods = eventually("two indexed pods", || async {
        let pods = cluster.pods("job-name=perindex").await;
        (pods.len() == 2).then_some(pods)
    })
    .await;
    let first = of_index(&pods, "0").remove(0);
    assert_eq!(
        first.annotations()["batch.kubernetes.io/job-index-failure-count"],
        "0"
    );
    fail_pod(&cluster, &first.name_any(), 1, json!([])).await;
    // Index 0 gets one more try, which knows of the first failure.
    let retry = eventually("a second pod for index 0", || async {
        let pods = cluster.pods("job-name=perindex").await;
        let index0 = of_index(&pods, "0");
        (index0.len() == 2).then(|| {
            index0
                .into_iter()
                .find(|p| p.name_any() != first.name_any())
        })?
    })
    .await;
    assert_eq!(
        retry.annotations()["batch.kubernetes.io/job-index-failure-count"],
        "1"
    );
    fail_pod(&cluster, &retry.name_any(), 1, json!([])).await;
    let index1 = of_index(&pods, "1").remove(0);
    cluster.set_phase(&index1.name_any(), "Succeeded").await;
    let failed = wait_for_condition(&jobs, "perindex", "Failed").await;
    assert_eq!(
        conditions(&failed).last().map(|(_, r)| r.as_str()),
        Some("FailedIndexes")
    );
    assert_eq!(message_of(&failed, "Failed"), "Job has failed indexes");
    let status = failed.status.expect("status");
    assert_eq!(status.failed_indexes.as_deref(), Some("0"));
    assert_eq!(status.completed_indexes.as_deref(), Some("1"));
    assert_eq!(status.failed, Some(2));
    assert_eq!(
        cluster.pods("job-name=perindex").await.len(),
        3,
        "no third try for index 0"
    );
}

/// When a pod's Ready condition turned False (its finish time).
fn failed_at(pod: &Pod) -> k8s_openapi::jiff::Timestamp {
    pod.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .find(|c| c.type_ == "Ready")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
        .expect("a finish time")
}

fn created_at(pod: &Pod) -> k8s_openapi::jiff::Timestamp {
    pod.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .expect("a creation time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_pod_is_replaced_only_after_its_doubling_backoff() {
    let backoff = Duration::from_secs(2);
    let cluster = start_with_backoff(backoff);
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &job("retry", json!({"backoffLimit": 3})),
    )
    .await
    .expect("create");
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
    let mut wait = backoff;
    for failures in 1..=2 {
        let pod = next_pod(&cluster, "retry", failures).await;
        cluster.set_phase(&pod.name_any(), "Failed").await;
        let failed = failed_at(&pods.get(&pod.name_any()).await.expect("failed pod"));
        let replacement = next_pod(&cluster, "retry", failures + 1).await;
        // Creation times have whole seconds: allow one less.
        let waited = created_at(&replacement).duration_since(failed);
        let least = k8s_openapi::jiff::SignedDuration::try_from(wait)
            .expect("small")
            .saturating_sub(k8s_openapi::jiff::SignedDuration::from_secs(1));
        assert!(
            waited >= least,
            "replacement {failures} came {waited:?} after the failure, before the {wait:?} backoff"
        );
        wait *= 2;
    }
    let status = jobs
        .get("retry")
        .await
        .expect("job")
        .status
        .expect("status");
    assert_eq!(status.failed, Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wide_job_creates_exactly_its_parallelism_while_its_pods_change() {
    let cluster = start();
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &job("wide", json!({"completions": 500, "parallelism": 500})),
    )
    .await
    .expect("create");
    let pods = eventually("500 active pods", || async {
        let status = jobs.get("wide").await.ok()?.status?;
        (status.active == Some(500)).then_some(())?;
        let pods = cluster.pods("job-name=wide").await;
        (pods.len() >= 500).then_some(pods)
    })
    .await;
    assert_eq!(
        pods.len(),
        500,
        "no pod created twice while the cache lagged"
    );
    // Every pod changes (as the kubelet would) while the Job syncs.
    for pod in &pods {
        cluster.set_phase(&pod.name_any(), "Running").await;
    }
    for pod in &pods {
        cluster.set_phase(&pod.name_any(), "Succeeded").await;
    }
    wait_for_condition(&jobs, "wide", "Complete").await;
    assert_eq!(cluster.pods("job-name=wide").await.len(), 500);
}
