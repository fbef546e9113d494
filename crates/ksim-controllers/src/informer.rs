//! Informers shared by the controllers one manager runs, as
//! kube-controller-manager's SharedInformerFactory: one watch per kind,
//! however many controllers read it, so that a pod event is sent, decoded
//! and cached once rather than once per controller.
//!
//! A subscriber gets the kind's objects as a list first (`Init`, one
//! `InitApply` each, `InitDone`, as a fresh watch would give them), then
//! every change, each object behind an `Arc` shared with every other
//! subscriber. The watch starts with the first subscriber; a re-list (after
//! the watch expired) reaches every subscriber as a new `Init` ...
//! `InitDone`, so their caches drop what they did not see again.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, OnceLock};

use futures::channel::mpsc;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use ksim_runtime::clock::Clock;
use kube::Client;
use kube::runtime::watcher::Event;
use serde::de::DeserializeOwned;

use crate::common::watch_all;

/// The informers of one manager; clones share them.
#[derive(Clone)]
pub struct SharedInformers {
    client: Client,
    clock: Clock,
    pods: Arc<OnceLock<Arc<Shared<Pod>>>>,
}

impl SharedInformers {
    /// Informers over `client`, on the wall clock; nothing is watched until
    /// subscribed to.
    pub fn new(client: Client) -> Self {
        Self::with_clock(client, Clock::real())
    }

    /// Informers over `client` for controllers on `clock` (the cluster's).
    pub fn with_clock(client: Client, clock: Clock) -> Self {
        SharedInformers {
            client,
            clock,
            pods: Arc::default(),
        }
    }

    /// The clock of the controllers these informers feed.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Every pod: the current ones as a list, then every change.
    pub(crate) fn pods(&self) -> impl Stream<Item = Event<Arc<Pod>>> + Send + 'static {
        self.pods
            .get_or_init(|| Shared::start(self.client.clone(), &self.clock))
            .subscribe()
    }

    /// The pods [`SharedInformers::pods`] reports (listed, changed or
    /// deleted), as triggers for a `kube::runtime::Controller`.
    pub(crate) fn pod_triggers(&self) -> impl Stream<Item = Arc<Pod>> + Send + 'static {
        self.pods().filter_map(|event| {
            futures::future::ready(match event {
                Event::Apply(pod) | Event::InitApply(pod) | Event::Delete(pod) => Some(pod),
                Event::Init | Event::InitDone => None,
            })
        })
    }
}

/// One kind's watch and its subscribers.
struct Shared<K> {
    state: Mutex<State<K>>,
}

struct State<K> {
    /// The objects as of the last complete list and the changes since (in
    /// key order, so that a late subscriber's list repeats from run to run).
    objects: BTreeMap<String, Arc<K>>,
    /// The objects of a list in progress, in the order listed (the API
    /// server's, which is key order); sorted into `objects` in one bulk
    /// build when the list completes rather than inserted one by one.
    listing: Option<Vec<(String, Arc<K>)>>,
    /// Whether a list completed.
    synced: bool,
    subscribers: Vec<mpsc::UnboundedSender<Event<Arc<K>>>>,
}

