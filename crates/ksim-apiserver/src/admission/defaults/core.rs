//! Defaults of the core and scheduling kinds other than pods: Service,
//! Endpoints, Namespace, Secret, PersistentVolumeClaim, Node, PriorityClass.

use serde_json::{Value, json};

use crate::admission::json::{default_field, each_object_mut, object_entry};

pub(crate) fn default_service(object: &mut Value) {
    let Some(spec) = object.as_object_mut().and_then(|o| object_entry(o, "spec")) else {
        return;
    };
    default_field(spec, "sessionAffinity", json!("None"));
    if spec.get("sessionAffinity").and_then(Value::as_str) == Some("ClientIP")
        && let Some(client_ip) =
            object_entry(spec, "sessionAffinityConfig").and_then(|c| object_entry(c, "clientIP"))
    {
        default_field(client_ip, "timeoutSeconds", json!(10800));
    }
    default_field(spec, "type", json!("ClusterIP"));
    for port in each_object_mut(spec, "ports") {
        default_field(port, "protocol", json!("TCP"));
        let unset = match port.get("targetPort") {
            None | Some(Value::Null) => true,
            Some(Value::Number(n)) => n.as_i64() == Some(0),
            Some(Value::String(s)) => s.is_empty(),
            Some(_) => false,
        };
        if unset && let Some(p) = port.get("port").cloned() {
            port.insert("targetPort".into(), p);
        }
    }
    let service_type = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if service_type == "NodePort" || service_type == "LoadBalancer" {
        default_field(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if service_type == "LoadBalancer" {
        default_field(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    if service_type != "ExternalName" {
        default_field(spec, "internalTrafficPolicy", json!("Cluster"));
        default_field(spec, "ipFamilyPolicy", json!("SingleStack"));
        default_field(spec, "ipFamilies", json!(["IPv4"]));
    }
}

pub(crate) fn default_endpoints(object: &mut Value) {
    let Some(subsets) = object.get_mut("subsets").and_then(Value::as_array_mut) else {
        return;
    };
    for subset in subsets.iter_mut().filter_map(Value::as_object_mut) {
        for port in each_object_mut(subset, "ports") {
            default_field(port, "protocol", json!("TCP"));
        }
    }
}

pub(crate) fn default_namespace(object: &mut Value) {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let Some(namespace) = object.as_object_mut() else {
        return;
    };
    if !name.is_empty()
        && let Some(labels) =
            object_entry(namespace, "metadata").and_then(|m| object_entry(m, "labels"))
    {
        labels.insert("kubernetes.io/metadata.name".into(), json!(name));
    }
    if let Some(spec) = object_entry(namespace, "spec") {
        default_field(spec, "finalizers", json!(["kubernetes"]));
    }
    if let Some(status) = object_entry(namespace, "status") {
        default_field(status, "phase", json!("Active"));
    }
}

pub(crate) fn default_secret(object: &mut Value) {
    if let Some(secret) = object.as_object_mut() {
        default_field(secret, "type", json!("Opaque"));
    }
}

pub(crate) fn default_persistent_volume_claim(object: &mut Value) {
    if let Some(spec) = object.as_object_mut().and_then(|o| object_entry(o, "spec")) {
        default_field(spec, "volumeMode", json!("Filesystem"));
    }
    // `SetDefaults_PersistentVolumeClaim`: a claim nothing bound is Pending.
    if let Some(status) = object
        .as_object_mut()
        .and_then(|o| object_entry(o, "status"))
    {
        default_field(status, "phase", json!("Pending"));
    }
}

/// `SetDefaults_NodeStatus`: allocatable defaults to capacity.
pub(crate) fn default_node(object: &mut Value) {
    let Some(status) = object
        .as_object_mut()
        .and_then(|o| o.get_mut("status"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if status.get("allocatable").is_none_or(Value::is_null)
        && let Some(capacity) = status.get("capacity").cloned()
    {
        status.insert("allocatable".into(), capacity);
    }
}

pub(crate) fn default_priority_class(object: &mut Value) {
    if let Some(class) = object.as_object_mut() {
        default_field(class, "preemptionPolicy", json!("PreemptLowerPriority"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_get_kubes_defaults() {
        let mut service = json!({"metadata": {"name": "s"}, "spec": {"selector": {"app": "a"},
            "ports": [{"port": 80}, {"port": 443, "targetPort": "https", "protocol": "UDP"}]}});
        default_service(&mut service);
        let spec = &service["spec"];
        assert_eq!(spec["type"], "ClusterIP");
        assert_eq!(spec["sessionAffinity"], "None");
        assert_eq!(
            spec["ports"][0],
            json!({"port": 80, "protocol": "TCP", "targetPort": 80})
        );
        assert_eq!(
            spec["ports"][1],
            json!({"port": 443, "targetPort": "https", "protocol": "UDP"})
        );
        assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
        assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
        assert_eq!(spec["internalTrafficPolicy"], "Cluster");
        assert!(spec.get("externalTrafficPolicy").is_none());
    }

    #[test]
    fn node_port_services_get_external_traffic_policy() {
        let mut service = json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}});
        default_service(&mut service);
        assert_eq!(service["spec"]["externalTrafficPolicy"], "Cluster");
        assert_eq!(service["spec"]["allocateLoadBalancerNodePorts"], true);
    }

    #[test]
    fn namespaces_get_finalizer_and_name_label() {
        let mut namespace = json!({"metadata": {"name": "team-a"}});
        default_namespace(&mut namespace);
        assert_eq!(namespace["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(
            namespace["metadata"]["labels"]["kubernetes.io/metadata.name"],
            "team-a"
        );
        assert_eq!(namespace["status"]["phase"], "Active");
    }

    #[test]
    fn small_kinds_get_their_defaults() {
        let mut secret = json!({"data": {}});
        default_secret(&mut secret);
        assert_eq!(secret["type"], "Opaque");
        let mut class = json!({"value": 10});
        default_priority_class(&mut class);
        assert_eq!(class["preemptionPolicy"], "PreemptLowerPriority");
        let mut node = json!({"status": {"capacity": {"cpu": "4"}}});
        default_node(&mut node);
        assert_eq!(node["status"]["allocatable"], json!({"cpu": "4"}));
        let mut claim = json!({"spec": {}});
        default_persistent_volume_claim(&mut claim);
        assert_eq!(claim["status"]["phase"], "Pending");
        assert_eq!(claim["spec"]["volumeMode"], "Filesystem");
    }
}
