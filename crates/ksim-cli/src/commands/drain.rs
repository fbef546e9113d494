//! `ksim drain NODE...`: `kubectl drain` with its flags and its output word
//! for word (`node/X cordoned`, `evicting pod ns/name`, the refusal `error
//! when evicting pods/"name" -n "ns" (will retry after 5s): ...`, `pod/name
//! evicted`, `node/X drained`, the global timeout and `error: unable to drain
//! node ...`), but with every wait — the 5 s retry after a refusal, the 1 s
//! polls for evicted pods to be gone, `--timeout` — measured in the cluster's
//! time. On a cluster with a virtual clock nobody else moves time while the
//! drain waits, so its waits advance the cluster's clock (through
//! `/ksim/v1alpha1/clock/advance`, as `ksim clock advance` does, settling the
//! cluster at each step): a budget can recover during the drain, and the run
//! is the same every time. On a real clock it sleeps, as kubectl does.
//!
//! The pods of a drain are worked in the order the API lists them (kubectl
//! works them in goroutines: the same steps, in an order that varies), and
//! its evictions carry `requested-by: ksim drain`, so the API server's
//! eviction records (`/ksim/v1alpha1/evictions`) name it.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use ksim_runtime::clock::Clock;
use ksim_scenario::{ClusterClock, format_duration, parse_duration, read_clock};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::cluster::KsimHome;

/// Who the evictions of `ksim drain` are requested by (their `requested-by`
/// annotation, as the descheduler and the autoscaler set theirs).
pub const REQUESTED_BY: &str = "ksim drain";
/// The field manager of the cordon.
const FIELD_MANAGER: &str = "ksim-drain";
/// How long kubectl waits after a refused eviction before it tries again.
const RETRY: Duration = Duration::from_secs(5);
/// How often kubectl looks whether an evicted or deleted pod is gone.
const POLL: Duration = Duration::from_secs(1);
/// The annotation of a mirror pod (never drained).
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// The cause of a 403 for a pod in a terminating namespace.
const NAMESPACE_TERMINATING: &str = "NamespaceTerminating";

const DAEMONSET_FATAL: &str = "DaemonSet-managed Pods (use --ignore-daemonsets to ignore)";
const DAEMONSET_WARNING: &str = "ignoring DaemonSet-managed Pods";
const LOCAL_STORAGE_FATAL: &str =
    "Pods with local storage (use --delete-emptydir-data to override)";
const LOCAL_STORAGE_WARNING: &str = "deleting Pods with local storage";
const UNMANAGED_FATAL: &str =
    "cannot delete Pods that declare no controller (use --force to override)";
const UNMANAGED_WARNING: &str = "deleting Pods that declare no controller";

/// Flags of `ksim drain`: kubectl drain's.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "\
Time: every wait of the drain (the 5s retry after a refused eviction, the 1s \
polls for evicted pods to be gone, --timeout) counts in the cluster's time. \
On a cluster with a virtual clock the drain's waits advance the clock (as \
`ksim clock advance` does: timers fire and the cluster settles), so a budget \
can recover while the drain waits and the outcome is the same every time. On \
a real clock the drain sleeps, as kubectl does. Evictions are requested by \
\"ksim drain\" (their requested-by annotation).")]
pub struct DrainCommand {
    /// Nodes to drain.
    #[arg(value_name = "NODE")]
    pub nodes: Vec<String>,
    /// Selector (label query) to filter nodes on.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Continue even if there are pods that do not declare a controller.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub force: Option<bool>,
    /// Ignore DaemonSet-managed pods.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub ignore_daemonsets: Option<bool>,
    /// Continue even if there are pods using emptyDir (local data that will
    /// be deleted when the node is drained).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub delete_emptydir_data: Option<bool>,
    /// Period of time in seconds given to each pod to terminate gracefully.
    /// If negative, the default value specified in the pod will be used.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub grace_period: i64,
    /// The length of time to wait before giving up, zero means infinite (in
    /// the cluster's time).
    #[arg(long, default_value = "0s", value_parser = parse_timeout)]
    pub timeout: Duration,
    /// Label selector to filter pods on the node.
    #[arg(long)]
    pub pod_selector: Option<String>,
    /// Force drain to use delete, even if eviction is supported. This will
    /// bypass checking PodDisruptionBudgets, use with caution.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub disable_eviction: Option<bool>,
    /// If pod DeletionTimestamp older than N seconds, skip waiting for the
    /// pod. Seconds must be greater than 0 to skip.
    #[arg(long, default_value_t = 0)]
    pub skip_wait_for_delete_timeout: i64,
    /// Must be "none", "server", or "client". If client strategy, only print
    /// the object that would be sent, without sending it. If server strategy,
    /// submit server-side request without persisting the resource.
    #[arg(long, value_enum, default_value = "none")]
    pub dry_run: DryRun,
    /// The ksim cluster (its `ksim-<name>` context); default: the
    /// kubeconfig's current context.
    #[arg(long)]
    pub name: Option<String>,
    /// Kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

/// kubectl's `--dry-run`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum DryRun {
    /// Do it.
    #[default]
    None,
    /// Only print what would be done.
    Client,
    /// Ask the server, which persists nothing.
    Server,
}

