//! A pod's quality-of-service class (upstream `ComputePodQOS` and
//! `GetPodQOS` in pkg/apis/core/helper/qos).
//!
//! Only cpu and memory count. Per resource, the positive requests and the
//! positive limits of every app and init container are summed. A pod with
//! neither is BestEffort; it is Guaranteed when every container limits both
//! cpu and memory and the summed requests equal the summed limits resource by
//! resource; otherwise Burstable. Requests that are absent are not filled in
//! from limits here: the API server defaults them before the class is
//! computed, as upstream does. Pod-level `spec.resources` (the alpha
//! PodLevelResources gate, off by default in v1.33) is not considered.
//!
//! One accumulator ([`QosAccumulator`]) serves typed pods ([`compute_pod_qos`],
//! [`pod_qos`]) and the API server's raw JSON ([`compute_pod_qos_json`]), so
//! the two can not disagree.

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use serde_json::Value;

use crate::quantity::{Quantity, parse_or_zero};
use crate::resources::{RESOURCE_CPU, RESOURCE_MEMORY};

/// A pod's QoS class, ordered from the first to be evicted to the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QosClass {
    /// No container requests or limits cpu or memory.
    BestEffort,
    /// Neither best effort nor guaranteed.
    Burstable,
    /// Every container limits cpu and memory, and requests equal limits.
    Guaranteed,
}

impl QosClass {
    /// The name Kubernetes uses in `status.qosClass`.
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::BestEffort => "BestEffort",
            QosClass::Burstable => "Burstable",
            QosClass::Guaranteed => "Guaranteed",
        }
    }

    /// The class named by a `status.qosClass` value, if it names one.
    pub fn from_name(name: &str) -> Option<QosClass> {
        match name {
            "BestEffort" => Some(QosClass::BestEffort),
            "Burstable" => Some(QosClass::Burstable),
            "Guaranteed" => Some(QosClass::Guaranteed),
            _ => None,
        }
    }
}

/// The index of a resource that counts for QoS (cpu, memory).
fn qos_slot(name: &str) -> Option<usize> {
    match name {
        RESOURCE_CPU => Some(0),
        RESOURCE_MEMORY => Some(1),
        _ => None,
    }
}

/// Sums containers' cpu and memory requests and limits and tells the class.
/// Allocation free.
#[derive(Debug, Clone, Copy)]
pub struct QosAccumulator {
    requests: [Option<Quantity>; 2],
    limits: [Option<Quantity>; 2],
    guaranteed: bool,
}

impl Default for QosAccumulator {
    fn default() -> Self {
        QosAccumulator {
            requests: [None; 2],
            limits: [None; 2],
            guaranteed: true,
        }
    }
}

impl QosAccumulator {
    /// An accumulator that has seen no container.
    pub fn new() -> Self {
        QosAccumulator::default()
    }

    /// Adds one container's requests and limits (resource name, amount).
    pub fn add_container<'a>(
        &mut self,
        requests: impl IntoIterator<Item = (&'a str, Quantity)>,
        limits: impl IntoIterator<Item = (&'a str, Quantity)>,
    ) {
        for (name, quantity) in requests {
            if let Some(slot) = qos_slot(name)
                && quantity > Quantity::ZERO
            {
                let sum = self.requests[slot].get_or_insert(Quantity::ZERO);
                *sum = sum.saturating_add(quantity);
            }
        }
        let mut found = [false; 2];
        for (name, quantity) in limits {
            if let Some(slot) = qos_slot(name)
                && quantity > Quantity::ZERO
            {
                found[slot] = true;
                let sum = self.limits[slot].get_or_insert(Quantity::ZERO);
                *sum = sum.saturating_add(quantity);
            }
        }
        if !(found[0] && found[1]) {
            self.guaranteed = false;
        }
    }

    /// The class of the containers seen so far.
    pub fn class(&self) -> QosClass {
        if self.requests.iter().all(Option::is_none) && self.limits.iter().all(Option::is_none) {
            return QosClass::BestEffort;
        }
        // Every request has an equal limit, and there are as many limits as
        // requests (so no limit lacks a request).
        let requests_match = self
            .requests
            .iter()
            .zip(&self.limits)
            .all(|(request, limit)| request.is_none() || request == limit);
        let same_count =
            self.requests.iter().flatten().count() == self.limits.iter().flatten().count();
        if self.guaranteed && requests_match && same_count {
            QosClass::Guaranteed
        } else {
            QosClass::Burstable
        }
    }

    fn add_typed(&mut self, container: &Container) {
        let resources = container.resources.as_ref();
        let requests = resources.and_then(|r| r.requests.as_ref());
        let limits = resources.and_then(|r| r.limits.as_ref());
        self.add_container(
            requests
                .into_iter()
                .flatten()
                .map(|(name, quantity)| (name.as_str(), parse_or_zero(quantity))),
            limits
                .into_iter()
                .flatten()
                .map(|(name, quantity)| (name.as_str(), parse_or_zero(quantity))),
        );
    }
}

/// The class computed from the spec (upstream `ComputePodQOS`).
pub fn compute_pod_qos(spec: &PodSpec) -> QosClass {
    let mut accumulator = QosAccumulator::new();
    for container in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        accumulator.add_typed(container);
    }
    accumulator.class()
}

