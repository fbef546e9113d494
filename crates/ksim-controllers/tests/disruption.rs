//! In-process: a PodDisruptionBudget's status follows its pods.

mod support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use ksim_controllers::ControllerName;
use ksim_testutils::builders;
use kube::api::{Api, EvictParams, PostParams};
use serde_json::json;
use support::{Cluster, eventually, make_ready, pods};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_status_follows_pods_becoming_ready() {
    let cluster = Cluster::start(&[
        ControllerName::ReplicaSet,
        ControllerName::Deployment,
        ControllerName::Disruption,
    ]);
    let deployments: Api<Deployment> = Api::namespaced(cluster.client.clone(), "default");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 4,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}
            }
        }
    }))
    .expect("deployment");
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("deployment");
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(cluster.client.clone(), "default");
    let budget: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}}
    }))
    .expect("pdb");
    budgets
        .create(&PostParams::default(), &budget)
        .await
        .expect("pdb");

    let created = eventually("4 pods and a status", || async {
        let p = pods(&cluster.client, "default", "app=web").await;
        let s = budgets.get("web").await.ok()?.status?;
        (p.len() == 4 && s.expected_pods == 4).then_some(p)
    })
    .await;
    let status = budgets
        .get("web")
        .await
        .expect("pdb")
        .status
        .expect("status");
    assert_eq!(
        (
            status.desired_healthy,
            status.current_healthy,
            status.disruptions_allowed
        ),
        (2, 0, 0)
    );
    assert_eq!(status.observed_generation, Some(1));
    let condition = &status.conditions.expect("conditions")[0];
    assert_eq!(
        (condition.type_.as_str(), condition.reason.as_str()),
        ("DisruptionAllowed", "InsufficientPods")
    );

    for pod in &created[..3] {
        make_ready(
            &cluster,
            "default",
            pod.metadata.name.as_deref().expect("name"),
        )
        .await;
    }
    let status = eventually("3 healthy", || async {
        let s = budgets.get("web").await.ok()?.status?;
        (s.current_healthy == 3).then_some(s)
    })
    .await;
    assert_eq!(status.disruptions_allowed, 1);
    let condition = &status.conditions.expect("conditions")[0];
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("True", "SufficientPods")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evictions_stop_at_the_budget_the_controller_computes() {
    let cluster = Cluster::start(&[
        ControllerName::ReplicaSet,
        ControllerName::Deployment,
        ControllerName::Disruption,
    ]);
    let deployments: Api<Deployment> = Api::namespaced(cluster.client.clone(), "default");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}
            }
        }
    }))
    .expect("deployment");
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("deployment");
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(cluster.client.clone(), "default");
    let budget: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "db"}}}
    }))
    .expect("pdb");
    budgets
        .create(&PostParams::default(), &budget)
        .await
        .expect("pdb");
    let created = eventually("3 pods", || async {
        let p = pods(&cluster.client, "default", "app=db").await;
        (p.len() == 3).then_some(p)
    })
    .await;
    for pod in &created {
        make_ready(
            &cluster,
            "default",
            pod.metadata.name.as_deref().expect("name"),
        )
        .await;
    }
    eventually("one disruption allowed", || async {
        let s = budgets.get("db").await.ok()?.status?;
        (s.disruptions_allowed == 1 && s.current_healthy == 3 && s.desired_healthy == 2)
            .then_some(())
    })
    .await;
    let pods_api: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
    let names: Vec<String> = created
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    pods_api
        .evict(&names[0], &EvictParams::default())
        .await
        .expect("first eviction fits the budget");
    let refused = pods_api
        .evict(&names[1], &EvictParams::default())
        .await
        .expect_err("second eviction exceeds the budget");
    assert!(
        matches!(refused, kube::Error::Api(ref s) if s.code == 429),
        "{refused:?}"
    );
    // The replacement pod is not ready: still no disruption allowed.
    let status = eventually("replacement counted", || async {
        let s = budgets.get("db").await.ok()?.status?;
        let p = pods(&cluster.client, "default", "app=db").await;
        (p.len() == 3 && s.expected_pods == 3 && s.current_healthy == 2).then_some(s)
    })
    .await;
    assert_eq!(status.disruptions_allowed, 0);
}