fn parse_timeout(text: &str) -> Result<Duration, String> {
    parse_duration(text)
}

/// What a drain does with its flags resolved.
#[derive(Debug, Clone)]
struct Options {
    force: bool,
    ignore_daemonsets: bool,
    delete_emptydir_data: bool,
    grace_period: i64,
    timeout: Option<Duration>,
    pod_selector: String,
    disable_eviction: bool,
    skip_wait_for_delete_timeout: i64,
    dry_run: DryRun,
}

impl Options {
    fn from_flags(flags: &DrainCommand) -> Self {
        Options {
            force: flags.force.unwrap_or(false),
            ignore_daemonsets: flags.ignore_daemonsets.unwrap_or(false),
            delete_emptydir_data: flags.delete_emptydir_data.unwrap_or(false),
            grace_period: flags.grace_period,
            timeout: (!flags.timeout.is_zero()).then_some(flags.timeout),
            pod_selector: flags.pod_selector.clone().unwrap_or_default(),
            disable_eviction: flags.disable_eviction.unwrap_or(false),
            skip_wait_for_delete_timeout: flags.skip_wait_for_delete_timeout,
            dry_run: flags.dry_run,
        }
    }

    /// ` (dry run)` / ` (server dry run)` after a printed name.
    fn suffix(&self) -> &'static str {
        match self.dry_run {
            DryRun::None => "",
            DryRun::Client => " (dry run)",
            DryRun::Server => " (server dry run)",
        }
    }

    /// The DeleteOptions of evictions and deletions.
    fn delete_options(&self) -> Value {
        let mut options = json!({});
        if self.grace_period >= 0 {
            options["gracePeriodSeconds"] = json!(self.grace_period);
        }
        if self.dry_run == DryRun::Server {
            options["dryRun"] = json!(["All"]);
        }
        options
    }

    /// kubectl's global timeout, as it prints it.
    fn timeout_text(&self) -> String {
        match self.timeout {
            Some(timeout) => format_duration(timeout),
            // kubectl's "infinite" is math.MaxInt64 nanoseconds.
            None => "2562047h47m16.854775807s".to_string(),
        }
    }
}

/// The error the drain of a node ends with, shaped like kubectl's: an
/// aggregate of messages, or an API error.
#[derive(Debug, Clone, PartialEq, Eq)]
enum DrainError {
    /// Several errors (or one) from the pods of a node.
    Aggregate(Vec<String>),
    /// An API error (a Status).
    Api { reason: String, message: String },
    /// Anything else.
    Other(String),
}

impl DrainError {
    fn api(error: kube::Error) -> Self {
        match error {
            kube::Error::Api(status) => DrainError::Api {
                reason: status.reason.clone(),
                message: status.message.clone(),
            },
            other => DrainError::Other(other.to_string()),
        }
    }

    /// As Go's `err.Error()` prints it (an aggregate: its one message, or
    /// `[a, b]` without repeats).
    fn text(&self) -> String {
        match self {
            DrainError::Aggregate(messages) => {
                let mut seen = BTreeSet::new();
                let unique: Vec<&str> = messages
                    .iter()
                    .filter(|m| seen.insert(m.as_str()))
                    .map(String::as_str)
                    .collect();
                match unique.as_slice() {
                    [one] => one.to_string(),
                    many => format!("[{}]", many.join(", ")),
                }
            }
            DrainError::Api { message, .. } => message.clone(),
            DrainError::Other(message) => message.clone(),
        }
    }

