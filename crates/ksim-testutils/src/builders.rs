//! Builders of nodes and pods for tests: `node("n").cpu("4").label(..).obj()`,
//! `pod("p").cpu("1").node("n").obj()`, with selectors, taints,
//! tolerations, affinity terms, topology spread constraints, owners,
//! images, priority classes, scheduler names, phases and conditions, as
//! k8s-openapi values (no server needed; [`crate::in_process`] creates
//! them on a server).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerImage, ContainerPort, Node, NodeAddress, NodeAffinity,
    NodeCondition, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, NodeSpec, NodeStatus,
    PersistentVolumeClaimVolumeSource, Pod, PodAffinity, PodAffinityTerm, PodAntiAffinity,
    PodCondition, PodSpec, PodStatus, ResourceRequirements, Taint, Toleration,
    TopologySpreadConstraint, Volume, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};

pub struct NodeBuilder(Node);

pub fn node(name: &str) -> NodeBuilder {
    NodeBuilder(Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(BTreeMap::from([(
                "kubernetes.io/hostname".to_string(),
                name.to_string(),
            )])),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            allocatable: Some(BTreeMap::from([(
                "pods".to_string(),
                Quantity("110".to_string()),
            )])),
            ..Default::default()
        }),
    })
}

/// Sets `key` to `value` in an optional map, creating the map.
fn insert<T>(map: &mut Option<BTreeMap<String, T>>, key: &str, value: T) {
    map.get_or_insert_with(BTreeMap::new)
        .insert(key.to_string(), value);
}

/// Appends `item` to an optional list, creating the list.
fn push<T>(list: &mut Option<Vec<T>>, item: T) {
    list.get_or_insert_with(Vec::new).push(item);
}

fn quantity(value: &str) -> Quantity {
    Quantity(value.to_string())
}

impl NodeBuilder {
    fn spec(&mut self) -> &mut NodeSpec {
        self.0.spec.get_or_insert_with(NodeSpec::default)
    }
    fn status(&mut self) -> &mut NodeStatus {
        self.0.status.get_or_insert_with(NodeStatus::default)
    }
    /// `status.allocatable[name]`.
    pub fn capacity(mut self, name: &str, value: &str) -> Self {
        insert(&mut self.status().allocatable, name, quantity(value));
        self
    }
    /// `status.capacity[name]` (what [`NodeBuilder::capacity`] sets is
    /// the allocatable amount).
    pub fn total_capacity(mut self, name: &str, value: &str) -> Self {
        insert(&mut self.status().capacity, name, quantity(value));
        self
    }
    pub fn cpu(self, value: &str) -> Self {
        self.capacity("cpu", value)
    }
    pub fn memory(self, value: &str) -> Self {
        self.capacity("memory", value)
    }
    pub fn pods(self, value: &str) -> Self {
        self.capacity("pods", value)
    }
    pub fn label(mut self, key: &str, value: &str) -> Self {
        insert(&mut self.0.metadata.labels, key, value.to_string());
        self
    }
    pub fn without_label(mut self, key: &str) -> Self {
        if let Some(labels) = self.0.metadata.labels.as_mut() {
            labels.remove(key);
        }
        self
    }
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        insert(&mut self.0.metadata.annotations, key, value.to_string());
        self
    }
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        let taint = Taint {
            key: key.to_string(),
            value: (!value.is_empty()).then(|| value.to_string()),
            effect: effect.to_string(),
            time_added: None,
        };
        push(&mut self.spec().taints, taint);
        self
    }
    pub fn unschedulable(mut self) -> Self {
        self.spec().unschedulable = Some(true);
        self
    }
    pub fn pod_cidr(mut self, cidr: &str) -> Self {
        self.spec().pod_cidr = Some(cidr.to_string());
        self
    }
    pub fn image(mut self, names: &[&str], size: i64) -> Self {
        let image = ContainerImage {
            names: Some(names.iter().map(|n| n.to_string()).collect()),
            size_bytes: Some(size),
        };
        push(&mut self.status().images, image);
        self
    }
    /// A status address (`InternalIP`, `Hostname`...).
    pub fn address(mut self, type_: &str, address: &str) -> Self {
        let address = NodeAddress {
            type_: type_.to_string(),
            address: address.to_string(),
        };
        push(&mut self.status().addresses, address);
        self
    }
    /// A status condition (`Ready`, `MemoryPressure`...).
    pub fn condition(mut self, type_: &str, status: &str) -> Self {
        let condition = NodeCondition {
            type_: type_.to_string(),
            status: status.to_string(),
            ..Default::default()
        };
        push(&mut self.status().conditions, condition);
        self
    }
    /// `Ready=True`.
    pub fn ready(self) -> Self {
        self.condition("Ready", "True")
    }
    pub fn obj(self) -> Node {
        self.0
    }
}

