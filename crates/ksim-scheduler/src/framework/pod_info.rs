//! `PodInfo`: a pod with what the scheduler derives from it once (parsed
//! affinity terms, requests, host ports), and the `Resource` accounting type.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm, WeightedPodAffinityTerm};
use ksim_core::resources::{RESOURCE_CPU, RESOURCE_MEMORY, pod_requests_and_non_zero};

pub use ksim_core::resources::Resource;

pub use ksim_core::pod_affinity::{pod_labels, pod_namespace};

/// A parsed pod (anti-)affinity term (upstream `framework.AffinityTerm`),
/// the one ksim-core parses for every component.
pub use ksim_core::pod_affinity::ParsedPodAffinityTerm as AffinityTerm;

/// A weighted affinity term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedAffinityTerm {
    pub term: AffinityTerm,
    pub weight: i32,
}

/// One host port a pod asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    /// `0.0.0.0` when unset.
    pub ip: String,
    /// `TCP` when unset.
    pub protocol: String,
    pub port: i32,
}

/// A pod and what the scheduler derives from it once.
#[derive(Debug, Clone)]
pub struct PodInfo {
    pub pod: Arc<Pod>,
    pub required_affinity_terms: Vec<AffinityTerm>,
    pub required_anti_affinity_terms: Vec<AffinityTerm>,
    pub preferred_affinity_terms: Vec<WeightedAffinityTerm>,
    pub preferred_anti_affinity_terms: Vec<WeightedAffinityTerm>,
    /// Effective requests, overhead included.
    pub requests: Resource,
    /// cpu with 100m for containers that do not say (for scoring).
    pub non_zero_milli_cpu: i64,
    /// memory with 200Mi for containers that do not say (for scoring).
    pub non_zero_memory: i64,
    pub host_ports: Vec<HostPort>,
}

fn parse_terms(
    pod: &Pod,
    terms: Option<&Vec<PodAffinityTerm>>,
) -> Result<Vec<AffinityTerm>, String> {
    terms
        .into_iter()
        .flatten()
        .map(|term| AffinityTerm::for_pod(term, pod).map_err(|e| e.to_string()))
        .collect()
}

fn parse_weighted(
    pod: &Pod,
    terms: Option<&Vec<WeightedPodAffinityTerm>>,
) -> Result<Vec<WeightedAffinityTerm>, String> {
    terms
        .into_iter()
        .flatten()
        .map(|weighted| {
            AffinityTerm::for_pod(&weighted.pod_affinity_term, pod)
                .map(|term| WeightedAffinityTerm {
                    term,
                    weight: weighted.weight,
                })
                .map_err(|e| e.to_string())
        })
        .collect()
}

impl PodInfo {
    /// Derives everything; an invalid affinity term is an error (upstream
    /// `NewPodInfo`).
    pub fn new(pod: Arc<Pod>) -> Result<Self, String> {
        let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
        let pod_affinity = affinity.and_then(|a| a.pod_affinity.as_ref());
        let anti_affinity = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
        let required_affinity_terms = parse_terms(
            &pod,
            pod_affinity.and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            }),
        )?;
        let required_anti_affinity_terms = parse_terms(
            &pod,
            anti_affinity.and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            }),
        )?;
        let preferred_affinity_terms = parse_weighted(
            &pod,
            pod_affinity.and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            }),
        )?;
        let preferred_anti_affinity_terms = parse_weighted(
            &pod,
            anti_affinity.and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            }),
        )?;
        let (requests, non_zero) = pod_requests_and_non_zero(&pod);
        let non_zero = non_zero.as_ref().unwrap_or(&requests);
        let non_zero_milli_cpu = non_zero
            .get(RESOURCE_CPU)
            .map(|q| q.milli_value())
            .unwrap_or(0);
        let non_zero_memory = non_zero
            .get(RESOURCE_MEMORY)
            .map(|q| q.value())
            .unwrap_or(0);
        let requests = Resource::from_list(&requests);
        let host_ports = host_ports(&pod);
        Ok(PodInfo {
            pod,
            required_affinity_terms,
            required_anti_affinity_terms,
            preferred_affinity_terms,
            preferred_anti_affinity_terms,
            requests,
            non_zero_milli_cpu,
            non_zero_memory,
            host_ports,
        })
    }

    /// Like [`PodInfo::new`], but an invalid term set is dropped instead of
    /// failing (for pods already bound, which the scheduler must account).
    pub fn new_lenient(pod: Arc<Pod>) -> Self {
        match PodInfo::new(pod.clone()) {
            Ok(info) => info,
            Err(_) => {
                let mut stripped = (*pod).clone();
                if let Some(spec) = stripped.spec.as_mut() {
                    spec.affinity = None;
                }
                let mut info = PodInfo::new(Arc::new(stripped)).unwrap_or_else(|_| PodInfo {
                    pod: pod.clone(),
                    required_affinity_terms: Vec::new(),
                    required_anti_affinity_terms: Vec::new(),
                    preferred_affinity_terms: Vec::new(),
                    preferred_anti_affinity_terms: Vec::new(),
                    requests: Resource::default(),
                    non_zero_milli_cpu: 0,
                    non_zero_memory: 0,
                    host_ports: Vec::new(),
                });
                info.pod = pod;
                info
            }
        }
    }

    /// Whether the pod has any pod affinity or anti-affinity.
    pub fn has_affinity(&self) -> bool {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.affinity.as_ref())
            .is_some_and(|a| a.pod_affinity.is_some() || a.pod_anti_affinity.is_some())
    }

    /// Namespace and name.
    pub fn key(&self) -> (&str, &str) {
        (
            pod_namespace(&self.pod),
            self.pod.metadata.name.as_deref().unwrap_or_default(),
        )
    }
}

/// The host ports of a pod's containers (init containers do not count, as upstream).
pub fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    spec.containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|port| {
            let host_port = port.host_port.filter(|p| *p > 0)?;
            Some(HostPort {
                ip: port
                    .host_ip
                    .clone()
                    .filter(|ip| !ip.is_empty())
                    .unwrap_or_else(|| "0.0.0.0".to_string()),
                protocol: port
                    .protocol
                    .clone()
                    .filter(|p| !p.is_empty())
                    .unwrap_or_else(|| "TCP".to_string()),
                port: host_port,
            })
        })
        .collect()
}
