//! Pod facts and selections the plugins and the DefaultEvictor share
//! (upstream `pkg/descheduler/pod` and `pkg/utils`): the `namespaces` and
//! `labelSelector` args most plugins take, owner and storage checks, and the
//! orders pods are evicted in.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use ksim_core::selector::LabelSelectorRequirements;
use serde::Deserialize;

use crate::framework::{ArgsError, EvictionError};

/// Pods at or above this priority are system-critical (upstream
/// `SystemCriticalPriority`).
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;
/// The annotation of mirror pods.
pub use ksim_core::status::MIRROR_POD_ANNOTATION;
/// The annotation telling where a pod's spec came from (`api` or a file).
pub const CONFIG_SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";

/// The `namespaces` arg of several plugins (upstream `api.Namespaces`):
/// include or exclude, only one of them.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Namespaces {
    /// Only pods in these namespaces.
    pub include: Vec<String>,
    /// No pods in these namespaces.
    pub exclude: Vec<String>,
}

impl Namespaces {
    /// Upstream's validation: only one of include and exclude may be set.
    pub fn validate(&self, field: &str) -> Result<(), ArgsError> {
        if !self.include.is_empty() && !self.exclude.is_empty() {
            return Err(ArgsError::new(
                field,
                "only one of Include/Exclude namespaces can be set",
            ));
        }
        Ok(())
    }

    /// Whether a pod in `namespace` passes the include and exclude lists.
    pub fn admits(&self, namespace: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|ns| ns == namespace))
            && !self.exclude.iter().any(|ns| ns == namespace)
    }
}

/// Which pods a plugin looks at: its `namespaces` and `labelSelector` args
/// (upstream `podutil.Options`).
#[derive(Debug, Clone, Default)]
pub struct PodSelection {
    include: Vec<String>,
    exclude: Vec<String>,
    selector: Option<LabelSelectorRequirements>,
}

impl PodSelection {
    /// Validates and compiles the args (upstream's messages).
    pub fn new(
        namespaces: Option<&Namespaces>,
        label_selector: Option<&LabelSelector>,
    ) -> Result<Self, ArgsError> {
        let (include, exclude) = match namespaces {
            Some(namespaces) => {
                namespaces.validate("namespaces")?;
                (namespaces.include.clone(), namespaces.exclude.clone())
            }
            None => (Vec::new(), Vec::new()),
        };
        let selector = parse_label_selector("labelSelector", label_selector)?;
        Ok(PodSelection {
            include,
            exclude,
            selector,
        })
    }

    /// Whether the pod is in scope.
    pub fn matches(&self, pod: &Pod) -> bool {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        if !self.include.is_empty() && !self.include.iter().any(|n| n == namespace) {
            return false;
        }
        if self.exclude.iter().any(|n| n == namespace) {
            return false;
        }
        self.selector
            .as_ref()
            .is_none_or(|selector| selector.matches(labels(pod)))
    }
}

/// Compiles a LabelSelector arg; `None` or an empty selector select all.
pub fn parse_label_selector(
    field: &str,
    selector: Option<&LabelSelector>,
) -> Result<Option<LabelSelectorRequirements>, ArgsError> {
    let Some(selector) = selector else {
        return Ok(None);
    };
    let parsed = LabelSelectorRequirements::from_label_selector(selector).map_err(|error| {
        ArgsError::new(
            field,
            format!("failed to get label selectors from strategy's params: {error}"),
        )
    })?;
    Ok((!parsed.is_empty()).then_some(parsed))
}

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

/// The pod's labels (empty when it has none).
pub fn labels(pod: &Pod) -> &BTreeMap<String, String> {
    pod.metadata.labels.as_ref().unwrap_or(&NO_LABELS)
}

/// `namespace/name`, as klog's `KObj` prints a pod.
pub fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The node the pod is bound to ("" if none).
pub fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.node_name.as_deref())
        .unwrap_or_default()
}

/// The pod's phase ("" if not reported).
pub use ksim_core::status::pod_phase as phase;

/// The pod's owner references.
pub fn owner_refs(pod: &Pod) -> &[OwnerReference] {
    pod.metadata.owner_references.as_deref().unwrap_or_default()
}

/// Whether a DaemonSet owns the pod.
pub fn is_daemonset_pod(pod: &Pod) -> bool {
    owner_refs(pod)
        .iter()
        .any(|owner| owner.kind == "DaemonSet")
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(key))
        .map(String::as_str)
}

/// Whether the pod is the API mirror of a static pod.
pub use ksim_core::status::is_mirror_pod;

/// Whether the pod's spec came from somewhere else than the API.
pub fn is_static_pod(pod: &Pod) -> bool {
    annotation(pod, CONFIG_SOURCE_ANNOTATION).is_some_and(|source| source != "api")
}

/// Whether the pod is being deleted.
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// The pod's priority, if set. Unlike ksim-core's `pod_priority` (0 when
/// unset, as the scheduler reads it) an unset priority stays apart: the
/// descheduler sorts pods without one before every pod with one, as
/// upstream's `SortPodsBasedOnPriorityLowToHigh`.
pub fn priority(pod: &Pod) -> Option<i32> {
    pod.spec.as_ref().and_then(|spec| spec.priority)
}

