//! The descheduler's loop (upstream `pkg/descheduler`): each cycle lists
//! nodes, pods and namespaces once into a snapshot (and
//! PodDisruptionBudgets / PersistentVolumeClaims when a DefaultEvictor
//! protection needs them), skips itself when fewer
//! than 2 ready nodes exist, runs every profile's deschedule plugins and
//! then every profile's balance plugins on a blocking thread (evictions are
//! synchronous calls for the plugins), and reports what it evicted.
//!
//! Time comes from the cluster's [`Clock`]: the snapshot's `now` (pod
//! ages), the descheduling interval, event times. A cycle in progress
//! keeps a virtual cluster busy. On a real clock (the default, and
//! standalone `ksim deschedule`) this is the wall clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use ksim_core::selector::LabelSelectorRequirements;
use ksim_runtime::Clock;
use kube::Client;
use kube::api::{Api, ListParams};
use serde::Serialize;

use crate::Error;
use crate::evictor::{
    CycleEvictor, DefaultEvictor, EventLog, EvictionApi, EvictionRecord, EvictionResult,
    EvictorContext, KubeEvictionApi, ProfileEvictor,
};
use crate::framework::{ClusterSnapshot, PluginStatus};
use crate::nodeutil::is_node_ready;
use crate::policy::{BuiltProfile, DeschedulerPolicy};

/// What one cycle did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CycleReport {
    /// Why the cycle was skipped, if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Whether evictions were only simulated.
    pub dry_run: bool,
    /// Pods evicted (or that would be).
    pub total_evicted: u32,
    /// Eviction requests in progress.
    pub eviction_requests: u32,
    /// Evictions refused (by the API or a limit); never retried in the cycle.
    pub failed: u32,
    /// Every eviction asked for, in order, refused ones included.
    pub evictions: Vec<EvictionRecord>,
}

struct RunnableProfile {
    built: BuiltProfile,
    evictor: DefaultEvictor,
}

impl RunnableProfile {
    /// The evictor this profile's plugins talk to in `cycle`: its
    /// DefaultEvictor where enabled as filter / preEvictionFilter.
    fn evictor_in<'c, 'a, 's>(
        &'c self,
        cycle: &'c mut CycleEvictor<'a>,
        context: &'c EvictorContext<'s>,
    ) -> ProfileEvictor<'c, 'a, 's> {
        ProfileEvictor::new(
            cycle,
            context,
            self.built.filter.then_some(&self.evictor),
            self.built.pre_eviction_filter.then_some(&self.evictor),
            &self.built.name,
        )
    }
}

/// A descheduler for one policy against one cluster.
pub struct Descheduler {
    client: Client,
    policy: DeschedulerPolicy,
    profiles: Arc<Vec<RunnableProfile>>,
    node_selector: Option<LabelSelectorRequirements>,
    needs_pdbs: bool,
    needs_pvcs: bool,
    dry_run: bool,
    clock: Clock,
    /// Events written so far (series across cycles).
    events: Arc<Mutex<EventLog>>,
    /// Cycles completed (skipped and failed ones included).
    cycles: Arc<AtomicU64>,
}

impl Descheduler {
    /// Builds the profiles; priorityThreshold names are resolved through
    /// the API (a missing PriorityClass is an error, as upstream).
    pub async fn new(
        client: Client,
        policy: DeschedulerPolicy,
        dry_run: bool,
    ) -> Result<Self, Error> {
        let node_selector = match policy.node_selector.as_deref() {
            Some(selector) if !selector.is_empty() => Some(
                LabelSelectorRequirements::parse(selector)
                    .map_err(|error| Error::Policy(format!("nodeSelector: {error}")))?,
            ),
            _ => None,
        };
        let classes: Api<PriorityClass> = Api::all(client.clone());
        let mut profiles = Vec::new();
        let mut needs_pdbs = false;
        let mut needs_pvcs = false;
        for (index, built) in policy.build_profiles()?.into_iter().enumerate() {
            let value = match built.evictor_args.priority_class_name() {
                Some(name) => Some(classes.get(name).await.map_err(|error| {
                    Error::Policy(format!(
                        "profiles[{index}]: DefaultEvictor priorityThreshold.name {name:?}: {error}"
                    ))
                })?.value),
                None => None,
            };
            needs_pdbs |= built.evictor_args.needs_pdbs();
            needs_pvcs |= built.evictor_args.needs_pvcs();
            let evictor = DefaultEvictor::new(&built.evictor_args, value)
                .map_err(|error| Error::Policy(format!("profiles[{index}]: {error}")))?;
            profiles.push(RunnableProfile { built, evictor });
        }
        Ok(Descheduler {
            client,
            policy,
            profiles: Arc::new(profiles),
            node_selector,
            needs_pdbs,
            needs_pvcs,
            dry_run,
            clock: Clock::real(),
            events: Arc::default(),
            cycles: Arc::default(),
        })
    }

