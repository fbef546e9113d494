//! Defaults of the core group's pod specs (pods and every pod template), as
//! `pkg/apis/core/v1/defaults.go` sets them, plus the
//! DefaultTolerationSeconds admission plugin for pods (the Priority plugin,
//! which reads PriorityClasses, is [`crate::admission::admit_new_pod`]).

use serde_json::{Map, Value, json};

use crate::admission::json::{default_field, each_object_mut, is_unset, object_entry};

/// `SetDefaults_PodSpec` and the defaults of everything inside a pod spec
/// (containers, ports, probes, volumes): what templates get.
pub(crate) fn default_pod_spec(spec: &mut Map<String, Value>) {
    default_field(spec, "dnsPolicy", json!("ClusterFirst"));
    default_field(spec, "restartPolicy", json!("Always"));
    let host_network = spec.get("hostNetwork").and_then(Value::as_bool) == Some(true);
    default_field(spec, "securityContext", json!({}));
    default_field(spec, "terminationGracePeriodSeconds", json!(30));
    default_field(spec, "schedulerName", json!("default-scheduler"));
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for container in each_object_mut(spec, list) {
            default_container(container, host_network && list != "ephemeralContainers");
        }
    }
    for volume in each_object_mut(spec, "volumes") {
        default_volume(volume);
    }
}

/// `SetDefaults_Pod`: the pod spec defaults plus what only pods get.
pub(crate) fn default_pod(pod: &mut Value) {
    let Some(pod) = pod.as_object_mut() else {
        return;
    };
    let Some(spec) = object_entry(pod, "spec") else {
        return;
    };
    default_pod_spec(spec);
    for list in ["initContainers", "containers"] {
        for container in each_object_mut(spec, list) {
            default_requests_to_limits(container);
        }
    }
    default_field(spec, "enableServiceLinks", json!(true));
    admit_default_toleration_seconds(spec);
}

/// Requests default to limits for the resources with a limit and no request.
fn default_requests_to_limits(container: &mut Map<String, Value>) {
    let Some(resources) = container
        .get_mut("resources")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() else {
        return;
    };
    if limits.is_empty() {
        return;
    }
    let Some(requests) = object_entry(resources, "requests") else {
        return;
    };
    for (name, quantity) in limits {
        requests.entry(name).or_insert(quantity);
    }
}

/// The image's tag as `parsers.ParseImageName` finds it: `latest` when there is neither tag nor digest.
fn image_tag(image: &str) -> &str {
    if image.contains('@') {
        return "";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, tag)) => tag,
        None => "latest",
    }
}