/// Whether the pod has system-critical priority.
pub fn is_critical_priority(pod: &Pod) -> bool {
    priority(pod).is_some_and(|priority| priority >= SYSTEM_CRITICAL_PRIORITY)
}

/// Whether the pod has an emptyDir or hostPath volume.
pub fn has_local_storage(pod: &Pod) -> bool {
    volumes(pod)
        .iter()
        .any(|volume| volume.host_path.is_some() || volume.empty_dir.is_some())
}

/// Whether the pod mounts a PersistentVolumeClaim.
pub fn has_pvc(pod: &Pod) -> bool {
    volumes(pod)
        .iter()
        .any(|volume| volume.persistent_volume_claim.is_some())
}

/// The claim names of the pod's PersistentVolumeClaim volumes, in volume
/// order.
pub fn pvc_claim_names(pod: &Pod) -> impl Iterator<Item = &str> {
    volumes(pod).iter().filter_map(|volume| {
        volume
            .persistent_volume_claim
            .as_ref()
            .map(|claim| claim.claim_name.as_str())
    })
}

/// Whether the pod has ResourceClaims.
pub fn has_resource_claims(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.resource_claims.as_ref())
        .is_some_and(|claims| !claims.is_empty())
}

fn volumes(pod: &Pod) -> &[k8s_openapi::api::core::v1::Volume] {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.volumes.as_deref())
        .unwrap_or_default()
}

/// The statuses of the app containers.
pub fn container_statuses(pod: &Pod) -> &[ContainerStatus] {
    pod.status
        .as_ref()
        .and_then(|status| status.container_statuses.as_deref())
        .unwrap_or_default()
}

/// The statuses of the init containers.
pub fn init_container_statuses(pod: &Pod) -> &[ContainerStatus] {
    pod.status
        .as_ref()
        .and_then(|status| status.init_container_statuses.as_deref())
        .unwrap_or_default()
}

/// Whether a container waits with one of these reasons.
pub fn has_waiting_reason(statuses: &[ContainerStatus], states: &[String]) -> bool {
    statuses.iter().any(|status| {
        status
            .state
            .as_ref()
            .and_then(|state| state.waiting.as_ref())
            .and_then(|waiting| waiting.reason.as_ref())
            .is_some_and(|reason| states.contains(reason))
    })
}

/// Whether a container terminated with one of these reasons.
pub fn has_terminated_reason(statuses: &[ContainerStatus], states: &[String]) -> bool {
    statuses.iter().any(|status| {
        status
            .state
            .as_ref()
            .and_then(|state| state.terminated.as_ref())
            .and_then(|terminated| terminated.reason.as_ref())
            .is_some_and(|reason| states.contains(reason))
    })
}

/// Upstream's `SortPodsBasedOnPriorityLowToHigh` (no priority first, then
/// by priority, QoS class, and pods without the soft no-eviction annotation
/// first): one order for every plugin, kept in [`crate::nodeutil`].
pub fn sort_by_priority_low_to_high(pods: &mut [&Pod]) {
    crate::nodeutil::sort_pods_by_priority_low_to_high(pods);
}

/// Oldest first (upstream `SortPodsBasedOnAge`).
pub fn sort_by_age(pods: &mut [&Pod]) {
    pods.sort_by_key(|pod| pod.metadata.creation_timestamp.as_ref().map(|t| t.0));
}

/// The pod's age in whole seconds at `now` (None if it has no creation
/// timestamp or was created after `now`).
pub fn age_seconds(pod: &Pod, now: k8s_openapi::jiff::Timestamp) -> Option<u64> {
    let created = pod.metadata.creation_timestamp.as_ref()?.0;
    let seconds = now.as_second() - created.as_second();
    u64::try_from(seconds).ok()
}

/// What a plugin does after asking for an eviction (upstream's switch on
/// the error type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterEviction {
    /// Go on with the next pod.
    Next,
    /// The node's limit is reached: go on with the next node.
    NextNode,
    /// The cycle's limit is reached: stop the plugin.
    Stop,
}