    /// The lines kubectl's last word prints for it.
    fn final_lines(&self) -> Vec<String> {
        match self {
            DrainError::Aggregate(messages) => messages.clone(),
            DrainError::Api { reason, message } if reason.is_empty() => {
                vec![format!("Error from server: {message}")]
            }
            DrainError::Api { reason, message } => {
                vec![format!("Error from server ({reason}): {message}")]
            }
            DrainError::Other(message) => vec![format!("error: {message}")],
        }
    }
}

/// The cluster's time as the drain waits on it.
enum DrainClock {
    /// A ksim cluster's virtual clock: the drain's waits advance it.
    Virtual(ClusterClock),
    /// The wall clock: the drain sleeps.
    Real(Clock),
}

impl DrainClock {
    /// A virtual clock when the cluster serves one, else the wall clock.
    async fn of(client: &kube::Client) -> Self {
        match read_clock(client).await {
            Ok(Some(reading)) if reading.mode == "virtual" => {
                DrainClock::Virtual(ClusterClock::Remote(client.clone()))
            }
            _ => DrainClock::Real(Clock::real()),
        }
    }

    async fn now(&self) -> anyhow::Result<DateTime<Utc>> {
        match self {
            DrainClock::Virtual(clock) => clock.now().await.map_err(anyhow::Error::msg),
            DrainClock::Real(clock) => Ok(clock.now()),
        }
    }

    /// Lets a virtual cluster react to what the drain did.
    async fn settle(&self) -> anyhow::Result<()> {
        match self {
            DrainClock::Virtual(clock) => clock.settle().await.map_err(anyhow::Error::msg),
            DrainClock::Real(_) => Ok(()),
        }
    }

    /// Waits until `time`: a virtual clock is advanced to it.
    async fn wait_until(&self, time: DateTime<Utc>) -> anyhow::Result<()> {
        let now = self.now().await?;
        if time <= now {
            return Ok(());
        }
        match self {
            DrainClock::Virtual(clock) => clock
                .advance_to(time)
                .await
                .map(drop)
                .map_err(anyhow::Error::msg),
            DrainClock::Real(clock) => {
                clock.sleep((time - now).to_std().unwrap_or_default()).await;
                Ok(())
            }
        }
    }
}

/// The drain's output: stdout and stderr, as kubectl splits them.
struct Out;

impl Out {
    fn out(&self, line: impl std::fmt::Display) {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{line}").and_then(|()| stdout.flush());
    }

    fn err(&self, line: impl std::fmt::Display) {
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(stderr, "{line}").and_then(|()| stderr.flush());
    }
}

/// The error a failed drain returns once it has printed its own last
/// lines: `main` exits with 1 and prints nothing more.
#[derive(Debug)]
pub struct DrainFailed;

impl std::fmt::Display for DrainFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the drain failed")
    }
}

impl std::error::Error for DrainFailed {}

/// Runs `ksim drain`.
pub fn drain(home: &KsimHome, flags: &DrainCommand) -> anyhow::Result<()> {
    if flags.nodes.is_empty() && flags.selector.is_none() {
        anyhow::bail!("USAGE: ksim drain NODE [flags]");
    }
    if !flags.nodes.is_empty() && flags.selector.is_some() {
        anyhow::bail!("cannot specify both a node name and a --selector option");
    }
    if let Some(selector) = &flags.pod_selector
        && ksim_core::selector::LabelSelectorRequirements::parse(selector).is_err()
    {
        anyhow::bail!("--pod-selector=<pod_selector> must be a valid label selector");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let client =
            super::connect::client(home, flags.name.as_deref(), flags.kubeconfig.as_deref())
                .await?;
        let drainer = Drainer {
            clock: DrainClock::of(&client).await,
            client,
            options: Options::from_flags(flags),
            out: Out,
        };
        drainer.run(flags).await
    })
}

/// One drain against one cluster.
struct Drainer {
    client: kube::Client,
    clock: DrainClock,
    options: Options,
    out: Out,
}

