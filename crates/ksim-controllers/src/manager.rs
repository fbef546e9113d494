//! Which controllers run: names as kube-controller-manager's `--controllers`
//! takes them (`*`, `name`, `-name`), and starting the chosen ones on one client.

use std::fmt;

use ksim_runtime::clock::Clock;

use crate::Error;
use crate::informer::SharedInformers;

/// A controller ksim can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ControllerName {
    /// `replicaset`
    ReplicaSet,
    /// `deployment`
    Deployment,
    /// `garbagecollector`
    GarbageCollector,
    /// `disruption`
    Disruption,
    /// `statefulset`
    StatefulSet,
    /// `daemonset`
    DaemonSet,
    /// `job`
    Job,
    /// `ttl-after-finished`
    TtlAfterFinished,
    /// `namespace`
    Namespace,
    /// `nodelifecycle`
    NodeLifecycle,
}

/// Every controller, in the order they start.
pub const ALL_CONTROLLERS: &[ControllerName] = &[
    ControllerName::ReplicaSet,
    ControllerName::Deployment,
    ControllerName::GarbageCollector,
    ControllerName::Disruption,
    ControllerName::StatefulSet,
    ControllerName::DaemonSet,
    ControllerName::Job,
    ControllerName::Namespace,
    ControllerName::NodeLifecycle,
    ControllerName::TtlAfterFinished,
];

impl ControllerName {
    /// The name `--controllers` uses.
    pub fn as_str(self) -> &'static str {
        match self {
            ControllerName::ReplicaSet => "replicaset",
            ControllerName::Deployment => "deployment",
            ControllerName::GarbageCollector => "garbagecollector",
            ControllerName::Disruption => "disruption",
            ControllerName::StatefulSet => "statefulset",
            ControllerName::DaemonSet => "daemonset",
            ControllerName::Job => "job",
            ControllerName::TtlAfterFinished => "ttl-after-finished",
            ControllerName::Namespace => "namespace",
            ControllerName::NodeLifecycle => "nodelifecycle",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        ALL_CONTROLLERS.iter().copied().find(|c| c.as_str() == name)
    }
}

impl fmt::Display for ControllerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses a `--controllers` list: `*` is every controller, `name` adds one,
/// `-name` removes one; an empty list is `*`.
pub fn parse_controllers(list: &str) -> Result<Vec<ControllerName>, Error> {
    let items: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let mut chosen: Vec<ControllerName> = Vec::new();
    let mut removed: Vec<ControllerName> = Vec::new();
    let all = items.is_empty() || items.contains(&"*");
    for item in items.iter().filter(|i| **i != "*") {
        let (name, remove) = match item.strip_prefix('-') {
            Some(name) => (name, true),
            None => (*item, false),
        };
        let controller = ControllerName::from_name(name).ok_or_else(|| {
            let known: Vec<&str> = ALL_CONTROLLERS.iter().map(|c| c.as_str()).collect();
            Error::Invalid(format!(
                "{name:?} is not in the list of known controllers: {}",
                known.join(", ")
            ))
        })?;
        if remove {
            removed.push(controller);
        } else {
            chosen.push(controller);
        }
    }
    let base: Vec<ControllerName> = if all {
        ALL_CONTROLLERS.to_vec()
    } else {
        chosen
    };
    let mut result: Vec<ControllerName> = ALL_CONTROLLERS
        .iter()
        .copied()
        .filter(|c| base.contains(c) && !removed.contains(c))
        .collect();
    result.dedup();
    Ok(result)
}

/// Runs `controllers` on `client` on the wall clock until every one of them
/// stops (in a cluster: until the process ends). Each runs in its own task.
pub async fn run_controllers(client: kube::Client, controllers: &[ControllerName]) {
    run_controllers_with_clock(client, controllers, Clock::real()).await;
}

/// Runs `controllers` on `client` with every timestamp, timer and requeue
/// on `clock` (the cluster's), until every one of them stops.
pub async fn run_controllers_with_clock(
    client: kube::Client,
    controllers: &[ControllerName],
    clock: Clock,
) {
    let mut tasks = tokio::task::JoinSet::new();
    // One watch per kind for every controller that reads it.
    let informers = SharedInformers::with_clock(client.clone(), clock);
    for controller in controllers {
        let client = client.clone();
        let informers = informers.clone();
        let controller = *controller;
        tracing::info!(%controller, "starting controller");
        tasks.spawn(async move {
            match controller {
                ControllerName::ReplicaSet => crate::replicaset::run(client, informers).await,
                ControllerName::Deployment => crate::deployment::run(client, informers).await,
                ControllerName::GarbageCollector => {
                    crate::garbagecollector::run(client, informers).await
                }
                ControllerName::Disruption => crate::disruption::run(client, informers).await,
                ControllerName::StatefulSet => crate::statefulset::run(client, informers).await,
                ControllerName::DaemonSet => crate::daemonset::run(client, informers).await,
                ControllerName::Job => crate::job::run(client, informers).await,
                ControllerName::TtlAfterFinished => {
                    crate::ttlafterfinished::run(client, informers).await
                }
                ControllerName::Namespace => crate::namespace::run(client, informers).await,
                ControllerName::NodeLifecycle => crate::nodelifecycle::run(client, informers).await,
            }
            controller
        });
    }
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok(controller) => tracing::warn!(%controller, "controller stopped"),
            Err(e) => tracing::error!(error = %e, "controller task failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ControllerName::*;

    #[test]
    fn controller_lists_parse_as_kube_controller_manager_reads_them() {
        let cases: [(&str, Vec<ControllerName>); 5] = [
            ("", ALL_CONTROLLERS.to_vec()),
            ("*", ALL_CONTROLLERS.to_vec()),
            ("disruption,replicaset", vec![ReplicaSet, Disruption]),
            (
                "*,-garbagecollector",
                vec![
                    ReplicaSet,
                    Deployment,
                    Disruption,
                    StatefulSet,
                    DaemonSet,
                    Job,
                    Namespace,
                    NodeLifecycle,
                    TtlAfterFinished,
                ],
            ),
            ("deployment, deployment", vec![Deployment]),
        ];
        for (list, want) in cases {
            assert_eq!(parse_controllers(list).expect("valid"), want, "{list:?}");
        }
        assert!(parse_controllers("nope").is_err());
    }
}
