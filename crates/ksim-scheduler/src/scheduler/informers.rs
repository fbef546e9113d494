//! The informers: one kube-rs watcher per kind the scheduler reads (pods,
//! nodes, namespaces, PodDisruptionBudgets, Services,
//! ReplicationControllers, ReplicaSets, StatefulSets), each turning its
//! stream into [`Message`]s for the scheduling loop. A (re)list arrives
//! as one [`Change::Relist`] so the cache can drop what disappeared.
//! Each message carries a busy guard of the cluster's clock until the loop
//! has applied it, so a virtual cluster does not settle with changes the
//! scheduler has not seen.

use std::convert::identity;
use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ReplicationController, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use ksim_runtime::WithoutManagedFields;
use ksim_runtime::clock::{Busy, Clock};
use kube::api::Api;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;

use super::BindOutcome;
use super::lean_pod::PodForScheduling;

/// One change of one kind.
#[derive(Debug)]
pub enum Change<K> {
    Apply(K),
    Delete(K),
    /// Every object, after a (re)list.
    Relist(Listed<K>),
}

/// The objects of one (re)list, gathered in fixed-size chunks: a list of
/// 100,000 pods is never moved to a larger buffer as it grows (a typed Pod
/// is about 2 KB; one growing `Vec` copied hundreds of megabytes and
/// faulted in fresh pages at every doubling).
#[derive(Debug)]
pub struct Listed<K> {
    chunks: Vec<Vec<K>>,
}

impl<K> Default for Listed<K> {
    fn default() -> Self {
        Listed { chunks: Vec::new() }
    }
}

impl<K> Listed<K> {
    /// Objects per chunk.
    const CHUNK: usize = 1024;

    /// Adds one object.
    pub fn push(&mut self, object: K) {
        match self.chunks.last_mut() {
            Some(chunk) if chunk.len() < Self::CHUNK => chunk.push(object),
            _ => {
                let mut chunk = Vec::with_capacity(Self::CHUNK);
                chunk.push(object);
                self.chunks.push(chunk);
            }
        }
    }

    /// The objects, in the order listed.
    pub fn iter(&self) -> impl Iterator<Item = &K> {
        self.chunks.iter().flatten()
    }

    /// How many objects were listed.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(Vec::len).sum()
    }

    /// Whether the list was empty.
    pub fn is_empty(&self) -> bool {
        self.chunks.iter().all(Vec::is_empty)
    }
}

impl<K> FromIterator<K> for Listed<K> {
    fn from_iter<I: IntoIterator<Item = K>>(objects: I) -> Self {
        let mut listed = Listed::default();
        for object in objects {
            listed.push(object);
        }
        listed
    }
}

impl<K> IntoIterator for Listed<K> {
    type Item = K;
    type IntoIter = std::iter::Flatten<std::vec::IntoIter<Vec<K>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.chunks.into_iter().flatten()
    }
}

impl<'a, K> IntoIterator for &'a Listed<K> {
    type Item = &'a K;
    type IntoIter = std::iter::Flatten<std::slice::Iter<'a, Vec<K>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.chunks.iter().flatten()
    }
}

/// What the scheduling loop receives.
// Each message is moved once through the channel; boxing would only add
// an allocation per event.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Message {
    Pod(Change<Arc<Pod>>),
    Node(Change<Node>),
    Namespace(Change<Namespace>),
    DisruptionBudget(Change<PodDisruptionBudget>),
    Service(Change<Service>),
    ReplicationController(Change<ReplicationController>),
    ReplicaSet(Change<ReplicaSet>),
    StatefulSet(Change<StatefulSet>),
    /// A binding finished.
    Bound(BindOutcome),
}

/// What the loop's channel carries: a message and the work it stands for.
pub type Envelope = (Message, Busy);

/// How many informers report a first list before scheduling starts.
pub const INFORMERS: usize = 8;

/// The informers, to record which have listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Informer {
    Pod,
    Node,
    Namespace,
    DisruptionBudget,
    Service,
    ReplicationController,
    ReplicaSet,
    StatefulSet,
}

impl From<crate::framework::WorkloadKind> for Informer {
    fn from(kind: crate::framework::WorkloadKind) -> Self {
        use crate::framework::WorkloadKind;
        match kind {
            WorkloadKind::Service => Informer::Service,
            WorkloadKind::ReplicationController => Informer::ReplicationController,
            WorkloadKind::ReplicaSet => Informer::ReplicaSet,
            WorkloadKind::StatefulSet => Informer::StatefulSet,
        }
    }
}

