//! In-process, on a virtual clock: the controllers' timers (node lifecycle
//! grace period and tolerationSeconds, Job back-off, TTL after finished,
//! the disruption controller's 2-minute timeout) fire at exactly the
//! virtual time upstream's defaults say, not before, and a cluster advanced
//! by hours of virtual time does so in a fraction of a second.

mod support;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use ksim_controllers::ControllerName;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::VirtualCluster;

fn micro(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// A Ready node whose kubelet last posted status and renewed its Lease at `at`.
async fn node_heard_at(client: &kube::Client, name: &str, at: Timestamp) {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name}})).expect("node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("node");
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [{
                "type": "Ready", "status": "True", "reason": "KubeletReady",
                "lastHeartbeatTime": at.to_string(), "lastTransitionTime": at.to_string(),
            }]}})),
        )
        .await
        .expect("node status");
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": micro(at)}
    }))
    .expect("lease");
    leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("lease");
}

fn condition<'a>(
    conditions: Option<&'a Vec<k8s_openapi::api::core::v1::NodeCondition>>,
    type_: &str,
) -> Option<&'a k8s_openapi::api::core::v1::NodeCondition> {
    conditions?.iter().find(|c| c.type_ == type_)
}

/// A node the controller first sees with an old heartbeat (a restored
/// snapshot, a restarted controller) gets the whole grace period from then,
/// as upstream's probeTimestamp does, not a verdict from the stale time.
#[tokio::test(flavor = "current_thread")]
async fn a_node_first_seen_with_an_old_heartbeat_gets_the_grace_period_from_then() {
    let cluster = VirtualCluster::start(&[ControllerName::NodeLifecycle]).await;
    let client = cluster.client.clone();
    let an_hour_ago = cluster.at(0) - k8s_openapi::jiff::SignedDuration::from_hours(1);
    node_heard_at(&client, "n1", an_hour_ago).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let ready = |node: &Node| {
        let status = node.status.as_ref().and_then(|s| s.conditions.as_ref());
        condition(status, "Ready").map(|c| c.status.clone())
    };

    cluster.advance_to(50).await;
    let node = nodes.get("n1").await.expect("node");
    assert_eq!(ready(&node).as_deref(), Some("True"), "still Ready at 50 s");

    cluster.advance_to(55).await;
    let node = nodes.get("n1").await.expect("node");
    assert_eq!(ready(&node).as_deref(), Some("Unknown"), "Unknown at 55 s");
}

#[tokio::test(flavor = "current_thread")]
async fn a_silent_node_goes_unknown_after_the_grace_period_and_its_pods_go_300_s_later() {
    let cluster = VirtualCluster::start(&[ControllerName::NodeLifecycle]).await;
    let client = cluster.client.clone();
    node_heard_at(&client, "n1", cluster.at(0)).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod");
    let nodes: Api<Node> = Api::all(client.clone());

    // node-monitor-grace-period (50 s) has not passed: still Ready.
    cluster.advance_to(50).await;
    let node = nodes.get("n1").await.expect("node");
    let status = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    assert_eq!(
        condition(status, "Ready").map(|c| c.status.as_str()),
        Some("True")
    );

    // The first monitor tick past it (every 5 s) marks it Unknown and taints it.
    cluster.advance_to(55).await;
    let node = nodes.get("n1").await.expect("node");
    let status = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    let ready = condition(status, "Ready").expect("Ready condition");
    assert_eq!(ready.status, "Unknown");
    assert_eq!(ready.reason.as_deref(), Some("NodeStatusUnknown"));
    assert_eq!(
        ready.last_transition_time.as_ref().map(|t| t.0),
        Some(cluster.at(55))
    );
    let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
    let unreachable = taints
        .iter()
        .find(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute")
        .expect("the unreachable NoExecute taint");
    assert_eq!(
        unreachable.time_added.as_ref().map(|t| t.0),
        Some(cluster.at(55))
    );

    // The pod tolerates it for 300 s (DefaultTolerationSeconds): still
    // there a second before.
    cluster.advance_to(354).await;
    let pod = pods.get("web").await.expect("pod stays");
    assert!(pod.metadata.deletion_timestamp.is_none(), "evicted early");

    cluster.advance_to(355).await;
    let evicted = pods.get_opt("web").await.expect("read pod");
    let Some(evicted) = evicted else {
        panic!("the pod is gone without a trace of its eviction");
    };
    assert!(evicted.metadata.deletion_timestamp.is_some(), "not evicted");
    let target = evicted
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "DisruptionTarget")
        .expect("DisruptionTarget condition");
    assert_eq!(target.reason.as_deref(), Some("DeletionByTaintManager"));
    assert_eq!(
        target.last_transition_time.map(|t| t.0),
        Some(cluster.at(355))
    );
    // The event says so, stamped with the cluster's time.
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), "default");
    let marked: Vec<_> = events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("TaintManagerEviction"))
        .collect();
    assert_eq!(marked.len(), 1, "{marked:?}");
    assert_eq!(
        marked[0].note.as_deref(),
        Some("Marking for deletion Pod default/web")
    );
    assert_eq!(
        marked[0].event_time.as_ref().map(|t| t.0),
        Some(cluster.at(355))
    );
}