/// Creates `count` Running and Ready pods labelled `app=<app>` (no controller).
async fn ready_pods(cluster: &Cluster, app: &str, count: usize) -> Vec<String> {
    let api: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
    let mut names = Vec::new();
    for i in 0..count {
        let name = format!("{app}-{i}");
        let pod = builders::pod(&name).image("nginx").label("app", app).obj();
        api.create(&PostParams::default(), &pod)
            .await
            .expect("create pod");
        make_ready(cluster, "default", &name).await;
        names.push(name);
    }
    names
}

/// A budget over `app=<app>` whose status says `allowed` disruptions.
async fn budget_with_status(
    client: &kube::Client,
    app: &str,
    healthy: i32,
    allowed: i32,
    observed_generation: i64,
) -> Api<PodDisruptionBudget> {
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    let budget: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": app},
        "spec": {"minAvailable": healthy - allowed, "selector": {"matchLabels": {"app": app}}}
    }))
    .expect("pdb");
    budgets
        .create(&PostParams::default(), &budget)
        .await
        .expect("pdb");
    budgets
        .patch_status(
            app,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"status": {
                "currentHealthy": healthy, "desiredHealthy": healthy - allowed,
                "expectedPods": healthy, "disruptionsAllowed": allowed,
                "observedGeneration": observed_generation,
            }})),
        )
        .await
        .expect("pdb status");
    budgets
}

