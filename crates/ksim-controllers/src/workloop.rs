//! The controllers' work loop on the cluster's clock, in place of
//! kube-runtime's `Controller`/`applier` (whose requeues are tokio timers
//! and whose pending requests a virtual clock cannot see): watch handlers
//! put object references straight into a [`WorkQueue`] on the clock (busy
//! while keys are ready or being synced), one sync per object at a time, and
//! a sync's [`Action`] schedules the object again on the clock.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::FuturesUnordered;
use futures::{FutureExt, Stream, StreamExt, TryFutureExt};
use ksim_runtime::WorkQueue;
use ksim_runtime::clock::Clock;
use kube::Client;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;

use crate::Error;
use crate::common::watch_all;

/// What a sync asks for next (kube-runtime's `Action`, on the clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Action {
    requeue_after: Option<Duration>,
}

impl Action {
    /// Sync the object again after `duration` (sooner if it changes).
    pub(crate) const fn requeue(duration: Duration) -> Self {
        Action {
            requeue_after: Some(duration),
        }
    }

    /// Sync the object again only when it (or what it watches) changes.
    pub(crate) const fn await_change() -> Self {
        Action {
            requeue_after: None,
        }
    }

    /// When to sync again without a change, if at all.
    pub(crate) fn requeue_after(&self) -> Option<Duration> {
        self.requeue_after
    }
}

/// Where a controller's watch handlers put the objects to sync: a work
/// queue on the cluster's clock. Clones share the queue.
pub(crate) struct Requests<K: kube::Resource> {
    queue: Arc<WorkQueue<ObjectRef<K>>>,
    clock: Clock,
}

impl<K: kube::Resource> Clone for Requests<K> {
    fn clone(&self) -> Self {
        Requests {
            queue: Arc::clone(&self.queue),
            clock: self.clock.clone(),
        }
    }
}

impl<K> Requests<K>
where
    K: kube::Resource,
    K::DynamicType: Eq + Hash + Clone,
{
    /// An empty queue on `clock`.
    pub(crate) fn new(clock: &Clock) -> Self {
        Requests {
            queue: Arc::new(WorkQueue::with_clock(clock.clone())),
            clock: clock.clone(),
        }
    }

    /// The clock the queue runs on.
    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Asks for a sync of `object` now. Never fails (kept in the shape of
    /// a channel's send so that handlers read as before).
    pub(crate) fn unbounded_send(
        &self,
        object: ObjectRef<K>,
    ) -> Result<(), std::convert::Infallible> {
        self.queue.add(object);
        Ok(())
    }
}

/// References in namespace and name order (the caches are hash maps; a
/// deterministic run must not queue in their order).
pub(crate) fn in_order<K: kube::Resource>(mut refs: Vec<ObjectRef<K>>) -> Vec<ObjectRef<K>> {
    refs.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    refs
}

/// A new queue of requests on `clock`, twice (the handlers' end and the
/// work loop's, as a channel's two ends).
pub(crate) fn requests<K>(clock: &Clock) -> (Requests<K>, Requests<K>)
where
    K: kube::Resource,
    K::DynamicType: Eq + Hash + Clone,
{
    let requests = Requests::new(clock);
    (requests.clone(), requests)
}

/// Runs `reconcile` over the objects `requests` names (read from `store`)
/// until the queue shuts down, logging failed syncs: one sync per object at
/// a time, syncs of different objects concurrently (in this one task).
pub(crate) async fn run_work_queue<K, Ctx, Fut>(
    controller: &'static str,
    mut reconcile: impl FnMut(Arc<K>, Arc<Ctx>) -> Fut,
    error_policy: impl Fn(Arc<K>, &Error, Arc<Ctx>) -> Action,
    context: Arc<Ctx>,
    store: Store<K>,
    requests: Requests<K>,
) where
    K: kube::Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Debug + Eq + Hash + Clone,
    Fut: futures::TryFuture<Ok = Action, Error = Error>,
{
    let queue = requests.queue;
    let mut running: FuturesUnordered<_> = FuturesUnordered::new();
    let requeue = |key: &ObjectRef<K>, after: Duration| queue.add_after(key.clone(), after);
    loop {
        // In a fixed order (tokio's default picks at random): finished
        // syncs first, then the next key.
        tokio::select! {
            biased;
            Some((key, object, result)) = running.next(), if !running.is_empty() => {
                let action = match result {
                    Ok(action) => action,
                    Err(e) => {
                        tracing::debug!(error = %e, controller, object = %key, "sync failed");
                        error_policy(object, &e, Arc::clone(&context))
                    }
                };
                if let Some(after) = action.requeue_after() {
                    requeue(&key, after);
                }
                queue.done(&key);
            }
            key = queue.get() => {
                let Some(key) = key else { break };
                match store.get(&key) {
                    Some(object) => {
                        let sync = reconcile(Arc::clone(&object), Arc::clone(&context));
                        let sync = TryFutureExt::into_future(sync)
                            .map(move |result| (key, object, result));
                        running.push(sync);
                    }
                    None => queue.done(&key),
                }
            }
        }
    }
}

/// A controller of `K` in the manner of kube-runtime's `Controller`: a
/// cached watch of every `K` (each change queues it), other watches mapped
/// to the `K`s they concern, and the work loop.
pub(crate) struct Queued<K: kube::Resource + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    requests: Requests<K>,
    tasks: tokio::task::JoinSet<()>,
}

