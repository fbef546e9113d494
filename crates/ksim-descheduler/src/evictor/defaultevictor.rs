//! DefaultEvictor, the filter and preEvictionFilter plugin every profile
//! gets: its args (upstream `DefaultEvictorArgs`, with podProtections and the
//! deprecated booleans), their validation, and the checks themselves
//! against one cycle's [`EvictorContext`].
//!
//! noEvictionPolicy: under `Mandatory` a pod annotated
//! `descheduler.alpha.kubernetes.io/prefer-no-eviction` is not evictable;
//! otherwise (`Preferred`, or unset) the annotation is ignored here, as
//! upstream, and only orders such pods after their equals in the plugins
//! that sort by priority (see [`crate::nodeutil::compare_pods_for_eviction`]).
//!
//! PodsWithPVC: without `config.PodsWithPVC.protectedStorageClasses` (absent
//! or empty) every pod with a PersistentVolumeClaim volume is protected;
//! with it, each claim is looked up in the cycle's PVCs and the pod is
//! protected when a claim is missing, has no storage class, or uses a
//! protected class. Upstream names one protected class picked in Go map
//! order; here it is the first in volume order.

use std::cell::OnceCell;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use ksim_core::selector::LabelSelectorRequirements;
use serde::Deserialize;

use crate::framework::{ArgsError, ClusterSnapshot, decode_args};
use crate::nodeutil::{NodeFitChecker, PREFER_NO_EVICTION_ANNOTATION, is_node_ready};
use crate::podutil::{self, SYSTEM_CRITICAL_PRIORITY, parse_label_selector};
use ksim_core::duration::{format_go_duration, parse_go_duration};

/// The plugin's name in a policy.
pub const NAME: &str = "DefaultEvictor";
/// A pod with this annotation is always evictable (upstream
/// `descheduler.alpha.kubernetes.io/evict`).
pub const EVICT_ANNOTATION: &str = "descheduler.alpha.kubernetes.io/evict";

const DEFAULT_PROTECTIONS: [&str; 4] = [
    "PodsWithLocalStorage",
    "SystemCriticalPods",
    "FailedBarePods",
    "DaemonSetPods",
];
const EXTRA_PROTECTIONS: [&str; 3] = ["PodsWithPVC", "PodsWithoutPDB", "PodsWithResourceClaims"];

/// `priorityThreshold`: a value or the name of a PriorityClass.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PriorityThreshold {
    /// The priority itself.
    pub value: Option<i32>,
    /// A PriorityClass whose value is the threshold.
    pub name: String,
}

/// `podProtections`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PodProtections {
    /// Extra protections: PodsWithPVC, PodsWithoutPDB, PodsWithResourceClaims.
    pub extra_enabled: Vec<String>,
    /// Default protections turned off: PodsWithLocalStorage, DaemonSetPods,
    /// SystemCriticalPods, FailedBarePods.
    pub default_disabled: Vec<String>,
    /// Per-protection configuration (PodsWithPVC's protectedStorageClasses).
    pub config: Option<PodProtectionsConfig>,
}

/// `podProtections.config`: one field per protection, named as the
/// protection is.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct PodProtectionsConfig {
    /// PodsWithPVC's configuration.
    #[serde(rename = "PodsWithPVC")]
    pub pods_with_pvc: Option<PodsWithPvcConfig>,
}

/// `podProtections.config.PodsWithPVC`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PodsWithPvcConfig {
    /// Only pods whose PVCs use one of these storage classes are protected;
    /// empty or absent protects every pod with a PVC.
    pub protected_storage_classes: Vec<ProtectedStorageClass>,
}

/// One protected storage class.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ProtectedStorageClass {
    /// The StorageClass's name.
    pub name: String,
}

/// The DefaultEvictor's args, as upstream spells them.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct DefaultEvictorArgs {
    /// Nodes considered by nodeFit (a label selector string).
    pub node_selector: String,
    /// Only pods with these labels are evictable.
    pub label_selector: Option<LabelSelector>,
    /// Only pods in namespaces with these labels are evictable.
    pub namespace_label_selector: Option<LabelSelector>,
    /// Pods at or above this priority are not evictable.
    pub priority_threshold: Option<PriorityThreshold>,
    /// Evict only pods that fit on another node.
    pub node_fit: bool,
    /// Evict only pods whose owner has at least this many pods.
    pub min_replicas: u32,
    /// Evict only pods older than this (a Go duration).
    pub min_pod_age: Option<String>,
    /// `Preferred` or `Mandatory`.
    pub no_eviction_policy: String,
    /// Protections turned on or off.
    pub pod_protections: PodProtections,
    /// Deprecated: defaultDisabled PodsWithLocalStorage.
    pub evict_local_storage_pods: bool,
    /// Deprecated: defaultDisabled DaemonSetPods.
    pub evict_daemon_set_pods: bool,
    /// Deprecated: defaultDisabled SystemCriticalPods.
    pub evict_system_critical_pods: bool,
    /// Deprecated: extraEnabled PodsWithPVC.
    pub ignore_pvc_pods: bool,
    /// Deprecated: extraEnabled PodsWithoutPDB.
    #[serde(rename = "ignorePodsWithoutPDB")]
    pub ignore_pods_without_pdb: bool,
    /// Deprecated: defaultDisabled FailedBarePods.
    pub evict_failed_bare_pods: bool,
}