/// Pods of `job` not yet finished, by name.
async fn active_pods(client: &kube::Client, job: &str) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut names: Vec<String> = pods
        .list(&ListParams::default().labels(&format!("job-name={job}")))
        .await
        .expect("pods")
        .items
        .into_iter()
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Failed" | "Succeeded"))
        })
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    names
}

/// Ends `pod` with its one container terminated at `at` (what the kubelet
/// would report).
async fn finish_pod(client: &kube::Client, pod: &str, phase: &str, at: Timestamp) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let exit_code = if phase == "Succeeded" { 0 } else { 1 };
    pods.patch_status(
        pod,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": phase, "containerStatuses": [{
            "name": "c", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": exit_code, "startedAt": at.to_string(),
                                     "finishedAt": at.to_string()}}
        }]}})),
    )
    .await
    .expect("finish pod");
}

async fn create_job(client: &kube::Client, name: &str, extra: serde_json::Value) {
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let mut spec = json!({
        "backoffLimit": 6,
        "template": {"spec": {"restartPolicy": "Never",
                              "containers": [{"name": "c", "image": "busybox"}]}}
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    let job: Job =
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("job");
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("job");
}

#[tokio::test(flavor = "current_thread")]
async fn a_failing_jobs_pods_are_replaced_after_10_20_and_40_s_of_back_off() {
    let cluster = VirtualCluster::start(&[ControllerName::Job]).await;
    let client = cluster.client.clone();
    create_job(&client, "flaky", json!({})).await;
    cluster.settle().await;
    let first = active_pods(&client, "flaky").await;
    assert_eq!(first.len(), 1, "one pod at once");

    // Each failure doubles the delay before the replacement, counted from
    // the failure: 10 s, then 20 s, then 40 s.
    let mut failed_at = 0;
    let mut current = first[0].clone();
    for delay in [10, 20, 40] {
        finish_pod(&client, &current, "Failed", cluster.at(failed_at)).await;
        cluster.advance_to(failed_at + delay - 1).await;
        assert_eq!(
            active_pods(&client, "flaky").await,
            Vec::<String>::new(),
            "replaced before {delay} s of back-off"
        );
        cluster.advance_to(failed_at + delay).await;
        let replacements = active_pods(&client, "flaky").await;
        assert_eq!(
            replacements.len(),
            1,
            "one replacement after {delay} s of back-off"
        );
        assert_ne!(replacements[0], current);
        current = replacements[0].clone();
        failed_at += delay;
    }
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let job = jobs.get("flaky").await.expect("job");
    assert_eq!(job.status.and_then(|s| s.failed), Some(3));
}

#[tokio::test(flavor = "current_thread")]
async fn a_finished_job_is_deleted_when_its_ttl_runs_out() {
    let cluster =
        VirtualCluster::start(&[ControllerName::Job, ControllerName::TtlAfterFinished]).await;
    let client = cluster.client.clone();
    create_job(&client, "once", json!({"ttlSecondsAfterFinished": 100})).await;
    cluster.settle().await;
    let pods = active_pods(&client, "once").await;
    assert_eq!(pods.len(), 1);
    cluster.advance_to(30).await;
    finish_pod(&client, &pods[0], "Succeeded", cluster.at(30)).await;
    cluster.settle().await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let job = jobs.get("once").await.expect("job");
    let complete = job
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Complete" && c.status == "True")
        .expect("Complete");
    assert_eq!(
        complete.last_transition_time.map(|t| t.0),
        Some(cluster.at(30))
    );

    cluster.advance_to(129).await;
    let job = jobs.get("once").await.expect("job still there");
    assert!(job.metadata.deletion_timestamp.is_none(), "deleted early");

    cluster.advance_to(130).await;
    let job = jobs.get_opt("once").await.expect("read job");
    assert!(
        job.is_none_or(|j| j.metadata.deletion_timestamp.is_some()),
        "deleted once its TTL ran out"
    );
}

async fn pdb_status(client: &kube::Client) -> serde_json::Value {
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    let pdb = budgets.get("web").await.expect("pdb");
    serde_json::to_value(pdb.status).expect("status")
}

#[tokio::test(flavor = "current_thread")]
async fn an_eviction_never_followed_by_a_deletion_stops_counting_after_2_minutes() {
    let cluster = VirtualCluster::start(&[ControllerName::Disruption]).await;
    let client = cluster.client.clone();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for name in ["web-a", "web-b"] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}
        }))
        .expect("pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("pod");
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": cluster.at(0).to_string()}
            ]}})),
        )
        .await
        .expect("ready");
    }
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}
    }))
    .expect("pdb");
    budgets
        .create(&PostParams::default(), &pdb)
        .await
        .expect("pdb");
    cluster.settle().await;
    let status = pdb_status(&client).await;
    assert_eq!(status["currentHealthy"], 2);
    assert_eq!(status["disruptionsAllowed"], 1);

    // An eviction was admitted at 10 s (the pod listed in disruptedPods)
    // but no deletion followed.
    cluster.advance_to(10).await;
    budgets
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "disruptionsAllowed": 0,
                "disruptedPods": {"web-a": cluster.at(10).to_string()}
            }})),
        )
        .await
        .expect("record an eviction");
    cluster.settle().await;
    let status = pdb_status(&client).await;
    assert_eq!(status["currentHealthy"], 1, "{status}");
    assert_eq!(status["disruptionsAllowed"], 0, "{status}");

    cluster.advance_to(129).await;
    let status = pdb_status(&client).await;
    assert_eq!(status["currentHealthy"], 1, "{status}");
    assert_eq!(status["disruptionsAllowed"], 0, "{status}");
    assert!(status["disruptedPods"]["web-a"].is_string(), "{status}");

    // DeletionTimeout (2 minutes) after the eviction, the pod counts again.
    cluster.advance_to(130).await;
    let status = pdb_status(&client).await;
    assert_eq!(status["currentHealthy"], 2, "{status}");
    assert_eq!(status["disruptionsAllowed"], 1, "{status}");
    cluster.advance_to(131).await;
    let status = pdb_status(&client).await;
    assert!(status["disruptedPods"].is_null(), "{status}");
}

