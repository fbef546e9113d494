//! The scale-down's eviction request: a policy/v1 Eviction posted to
//! `pods/<name>/eviction`, as cluster-autoscaler posts it, annotated
//! `requested-by: cluster-autoscaler` the way the descheduler annotates its
//! own, so the API server's eviction records (and the web view's timeline
//! and `ksim run`'s `evictions` check) name the autoscaler as who asked.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};

use crate::runner::COMPONENT;

/// The Eviction annotation naming who asks (the descheduler's key).
pub const REQUESTED_BY: &str = "requested-by";

/// The Eviction of `namespace/name`, attributed to the autoscaler.
pub fn eviction(namespace: &str, name: &str) -> Eviction {
    Eviction {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            annotations: Some(BTreeMap::from([(
                REQUESTED_BY.to_string(),
                COMPONENT.to_string(),
            )])),
            ..Default::default()
        },
        delete_options: None,
    }
}

/// Posts the eviction of `name` through `api` (the pod's namespace).
pub(crate) async fn evict(api: &Api<Pod>, namespace: &str, name: &str) -> Result<(), kube::Error> {
    api.create_subresource::<_, serde_json::Value>(
        "eviction",
        name,
        &PostParams::default(),
        &eviction(namespace, name),
    )
    .await
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksim_testutils::builders;
    use ksim_testutils::in_process::InProcessCluster;

    #[test]
    fn the_eviction_names_the_autoscaler() {
        let body = serde_json::to_value(eviction("default", "web-1")).expect("json");
        assert_eq!(body["metadata"]["name"], "web-1");
        assert_eq!(body["metadata"]["namespace"], "default");
        assert_eq!(
            body["metadata"]["annotations"]["requested-by"],
            "cluster-autoscaler"
        );
    }

    /// The API server's record of the eviction names the autoscaler.
    #[tokio::test]
    async fn the_api_server_records_the_autoscaler_as_who_asked() {
        let cluster = InProcessCluster::new();
        let client = cluster.client.clone();
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        cluster
            .create_pod(&builders::pod("web-1").image("i").node("n1").obj())
            .await;
        evict(&pods, "default", "web-1").await.expect("evicted");
        let request = http::Request::get("/ksim/v1alpha1/evictions")
            .body(Vec::new())
            .expect("a request");
        let records: serde_json::Value = client.request(request).await.expect("the records");
        let recorded: Vec<(&str, &str, &str)> = records["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|r| {
                (
                    r["pod"]["name"].as_str().unwrap_or_default(),
                    r["outcome"].as_str().unwrap_or_default(),
                    r["requestedBy"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(recorded, [("web-1", "Evicted", "cluster-autoscaler")]);
    }
}