impl<K> Queued<K>
where
    K: kube::Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Debug + Default + Eq + Hash + Clone + Unpin + Send + Sync,
{
    /// Starts watching every `K` through `client`; syncs go on `clock`.
    pub(crate) fn new(client: Client, clock: &Clock) -> Self {
        let (store, writer) = reflector::store::<K>();
        let requests = Requests::new(clock);
        let mut tasks = tokio::task::JoinSet::new();
        let own = requests.clone();
        let watch = watch_all::<K>(client, clock);
        tasks.spawn(async move {
            let events = reflector::reflector(writer, watch);
            let mut events = std::pin::pin!(events);
            while let Some(event) = events.next().await {
                match event {
                    Ok(Event::Apply(object) | Event::InitApply(object)) => {
                        let _ = own.unbounded_send(ObjectRef::from_obj(&object));
                    }
                    Ok(_) => {}
                    Err(error) => tracing::debug!(%error, "watch failed; retrying"),
                }
            }
        });
        Queued {
            store,
            requests,
            tasks,
        }
    }

    /// The cache of every `K`.
    pub(crate) fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// Queues the `K`s `mapper` names for every object of another kind
    /// that the watch lists, changes or deletes.
    pub(crate) fn watches<C, I>(
        mut self,
        stream: impl Stream<Item = Result<Event<C>, watcher::Error>> + Send + 'static,
        mapper: impl Fn(C) -> I + Send + 'static,
    ) -> Self
    where
        C: Send + 'static,
        I: IntoIterator<Item = ObjectRef<K>>,
    {
        let requests = self.requests.clone();
        self.tasks.spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(Event::Apply(object) | Event::InitApply(object) | Event::Delete(object)) => {
                        for reference in mapper(object) {
                            let _ = requests.unbounded_send(reference);
                        }
                    }
                    Ok(_) => {}
                    Err(error) => tracing::debug!(%error, "watch failed; retrying"),
                }
            }
        });
        self
    }

    /// Queues the `K`s `mapper` names for every object a shared stream
    /// reports.
    pub(crate) fn watches_shared_stream<C, I>(
        mut self,
        stream: impl Stream<Item = Arc<C>> + Send + 'static,
        mapper: impl Fn(Arc<C>) -> I + Send + 'static,
    ) -> Self
    where
        C: Send + Sync + 'static,
        I: IntoIterator<Item = ObjectRef<K>>,
    {
        let requests = self.requests.clone();
        self.tasks.spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(object) = stream.next().await {
                for reference in mapper(object) {
                    let _ = requests.unbounded_send(reference);
                }
            }
        });
        self
    }

    /// Runs the work loop once the cache has listed (until the process
    /// ends); the watches stop with it.
    pub(crate) async fn run<Ctx, Fut>(
        self,
        controller: &'static str,
        reconcile: impl FnMut(Arc<K>, Arc<Ctx>) -> Fut,
        error_policy: impl Fn(Arc<K>, &Error, Arc<Ctx>) -> Action,
        context: Arc<Ctx>,
    ) where
        Fut: futures::TryFuture<Ok = Action, Error = Error>,
    {
        let Queued {
            store,
            requests,
            tasks,
        } = self;
        if store.wait_until_ready().await.is_err() {
            tracing::warn!(controller, "cache never synced");
            return;
        }
        run_work_queue(
            controller,
            reconcile,
            error_policy,
            context,
            store,
            requests,
        )
        .await;
        drop(tasks);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use chrono::TimeZone;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector::store::Writer;
    use std::sync::Mutex;

    fn config_map(name: &str) -> ConfigMap {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default"}
        }))
        .expect("config map")
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_requeue_is_a_timer_on_the_clock_and_the_queue_is_busy_while_syncing() {
        let start = chrono::Utc
            .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
            .single()
            .expect("time");
        let clock = Clock::virtual_at(start);
        let mut writer: Writer<ConfigMap> = Writer::default();
        writer.apply_watcher_event(&Event::Apply(config_map("a")));
        let store = writer.as_reader();
        let requests = Requests::<ConfigMap>::new(&clock);
        let synced: Arc<Mutex<Vec<chrono::DateTime<chrono::Utc>>>> = Arc::default();
        let seen = Arc::clone(&synced);
        let loop_clock = clock.clone();
        let queued = requests.clone();
        tokio::spawn(async move {
            run_work_queue(
                "test",
                move |_cm: Arc<ConfigMap>, _ctx: Arc<()>| {
                    seen.lock().expect("lock").push(loop_clock.now());
                    std::future::ready(Ok(Action::requeue(Duration::from_secs(10))))
                },
                |_, _, _| Action::await_change(),
                Arc::new(()),
                store,
                queued,
            )
            .await;
        });
        let _ = requests.unbounded_send(ObjectRef::new("a").within("default"));
        // An object missing from the cache is skipped.
        let _ = requests.unbounded_send(ObjectRef::new("gone").within("default"));
        clock.settle().await.expect("settles");
        assert_eq!(*synced.lock().expect("lock"), [start]);
        clock
            .advance(Duration::from_secs(25))
            .await
            .expect("advance");
        let ten = chrono::Duration::seconds(10);
        assert_eq!(
            *synced.lock().expect("lock"),
            [start, start + ten, start + ten + ten]
        );
    }
}
