//! The autoscaler component: a plain kube-rs client that, every scan
//! interval, reads the node groups from the kwok provider's ConfigMaps, the
//! nodes, pods and budgets, then scales up for unschedulable pods (creating
//! nodes NotReady and tainted `node.kubernetes.io/not-ready:NoSchedule`,
//! which the kubelet simulator makes Ready after the boot delay) or scales
//! down nodes unneeded for the unneeded time (taint
//! `ToBeDeletedByClusterAutoscaler`, evictions through the eviction API,
//! delete), and writes the `cluster-autoscaler-status` ConfigMap. Events
//! carry cluster-autoscaler's reasons and messages.
//!
//! Time is the cluster's clock: the scan interval, the unneeded time and the
//! delay after a scale-up, boot delays and the wait for evicted pods are all
//! measured and slept on it, and the random expander and node names draw
//! from its seeded source. A loop in progress keeps a virtual cluster busy,
//! except while it waits on the clock.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{ConfigMap, Node, NodeCondition, ObjectReference, Pod, Taint};
use ksim_runtime::clock::{Busy, Clock};
use ksim_scheduler::framework::{DisruptionBudget, Profile, Snapshot};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::config::{
    self, KWOK_MANAGED_ANNOTATION, NG_NAME_ANNOTATION, NodeGroupSpec, ProviderConfig,
};
use crate::error::AutoscalerError;
use crate::eviction;
use crate::scaledown::{self, SCALE_DOWN_DISABLED_ANNOTATION};
use crate::simulator::{self, Expander, GroupView, NOT_READY_TAINT, TO_BE_DELETED_TAINT, Verdict};
use crate::state::{self, ClusterState, SharedState};
use crate::status::{self, StatusInput};
use ksim_runtime::informer::Change;

/// The name events are reported under (`From` in `kubectl describe`).
pub const COMPONENT: &str = "cluster-autoscaler";
/// The annotation the kubelet simulator's node-initialize stage waits for.
pub const READY_AFTER_ANNOTATION: &str = "ksim.x-k8s.io/ready-after";

/// The autoscaler's options (upstream's flag names in the CLI).
#[derive(Debug, Clone)]
pub struct AutoscalerOptions {
    /// `--scan-interval` (10s).
    pub scan_interval: Duration,
    /// `--expander` (random).
    pub expanders: Vec<Expander>,
    /// `--scale-down-enabled` (true).
    pub scale_down_enabled: bool,
    /// `--scale-down-utilization-threshold` (0.5).
    pub scale_down_utilization_threshold: f64,
    /// `--scale-down-non-empty-candidates-count` (30): nodes with pods to
    /// move found unneeded per scan at most.
    pub scale_down_non_empty_candidates_count: usize,
    /// `--scale-down-unneeded-time` (10m).
    pub scale_down_unneeded_time: Duration,
    /// `--scale-down-delay-after-add` (10m).
    pub scale_down_delay_after_add: Duration,
    /// `--max-node-provision-time` (15m): how long a new node may stay
    /// NotReady and still count as coming; one that takes longer has
    /// failed: it is removed and its group backs off from scale-up.
    pub max_node_provision_time: Duration,
    /// `--initial-node-group-backoff-duration` (5m): the first backoff of a
    /// group after a failed scale-up.
    pub initial_node_group_backoff_duration: Duration,
    /// `--max-node-group-backoff-duration` (30m): backoffs double up to it.
    pub max_node_group_backoff_duration: Duration,
    /// `--node-group-backoff-reset-timeout` (3h): a failure this long after
    /// the last one starts from the initial backoff again.
    pub node_group_backoff_reset_timeout: Duration,
    /// `--new-pod-scale-up-delay` (0s): younger pods are not considered.
    pub new_pod_scale_up_delay: Duration,
    /// How long a new node boots before the kubelet simulator makes it Ready.
    pub node_boot_delay: Duration,
    /// Where the kwok provider ConfigMaps and the status ConfigMap live.
    pub namespace: String,
    /// The provider configuration ConfigMap's name.
    pub config_name: String,
    /// `--write-status-configmap` (true).
    pub write_status_configmap: bool,
}

impl Default for AutoscalerOptions {
    fn default() -> Self {
        AutoscalerOptions {
            scan_interval: Duration::from_secs(10),
            expanders: vec![Expander::Random],
            scale_down_enabled: true,
            scale_down_utilization_threshold: 0.5,
            scale_down_non_empty_candidates_count: 30,
            scale_down_unneeded_time: Duration::from_secs(600),
            scale_down_delay_after_add: Duration::from_secs(600),
            max_node_provision_time: Duration::from_secs(900),
            initial_node_group_backoff_duration: Duration::from_secs(300),
            max_node_group_backoff_duration: Duration::from_secs(1800),
            node_group_backoff_reset_timeout: Duration::from_secs(3 * 3600),
            new_pod_scale_up_delay: Duration::ZERO,
            node_boot_delay: Duration::from_secs(5),
            namespace: config::DEFAULT_NAMESPACE.to_string(),
            config_name: config::DEFAULT_CONFIG_NAME.to_string(),
            write_status_configmap: true,
        }
    }
}

/// What one loop saw and did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct LoopReport {
    /// Groups and their sizes after the loop.
    pub groups: Vec<GroupReport>,
    /// `group from->to` when the loop scaled up.
    pub scaled_up: Option<(String, usize, usize)>,
    /// Nodes deleted.
    pub scaled_down: Vec<String>,
    /// Pending pods considered.
    pub pending_pods: usize,
}

/// A group in a report.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct GroupReport {
    pub name: String,
    pub min_size: usize,
    pub max_size: usize,
    pub target_size: usize,
    pub registered: usize,
    pub ready: usize,
    pub not_started: usize,
    /// Nodes of the group unneeded (scale-down candidates).
    pub candidates: usize,
    /// Whether the group backs off from scale-up after a failed one.
    pub backoff: bool,
}

/// What one loop decided (under the state's lock), before acting on it.
#[derive(Debug)]
pub struct Decision {
    now: DateTime<Utc>,
    members: Vec<Member>,
    pending: usize,
    scale_up: Option<ScaleUpChoice>,
    /// Nodes to remove now: node, group, pods to evict.
    remove: Vec<(Arc<Node>, usize, Vec<Arc<Pod>>)>,
    /// Nodes that did not come up within the max node provision time.
    failed: Vec<(Arc<Node>, usize)>,
    registered: usize,
    ready: usize,
    upcoming: usize,
}

