//! Informer helpers over `kube::runtime::watcher`: one stream of object
//! changes per resource, retrying with backoff, that tells its consumer when a
//! (re-)list is complete and which objects it held, so caches can drop objects
//! deleted while the watch was down.

use std::collections::HashSet;
use std::fmt::Debug;

use futures::{Stream, StreamExt};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

/// A change seen by an informer.
#[derive(Clone, Debug, PartialEq)]
pub enum Change<K> {
    /// An object of a (re-)list, before the list is complete.
    Listed(K),
    /// An object added or modified while watching.
    Applied(K),
    /// An object deleted while watching.
    Deleted(K),
    /// A (re-)list is complete: the keys ([`object_key`]) of every object it held.
    /// Any other object a cache knows is gone.
    Synced(HashSet<String>),
}

/// The cache key of an object: `namespace/name`, or `name` for cluster-scoped objects.
pub fn object_key<K: Resource>(object: &K) -> String {
    match object.meta().namespace.as_deref() {
        Some(namespace) if !namespace.is_empty() => {
            format!("{namespace}/{}", object.name_any())
        }
        _ => object.name_any(),
    }
}

/// The changes of the objects `api` sees, forever: watch errors are logged and the
/// watch restarts with backoff (re-listing when its resource version is too old).
pub fn changes<K>(api: Api<K>, config: watcher::Config) -> impl Stream<Item = Change<K>> + Send
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let mut listing: Option<HashSet<String>> = None;
    watcher(api, config)
        .default_backoff()
        .filter_map(move |event| {
            let change = match event {
                Ok(watcher::Event::Init) => {
                    listing = Some(HashSet::new());
                    None
                }
                Ok(watcher::Event::InitApply(object)) => {
                    listing
                        .get_or_insert_with(HashSet::new)
                        .insert(object_key(&object));
                    Some(Change::Listed(object))
                }
                Ok(watcher::Event::InitDone) => {
                    Some(Change::Synced(listing.take().unwrap_or_default()))
                }
                Ok(watcher::Event::Apply(object)) => Some(Change::Applied(object)),
                Ok(watcher::Event::Delete(object)) => Some(Change::Deleted(object)),
                Err(error) => {
                    tracing::warn!(%error, "watch failed; retrying");
                    None
                }
            };
            std::future::ready(change)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{DeleteParams, PostParams};

    fn config_map(name: &str) -> ConfigMap {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
        }))
        .expect("valid config map")
    }

    #[tokio::test]
    async fn list_then_sync_then_watch_changes() {
        let server = ksim_apiserver::ApiServer::new();
        let client = kube::Client::new(server.router(), "default");
        let api: Api<ConfigMap> = Api::namespaced(client, "default");
        api.create(&PostParams::default(), &config_map("before"))
            .await
            .expect("created");
        let mut stream = Box::pin(changes(api.clone(), watcher::Config::default()));
        let mut listed = Vec::new();
        let synced = loop {
            match stream.next().await.expect("stream goes on") {
                Change::Listed(cm) => listed.push(object_key(&cm)),
                Change::Synced(keys) => break keys,
                other => panic!("unexpected {other:?}"),
            }
        };
        assert!(listed.contains(&"default/before".to_owned()), "{listed:?}");
        assert!(synced.contains("default/before"), "{synced:?}");
        api.create(&PostParams::default(), &config_map("after"))
            .await
            .expect("created");
        api.delete("before", &DeleteParams::default())
            .await
            .expect("deleted");
        let mut seen = Vec::new();
        while seen.len() < 2 {
            match stream.next().await.expect("stream goes on") {
                Change::Applied(cm) => seen.push(format!("applied {}", object_key(&cm))),
                Change::Deleted(cm) => seen.push(format!("deleted {}", object_key(&cm))),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(seen, ["applied default/after", "deleted default/before"]);
    }

    #[test]
    fn keys_are_namespaced_when_the_object_is() {
        let mut cm = config_map("a");
        assert_eq!(object_key(&cm), "a");
        cm.metadata.namespace = Some("ns".into());
        assert_eq!(object_key(&cm), "ns/a");
    }
}
