//! In-process: the garbage collector with each propagation policy.

mod support;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::ConfigMap;
use ksim_controllers::ControllerName;
use kube::api::{Api, DeleteParams, ListParams, PostParams, PropagationPolicy};
use serde_json::json;
use support::{Cluster, eventually, pods};

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}
            }
        }
    }))
    .expect("deployment")
}

async fn start_with_deployment(name: &str) -> (Cluster, Api<Deployment>) {
    let cluster = Cluster::start(&[
        ControllerName::ReplicaSet,
        ControllerName::Deployment,
        ControllerName::GarbageCollector,
    ]);
    let api: Api<Deployment> = Api::namespaced(cluster.client.clone(), "default");
    api.create(&PostParams::default(), &deployment(name, 2))
        .await
        .expect("create deployment");
    let selector = format!("app={name}");
    eventually("2 pods", || async {
        (pods(&cluster.client, "default", &selector).await.len() == 2).then_some(())
    })
    .await;
    (cluster, api)
}

async fn replica_set_count(client: &kube::Client) -> usize {
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    api.list(&ListParams::default())
        .await
        .expect("list")
        .items
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_deletion_removes_replica_sets_and_pods() {
    let (cluster, api) = start_with_deployment("bg").await;
    api.delete("bg", &DeleteParams::background())
        .await
        .expect("delete");
    eventually("replica set and pods gone", || async {
        let gone = replica_set_count(&cluster.client).await == 0
            && pods(&cluster.client, "default", "app=bg").await.is_empty();
        gone.then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_deletion_removes_dependents_before_the_owner() {
    let (cluster, api) = start_with_deployment("fg").await;
    api.delete("fg", &DeleteParams::foreground())
        .await
        .expect("delete");
    eventually("everything gone, deployment last", || async {
        let deployment_gone = api.get_opt("fg").await.ok()?.is_none();
        let rest_gone = replica_set_count(&cluster.client).await == 0
            && pods(&cluster.client, "default", "app=fg").await.is_empty();
        if deployment_gone {
            assert!(rest_gone, "the deployment went before its dependents");
        }
        deployment_gone.then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_deletion_keeps_dependents_without_the_owner_reference() {
    let (cluster, api) = start_with_deployment("or").await;
    api.delete("or", &DeleteParams::orphan())
        .await
        .expect("delete");
    eventually("deployment gone", || async {
        api.get_opt("or").await.ok()?.is_none().then_some(())
    })
    .await;
    let replica_sets: Api<ReplicaSet> = Api::namespaced(cluster.client.clone(), "default");
    let list = replica_sets
        .list(&ListParams::default())
        .await
        .expect("list")
        .items;
    assert_eq!(list.len(), 1);
    assert!(
        list[0]
            .metadata
            .owner_references
            .clone()
            .unwrap_or_default()
            .is_empty()
    );
    assert_eq!(pods(&cluster.client, "default", "app=or").await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_of_any_kind_whose_owner_is_gone_are_collected() {
    let cluster = Cluster::start(&[ControllerName::GarbageCollector]);
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let owner = config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "owner"}})).expect("cm"),
        )
        .await
        .expect("owner");
    let dependent: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "dependent", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
        ]}}),
    )
    .expect("cm");
    config_maps
        .create(&PostParams::default(), &dependent)
        .await
        .expect("dependent");
    let _ = PropagationPolicy::Background;
    config_maps
        .delete("owner", &DeleteParams::default())
        .await
        .expect("delete owner");
    eventually("dependent collected", || async {
        config_maps
            .get_opt("dependent")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
}