impl DefaultEvictorArgs {
    /// Decodes and validates the args (upstream's messages).
    pub fn decode(args: Option<&serde_json::Value>) -> Result<Self, ArgsError> {
        let args: DefaultEvictorArgs = decode_args(args)?;
        args.validate()?;
        Ok(args)
    }

    fn validate(&self) -> Result<(), ArgsError> {
        if let Some(threshold) = &self.priority_threshold
            && threshold.value.is_some()
            && !threshold.name.is_empty()
        {
            return Err(ArgsError::new(
                "priorityThreshold",
                "priority threshold misconfigured, only one of priorityThreshold fields can be set",
            ));
        }
        // Upstream refuses this when it builds the plugin; a value is known
        // here already.
        if self
            .priority_threshold
            .as_ref()
            .and_then(|threshold| threshold.value)
            .is_some_and(|priority| priority > SYSTEM_CRITICAL_PRIORITY)
        {
            return Err(ArgsError::new(
                "priorityThreshold",
                format!("priority threshold can't be greater than {SYSTEM_CRITICAL_PRIORITY}"),
            ));
        }
        if !matches!(
            self.no_eviction_policy.as_str(),
            "" | "Preferred" | "Mandatory"
        ) {
            return Err(ArgsError::new(
                "noEvictionPolicy",
                "noEvictionPolicy accepts only [\"Preferred\" \"Mandatory\"] values",
            ));
        }
        let deprecated = self.evict_local_storage_pods
            || self.evict_daemon_set_pods
            || self.evict_system_critical_pods
            || self.ignore_pvc_pods
            || self.evict_failed_bare_pods
            || self.ignore_pods_without_pdb;
        let protections = &self.pod_protections;
        let new_style =
            !protections.extra_enabled.is_empty() || !protections.default_disabled.is_empty();
        if deprecated && new_style {
            return Err(ArgsError::new(
                "podProtections",
                "cannot use Deprecated fields alongside PodProtections.ExtraEnabled or PodProtections.DefaultDisabled",
            ));
        }
        for (index, name) in protections.extra_enabled.iter().enumerate() {
            if !EXTRA_PROTECTIONS.contains(&name.as_str()) {
                return Err(ArgsError::new(
                    format!("podProtections.extraEnabled[{index}]"),
                    format!(
                        "invalid pod protection policy in ExtraEnabled: {name:?}. Valid options are: [{}]",
                        EXTRA_PROTECTIONS.join(" ")
                    ),
                ));
            }
        }
        for (index, name) in protections.default_disabled.iter().enumerate() {
            if !DEFAULT_PROTECTIONS.contains(&name.as_str()) {
                return Err(ArgsError::new(
                    format!("podProtections.defaultDisabled[{index}]"),
                    format!(
                        "invalid pod protection policy in DefaultDisabled: {name:?}. Valid options are: [{}]",
                        DEFAULT_PROTECTIONS.join(" ")
                    ),
                ));
            }
        }
        if has_duplicates(&protections.default_disabled) {
            return Err(ArgsError::new(
                "podProtections.defaultDisabled",
                "PodProtections.DefaultDisabled contains duplicate entries",
            ));
        }
        if has_duplicates(&protections.extra_enabled) {
            return Err(ArgsError::new(
                "podProtections.extraEnabled",
                "PodProtections.ExtraEnabled contains duplicate entries",
            ));
        }
        if new_style && protections.extra_enabled.iter().any(|p| p == "PodsWithPVC") {
            for (index, class) in self.protected_storage_classes().iter().enumerate() {
                if class.name.is_empty() {
                    return Err(ArgsError::new(
                        format!(
                            "podProtections.config.PodsWithPVC.protectedStorageClasses[{index}].name"
                        ),
                        format!(
                            "PodProtections.Config.PodsWithPVC.ProtectedStorageClasses[{index}] name cannot be empty"
                        ),
                    ));
                }
            }
        }
        if let Some(age) = &self.min_pod_age {
            parse_go_duration(age).map_err(|message| ArgsError::new("minPodAge", message))?;
        }
        if !self.node_selector.is_empty() {
            LabelSelectorRequirements::parse(&self.node_selector)
                .map_err(|error| ArgsError::new("nodeSelector", error.to_string()))?;
        }
        parse_label_selector("labelSelector", self.label_selector.as_ref())?;
        parse_label_selector(
            "namespaceLabelSelector",
            self.namespace_label_selector.as_ref(),
        )?;
        Ok(())
    }

    /// The PriorityClass named by `priorityThreshold.name`, to be resolved
    /// through the API before [`DefaultEvictor::new`].
    pub fn priority_class_name(&self) -> Option<&str> {
        self.priority_threshold
            .as_ref()
            .map(|threshold| threshold.name.as_str())
            .filter(|name| !name.is_empty())
    }

    /// Whether the PodsWithoutPDB protection is on (the cycle then lists
    /// PodDisruptionBudgets).
    pub fn needs_pdbs(&self) -> bool {
        self.effective_protections().contains(&"PodsWithoutPDB")
    }

    /// Whether the PodsWithPVC protection is on and limited to some storage
    /// classes (the cycle then lists PersistentVolumeClaims).
    pub fn needs_pvcs(&self) -> bool {
        self.effective_protections().contains(&"PodsWithPVC")
            && !self.protected_storage_classes().is_empty()
    }

    /// `podProtections.config.PodsWithPVC.protectedStorageClasses` (read
    /// whichever style turned the protection on, as upstream).
    fn protected_storage_classes(&self) -> &[ProtectedStorageClass] {
        self.pod_protections
            .config
            .as_ref()
            .and_then(|config| config.pods_with_pvc.as_ref())
            .map(|pvc| pvc.protected_storage_classes.as_slice())
            .unwrap_or_default()
    }