/// Where one pod's eviction stands.
enum Step {
    /// To be evicted (again) at this time.
    Evict(DateTime<Utc>),
    /// Evicted; to be looked at (whether it is gone) at this time.
    Wait(DateTime<Utc>),
    /// Finished, with its error if it failed.
    Done(Option<String>),
}

/// One pod of the drain.
struct Task {
    pod: Pod,
    step: Step,
}

impl Task {
    fn name(&self) -> &str {
        self.pod.metadata.name.as_deref().unwrap_or_default()
    }

    fn namespace(&self) -> &str {
        self.pod.metadata.namespace.as_deref().unwrap_or_default()
    }
}

impl Drainer {
    async fn run(&self, flags: &DrainCommand) -> anyhow::Result<()> {
        let nodes = match self.nodes(flags).await {
            Ok(nodes) => nodes,
            Err(error) => return self.fail(&error),
        };
        for node in &nodes {
            if let Err(error) = self.cordon(node).await {
                let name = node.metadata.name.as_deref().unwrap_or_default();
                self.out.err(format!(
                    "error: unable to cordon node {name:?}: {}",
                    error.text()
                ));
            }
        }
        let mut fatal = Vec::new();
        let mut remaining = Vec::new();
        for node in &nodes {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            match self.drain_node(name).await? {
                Ok(()) => self
                    .out
                    .out(format!("node/{name} drained{}", self.options.suffix())),
                Err(error) => {
                    self.out.err(format!(
                        "error: unable to drain node {name:?} due to error: {}, continuing command...",
                        error.text()
                    ));
                    fatal.push(error);
                    remaining.push(name.to_string());
                }
            }
        }
        if !remaining.is_empty() {
            self.out.err("There are pending nodes to be drained:");
            for name in &remaining {
                self.out.err(format!(" {name}"));
            }
        }
        match fatal.as_slice() {
            [] => Ok(()),
            [one] => self.fail(one),
            many => {
                // An aggregate of several: each on its own line.
                for error in many {
                    self.out.err(error.text());
                }
                Err(DrainFailed.into())
            }
        }
    }

    /// Prints kubectl's last word for `error`; exit code 1.
    fn fail(&self, error: &DrainError) -> anyhow::Result<()> {
        for line in error.final_lines() {
            self.out.err(line);
        }
        Err(DrainFailed.into())
    }

    /// The nodes named, or selected by `--selector`.
    async fn nodes(&self, flags: &DrainCommand) -> Result<Vec<Node>, DrainError> {
        let api = Api::<Node>::all(self.client.clone());
        if let Some(selector) = &flags.selector {
            let list = api
                .list(&ListParams::default().labels(selector))
                .await
                .map_err(|e| list_error(e, selector))?;
            return Ok(list.items);
        }
        let mut nodes = Vec::with_capacity(flags.nodes.len());
        for name in &flags.nodes {
            nodes.push(api.get(name).await.map_err(DrainError::api)?);
        }
        Ok(nodes)
    }