/// Upstream's handling of an eviction's result in the plugins: a node
/// limit moves on to the next node, the total limit stops the plugin, and
/// any other failure is logged and skipped.
pub fn after_eviction(result: Result<(), EvictionError>, plugin: &'static str) -> AfterEviction {
    match result {
        Ok(()) => AfterEviction::Next,
        Err(EvictionError::NodeLimitReached) => AfterEviction::NextNode,
        Err(EvictionError::TotalLimitReached) => AfterEviction::Stop,
        Err(error) => {
            tracing::error!(err = %error, plugin, "eviction failed");
            AfterEviction::Next
        }
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Fixtures of the plugins' unit tests: ksim-testutils' builders set up
    //! as these tests need them, and a recording evictor.
    use super::*;
    use k8s_openapi::api::core::v1::Node;
    use k8s_openapi::jiff::Timestamp;
    use ksim_testutils::builders;
    use std::collections::HashSet;

    use crate::framework::{EvictionRequest, PodEvictor};

    /// An evictor for plugin tests: refuses the pods named in `protected`
    /// at filter, the ones in `refused` at eviction, and keeps a per-node
    /// limit; records the names of evicted pods in order.
    #[derive(Debug, Default)]
    pub struct FakeEvictor {
        pub protected: HashSet<String>,
        pub refused: HashSet<String>,
        pub node_limit: Option<usize>,
        pub total_limit: Option<usize>,
        pub evicted: Vec<String>,
        pub evicted_nodes: Vec<String>,
    }

    impl PodEvictor for FakeEvictor {
        fn filter(&self, pod: &Pod) -> bool {
            !self
                .protected
                .contains(pod.metadata.name.as_deref().unwrap_or_default())
        }

        fn pre_eviction_filter(&self, _pod: &Pod) -> bool {
            true
        }

        fn evict(&mut self, pod: &Pod, _request: EvictionRequest<'_>) -> Result<(), EvictionError> {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let node = node_name(pod).to_string();
            if self
                .total_limit
                .is_some_and(|limit| self.evicted.len() >= limit)
            {
                return Err(EvictionError::TotalLimitReached);
            }
            if self.node_limit_exceeded(&node) {
                return Err(EvictionError::NodeLimitReached);
            }
            if self.refused.contains(&name) {
                return Err(EvictionError::Refused("refused".into()));
            }
            self.evicted.push(name);
            self.evicted_nodes.push(node);
            Ok(())
        }

        fn node_limit_exceeded(&self, node_name: &str) -> bool {
            self.node_limit.is_some_and(|limit| {
                self.evicted_nodes
                    .iter()
                    .filter(|n| *n == node_name)
                    .count()
                    >= limit
            })
        }

        fn total_limit_exceeded(&self) -> bool {
            self.total_limit
                .is_some_and(|limit| self.evicted.len() >= limit)
        }
    }

    /// A ready node with labels (only those: no hostname label).
    pub fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        let mut node = builders::node(name)
            .without_label("kubernetes.io/hostname")
            .ready();
        for (key, value) in labels {
            node = node.label(key, value);
        }
        node.obj()
    }

    /// A running pod in `default` bound to `node`, owned by a ReplicaSet,
    /// created at the epoch.
    pub fn pod(name: &str, node: &str) -> Pod {
        builders::pod(name)
            .uid(&format!("uid-{name}"))
            .created_at(Timestamp::UNIX_EPOCH)
            .owner_reference(OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: "rs".into(),
                uid: "rs-uid".into(),
                ..Default::default()
            })
            .node(node)
            .phase("Running")
            .obj()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::pod;
    use super::*;

    #[test]
    fn include_and_exclude_namespaces_together_are_refused() {
        let namespaces = Namespaces {
            include: vec!["a".into()],
            exclude: vec!["b".into()],
        };
        let error = PodSelection::new(Some(&namespaces), None).expect_err("both set");
        assert_eq!(
            error.to_string(),
            "namespaces: only one of Include/Exclude namespaces can be set"
        );
    }

    #[test]
    fn selection_applies_namespaces_and_labels() {
        let mut p = pod("p", "n");
        p.metadata.labels = Some(BTreeMap::from([("app".into(), "web".into())]));
        let exclude = Namespaces {
            exclude: vec!["default".into()],
            ..Default::default()
        };
        assert!(
            !PodSelection::new(Some(&exclude), None)
                .expect("valid")
                .matches(&p)
        );
        let selector = LabelSelector {
            match_labels: Some(BTreeMap::from([("app".into(), "db".into())])),
            ..Default::default()
        };
        assert!(
            !PodSelection::new(None, Some(&selector))
                .expect("valid")
                .matches(&p)
        );
        assert!(PodSelection::default().matches(&p));
    }

    #[test]
    fn priority_order_puts_pods_without_priority_then_best_effort_first() {
        let mut high = pod("high", "n");
        high.spec.as_mut().expect("spec").priority = Some(100);
        let mut low = pod("low", "n");
        low.spec.as_mut().expect("spec").priority = Some(1);
        let none = pod("none", "n");
        let mut pods = vec![&high, &low, &none];
        sort_by_priority_low_to_high(&mut pods);
        let names: Vec<_> = pods
            .iter()
            .filter_map(|p| p.metadata.name.as_deref())
            .collect();
        assert_eq!(names, ["none", "low", "high"]);
    }

    #[test]
    fn namespaces_admit_by_include_or_exclude() {
        let include = Namespaces {
            include: vec!["a".into()],
            exclude: vec![],
        };
        assert!(include.admits("a") && !include.admits("b"));
        let exclude = Namespaces {
            include: vec![],
            exclude: vec!["a".into()],
        };
        assert!(!exclude.admits("a") && exclude.admits("b"));
        assert!(Namespaces::default().admits("x"));
    }
}