    /// Upstream's `getEffectivePodProtections`.
    fn effective_protections(&self) -> Vec<&str> {
        let protections = &self.pod_protections;
        if protections.default_disabled.is_empty() && protections.extra_enabled.is_empty() {
            let mut effective = Vec::new();
            if !self.evict_local_storage_pods {
                effective.push("PodsWithLocalStorage");
            }
            if !self.evict_daemon_set_pods {
                effective.push("DaemonSetPods");
            }
            if !self.evict_system_critical_pods {
                effective.push("SystemCriticalPods");
            }
            if !self.evict_failed_bare_pods {
                effective.push("FailedBarePods");
            }
            if self.ignore_pvc_pods {
                effective.push("PodsWithPVC");
            }
            if self.ignore_pods_without_pdb {
                effective.push("PodsWithoutPDB");
            }
            return effective;
        }
        DEFAULT_PROTECTIONS
            .into_iter()
            .filter(|p| !protections.default_disabled.iter().any(|d| d == p))
            .chain(protections.extra_enabled.iter().map(String::as_str))
            .collect()
    }
}

fn has_duplicates(names: &[String]) -> bool {
    names
        .iter()
        .enumerate()
        .any(|(index, name)| names[..index].contains(name))
}

/// How the PodsWithPVC protection decides.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PvcProtection {
    /// Every pod with a PVC volume is protected.
    All,
    /// Only pods whose PVCs use one of these storage classes (the PVCs are
    /// looked up; a missing PVC or one without a class protects the pod).
    StorageClasses(Vec<String>),
}

/// A compiled DefaultEvictor.
#[derive(Debug, Clone)]
pub struct DefaultEvictor {
    local_storage: bool,
    daemonset: bool,
    system_critical: bool,
    failed_bare: bool,
    pvc: Option<PvcProtection>,
    without_pdb: bool,
    resource_claims: bool,
    priority_threshold: Option<i32>,
    label_selector: Option<LabelSelectorRequirements>,
    namespace_label_selector: Option<LabelSelectorRequirements>,
    node_selector: Option<LabelSelectorRequirements>,
    node_fit: bool,
    min_replicas: u32,
    min_pod_age: Option<Duration>,
    mandatory_no_eviction: bool,
}

impl Default for DefaultEvictor {
    fn default() -> Self {
        DefaultEvictor::new(&DefaultEvictorArgs::default(), None)
            .expect("the default args are valid")
    }
}

impl DefaultEvictor {
    /// Builds the evictor from validated args; `priority_class_value` is the
    /// value of the PriorityClass the args name. Without priorityThreshold
    /// only system-critical pods are protected by priority (upstream adds
    /// the threshold check only when the threshold is set), and a threshold
    /// above system-critical priority is refused, as upstream.
    pub fn new(
        args: &DefaultEvictorArgs,
        priority_class_value: Option<i32>,
    ) -> Result<Self, ArgsError> {
        args.validate()?;
        let effective = args.effective_protections();
        let has = |name: &str| effective.contains(&name);
        let priority_threshold = args
            .priority_threshold
            .as_ref()
            .and_then(|threshold| threshold.value)
            .or(priority_class_value);
        if priority_threshold.is_some_and(|priority| priority > SYSTEM_CRITICAL_PRIORITY) {
            return Err(ArgsError::new(
                "priorityThreshold",
                format!("priority threshold can't be greater than {SYSTEM_CRITICAL_PRIORITY}"),
            ));
        }
        let node_selector = if args.node_selector.is_empty() {
            None
        } else {
            Some(
                LabelSelectorRequirements::parse(&args.node_selector)
                    .map_err(|error| ArgsError::new("nodeSelector", error.to_string()))?,
            )
        };
        Ok(DefaultEvictor {
            local_storage: has("PodsWithLocalStorage"),
            daemonset: has("DaemonSetPods"),
            system_critical: has("SystemCriticalPods"),
            failed_bare: has("FailedBarePods"),
            pvc: has("PodsWithPVC").then(|| {
                let classes = args.protected_storage_classes();
                if classes.is_empty() {
                    PvcProtection::All
                } else {
                    PvcProtection::StorageClasses(
                        classes.iter().map(|class| class.name.clone()).collect(),
                    )
                }
            }),
            without_pdb: has("PodsWithoutPDB"),
            resource_claims: has("PodsWithResourceClaims"),
            priority_threshold,
            label_selector: parse_label_selector("labelSelector", args.label_selector.as_ref())?,
            namespace_label_selector: parse_label_selector(
                "namespaceLabelSelector",
                args.namespace_label_selector.as_ref(),
            )?,
            node_selector,
            node_fit: args.node_fit,
            min_replicas: args.min_replicas,
            min_pod_age: args
                .min_pod_age
                .as_deref()
                .map(parse_go_duration)
                .transpose()
                .map_err(|message| ArgsError::new("minPodAge", message))?,
            mandatory_no_eviction: args.no_eviction_policy == "Mandatory",
        })
    }

