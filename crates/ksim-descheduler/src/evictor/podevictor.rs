//! The pod evictor of one descheduling cycle (upstream
//! `evictions.PodEvictor` with a profile's `evictorImpl`): the policy's
//! limits per node, namespace and cycle, dry-run, the eviction call through
//! an [`EvictionApi`], upstream's log lines, and the record of every
//! eviction for the summary.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;

use super::defaultevictor::{DefaultEvictor, EvictorContext};
use crate::framework::{EvictionError, EvictionRequest, PodEvictor};
use crate::podutil;

/// The policy's limits (None: unlimited).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EvictionLimits {
    /// maxNoOfPodsToEvictPerNode.
    pub per_node: Option<u32>,
    /// maxNoOfPodsToEvictPerNamespace.
    pub per_namespace: Option<u32>,
    /// maxNoOfPodsToEvictTotal.
    pub total: Option<u32>,
}

/// Performs an eviction: the eviction API in a cluster, a fake in tests.
pub trait EvictionApi {
    /// Evicts the pod for `profile` (synchronously); `Err` carries the
    /// message to log.
    fn evict(&self, pod: &Pod, profile: &str, request: &EvictionRequest<'_>) -> Result<(), String>;
    /// Records an event on the pod (`Normal` when `warning` is false).
    fn event(&self, pod: &Pod, warning: bool, reason: &str, note: String);
}

/// What happened to one pod a plugin asked to evict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvictionRecord {
    /// The profile.
    pub profile: String,
    /// The plugin (upstream's `strategy`).
    pub plugin: String,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The pod's node.
    pub node: String,
    /// `Evicted`, `DryRun` or `Failed`.
    pub result: EvictionResult,
    /// Why it failed (the API's message or the limit), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The outcome of one eviction request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum EvictionResult {
    /// The API evicted the pod.
    Evicted,
    /// Dry run: it would have been evicted.
    DryRun,
    /// Refused by the API or a limit.
    Failed,
}

/// The counters and records shared by every profile of one cycle.
pub struct CycleEvictor<'a> {
    api: Option<&'a dyn EvictionApi>,
    limits: EvictionLimits,
    failure_events: bool,
    per_node: HashMap<String, u32>,
    per_namespace: HashMap<String, u32>,
    total: u32,
    requests: u32,
    attempted: HashSet<String>,
    records: Vec<EvictionRecord>,
}

impl<'a> CycleEvictor<'a> {
    /// An evictor calling `api`, or a dry-run one when `api` is None.
    pub fn new(
        api: Option<&'a dyn EvictionApi>,
        limits: EvictionLimits,
        failure_events: bool,
    ) -> Self {
        CycleEvictor {
            api,
            limits,
            failure_events,
            per_node: HashMap::new(),
            per_namespace: HashMap::new(),
            total: 0,
            requests: 0,
            attempted: HashSet::new(),
            records: Vec::new(),
        }
    }

    /// Pods evicted (or that would be, in dry-run) so far.
    pub fn total_evicted(&self) -> u32 {
        self.total
    }

    /// Eviction requests still in progress (evictions in background, which
    /// ksim does not have: always 0, as upstream without the feature gate).
    pub fn eviction_requests(&self) -> u32 {
        self.requests
    }

    /// Every request made so far, in order.
    pub fn records(&self) -> &[EvictionRecord] {
        &self.records
    }

    /// Takes the records.
    pub fn into_records(self) -> Vec<EvictionRecord> {
        self.records
    }

    fn record(
        &mut self,
        pod: &Pod,
        profile: &str,
        request: &EvictionRequest<'_>,
        result: EvictionResult,
        error: Option<String>,
    ) {
        self.records.push(EvictionRecord {
            profile: profile.to_string(),
            plugin: request.strategy.to_string(),
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            pod: pod.metadata.name.clone().unwrap_or_default(),
            node: podutil::node_name(pod).to_string(),
            result,
            error,
        });
    }

    fn limit_error(
        &mut self,
        pod: &Pod,
        profile: &str,
        request: &EvictionRequest<'_>,
        error: EvictionError,
        limit: u32,
        what: &str,
    ) -> Result<(), EvictionError> {
        let node = podutil::node_name(pod);
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        match error {
            EvictionError::NodeLimitReached => {
                tracing::error!(err = %error, limit, node, "Error evicting pod")
            }
            EvictionError::NamespaceLimitReached => tracing::error!(
                err = %error, limit, namespace, pod = podutil::pod_key(pod).as_str(), "Error evicting pod"
            ),
            _ => tracing::error!(err = %error, limit, "Error evicting pod"),
        }
        if self.failure_events
            && let Some(api) = self.api
        {
            api.event(
                pod,
                true,
                "EvictionFailed",
                format!(
                    "pod eviction from {node} node by sigs.k8s.io/descheduler failed: {what} eviction limit exceeded ({limit})"
                ),
            );
        }
        self.record(
            pod,
            profile,
            request,
            EvictionResult::Failed,
            Some(error.to_string()),
        );
        Err(error)
    }