    /// Marks `node` unschedulable (`node/X cordoned`, or `already cordoned`).
    async fn cordon(&self, node: &Node) -> Result<(), DrainError> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let suffix = self.options.suffix();
        if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
            self.out
                .out(format!("node/{name} already cordoned{suffix}"));
            return Ok(());
        }
        if self.options.dry_run != DryRun::Client {
            let mut params = PatchParams {
                field_manager: Some(FIELD_MANAGER.to_string()),
                ..PatchParams::default()
            };
            params.dry_run = self.options.dry_run == DryRun::Server;
            Api::<Node>::all(self.client.clone())
                .patch(
                    name,
                    &params,
                    &Patch::Merge(json!({"spec": {"unschedulable": true}})),
                )
                .await
                .map_err(DrainError::api)?;
        }
        self.out.out(format!("node/{name} cordoned{suffix}"));
        Ok(())
    }

    /// kubectl's `deleteOrEvictPodsSimple`: the outer result is a failure
    /// to reach the cluster's clock; the inner one the drain's.
    async fn drain_node(&self, node: &str) -> anyhow::Result<Result<(), DrainError>> {
        let pods = match self.pods_for_deletion(node).await {
            Ok(pods) => pods,
            Err(error) => return Ok(Err(error)),
        };
        if self.options.dry_run == DryRun::Client {
            for pod in &pods {
                self.out.out(format!(
                    "evicting pod {}/{} (dry run)",
                    pod.metadata.namespace.as_deref().unwrap_or_default(),
                    pod.metadata.name.as_deref().unwrap_or_default()
                ));
            }
            return Ok(Ok(()));
        }
        let result = if self.options.disable_eviction {
            self.delete_pods(pods).await?
        } else {
            self.evict_pods(pods).await?
        };
        if let Err(error) = &result {
            // What is left on the node.
            if let Ok(pending) = self.pods_for_deletion(node).await
                && !pending.is_empty()
            {
                self.out.err(format!(
                    "There are pending pods in node {node:?} when an error occurred: {}",
                    error.text()
                ));
                for pod in &pending {
                    self.out.err(format!(
                        "pod/{}",
                        pod.metadata.name.as_deref().unwrap_or_default()
                    ));
                }
            }
        }
        Ok(result)
    }

    /// The pods on `node` to evict, after kubectl's filters (deleting
    /// pods long past their deletion, DaemonSet pods, mirror pods, local
    /// storage, pods without a controller), with its warnings printed.
    async fn pods_for_deletion(&self, node: &str) -> Result<Vec<Pod>, DrainError> {
        let mut params = ListParams::default().fields(&format!("spec.nodeName={node}"));
        if !self.options.pod_selector.is_empty() {
            params = params.labels(&self.options.pod_selector);
        }
        let list = Api::<Pod>::all(self.client.clone())
            .list(&params)
            .await
            .map_err(|e| DrainError::Aggregate(vec![DrainError::api(e).text()]))?;
        let now = self.clock.now().await.map_err(|e| {
            DrainError::Aggregate(vec![format!("cannot read the cluster's time: {e}")])
        })?;
        let mut keep = Vec::new();
        let mut warnings: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut errors: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for pod in list.items {
            let verdict = self.filter(&pod, now).await;
            let name = format!(
                "{}/{}",
                pod.metadata.namespace.as_deref().unwrap_or_default(),
                pod.metadata.name.as_deref().unwrap_or_default()
            );
            match verdict {
                Verdict::Delete => keep.push(pod),
                Verdict::Skip => {}
                Verdict::Warn { delete, message } => {
                    warnings.entry(message).or_default().push(name);
                    if delete {
                        keep.push(pod);
                    }
                }
                Verdict::Error(message) => errors.entry(message).or_default().push(name),
            }
        }
        if !errors.is_empty() {
            return Err(DrainError::Aggregate(
                errors
                    .into_iter()
                    .map(|(message, pods)| format!("cannot delete {message}: {}", pods.join(", ")))
                    .collect(),
            ));
        }
        if !warnings.is_empty() {
            let text: Vec<String> = warnings
                .into_iter()
                .map(|(message, pods)| format!("{message}: {}", pods.join(", ")))
                .collect();
            self.out.err(format!("Warning: {}", text.join("; ")));
        }
        Ok(keep)
    }

    /// kubectl's filters, in its order; the first that does not delete wins.
    async fn filter(&self, pod: &Pod, now: DateTime<Utc>) -> Verdict {
        if self.past_deletion(pod, now) {
            return Verdict::Skip;
        }
        let finished = matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        let controller = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true));
        let mut verdict = Verdict::Delete;
        if let Some(owner) = controller.filter(|o| o.kind == "DaemonSet")
            && !finished
        {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            let sets = Api::<DaemonSet>::namespaced(self.client.clone(), namespace);
            match sets.get(&owner.name).await {
                Err(kube::Error::Api(status)) if status.code == 404 && self.options.force => {
                    verdict = Verdict::Warn {
                        delete: true,
                        message: status.message,
                    };
                }
                Err(error) => return Verdict::Error(DrainError::api(error).text()),
                Ok(_) if !self.options.ignore_daemonsets => {
                    return Verdict::Error(DAEMONSET_FATAL.to_string());
                }
                Ok(_) => {
                    return Verdict::Warn {
                        delete: false,
                        message: DAEMONSET_WARNING.to_string(),
                    };
                }
            }
        }
        if pod
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION))
        {
            return Verdict::Skip;
        }
        let local_storage = pod
            .spec
            .as_ref()
            .is_some_and(|s| s.volumes.iter().flatten().any(|v| v.empty_dir.is_some()));
        if local_storage && !finished {
            if !self.options.delete_emptydir_data {
                return Verdict::Error(LOCAL_STORAGE_FATAL.to_string());
            }
            verdict = Verdict::Warn {
                delete: true,
                message: LOCAL_STORAGE_WARNING.to_string(),
            };
        }
        if !finished && controller.is_none() {
            if !self.options.force {
                return Verdict::Error(UNMANAGED_FATAL.to_string());
            }
            verdict = Verdict::Warn {
                delete: true,
                message: UNMANAGED_WARNING.to_string(),
            };
        }
        verdict
    }

    /// `--skip-wait-for-delete-timeout`: the pod has been deleting for
    /// longer than that many seconds (of the cluster's time).
    fn past_deletion(&self, pod: &Pod, now: DateTime<Utc>) -> bool {
        let limit = self.options.skip_wait_for_delete_timeout;
        limit > 0
            && pod
                .metadata
                .deletion_timestamp
                .as_ref()
                .is_some_and(|t| now.timestamp() - t.0.as_second() > limit)
    }

    /// `POST pods/<name>/eviction`, annotated `requested-by: ksim drain`.
    async fn evict(&self, pod: &Pod) -> Result<(), kube::Error> {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let body = json!({
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "annotations": {"requested-by": REQUESTED_BY},
            },
            "deleteOptions": self.options.delete_options(),
        });
        let request = http::Request::post(format!(
            "/api/v1/namespaces/{namespace}/pods/{name}/eviction"
        ))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body.to_string().into_bytes())
        .map_err(kube::Error::HttpError)?;
        self.client.request_text(request).await.map(drop)
    }

    /// kubectl's `evictPods`: every pod is evicted, refused evictions are
    /// tried again 5 s later, evicted pods are waited for until gone; the
    /// global timeout ends what is left.
    async fn evict_pods(&self, pods: Vec<Pod>) -> anyhow::Result<Result<(), DrainError>> {
        if pods.is_empty() {
            return Ok(Ok(()));
        }
        let start = self.clock.now().await?;
        let deadline = self
            .options
            .timeout
            .and_then(|t| chrono::Duration::from_std(t).ok())
            .map(|t| start + t);
        let timed_out = |now: DateTime<Utc>| deadline.is_some_and(|d| now >= d);
        let timeout = self.options.timeout_text();
        let mut tasks: Vec<Task> = pods
            .into_iter()
            .map(|pod| Task {
                pod,
                step: Step::Evict(start),
            })
            .collect();
        loop {
            let now = self.clock.now().await?;
            let mut evicted = false;
            for task in &mut tasks {
                let Step::Evict(at) = task.step else { continue };
                if at > now {
                    continue;
                }
                self.out.out(format!(
                    "evicting pod {}/{}{}",
                    task.namespace(),
                    task.name(),
                    if self.options.dry_run == DryRun::Server {
                        " (server dry run)"
                    } else {
                        ""
                    }
                ));
                if timed_out(now) {
                    task.step = Step::Done(Some(format!(
                        "error when evicting pods/{:?} -n {:?}: global timeout reached: {timeout}",
                        task.name(),
                        task.namespace()
                    )));
                    continue;
                }
                task.step = match self.evict(&task.pod).await {
                    Ok(()) if self.options.dry_run == DryRun::Server => Step::Done(None),
                    Ok(()) => {
                        evicted = true;
                        Step::Wait(now)
                    }
                    Err(kube::Error::Api(status)) if status.code == 404 => Step::Done(None),
                    Err(kube::Error::Api(status)) if status.code == 429 => {
                        self.out.err(format!(
                            "error when evicting pods/{:?} -n {:?} (will retry after 5s): {}",
                            task.name(),
                            task.namespace(),
                            status.message
                        ));
                        Step::Evict(now + chrono::Duration::from_std(RETRY)?)
                    }
                    Err(kube::Error::Api(status))
                        if status.code == 403
                            && status.details.as_ref().is_some_and(|d| {
                                d.causes.iter().any(|c| c.reason == NAMESPACE_TERMINATING)
                            }) =>
                    {
                        if task.pod.metadata.deletion_timestamp.is_some() {
                            evicted = true;
                            Step::Wait(now)
                        } else {
                            self.out.err(format!(
                                "error when evicting pod {:?} from terminating namespace {:?} (will retry after 5s): {}",
                                task.name(),
                                task.namespace(),
                                status.message
                            ));
                            Step::Evict(now + chrono::Duration::from_std(RETRY)?)
                        }
                    }
                    Err(error) => Step::Done(Some(format!(
                        "error when evicting pods/{:?} -n {:?}: {}",
                        task.name(),
                        task.namespace(),
                        DrainError::api(error).text()
                    ))),
                };
            }
            if evicted {
                // A virtual cluster acts on the evictions before anyone looks.
                self.clock.settle().await?;
            }
            let now = self.clock.now().await?;
            for task in &mut tasks {
                let Step::Wait(at) = task.step else { continue };
                let due = deadline.map_or(at, |d| at.min(d));
                if due > now {
                    continue;
                }
                if timed_out(now) {
                    task.step = Step::Done(Some(format!(
                        "error when waiting for pod {:?} in namespace {:?} to terminate: context deadline exceeded",
                        task.name(),
                        task.namespace()
                    )));
                    continue;
                }
                task.step = match self
                    .look(&task.pod, now, "evicted", "eviction failed")
                    .await
                {
                    Ok(true) => Step::Done(None),
                    Ok(false) => Step::Wait(at + chrono::Duration::from_std(POLL)?),
                    Err(error) => Step::Done(Some(format!(
                        "error when waiting for pod {:?} in namespace {:?} to terminate: {error}",
                        task.name(),
                        task.namespace()
                    ))),
                };
            }
            let next = tasks
                .iter()
                .filter_map(|task| match task.step {
                    Step::Evict(at) => Some(at),
                    Step::Wait(at) => Some(deadline.map_or(at, |d| at.min(d))),
                    Step::Done(_) => None,
                })
                .min();
            match next {
                Some(next) => self.clock.wait_until(next).await?,
                None => break,
            }
        }
        let errors: Vec<String> = tasks
            .into_iter()
            .filter_map(|task| match task.step {
                Step::Done(error) => error,
                _ => None,
            })
            .collect();
        Ok(if errors.is_empty() {
            Ok(())
        } else {
            Err(DrainError::Aggregate(errors))
        })
    }

    /// Whether `pod` is gone (or skipped by `--skip-wait-for-delete-timeout`),
    /// printing `pod/<name> <done>` when it is.
    async fn look(
        &self,
        pod: &Pod,
        now: DateTime<Utc>,
        done: &str,
        failed: &str,
    ) -> Result<bool, String> {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let suffix = self.options.suffix();
        match Api::<Pod>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await
        {
            Ok(Some(current)) if current.metadata.uid == pod.metadata.uid => {
                if self.past_deletion(&current, now) {
                    self.out.out(format!(
                        "pod {name:?} has DeletionTimestamp older than {} seconds, skipping",
                        self.options.skip_wait_for_delete_timeout
                    ));
                    return Ok(true);
                }
                Ok(false)
            }
            Ok(_) => {
                self.out.out(format!("pod/{name} {done}{suffix}"));
                Ok(true)
            }
            Err(error) => {
                self.out.out(format!("pod/{name} {failed}{suffix}"));
                Err(DrainError::api(error).text())
            }
        }
    }

    /// kubectl's `deletePods` (`--disable-eviction`): every pod deleted,
    /// then waited for until gone, within the timeout.
    async fn delete_pods(&self, pods: Vec<Pod>) -> anyhow::Result<Result<(), DrainError>> {
        if pods.is_empty() {
            return Ok(Ok(()));
        }
        let options = self.options.delete_options();
        let params = DeleteParams {
            grace_period_seconds: options["gracePeriodSeconds"]
                .as_u64()
                .and_then(|s| u32::try_from(s).ok()),
            dry_run: self.options.dry_run == DryRun::Server,
            ..DeleteParams::default()
        };
        for pod in &pods {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            match Api::<Pod>::namespaced(self.client.clone(), namespace)
                .delete(name, &params)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Ok(Err(DrainError::api(error))),
            }
        }
        self.clock.settle().await?;
        let start = self.clock.now().await?;
        let deadline = self
            .options
            .timeout
            .and_then(|t| chrono::Duration::from_std(t).ok())
            .map(|t| start + t);
        let mut pending = pods;
        let mut at = start;
        loop {
            let now = self.clock.now().await?;
            let mut still = Vec::new();
            for pod in pending {
                match self.look(&pod, now, "deleted", "deletion failed").await {
                    Ok(true) => {}
                    Ok(false) => still.push(pod),
                    Err(error) => return Ok(Err(DrainError::Other(error))),
                }
            }
            pending = still;
            if pending.is_empty() {
                return Ok(Ok(()));
            }
            at += chrono::Duration::from_std(POLL)?;
            if deadline.is_some_and(|d| at >= d) {
                if let Some(deadline) = deadline {
                    self.clock.wait_until(deadline).await?;
                }
                return Ok(Err(DrainError::Other(
                    "context deadline exceeded".to_string(),
                )));
            }
            self.clock.wait_until(at).await?;
        }
    }
}

