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
        use k8s_openapi::api::core::v1::Event;
        use kube::api::ListParams;
        let server = ksim_apiserver::ApiServer::new();
        let client = ksim_runtime::client::in_process(&server);
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-1"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}
        }))
        .expect("a pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("created");
        evict(&pods, "default", "web-1").await.expect("evicted");
        let events: Api<Event> = Api::namespaced(client, "default");
        let recorded: Vec<(String, String)> = events
            .list(&ListParams::default())
            .await
            .expect("events")
            .items
            .into_iter()
            .map(|e| {
                let by = e
                    .metadata
                    .annotations
                    .and_then(|a| a.get("ksim.io/requested-by").cloned())
                    .unwrap_or_default();
                (e.reason.unwrap_or_default(), by)
            })
            .collect();
        assert_eq!(
            recorded,
            [("Evicted".to_string(), "cluster-autoscaler".to_string())]
        );
    }
}
