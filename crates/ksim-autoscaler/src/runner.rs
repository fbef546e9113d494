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
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use ksim_runtime::clock::{Busy, Clock};
use ksim_scheduler::framework::{DisruptionBudget, Profile, Snapshot};
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::config::{
    self, KWOK_MANAGED_ANNOTATION, NG_NAME_ANNOTATION, NodeGroupSpec, ProviderConfig,
};
use crate::error::AutoscalerError;
use crate::scaledown::{self, SCALE_DOWN_DISABLED_ANNOTATION};
use crate::simulator::{self, Expander, GroupView, NOT_READY_TAINT, TO_BE_DELETED_TAINT, Verdict};
use crate::status::{self, StatusInput};

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
    /// NotReady and still count as coming.
    pub max_node_provision_time: Duration,
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
}

/// What a loop decides on.
struct View {
    now: DateTime<Utc>,
    members: Vec<Member>,
    pending: Vec<Arc<Pod>>,
    snapshot: Snapshot,
    views: Vec<GroupView>,
    /// Booting nodes of the groups.
    upcoming: Vec<String>,
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
}

impl std::fmt::Debug for Autoscaler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Autoscaler")
            .field("options", &self.options)
            .finish()
    }
}

use ksim_core::status::is_node_ready as is_ready;

fn has_taint(node: &Node, key: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == key))
}