impl Decision {
    /// Nodes the loop removes (unneeded long enough, or failed to come up).
    pub fn nodes_to_remove(&self) -> usize {
        self.remove.len() + self.failed.len()
    }

    /// The group to grow, from and to which size.
    pub fn scale_up(&self) -> Option<(usize, usize, usize)> {
        self.scale_up.as_ref().map(|c| (c.group, c.from, c.to))
    }
}

/// The group a loop grows.
#[derive(Debug)]
struct ScaleUpChoice {
    group: usize,
    from: usize,
    to: usize,
    /// The pods the new nodes host.
    pods: Vec<Arc<Pod>>,
}

/// A group's scale-up in progress (upstream's ScaleUpRequest).
#[derive(Debug, Clone, Copy)]
struct ScaleUpRequest {
    time: DateTime<Utc>,
}

/// A group's backoff after failed scale-ups (upstream's exponential backoff).
#[derive(Debug, Clone, Copy)]
struct Backoff {
    duration: Duration,
    until: DateTime<Utc>,
    last_failure: DateTime<Utc>,
}

/// What the node groups could do for one pod (`ksim explain pod`).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Explanation {
    /// Whether the scheduler marked the pod unschedulable.
    pub unschedulable: bool,
    /// Whether it fits a node still booting (no scale-up needed).
    pub fits_booting_node: bool,
    pub groups: Vec<GroupExplanation>,
}

/// One group's answer.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct GroupExplanation {
    pub name: String,
    pub size: usize,
    pub max_size: usize,
    /// None: a new node of the group would host the pod; else why not.
    pub verdict: Option<String>,
}

/// A node of a group as one loop sees it.
#[derive(Debug, Clone)]
struct Member {
    name: String,
    group: usize,
    ready: bool,
    upcoming: bool,
    /// Booting longer than the max node provision time.
    failed: bool,
    being_deleted: bool,
}

/// The cluster autoscaler.
pub struct Autoscaler {
    client: Client,
    options: AutoscalerOptions,
    clock: Clock,
    recorder: Recorder,
    profile: Profile,
    rng: StdRng,
    /// Groups whose desired count was honoured once.
    initialized: HashSet<String>,
    /// Node → since when it is unneeded.
    unneeded_since: HashMap<String, DateTime<Utc>>,
    last_scale_up: Option<DateTime<Utc>>,
    last_scale_down: Option<DateTime<Utc>>,
    /// Pod uid → the last NotTriggerScaleUp message recorded.
    not_triggered: HashMap<String, String>,
    status: status::StatusTracker,
    /// The provider configuration the last loop read.
    provider: Option<ProviderConfig>,
    /// Held while a loop runs, so a virtual cluster waits for it; let go
    /// while the loop sleeps on the clock.
    working: std::sync::Mutex<Option<Busy>>,
    /// The cluster as the informers keep it.
    shared: Arc<SharedState>,
    /// The informers, started by the first loop.
    informers: Vec<tokio::task::JoinHandle<()>>,
    /// Group → its scale-up in progress.
    scale_ups: HashMap<String, ScaleUpRequest>,
    /// Group → its backoff after a failed scale-up.
    backoffs: HashMap<String, Backoff>,
}

impl Drop for Autoscaler {
    fn drop(&mut self) {
        for informer in &self.informers {
            informer.abort();
        }
    }
}

impl std::fmt::Debug for Autoscaler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Autoscaler")
            .field("options", &self.options)
            .finish()
    }
}

use ksim_core::status::is_node_ready as is_ready;

/// The status of the node's Ready condition.
fn ready_status(node: &Node) -> Option<&str> {
    ksim_core::status::node_ready_condition(node).map(|c| c.status.as_str())
}

/// Runs `f` on the state's snapshot with the booting nodes in `upcoming`
/// seen as they will be once Ready (without the not-ready and unreachable
/// taints), then puts them back as they are.
fn with_upcoming_ready<R>(
    state: &mut ClusterState,
    upcoming: &[String],
    f: impl FnOnce(&Snapshot) -> R,
) -> R {
    let originals: Vec<Arc<Node>> = upcoming
        .iter()
        .filter_map(|name| state.node(name).cloned())
        .collect();
    for node in &originals {
        let mut ready = Node::clone(node);
        if let Some(taints) = ready.spec.as_mut().and_then(|s| s.taints.as_mut()) {
            taints.retain(|t| {
                t.key != NOT_READY_TAINT && t.key != crate::simulator::UNREACHABLE_TAINT
            });
        }
        state.snapshot_mut().upsert_node(ready);
    }
    let result = f(&state.cache.snapshot);
    for node in originals {
        state.snapshot_mut().upsert_node(Node::clone(&node));
    }
    result
}

fn has_taint(node: &Node, key: &str) -> bool {
    ksim_core::toleration::node_taints(node)
        .iter()
        .any(|t| t.key == key)
}

/// A Kubernetes time as the clock's type.
fn to_chrono(time: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(time.0.as_millisecond()).unwrap_or_default()
}

fn object_ref<K: Resource<DynamicType = ()>>(object: &K) -> ObjectReference {
    object.object_ref(&())
}

impl Autoscaler {
    /// An autoscaler over `client` with the system clock.
    pub fn new(client: Client, options: AutoscalerOptions) -> Self {
        Self::with_clock(client, options, Clock::real())
    }