impl<K> Shared<K>
where
    K: kube::Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default,
{
    /// Starts the watch of every `K`.
    fn start(client: Client, clock: &Clock) -> Arc<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                objects: BTreeMap::new(),
                listing: None,
                synced: false,
                subscribers: Vec::new(),
            }),
        });
        let feeding = Arc::clone(&shared);
        let watch = watch_all::<K>(client, clock);
        tokio::spawn(async move {
            let mut events = std::pin::pin!(watch);
            while let Some(event) = events.next().await {
                match event {
                    Ok(event) => feeding.dispatch(event),
                    Err(error) => tracing::debug!(%error, "shared watch failed; retrying"),
                }
            }
        });
        shared
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        // Every update completes before the lock is released.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records one watch event and sends it to every subscriber.
    fn dispatch(&self, event: Event<K>) {
        let mut state = self.lock();
        let event = match event {
            Event::Init => {
                state.listing = Some(Vec::new());
                Event::Init
            }
            Event::InitApply(object) => {
                let object = Arc::new(object);
                state.listing.get_or_insert_with(Vec::new).push((
                    ksim_runtime::object_key(object.as_ref()),
                    Arc::clone(&object),
                ));
                Event::InitApply(object)
            }
            Event::InitDone => {
                // Sorted by key; of objects listed twice, the last is kept.
                state.objects = state
                    .listing
                    .take()
                    .unwrap_or_default()
                    .into_iter()
                    .collect();
                state.synced = true;
                Event::InitDone
            }
            Event::Apply(object) => {
                let object = Arc::new(object);
                state.objects.insert(
                    ksim_runtime::object_key(object.as_ref()),
                    Arc::clone(&object),
                );
                Event::Apply(object)
            }
            Event::Delete(object) => {
                let object = Arc::new(object);
                state
                    .objects
                    .remove(&ksim_runtime::object_key(object.as_ref()));
                Event::Delete(object)
            }
        };
        state
            .subscribers
            .retain(|subscriber| subscriber.unbounded_send(event.clone()).is_ok());
    }

    /// A new subscriber's stream: what is known so far as a list, then
    /// every change.
    fn subscribe(&self) -> impl Stream<Item = Event<Arc<K>>> + Send + 'static {
        let (sender, receiver) = mpsc::unbounded();
        let mut state = self.lock();
        let send = |event| {
            // The receiver is still in hand: sending cannot fail.
            let _ = sender.unbounded_send(event);
        };
        match (&state.listing, state.synced) {
            // A list in progress: its objects so far; the rest arrive live.
            (Some(listing), _) => {
                send(Event::Init);
                for (_, object) in listing {
                    send(Event::InitApply(Arc::clone(object)));
                }
            }
            (None, true) => {
                send(Event::Init);
                for object in state.objects.values() {
                    send(Event::InitApply(Arc::clone(object)));
                }
                send(Event::InitDone);
            }
            (None, false) => {}
        }
        state.subscribers.push(sender);
        receiver
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;
    use serde_json::json;

    use super::*;

    fn pod(name: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"}}))
            .expect("pod")
    }

    fn empty() -> Shared<Pod> {
        Shared {
            state: Mutex::new(State {
                objects: BTreeMap::new(),
                listing: None,
                synced: false,
                subscribers: Vec::new(),
            }),
        }
    }

    fn names(events: &[Event<Arc<Pod>>]) -> Vec<String> {
        events
            .iter()
            .map(|event| match event {
                Event::Init => "init".to_string(),
                Event::InitApply(p) => format!("list {}", p.metadata.name.as_deref().unwrap_or("")),
                Event::InitDone => "done".to_string(),
                Event::Apply(p) => format!("apply {}", p.metadata.name.as_deref().unwrap_or("")),
                Event::Delete(p) => format!("delete {}", p.metadata.name.as_deref().unwrap_or("")),
            })
            .collect()
    }

    fn drain(stream: impl Stream<Item = Event<Arc<Pod>>>) -> Vec<Event<Arc<Pod>>> {
        let mut stream = std::pin::pin!(stream);
        let mut events = Vec::new();
        while let Some(Some(event)) = stream.next().now_or_never() {
            events.push(event);
        }
        events
    }

    #[test]
    fn a_late_subscriber_gets_the_current_objects_as_a_list_then_the_changes() {
        let shared = empty();
        let early = shared.subscribe();
        shared.dispatch(Event::Init);
        shared.dispatch(Event::InitApply(pod("a")));
        shared.dispatch(Event::InitApply(pod("b")));
        shared.dispatch(Event::InitDone);
        shared.dispatch(Event::Delete(pod("a")));
        assert_eq!(
            shared.lock().objects.keys().collect::<Vec<_>>(),
            ["default/b"],
            "the completed list, by key, less the deletion"
        );
        let late = shared.subscribe();
        shared.dispatch(Event::Apply(pod("c")));
        assert_eq!(
            names(&drain(early)),
            ["init", "list a", "list b", "done", "delete a", "apply c"]
        );
        assert_eq!(names(&drain(late)), ["init", "list b", "done", "apply c"]);
    }

    #[test]
    fn a_completed_list_is_kept_by_key_and_the_last_copy_of_an_object_wins() {
        let shared = empty();
        shared.dispatch(Event::Init);
        shared.dispatch(Event::InitApply(pod("b")));
        shared.dispatch(Event::InitApply(pod("a")));
        let mut again = pod("b");
        again.metadata.resource_version = Some("2".into());
        shared.dispatch(Event::InitApply(again));
        shared.dispatch(Event::InitDone);
        let state = shared.lock();
        let kept: Vec<(&str, Option<&str>)> = state
            .objects
            .iter()
            .map(|(key, pod)| (key.as_str(), pod.metadata.resource_version.as_deref()))
            .collect();
        assert_eq!(kept, [("default/a", None), ("default/b", Some("2"))]);
    }

    #[test]
    fn a_subscriber_during_a_list_gets_the_listed_objects_and_the_rest_live() {
        let shared = empty();
        shared.dispatch(Event::Init);
        shared.dispatch(Event::InitApply(pod("a")));
        let joined = shared.subscribe();
        shared.dispatch(Event::InitApply(pod("b")));
        shared.dispatch(Event::InitDone);
        assert_eq!(names(&drain(joined)), ["init", "list a", "list b", "done"]);
    }

    #[test]
    fn subscribers_share_one_copy_of_each_object_and_gone_ones_are_dropped() {
        let shared = empty();
        let first = shared.subscribe();
        let second = shared.subscribe();
        shared.dispatch(Event::Apply(pod("a")));
        let (first, second) = (drain(first), drain(second));
        let (Event::Apply(x), Event::Apply(y)) = (&first[0], &second[0]) else {
            panic!("both got the change");
        };
        assert!(Arc::ptr_eq(x, y));
        shared.dispatch(Event::Apply(pod("b")));
        assert!(shared.lock().subscribers.is_empty());
    }
}