#[tokio::test(flavor = "current_thread")]
async fn with_every_controller_a_stalled_rollout_times_out_at_its_progress_deadline() {
    let cluster = VirtualCluster::start(ksim_controllers::ALL_CONTROLLERS).await;
    let client = cluster.client.clone();
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), "default");
    let deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "progressDeadlineSeconds": 600,
                 "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }))
    .expect("deployment");
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("deployment");
    cluster.settle().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let created = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .expect("pods");
    assert_eq!(created.items.len(), 3, "the ReplicaSet's pods at once");

    let progressing = |d: &k8s_openapi::api::apps::v1::Deployment| {
        d.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Progressing"))
            .cloned()
            .expect("Progressing condition")
    };
    // No pod ever becomes ready (no kubelet): the deadline passes 600 s
    // after the last progress, and the sync after it (a second later, as
    // upstream requeues) reports it.
    cluster.advance_to(600).await;
    let d = deployments.get("web").await.expect("deployment");
    assert_eq!(progressing(&d).status, "True");
    cluster.advance_to(601).await;
    let d = deployments.get("web").await.expect("deployment");
    let condition = progressing(&d);
    assert_eq!(condition.status, "False");
    assert_eq!(
        condition.reason.as_deref(),
        Some("ProgressDeadlineExceeded")
    );
    assert_eq!(
        condition.last_transition_time.map(|t| t.0),
        Some(cluster.at(601))
    );
    // Hours later, nothing else happened: the cluster settles between the
    // node monitor's ticks.
    cluster.advance_to(6 * 3600).await;
    let d = deployments.get("web").await.expect("deployment");
    assert_eq!(
        progressing(&d).last_transition_time.map(|t| t.0),
        Some(cluster.at(601))
    );
}