fn is_unschedulable(pod: &Pod) -> bool {
    let unbound = pod
        .spec
        .as_ref()
        .is_none_or(|s| s.node_name.as_deref().unwrap_or_default().is_empty());
    unbound
        && pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
            })
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

    /// One loop: read, scale up or down, write the status.
    pub async fn run_once(&mut self) -> Result<LoopReport, AutoscalerError> {
        let (provider, specs) = read_node_groups(&self.client, &self.options).await?;
        self.provider = Some(provider);
        let specs: Vec<Arc<NodeGroupSpec>> = specs.into_iter().map(Arc::new).collect();
        let nodes_api: Api<Node> = Api::all(self.client.clone());
        let pods_api: Api<Pod> = Api::all(self.client.clone());
        let mut nodes = nodes_api
            .list(&ListParams::default())
            .await
            .map_err(|e| AutoscalerError::api("listing nodes", e))?
            .items;
        // Groups seen for the first time get their desired count.
        let members = self.members(&specs, &nodes);
        for (index, spec) in specs.iter().enumerate() {
            if self.initialized.contains(&spec.name) {
                continue;
            }
            let have = members.iter().filter(|m| m.group == index).count();
            let want = spec.desired_size.max(spec.min_size);
            if have < want {
                tracing::info!(group = %spec.name, have, want, "creating the group's desired nodes");
                for _ in have..want {
                    nodes.push(self.create_node(spec).await?);
                }
            }
            self.initialized.insert(spec.name.clone());
        }
        let pods = pods_api
            .list(&ListParams::default())
            .await
            .map_err(|e| AutoscalerError::api("listing pods", e))?
            .items;
        let View {
            now,
            members,
            pending,
            mut snapshot,
            views,
            upcoming: upcoming_names,
        } = self.view(&specs, &nodes, pods);
        let mut report = LoopReport {
            pending_pods: pending.len(),
            ..Default::default()
        };
        let mut scaled_up_now = false;
        if !pending.is_empty() && !specs.is_empty() {
            let plan = simulator::plan_scale_up(
                &self.profile,
                &snapshot,
                &upcoming_names,
                &views,
                &pending,
            );
            let priorities = if self.options.expanders.contains(&Expander::Priority) {
                self.priorities().await
            } else {
                Vec::new()
            };
            let chosen = simulator::choose(
                &self.options.expanders,
                &plan.options,
                &views,
                &priorities,
                &mut self.rng,
            )
            .cloned();
            if let Some(option) = chosen {
                let view = &views[option.group];
                let from = view.target_size;
                let to = (from + option.node_count).min(view.spec.max_size);
                let message = format!(
                    "pod triggered scale-up: [{{{} {from}->{to} (max: {})}}]",
                    view.spec.name, view.spec.max_size
                );
                tracing::info!(group = %view.spec.name, from, to, "scale-up");
                self.publish(
                    EventType::Normal,
                    self.status_ref(),
                    "ScaledUpGroup",
                    format!(
                        "Scale-up: setting group {} size to {to} instead of {from} (max: {})",
                        view.spec.name, view.spec.max_size
                    ),
                );
                for _ in from..to {
                    self.create_node(&view.spec).await?;
                }
                for &index in &option.pods {
                    self.publish(
                        EventType::Normal,
                        object_ref(pending[index].as_ref()),
                        "TriggeredScaleUp",
                        message.clone(),
                    );
                }
                self.status.scaled_up(&view.spec.name, now);
                self.last_scale_up = Some(now);
                report.scaled_up = Some((view.spec.name.clone(), from, to));
                scaled_up_now = true;
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
        if self.options.scale_down_enabled && !scaled_up_now {
            report.scaled_down = self
                .scale_down(&specs, &members, &nodes, &mut snapshot, now)
                .await?;
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
            });
        }
        if self.options.write_status_configmap {
            let upcoming_count = upcoming_names.len();
            let input = StatusInput {
                now,
                report: &report,
                registered: nodes.len(),
                ready: nodes.iter().filter(|n| is_ready(n)).count(),
                not_started: upcoming_count,
                unneeded: self.unneeded_since.len(),
            };
            self.write_status(&input).await;
        }
        Ok(report)
    }

    /// What a loop decides on: members of groups, unschedulable pods old
    /// enough, the snapshot (booting nodes without their not-ready taint).
    fn view(&self, specs: &[Arc<NodeGroupSpec>], nodes: &[Node], pods: Vec<Pod>) -> View {
        let now = self.clock.now();
        let members = self.members(specs, nodes);
        let mut pending: Vec<Arc<Pod>> = Vec::new();
        let mut scheduled: Vec<Pod> = Vec::new();
        let min_age = chrono::TimeDelta::from_std(self.options.new_pod_scale_up_delay)
            .unwrap_or(chrono::TimeDelta::MAX);
        for pod in pods {
            if is_unschedulable(&pod) {
                let created = pod.metadata.creation_timestamp.as_ref().map(to_chrono);
                if created.is_none_or(|c| now - c >= min_age) {
                    pending.push(Arc::new(pod));
                }
            } else if pod
                .spec
                .as_ref()
                .is_some_and(|s| s.node_name.as_deref().is_some_and(|n| !n.is_empty()))
            {
                scheduled.push(pod);
            }
        }
        // The snapshot sees booting nodes as they will be once Ready.
        let upcoming: HashSet<&str> = members
            .iter()
            .filter(|m| m.upcoming)
            .map(|m| m.name.as_str())
            .collect();
        let snapshot_nodes: Vec<Node> = nodes
            .iter()
            .map(|node| {
                let name = node.metadata.name.as_deref().unwrap_or_default();
                if upcoming.contains(name) {
                    let mut node = node.clone();
                    if let Some(taints) = node.spec.as_mut().and_then(|s| s.taints.as_mut()) {
                        taints.retain(|t| {
                            t.key != NOT_READY_TAINT && t.key != crate::simulator::UNREACHABLE_TAINT
                        });
                    }
                    node
                } else {
                    node.clone()
                }
            })
            .collect();
        let snapshot = Snapshot::new(snapshot_nodes, scheduled);
        let views: Vec<GroupView> = specs
            .iter()
            .enumerate()
            .map(|(index, spec)| GroupView {
                spec: spec.clone(),
                target_size: members.iter().filter(|m| m.group == index).count(),
            })
            .collect();
        let upcoming = upcoming.iter().map(|s| s.to_string()).collect();
        View {
            now,
            members,
            pending,
            snapshot,
            views,
            upcoming,
        }
    }

    /// For a pending pod: what each node group could do for it (read only).
    pub async fn explain(&mut self, pod: &Pod) -> Result<Explanation, AutoscalerError> {
        let (provider, specs) = read_node_groups(&self.client, &self.options).await?;
        self.provider = Some(provider);
        let specs: Vec<Arc<NodeGroupSpec>> = specs.into_iter().map(Arc::new).collect();
        let nodes = Api::<Node>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| AutoscalerError::api("listing nodes", e))?
            .items;
        let pods = Api::<Pod>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| AutoscalerError::api("listing pods", e))?
            .items;
        let view = self.view(&specs, &nodes, pods);
        let mut explanation = Explanation {
            unschedulable: is_unschedulable(pod),
            ..Default::default()
        };
        if !explanation.unschedulable {
            return Ok(explanation);
        }
        let pending = vec![Arc::new(pod.clone())];
        let plan = simulator::plan_scale_up(
            &self.profile,
            &view.snapshot,
            &view.upcoming,
            &view.views,
            &pending,
        );
        explanation.fits_booting_node = !plan.fit_upcoming.is_empty();
        let verdicts = plan.verdicts.first().cloned().unwrap_or_default();
        for (view, verdict) in view.views.iter().zip(verdicts) {
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

    fn members(&self, specs: &[Arc<NodeGroupSpec>], nodes: &[Node]) -> Vec<Member> {
        let Some(provider) = &self.provider else {
            return Vec::new();
        };
        let now = self.clock.now();
        let provision = chrono::TimeDelta::from_std(self.options.max_node_provision_time)
            .unwrap_or(chrono::TimeDelta::MAX);
        let mut members = Vec::new();
        for node in nodes {
            let by_name = node
                .metadata
                .annotations
                .as_ref()
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
            members.push(Member {
                name: node.metadata.name.clone().unwrap_or_default(),
                group,
                ready,
                upcoming: !ready && young && node.metadata.deletion_timestamp.is_none(),
                being_deleted: has_taint(node, TO_BE_DELETED_TAINT)
                    || node.metadata.deletion_timestamp.is_some(),
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

    /// Scale-down: finds unneeded nodes, then removes those unneeded long
    /// enough (one drained node per loop, as upstream's default).
    async fn scale_down(
        &mut self,
        specs: &[Arc<NodeGroupSpec>],
        members: &[Member],
        nodes: &[Node],
        snapshot: &mut Snapshot,
        now: DateTime<Utc>,
    ) -> Result<Vec<String>, AutoscalerError> {
        let delay = chrono::TimeDelta::from_std(self.options.scale_down_delay_after_add)
            .unwrap_or(chrono::TimeDelta::MAX);
        if self.last_scale_up.is_some_and(|at| now - at < delay) {
            self.status.scale_down_state = "NoCandidates".into();
            return Ok(Vec::new());
        }
        let budgets_api: Api<PodDisruptionBudget> = Api::all(self.client.clone());
        let budgets: Vec<DisruptionBudget> = budgets_api
            .list(&ListParams::default())
            .await
            .map_err(|e| AutoscalerError::api("listing pod disruption budgets", e))?
            .items
            .iter()
            .map(DisruptionBudget::from_pdb)
            .collect();
        let by_name: HashMap<&str, &Node> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.as_deref().map(|name| (name, n)))
            .collect();
        // Nodes no pod may move to: not Ready, being deleted.
        let mut excluded: HashSet<String> = nodes
            .iter()
            .filter(|n| {
                !is_ready(n)
                    || has_taint(n, TO_BE_DELETED_TAINT)
                    || n.metadata.deletion_timestamp.is_some()
            })
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        let mut sizes: Vec<usize> = (0..specs.len())
            .map(|i| members.iter().filter(|m| m.group == i).count())
            .collect();
        let candidates: Vec<scaledown::Candidate> = members
            .iter()
            .filter(|m| m.ready && !m.being_deleted)
            .filter_map(|m| {
                let node = by_name.get(m.name.as_str())?;
                // As the kwok provider: only nodes it made may be deleted.
                let fake = node
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(KWOK_MANAGED_ANNOTATION))
                    .is_some_and(|v| v == "fake");
                if !fake {
                    return None;
                }
                let disabled = node
                    .metadata
                    .annotations
                    .as_ref()
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
            snapshot,
            &candidates,
            &mut excluded,
            budgets,
            self.options.scale_down_utilization_threshold,
            self.options.scale_down_non_empty_candidates_count,
        );
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
        let mut removed = Vec::new();
        let mut drained_one = false;
        for (name, group, pods) in unneeded {
            let since = self.unneeded_since.get(&name).copied().unwrap_or(now);
            if now - since < unneeded_time {
                continue;
            }
            if sizes[group] <= specs[group].min_size {
                continue;
            }
            if !pods.is_empty() && drained_one {
                continue;
            }
            let Some(node) = by_name.get(name.as_str()) else {
                continue;
            };
            match self.remove_node(node, &pods).await {
                Ok(()) => {
                    drained_one |= !pods.is_empty();
                    sizes[group] -= 1;
                    self.unneeded_since.remove(&name);
                    self.last_scale_down = Some(now);
                    self.status.scaled_down(&specs[group].name, now);
                    removed.push(name);
                }
                Err(error) => {
                    tracing::info!(node = %name, %error, "scale-down failed");
                    self.unneeded_since.remove(&name);
                }
            }
        }
        Ok(removed)
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
            if let Err(error) = api.evict(pod_name, &EvictParams::default()).await {
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
    use serde_json::json;

    fn parse<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
        serde_json::from_value(value).expect("valid object")
    }

    /// A refused eviction aborts the node's scale-down and removes the
    /// deletion taint; the node stays and is tried again later.
    #[tokio::test]
    async fn a_budget_refusing_the_eviction_untaints_the_node() {
        let server = ksim_apiserver::ApiServer::new();
        let client = ksim_runtime::client::in_process(&server);
        let nodes: Api<Node> = Api::all(client.clone());
        let node: Node = parse(json!({
            "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }));
        let node = nodes
            .create(&PostParams::default(), &node)
            .await
            .expect("node");
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let pod: Pod = parse(json!({
            "metadata": {"name": "api", "labels": {"app": "api"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "api", "uid": "u", "controller": true}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}
        }));
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("pod");
        // Running and Ready: the budget counts it (a pending pod may go).
        let running = json!({"status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}]}});
        let pod = pods
            .patch_status("api", &PatchParams::default(), &Patch::Merge(&running))
            .await
            .expect("pod status");
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
