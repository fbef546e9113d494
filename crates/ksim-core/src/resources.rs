//! A pod's effective resource requests as kube-scheduler computes them
//! (upstream `resourcehelper.PodRequests`): the sum of the app containers,
//! raised to the largest init container (each init container counted with
//! the sidecars — init containers with `restartPolicy: Always` — started
//! before it, sidecars also adding to the running total), plus `overhead`.
//! Also the resource-name classes (native, extended, hugepages, scalar),
//! the [`Resource`] accounting type and whether a node has room for a pod
//! ([`insufficient_resources`]).

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

/// The pod's requests with the default options and with
/// [`PodResourcesOptions::non_zero`] (what the scheduler accounts and what
/// it scores with). The second is `None` when it is the first: when every
/// container, init containers included, requests both cpu and memory, no
/// default fills in anything, so the pod is added up once.
pub fn pod_requests_and_non_zero(pod: &Pod) -> (ResourceList, Option<ResourceList>) {
    let requests = pod_requests(pod, &PodResourcesOptions::default());
    let says_both = |container: &Container| {
        container
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .is_some_and(|r| r.contains_key(RESOURCE_CPU) && r.contains_key(RESOURCE_MEMORY))
    };
    let all_say_both = pod.spec.as_ref().is_none_or(|spec| {
        spec.containers.iter().all(says_both)
            && spec.init_containers.iter().flatten().all(says_both)
    });
    if all_say_both {
        return (requests, None);
    }
    let non_zero = pod_requests(pod, &PodResourcesOptions::non_zero());
    (requests, Some(non_zero))
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

/// Resource amounts as the scheduler and the descheduler account them
/// (upstream `framework.Resource`): cpu in milli-cpu, the rest in units.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resource {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    pub allowed_pod_number: i64,
    /// Extended, hugepages and attachable-volumes resources.
    pub scalar_resources: BTreeMap<String, i64>,
}

impl Resource {
    /// From a resource list: cpu in milli-cpu, the rest in units; names that
    /// are neither native nor scalar are ignored.
    pub fn from_list(list: &ResourceList) -> Self {
        let mut resource = Resource::default();
        for (name, quantity) in list {
            match name.as_str() {
                RESOURCE_CPU => resource.milli_cpu = quantity.milli_value(),
                RESOURCE_MEMORY => resource.memory = quantity.value(),
                RESOURCE_EPHEMERAL_STORAGE => resource.ephemeral_storage = quantity.value(),
                RESOURCE_PODS => resource.allowed_pod_number = quantity.value(),
                other if is_scalar_resource(other) => {
                    resource
                        .scalar_resources
                        .insert(other.to_string(), quantity.value());
                }
                _ => {}
            }
        }
        resource
    }

    /// Adds `other` in.
    pub fn add(&mut self, other: &Resource) {
        self.milli_cpu = self.milli_cpu.saturating_add(other.milli_cpu);
        self.memory = self.memory.saturating_add(other.memory);
        self.ephemeral_storage = self
            .ephemeral_storage
            .saturating_add(other.ephemeral_storage);
        self.allowed_pod_number = self
            .allowed_pod_number
            .saturating_add(other.allowed_pod_number);
        for (name, value) in &other.scalar_resources {
            let entry = self.scalar_resources.entry(name.clone()).or_default();
            *entry = entry.saturating_add(*value);
        }
    }

    /// Takes `other` out.
    pub fn subtract(&mut self, other: &Resource) {
        self.milli_cpu = self.milli_cpu.saturating_sub(other.milli_cpu);
        self.memory = self.memory.saturating_sub(other.memory);
        self.ephemeral_storage = self
            .ephemeral_storage
            .saturating_sub(other.ephemeral_storage);
        self.allowed_pod_number = self
            .allowed_pod_number
            .saturating_sub(other.allowed_pod_number);
        for (name, value) in &other.scalar_resources {
            let entry = self.scalar_resources.entry(name.clone()).or_default();
            *entry = entry.saturating_sub(*value);
        }
    }

    /// The amount of a resource by name (cpu in milli-cpu).
    pub fn get(&self, name: &str) -> i64 {
        match name {
            RESOURCE_CPU => self.milli_cpu,
            RESOURCE_MEMORY => self.memory,
            RESOURCE_EPHEMERAL_STORAGE => self.ephemeral_storage,
            RESOURCE_PODS => self.allowed_pod_number,
            other => self.scalar_resources.get(other).copied().unwrap_or(0),
        }
    }
}