fn api_code(result: &Result<(), kube::Error>) -> u16 {
    match result {
        Ok(()) => 201,
        Err(kube::Error::Api(status)) => status.code,
        Err(other) => panic!("unexpected error {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_evictions_against_a_budget_of_three_evict_exactly_three() {
    let cluster = Cluster::start(&[]);
    let names = ready_pods(&cluster, "web", 50).await;
    let budgets = budget_with_status(&cluster.client, "web", 50, 3, 1).await;
    let mut tasks = tokio::task::JoinSet::new();
    for name in names {
        let api: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
        tasks.spawn(async move {
            let result = api.evict(&name, &EvictParams::default()).await.map(|_| ());
            api_code(&result)
        });
    }
    let mut codes = Vec::new();
    while let Some(code) = tasks.join_next().await {
        codes.push(code.expect("task"));
    }
    assert_eq!(codes.iter().filter(|c| **c == 201).count(), 3, "{codes:?}");
    assert_eq!(codes.iter().filter(|c| **c == 429).count(), 47, "{codes:?}");
    assert_eq!(pods(&cluster.client, "default", "app=web").await.len(), 47);
    let status = budgets
        .get("web")
        .await
        .expect("pdb")
        .status
        .expect("status");
    assert_eq!(status.disruptions_allowed, 0);
    assert_eq!(status.disrupted_pods.expect("disrupted pods").len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_answers_as_kube_apiserver() {
    let cluster = Cluster::start(&[]);
    let client = &cluster.client;
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    ready_pods(&cluster, "full", 2).await;
    budget_with_status(client, "full", 2, 0, 1).await;
    let refused = pods_api
        .evict("full-0", &EvictParams::default())
        .await
        .expect_err("no disruption allowed");
    let kube::Error::Api(status) = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(status.code, 429);
    assert_eq!(
        status.message,
        "Cannot evict pod as it would violate the pod's disruption budget."
    );

    // The budget's generation is not processed yet: 429, still being processed.
    ready_pods(&cluster, "lag", 2).await;
    budget_with_status(client, "lag", 2, 1, 0).await;
    let lagging = pods_api
        .evict("lag-0", &EvictParams::default())
        .await
        .expect_err("not processed");
    assert!(
        matches!(&lagging, kube::Error::Api(s) if s.code == 429),
        "{lagging:?}"
    );

    // Two budgets over one pod: 500.
    ready_pods(&cluster, "two", 1).await;
    budget_with_status(client, "two", 1, 1, 1).await;
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    let second: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "two-again"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "two"}}}
    }))
    .expect("pdb");
    budgets
        .create(&PostParams::default(), &second)
        .await
        .expect("pdb");
    let several = pods_api
        .evict("two-0", &EvictParams::default())
        .await
        .expect_err("two budgets");
    let kube::Error::Api(status) = several else {
        panic!("{several:?}")
    };
    assert_eq!(status.code, 500);
    assert_eq!(
        status.message,
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );

    // Dry run: nothing changes.
    ready_pods(&cluster, "dry", 2).await;
    let dry_budgets = budget_with_status(client, "dry", 2, 1, 1).await;
    pods_api
        .evict(
            "dry-0",
            &EvictParams {
                post_options: PostParams {
                    dry_run: true,
                    ..PostParams::default()
                },
                ..EvictParams::default()
            },
        )
        .await
        .expect("dry-run eviction");
    assert!(pods_api.get_opt("dry-0").await.expect("get").is_some());
    let status = dry_budgets
        .get("dry")
        .await
        .expect("pdb")
        .status
        .expect("status");
    assert_eq!(status.disruptions_allowed, 1);

    // A Pending pod is deleted without looking at the (exhausted) budget.
    let pending = builders::pod("full-pending")
        .image("nginx")
        .label("app", "full")
        .obj();
    pods_api
        .create(&PostParams::default(), &pending)
        .await
        .expect("pending pod");
    pods_api
        .evict("full-pending", &EvictParams::default())
        .await
        .expect("pending pods are evicted directly");
    assert!(
        pods_api
            .get_opt("full-pending")
            .await
            .expect("get")
            .is_none()
    );

    // A bound pod is marked DisruptionTarget and deleted gracefully.
    let bound = builders::pod("bound").image("nginx").node("n1").obj();
    pods_api
        .create(&PostParams::default(), &bound)
        .await
        .expect("bound pod");
    make_ready(&cluster, "default", "bound").await;
    pods_api
        .evict("bound", &EvictParams::default())
        .await
        .expect("no budget");
    let pod = pods_api.get("bound").await.expect("terminating pod");
    assert!(pod.metadata.deletion_timestamp.is_some());
    let condition = pod
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "DisruptionTarget")
        .expect("DisruptionTarget condition");
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_deref()),
        ("True", Some("EvictionByEvictionAPI"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disruption_target_no_deletion_followed_is_reset_after_two_minutes() {
    let cluster = Cluster::start(&[ControllerName::Disruption]);
    let api: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
    let now = k8s_openapi::jiff::Timestamp::now();
    let stale = (now - k8s_openapi::jiff::SignedDuration::from_secs(180)).to_string();
    let recent = (now - k8s_openapi::jiff::SignedDuration::from_secs(10)).to_string();
    for (name, since) in [("stale", &stale), ("recent", &recent)] {
        let pod = builders::pod(name).image("nginx").obj();
        api.create(&PostParams::default(), &pod)
            .await
            .expect("create pod");
        api.patch_status(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"status": {"phase": "Running", "conditions": [
                {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                 "message": "Eviction API: evicting", "lastTransitionTime": since}
            ]}})),
        )
        .await
        .expect("set DisruptionTarget");
    }
    let target = |pod: &Pod| {
        pod.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "DisruptionTarget"))
            .cloned()
    };
    let reset = eventually("the stale DisruptionTarget reset to False", || async {
        let pod = api.get("stale").await.ok()?;
        target(&pod).filter(|c| c.status == "False")
    })
    .await;
    assert_eq!((reset.reason, reset.message), (None, None));
    let transition = reset.last_transition_time.expect("transition time").0;
    assert!(transition > now - k8s_openapi::jiff::SignedDuration::from_secs(60));
    // The recent one stays True until its own two minutes pass.
    let recent = api.get("recent").await.expect("recent pod");
    assert_eq!(target(&recent).expect("condition").status, "True");
}
