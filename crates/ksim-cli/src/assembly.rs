//! Cluster assembly: the one place that wires an API server and the chosen
//! components into a cluster in process, all on one clock. `ksim serve`
//! serves it on its port; `ksim run` runs scenarios against it. The
//! components are API clients of the server (in-process transport), as they
//! would be of any cluster. A snapshot is loaded before they start, its
//! objects handed to the API server's own bulk creation (no encoding).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use ksim_apiserver::{ApiServer, BulkItem};
use ksim_runtime::clock::Clock;
use ksim_snapshot::api::{BulkAnswer, BulkCreate, BulkObject, CreatedMetadata};
use tokio::task::JoinHandle;

use crate::commands::Component;

/// What runs beside the API server, already read and checked.
#[derive(Debug, Default)]
pub struct Components {
    /// Components not to run.
    pub disabled: Vec<Component>,
    /// The scheduler's configuration (default: upstream's profile).
    pub scheduler: Option<PathBuf>,
    /// The in-cluster descheduler: its policy file and interval.
    pub descheduler: Option<(PathBuf, Duration)>,
    /// The in-cluster autoscaler's flags.
    pub autoscaler: Option<crate::commands::AutoscalerFlags>,
    /// The DPDB controller's configuration (its clock is the cluster's).
    pub dpdb: ksim_controllers::dpdb::DpdbConfig,
}

/// An API server and its running components, on one clock.
pub struct Cluster {
    server: ApiServer,
    clock: Clock,
    tasks: Vec<JoinHandle<()>>,
}

impl Cluster {
    /// A cluster of the API server alone (bootstrapped: namespaces, priority
    /// classes, the `kubernetes` service), on `clock`.
    pub fn new(clock: Clock) -> Self {
        Self {
            server: ApiServer::with_clock(clock.clone()),
            clock,
            tasks: Vec::new(),
        }
    }

    /// A client over the in-process transport.
    pub fn client(&self) -> kube::Client {
        ksim_runtime::client::in_process(&self.server)
    }

    /// The HTTP service: the API and, on the same origin, the web view.
    pub fn router(&self) -> axum::Router {
        self.server.router().merge(ksim_ui::router())
    }

    /// The cluster as a snapshot's target: the in-process client, and the
    /// API server's own bulk creation for loading objects.
    pub fn snapshot_target(&self) -> ksim_snapshot::Target {
        ksim_snapshot::Target::new(self.client()).with_bulk_creation(Arc::new(InProcessBulk {
            server: self.server.clone(),
        }))
    }

    /// Reads and loads a snapshot (before the components start, so they
    /// adopt what it holds).
    pub async fn restore(&self, snapshot: &Path) -> anyhow::Result<()> {
        let documents = crate::commands::read_snapshot(snapshot)?;
        self.restore_documents(documents, snapshot).await.map(drop)
    }

    /// Loads a snapshot's parsed documents, as [`Cluster::restore`] does;
    /// `path` names the file in messages.
    pub async fn restore_documents(
        &self,
        documents: Vec<ksim_snapshot::Document>,
        path: &Path,
    ) -> anyhow::Result<ksim_snapshot::restore::Report> {
        crate::commands::restore_at_start(&self.snapshot_target(), documents, path).await
    }

    /// Starts the components not disabled. Must be called inside the
    /// runtime that will run them.
    pub async fn start(&mut self, components: Components) -> anyhow::Result<()> {
        let enabled = |component: Component| !components.disabled.contains(&component);
        if enabled(Component::Kubelet) {
            // All nodes managed; stopped with the cluster.
            let kubelet = ksim_kubelet::KubeletSimulator::new(
                self.client(),
                ksim_kubelet::KubeletOptions {
                    clock: self.clock.clone(),
                    ..ksim_kubelet::KubeletOptions::default()
                },
            );
            self.tasks.push(tokio::spawn(async move {
                if let Err(error) = kubelet.run().await {
                    tracing::error!(%error, "the kubelet simulator stopped");
                }
            }));
        }
        if enabled(Component::Controllers) {
            self.tasks
                .push(tokio::spawn(ksim_controllers::run_controllers_with_clock(
                    self.client(),
                    ksim_controllers::ALL_CONTROLLERS,
                    self.clock.clone(),
                )));
        }
        if enabled(Component::Dpdb) {
            let config = ksim_controllers::dpdb::DpdbConfig {
                clock: self.clock.clone(),
                ..components.dpdb
            };
            self.tasks.push(tokio::spawn(ksim_controllers::dpdb::run(
                self.client(),
                config,
            )));
        }
        if enabled(Component::Scheduler) {
            let task = crate::commands::start_scheduler(
                &self.server,
                components.scheduler.as_deref(),
                self.clock.clone(),
            )?;
            self.tasks.push(task);
        }
        if let Some((policy, interval)) = &components.descheduler {
            let task = crate::commands::start_descheduler(
                &self.server,
                policy,
                *interval,
                self.clock.clone(),
            )
            .await?;
            self.tasks.push(task);
        }
        if let Some(flags) = &components.autoscaler {
            let task = crate::commands::start_autoscaler(&self.server, flags, self.clock.clone());
            self.tasks.push(task);
        }
        Ok(())
    }
}

/// The API server's bulk creation called in process: the objects are moved
/// to it, not encoded, and created on the blocking pool, a few chunks at
/// once (one per core).
struct InProcessBulk {
    server: ApiServer,
}

impl BulkCreate for InProcessBulk {
    fn create(
        &self,
        items: Vec<BulkObject>,
    ) -> BoxFuture<'static, Result<BulkAnswer, ksim_snapshot::Error>> {
        let server = self.server.clone();
        Box::pin(async move {
            let items = items
                .into_iter()
                .map(|item| BulkItem {
                    object: item.object,
                    status: item.status,
                })
                .collect();
            let results = tokio::task::spawn_blocking(move || {
                server.create_objects(items, ksim_snapshot::api::BULK_FIELD_MANAGER)
            })
            .await
            .map_err(|e| ksim_snapshot::Error::Invalid(format!("the bulk creation failed: {e}")))?;
            Ok(BulkAnswer::Created(
                results
                    .into_iter()
                    .map(|result| match result {
                        Ok(created) => Ok(CreatedMetadata {
                            uid: created.uid,
                            generation: created.generation,
                        }),
                        Err(error) => Err(Box::new(status_of(&error))),
                    })
                    .collect(),
            ))
        })
    }

    fn chunk_size(&self) -> usize {
        2_000
    }

    fn in_flight(&self) -> usize {
        std::thread::available_parallelism().map_or(1, usize::from)
    }
}

/// The Status the API would answer for `error`.
fn status_of(error: &ksim_apiserver::ApiError) -> kube::core::Status {
    let mut status =
        kube::core::Status::failure(&error.message, error.reason).with_code(error.code);
    status.details = error
        .details
        .clone()
        .and_then(|details| serde_json::from_value(details).ok());
    status
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