/// The controllers' events of a Job's back-off run (name, reason, time),
/// in name order.
async fn back_off_run_events() -> Vec<(String, String, Option<Timestamp>)> {
    let cluster = VirtualCluster::start(&[ControllerName::Job]).await;
    let client = cluster.client.clone();
    create_job(&client, "flaky", json!({"backoffLimit": 2})).await;
    cluster.settle().await;
    let mut failed_at = 0;
    for delay in [10, 20, 40] {
        for pod in active_pods(&client, "flaky").await {
            finish_pod(&client, &pod, "Failed", cluster.at(failed_at)).await;
        }
        cluster.advance_to(failed_at + delay).await;
        failed_at += delay;
    }
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), "default");
    let mut seen: Vec<_> = events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reporting_controller.as_deref() == Some("job-controller"))
        .map(|e| {
            (
                e.metadata.name.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.event_time.map(|t| t.0),
            )
        })
        .collect();
    seen.sort();
    seen
}

#[tokio::test(flavor = "current_thread")]
async fn the_same_run_on_a_seeded_virtual_clock_records_the_same_events() {
    let first = back_off_run_events().await;
    let reasons: Vec<&str> = first.iter().map(|(_, r, _)| r.as_str()).collect();
    assert!(reasons.contains(&"BackoffLimitExceeded"), "{first:?}");
    assert_eq!(first, back_off_run_events().await);
}

#[tokio::test(flavor = "current_thread")]
async fn a_job_past_its_active_deadline_fails_exactly_then() {
    let cluster = VirtualCluster::start(&[ControllerName::Job]).await;
    let client = cluster.client.clone();
    create_job(&client, "slow", json!({"activeDeadlineSeconds": 30})).await;
    cluster.settle().await;
    assert_eq!(active_pods(&client, "slow").await.len(), 1);
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let failed = |job: &Job| {
        job.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Failed" && c.status == "True"))
            .cloned()
    };

    cluster.advance_to(29).await;
    let job = jobs.get("slow").await.expect("job");
    assert!(failed(&job).is_none(), "failed before its deadline");
    assert_eq!(
        job.status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0),
        Some(cluster.at(0))
    );

    cluster.advance_to(30).await;
    let job = jobs.get("slow").await.expect("job");
    let condition = failed(&job).expect("Failed at the deadline");
    assert_eq!(condition.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(
        condition.last_transition_time.map(|t| t.0),
        Some(cluster.at(30))
    );
}

#[tokio::test(flavor = "current_thread")]
async fn an_idle_cluster_wakes_only_for_the_node_monitor_and_watch_retries() {
    let cluster = VirtualCluster::start(ksim_controllers::ALL_CONTROLLERS).await;
    let hour = cluster.start + chrono::Duration::hours(1);
    let mut fires = 0;
    while cluster.clock.fire_next(hour).await.expect("fire").is_some() {
        fires += 1;
    }
    // The node monitor ticks every 5 s (720 an hour); the watch of
    // ReplicationControllers, which ksim does not serve, is retried every
    // 30 s once backed off. Nothing else wakes an idle cluster.
    assert!((720..=900).contains(&fires), "{fires} timers fired");
}
