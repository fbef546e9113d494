//! In-process: the Job controller runs pods to completion or failure (pod
//! phases set by the test, as the kubelet simulator's stages would).

use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::ControllerName;
use crate::statefulset::testing::{Cluster, eventually};

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
    let cluster = Cluster::start(&[ControllerName::Job]);
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
    let cluster = Cluster::start(&[ControllerName::Job]);
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
    let cluster = Cluster::start(&[ControllerName::Job]);
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