    /// An autoscaler reading time from `clock`.
    pub fn with_clock(client: Client, options: AutoscalerOptions, clock: Clock) -> Self {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: COMPONENT.to_string(),
                instance: None,
            },
        );
        // Drawn from the cluster's source: a seeded cluster repeats its picks.
        let rng = StdRng::seed_from_u64(clock.random().next_u64());
        Autoscaler {
            client,
            options,
            clock,
            recorder,
            profile: Profile::default_profile(),
            rng,
            initialized: HashSet::new(),
            unneeded_since: HashMap::new(),
            last_scale_up: None,
            last_scale_down: None,
            not_triggered: HashMap::new(),
            status: status::StatusTracker::default(),
            provider: None,
            working: std::sync::Mutex::new(None),
            shared: Arc::new(SharedState::default()),
            informers: Vec::new(),
            scale_ups: HashMap::new(),
            backoffs: HashMap::new(),
        }
    }

    /// The options.
    pub fn options(&self) -> &AutoscalerOptions {
        &self.options
    }

    /// Runs a loop every scan interval, forever.
    pub async fn run(mut self) {
        tracing::info!(interval = ?self.options.scan_interval, "cluster autoscaler starting");
        let mut ticker = self.clock.interval(self.options.scan_interval);
        loop {
            ticker.tick().await;
            self.set_working(true);
            let result = self.run_once().await;
            self.set_working(false);
            match result {
                Ok(report) => tracing::debug!(?report, "autoscaler loop"),
                // A cluster without the provider's ConfigMaps has no groups
                // yet: not worth a warning every scan.
                Err(error @ AutoscalerError::Config(_))
                    if error.to_string().contains("not found") =>
                {
                    tracing::debug!(%error, "no node groups configured")
                }
                Err(error) => tracing::warn!(%error, "autoscaler loop failed"),
            }
        }
    }

    /// The status ConfigMap, which events about the autoscaler itself regard.
    fn status_ref(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
            namespace: Some(self.options.namespace.clone()),
            name: Some(status::STATUS_CONFIGMAP.into()),
            ..Default::default()
        }
    }

    fn publish(&self, type_: EventType, regarding: ObjectReference, reason: &str, note: String) {
        let recorder = self.recorder.clone();
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: reason.to_string(),
            secondary: None,
        };
        let busy = self.clock.busy();
        tokio::spawn(async move {
            let _busy = busy;
            if let Err(error) = recorder.publish(&event, &regarding).await {
                tracing::debug!(%error, "cannot record an event");
            }
        });
    }

    fn set_working(&self, working: bool) {
        let mut held = self.working.lock().unwrap_or_else(|e| e.into_inner());
        *held = working.then(|| self.clock.busy());
    }

    /// Sleeps `duration` on the clock, letting a virtual cluster count as
    /// settled meanwhile (what the loop waits for happens elsewhere).
    async fn sleep(&self, duration: Duration) {
        let was_working = {
            let mut held = self.working.lock().unwrap_or_else(|e| e.into_inner());
            held.take().is_some()
        };
        self.clock.sleep(duration).await;
        if was_working {
            self.set_working(true);
        }
    }

    /// The shared cluster state (the informers start with the first loop).
    pub fn state(&self) -> &Arc<SharedState> {
        &self.shared
    }

    /// Reads the node groups with `provider` (what a loop does from the
    /// kwok provider's ConfigMap), for [`Autoscaler::decide`] alone.
    pub fn use_provider(&mut self, provider: ProviderConfig) {
        self.provider = Some(provider);
    }

    /// How many nodes are unneeded now (scale-down candidates).
    pub fn unneeded(&self) -> usize {
        self.unneeded_since.len()
    }

    /// Starts the informers once, and waits until they have listed.
    async fn watching(&mut self) {
        if self.informers.is_empty() {
            self.informers = state::watch(&self.client, &self.shared, &self.clock);
        }
        self.shared.synced().await;
    }

    /// One loop: read, scale up or down, write the status.
    pub async fn run_once(&mut self) -> Result<LoopReport, AutoscalerError> {
        let (provider, specs) = read_node_groups(&self.client, &self.options).await?;
        self.provider = Some(provider);
        let specs: Vec<Arc<NodeGroupSpec>> = specs.into_iter().map(Arc::new).collect();
        self.watching().await;
        // Groups seen for the first time get their desired count.
        let missing: Vec<(usize, usize)> = {
            let shared = self.shared.clone();
            let state = shared.lock();
            let members = self.members(&specs, state.nodes().map(Arc::as_ref));
            specs
                .iter()
                .enumerate()
                .filter(|(_, spec)| !self.initialized.contains(&spec.name))
                .map(|(index, spec)| {
                    let have = members.iter().filter(|m| m.group == index).count();
                    let want = spec.desired_size.max(spec.min_size);
                    (index, want.saturating_sub(have))
                })
                .collect()
        };
        for (index, count) in missing {
            let spec = specs[index].clone();
            if count > 0 {
                tracing::info!(group = %spec.name, count, "creating the group's desired nodes");
            }
            for _ in 0..count {
                let node = self.create_node(&spec).await?;
                self.shared.lock().node_changed(Change::Applied(node));
            }
            self.initialized.insert(spec.name.clone());
        }
        let priorities = if self.options.expanders.contains(&Expander::Priority) {
            self.priorities().await
        } else {
            Vec::new()
        };
        let decision = {
            let shared = self.shared.clone();
            let mut state = shared.lock();
            self.decide(&mut state, &specs, &priorities)
        };
        self.act(&specs, decision).await
    }

    /// Decides one loop on `state` (no API call, events aside): nodes that
    /// failed to come up, the scale-up for the unschedulable pods, else the
    /// unneeded nodes to remove. The simulations run on the state's own
    /// snapshot and leave it as they found it.
    pub fn decide(
        &mut self,
        state: &mut ClusterState,
        specs: &[Arc<NodeGroupSpec>],
        priorities: &[(i64, Vec<regex::Regex>)],
    ) -> Decision {
        let now = self.clock.now();
        let members = self.members(specs, state.nodes().map(Arc::as_ref));
        let failed: Vec<(Arc<Node>, usize)> = members
            .iter()
            .filter(|m| m.failed)
            .filter_map(|m| Some((state.node(&m.name)?.clone(), m.group)))
            .collect();
        self.track_scale_ups(specs, &members, &failed, now);
        let min_age = chrono::TimeDelta::from_std(self.options.new_pod_scale_up_delay)
            .unwrap_or(chrono::TimeDelta::MAX);
        let pending: Vec<Arc<Pod>> = state
            .pending()
            .filter(|pod| {
                let created = pod.metadata.creation_timestamp.as_ref().map(to_chrono);
                created.is_none_or(|c| now - c >= min_age)
            })
            .cloned()
            .collect();
        let upcoming: Vec<String> = members
            .iter()
            .filter(|m| m.upcoming)
            .map(|m| m.name.clone())
            .collect();
        let views = self.group_views(specs, &members, now);
        let mut decision = Decision {
            now,
            pending: pending.len(),
            scale_up: None,
            remove: Vec::new(),
            failed,
            registered: state.node_count(),
            ready: state.nodes().filter(|n| is_ready(n)).count(),
            upcoming: upcoming.len(),
            members: Vec::new(),
        };
        let pending = if pending.is_empty() {
            pending
        } else {
            // As upstream's filter-out-schedulable: a pod that fits a Ready
            // node now (one that just became Ready, before the scheduler
            // retried the pod) needs no scale-up.
            let mut not_ready: HashSet<String> = state
                .nodes()
                .filter(|n| !is_ready(n) || has_taint(n, TO_BE_DELETED_TAINT))
                .filter_map(|n| n.metadata.name.clone())
                .collect();
            not_ready.extend(upcoming.iter().cloned());
            let mut cursor = 0;
            let snapshot = &state.cache.snapshot;
            pending
                .into_iter()
                .filter(|pod| {
                    scaledown::find_place(&self.profile, snapshot, pod, &not_ready, &mut cursor)
                        .is_none()
                })
                .collect()
        };
        decision.pending = pending.len();
        if !pending.is_empty() && !specs.is_empty() {
            let plan = with_upcoming_ready(state, &upcoming, |snapshot| {
                simulator::plan_scale_up(&self.profile, snapshot, &upcoming, &views, &pending)
            });
            let chosen = simulator::choose(
                &self.options.expanders,
                &plan.options,
                &views,
                priorities,
                &mut self.rng,
            );
            if let Some(option) = chosen {
                let view = &views[option.group];
                let from = view.target_size;
                decision.scale_up = Some(ScaleUpChoice {
                    group: option.group,
                    from,
                    to: (from + option.node_count).min(view.spec.max_size),
                    pods: option.pods.iter().map(|&i| pending[i].clone()).collect(),
                });
            }
            let fit_upcoming: HashSet<usize> = plan.fit_upcoming.iter().copied().collect();
            for (index, verdicts) in plan.verdicts.iter().enumerate() {
                if fit_upcoming.contains(&index) || verdicts.contains(&Verdict::Helps) {
                    continue;
                }
                let message = simulator::not_triggered_message(verdicts);
                let pod = &pending[index];
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                if self.not_triggered.get(&uid) != Some(&message) {
                    self.publish(
                        EventType::Normal,
                        object_ref(pod.as_ref()),
                        "NotTriggerScaleUp",
                        message.clone(),
                    );
                    self.not_triggered.insert(uid, message);
                }
            }
        }
        let pending_uids: HashSet<&str> = pending
            .iter()
            .filter_map(|p| p.metadata.uid.as_deref())
            .collect();
        self.not_triggered
            .retain(|uid, _| pending_uids.contains(uid.as_str()));
        if self.options.scale_down_enabled && decision.scale_up.is_none() {
            decision.remove = self.find_removable(state, specs, &members, now);
        }
        decision.members = members;
        decision
    }

    /// Upstream's scale-up requests: a group's request ends when it has no
    /// node booting; one whose nodes did not come up within the max node
    /// provision time failed (`ScaleUpTimedOut`), and the group backs off.
    fn track_scale_ups(
        &mut self,
        specs: &[Arc<NodeGroupSpec>],
        members: &[Member],
        failed: &[(Arc<Node>, usize)],
        now: DateTime<Utc>,
    ) {
        let failed_groups: HashSet<usize> = failed.iter().map(|(_, group)| *group).collect();
        for (index, spec) in specs.iter().enumerate() {
            if failed_groups.contains(&index) {
                let since = self
                    .scale_ups
                    .remove(&spec.name)
                    .map(|r| r.time)
                    .unwrap_or_else(|| {
                        failed
                            .iter()
                            .filter(|(_, group)| *group == index)
                            .filter_map(|(node, _)| node.metadata.creation_timestamp.as_ref())
                            .map(to_chrono)
                            .min()
                            .unwrap_or(now)
                    });
                let waited = (now - since).to_std().unwrap_or_default();
                let waited =
                    ksim_core::duration::format_go_duration(Duration::from_secs(waited.as_secs()));
                tracing::warn!(group = %spec.name, %waited, "scale-up timed out");
                self.publish(
                    EventType::Warning,
                    self.status_ref(),
                    "ScaleUpTimedOut",
                    format!(
                        "Nodes added to group {} failed to register within {waited}",
                        spec.name
                    ),
                );
                self.back_off(&spec.name, now);
                continue;
            }
            let booting = members.iter().any(|m| m.group == index && m.upcoming);
            if !booting && self.scale_ups.remove(&spec.name).is_some() {
                // A scale-up that finished ends the group's backoff (upstream).
                self.backoffs.remove(&spec.name);
                tracing::debug!(group = %spec.name, "scale-up finished");
            }
        }
        self.backoffs.retain(|_, b| {
            now - b.last_failure
                < chrono::TimeDelta::from_std(self.options.node_group_backoff_reset_timeout)
                    .unwrap_or(chrono::TimeDelta::MAX)
        });
    }

    /// Backs `group` off from scale-up: the initial duration, doubled for
    /// each failure within the reset timeout, up to the max.
    fn back_off(&mut self, group: &str, now: DateTime<Utc>) {
        let reset = chrono::TimeDelta::from_std(self.options.node_group_backoff_reset_timeout)
            .unwrap_or(chrono::TimeDelta::MAX);
        let duration = match self.backoffs.get(group) {
            Some(previous) if now - previous.last_failure < reset => {
                (previous.duration * 2).min(self.options.max_node_group_backoff_duration)
            }
            _ => self.options.initial_node_group_backoff_duration,
        };
        let until = now + chrono::TimeDelta::from_std(duration).unwrap_or(chrono::TimeDelta::MAX);
        tracing::warn!(%group, %until, "disabling scale-up for the node group");
        self.backoffs.insert(
            group.to_string(),
            Backoff {
                duration,
                until,
                last_failure: now,
            },
        );
    }

    /// The groups as the scale-up sees them: their size without nodes that
    /// failed, and whether they back off.
    fn group_views(
        &self,
        specs: &[Arc<NodeGroupSpec>],
        members: &[Member],
        now: DateTime<Utc>,
    ) -> Vec<GroupView> {
        specs
            .iter()
            .enumerate()
            .map(|(index, spec)| GroupView {
                spec: spec.clone(),
                target_size: members
                    .iter()
                    .filter(|m| m.group == index && !m.failed)
                    .count(),
                skip: self
                    .backoffs
                    .get(&spec.name)
                    .is_some_and(|b| now < b.until)
                    .then(|| simulator::BACKOFF.to_string()),
            })
            .collect()
    }

    /// Acts on a decision: removes failed nodes, grows the chosen group,
    /// drains and removes unneeded nodes, writes the status.
    async fn act(
        &mut self,
        specs: &[Arc<NodeGroupSpec>],
        decision: Decision,
    ) -> Result<LoopReport, AutoscalerError> {
        let Decision {
            now,
            members,
            pending,
            scale_up,
            remove,
            failed,
            registered,
            ready,
            upcoming,
        } = decision;
        let mut report = LoopReport {
            pending_pods: pending,
            ..Default::default()
        };
        let nodes_api: Api<Node> = Api::all(self.client.clone());
        for (node, _) in &failed {
            let name = node.metadata.name.clone().unwrap_or_default();
            tracing::warn!(node = %name, "removing a node that failed to come up");
            match nodes_api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {
                    self.shared
                        .lock()
                        .node_changed(Change::Deleted(Node::clone(node)));
                    report.scaled_down.push(name);
                }
                Err(error) => tracing::warn!(node = %name, %error, "cannot remove the failed node"),
            }
        }
        if let Some(choice) = scale_up {
            let spec = specs[choice.group].clone();
            let (from, to) = (choice.from, choice.to);
            let message = format!(
                "pod triggered scale-up: [{{{} {from}->{to} (max: {})}}]",
                spec.name, spec.max_size
            );
            tracing::info!(group = %spec.name, from, to, "scale-up");
            self.publish(
                EventType::Normal,
                self.status_ref(),
                "ScaledUpGroup",
                format!(
                    "Scale-up: setting group {} size to {to} instead of {from} (max: {})",
                    spec.name, spec.max_size
                ),
            );
            self.scale_ups
                .entry(spec.name.clone())
                .or_insert(ScaleUpRequest { time: now });
            for _ in from..to {
                let node = self.create_node(&spec).await?;
                self.shared.lock().node_changed(Change::Applied(node));
            }
            for pod in &choice.pods {
                self.publish(
                    EventType::Normal,
                    object_ref(pod.as_ref()),
                    "TriggeredScaleUp",
                    message.clone(),
                );
            }
            self.status.scaled_up(&spec.name, now);
            self.last_scale_up = Some(now);
            report.scaled_up = Some((spec.name.clone(), from, to));
        }
        for (node, group, pods) in remove {
            let name = node.metadata.name.clone().unwrap_or_default();
            match self.remove_node(&node, &pods).await {
                Ok(()) => {
                    self.shared
                        .lock()
                        .node_changed(Change::Deleted(Node::clone(&node)));
                    self.unneeded_since.remove(&name);
                    self.last_scale_down = Some(now);
                    self.status.scaled_down(&specs[group].name, now);
                    report.scaled_down.push(name);
                }
                Err(error) => {
                    tracing::info!(node = %name, %error, "scale-down failed");
                    self.unneeded_since.remove(&name);
                }
            }
        }
        for (index, spec) in specs.iter().enumerate() {
            let mine: Vec<&Member> = members.iter().filter(|m| m.group == index).collect();
            let registered = mine.len();
            let target = match &report.scaled_up {
                Some((name, _, to)) if *name == spec.name => *to,
                _ => registered.saturating_sub(
                    report
                        .scaled_down
                        .iter()
                        .filter(|n| mine.iter().any(|m| &m.name == *n))
                        .count(),
                ),
            };
            report.groups.push(GroupReport {
                name: spec.name.clone(),
                min_size: spec.min_size,
                max_size: spec.max_size,
                target_size: target,
                registered,
                ready: mine.iter().filter(|m| m.ready).count(),
                not_started: mine.iter().filter(|m| m.upcoming).count(),
                candidates: mine
                    .iter()
                    .filter(|m| self.unneeded_since.contains_key(&m.name))
                    .count(),
                backoff: self.backoffs.get(&spec.name).is_some_and(|b| now < b.until),
            });
        }
        if self.options.write_status_configmap {
            let input = StatusInput {
                now,
                report: &report,
                registered,
                ready,
                not_started: upcoming,
                unneeded: self.unneeded_since.len(),
            };
            self.write_status(&input).await;
        }
        Ok(report)
    }

    /// For a pending pod: what each node group could do for it (read only,
    /// from lists: a one-shot question).
    pub async fn explain(&mut self, pod: &Pod) -> Result<Explanation, AutoscalerError> {
        let (provider, specs) = read_node_groups(&self.client, &self.options).await?;
        self.provider = Some(provider);
        let specs: Vec<Arc<NodeGroupSpec>> = specs.into_iter().map(Arc::new).collect();
        let mut explanation = Explanation {
            unschedulable: state::is_unschedulable(pod),
            ..Default::default()
        };
        if !explanation.unschedulable {
            return Ok(explanation);
        }
        let nodes = Api::<Node>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| AutoscalerError::api("listing nodes", e))?
            .items;
        let pods = Api::<Pod>::all(self.client.clone())
            .list(&ListParams::default().fields("spec.nodeName!="))
            .await
            .map_err(|e| AutoscalerError::api("listing pods", e))?
            .items;
        let mut state = ClusterState::from_lists(nodes, pods, []);
        let now = self.clock.now();
        let members = self.members(&specs, state.nodes().map(Arc::as_ref));
        let upcoming: Vec<String> = members
            .iter()
            .filter(|m| m.upcoming)
            .map(|m| m.name.clone())
            .collect();
        let views = self.group_views(&specs, &members, now);
        let pending = vec![Arc::new(pod.clone())];
        let plan = with_upcoming_ready(&mut state, &upcoming, |snapshot| {
            simulator::plan_scale_up(&self.profile, snapshot, &upcoming, &views, &pending)
        });
        explanation.fits_booting_node = !plan.fit_upcoming.is_empty();
        let verdicts = plan.verdicts.first().cloned().unwrap_or_default();
        for (view, verdict) in views.iter().zip(verdicts) {
            explanation.groups.push(GroupExplanation {
                name: view.spec.name.clone(),
                size: view.target_size,
                max_size: view.spec.max_size,
                verdict: match verdict {
                    Verdict::Helps => None,
                    Verdict::Cannot(reason) => Some(reason),
                },
            });
        }
        Ok(explanation)
    }

    fn members<'a>(
        &self,
        specs: &[Arc<NodeGroupSpec>],
        nodes: impl Iterator<Item = &'a Node>,
    ) -> Vec<Member> {
        let Some(provider) = &self.provider else {
            return Vec::new();
        };
        let now = self.clock.now();
        let provision = chrono::TimeDelta::from_std(self.options.max_node_provision_time)
            .unwrap_or(chrono::TimeDelta::MAX);
        let mut members = Vec::new();
        for node in nodes {
            let annotations = node.metadata.annotations.as_ref();
            let by_name = annotations
                .and_then(|a| a.get(NG_NAME_ANNOTATION))
                .and_then(|name| specs.iter().position(|s| &s.name == name));
            let group = by_name.or_else(|| {
                let value = provider.group_by.value_of(node)?;
                specs.iter().position(|s| s.group_value == value)
            });
            let Some(group) = group else { continue };
            let ready = is_ready(node);
            let young = node
                .metadata
                .creation_timestamp
                .as_ref()
                .is_none_or(|t| now - to_chrono(t) < provision);
            let deleting = node.metadata.deletion_timestamp.is_some();
            // A node this autoscaler made that is still booting (not a
            // Ready node that stopped: its Ready condition is Unknown).
            let booting = !ready
                && annotations.is_some_and(|a| {
                    a.get(KWOK_MANAGED_ANNOTATION).is_some_and(|v| v == "fake")
                        && a.contains_key(READY_AFTER_ANNOTATION)
                })
                && ready_status(node) != Some("Unknown");
            members.push(Member {
                name: node.metadata.name.clone().unwrap_or_default(),
                group,
                ready,
                upcoming: !ready && young && !deleting,
                failed: booting && !young && !deleting,
                being_deleted: has_taint(node, TO_BE_DELETED_TAINT) || deleting,
            });
        }
        members
    }

    async fn priorities(&self) -> Vec<(i64, Vec<regex::Regex>)> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.options.namespace);
        match api.get_opt(config::PRIORITY_EXPANDER_CONFIGMAP).await {
            Ok(Some(map)) => {
                let text = map
                    .data
                    .as_ref()
                    .and_then(|d| d.get(config::PRIORITY_EXPANDER_KEY))
                    .cloned()
                    .unwrap_or_default();
                config::parse_priorities(&text).unwrap_or_else(|error| {
                    tracing::warn!(%error, "priority expander configuration");
                    Vec::new()
                })
            }
            Ok(None) => Vec::new(),
            Err(error) => {
                tracing::warn!(%error, "cannot read the priority expander configuration");
                Vec::new()
            }
        }
    }

    /// Creates one node of the group: the template, named
    /// `<group>-<random>`, NotReady and tainted not-ready until the boot
    /// delay has passed.
    async fn create_node(&mut self, spec: &NodeGroupSpec) -> Result<Node, AutoscalerError> {
        let name = format!(
            "{}-{}",
            spec.name,
            self.clock
                .random()
                .keyed(&format!("node:{}", spec.name))
                .name_suffix(5)
        );
        let ready_after = self.clock.now()
            + chrono::TimeDelta::from_std(self.options.node_boot_delay)
                .unwrap_or(chrono::TimeDelta::zero());
        let node = new_node(spec, &name, ready_after);
        let api: Api<Node> = Api::all(self.client.clone());
        api.create(&PostParams::default(), &node)
            .await
            .map_err(|e| AutoscalerError::api(format!("couldn't create new node '{name}'"), e))
    }

    /// Scale-down, decided: finds the unneeded nodes (simulating on the
    /// state's snapshot, then putting the moved pods back), and returns
    /// those unneeded long enough that may go now (not below a group's
    /// min size; one drained node per loop, as upstream's default).
    fn find_removable(
        &mut self,
        state: &mut ClusterState,
        specs: &[Arc<NodeGroupSpec>],
        members: &[Member],
        now: DateTime<Utc>,
    ) -> Vec<(Arc<Node>, usize, Vec<Arc<Pod>>)> {
        let delay = chrono::TimeDelta::from_std(self.options.scale_down_delay_after_add)
            .unwrap_or(chrono::TimeDelta::MAX);
        if self.last_scale_up.is_some_and(|at| now - at < delay) {
            self.status.scale_down_state = "NoCandidates".into();
            return Vec::new();
        }
        let budgets: Vec<DisruptionBudget> = state.budgets().to_vec();
        // Nodes no pod may move to: not Ready, being deleted.
        let mut excluded: HashSet<String> = state
            .nodes()
            .filter(|n| {
                !is_ready(n)
                    || has_taint(n, TO_BE_DELETED_TAINT)
                    || n.metadata.deletion_timestamp.is_some()
            })
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        let mut sizes: Vec<usize> = vec![0; specs.len()];
        for member in members.iter().filter(|m| !m.failed) {
            sizes[member.group] += 1;
        }
        let candidates: Vec<scaledown::Candidate> = members
            .iter()
            .filter(|m| m.ready && !m.being_deleted)
            .filter_map(|m| {
                let annotations = state.node(&m.name)?.metadata.annotations.as_ref();
                // As the kwok provider: only nodes it made may be deleted.
                let fake = annotations
                    .and_then(|a| a.get(KWOK_MANAGED_ANNOTATION))
                    .is_some_and(|v| v == "fake");
                if !fake {
                    return None;
                }
                let disabled = annotations
                    .and_then(|a| a.get(SCALE_DOWN_DISABLED_ANNOTATION))
                    .is_some_and(|v| v == "true");
                Some(scaledown::Candidate {
                    name: m.name.clone(),
                    group: m.group,
                    scale_down_disabled: disabled,
                })
            })
            .collect();
        let (unneeded, reasons) = scaledown::find_unneeded(
            &self.profile,
            state.snapshot_mut(),
            &candidates,
            &mut excluded,
            budgets,
            self.options.scale_down_utilization_threshold,
            self.options.scale_down_non_empty_candidates_count,
        );
        // The snapshot is the informers': the moved pods go back.
        for (_, _, pods) in &unneeded {
            for pod in pods {
                state.snapshot_mut().add_pod(Pod::clone(pod));
            }
        }
        let still: HashSet<&str> = unneeded.iter().map(|(n, _, _)| n.as_str()).collect();
        self.unneeded_since
            .retain(|name, _| still.contains(name.as_str()));
        for (name, _, _) in &unneeded {
            self.unneeded_since.entry(name.clone()).or_insert(now);
        }
        self.status.unremovable = reasons;
        self.status.scale_down_state = if unneeded.is_empty() {
            "NoCandidates".into()
        } else {
            "CandidatesPresent".into()
        };
        let unneeded_time = chrono::TimeDelta::from_std(self.options.scale_down_unneeded_time)
            .unwrap_or(chrono::TimeDelta::MAX);
        let mut removable = Vec::new();
        let mut drains = false;
        for (name, group, pods) in unneeded {
            let since = self.unneeded_since.get(&name).copied().unwrap_or(now);
            if now - since < unneeded_time {
                continue;
            }
            if sizes[group] <= specs[group].min_size {
                continue;
            }
            if !pods.is_empty() && drains {
                continue;
            }
            let Some(node) = state.node(&name).cloned() else {
                continue;
            };
            drains |= !pods.is_empty();
            sizes[group] -= 1;
            removable.push((node, group, pods));
        }
        removable
    }

    /// Taints the node, evicts its pods through the eviction API, waits for
    /// them to go, and deletes the node; a refused eviction untaints it.
    async fn remove_node(&self, node: &Node, pods: &[Arc<Pod>]) -> Result<(), AutoscalerError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let nodes_api: Api<Node> = Api::all(self.client.clone());
        if let Err(error) = self.set_deletion_taint(&name, true).await {
            self.publish(
                EventType::Warning,
                object_ref(node),
                "ScaleDownFailed",
                format!("failed to mark the node as toBeDeleted/unschedulable: {error}"),
            );
            return Err(error);
        }
        self.publish(
            EventType::Normal,
            object_ref(node),
            "ScaleDown",
            "marked the node as toBeDeleted/unschedulable".into(),
        );
        if pods.is_empty() {
            self.publish(
                EventType::Normal,
                self.status_ref(),
                "ScaleDownEmpty",
                format!("Scale-down: removing empty node {name:?}"),
            );
        } else {
            let moved: Vec<String> = pods
                .iter()
                .map(|p| {
                    format!(
                        "{}/{}",
                        p.metadata.namespace.as_deref().unwrap_or("default"),
                        p.metadata.name.as_deref().unwrap_or_default()
                    )
                })
                .collect();
            self.publish(
                EventType::Normal,
                self.status_ref(),
                "ScaleDown",
                format!(
                    "Scale-down: removing node {name}, pods to reschedule: {}",
                    moved.join(",")
                ),
            );
        }
        for pod in pods {
            self.publish(
                EventType::Normal,
                object_ref(pod.as_ref()),
                "ScaleDown",
                "deleting pod for node scale down".into(),
            );
            let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
            let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
            let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
            if let Err(error) = eviction::evict(&api, namespace, pod_name).await {
                let gone = matches!(&error, kube::Error::Api(status) if status.code == 404);
                if !gone {
                    self.publish(
                        EventType::Warning,
                        object_ref(pod.as_ref()),
                        "ScaleDownFailed",
                        format!("failed to delete pod for ScaleDown: {error}"),
                    );
                    self.publish(
                        EventType::Warning,
                        object_ref(node),
                        "ScaleDownFailed",
                        "failed to drain the node, aborting ScaleDown".into(),
                    );
                    if let Err(untaint) = self.set_deletion_taint(&name, false).await {
                        tracing::warn!(node = %name, error = %untaint, "cannot remove the deletion taint");
                    }
                    return Err(AutoscalerError::api(
                        format!("evicting {namespace}/{pod_name}"),
                        error,
                    ));
                }
            }
        }
        // Wait for the evicted pods to go (bounded, as upstream's
        // MaxPodEvictionTime).
        let pods_api: Api<Pod> = Api::all(self.client.clone());
        let selector = format!("spec.nodeName={name}");
        let wanted: HashSet<(String, String)> = pods
            .iter()
            .map(|p| {
                (
                    p.metadata.namespace.clone().unwrap_or_default(),
                    p.metadata.name.clone().unwrap_or_default(),
                )
            })
            .collect();
        let deadline = self.clock.instant() + Duration::from_secs(120);
        while !wanted.is_empty() && self.clock.instant() < deadline {
            let left = pods_api
                .list(&ListParams::default().fields(&selector))
                .await
                .map_err(|e| AutoscalerError::api("listing the node's pods", e))?;
            let remaining = left.items.iter().any(|p| {
                wanted.contains(&(
                    p.metadata.namespace.clone().unwrap_or_default(),
                    p.metadata.name.clone().unwrap_or_default(),
                ))
            });
            if !remaining {
                break;
            }
            self.sleep(Duration::from_millis(200)).await;
        }
        nodes_api
            .delete(&name, &DeleteParams::default())
            .await
            .map_err(|e| {
                self.publish(
                    EventType::Warning,
                    object_ref(node),
                    "ScaleDownFailed",
                    "failed to delete the node".into(),
                );
                AutoscalerError::api(format!("deleting node {name}"), e)
            })?;
        tracing::info!(node = %name, "scale-down: node removed");
        Ok(())
    }

    async fn set_deletion_taint(&self, name: &str, present: bool) -> Result<(), AutoscalerError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let node = api
            .get(name)
            .await
            .map_err(|e| AutoscalerError::api(format!("reading node {name}"), e))?;
        let mut taints: Vec<Taint> = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        let had = taints.iter().any(|t| t.key == TO_BE_DELETED_TAINT);
        if present == had {
            return Ok(());
        }
        if present {
            taints.push(Taint {
                key: TO_BE_DELETED_TAINT.into(),
                value: Some(self.clock.now().timestamp().to_string()),
                effect: "NoSchedule".into(),
                time_added: None,
            });
        } else {
            taints.retain(|t| t.key != TO_BE_DELETED_TAINT);
        }
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": node.metadata.resource_version},
            "spec": {"taints": taints},
        });
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| AutoscalerError::api(format!("tainting node {name}"), e))?;
        Ok(())
    }

    async fn write_status(&mut self, input: &StatusInput<'_>) {
        let text = self.status.render(input);
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.options.namespace);
        let stamp = input.now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let map = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(status::STATUS_CONFIGMAP.into()),
                namespace: Some(self.options.namespace.clone()),
                annotations: Some([(status::LAST_UPDATED_ANNOTATION.to_string(), stamp)].into()),
                ..Default::default()
            },
            data: Some([("status".to_string(), text)].into()),
            ..Default::default()
        };
        let result = match api.get_opt(status::STATUS_CONFIGMAP).await {
            Ok(Some(_)) => api
                .patch(
                    status::STATUS_CONFIGMAP,
                    &PatchParams::default(),
                    &Patch::Merge(&map),
                )
                .await
                .map(|_| ()),
            Ok(None) => api.create(&PostParams::default(), &map).await.map(|_| ()),
            Err(error) => Err(error),
        };
        if let Err(error) = result {
            tracing::debug!(%error, "cannot write the status ConfigMap");
        }
    }
}