    /// The filter extension point: `Err` lists the checks the pod fails, in
    /// upstream's words.
    pub fn filter(&self, pod: &Pod, context: &EvictorContext<'_>) -> Result<(), String> {
        let annotations = pod.metadata.annotations.as_ref();
        if annotations.is_some_and(|a| a.contains_key(EVICT_ANNOTATION)) {
            return Ok(());
        }
        if self.mandatory_no_eviction
            && annotations.is_some_and(|a| a.contains_key(PREFER_NO_EVICTION_ANNOTATION))
        {
            return Err(
                "pod has the no-eviction annotation and noEvictionPolicy is Mandatory".into(),
            );
        }
        let mut failed: Vec<String> = Vec::new();
        if podutil::is_mirror_pod(pod) {
            failed.push("pod is a mirror pod".into());
        }
        if podutil::is_static_pod(pod) {
            failed.push("pod is a static pod".into());
        }
        if podutil::is_terminating(pod) {
            failed.push("pod is terminating".into());
        }
        if self.system_critical {
            if podutil::is_critical_priority(pod) {
                failed.push(
                    "pod has system critical priority and is protected against eviction".into(),
                );
            }
            if let Some(threshold) = self.priority_threshold
                && podutil::priority(pod).is_some_and(|priority| priority >= threshold)
            {
                failed
                    .push("pod has higher priority than specified priority class threshold".into());
            }
        }
        let bare = podutil::owner_refs(pod).is_empty();
        if self.failed_bare {
            if bare {
                failed.push("pod does not have any ownerRefs".into());
            }
        } else if bare && podutil::phase(pod) != "Failed" {
            failed.push("pod does not have any ownerRefs and is not in failed phase".into());
        }
        if self.local_storage && podutil::has_local_storage(pod) {
            failed.push("pod has local storage and is protected against eviction".into());
        }
        if self.daemonset && podutil::is_daemonset_pod(pod) {
            failed.push("daemonset pods are protected against eviction".into());
        }
        match &self.pvc {
            Some(PvcProtection::All) if podutil::has_pvc(pod) => {
                failed.push("pod with PVC is protected against eviction".into());
            }
            Some(PvcProtection::StorageClasses(protected)) => {
                if let Err(reason) = context.check_pvc_storage_classes(pod, protected) {
                    failed.push(reason);
                }
            }
            _ => {}
        }
        if self.without_pdb && !context.covered_by_pdb(pod) {
            failed.push(
                "pod does not have a PodDisruptionBudget and is protected against eviction".into(),
            );
        }
        if self.resource_claims && podutil::has_resource_claims(pod) {
            failed.push("pod has ResourceClaims and descheduler is configured to protect ResourceClaims pods".into());
        }
        if let Some(selector) = &self.label_selector
            && !selector.matches(podutil::labels(pod))
        {
            failed.push(
                "pod labels do not match the labelSelector filter in the policy parameter".into(),
            );
        }
        if self.min_replicas > 1 {
            let owners = podutil::owner_refs(pod);
            if owners.len() == 1 {
                let replicas = context.pods_owned_by(&owners[0].uid);
                if replicas < self.min_replicas as usize {
                    failed.push(format!(
                        "owner has {replicas} replicas which is less than minReplicas of {}",
                        self.min_replicas
                    ));
                }
            }
        }
        if let Some(min_age) = self.min_pod_age {
            let started = pod
                .status
                .as_ref()
                .and_then(|status| status.start_time.as_ref());
            let old_enough = started.is_some_and(|start| {
                let age = context.snapshot.now().as_second() - start.0.as_second();
                u64::try_from(age).is_ok_and(|age| age >= min_age.as_secs())
            });
            if !old_enough {
                failed.push(format!(
                    "pod age is not older than MinPodAge: {} seconds",
                    format_go_duration(min_age)
                ));
            }
        }
        if failed.is_empty() {
            Ok(())
        } else if failed.len() == 1 {
            Err(failed.remove(0))
        } else {
            Err(format!("[{}]", failed.join(", ")))
        }
    }

    /// The preEvictionFilter extension point: nodeFit and
    /// namespaceLabelSelector. `Err` says why, in upstream's words.
    pub fn pre_eviction_filter(
        &self,
        pod: &Pod,
        context: &EvictorContext<'_>,
    ) -> Result<(), &'static str> {
        if self.node_fit && !self.fits_any_other_node(pod, context) {
            return Err(
                "pod does not fit on any other node because of nodeSelector(s), Taint(s), or nodes marked as unschedulable",
            );
        }
        if let Some(selector) = &self.namespace_label_selector {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            let matches = context
                .namespace_labels(namespace)
                .is_some_and(|labels| selector.matches(labels));
            if !matches {
                return Err(
                    "pod namespace do not match the namespaceLabelSelector filter in the policy parameter",
                );
            }
        }
        Ok(())
    }

    /// Upstream's nodeFit: whether the pod fits a ready node (of the
    /// args' nodeSelector) other than its own, by nodeutil's shared check
    /// (selector and affinity, taints, cordons, anti-affinity, room left).
    fn fits_any_other_node(&self, pod: &Pod, context: &EvictorContext<'_>) -> bool {
        let empty = BTreeMap::new();
        let candidates = context.snapshot.nodes().iter().filter(|node| {
            is_node_ready(node)
                && self.node_selector.as_ref().is_none_or(|selector| {
                    selector.matches(node.metadata.labels.as_ref().unwrap_or(&empty))
                })
        });
        context.node_fit.pod_fits_any_other_node_of(pod, candidates)
    }
}