/// A failed list of the nodes `--selector` selects, as kubectl's resource
/// builder words it: a BadRequest or NotFound keeps its reason, its message
/// says what was looked for.
fn list_error(error: kube::Error, selector: &str) -> DrainError {
    match DrainError::api(error) {
        DrainError::Api { reason, message } if reason == "BadRequest" || reason == "NotFound" => {
            DrainError::Api {
                reason,
                message: format!(
                    "Unable to find \"/v1, Resource=nodes\" that match label selector {selector:?}, field selector \"\": {message}"
                ),
            }
        }
        other => other,
    }
}

/// What kubectl's filters say of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Delete,
    Skip,
    Warn { delete: bool, message: String },
    Error(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        drain: DrainCommand,
    }

    #[test]
    fn kubectl_flag_forms_parse() {
        let cli = Cli::try_parse_from([
            "x",
            "node-1",
            "--ignore-daemonsets",
            "--force=true",
            "--delete-emptydir-data=false",
            "--timeout=20s",
            "--grace-period",
            "-1",
            "--dry-run=client",
        ])
        .expect("flags");
        let options = Options::from_flags(&cli.drain);
        assert_eq!(cli.drain.nodes, ["node-1"]);
        assert!(options.ignore_daemonsets && options.force && !options.delete_emptydir_data);
        assert_eq!(options.timeout, Some(Duration::from_secs(20)));
        assert_eq!(options.timeout_text(), "20s");
        assert_eq!(options.grace_period, -1);
        assert_eq!(options.dry_run, DryRun::Client);
        assert_eq!(options.delete_options(), json!({}));
        let cli =
            Cli::try_parse_from(["x", "n", "--timeout", "0", "--dry-run=server"]).expect("flags");
        let options = Options::from_flags(&cli.drain);
        assert_eq!(options.timeout, None);
        assert_eq!(options.delete_options(), json!({"dryRun": ["All"]}));
        assert!(Cli::try_parse_from(["x", "n", "--timeout", "soon"]).is_err());
        assert!(Cli::try_parse_from(["x", "n", "--dry-run=maybe"]).is_err());
    }

    #[test]
    fn errors_print_as_kubectl_prints_them() {
        let one = DrainError::Aggregate(vec!["a".into()]);
        assert_eq!(one.text(), "a");
        assert_eq!(one.final_lines(), ["a"]);
        let many = DrainError::Aggregate(vec!["a".into(), "b".into(), "a".into()]);
        assert_eq!(many.text(), "[a, b]");
        assert_eq!(many.final_lines(), ["a", "b", "a"]);
        let api = DrainError::Api {
            reason: "NotFound".into(),
            message: "nodes \"x\" not found".into(),
        };
        assert_eq!(
            api.final_lines(),
            ["Error from server (NotFound): nodes \"x\" not found"]
        );
        assert_eq!(
            DrainError::Other("boom".into()).final_lines(),
            ["error: boom"]
        );
    }
}
