//! In-process: a PodDisruptionBudget's status follows its pods.

mod support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use ksim_controllers::ControllerName;
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
            &cluster.client,
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
            &cluster.client,
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
