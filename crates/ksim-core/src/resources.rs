//! A pod's effective resource requests as kube-scheduler computes them
//! (upstream `resourcehelper.PodRequests`): the sum of the app containers,
//! raised to the largest init container (each init container counted with
//! the sidecars — init containers with `restartPolicy: Always` — started
//! before it, sidecars also adding to the running total), plus `overhead`.
//! Also the resource-name classes (native, extended, hugepages, scalar).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::quantity::{Quantity, parse_or_zero};

/// Resource amounts by resource name.
pub type ResourceList = BTreeMap<String, Quantity>;

/// cpu.
pub const RESOURCE_CPU: &str = "cpu";
/// memory.
pub const RESOURCE_MEMORY: &str = "memory";
/// ephemeral-storage.
pub const RESOURCE_EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// pods (node capacity only).
pub const RESOURCE_PODS: &str = "pods";

/// The cpu the scheduler assumes for a container that requests none when
/// scoring (upstream `DefaultMilliCPURequest`), in milli-cpu.
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// The memory assumed likewise (upstream `DefaultMemoryRequest`), in bytes.
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// Options of [`pod_requests`].
#[derive(Debug, Clone, Default)]
pub struct PodResourcesOptions {
    /// Leave `spec.overhead` out.
    pub exclude_overhead: bool,
    /// Amounts used for a container that does not request a resource listed
    /// here at all (a request of zero stays zero).
    pub non_missing_container_requests: Option<ResourceList>,
}

impl PodResourcesOptions {
    /// The options the scheduler scores with: cpu 100m and memory 200Mi for
    /// containers that do not say.
    pub fn non_zero() -> Self {
        PodResourcesOptions {
            exclude_overhead: false,
            non_missing_container_requests: Some(ResourceList::from([
                (
                    RESOURCE_CPU.to_string(),
                    Quantity::from_milli(DEFAULT_MILLI_CPU_REQUEST),
                ),
                (
                    RESOURCE_MEMORY.to_string(),
                    Quantity::from_units(DEFAULT_MEMORY_REQUEST),
                ),
            ])),
        }
    }
}

/// Converts a k8s-openapi resource map (quantities that do not parse count as zero).
pub fn resource_list(
    map: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) -> ResourceList {
    map.iter()
        .map(|(name, quantity)| (name.clone(), parse_or_zero(quantity)))
        .collect()
}

fn container_requests(container: &Container, options: &PodResourcesOptions) -> ResourceList {
    let mut requests = container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .map(resource_list)
        .unwrap_or_default();
    if let Some(defaults) = &options.non_missing_container_requests {
        for (name, quantity) in defaults {
            requests.entry(name.clone()).or_insert(*quantity);
        }
    }
    requests
}

/// Adds `other` into `into`.
pub fn add_resource_list(into: &mut ResourceList, other: &ResourceList) {
    for (name, quantity) in other {
        let entry = into.entry(name.clone()).or_default();
        *entry = entry.saturating_add(*quantity);
    }
}

/// Raises each amount of `into` to the one in `other`.
pub fn max_resource_list(into: &mut ResourceList, other: &ResourceList) {
    for (name, quantity) in other {
        let entry = into.entry(name.clone()).or_insert(*quantity);
        if *quantity > *entry {
            *entry = *quantity;
        }
    }
}

/// Whether an init container is a sidecar (`restartPolicy: Always`).
pub fn is_restartable_init_container(container: &Container) -> bool {
    container.restart_policy.as_deref() == Some("Always")
}