    /// Upstream's `EvictPod` for a plugin of `profile`: limits, the call,
    /// the log line and the event.
    pub fn evict(
        &mut self,
        pod: &Pod,
        profile: &str,
        request: EvictionRequest<'_>,
    ) -> Result<(), EvictionError> {
        let node = podutil::node_name(pod).to_string();
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        if let Some(limit) = self.limits.total
            && self.total + self.requests + 1 > limit
        {
            return self.limit_error(
                pod,
                profile,
                &request,
                EvictionError::TotalLimitReached,
                limit,
                "total",
            );
        }
        if !node.is_empty()
            && let Some(limit) = self.limits.per_node
            && self.per_node.get(&node).copied().unwrap_or_default() + 1 > limit
        {
            return self.limit_error(
                pod,
                profile,
                &request,
                EvictionError::NodeLimitReached,
                limit,
                "node",
            );
        }
        if let Some(limit) = self.limits.per_namespace
            && self
                .per_namespace
                .get(&namespace)
                .copied()
                .unwrap_or_default()
                + 1
                > limit
        {
            return self.limit_error(
                pod,
                profile,
                &request,
                EvictionError::NamespaceLimitReached,
                limit,
                "namespace",
            );
        }
        if !self.attempted.insert(pod_uid(pod)) {
            // Already evicted or refused in this cycle: never asked twice.
            let message = format!(
                "pod {} was already processed in this descheduling cycle",
                podutil::pod_key(pod)
            );
            tracing::debug!(pod = %podutil::pod_key(pod), "{message}");
            return Err(EvictionError::Refused(message));
        }
        if let Some(api) = self.api
            && let Err(message) = api.evict(pod, profile, &request)
        {
            tracing::error!(
                err = %message,
                pod = podutil::pod_key(pod).as_str(),
                reason = request.reason,
                "Error evicting pod"
            );
            if self.failure_events {
                api.event(
                    pod,
                    true,
                    "EvictionFailed",
                    format!(
                        "pod eviction from {node} node by sigs.k8s.io/descheduler failed: {message}"
                    ),
                );
            }
            self.record(
                pod,
                profile,
                &request,
                EvictionResult::Failed,
                Some(message.clone()),
            );
            return Err(EvictionError::Refused(message));
        }
        if !node.is_empty() {
            *self.per_node.entry(node.clone()).or_default() += 1;
        }
        *self.per_namespace.entry(namespace).or_default() += 1;
        self.total += 1;
        match self.api {
            None => {
                tracing::info!(
                    pod = podutil::pod_key(pod).as_str(),
                    reason = request.reason,
                    strategy = request.strategy,
                    node = node.as_str(),
                    profile,
                    "Evicted pod in dry run mode"
                );
                self.record(pod, profile, &request, EvictionResult::DryRun, None);
            }
            Some(api) => {
                tracing::info!(
                    pod = podutil::pod_key(pod).as_str(),
                    reason = request.reason,
                    strategy = request.strategy,
                    node = node.as_str(),
                    profile,
                    "Evicted pod"
                );
                let reason = if !request.reason.is_empty() {
                    request.reason
                } else if !request.strategy.is_empty() {
                    request.strategy
                } else {
                    "NotSet"
                };
                api.event(
                    pod,
                    false,
                    reason,
                    format!("pod eviction from {node} node by sigs.k8s.io/descheduler"),
                );
                self.record(pod, profile, &request, EvictionResult::Evicted, None);
            }
        }
        Ok(())
    }

    fn already_processed(&self, pod: &Pod) -> bool {
        self.attempted.contains(&pod_uid(pod))
    }

    fn node_limit_exceeded(&self, node: &str) -> bool {
        self.limits
            .per_node
            .is_some_and(|limit| self.per_node.get(node).copied().unwrap_or_default() >= limit)
    }

    fn total_limit_exceeded(&self) -> bool {
        self.limits
            .total
            .is_some_and(|limit| self.total + self.requests >= limit)
    }
}

fn pod_uid(pod: &Pod) -> String {
    pod.metadata
        .uid
        .clone()
        .unwrap_or_else(|| podutil::pod_key(pod))
}

