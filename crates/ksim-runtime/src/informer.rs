//! Informer helpers over `kube::runtime::watcher`: one stream of object
//! changes per resource, retrying with backoff on the cluster's clock
//! ([`backoff_on`]; kube's own back-off sleeps on tokio's timers, which a
//! virtual clock cannot see), that tells its consumer when a (re-)list is
//! complete and which objects it held, so caches can drop objects deleted
//! while the watch was down.

use std::collections::HashSet;
use std::fmt::Debug;

use futures::{Stream, StreamExt};
use kube::api::Api;
use kube::runtime::watcher;
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
/// watch restarts with backoff on `clock` (re-listing when its resource version is
/// too old).
pub fn changes<K>(
    api: Api<K>,
    config: watcher::Config,
    clock: &crate::clock::Clock,
) -> impl Stream<Item = Change<K>> + Send + use<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let mut listing: Option<HashSet<String>> = None;
    backoff_on(watcher(api, config), clock).filter_map(move |event| {
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

/// A watch (or any stream of results) that waits on `clock` after each
/// error before it is polled again, as kube's default back-off: 800 ms,
/// doubling to 30 s, reset once it has gone 2 minutes without failing. On
/// a virtual clock the retry is a timer like any other.
pub fn backoff_on<S, T, E>(
    stream: S,
    clock: &crate::clock::Clock,
) -> impl futures::Stream<Item = Result<T, E>> + Send + use<S, T, E>
where
    S: futures::Stream<Item = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
{
    use futures::StreamExt;
    const FIRST: std::time::Duration = std::time::Duration::from_millis(800);
    const LONGEST: std::time::Duration = std::time::Duration::from_secs(30);
    // A watch that fails again within this long of its last failure keeps
    // backing off (a failing list starts with a successful `Init`).
    const RESET_AFTER: std::time::Duration = std::time::Duration::from_secs(120);
    struct State<S> {
        stream: std::pin::Pin<Box<S>>,
        clock: crate::clock::Clock,
        delay: std::time::Duration,
        failed_at: Option<crate::clock::Instant>,
        wait: Option<std::time::Duration>,
    }
    let state = State {
        stream: Box::pin(stream),
        clock: clock.clone(),
        delay: std::time::Duration::ZERO,
        failed_at: None,
        wait: None,
    };
    futures::stream::unfold(state, |mut state| async move {
        if let Some(wait) = state.wait.take() {
            state.clock.sleep(wait).await;
        }
        let item = state.stream.next().await?;
        match item {
            Ok(_) => {
                let quiet = state
                    .failed_at
                    .is_none_or(|at| state.clock.elapsed_since(at) >= RESET_AFTER);
                if quiet {
                    state.delay = std::time::Duration::ZERO;
                }
            }
            Err(_) => {
                state.delay = (state.delay * 2).clamp(FIRST, LONGEST);
                state.failed_at = Some(state.clock.instant());
                state.wait = Some(state.delay);
            }
        }
        Some((item, state))
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
        let mut stream = Box::pin(changes(
            api.clone(),
            watcher::Config::default(),
            &crate::clock::Clock::real(),
        ));
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

    #[tokio::test]
    async fn a_failed_watch_waits_on_the_clock_before_it_is_polled_again() {
        let start = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .expect("time")
            .with_timezone(&chrono::Utc);
        let clock = crate::clock::Clock::virtual_at(start);
        let items = futures::stream::iter(vec![Err::<u32, &str>("gone"), Ok(1), Err("again")]);
        let mut stream = Box::pin(backoff_on(items, &clock));
        assert_eq!(stream.next().await, Some(Err("gone")));
        let mut next = stream.next();
        assert!(futures::poll!(&mut next).is_pending());
        // The retry is a timer of the cluster's clock, 800 ms away.
        assert_eq!(
            clock.next_timer(),
            Some(start + chrono::Duration::milliseconds(800))
        );
        clock
            .jump(std::time::Duration::from_millis(800))
            .expect("virtual");
        assert_eq!(next.await, Some(Ok(1)));
        // A second failure soon after doubles the wait.
        assert_eq!(stream.next().await, Some(Err("again")));
        let mut next = stream.next();
        assert!(futures::poll!(&mut next).is_pending());
        assert_eq!(
            clock.next_timer(),
            Some(start + chrono::Duration::milliseconds(2_400))
        );
    }

    #[test]
    fn keys_are_namespaced_when_the_object_is() {
        let mut cm = config_map("a");
        assert_eq!(object_key(&cm), "a");
        cm.metadata.namespace = Some("ns".into());
        assert_eq!(object_key(&cm), "ns/a");
    }
}