/// The pod's effective requests (upstream `PodRequests`).
pub fn pod_requests(pod: &Pod, options: &PodResourcesOptions) -> ResourceList {
    let Some(spec) = pod.spec.as_ref() else {
        return ResourceList::new();
    };
    let mut requests = ResourceList::new();
    for container in &spec.containers {
        add_resource_list(&mut requests, &container_requests(container, options));
    }
    let mut sidecars = ResourceList::new();
    let mut init_peak = ResourceList::new();
    for container in spec.init_containers.iter().flatten() {
        let own = container_requests(container, options);
        let during = if is_restartable_init_container(container) {
            // A sidecar keeps running: it adds to the pod's total and to
            // every init container started after it.
            add_resource_list(&mut requests, &own);
            add_resource_list(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut during = own;
            add_resource_list(&mut during, &sidecars);
            during
        };
        max_resource_list(&mut init_peak, &during);
    }
    max_resource_list(&mut requests, &init_peak);
    if !options.exclude_overhead
        && let Some(overhead) = &spec.overhead
    {
        add_resource_list(&mut requests, &resource_list(overhead));
    }
    requests
}

/// Whether a name is in the `kubernetes.io/` namespace (no prefix counts as it).
pub fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// A hugepages resource (`hugepages-2Mi`).
pub fn is_hugepages_resource(name: &str) -> bool {
    name.starts_with("hugepages-")
}

/// An extended resource: outside `kubernetes.io/`, not a `requests.` quota name.
pub fn is_extended_resource(name: &str) -> bool {
    !is_native_resource(name) && !name.starts_with("requests.")
}

/// An attachable-volumes resource.
pub fn is_attachable_volumes_resource(name: &str) -> bool {
    name.starts_with("attachable-volumes-")
}

/// A resource the scheduler accounts as a plain integer count: extended,
/// hugepages or attachable volumes.
pub fn is_scalar_resource(name: &str) -> bool {
    is_extended_resource(name)
        || is_hugepages_resource(name)
        || is_attachable_volumes_resource(name)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

    use super::*;

    fn container(requests: &[(&str, &str)], restart_always: bool) -> Container {
        Container {
            name: "c".to_string(),
            restart_policy: restart_always.then(|| "Always".to_string()),
            resources: Some(ResourceRequirements {
                requests: Some(
                    requests
                        .iter()
                        .map(|(k, v)| (k.to_string(), K8sQuantity(v.to_string())))
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pod(containers: Vec<Container>, init: Vec<Container>, overhead: &[(&str, &str)]) -> Pod {
        Pod {
            spec: Some(PodSpec {
                containers,
                init_containers: Some(init),
                overhead: (!overhead.is_empty()).then(|| {
                    overhead
                        .iter()
                        .map(|(k, v)| (k.to_string(), K8sQuantity(v.to_string())))
                        .collect()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn cpu_memory(list: &ResourceList) -> (i64, i64) {
        (
            list.get(RESOURCE_CPU)
                .map(Quantity::milli_value)
                .unwrap_or(0),
            list.get(RESOURCE_MEMORY).map(Quantity::value).unwrap_or(0),
        )
    }

    #[test]
    fn pod_requests_as_kube_scheduler_computes_them() {
        let cases = [
            (
                "sum of containers",
                pod(
                    vec![
                        container(&[("cpu", "1"), ("memory", "1Gi")], false),
                        container(&[("cpu", "500m")], false),
                    ],
                    vec![],
                    &[],
                ),
                (1500, 1 << 30),
            ),
            (
                "init container larger than containers",
                pod(
                    vec![container(&[("cpu", "1")], false)],
                    vec![container(&[("cpu", "2"), ("memory", "1Ki")], false)],
                    &[],
                ),
                (2000, 1024),
            ),
            (
                "init containers do not add up",
                pod(
                    vec![container(&[("cpu", "1")], false)],
                    vec![
                        container(&[("cpu", "2")], false),
                        container(&[("cpu", "3")], false),
                    ],
                    &[],
                ),
                (3000, 0),
            ),
            (
                "overhead added",
                pod(
                    vec![container(&[("cpu", "1")], false)],
                    vec![],
                    &[("cpu", "250m"), ("memory", "10")],
                ),
                (1250, 10),
            ),
            (
                "sidecar adds to containers",
                pod(
                    vec![container(&[("cpu", "1")], false)],
                    vec![container(&[("cpu", "500m")], true)],
                    &[],
                ),
                (1500, 0),
            ),
            (
                "init after sidecar counts the sidecar",
                pod(
                    vec![container(&[("cpu", "1")], false)],
                    vec![
                        container(&[("cpu", "500m")], true),
                        container(&[("cpu", "2")], false),
                    ],
                    &[],
                ),
                (2500, 0),
            ),
            (
                "init before sidecar does not",
                pod(
                    vec![container(&[("cpu", "1")], false)],
                    vec![
                        container(&[("cpu", "2")], false),
                        container(&[("cpu", "500m")], true),
                    ],
                    &[],
                ),
                (2000, 0),
            ),
        ];
        for (name, pod, expected) in cases {
            assert_eq!(
                cpu_memory(&pod_requests(&pod, &PodResourcesOptions::default())),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn non_zero_defaults_fill_missing_requests_only() {
        let p = pod(
            vec![
                container(&[], false),
                container(&[("cpu", "0"), ("memory", "1Mi")], false),
            ],
            vec![],
            &[],
        );
        assert_eq!(
            cpu_memory(&pod_requests(&p, &PodResourcesOptions::non_zero())),
            (100, DEFAULT_MEMORY_REQUEST + (1 << 20))
        );
        assert_eq!(
            cpu_memory(&pod_requests(&p, &PodResourcesOptions::default())),
            (0, 1 << 20)
        );
    }

    #[test]
    fn resource_name_classes() {
        let cases = [
            ("cpu", false, false),
            ("example.com/gpu", true, true),
            ("kubernetes.io/foo", false, false),
            ("hugepages-2Mi", false, true),
            ("requests.example.com/x", false, false),
            ("attachable-volumes-aws-ebs", false, true),
        ];
        for (name, extended, scalar) in cases {
            assert_eq!(is_extended_resource(name), extended, "{name} extended");
            assert_eq!(is_scalar_resource(name), scalar, "{name} scalar");
        }
    }
}