/// A profile's view of the cycle's evictor: its DefaultEvictor (if enabled
/// at filter / preEvictionFilter) and its name on every eviction.
pub struct ProfileEvictor<'c, 'a, 's> {
    cycle: &'c mut CycleEvictor<'a>,
    context: &'c EvictorContext<'s>,
    filter: Option<&'c DefaultEvictor>,
    pre_eviction_filter: Option<&'c DefaultEvictor>,
    profile: &'c str,
}

impl<'c, 'a, 's> ProfileEvictor<'c, 'a, 's> {
    /// The evictor the plugins of `profile` talk to.
    pub fn new(
        cycle: &'c mut CycleEvictor<'a>,
        context: &'c EvictorContext<'s>,
        filter: Option<&'c DefaultEvictor>,
        pre_eviction_filter: Option<&'c DefaultEvictor>,
        profile: &'c str,
    ) -> Self {
        ProfileEvictor {
            cycle,
            context,
            filter,
            pre_eviction_filter,
            profile,
        }
    }
}

impl PodEvictor for ProfileEvictor<'_, '_, '_> {
    fn filter(&self, pod: &Pod) -> bool {
        if self.cycle.already_processed(pod) {
            // Evicted or refused earlier in this cycle (by another plugin
            // or profile): not asked for twice.
            return false;
        }
        let Some(evictor) = self.filter else {
            return true;
        };
        match evictor.filter(pod, self.context) {
            Ok(()) => true,
            Err(checks) => {
                tracing::debug!(
                    pod = %podutil::pod_key(pod),
                    checks = %checks,
                    plugin = "DefaultEvictor",
                    "Pod fails the following checks"
                );
                false
            }
        }
    }

    fn pre_eviction_filter(&self, pod: &Pod) -> bool {
        let Some(evictor) = self.pre_eviction_filter else {
            return true;
        };
        match evictor.pre_eviction_filter(pod, self.context) {
            Ok(()) => true,
            Err(reason) => {
                tracing::info!(pod = %podutil::pod_key(pod), plugin = "DefaultEvictor", "{reason}");
                false
            }
        }
    }

    fn evict(&mut self, pod: &Pod, request: EvictionRequest<'_>) -> Result<(), EvictionError> {
        self.cycle.evict(pod, self.profile, request)
    }

    fn node_limit_exceeded(&self, node_name: &str) -> bool {
        self.cycle.node_limit_exceeded(node_name)
    }

    fn total_limit_exceeded(&self) -> bool {
        self.cycle.total_limit_exceeded()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podutil::testing::pod;
    use std::cell::RefCell;

    /// An API that refuses pods whose name starts with "blocked".
    #[derive(Default)]
    struct FakeApi {
        evicted: RefCell<Vec<String>>,
        events: RefCell<Vec<(bool, String, String)>>,
    }

    impl EvictionApi for FakeApi {
        fn evict(
            &self,
            pod: &Pod,
            _profile: &str,
            _request: &EvictionRequest<'_>,
        ) -> Result<(), String> {
            let name = pod.metadata.name.clone().unwrap_or_default();
            if name.starts_with("blocked") {
                return Err(
                    "Cannot evict pod as it would violate the pod's disruption budget.".into(),
                );
            }
            self.evicted.borrow_mut().push(name);
            Ok(())
        }

        fn event(&self, _pod: &Pod, warning: bool, reason: &str, note: String) {
            self.events
                .borrow_mut()
                .push((warning, reason.to_string(), note));
        }
    }

    fn request() -> EvictionRequest<'static> {
        EvictionRequest {
            strategy: "PodLifeTime",
            reason: "",
        }
    }

    #[test]
    fn per_node_and_total_limits_stop_evictions() {
        let api = FakeApi::default();
        let limits = EvictionLimits {
            per_node: Some(2),
            total: Some(3),
            per_namespace: None,
        };
        let mut evictor = CycleEvictor::new(Some(&api), limits, false);
        let results: Vec<_> = [
            ("a1", "a"),
            ("a2", "a"),
            ("a3", "a"),
            ("b1", "b"),
            ("b2", "b"),
        ]
        .iter()
        .map(|(name, node)| evictor.evict(&pod(name, node), "p", request()))
        .collect();
        assert_eq!(
            results,
            [
                Ok(()),
                Ok(()),
                Err(EvictionError::NodeLimitReached),
                Ok(()),
                Err(EvictionError::TotalLimitReached),
            ]
        );
        assert_eq!(*api.evicted.borrow(), ["a1", "a2", "b1"]);
        assert_eq!(evictor.total_evicted(), 3);
        assert!(evictor.total_limit_exceeded());
        assert!(evictor.node_limit_exceeded("a"));
    }

    #[test]
    fn the_namespace_limit_counts_each_namespace_and_the_warning_names_it() {
        let api = FakeApi::default();
        let limits = EvictionLimits {
            per_namespace: Some(1),
            ..Default::default()
        };
        let mut evictor = CycleEvictor::new(Some(&api), limits, true);
        let in_namespace = |name: &str, namespace: &str| {
            let mut p = pod(name, "node-1");
            p.metadata.namespace = Some(namespace.into());
            p
        };
        let results: Vec<_> = [("a1", "a"), ("a2", "a"), ("b1", "b")]
            .iter()
            .map(|(name, namespace)| evictor.evict(&in_namespace(name, namespace), "p", request()))
            .collect();
        assert_eq!(
            results,
            [Ok(()), Err(EvictionError::NamespaceLimitReached), Ok(())]
        );
        assert_eq!(*api.evicted.borrow(), ["a1", "b1"]);
        let warnings: Vec<String> = api
            .events
            .borrow()
            .iter()
            .filter(|(warning, _, _)| *warning)
            .map(|(_, _, note)| note.clone())
            .collect();
        assert_eq!(
            warnings,
            [
                "pod eviction from node-1 node by sigs.k8s.io/descheduler failed: namespace eviction limit exceeded (1)"
            ]
        );
        assert_eq!(
            evictor.records()[1].error.as_deref(),
            Some("maximum number of evicted pods per namespace reached")
        );
    }

    #[test]
    fn a_refusal_is_recorded_and_not_retried_in_the_cycle() {
        let api = FakeApi::default();
        let mut evictor = CycleEvictor::new(Some(&api), EvictionLimits::default(), true);
        let blocked = pod("blocked", "a");
        let first = evictor.evict(&blocked, "p", request());
        assert!(
            matches!(first, Err(EvictionError::Refused(ref m)) if m.contains("disruption budget"))
        );
        let second = evictor.evict(&blocked, "p", request());
        assert!(
            matches!(second, Err(EvictionError::Refused(ref m)) if m.contains("already processed"))
        );
        assert_eq!(evictor.total_evicted(), 0);
        assert_eq!(evictor.records().len(), 1);
        assert_eq!(evictor.records()[0].result, EvictionResult::Failed);
        let events = api.events.borrow();
        assert_eq!(events.len(), 1);
        assert!(events[0].0, "a warning");
        assert_eq!(events[0].1, "EvictionFailed");
    }

    #[test]
    fn an_eviction_records_a_normal_event_named_after_the_strategy() {
        let api = FakeApi::default();
        let mut evictor = CycleEvictor::new(Some(&api), EvictionLimits::default(), false);
        evictor
            .evict(&pod("p", "node-1"), "p", request())
            .expect("evicted");
        assert_eq!(
            *api.events.borrow(),
            [(
                false,
                "PodLifeTime".to_string(),
                "pod eviction from node-1 node by sigs.k8s.io/descheduler".to_string()
            )]
        );
    }

    #[test]
    fn a_profiles_evictor_puts_the_profile_on_every_eviction() {
        use crate::framework::ClusterSnapshot;
        use k8s_openapi::jiff::Timestamp;
        let snapshot = ClusterSnapshot::new(vec![], vec![], vec![], Timestamp::UNIX_EPOCH);
        let context = EvictorContext::new(&snapshot, &[]);
        let mut cycle = CycleEvictor::new(None, EvictionLimits::default(), false);
        for (profile, name) in [("first", "p1"), ("second", "p2")] {
            let mut evictor = ProfileEvictor::new(&mut cycle, &context, None, None, profile);
            evictor.evict(&pod(name, "a"), request()).expect("dry run");
        }
        let profiles: Vec<_> = cycle
            .records()
            .iter()
            .map(|r| (r.profile.as_str(), r.pod.as_str()))
            .collect();
        assert_eq!(profiles, [("first", "p1"), ("second", "p2")]);
    }

    #[test]
    fn dry_run_counts_without_calling_the_api() {
        let mut evictor = CycleEvictor::new(None, EvictionLimits::default(), false);
        evictor
            .evict(&pod("p", "a"), "p", request())
            .expect("dry run");
        assert_eq!(evictor.total_evicted(), 1);
        assert_eq!(evictor.records()[0].result, EvictionResult::DryRun);
    }
}
