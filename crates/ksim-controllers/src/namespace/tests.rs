//! In-process: the namespace controller empties a deleted namespace, waits
//! on finalizers, then finalizes it.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::ControllerName;
use crate::statefulset::testing::{Cluster, eventually};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_namespace_is_emptied_then_finalized() {
    let cluster = Cluster::start(&[ControllerName::Namespace]);
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "t"}})).expect("ns"),
        )
        .await
        .expect("create namespace");
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "t");
    for (name, finalizers) in [("free", json!([])), ("held", json!(["example.com/hold"]))] {
        let map: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "finalizers": finalizers}, "data": {"a": "b"}
        }))
        .expect("configmap");
        maps.create(&PostParams::default(), &map)
            .await
            .expect("configmap");
    }
    namespaces
        .delete("t", &DeleteParams::default())
        .await
        .expect("delete namespace");
    let ns = eventually("the finalizer condition", || async {
        let ns = namespaces.get("t").await.ok()?;
        let conditions = ns.status.as_ref()?.conditions.clone()?;
        conditions
            .iter()
            .any(|c| c.type_ == "NamespaceFinalizersRemaining" && c.status == "True")
            .then_some(ns)
    })
    .await;
    let conditions = ns.status.and_then(|s| s.conditions).expect("conditions");
    let message = |t: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == t)
            .and_then(|c| c.message.clone())
            .expect("condition")
    };
    assert_eq!(
        message("NamespaceFinalizersRemaining"),
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
    );
    assert_eq!(
        message("NamespaceContentRemaining"),
        "Some resources are remaining: configmaps. has 1 resource instances"
    );
    assert!(
        maps.get_opt("free").await.expect("get").is_none(),
        "free content is gone"
    );
    assert!(
        namespaces.get_opt("t").await.expect("get").is_some(),
        "held in Terminating"
    );

    maps.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release");
    eventually("the namespace goes", || async {
        namespaces.get_opt("t").await.ok()?.is_none().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_found_by_discovery_are_deleted_too() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{ApiResource, DynamicObject};
    use kube::core::GroupVersionKind;

    let cluster = Cluster::start(&[ControllerName::Namespace]);
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .expect("crd");
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("create crd");
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "w"}})).expect("ns"),
        )
        .await
        .expect("create namespace");
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(cluster.client.clone(), "w", &resource);
    let widget: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "one"}
    }))
    .expect("widget");
    eventually("the widget is created", || async {
        widgets.create(&PostParams::default(), &widget).await.ok()
    })
    .await;
    namespaces
        .delete("w", &DeleteParams::default())
        .await
        .expect("delete namespace");
    eventually("the namespace goes", || async {
        namespaces.get_opt("w").await.ok()?.is_none().then_some(())
    })
    .await;
    let left = Api::<DynamicObject>::all_with(cluster.client.clone(), &resource)
        .list(&Default::default())
        .await
        .expect("list widgets");
    assert!(
        left.items.is_empty(),
        "the custom resource went with its namespace"
    );
}
