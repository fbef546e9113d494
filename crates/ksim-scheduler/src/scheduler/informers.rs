//! The informers: one kube-rs watcher per kind the scheduler reads (pods,
//! nodes, namespaces, PodDisruptionBudgets, Services,
//! ReplicationControllers, ReplicaSets, StatefulSets), each turning its
//! stream into [`Message`]s for the scheduling loop. A (re)list arrives
//! as one [`Change::Relist`] so the cache can drop what disappeared.
//! Each message carries a busy guard of the cluster's clock until the loop
//! has applied it, so a virtual cluster does not settle with changes the
//! scheduler has not seen.

use std::fmt::Debug;

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

/// One change of one kind.
#[derive(Debug)]
pub enum Change<K> {
    Apply(K),
    Delete(K),
    /// Every object, after a (re)list.
    Relist(Vec<K>),
}

/// What the scheduling loop receives.
// Each message is moved once through the channel; boxing would only add
// an allocation per event.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Message {
    Pod(Change<Pod>),
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
fn spawn_one<K>(
    client: &kube::Client,
    clock: &Clock,
    tx: UnboundedSender<Envelope>,
    wrap: fn(Change<K>) -> Message,
) -> JoinHandle<()>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    let api: Api<WithoutManagedFields<K>> = Api::all(client.clone());
    let clock = clock.clone();
    tokio::spawn(async move {
        // Retries back off on the cluster's clock (kube's own back-off
        // sleeps on tokio's timers, which a virtual clock cannot see).
        let mut stream =
            ksim_runtime::informer::backoff_on(watcher(api, watcher::Config::default()), &clock)
                .boxed();
        let mut listed: Vec<K> = Vec::new();
        while let Some(event) = stream.next().await {
            let change = match event {
                Ok(watcher::Event::Apply(object)) => Change::Apply(object.0),
                Ok(watcher::Event::Delete(object)) => Change::Delete(object.0),
                Ok(watcher::Event::Init) => {
                    listed.clear();
                    continue;
                }
                Ok(watcher::Event::InitApply(object)) => {
                    listed.push(object.0);
                    continue;
                }
                Ok(watcher::Event::InitDone) => Change::Relist(std::mem::take(&mut listed)),
                Err(watcher::Error::InitialListFailed(kube::Error::Api(status)))
                    if status.code == 404 =>
                {
                    // The server does not serve this kind: nothing to watch.
                    tracing::info!(kind = %K::kind(&Default::default()), "not served; not watched");
                    let _ = tx.send((wrap(Change::Relist(Vec::new())), clock.busy()));
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
        spawn_one::<Pod>(client, clock, tx.clone(), Message::Pod),
        spawn_one::<Node>(client, clock, tx.clone(), Message::Node),
        spawn_one::<Namespace>(client, clock, tx.clone(), Message::Namespace),
        spawn_one::<PodDisruptionBudget>(client, clock, tx.clone(), Message::DisruptionBudget),
        spawn_one::<Service>(client, clock, tx.clone(), Message::Service),
        spawn_one::<ReplicationController>(
            client,
            clock,
            tx.clone(),
            Message::ReplicationController,
        ),
        spawn_one::<ReplicaSet>(client, clock, tx.clone(), Message::ReplicaSet),
        spawn_one::<StatefulSet>(client, clock, tx.clone(), Message::StatefulSet),
    ]
}