/// What the DefaultEvictor reads about the cluster during one cycle,
/// indexed once on first use.
pub struct EvictorContext<'a> {
    snapshot: &'a ClusterSnapshot,
    pdbs: &'a [PodDisruptionBudget],
    pvcs: &'a [PersistentVolumeClaim],
    pvc_index: OnceCell<HashMap<(&'a str, &'a str), &'a PersistentVolumeClaim>>,
    owner_counts: OnceCell<HashMap<&'a str, usize>>,
    namespace_labels: OnceCell<HashMap<&'a str, &'a BTreeMap<String, String>>>,
    node_fit: NodeFitChecker<'a>,
    pdb_selectors: OnceCell<Vec<(&'a str, Option<LabelSelectorRequirements>)>>,
}

impl<'a> EvictorContext<'a> {
    /// A context over a snapshot and the cluster's PodDisruptionBudgets
    /// (empty unless PodsWithoutPDB is on).
    pub fn new(snapshot: &'a ClusterSnapshot, pdbs: &'a [PodDisruptionBudget]) -> Self {
        EvictorContext {
            snapshot,
            pdbs,
            pvcs: &[],
            pvc_index: OnceCell::new(),
            owner_counts: OnceCell::new(),
            namespace_labels: OnceCell::new(),
            node_fit: NodeFitChecker::new(snapshot),
            pdb_selectors: OnceCell::new(),
        }
    }

    /// The same context with the cluster's PersistentVolumeClaims (listed
    /// once per cycle when PodsWithPVC protects only some storage classes).
    pub fn with_pvcs(mut self, pvcs: &'a [PersistentVolumeClaim]) -> Self {
        self.pvcs = pvcs;
        self.pvc_index = OnceCell::new();
        self
    }