    /// Runs on the cluster's `clock` (the default is the wall clock).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The number of cycles completed so far (skipped and failed ones
    /// included); the counter keeps counting after the descheduler moves
    /// into its task.
    pub fn cycles(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.cycles)
    }

    /// One descheduling cycle.
    pub async fn run_once(&self) -> Result<CycleReport, Error> {
        let _busy = self.clock.busy();
        let result = self.cycle().await;
        self.cycles.fetch_add(1, Ordering::SeqCst);
        result
    }

    async fn cycle(&self) -> Result<CycleReport, Error> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let pods: Api<Pod> = Api::all(self.client.clone());
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let pdbs: Api<PodDisruptionBudget> = Api::all(self.client.clone());
        let pvcs: Api<PersistentVolumeClaim> = Api::all(self.client.clone());
        let list = ListParams::default();
        let (nodes, pods, namespaces) =
            tokio::try_join!(nodes.list(&list), pods.list(&list), namespaces.list(&list))?;
        let pdbs = if self.needs_pdbs {
            pdbs.list(&list).await?.items
        } else {
            Vec::new()
        };
        let pvcs = if self.needs_pvcs {
            pvcs.list(&list).await?.items
        } else {
            Vec::new()
        };
        let snapshot = ClusterSnapshot::new(
            nodes.items,
            pods.items,
            namespaces.items,
            self.clock.timestamp(),
        );
        let (api, calls) = if self.dry_run {
            (None, None)
        } else {
            let (api, calls) = KubeEvictionApi::with_clock(
                self.client.clone(),
                self.policy.grace_period_seconds,
                self.clock.clone(),
                Arc::clone(&self.events),
            );
            (Some(api), Some(calls))
        };
        let cycle = Cycle {
            profiles: Arc::clone(&self.profiles),
            node_selector: self.node_selector.clone(),
            api,
            limits: self.policy.limits(),
            failure_events: self
                .policy
                .eviction_failure_event_notification
                .unwrap_or(false),
        };
        // The cycle (and its API with it) is dropped on its thread when it
        // ends, which ends the calls it makes here.
        let worker = tokio::task::spawn_blocking(move || cycle.run(&snapshot, &pdbs, &pvcs));
        if let Some(calls) = calls {
            calls.serve().await;
        }
        worker
            .await
            .map_err(|error| Error::Policy(format!("the descheduling cycle panicked: {error}")))
    }

    /// Runs a cycle now and then every `interval` of the clock (once if
    /// it is zero; a cycle that overruns delays the next, never doubles
    /// it), logging failed cycles and going on.
    pub async fn run(&self, interval: Duration) {
        if interval.is_zero() {
            if let Err(error) = self.run_once().await {
                tracing::error!(%error, "descheduling cycle failed");
            }
            return;
        }
        let mut ticks = self.clock.interval(interval);
        loop {
            ticks.tick().await;
            if let Err(error) = self.run_once().await {
                tracing::error!(%error, "descheduling cycle failed");
            }
        }
    }
}