/// Whether a node has room for a pod's requests (upstream noderesources
/// `fitsRequest`, which the descheduler's `NodeFit` follows too): one more
/// pod within the node's `pods`, and for cpu, memory, ephemeral-storage and
/// each scalar resource the pod asks for (and `ignored` does not skip),
/// the request within what the node's pods leave of its allocatable.
/// Returns what the node lacks, pods first.
pub fn insufficient_resources(
    request: &Resource,
    allocatable: &Resource,
    requested: &Resource,
    pods_on_node: i64,
    ignored: impl Fn(&str) -> bool,
) -> Vec<InsufficientResource> {
    let mut insufficient = Vec::new();
    if pods_on_node + 1 > allocatable.allowed_pod_number {
        insufficient.push(InsufficientResource {
            resource_name: RESOURCE_PODS.to_string(),
            reason: "Too many pods".to_string(),
            requested: 1,
            used: pods_on_node,
            capacity: allocatable.allowed_pod_number,
            unresolvable: false,
        });
    }
    if request.milli_cpu == 0
        && request.memory == 0
        && request.ephemeral_storage == 0
        && request.scalar_resources.is_empty()
    {
        return insufficient;
    }
    let mut check = |name: &str| {
        let (wanted, capacity, used) = (
            request.get(name),
            allocatable.get(name),
            requested.get(name),
        );
        if wanted > 0 && wanted > capacity.saturating_sub(used) {
            insufficient.push(InsufficientResource {
                resource_name: name.to_string(),
                reason: format!("Insufficient {name}"),
                requested: wanted,
                used,
                capacity,
                unresolvable: wanted > capacity,
            });
        }
    };
    for name in [RESOURCE_CPU, RESOURCE_MEMORY, RESOURCE_EPHEMERAL_STORAGE] {
        check(name);
    }
    for name in request.scalar_resources.keys() {
        if !ignored(name) {
            check(name);
        }
    }
    insufficient
}

/// One resource a node lacks for a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsufficientResource {
    /// The resource's name (`pods` for the pod count).
    pub resource_name: String,
    /// `Insufficient cpu`, `Too many pods`.
    pub reason: String,
    /// What the pod asks for (cpu in milli-cpu).
    pub requested: i64,
    /// What the node's pods take.
    pub used: i64,
    /// The node's allocatable amount.
    pub capacity: i64,
    /// The request exceeds the node's whole allocatable: no eviction or
    /// preemption can help.
    pub unresolvable: bool,
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
    fn requests_and_non_zero_requests_at_once_are_the_two_computations() {
        let both = [("cpu", "1"), ("memory", "1Gi")];
        let cases = [
            (
                "every container says both",
                vec![container(&both, false)],
                vec![container(&both, true)],
                true,
            ),
            ("no requests", vec![container(&[], false)], vec![], false),
            (
                "cpu only",
                vec![container(&both, false), container(&[("cpu", "1")], false)],
                vec![],
                false,
            ),
            (
                "an init container says memory only",
                vec![container(&both, false)],
                vec![container(&[("memory", "1")], false)],
                false,
            ),
            (
                "zero is said",
                vec![container(&[("cpu", "0"), ("memory", "0")], false)],
                vec![],
                true,
            ),
        ];
        for (name, containers, init, once) in cases {
            let p = pod(containers, init, &[("cpu", "10m")]);
            let (requests, non_zero) = pod_requests_and_non_zero(&p);
            assert_eq!(
                requests,
                pod_requests(&p, &PodResourcesOptions::default()),
                "{name}"
            );
            assert_eq!(non_zero.is_none(), once, "{name}");
            assert_eq!(
                non_zero.as_ref().unwrap_or(&requests),
                &pod_requests(&p, &PodResourcesOptions::non_zero()),
                "{name}"
            );
        }
        let no_spec = Pod::default();
        assert_eq!(
            pod_requests_and_non_zero(&no_spec),
            (ResourceList::new(), None)
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

    #[test]
    fn insufficient_resources_names_what_a_node_lacks_pods_first() {
        let list = |pairs: &[(&str, &str)]| -> ResourceList {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), Quantity::parse(v).expect("a quantity")))
                .collect()
        };
        let allocatable = Resource::from_list(&list(&[
            ("cpu", "2"),
            ("memory", "1Gi"),
            ("pods", "2"),
            ("example.com/gpu", "1"),
        ]));
        let requested = Resource::from_list(&list(&[("cpu", "1500m"), ("memory", "512Mi")]));
        let names = |request: &[(&str, &str)], pods: i64, ignored: &[&str]| -> Vec<String> {
            insufficient_resources(
                &Resource::from_list(&list(request)),
                &allocatable,
                &requested,
                pods,
                |name| ignored.contains(&name),
            )
            .into_iter()
            .map(|i| i.reason)
            .collect()
        };
        assert!(names(&[("cpu", "500m"), ("memory", "512Mi")], 1, &[]).is_empty());
        assert_eq!(names(&[("cpu", "501m")], 1, &[]), ["Insufficient cpu"]);
        assert_eq!(
            names(&[("cpu", "1"), ("example.com/gpu", "2")], 2, &[]),
            [
                "Too many pods",
                "Insufficient cpu",
                "Insufficient example.com/gpu"
            ]
        );
        assert!(names(&[("example.com/gpu", "2")], 1, &["example.com/gpu"]).is_empty());
        // A pod that asks for nothing needs a pod slot only.
        assert_eq!(names(&[], 2, &[]), ["Too many pods"]);
        let whole = insufficient_resources(
            &Resource::from_list(&list(&[("cpu", "3")])),
            &allocatable,
            &requested,
            0,
            |_| false,
        );
        assert!(whole[0].unresolvable);
    }
}