    /// The snapshot.
    pub fn snapshot(&self) -> &'a ClusterSnapshot {
        self.snapshot
    }

    /// Upstream's PodsWithPVC check with protectedStorageClasses: each PVC
    /// volume's claim is looked up; a missing claim or one without a
    /// storage class protects the pod (upstream errs, which protects it),
    /// and so does a claim of a protected class. The first failing volume,
    /// in the pod's volume order, gives the reason.
    fn check_pvc_storage_classes(&self, pod: &Pod, protected: &[String]) -> Result<(), String> {
        let index = self.pvc_index.get_or_init(|| {
            self.pvcs
                .iter()
                .filter_map(|claim| {
                    Some((
                        (
                            claim.metadata.namespace.as_deref()?,
                            claim.metadata.name.as_deref()?,
                        ),
                        claim,
                    ))
                })
                .collect()
        });
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let mut protected_class = None;
        for claim_name in podutil::pvc_claim_names(pod) {
            let Some(claim) = index.get(&(namespace, claim_name)) else {
                return Err(format!(
                    "failed to get persistent volume claim {namespace:?}/{claim_name:?}: persistentvolumeclaim {claim_name:?} not found"
                ));
            };
            let class = claim
                .spec
                .as_ref()
                .and_then(|spec| spec.storage_class_name.as_deref())
                .unwrap_or_default();
            if class.is_empty() {
                return Err(format!(
                    "failed to resolve storage class for pod {namespace:?}/{claim_name:?}"
                ));
            }
            if protected_class.is_none() && protected.iter().any(|p| p == class) {
                protected_class = Some(class);
            }
        }
        match protected_class {
            Some(class) => Err(format!("pod using protected storage class {class:?}")),
            None => Ok(()),
        }
    }

    fn pods_owned_by(&self, uid: &str) -> usize {
        let counts = self.owner_counts.get_or_init(|| {
            let mut counts: HashMap<&str, usize> = HashMap::new();
            for pod in self.snapshot.pods() {
                for owner in podutil::owner_refs(pod) {
                    *counts.entry(owner.uid.as_str()).or_default() += 1;
                }
            }
            counts
        });
        counts.get(uid).copied().unwrap_or_default()
    }

    fn namespace_labels(&self, namespace: &str) -> Option<&'a BTreeMap<String, String>> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.namespace_labels
            .get_or_init(|| {
                self.snapshot
                    .namespaces()
                    .iter()
                    .filter_map(|ns| {
                        Some((
                            ns.metadata.name.as_deref()?,
                            ns.metadata.labels.as_ref().unwrap_or(&EMPTY),
                        ))
                    })
                    .collect()
            })
            .get(namespace)
            .copied()
    }

    fn covered_by_pdb(&self, pod: &Pod) -> bool {
        let selectors = self.pdb_selectors.get_or_init(|| {
            self.pdbs
                .iter()
                .map(|pdb| {
                    let selector = pdb
                        .spec
                        .as_ref()
                        .and_then(|spec| spec.selector.as_ref())
                        .and_then(|s| LabelSelectorRequirements::from_label_selector(s).ok());
                    (
                        pdb.metadata.namespace.as_deref().unwrap_or_default(),
                        selector,
                    )
                })
                .collect()
        });
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        selectors.iter().any(|(pdb_namespace, selector)| {
            *pdb_namespace == namespace
                && selector
                    .as_ref()
                    .is_some_and(|s| !s.is_empty() && s.matches(podutil::labels(pod)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podutil::testing::{node, pod};
    use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, Volume};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    fn evictor(args: serde_json::Value) -> DefaultEvictor {
        let args = DefaultEvictorArgs::decode(Some(&args)).expect("valid args");
        DefaultEvictor::new(&args, None).expect("valid evictor")
    }

    fn with_owner(mut p: Pod, kind: &str) -> Pod {
        p.metadata.owner_references = Some(vec![OwnerReference {
            kind: kind.into(),
            name: "owner".into(),
            uid: format!("{kind}-uid"),
            api_version: "apps/v1".into(),
            ..Default::default()
        }]);
        p
    }

    fn local_storage(mut p: Pod) -> Pod {
        p.spec.as_mut().expect("spec").volumes = Some(vec![Volume {
            name: "scratch".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        }]);
        p
    }

    fn annotated(mut p: Pod, key: &str, value: &str) -> Pod {
        p.metadata
            .annotations
            .get_or_insert_default()
            .insert(key.into(), value.into());
        p
    }

    #[test]
    fn default_protections_refuse_the_pods_upstream_protects() {
        let snapshot = ClusterSnapshot::new(vec![], vec![], vec![], Timestamp::UNIX_EPOCH);
        let context = EvictorContext::new(&snapshot, &[]);
        let default = DefaultEvictor::default();
        let mut critical = pod("critical", "n");
        critical.spec.as_mut().expect("spec").priority = Some(SYSTEM_CRITICAL_PRIORITY);
        let mut bare = pod("bare", "n");
        bare.metadata.owner_references = None;
        let mut terminating = pod("terminating", "n");
        terminating.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::UNIX_EPOCH),
        );
        let cases = [
            (
                with_owner(pod("ds", "n"), "DaemonSet"),
                "daemonset pods are protected against eviction",
            ),
            (
                annotated(pod("mirror", "n"), "kubernetes.io/config.mirror", "x"),
                "pod is a mirror pod",
            ),
            (
                annotated(pod("static", "n"), "kubernetes.io/config.source", "file"),
                "pod is a static pod",
            ),
            (
                critical,
                "pod has system critical priority and is protected against eviction",
            ),
            (
                local_storage(pod("local", "n")),
                "pod has local storage and is protected against eviction",
            ),
            (bare, "pod does not have any ownerRefs"),
            (terminating, "pod is terminating"),
        ];
        for (pod, reason) in cases {
            assert_eq!(
                default.filter(&pod, &context),
                Err(reason.to_string()),
                "{}",
                podutil::pod_key(&pod)
            );
        }
        assert_eq!(default.filter(&pod("plain", "n"), &context), Ok(()));
    }

    #[test]
    fn protections_can_be_disabled_new_style_and_deprecated_style() {
        let snapshot = ClusterSnapshot::new(vec![], vec![], vec![], Timestamp::UNIX_EPOCH);
        let context = EvictorContext::new(&snapshot, &[]);
        let new_style = evictor(
            json!({"podProtections": {"defaultDisabled": ["PodsWithLocalStorage", "DaemonSetPods"]}}),
        );
        let deprecated =
            evictor(json!({"evictLocalStoragePods": true, "evictDaemonSetPods": true}));
        for evictor in [new_style, deprecated] {
            assert_eq!(
                evictor.filter(&local_storage(pod("l", "n")), &context),
                Ok(())
            );
            assert_eq!(
                evictor.filter(&with_owner(pod("d", "n"), "DaemonSet"), &context),
                Ok(())
            );
        }
        let mut failed_bare = pod("failed", "n");
        failed_bare.metadata.owner_references = None;
        failed_bare.status.as_mut().expect("status").phase = Some("Failed".into());
        let evict_failed = evictor(json!({"evictFailedBarePods": true}));
        assert_eq!(evict_failed.filter(&failed_bare, &context), Ok(()));
        assert!(
            DefaultEvictor::default()
                .filter(&failed_bare, &context)
                .is_err()
        );
    }

    #[test]
    fn the_evict_annotation_overrides_every_protection() {
        let snapshot = ClusterSnapshot::new(vec![], vec![], vec![], Timestamp::UNIX_EPOCH);
        let context = EvictorContext::new(&snapshot, &[]);
        let pod = annotated(
            local_storage(with_owner(pod("p", "n"), "DaemonSet")),
            EVICT_ANNOTATION,
            "",
        );
        assert_eq!(DefaultEvictor::default().filter(&pod, &context), Ok(()));
    }

    #[test]
    fn priority_threshold_label_selector_and_min_replicas_apply() {
        let pods = vec![pod("a", "n"), pod("b", "n")];
        let snapshot = ClusterSnapshot::new(vec![], pods.clone(), vec![], Timestamp::UNIX_EPOCH);
        let context = EvictorContext::new(&snapshot, &[]);
        let mut high = pod("high", "n");
        high.spec.as_mut().expect("spec").priority = Some(1000);
        let threshold = evictor(json!({"priorityThreshold": {"value": 1000}}));
        assert_eq!(
            threshold.filter(&high, &context),
            Err("pod has higher priority than specified priority class threshold".into())
        );
        let selector = evictor(json!({"labelSelector": {"matchLabels": {"app": "web"}}}));
        assert!(selector.filter(&pods[0], &context).is_err());
        let mut critical = pod("critical", "n");
        critical.spec.as_mut().expect("spec").priority = Some(SYSTEM_CRITICAL_PRIORITY);
        assert_eq!(
            threshold.filter(&critical, &context),
            Err("[pod has system critical priority and is protected against eviction, pod has higher priority than specified priority class threshold]".into())
        );
        let named = DefaultEvictorArgs::decode(Some(
            &json!({"priorityThreshold": {"name": "very-important"}}),
        ))
        .expect("decodes");
        assert_eq!(
            DefaultEvictor::new(&named, Some(SYSTEM_CRITICAL_PRIORITY + 1))
                .expect_err("above system-critical")
                .to_string(),
            "priorityThreshold: priority threshold can't be greater than 2000000000"
        );
        assert_eq!(
            DefaultEvictorArgs::decode(Some(
                &json!({"priorityThreshold": {"value": SYSTEM_CRITICAL_PRIORITY + 1}})
            ))
            .expect_err("above system-critical")
            .to_string(),
            "priorityThreshold: priority threshold can't be greater than 2000000000"
        );
        let replicas = evictor(json!({"minReplicas": 3}));
        assert_eq!(
            replicas.filter(&pods[0], &context),
            Err("owner has 2 replicas which is less than minReplicas of 3".into())
        );
        assert_eq!(
            evictor(json!({"minReplicas": 2})).filter(&pods[0], &context),
            Ok(())
        );
    }

    #[test]
    fn node_fit_needs_another_ready_node_that_admits_the_pod() {
        let mut tainted = node("b", &[]);
        tainted.spec.as_mut().expect("spec").taints =
            Some(vec![k8s_openapi::api::core::v1::Taint {
                key: "dedicated".into(),
                effect: "NoSchedule".into(),
                ..Default::default()
            }]);
        let p = pod("p", "a");
        let snapshot = ClusterSnapshot::new(
            vec![node("a", &[]), tainted],
            vec![p.clone()],
            vec![],
            Timestamp::UNIX_EPOCH,
        );
        let context = EvictorContext::new(&snapshot, &[]);
        let fit = evictor(json!({"nodeFit": true}));
        assert!(fit.pre_eviction_filter(&p, &context).is_err());
        let snapshot = ClusterSnapshot::new(
            vec![node("a", &[]), node("c", &[])],
            vec![p.clone()],
            vec![],
            Timestamp::UNIX_EPOCH,
        );
        let context = EvictorContext::new(&snapshot, &[]);
        assert_eq!(fit.pre_eviction_filter(&p, &context), Ok(()));
    }

    #[test]
    fn node_fit_counts_what_the_other_nodes_pods_request() {
        use k8s_openapi::api::core::v1::ResourceRequirements;
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        let requesting = |name: &str, node: &str, cpu: &str| {
            let mut p = pod(name, node);
            p.spec.as_mut().expect("spec").containers[0].resources = Some(ResourceRequirements {
                requests: Some(BTreeMap::from([("cpu".to_string(), Quantity(cpu.into()))])),
                ..Default::default()
            });
            p
        };
        let mut full = node("c", &[]);
        full.status.as_mut().expect("status").allocatable = Some(BTreeMap::from([
            ("cpu".to_string(), Quantity("1".into())),
            ("pods".to_string(), Quantity("110".into())),
        ]));
        let candidate = requesting("p", "a", "500m");
        let snapshot = ClusterSnapshot::new(
            vec![node("a", &[]), full],
            vec![candidate.clone(), requesting("hog", "c", "800m")],
            vec![],
            Timestamp::UNIX_EPOCH,
        );
        let context = EvictorContext::new(&snapshot, &[]);
        let fit = evictor(json!({"nodeFit": true}));
        assert!(fit.pre_eviction_filter(&candidate, &context).is_err());
        let small = requesting("small", "a", "100m");
        assert_eq!(fit.pre_eviction_filter(&small, &context), Ok(()));
    }

    #[test]
    fn namespace_labels_and_min_pod_age_apply() {
        use k8s_openapi::api::core::v1::Namespace;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some("default".into()),
                labels: Some(BTreeMap::from([("tier".to_string(), "batch".to_string())])),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut p = pod("p", "a");
        p.status.as_mut().expect("status").start_time =
            Some(Time(Timestamp::from_second(100).expect("valid")));
        let snapshot = ClusterSnapshot::new(
            vec![],
            vec![],
            vec![namespace],
            Timestamp::from_second(400).expect("valid"),
        );
        let context = EvictorContext::new(&snapshot, &[]);
        let batch = evictor(json!({"namespaceLabelSelector": {"matchLabels": {"tier": "batch"}}}));
        assert_eq!(batch.pre_eviction_filter(&p, &context), Ok(()));
        let web = evictor(json!({"namespaceLabelSelector": {"matchLabels": {"tier": "web"}}}));
        assert!(web.pre_eviction_filter(&p, &context).is_err());
        assert_eq!(
            evictor(json!({"minPodAge": "5m"})).filter(&p, &context),
            Ok(())
        );
        assert_eq!(
            evictor(json!({"minPodAge": "6m"})).filter(&p, &context),
            Err("pod age is not older than MinPodAge: 6m0s seconds".into())
        );
    }

    #[test]
    fn bad_args_name_the_field() {
        let cases = [
            (
                json!({"priorityThreshold": {"value": 1, "name": "x"}}),
                "priorityThreshold: priority threshold misconfigured, only one of priorityThreshold fields can be set",
            ),
            (
                json!({"podProtections": {"extraEnabled": ["Nope"]}}),
                "podProtections.extraEnabled[0]: invalid pod protection policy in ExtraEnabled: \"Nope\". Valid options are: [PodsWithPVC PodsWithoutPDB PodsWithResourceClaims]",
            ),
            (
                json!({"evictLocalStoragePods": true, "podProtections": {"defaultDisabled": ["DaemonSetPods"]}}),
                "podProtections: cannot use Deprecated fields alongside PodProtections.ExtraEnabled or PodProtections.DefaultDisabled",
            ),
            (
                json!({"podProtections": {"extraEnabled": ["PodsWithPVC"],
                    "config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": "fast"}, {}]}}}}),
                "podProtections.config.PodsWithPVC.protectedStorageClasses[1].name: PodProtections.Config.PodsWithPVC.ProtectedStorageClasses[1] name cannot be empty",
            ),
            (
                json!({"podProtections": {"config": {"PodsWithPvc": {}}}}),
                "podProtections.config.PodsWithPvc: unknown field `PodsWithPvc`, expected `PodsWithPVC`",
            ),
            (
                json!({"minPodAge": "5"}),
                "minPodAge: time: missing unit in duration \"5\"",
            ),
        ];
        for (args, message) in cases {
            let error = DefaultEvictorArgs::decode(Some(&args)).expect_err("invalid");
            assert_eq!(error.to_string(), message);
        }
    }

    fn with_claims(mut p: Pod, claims: &[&str]) -> Pod {
        use k8s_openapi::api::core::v1::PersistentVolumeClaimVolumeSource;
        p.spec.as_mut().expect("spec").volumes = Some(
            claims
                .iter()
                .map(|claim| Volume {
                    name: (*claim).into(),
                    persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                        claim_name: (*claim).into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .collect(),
        );
        p
    }

    fn claim(name: &str, class: Option<&str>) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"storageClassName": class},
        }))
        .expect("a valid claim")
    }

    #[test]
    fn pvc_protection_without_storage_classes_protects_every_pod_with_a_claim() {
        let snapshot = ClusterSnapshot::new(vec![], vec![], vec![], Timestamp::UNIX_EPOCH);
        let context = EvictorContext::new(&snapshot, &[]);
        let claimed = with_claims(pod("p", "n"), &["data"]);
        for args in [
            json!({"podProtections": {"extraEnabled": ["PodsWithPVC"]}}),
            json!({"podProtections": {"extraEnabled": ["PodsWithPVC"],
                "config": {"PodsWithPVC": {"protectedStorageClasses": []}}}}),
            json!({"ignorePvcPods": true}),
        ] {
            assert_eq!(
                evictor(args.clone()).filter(&claimed, &context),
                Err("pod with PVC is protected against eviction".into()),
                "{args}"
            );
            assert_eq!(evictor(args).filter(&pod("q", "n"), &context), Ok(()));
        }
        assert_eq!(DefaultEvictor::default().filter(&claimed, &context), Ok(()));
    }

    #[test]
    fn pvc_protection_with_storage_classes_looks_up_each_claims_class() {
        let snapshot = ClusterSnapshot::new(vec![], vec![], vec![], Timestamp::UNIX_EPOCH);
        let claims = [
            claim("fast-data", Some("fast")),
            claim("slow-data", Some("slow")),
            claim("classless", None),
        ];
        let context = EvictorContext::new(&snapshot, &[]).with_pvcs(&claims);
        let protect_fast = evictor(json!({"podProtections": {
            "extraEnabled": ["PodsWithPVC"],
            "config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": "fast"}]}},
        }}));
        let cases: [(&[&str], Result<(), String>); 6] = [
            (&[], Ok(())),
            (&["slow-data"], Ok(())),
            (
                &["slow-data", "fast-data"],
                Err("pod using protected storage class \"fast\"".into()),
            ),
            (
                &["missing"],
                Err("failed to get persistent volume claim \"default\"/\"missing\": persistentvolumeclaim \"missing\" not found".into()),
            ),
            (
                &["fast-data", "classless"],
                Err("failed to resolve storage class for pod \"default\"/\"classless\"".into()),
            ),
            (
                &["slow-data", "slow-data"],
                Ok(()),
            ),
        ];
        for (claims, expected) in cases {
            assert_eq!(
                protect_fast.filter(&with_claims(pod("p", "n"), claims), &context),
                expected,
                "{claims:?}"
            );
        }
    }

    #[test]
    fn pvc_storage_classes_are_read_with_the_deprecated_switch_too() {
        let args = DefaultEvictorArgs::decode(Some(&json!({
            "ignorePvcPods": true,
            "podProtections": {"config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": "fast"}]}}},
        })))
        .expect("valid");
        assert!(args.needs_pvcs());
        let evictor = DefaultEvictor::new(&args, None).expect("valid");
        let snapshot = ClusterSnapshot::new(vec![], vec![], vec![], Timestamp::UNIX_EPOCH);
        let claims = [claim("slow-data", Some("slow"))];
        let context = EvictorContext::new(&snapshot, &[]).with_pvcs(&claims);
        assert_eq!(
            evictor.filter(&with_claims(pod("p", "n"), &["slow-data"]), &context),
            Ok(())
        );
        let without_classes =
            DefaultEvictorArgs::decode(Some(&json!({"ignorePvcPods": true}))).expect("valid");
        assert!(!without_classes.needs_pvcs());
    }

    #[test]
    fn the_prefer_no_eviction_annotation_protects_only_under_mandatory() {
        let snapshot = ClusterSnapshot::new(vec![], vec![], vec![], Timestamp::UNIX_EPOCH);
        let context = EvictorContext::new(&snapshot, &[]);
        let shy = annotated(pod("p", "n"), PREFER_NO_EVICTION_ANNOTATION, "");
        assert_eq!(DefaultEvictor::default().filter(&shy, &context), Ok(()));
        assert_eq!(
            evictor(json!({"noEvictionPolicy": "Preferred"})).filter(&shy, &context),
            Ok(())
        );
        let mandatory = evictor(json!({"noEvictionPolicy": "Mandatory"}));
        assert!(mandatory.filter(&shy, &context).is_err());
        assert_eq!(mandatory.filter(&pod("q", "n"), &context), Ok(()));
        let forced = annotated(shy, EVICT_ANNOTATION, "");
        assert_eq!(mandatory.filter(&forced, &context), Ok(()));
    }
}