/// One dry-run cycle of `policy` over a snapshot and the cluster's
/// PodDisruptionBudgets and PersistentVolumeClaims, without any API (for
/// benchmarks and what-if tools). priorityThreshold names cannot be
/// resolved here: such a policy is refused.
pub fn simulate(
    policy: &DeschedulerPolicy,
    snapshot: &ClusterSnapshot,
    pdbs: &[PodDisruptionBudget],
    pvcs: &[PersistentVolumeClaim],
) -> Result<CycleReport, Error> {
    let node_selector = match policy.node_selector.as_deref() {
        Some(selector) if !selector.is_empty() => Some(
            LabelSelectorRequirements::parse(selector)
                .map_err(|error| Error::Policy(format!("nodeSelector: {error}")))?,
        ),
        _ => None,
    };
    let mut profiles = Vec::new();
    for (index, built) in policy.build_profiles()?.into_iter().enumerate() {
        if let Some(name) = built.evictor_args.priority_class_name() {
            return Err(Error::Policy(format!(
                "profiles[{index}]: DefaultEvictor priorityThreshold.name {name:?} needs a cluster"
            )));
        }
        let evictor = DefaultEvictor::new(&built.evictor_args, None)
            .map_err(|error| Error::Policy(format!("profiles[{index}]: {error}")))?;
        profiles.push(RunnableProfile { built, evictor });
    }
    Ok(run_profiles(
        &EvictorContext::new(snapshot, pdbs).with_pvcs(pvcs),
        &profiles,
        node_selector.as_ref(),
        None,
        policy.limits(),
        false,
    ))
}

/// What a cycle needs on its blocking thread.
struct Cycle {
    profiles: Arc<Vec<RunnableProfile>>,
    node_selector: Option<LabelSelectorRequirements>,
    api: Option<KubeEvictionApi>,
    limits: crate::evictor::EvictionLimits,
    failure_events: bool,
}

impl Cycle {
    fn run(
        &self,
        snapshot: &ClusterSnapshot,
        pdbs: &[PodDisruptionBudget],
        pvcs: &[PersistentVolumeClaim],
    ) -> CycleReport {
        run_profiles(
            &EvictorContext::new(snapshot, pdbs).with_pvcs(pvcs),
            &self.profiles,
            self.node_selector.as_ref(),
            self.api.as_ref().map(|api| api as &dyn EvictionApi),
            self.limits,
            self.failure_events,
        )
    }
}

/// Upstream's count after each plugin: what this plugin evicted.
fn log_plugin_counts(cycle: &CycleEvictor<'_>, extension_point: &str, before: (u32, u32)) {
    tracing::info!(
        extension_point,
        evictedPods = cycle.total_evicted() - before.0,
        evictionRequests = cycle.eviction_requests() - before.1,
        "Total number of evictions/requests"
    );
}

/// Upstream logs a profile's plugin errors as one aggregate.
fn log_profile_errors(profile: &str, extension_point: &str, errors: &[String]) {
    if errors.is_empty() {
        return;
    }
    let err = if errors.len() == 1 {
        errors[0].clone()
    } else {
        format!("[{}]", errors.join(", "))
    };
    tracing::error!(
        err,
        profile,
        "running {extension_point} extension point failed with error"
    );
}