/// Watches one kind. Objects are decoded without `metadata.managedFields`,
/// which no scheduling decision reads (as kube-scheduler's informers trim
/// them), so that decoding is cheaper and the objects the cache, the queue and
/// assumed bindings keep and clone stay small.
///
/// `decoded` turns each decoded object into what the loop receives (the
/// object itself but for pods, see [`PodForScheduling`]).
fn spawn_one<K, T>(
    client: &kube::Client,
    clock: &Clock,
    tx: UnboundedSender<Envelope>,
    decoded: fn(K) -> T,
    wrap: fn(Change<T>) -> Message,
) -> JoinHandle<()>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
    T: Send + 'static,
{
    let api: Api<WithoutManagedFields<K>> = Api::all(client.clone());
    let clock = clock.clone();
    tokio::spawn(async move {
        // Retries back off on the cluster's clock (kube's own back-off
        // sleeps on tokio's timers, which a virtual clock cannot see).
        let mut stream =
            ksim_runtime::informer::backoff_on(watcher(api, watcher::Config::default()), &clock)
                .boxed();
        let mut listed: Listed<T> = Listed::default();
        while let Some(event) = stream.next().await {
            let change = match event {
                Ok(watcher::Event::Apply(object)) => Change::Apply(decoded(object.0)),
                Ok(watcher::Event::Delete(object)) => Change::Delete(decoded(object.0)),
                Ok(watcher::Event::Init) => {
                    listed = Listed::default();
                    continue;
                }
                Ok(watcher::Event::InitApply(object)) => {
                    listed.push(decoded(object.0));
                    continue;
                }
                Ok(watcher::Event::InitDone) => Change::Relist(std::mem::take(&mut listed)),
                Err(watcher::Error::InitialListFailed(kube::Error::Api(status)))
                    if status.code == 404 =>
                {
                    // The server does not serve this kind: nothing to watch.
                    tracing::info!(kind = %K::kind(&Default::default()), "not served; not watched");
                    let _ = tx.send((wrap(Change::Relist(Listed::default())), clock.busy()));
                    return;
                }
                Err(error) => {
                    tracing::warn!(kind = %K::kind(&Default::default()), %error, "watch failed; retrying");
                    continue;
                }
            };
            if tx.send((wrap(change), clock.busy())).is_err() {
                return;
            }
        }
    })
}

/// Starts every informer; they stop when the receiver is dropped.
pub fn spawn_all(
    client: &kube::Client,
    clock: &Clock,
    tx: &UnboundedSender<Envelope>,
) -> Vec<JoinHandle<()>> {
    vec![
        spawn_one::<PodForScheduling, Arc<Pod>>(
            client,
            clock,
            tx.clone(),
            PodForScheduling::into_shared_pod,
            Message::Pod,
        ),
        spawn_one::<Node, _>(client, clock, tx.clone(), identity, Message::Node),
        spawn_one::<Namespace, _>(client, clock, tx.clone(), identity, Message::Namespace),
        spawn_one::<PodDisruptionBudget, _>(
            client,
            clock,
            tx.clone(),
            identity,
            Message::DisruptionBudget,
        ),
        spawn_one::<Service, _>(client, clock, tx.clone(), identity, Message::Service),
        spawn_one::<ReplicationController, _>(
            client,
            clock,
            tx.clone(),
            identity,
            Message::ReplicationController,
        ),
        spawn_one::<ReplicaSet, _>(client, clock, tx.clone(), identity, Message::ReplicaSet),
        spawn_one::<StatefulSet, _>(client, clock, tx.clone(), identity, Message::StatefulSet),
    ]
}

#[cfg(test)]
mod tests {
    use super::Listed;

    #[test]
    fn a_list_keeps_every_object_in_order_across_chunks() {
        let listed: Listed<usize> = (0..2_500).collect();
        assert_eq!(listed.len(), 2_500);
        assert!(!listed.is_empty());
        assert!(listed.iter().copied().eq(0..2_500));
        assert!((&listed).into_iter().copied().eq(0..2_500));
        assert!(listed.into_iter().eq(0..2_500));
        assert!(Listed::<usize>::default().is_empty());
    }
}
