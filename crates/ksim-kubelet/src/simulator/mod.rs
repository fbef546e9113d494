//! The kubelet simulator as a plain Kubernetes API client: it watches Stages,
//! the Nodes it manages and the Pods bound to them, applies each object's
//! stage after its delay, and keeps node leases fresh. The same code runs in
//! a ksim cluster (in-process client) and stand-alone against any cluster.
//!
//! Every delay, lease renewal and retry is a timer on the cluster's clock
//! ([`KubeletOptions::clock`]), and every random draw (stage choice, delay and
//! lease jitter) comes from the clock's seeded source; work due or in flight
//! keeps a virtual cluster busy.
//!
//! A node's kubelet can be stopped as if its machine died: annotate the Node
//! `ksim.io/kubelet=stopped` ([`KUBELET_ANNOTATION`], or `ksim node stop
//! NODE`). While stopped, the node's Lease and status are no longer renewed
//! (so the node lifecycle controller marks it NotReady after its grace period
//! and taints it) and its pods are left alone: a deleted pod stays
//! Terminating, a new one stays Pending. Removing the annotation (or setting
//! it to `running`; `ksim node start NODE`) resumes the kubelet: the lease is
//! renewed at once, the node becomes Ready again and its pods' pending work
//! is done.

mod api;
mod cached;
mod crd;
mod engine;
mod env;
mod lease;
mod options;
mod rng;
mod scan;
mod watch;

use std::sync::Arc;

pub use api::{SimulatedKind, event_for, object_path};
pub use cached::CachedObject;
pub use crd::{
    STAGE_CRD_NAME, STAGES_PATH, create_stage, ensure_default_stages, ensure_stage_crd, stage_crd,
    with_last_applied,
};
pub use engine::{Engine, Tracker, object_key};
pub use env::{Network, NodeFacts, RenderEnv};
pub use lease::{NODE_LEASE_NAMESPACE, lease_path, new_lease, renew_interval};
pub use options::{
    DEFAULT_LEASE_DURATION_SECONDS, DEFAULT_NODE_IP, DEFAULT_NODE_PORT, KUBELET_ANNOTATION,
    KUBELET_RUNNING, KUBELET_STOPPED, KubeletOptions, NodeSelection, kubelet_stopped,
};
pub use rng::ClockRng;

use crate::error::KubeletError;

/// The kubelet simulator.
#[derive(Debug)]
pub struct KubeletSimulator {
    engine: Arc<Engine>,
}

impl KubeletSimulator {
    /// A simulator talking to the cluster through `client`.
    pub fn new(client: kube::Client, options: KubeletOptions) -> Self {
        Self {
            engine: Arc::new(Engine::new(client, options)),
        }
    }

    /// The simulator's state (for tests and metrics).
    pub fn engine(&self) -> Arc<Engine> {
        self.engine.clone()
    }

    /// Runs until a watch fails for good or the future is dropped (which stops every
    /// task it started). Installs the Stage CRD and the default stages first when
    /// the options say so.
    pub async fn run(self) -> Result<(), KubeletError> {
        let engine = self.engine;
        if engine.options.install_stages {
            // Installing is work in progress: a virtual cluster waits for it.
            let _busy = engine.options.clock.busy();
            ensure_stage_crd(&engine.client).await?;
            let created = ensure_default_stages(&engine.client).await?;
            if created > 0 {
                tracing::info!(created, "default stages installed");
            }
        }
        let mut tasks = tokio::task::JoinSet::new();
        tasks.spawn(watch::watch_stages(engine.clone()));
        tasks.spawn(watch::watch_objects(engine.clone(), SimulatedKind::Node));
        tasks.spawn(watch::watch_objects(engine.clone(), SimulatedKind::Pod));
        let workers = engine.options.workers.max(1);
        for _ in 0..workers {
            for kind in [SimulatedKind::Node, SimulatedKind::Pod] {
                let engine = engine.clone();
                tasks.spawn(async move {
                    engine.work(kind).await;
                    Ok(())
                });
            }
            let engine = engine.clone();
            tasks.spawn(async move {
                lease::renew_leases(engine).await;
                Ok(())
            });
        }
        let result = loop {
            match tasks.join_next().await {
                None => break Ok(()),
                Some(Ok(Ok(()))) => {}
                Some(Ok(Err(error))) => break Err(error),
                Some(Err(error)) => break Err(KubeletError::api("simulator task", error)),
            }
        };
        engine.nodes.queue.shut_down();
        engine.pods.queue.shut_down();
        engine.leases.shut_down();
        result
    }
}