fn default_container(container: &mut Map<String, Value>, host_network: bool) {
    if is_unset(container, "imagePullPolicy") {
        let image = container
            .get("image")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let policy = if image_tag(image) == "latest" {
            "Always"
        } else {
            "IfNotPresent"
        };
        container.insert("imagePullPolicy".into(), json!(policy));
    }
    default_field(
        container,
        "terminationMessagePath",
        json!("/dev/termination-log"),
    );
    default_field(container, "terminationMessagePolicy", json!("File"));
    default_field(container, "resources", json!({}));
    for port in each_object_mut(container, "ports") {
        default_field(port, "protocol", json!("TCP"));
        if host_network
            && port.get("hostPort").and_then(Value::as_i64).unwrap_or(0) == 0
            && let Some(container_port) = port.get("containerPort").cloned()
        {
            port.insert("hostPort".into(), container_port);
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = container.get_mut(probe).and_then(Value::as_object_mut) {
            default_probe(probe);
        }
    }
    if let Some(lifecycle) = container
        .get_mut("lifecycle")
        .and_then(Value::as_object_mut)
    {
        for hook in ["postStart", "preStop"] {
            if let Some(http_get) = lifecycle
                .get_mut(hook)
                .and_then(|h| h.get_mut("httpGet"))
                .and_then(Value::as_object_mut)
            {
                default_http_get(http_get);
            }
        }
    }
    for env in each_object_mut(container, "env") {
        if let Some(field_ref) = env
            .get_mut("valueFrom")
            .and_then(|v| v.get_mut("fieldRef"))
            .and_then(Value::as_object_mut)
        {
            default_field(field_ref, "apiVersion", json!("v1"));
        }
    }
}

fn default_probe(probe: &mut Map<String, Value>) {
    for (field, default) in [
        ("timeoutSeconds", 1),
        ("periodSeconds", 10),
        ("successThreshold", 1),
        ("failureThreshold", 3),
    ] {
        if probe.get(field).and_then(Value::as_i64).unwrap_or(0) == 0 {
            probe.insert(field.into(), json!(default));
        }
    }
    if let Some(http_get) = probe.get_mut("httpGet").and_then(Value::as_object_mut) {
        default_http_get(http_get);
    }
}

/// `SetDefaults_HTTPGetAction`.
fn default_http_get(http_get: &mut Map<String, Value>) {
    default_field(http_get, "path", json!("/"));
    default_field(http_get, "scheme", json!("HTTP"));
}

/// The volume sources (a volume with none of them is an `emptyDir`).
const VOLUME_SOURCES: &[&str] = &[
    "emptyDir",
    "hostPath",
    "gitRepo",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "flocker",
    "persistentVolumeClaim",
    "rbd",
    "cinder",
    "cephfs",
    "quobyte",
    "downwardAPI",
    "fc",
    "flexVolume",
    "configMap",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "storageos",
    "projected",
    "scaleIO",
    "csi",
    "ephemeral",
    "image",
];

fn default_volume(volume: &mut Map<String, Value>) {
    if VOLUME_SOURCES
        .iter()
        .all(|source| volume.get(*source).is_none_or(Value::is_null))
    {
        volume.insert("emptyDir".into(), json!({}));
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(source) = volume.get_mut(source).and_then(Value::as_object_mut) {
            default_field(source, "defaultMode", json!(420));
        }
    }
    if let Some(host_path) = volume.get_mut("hostPath").and_then(Value::as_object_mut) {
        default_field(host_path, "type", json!(""));
    }
    if let Some(empty_dir) = volume.get_mut("emptyDir")
        && empty_dir.is_null()
    {
        *empty_dir = json!({});
    }
}

/// The DefaultTolerationSeconds admission plugin: tolerate not-ready and
/// unreachable nodes for 300 seconds unless the pod already tolerates them.
fn admit_default_toleration_seconds(spec: &mut Map<String, Value>) {
    let existing: Vec<Value> = spec
        .get("tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let tolerates = |taint: &str| {
        existing.iter().any(|t| {
            let key = t.get("key").and_then(Value::as_str).unwrap_or_default();
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or_default();
            (key == taint || key.is_empty()) && (effect == "NoExecute" || effect.is_empty())
        })
    };
    let mut added = Vec::new();
    for taint in [
        ksim_core::status::TAINT_NODE_NOT_READY,
        ksim_core::status::TAINT_NODE_UNREACHABLE,
    ] {
        if !tolerates(taint) {
            added.push(json!({
                "key": taint,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }));
        }
    }
    if added.is_empty() {
        return;
    }
    let mut tolerations = existing;
    tolerations.extend(added);
    spec.insert("tolerations".into(), Value::Array(tolerations));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_get_kubes_defaults() {
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}],
                "resources": {"limits": {"cpu": "1"}}}]}
        });
        default_pod(&mut pod);
        let spec = &pod["spec"];
        let want = [
            ("dnsPolicy", json!("ClusterFirst")),
            ("restartPolicy", json!("Always")),
            ("schedulerName", json!("default-scheduler")),
            ("terminationGracePeriodSeconds", json!(30)),
            ("securityContext", json!({})),
            ("enableServiceLinks", json!(true)),
        ];
        for (field, value) in want {
            assert_eq!(spec[field], value, "{field}");
        }
        let container = &spec["containers"][0];
        assert_eq!(container["imagePullPolicy"], "Always");
        assert_eq!(container["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(container["terminationMessagePolicy"], "File");
        assert_eq!(container["ports"][0]["protocol"], "TCP");
        assert_eq!(container["resources"]["requests"], json!({"cpu": "1"}));
        assert_eq!(
            spec["tolerations"],
            json!([
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ])
        );
    }

    #[test]
    fn image_pull_policy_follows_the_tag() {
        let cases = [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.27", "IfNotPresent"),
            ("localhost:5000/nginx", "Always"),
            ("localhost:5000/nginx:1", "IfNotPresent"),
            ("nginx@sha256:abcd", "IfNotPresent"),
        ];
        for (image, policy) in cases {
            let mut container = json!({"name": "c", "image": image});
            default_container(container.as_object_mut().expect("object"), false);
            assert_eq!(container["imagePullPolicy"], policy, "{image}");
        }
    }

    #[test]
    fn existing_tolerations_and_values_are_kept() {
        let mut pod = json!({"spec": {
            "restartPolicy": "Never",
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": "x:1", "imagePullPolicy": "Never"}]
        }});
        default_pod(&mut pod);
        assert_eq!(pod["spec"]["restartPolicy"], "Never");
        assert_eq!(pod["spec"]["tolerations"], json!([{"operator": "Exists"}]));
        assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Never");
    }

    #[test]
    fn templates_get_no_pod_only_defaults() {
        let mut spec = json!({"containers": [{"name": "c", "image": "x:1"}]});
        default_pod_spec(spec.as_object_mut().expect("object"));
        assert!(spec.get("enableServiceLinks").is_none());
        assert!(spec.get("tolerations").is_none());
        assert!(spec.get("priority").is_none());
        assert_eq!(spec["restartPolicy"], "Always");
    }
}