pub struct PodBuilder(Pod);

pub fn pod(name: &str) -> PodBuilder {
    PodBuilder(Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".to_string(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    })
}

pub fn selector(labels: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        match_expressions: None,
    }
}

pub fn affinity_term(labels: &[(&str, &str)], topology_key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(selector(labels)),
        topology_key: topology_key.to_string(),
        ..Default::default()
    }
}

impl PodBuilder {
    fn spec(&mut self) -> &mut PodSpec {
        self.0.spec.get_or_insert_with(PodSpec::default)
    }
    fn affinity(&mut self) -> &mut Affinity {
        self.spec().affinity.get_or_insert_with(Affinity::default)
    }
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.0.metadata.namespace = Some(namespace.to_string());
        self
    }
    pub fn label(mut self, key: &str, value: &str) -> Self {
        insert(&mut self.0.metadata.labels, key, value.to_string());
        self
    }
    pub fn request(mut self, name: &str, value: &str) -> Self {
        let container = &mut self.spec().containers[0];
        container
            .resources
            .get_or_insert_with(ResourceRequirements::default)
            .requests
            .get_or_insert_with(BTreeMap::new)
            .insert(name.to_string(), Quantity(value.to_string()));
        self
    }
    pub fn cpu(self, value: &str) -> Self {
        self.request("cpu", value)
    }
    pub fn memory(self, value: &str) -> Self {
        self.request("memory", value)
    }
    pub fn container_image(mut self, image: &str) -> Self {
        self.spec().containers.push(Container {
            name: format!("c{image}"),
            image: Some(image.to_string()),
            ..Default::default()
        });
        self
    }
    pub fn init_container(mut self, cpu: &str, sidecar: bool) -> Self {
        self.spec()
            .init_containers
            .get_or_insert_with(Vec::new)
            .push(Container {
                name: "init".to_string(),
                restart_policy: sidecar.then(|| "Always".to_string()),
                resources: Some(ResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "cpu".to_string(),
                        Quantity(cpu.to_string()),
                    )])),
                    ..Default::default()
                }),
                ..Default::default()
            });
        self
    }
    pub fn overhead(mut self, name: &str, value: &str) -> Self {
        insert(&mut self.spec().overhead, name, quantity(value));
        self
    }
    pub fn node(mut self, node: &str) -> Self {
        self.spec().node_name = Some(node.to_string());
        self
    }
    pub fn priority(mut self, priority: i32) -> Self {
        self.spec().priority = Some(priority);
        self
    }
    pub fn host_port(mut self, ip: &str, protocol: &str, port: i32) -> Self {
        self.spec().containers[0]
            .ports
            .get_or_insert_with(Vec::new)
            .push(ContainerPort {
                container_port: port,
                host_port: Some(port),
                host_ip: (!ip.is_empty()).then(|| ip.to_string()),
                protocol: (!protocol.is_empty()).then(|| protocol.to_string()),
                ..Default::default()
            });
        self
    }
    pub fn toleration(mut self, key: &str, operator: &str, value: &str, effect: &str) -> Self {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        self.spec()
            .tolerations
            .get_or_insert_with(Vec::new)
            .push(Toleration {
                key: some(key),
                operator: some(operator),
                value: some(value),
                effect: some(effect),
                toleration_seconds: None,
            });
        self
    }
    /// Tolerates the NoExecute taint `key` (any value) for `seconds`.
    pub fn toleration_seconds(mut self, key: &str, seconds: i64) -> Self {
        let toleration = Toleration {
            key: Some(key.to_string()),
            operator: Some("Exists".to_string()),
            effect: Some("NoExecute".to_string()),
            toleration_seconds: Some(seconds),
            value: None,
        };
        push(&mut self.spec().tolerations, toleration);
        self
    }
    pub fn node_selector(mut self, key: &str, value: &str) -> Self {
        insert(&mut self.spec().node_selector, key, value.to_string());
        self
    }
    pub fn node_affinity_in(mut self, key: &str, values: &[&str]) -> Self {
        self.required_node_term(NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: key.to_string(),
                operator: "In".to_string(),
                values: Some(values.iter().map(|v| v.to_string()).collect()),
            }]),
            match_fields: None,
        });
        self
    }
    pub fn required_node_term(&mut self, term: NodeSelectorTerm) {
        self.affinity()
            .node_affinity
            .get_or_insert_with(NodeAffinity::default)
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(|| NodeSelector {
                node_selector_terms: Vec::new(),
            })
            .node_selector_terms
            .push(term);
    }
    pub fn spread(self, max_skew: i32, key: &str, when: &str, labels: &[(&str, &str)]) -> Self {
        self.spread_constraint(TopologySpreadConstraint {
            max_skew,
            topology_key: key.to_string(),
            when_unsatisfiable: when.to_string(),
            label_selector: Some(selector(labels)),
            ..Default::default()
        })
    }
    pub fn spread_constraint(mut self, constraint: TopologySpreadConstraint) -> Self {
        self.spec()
            .topology_spread_constraints
            .get_or_insert_with(Vec::new)
            .push(constraint);
        self
    }
    pub fn pod_affinity(mut self, term: PodAffinityTerm) -> Self {
        self.affinity()
            .pod_affinity
            .get_or_insert_with(PodAffinity::default)
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(term);
        self
    }
    pub fn pod_anti_affinity(mut self, term: PodAffinityTerm) -> Self {
        self.affinity()
            .pod_anti_affinity
            .get_or_insert_with(PodAntiAffinity::default)
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(term);
        self
    }
    pub fn preferred_pod_affinity(mut self, weight: i32, term: PodAffinityTerm) -> Self {
        self.affinity()
            .pod_affinity
            .get_or_insert_with(PodAffinity::default)
            .preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(WeightedPodAffinityTerm {
                weight,
                pod_affinity_term: term,
            });
        self
    }
    pub fn preferred_pod_anti_affinity(mut self, weight: i32, term: PodAffinityTerm) -> Self {
        self.affinity()
            .pod_anti_affinity
            .get_or_insert_with(PodAntiAffinity::default)
            .preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(WeightedPodAffinityTerm {
                weight,
                pod_affinity_term: term,
            });
        self
    }
    pub fn finalizer(mut self, finalizer: &str) -> Self {
        push(&mut self.0.metadata.finalizers, finalizer.to_string());
        self
    }
    pub fn uid(mut self, uid: &str) -> Self {
        self.0.metadata.uid = Some(uid.to_string());
        self
    }
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        insert(&mut self.0.metadata.annotations, key, value.to_string());
        self
    }
    /// The controller owner reference (`controller: true`).
    pub fn owner(self, api_version: &str, kind: &str, name: &str, uid: &str) -> Self {
        self.owner_reference(OwnerReference {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            name: name.to_string(),
            uid: uid.to_string(),
            controller: Some(true),
            block_owner_deletion: None,
        })
    }
    pub fn owner_reference(mut self, reference: OwnerReference) -> Self {
        push(&mut self.0.metadata.owner_references, reference);
        self
    }
    pub fn created_at(mut self, at: k8s_openapi::jiff::Timestamp) -> Self {
        self.0.metadata.creation_timestamp = Some(Time(at));
        self
    }
    /// The first container's image (the API server requires one).
    pub fn image(mut self, image: &str) -> Self {
        self.spec().containers[0].image = Some(image.to_string());
        self
    }
    pub fn scheduler_name(mut self, name: &str) -> Self {
        self.spec().scheduler_name = Some(name.to_string());
        self
    }
    pub fn priority_class_name(mut self, name: &str) -> Self {
        self.spec().priority_class_name = Some(name.to_string());
        self
    }
    /// A volume `name` mounting the PersistentVolumeClaim `claim`.
    pub fn claim_volume(mut self, name: &str, claim: &str) -> Self {
        self.spec()
            .volumes
            .get_or_insert_with(Vec::new)
            .push(Volume {
                name: name.to_string(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim.to_string(),
                    read_only: None,
                }),
                ..Default::default()
            });
        self
    }
    fn status(&mut self) -> &mut PodStatus {
        self.0.status.get_or_insert_with(PodStatus::default)
    }
    pub fn phase(mut self, phase: &str) -> Self {
        self.status().phase = Some(phase.to_string());
        self
    }
    /// A status condition (`Ready`, `PodScheduled`...).
    pub fn condition(mut self, type_: &str, status: &str) -> Self {
        let condition = PodCondition {
            type_: type_.to_string(),
            status: status.to_string(),
            ..Default::default()
        };
        push(&mut self.status().conditions, condition);
        self
    }
    /// Phase `Running` and `Ready=True`, as the kubelet reports a started pod.
    pub fn running(self) -> Self {
        self.phase("Running").condition("Ready", "True")
    }
    pub fn obj(self) -> Pod {
        self.0
    }
}

impl From<Pod> for PodBuilder {
    fn from(pod: Pod) -> Self {
        PodBuilder(pod)
    }
}