/// The pod's class (upstream `GetPodQOS`): `status.qosClass` when it names
/// one, else computed from the spec.
pub fn pod_qos(pod: &Pod) -> QosClass {
    if let Some(class) = pod
        .status
        .as_ref()
        .and_then(|status| status.qos_class.as_deref())
        .and_then(QosClass::from_name)
    {
        return class;
    }
    pod.spec
        .as_ref()
        .map_or(QosClass::BestEffort, compute_pod_qos)
}

/// [`compute_pod_qos`] over a pod as JSON (the API server's form).
/// Quantities that are not strings or do not parse count as zero.
pub fn compute_pod_qos_json(pod: &Value) -> QosClass {
    fn quantities(map: &Value) -> impl Iterator<Item = (&str, Quantity)> {
        map.as_object().into_iter().flatten().map(|(name, value)| {
            let quantity = value
                .as_str()
                .and_then(|text| Quantity::parse(text).ok())
                .unwrap_or(Quantity::ZERO);
            (name.as_str(), quantity)
        })
    }
    let spec = &pod["spec"];
    let mut accumulator = QosAccumulator::new();
    for container in ["containers", "initContainers"]
        .iter()
        .filter_map(|key| spec[key].as_array())
        .flatten()
    {
        let resources = &container["resources"];
        accumulator.add_container(
            quantities(&resources["requests"]),
            quantities(&resources["limits"]),
        );
    }
    accumulator.class()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec_json(containers: Value, init: Value) -> Value {
        json!({"spec": {"containers": containers, "initContainers": init}})
    }

    /// Both entry points, checked to agree.
    fn class(pod: &Value) -> QosClass {
        let from_json = compute_pod_qos_json(pod);
        let typed: Pod = serde_json::from_value(pod.clone()).expect("a pod");
        assert_eq!(pod_qos(&typed), from_json, "{pod}");
        from_json
    }

    fn container(requests: Value, limits: Value) -> Value {
        json!({"name": "c", "resources": {"requests": requests, "limits": limits}})
    }

    #[test]
    fn no_cpu_or_memory_is_best_effort() {
        assert_eq!(
            class(&spec_json(json!([{"name": "c"}]), json!([]))),
            QosClass::BestEffort
        );
        // The API server's old copy called this Burstable: ephemeral-storage
        // and extended resources do not count.
        let storage_only = container(
            json!({"ephemeral-storage": "1Gi", "example.com/gpu": "1"}),
            json!({"ephemeral-storage": "1Gi", "example.com/gpu": "1"}),
        );
        assert_eq!(
            class(&spec_json(json!([storage_only]), json!([]))),
            QosClass::BestEffort
        );
        // Zero amounts do not count either.
        let zero = container(json!({"cpu": "0"}), json!({"memory": "0"}));
        assert_eq!(
            class(&spec_json(json!([zero]), json!([]))),
            QosClass::BestEffort
        );
    }

    #[test]
    fn equal_quantities_in_other_spellings_are_guaranteed() {
        // The old API server copy compared the strings "1" and "1000m".
        let c = container(
            json!({"cpu": "1000m", "memory": "1Gi", "ephemeral-storage": "1Gi"}),
            json!({"cpu": "1", "memory": "1073741824"}),
        );
        assert_eq!(
            class(&spec_json(json!([c]), json!([]))),
            QosClass::Guaranteed
        );
    }

    #[test]
    fn sums_over_containers_decide() {
        let full = container(
            json!({"cpu": "1", "memory": "1Gi"}),
            json!({"cpu": "1", "memory": "1Gi"}),
        );
        let init = container(
            json!({"cpu": "2", "memory": "1Gi"}),
            json!({"cpu": "2", "memory": "1Gi"}),
        );
        assert_eq!(
            class(&spec_json(json!([full.clone()]), json!([init]))),
            QosClass::Guaranteed
        );
        // A container without a memory limit breaks Guaranteed.
        let partial = container(json!({"cpu": "1"}), json!({"cpu": "1"}));
        assert_eq!(
            class(&spec_json(json!([full.clone(), partial]), json!([]))),
            QosClass::Burstable
        );
        // Requests below limits.
        let below = container(
            json!({"cpu": "500m", "memory": "1Gi"}),
            json!({"cpu": "1", "memory": "1Gi"}),
        );
        assert_eq!(
            class(&spec_json(json!([below]), json!([]))),
            QosClass::Burstable
        );
        // Limits without requests are not defaulted here.
        let limits_only = container(json!({}), json!({"cpu": "1", "memory": "1Gi"}));
        assert_eq!(
            class(&spec_json(json!([limits_only]), json!([]))),
            QosClass::Burstable
        );
        let requests_only = container(json!({"memory": "1Gi"}), json!({}));
        assert_eq!(
            class(&spec_json(json!([requests_only]), json!([]))),
            QosClass::Burstable
        );
    }

    #[test]
    fn the_status_class_wins_for_typed_pods() {
        let pod: Pod = serde_json::from_value(json!({
            "spec": {"containers": [{"name": "c"}]},
            "status": {"qosClass": "Guaranteed"}
        }))
        .expect("a pod");
        assert_eq!(pod_qos(&pod), QosClass::Guaranteed);
        assert_eq!(QosClass::from_name("x"), None);
        assert_eq!(QosClass::Burstable.as_str(), "Burstable");
        assert!(
            QosClass::BestEffort < QosClass::Burstable
                && QosClass::Burstable < QosClass::Guaranteed
        );
    }
}