/// Reads and parses the kwok provider ConfigMaps.
pub async fn read_node_groups(
    client: &Client,
    options: &AutoscalerOptions,
) -> Result<(ProviderConfig, Vec<NodeGroupSpec>), AutoscalerError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &options.namespace);
    let get = |name: String| {
        let api = api.clone();
        async move {
            api.get_opt(&name)
                .await
                .map_err(|e| AutoscalerError::api(format!("failed to get configmap '{name}'"), e))?
                .ok_or_else(|| {
                    AutoscalerError::Config(format!(
                        "failed to get configmap '{name}': configmaps \"{name}\" not found"
                    ))
                })
        }
    };
    let config_map = get(options.config_name.clone()).await?;
    let text = config_map
        .data
        .as_ref()
        .and_then(|d| d.get(config::CONFIG_KEY))
        .cloned()
        .unwrap_or_default();
    let provider = ProviderConfig::parse(&text)?;
    let templates = get(provider.templates_name.clone()).await?;
    let text = templates
        .data
        .as_ref()
        .and_then(|d| d.get(&provider.templates_key))
        .filter(|t| !t.is_empty())
        .cloned()
        .ok_or_else(|| {
            AutoscalerError::Config(format!(
                "configmap '{}' doesn't have '{}' key",
                provider.templates_name, provider.templates_key
            ))
        })?;
    let groups = config::parse_templates(&text, &provider)?;
    Ok((provider, groups))
}

