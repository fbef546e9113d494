//! In-process: a PodDisruptionBudget's status follows its pods.

mod support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use ksim_controllers::ControllerName;
use kube::api::{Api, PostParams};
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
