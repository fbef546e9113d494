//! Column definitions (`TableColumnDefinition`) of every built-in kind, in
//! kube-apiserver's order, with its names, types, formats and priorities.
//! Descriptions come from the field documentation of the built-in schemas,
//! as upstream takes them from the types' swagger docs.

use serde_json::{Value, json};

/// Where a column's description comes from.
#[derive(Debug, Clone, Copy)]
pub enum Description {
    /// The documentation of `field` in the schema definition `definition`.
    Field(&'static str, &'static str),
    /// A fixed text.
    Text(&'static str),
}

/// One column of a built-in kind's table.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    pub name: &'static str,
    pub kind: &'static str,
    pub format: &'static str,
    pub priority: i64,
    pub description: Description,
}

impl Column {
    /// The `TableColumnDefinition` JSON.
    pub fn to_json(self) -> Value {
        json!({
            "name": self.name,
            "type": self.kind,
            "format": self.format,
            "description": describe(self.description),
            "priority": self.priority,
        })
    }
}

/// Resolves a description to its text (`""` when the field is unknown).
pub fn describe(description: Description) -> String {
    match description {
        Description::Text(text) => text.to_string(),
        Description::Field(definition, field) => ksim_core::schema::definitions()
            .property(definition, field)
            .and_then(|schema| schema.get("description"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    }
}

const fn col(name: &'static str, kind: &'static str, description: Description) -> Column {
    Column {
        name,
        kind,
        format: "",
        priority: 0,
        description,
    }
}

const fn wide(name: &'static str, kind: &'static str, description: Description) -> Column {
    Column {
        name,
        kind,
        format: "",
        priority: 1,
        description,
    }
}

use Description::{Field, Text};

pub const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The `Name` column every kind starts with.
pub const NAME: Column = Column {
    name: "Name",
    kind: "string",
    format: "name",
    priority: 0,
    description: Field(OBJECT_META, "name"),
};
/// The `Age` column.
pub const AGE: Column = col("Age", "string", Field(OBJECT_META, "creationTimestamp"));
const CONTAINERS: Column = wide(
    "Containers",
    "string",
    Text("Names of each container in the template."),
);
const IMAGES: Column = wide(
    "Images",
    "string",
    Text("Images referenced by each container in the template."),
);

pub const POD: &[Column] = &[
    NAME,
    col(
        "Ready",
        "string",
        Text("The aggregate readiness state of this pod for accepting traffic."),
    ),
    col(
        "Status",
        "string",
        Text("The aggregate status of the containers in this pod."),
    ),
    col(
        "Restarts",
        "string",
        Text(
            "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
        ),
    ),
    AGE,
    wide(
        "IP",
        "string",
        Field("io.k8s.api.core.v1.PodStatus", "podIP"),
    ),
    wide(
        "Node",
        "string",
        Field("io.k8s.api.core.v1.PodSpec", "nodeName"),
    ),
    wide(
        "Nominated Node",
        "string",
        Field("io.k8s.api.core.v1.PodStatus", "nominatedNodeName"),
    ),
    wide(
        "Readiness Gates",
        "string",
        Field("io.k8s.api.core.v1.PodSpec", "readinessGates"),
    ),
];

pub const NODE: &[Column] = &[
    NAME,
    col("Status", "string", Text("The status of the node")),
    col("Roles", "string", Text("The roles of the node")),
    AGE,
    col(
        "Version",
        "string",
        Field("io.k8s.api.core.v1.NodeSystemInfo", "kubeletVersion"),
    ),
    wide(
        "Internal-IP",
        "string",
        Field("io.k8s.api.core.v1.NodeStatus", "addresses"),
    ),
    wide(
        "External-IP",
        "string",
        Field("io.k8s.api.core.v1.NodeStatus", "addresses"),
    ),
    wide(
        "OS-Image",
        "string",
        Field("io.k8s.api.core.v1.NodeSystemInfo", "osImage"),
    ),
    wide(
        "Kernel-Version",
        "string",
        Field("io.k8s.api.core.v1.NodeSystemInfo", "kernelVersion"),
    ),
    wide(
        "Container-Runtime",
        "string",
        Field(
            "io.k8s.api.core.v1.NodeSystemInfo",
            "containerRuntimeVersion",
        ),
    ),
];

pub const NAMESPACE: &[Column] = &[
    NAME,
    col("Status", "string", Text("The status of the namespace")),
    AGE,
];

const EVENT: &str = "io.k8s.api.core.v1.Event";
pub const EVENTS: &[Column] = &[
    col("Last Seen", "string", Field(EVENT, "lastTimestamp")),
    col("Type", "string", Field(EVENT, "type")),
    col("Reason", "string", Field(EVENT, "reason")),
    col("Object", "string", Field(EVENT, "involvedObject")),
    wide(
        "Subobject",
        "string",
        Field("io.k8s.api.core.v1.ObjectReference", "fieldPath"),
    ),
    wide("Source", "string", Field(EVENT, "source")),
    col("Message", "string", Field(EVENT, "message")),
    wide("First Seen", "string", Field(EVENT, "firstTimestamp")),
    wide("Count", "string", Field(EVENT, "count")),
    Column {
        priority: 1,
        ..NAME
    },
];

pub const CONFIG_MAP: &[Column] = &[
    NAME,
    col(
        "Data",
        "string",
        Field("io.k8s.api.core.v1.ConfigMap", "data"),
    ),
    AGE,
];

pub const SECRET: &[Column] = &[
    NAME,
    col("Type", "string", Field("io.k8s.api.core.v1.Secret", "type")),
    col("Data", "string", Field("io.k8s.api.core.v1.Secret", "data")),
    AGE,
];

const SERVICE_SPEC: &str = "io.k8s.api.core.v1.ServiceSpec";
pub const SERVICE: &[Column] = &[
    NAME,
    col("Type", "string", Field(SERVICE_SPEC, "type")),
    col("Cluster-IP", "string", Field(SERVICE_SPEC, "clusterIP")),
    col("External-IP", "string", Field(SERVICE_SPEC, "externalIPs")),
    col("Port(s)", "string", Field(SERVICE_SPEC, "ports")),
    AGE,
    wide("Selector", "string", Field(SERVICE_SPEC, "selector")),
];

pub const SERVICE_ACCOUNT: &[Column] = &[
    NAME,
    col(
        "Secrets",
        "string",
        Field("io.k8s.api.core.v1.ServiceAccount", "secrets"),
    ),
    AGE,
];

pub const ENDPOINTS: &[Column] = &[
    NAME,
    col(
        "Endpoints",
        "string",
        Field("io.k8s.api.core.v1.Endpoints", "subsets"),
    ),
    AGE,
];

const PV_SPEC: &str = "io.k8s.api.core.v1.PersistentVolumeSpec";
pub const PERSISTENT_VOLUME: &[Column] = &[
    NAME,
    col("Capacity", "string", Field(PV_SPEC, "capacity")),
    col("Access Modes", "string", Field(PV_SPEC, "accessModes")),
    col(
        "Reclaim Policy",
        "string",
        Field(PV_SPEC, "persistentVolumeReclaimPolicy"),
    ),
    col(
        "Status",
        "string",
        Field("io.k8s.api.core.v1.PersistentVolumeStatus", "phase"),
    ),
    col("Claim", "string", Field(PV_SPEC, "claimRef")),
    col("StorageClass", "string", Text("StorageClass of the pv")),
    col(
        "VolumeAttributesClass",
        "string",
        Text("VolumeAttributesClass of the pv"),
    ),
    col(
        "Reason",
        "string",
        Field("io.k8s.api.core.v1.PersistentVolumeStatus", "reason"),
    ),
    AGE,
    wide("VolumeMode", "string", Field(PV_SPEC, "volumeMode")),
];

const PVC_SPEC: &str = "io.k8s.api.core.v1.PersistentVolumeClaimSpec";
const PVC_STATUS: &str = "io.k8s.api.core.v1.PersistentVolumeClaimStatus";
pub const PERSISTENT_VOLUME_CLAIM: &[Column] = &[
    NAME,
    col("Status", "string", Field(PVC_STATUS, "phase")),
    col("Volume", "string", Field(PVC_SPEC, "volumeName")),
    col("Capacity", "string", Field(PVC_STATUS, "capacity")),
    col("Access Modes", "string", Field(PVC_STATUS, "accessModes")),
    col("StorageClass", "string", Text("StorageClass of the pvc")),
    col(
        "VolumeAttributesClass",
        "string",
        Text("VolumeAttributesClass of the pvc"),
    ),
    AGE,
    wide("VolumeMode", "string", Field(PVC_SPEC, "volumeMode")),
];

pub const RESOURCE_QUOTA: &[Column] = &[
    NAME,
    col(
        "Request",
        "string",
        Text("Request represents a minimum amount of cpu/memory that a container may consume."),
    ),
    col(
        "Limit",
        "string",
        Text(
            "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
        ),
    ),
    AGE,
];

const DEPLOYMENT_STATUS: &str = "io.k8s.api.apps.v1.DeploymentStatus";
pub const DEPLOYMENT: &[Column] = &[
    NAME,
    col(
        "Ready",
        "string",
        Text("Number of the pod with ready state"),
    ),
    col(
        "Up-to-date",
        "string",
        Field(DEPLOYMENT_STATUS, "updatedReplicas"),
    ),
    col(
        "Available",
        "string",
        Field(DEPLOYMENT_STATUS, "availableReplicas"),
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "string",
        Field("io.k8s.api.apps.v1.DeploymentSpec", "selector"),
    ),
];

const RS_STATUS: &str = "io.k8s.api.apps.v1.ReplicaSetStatus";
pub const REPLICA_SET: &[Column] = &[
    NAME,
    col(
        "Desired",
        "integer",
        Field("io.k8s.api.apps.v1.ReplicaSetSpec", "replicas"),
    ),
    col("Current", "integer", Field(RS_STATUS, "replicas")),
    col("Ready", "integer", Field(RS_STATUS, "readyReplicas")),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "string",
        Field("io.k8s.api.apps.v1.ReplicaSetSpec", "selector"),
    ),
];

pub const STATEFUL_SET: &[Column] = &[
    NAME,
    col(
        "Ready",
        "string",
        Text("Number of the pod with ready state"),
    ),
    AGE,
    CONTAINERS,
    IMAGES,
];

const DS_STATUS: &str = "io.k8s.api.apps.v1.DaemonSetStatus";
pub const DAEMON_SET: &[Column] = &[
    NAME,
    col(
        "Desired",
        "integer",
        Field(DS_STATUS, "desiredNumberScheduled"),
    ),
    col(
        "Current",
        "integer",
        Field(DS_STATUS, "currentNumberScheduled"),
    ),
    col("Ready", "integer", Field(DS_STATUS, "numberReady")),
    col(
        "Up-to-date",
        "integer",
        Field(DS_STATUS, "updatedNumberScheduled"),
    ),
    col("Available", "integer", Field(DS_STATUS, "numberAvailable")),
    col(
        "Node Selector",
        "string",
        Field("io.k8s.api.core.v1.PodSpec", "nodeSelector"),
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "string",
        Field("io.k8s.api.apps.v1.DaemonSetSpec", "selector"),
    ),
];

pub const CONTROLLER_REVISION: &[Column] = &[
    NAME,
    col("Controller", "string", Text("Controller of the object")),
    col(
        "Revision",
        "string",
        Field("io.k8s.api.apps.v1.ControllerRevision", "revision"),
    ),
    AGE,
];

pub const JOB: &[Column] = &[
    NAME,
    col("Status", "string", Text("Status of the job.")),
    col(
        "Completions",
        "string",
        Field("io.k8s.api.batch.v1.JobStatus", "succeeded"),
    ),
    col(
        "Duration",
        "string",
        Text("Time required to complete the job."),
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "string",
        Field("io.k8s.api.batch.v1.JobSpec", "selector"),
    ),
];

const CRON_JOB_SPEC: &str = "io.k8s.api.batch.v1.CronJobSpec";
const CRON_JOB_STATUS: &str = "io.k8s.api.batch.v1.CronJobStatus";
pub const CRON_JOB: &[Column] = &[
    NAME,
    col("Schedule", "string", Field(CRON_JOB_SPEC, "schedule")),
    col("Timezone", "string", Field(CRON_JOB_SPEC, "timeZone")),
    col("Suspend", "boolean", Field(CRON_JOB_SPEC, "suspend")),
    col("Active", "integer", Field(CRON_JOB_STATUS, "active")),
    col(
        "Last Schedule",
        "string",
        Field(CRON_JOB_STATUS, "lastScheduleTime"),
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "string",
        Field("io.k8s.api.batch.v1.JobSpec", "selector"),
    ),
];

pub const POD_DISRUPTION_BUDGET: &[Column] = &[
    NAME,
    col(
        "Min Available",
        "string",
        Text("The minimum number of pods that must be available."),
    ),
    col(
        "Max Unavailable",
        "string",
        Text("The maximum number of pods that may be unavailable."),
    ),
    col(
        "Allowed Disruptions",
        "integer",
        Text("Calculated number of pods that may be disrupted at this time."),
    ),
    AGE,
];

const PRIORITY_CLASS: &str = "io.k8s.api.scheduling.v1.PriorityClass";
pub const PRIORITY_CLASSES: &[Column] = &[
    NAME,
    col("Value", "integer", Field(PRIORITY_CLASS, "value")),
    col(
        "Global-Default",
        "boolean",
        Field(PRIORITY_CLASS, "globalDefault"),
    ),
    AGE,
    col(
        "PreemptionPolicy",
        "string",
        Field(PRIORITY_CLASS, "preemptionPolicy"),
    ),
];

pub const LEASE: &[Column] = &[
    NAME,
    col(
        "Holder",
        "string",
        Field("io.k8s.api.coordination.v1.LeaseSpec", "holderIdentity"),
    ),
    AGE,
];

pub const INGRESS: &[Column] = &[
    NAME,
    col(
        "Class",
        "string",
        Text(
            "The name of the IngressClass resource that should be used for additional configuration",
        ),
    ),
    col(
        "Hosts",
        "string",
        Text("Hosts that incoming requests are matched against before the ingress rule"),
    ),
    col(
        "Address",
        "string",
        Text("Address is a list containing ingress points for the load-balancer"),
    ),
    col(
        "Ports",
        "string",
        Text("Ports of TLS configurations that open"),
    ),
    AGE,
];

pub const ROLE_BINDING: &[Column] = &[
    NAME,
    col(
        "Role",
        "string",
        Field("io.k8s.api.rbac.v1.RoleBinding", "roleRef"),
    ),
    AGE,
    wide("Users", "string", Text("Users in the roleBinding")),
    wide("Groups", "string", Text("Groups in the roleBinding")),
    wide(
        "ServiceAccounts",
        "string",
        Text("ServiceAccounts in the roleBinding"),
    ),
];

pub const CLUSTER_ROLE_BINDING: &[Column] = &[
    NAME,
    col(
        "Role",
        "string",
        Field("io.k8s.api.rbac.v1.ClusterRoleBinding", "roleRef"),
    ),
    AGE,
    wide("Users", "string", Text("Users in the clusterRoleBinding")),
    wide("Groups", "string", Text("Groups in the clusterRoleBinding")),
    wide(
        "ServiceAccounts",
        "string",
        Text("ServiceAccounts in the clusterRoleBinding"),
    ),
];

const STORAGE_CLASS: &str = "io.k8s.api.storage.v1.StorageClass";
pub const STORAGE_CLASSES: &[Column] = &[
    NAME,
    col("Provisioner", "string", Field(STORAGE_CLASS, "provisioner")),
    col(
        "ReclaimPolicy",
        "string",
        Field(STORAGE_CLASS, "reclaimPolicy"),
    ),
    col(
        "VolumeBindingMode",
        "string",
        Field(STORAGE_CLASS, "volumeBindingMode"),
    ),
    col(
        "AllowVolumeExpansion",
        "string",
        Field(STORAGE_CLASS, "allowVolumeExpansion"),
    ),
    AGE,
];

/// kube-apiserver's default table (`rest.NewDefaultTableConvertor`).
pub const DEFAULT: &[Column] = &[
    NAME,
    col(
        "Created At",
        "date",
        Field(OBJECT_META, "creationTimestamp"),
    ),
];