/// A new node of the group: the template named `name` (also its hostname
/// label), annotated with its group and as kwok-managed, NotReady with the
/// not-ready taint, booting until `ready_after`.
pub fn new_node(spec: &NodeGroupSpec, name: &str, ready_after: DateTime<Utc>) -> Node {
    let mut node = spec.template.clone();
    node.metadata.name = Some(name.to_string());
    node.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("kubernetes.io/hostname".into(), name.to_string());
    let annotations = node
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    for key in [
        config::NG_MIN_ANNOTATION,
        config::NG_MAX_ANNOTATION,
        config::NG_DESIRED_ANNOTATION,
    ] {
        annotations.remove(key);
    }
    annotations.insert(NG_NAME_ANNOTATION.into(), spec.name.clone());
    annotations.insert(KWOK_MANAGED_ANNOTATION.into(), "fake".into());
    annotations.insert(
        READY_AFTER_ANNOTATION.into(),
        ready_after.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    );
    let node_spec = node.spec.get_or_insert_with(Default::default);
    node_spec.provider_id = Some(format!("kwok:{name}"));
    let taints = node_spec.taints.get_or_insert_with(Vec::new);
    taints.retain(|t| t.key != TO_BE_DELETED_TAINT);
    if !taints
        .iter()
        .any(|t| t.key == NOT_READY_TAINT && t.effect == "NoSchedule")
    {
        taints.insert(
            0,
            Taint {
                key: NOT_READY_TAINT.into(),
                effect: "NoSchedule".into(),
                value: None,
                time_added: None,
            },
        );
    }
    let status = node.status.get_or_insert_with(Default::default);
    if status.allocatable.is_none() {
        status.allocatable = status.capacity.clone();
    }
    status.conditions = Some(vec![NodeCondition {
        type_: "Ready".into(),
        status: "False".into(),
        reason: Some("KubeletNotReady".into()),
        message: Some("container runtime status check may not have completed yet".into()),
        ..Default::default()
    }]);
    node
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use ksim_testutils::builders;
    use ksim_testutils::in_process::InProcessCluster;
    use serde_json::json;

    fn parse<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
        serde_json::from_value(value).expect("valid object")
    }

    /// A refused eviction aborts the node's scale-down and removes the
    /// deletion taint; the node stays and is tried again later.
    #[tokio::test]
    async fn a_budget_refusing_the_eviction_untaints_the_node() {
        let cluster = InProcessCluster::new();
        let client = cluster.client.clone();
        let nodes: Api<Node> = Api::all(client.clone());
        let node = cluster
            .create_node(&builders::node("n1").cpu("2").memory("8Gi").ready().obj())
            .await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        // Running and Ready: the budget counts it (a pending pod may go).
        let pod = builders::pod("api")
            .image("i")
            .label("app", "api")
            .owner("apps/v1", "ReplicaSet", "api", "u")
            .node("n1")
            .running();
        let pod = cluster.create_pod(&pod.obj()).await;
        let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
        let budget: PodDisruptionBudget = parse(json!({
            "metadata": {"name": "api"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "api"}}}
        }));
        budgets
            .create(&PostParams::default(), &budget)
            .await
            .expect("budget");
        let status = json!({"status": {"observedGeneration": 1, "disruptionsAllowed": 0,
            "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}});
        budgets
            .patch_status("api", &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("budget status");

        let autoscaler = Autoscaler::new(client.clone(), AutoscalerOptions::default());
        let result = autoscaler.remove_node(&node, &[Arc::new(pod)]).await;
        let error = result.expect_err("the budget refuses");
        assert!(
            error.to_string().contains("evicting default/api"),
            "{error}"
        );
        let after = nodes.get("n1").await.expect("the node stays");
        assert!(!has_taint(&after, TO_BE_DELETED_TAINT), "{after:?}");
        assert!(pods.get_opt("api").await.expect("read").is_some());
    }

    #[test]
    fn new_nodes_boot_not_ready_and_tainted_with_their_own_hostname() {
        let spec: NodeGroupSpec = NodeGroupSpec {
            name: "workers".into(),
            group_value: "workers".into(),
            min_size: 0,
            max_size: 3,
            desired_size: 0,
            template: parse(json!({
                "metadata": {"name": "t", "labels": {"kubernetes.io/hostname": "t", "g": "workers"},
                    "annotations": {"cluster-autoscaler.kwok.nodegroup/max-count": "3"}},
                "status": {"capacity": {"cpu": "2"}}
            })),
        };
        let at: DateTime<Utc> = "2026-01-01T00:00:05Z".parse().expect("time");
        let node = new_node(&spec, "workers-abcde", at);
        let labels = node.metadata.labels.as_ref().expect("labels");
        assert_eq!(labels["kubernetes.io/hostname"], "workers-abcde");
        let annotations = node.metadata.annotations.as_ref().expect("annotations");
        assert_eq!(annotations[NG_NAME_ANNOTATION], "workers");
        assert_eq!(
            annotations[READY_AFTER_ANNOTATION],
            "2026-01-01T00:00:05.000Z"
        );
        assert!(!annotations.contains_key(config::NG_MAX_ANNOTATION));
        assert!(has_taint(&node, NOT_READY_TAINT));
        assert!(!is_ready(&node));
        let status = node.status.as_ref().expect("status");
        assert_eq!(status.allocatable, status.capacity);
    }
}
