//! The `policy.ksim.io/v1alpha1` DistributedPodDisruptionBudget as Rust
//! types: spec, status, federation members and their observed state. The
//! schema the API server validates them with is the CRD manifest in
//! `ksim_core::crds`.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};

/// The API group.
pub const GROUP: &str = "policy.ksim.io";
/// The served version.
pub const VERSION: &str = "v1alpha1";
/// `policy.ksim.io/v1alpha1`.
pub const API_VERSION: &str = "policy.ksim.io/v1alpha1";
/// The kind.
pub const KIND: &str = "DistributedPodDisruptionBudget";
/// The resource's plural name.
pub const PLURAL: &str = "distributedpoddisruptionbudgets";

/// One budget over pods in several namespaces and clusters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DistributedPodDisruptionBudget {
    /// Always [`API_VERSION`] when serialized by this crate.
    #[serde(default = "api_version")]
    pub api_version: String,
    /// Always [`KIND`] when serialized by this crate.
    #[serde(default = "kind")]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The budget.
    #[serde(default)]
    pub spec: DistributedPodDisruptionBudgetSpec,
    /// As last computed by the controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DistributedPodDisruptionBudgetStatus>,
}

fn api_version() -> String {
    API_VERSION.into()
}

fn kind() -> String {
    KIND.into()
}

impl DistributedPodDisruptionBudget {
    /// A budget named `name` in `namespace` with `spec`.
    pub fn new(namespace: &str, name: &str, spec: DistributedPodDisruptionBudgetSpec) -> Self {
        Self {
            api_version: api_version(),
            kind: kind(),
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        }
    }
}

impl kube::Resource for DistributedPodDisruptionBudget {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        KIND.into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        GROUP.into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        VERSION.into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        PLURAL.into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// How a budget decides to allow a disruption.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Coordination {
    /// From the members' last observed status (a propagation window remains).
    #[default]
    Optimistic,
    /// Claim the child, read every member fresh, back off on competition.
    Exclusive,
}

/// The spec of a [`DistributedPodDisruptionBudget`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DistributedPodDisruptionBudgetSpec {
    /// This cluster's pods (in the budget's namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Pods of the whole federation that must stay available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<IntOrString>,
    /// Pods of the whole federation that may be unavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Carried to the child PodDisruptionBudget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unhealthy_pod_eviction_policy: Option<String>,
    /// The member PodDisruptionBudgets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub federation: Vec<FederationMember>,
    /// Optimistic (default) or Exclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordination: Option<Coordination>,
}

/// A member of a federation: an ordinary PodDisruptionBudget.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FederationMember {
    /// A kubeconfig context (a sibling ksim cluster's name); empty: this cluster.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    /// Empty: the budget's own namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The member PodDisruptionBudget's name.
    #[serde(default)]
    pub name: String,
}

impl FederationMember {
    /// The member with its namespace defaulted to `namespace`.
    pub fn resolved(&self, namespace: &str) -> FederationMember {
        FederationMember {
            cluster: self.cluster.clone(),
            namespace: if self.namespace.is_empty() {
                namespace.to_string()
            } else {
                self.namespace.clone()
            },
            name: self.name.clone(),
        }
    }
}

impl std::fmt::Display for FederationMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cluster = if self.cluster.is_empty() {
            "(this cluster)"
        } else {
            &self.cluster
        };
        write!(f, "{cluster}/{}/{}", self.namespace, self.name)
    }
}

/// What the controller knows of a member.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemberState {
    /// Read recently, its status current with its spec.
    Observed,
    /// Not confirmed within the staleness bound, or its status is behind
    /// its generation: counted 0 healthy.
    Stale,
    /// Its cluster cannot be reached (or is not known): counted 0 healthy.
    #[default]
    Unreachable,
    /// Its cluster answers that it does not exist: counted 0 healthy.
    NotFound,
}

/// One member's entry in the status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberStatus {
    /// The member's cluster (empty: this cluster).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    /// The member's namespace.
    #[serde(default)]
    pub namespace: String,
    /// The member's name.
    #[serde(default)]
    pub name: String,
    /// Observed, Stale, Unreachable or NotFound.
    #[serde(default)]
    pub state: MemberState,
    /// Healthy pods counted for it (0 unless Observed).
    #[serde(default)]
    pub current_healthy: i32,
    /// Its expected pods (the last known count when not Observed).
    #[serde(default)]
    pub expected_pods: i32,
    /// When it was last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_observed: Option<Time>,
    /// Why it is not Observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The status of a [`DistributedPodDisruptionBudget`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DistributedPodDisruptionBudgetStatus {
    /// The generation this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Pods expected over the whole federation.
    #[serde(default)]
    pub expected_pods: i32,
    /// Healthy pods the federation must keep.
    #[serde(default)]
    pub desired_healthy: i32,
    /// Healthy pods of the federation (unobserved members count 0).
    #[serde(default)]
    pub current_healthy: i32,
    /// Disruptions of this cluster's pods allowed now.
    #[serde(default)]
    pub disruptions_allowed: i32,
    /// `observed/total`, e.g. `4/4`.
    #[serde(default)]
    pub members_observed: String,
    /// One entry per member, in the spec's order.
    #[serde(default)]
    pub members: Vec<MemberStatus>,
    /// DisruptionAllowed, MembersObserved, ChildSynced, FederationValid, OverlappingBudget.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