/// One cycle over the snapshot (and PDBs and PVCs) of `context`.
fn run_profiles(
    context: &EvictorContext<'_>,
    profiles: &[RunnableProfile],
    node_selector: Option<&LabelSelectorRequirements>,
    api: Option<&dyn EvictionApi>,
    limits: crate::evictor::EvictionLimits,
    failure_events: bool,
) -> CycleReport {
    let snapshot = context.snapshot();
    let empty = std::collections::BTreeMap::new();
    let nodes: Vec<&Node> = snapshot
        .nodes()
        .iter()
        .filter(|node| {
            is_node_ready(node)
                && node_selector.is_none_or(|selector| {
                    selector.matches(node.metadata.labels.as_ref().unwrap_or(&empty))
                })
        })
        .collect();
    let dry_run = api.is_none();
    if nodes.len() <= 1 {
        tracing::info!(
            found = nodes.len(),
            "Skipping descheduling cycle: requires >=2 nodes"
        );
        // Upstream ends every cycle, a skipped one too, with the counts.
        tracing::info!(
            totalEvicted = 0,
            evictionRequests = 0,
            "Number of evictions/requests"
        );
        return CycleReport {
            skipped: Some(format!(
                "Skipping descheduling cycle: requires >=2 nodes, found {}",
                nodes.len()
            )),
            dry_run,
            ..Default::default()
        };
    }
    let mut cycle = CycleEvictor::new(api, limits, failure_events);
    // Upstream: every profile's deschedule plugins, then every profile's
    // balance plugins; a count after each plugin, and the plugins' errors
    // of a profile logged together once its plugins have run.
    for profile in profiles {
        let mut errors = Vec::new();
        for plugin in &profile.built.deschedule {
            let before = (cycle.total_evicted(), cycle.eviction_requests());
            let status = plugin.deschedule(
                snapshot,
                &nodes,
                &mut profile.evictor_in(&mut cycle, context),
            );
            log_plugin_counts(&cycle, "Deschedule", before);
            if let PluginStatus::Error(error) = status {
                errors.push(format!(
                    "plugin {:?} finished with error: {error}",
                    plugin.name()
                ));
            }
        }
        log_profile_errors(&profile.built.name, "deschedule", &errors);
    }
    for profile in profiles {
        let mut errors = Vec::new();
        for plugin in &profile.built.balance {
            let before = (cycle.total_evicted(), cycle.eviction_requests());
            let status = plugin.balance(
                snapshot,
                &nodes,
                &mut profile.evictor_in(&mut cycle, context),
            );
            log_plugin_counts(&cycle, "Balance", before);
            if let PluginStatus::Error(error) = status {
                errors.push(format!(
                    "plugin {:?} finished with error: {error}",
                    plugin.name()
                ));
            }
        }
        log_profile_errors(&profile.built.name, "balance", &errors);
    }
    tracing::info!(
        totalEvicted = cycle.total_evicted(),
        evictionRequests = cycle.eviction_requests(),
        "Number of evictions/requests"
    );
    let total_evicted = cycle.total_evicted();
    let eviction_requests = cycle.eviction_requests();
    let evictions = cycle.into_records();
    let failed = evictions
        .iter()
        .filter(|record| record.result == EvictionResult::Failed)
        .count();
    CycleReport {
        skipped: None,
        dry_run,
        total_evicted,
        eviction_requests,
        failed: u32::try_from(failed).unwrap_or(u32::MAX),
        evictions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podutil::testing::{node, pod};
    use k8s_openapi::jiff::Timestamp;

    fn profiles(policy: &str) -> Vec<RunnableProfile> {
        DeschedulerPolicy::parse(policy)
            .expect("valid")
            .build_profiles()
            .expect("builds")
            .into_iter()
            .map(|built| RunnableProfile {
                evictor: DefaultEvictor::new(&built.evictor_args, None).expect("valid"),
                built,
            })
            .collect()
    }

    const LIFETIME: &str = r#"
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: first
  pluginConfig:
  - name: PodLifeTime
    args: {maxPodLifeTimeSeconds: 1}
  plugins:
    deschedule: {enabled: [PodLifeTime]}
- name: second
  pluginConfig:
  - name: PodLifeTime
    args: {maxPodLifeTimeSeconds: 1}
  plugins:
    deschedule: {enabled: [PodLifeTime]}
"#;

    #[test]
    fn a_cycle_with_one_ready_node_is_skipped() {
        let snapshot = ClusterSnapshot::new(
            vec![node("a", &[])],
            vec![pod("p", "a")],
            vec![],
            Timestamp::from_second(100).expect("valid"),
        );
        let report = run_profiles(
            &EvictorContext::new(&snapshot, &[]),
            &profiles(LIFETIME),
            None,
            None,
            Default::default(),
            false,
        );
        assert_eq!(
            report.skipped.as_deref(),
            Some("Skipping descheduling cycle: requires >=2 nodes, found 1")
        );
    }

    #[test]
    fn every_profile_runs_and_a_pod_is_evicted_once() {
        let snapshot = ClusterSnapshot::new(
            vec![node("a", &[]), node("b", &[])],
            vec![pod("p", "a"), pod("q", "b")],
            vec![],
            Timestamp::from_second(100).expect("valid"),
        );
        let report = run_profiles(
            &EvictorContext::new(&snapshot, &[]),
            &profiles(LIFETIME),
            None,
            None,
            Default::default(),
            false,
        );
        assert_eq!(report.total_evicted, 2);
        let evicted: Vec<_> = report
            .evictions
            .iter()
            .filter(|r| r.result == EvictionResult::DryRun)
            .map(|r| (r.profile.as_str(), r.pod.as_str()))
            .collect();
        assert_eq!(evicted, [("first", "p"), ("first", "q")]);
    }
}
