//! The cells of the built-in kinds other than pods and nodes, one function
//! per kind, as kube-apiserver's printers fill them (always with the wide
//! columns: the server prints wide and kubectl hides priority > 0).

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::duration::{age, human_duration, parse_time, seconds_between};
use super::format::{
    access_modes, array_at, at, bool_at, container_cells, creation_timestamp,
    format_label_selector, format_labels, int_at, int_or_string, is_deleting,
    label_selector_string, len_at, name, quantity, str_at, string_at,
};

/// The age of an object's `metadata.creationTimestamp`.
fn object_age(object: &Value, now: DateTime<Utc>) -> Value {
    json!(age(creation_timestamp(object), now))
}

fn or_placeholder(value: Option<&str>, placeholder: &str) -> String {
    value
        .filter(|v| !v.is_empty())
        .unwrap_or(placeholder)
        .to_string()
}

pub fn namespace(ns: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        json!(name(ns)),
        json!(string_at(ns, &["status", "phase"])),
        object_age(ns, now),
    ]
}

/// An event of either API (`v1` or `events.k8s.io/v1`), read as the
/// internal core event upstream prints.
struct EventView<'a> {
    event: &'a Value,
    new_api: bool,
}

impl EventView<'_> {
    fn field(&self, core: &str, events: &str) -> Option<&Value> {
        self.event.get(if self.new_api { events } else { core })
    }
    fn str(&self, core: &str, events: &str) -> Option<&str> {
        self.field(core, events).and_then(Value::as_str)
    }
}

pub fn event(event: &Value, new_api: bool, now: DateTime<Utc>) -> Vec<Value> {
    let view = EventView { event, new_api };
    let first = match view
        .str("firstTimestamp", "deprecatedFirstTimestamp")
        .and_then(parse_time)
    {
        Some(_) => age(view.str("firstTimestamp", "deprecatedFirstTimestamp"), now),
        None => age(str_at(event, &["eventTime"]), now),
    };
    let mut last = match view
        .str("lastTimestamp", "deprecatedLastTimestamp")
        .and_then(parse_time)
    {
        Some(_) => age(view.str("lastTimestamp", "deprecatedLastTimestamp"), now),
        None => first.clone(),
    };
    let mut count = view
        .field("count", "deprecatedCount")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    match event.get("series").filter(|s| s.is_object()) {
        Some(series) => {
            last = age(str_at(series, &["lastObservedTime"]), now);
            count = int_at(series, &["count"]).unwrap_or(0);
        }
        None if count == 0 => count = 1,
        None => {}
    }
    let regarding = view
        .field("involvedObject", "regarding")
        .cloned()
        .unwrap_or(Value::Null);
    let kind = string_at(&regarding, &["kind"]).to_lowercase();
    let target = match str_at(&regarding, &["name"]).filter(|n| !n.is_empty()) {
        Some(object_name) => format!("{kind}/{object_name}"),
        None => kind,
    };
    let source = view.field("source", "deprecatedSource");
    let component = source
        .and_then(|s| str_at(s, &["component"]))
        .filter(|c| !c.is_empty())
        .or_else(|| view.str("reportingComponent", "reportingController"))
        .unwrap_or_default();
    let instance = source
        .and_then(|s| str_at(s, &["host"]))
        .filter(|h| !h.is_empty())
        .or_else(|| str_at(event, &["reportingInstance"]))
        .unwrap_or_default();
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    vec![
        json!(last),
        json!(string_at(event, &["type"])),
        json!(string_at(event, &["reason"])),
        json!(target),
        json!(string_at(&regarding, &["fieldPath"])),
        json!(source),
        json!(view.str("message", "note").unwrap_or_default().trim()),
        json!(first),
        json!(count),
        json!(name(event)),
    ]
}

pub fn config_map(cm: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        json!(name(cm)),
        json!(len_at(cm, &["data"]) + len_at(cm, &["binaryData"])),
        object_age(cm, now),
    ]
}

pub fn secret(secret: &Value, now: DateTime<Utc>) -> Vec<Value> {
    // Conversion to the internal type merges stringData into data.
    let keys: BTreeSet<&String> = ["data", "stringData"]
        .iter()
        .filter_map(|field| secret.get(field).and_then(Value::as_object))
        .flat_map(|map| map.keys())
        .collect();
    vec![
        json!(name(secret)),
        json!(string_at(secret, &["type"])),
        json!(keys.len()),
        object_age(secret, now),
    ]
}

fn load_balancer_ingress(ingress: &[Value]) -> String {
    let addresses: BTreeSet<&str> = ingress
        .iter()
        .filter_map(|i| {
            str_at(i, &["ip"])
                .filter(|ip| !ip.is_empty())
                .or_else(|| str_at(i, &["hostname"]).filter(|h| !h.is_empty()))
        })
        .collect();
    addresses.into_iter().collect::<Vec<_>>().join(",")
}

fn strings(values: &[Value]) -> Vec<&str> {
    values.iter().filter_map(Value::as_str).collect()
}

fn service_external_ip(svc: &Value, service_type: &str) -> String {
    let external_ips = strings(array_at(svc, &["spec", "externalIPs"]));
    match service_type {
        "ClusterIP" | "NodePort" => {
            if external_ips.is_empty() {
                "<none>".to_string()
            } else {
                external_ips.join(",")
            }
        }
        "LoadBalancer" => {
            let lb = load_balancer_ingress(array_at(svc, &["status", "loadBalancer", "ingress"]));
            if !external_ips.is_empty() {
                let mut all: Vec<&str> = lb.split(',').filter(|s| !s.is_empty()).collect();
                all.extend(external_ips);
                all.join(",")
            } else if !lb.is_empty() {
                lb
            } else {
                "<pending>".to_string()
            }
        }
        "ExternalName" => string_at(svc, &["spec", "externalName"]),
        _ => "<unknown>".to_string(),
    }
}

pub fn service(svc: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let service_type = str_at(svc, &["spec", "type"]).unwrap_or("ClusterIP");
    let cluster_ip = array_at(svc, &["spec", "clusterIPs"])
        .first()
        .and_then(Value::as_str)
        .or_else(|| str_at(svc, &["spec", "clusterIP"]))
        .filter(|ip| !ip.is_empty())
        .unwrap_or("<none>");
    let ports: Vec<String> = array_at(svc, &["spec", "ports"])
        .iter()
        .map(|p| {
            let port = int_at(p, &["port"]).unwrap_or(0);
            let protocol = str_at(p, &["protocol"]).unwrap_or("TCP");
            match int_at(p, &["nodePort"]).filter(|n| *n > 0) {
                Some(node_port) => format!("{port}:{node_port}/{protocol}"),
                None => format!("{port}/{protocol}"),
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        "<none>".to_string()
    } else {
        ports.join(",")
    };
    vec![
        json!(name(svc)),
        json!(service_type),
        json!(cluster_ip),
        json!(service_external_ip(svc, service_type)),
        json!(ports),
        object_age(svc, now),
        json!(format_labels(at(svc, &["spec", "selector"]))),
    ]
}

pub fn service_account(sa: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        json!(name(sa)),
        json!(len_at(sa, &["secrets"])),
        object_age(sa, now),
    ]
}

/// `formatEndpoints` with all ports: up to three `ip:port`, then `+ N more...`.
fn format_endpoints(endpoints: &Value) -> String {
    let subsets = array_at(endpoints, &["subsets"]);
    if subsets.is_empty() {
        return "<none>".to_string();
    }
    const MAX: usize = 3;
    let mut list: Vec<String> = Vec::new();
    let mut more = false;
    let mut count = 0;
    for subset in subsets {
        let addresses = array_at(subset, &["addresses"]);
        let ports = array_at(subset, &["ports"]);
        if ports.is_empty() {
            count += addresses.len();
            for address in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(string_at(address, &["ip"]));
            }
            continue;
        }
        for port in ports {
            count += addresses.len();
            for address in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                let ip = string_at(address, &["ip"]);
                let number = int_at(port, &["port"]).unwrap_or(0);
                list.push(if ip.contains(':') {
                    format!("[{ip}]:{number}")
                } else {
                    format!("{ip}:{number}")
                });
            }
        }
    }
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", count - MAX)
    } else {
        joined
    }
}

pub fn endpoints(ep: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        json!(name(ep)),
        json!(format_endpoints(ep)),
        object_age(ep, now),
    ]
}

/// `GetPersistentVolumeClass` / `GetPersistentVolumeClaimClass`: the beta
/// annotation wins over `spec.storageClassName`.
fn storage_class_of(object: &Value) -> String {
    str_at(
        object,
        &[
            "metadata",
            "annotations",
            "volume.beta.kubernetes.io/storage-class",
        ],
    )
    .or_else(|| str_at(object, &["spec", "storageClassName"]))
    .unwrap_or_default()
    .to_string()
}

fn phase_or_terminating(object: &Value) -> String {
    if is_deleting(object) {
        "Terminating".to_string()
    } else {
        string_at(object, &["status", "phase"])
    }
}

pub fn persistent_volume(pv: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let claim = match at(pv, &["spec", "claimRef"]).filter(|c| c.is_object()) {
        Some(claim) => format!(
            "{}/{}",
            string_at(claim, &["namespace"]),
            string_at(claim, &["name"])
        ),
        None => String::new(),
    };
    vec![
        json!(name(pv)),
        json!(quantity(at(pv, &["spec", "capacity", "storage"]))),
        json!(access_modes(array_at(pv, &["spec", "accessModes"]))),
        json!(string_at(pv, &["spec", "persistentVolumeReclaimPolicy"])),
        json!(phase_or_terminating(pv)),
        json!(claim),
        json!(storage_class_of(pv)),
        json!(or_placeholder(
            str_at(pv, &["spec", "volumeAttributesClassName"]),
            "<unset>"
        )),
        json!(string_at(pv, &["status", "reason"])),
        object_age(pv, now),
        json!(or_placeholder(
            str_at(pv, &["spec", "volumeMode"]),
            "<unset>"
        )),
    ]
}

pub fn persistent_volume_claim(pvc: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let volume = string_at(pvc, &["spec", "volumeName"]);
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        (
            quantity(at(pvc, &["status", "capacity", "storage"])),
            access_modes(array_at(pvc, &["status", "accessModes"])),
        )
    };
    vec![
        json!(name(pvc)),
        json!(phase_or_terminating(pvc)),
        json!(volume),
        json!(capacity),
        json!(modes),
        json!(storage_class_of(pvc)),
        json!(or_placeholder(
            str_at(pvc, &["spec", "volumeAttributesClassName"]),
            "<unset>"
        )),
        object_age(pvc, now),
        json!(or_placeholder(
            str_at(pvc, &["spec", "volumeMode"]),
            "<unset>"
        )),
    ]
}

pub fn resource_quota(quota: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut resources: Vec<&String> = at(quota, &["status", "hard"])
        .and_then(Value::as_object)
        .map(|hard| hard.keys().collect())
        .unwrap_or_default();
    resources.sort();
    let mut requests = Vec::new();
    let mut limits = Vec::new();
    for resource in resources {
        let used = quantity(at(quota, &["status", "used", resource]));
        let hard = quantity(at(quota, &["status", "hard", resource]));
        let entry = format!("{resource}: {used}/{hard}");
        let pieces: Vec<&str> = resource.split('.').collect();
        if pieces.len() > 1 && pieces[0] == "limits" {
            limits.push(entry);
        } else {
            requests.push(entry);
        }
    }
    vec![
        json!(name(quota)),
        json!(requests.join(", ")),
        json!(limits.join(", ")),
        object_age(quota, now),
    ]
}

/// `spec.replicas`, defaulted to 1 as the API server defaults it.
fn desired_replicas(object: &Value) -> i64 {
    int_at(object, &["spec", "replicas"]).unwrap_or(1)
}

fn template_containers(object: &Value) -> (String, String) {
    container_cells(array_at(
        object,
        &["spec", "template", "spec", "containers"],
    ))
}

pub fn deployment(deploy: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (names, images) = template_containers(deploy);
    let selector = label_selector_string(at(deploy, &["spec", "selector"]))
        .unwrap_or_else(|| "<invalid>".to_string());
    vec![
        json!(name(deploy)),
        json!(format!(
            "{}/{}",
            int_at(deploy, &["status", "readyReplicas"]).unwrap_or(0),
            desired_replicas(deploy)
        )),
        json!(int_at(deploy, &["status", "updatedReplicas"]).unwrap_or(0)),
        json!(int_at(deploy, &["status", "availableReplicas"]).unwrap_or(0)),
        object_age(deploy, now),
        json!(names),
        json!(images),
        json!(selector),
    ]
}

pub fn replica_set(rs: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (names, images) = template_containers(rs);
    vec![
        json!(name(rs)),
        json!(desired_replicas(rs)),
        json!(int_at(rs, &["status", "replicas"]).unwrap_or(0)),
        json!(int_at(rs, &["status", "readyReplicas"]).unwrap_or(0)),
        object_age(rs, now),
        json!(names),
        json!(images),
        json!(format_label_selector(at(rs, &["spec", "selector"]))),
    ]
}

pub fn stateful_set(sts: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (names, images) = template_containers(sts);
    vec![
        json!(name(sts)),
        json!(format!(
            "{}/{}",
            int_at(sts, &["status", "readyReplicas"]).unwrap_or(0),
            desired_replicas(sts)
        )),
        object_age(sts, now),
        json!(names),
        json!(images),
    ]
}

pub fn daemon_set(ds: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (names, images) = template_containers(ds);
    let status = |field: &str| json!(int_at(ds, &["status", field]).unwrap_or(0));
    vec![
        json!(name(ds)),
        status("desiredNumberScheduled"),
        status("currentNumberScheduled"),
        status("numberReady"),
        status("updatedNumberScheduled"),
        status("numberAvailable"),
        json!(format_labels(at(
            ds,
            &["spec", "template", "spec", "nodeSelector"]
        ))),
        object_age(ds, now),
        json!(names),
        json!(images),
        json!(format_label_selector(at(ds, &["spec", "selector"]))),
    ]
}

pub fn controller_revision(revision: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let controller = array_at(revision, &["metadata", "ownerReferences"])
        .iter()
        .find(|r| bool_at(r, &["controller"]) == Some(true))
        .map(|owner| {
            let kind = string_at(owner, &["kind"]);
            let api_version = string_at(owner, &["apiVersion"]);
            let group = api_version
                .rsplit_once('/')
                .map(|(group, _)| group)
                .unwrap_or_default();
            let group_kind = if group.is_empty() {
                kind
            } else {
                format!("{kind}.{group}")
            };
            let owner_name = string_at(owner, &["name"]);
            if group_kind.is_empty() {
                owner_name
            } else {
                format!("{}/{owner_name}", group_kind.to_lowercase())
            }
        })
        .unwrap_or_else(|| "<none>".to_string());
    vec![
        json!(name(revision)),
        json!(controller),
        json!(int_at(revision, &["revision"]).unwrap_or(0)),
        object_age(revision, now),
    ]
}

fn has_true_condition(object: &Value, condition_type: &str) -> bool {
    array_at(object, &["status", "conditions"])
        .iter()
        .find(|c| str_at(c, &["type"]) == Some(condition_type))
        .is_some_and(|c| str_at(c, &["status"]) == Some("True"))
}

pub fn job(job: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let succeeded = int_at(job, &["status", "succeeded"]).unwrap_or(0);
    let completions = match int_at(job, &["spec", "completions"]) {
        Some(completions) => format!("{succeeded}/{completions}"),
        None => match int_at(job, &["spec", "parallelism"]).unwrap_or(1) {
            parallelism if parallelism > 1 => format!("{succeeded}/1 of {parallelism}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let start = str_at(job, &["status", "startTime"]).and_then(parse_time);
    let completion = str_at(job, &["status", "completionTime"]).and_then(parse_time);
    let duration = match (start, completion) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(seconds_between(start, now)),
        (Some(start), Some(end)) => human_duration(seconds_between(start, end)),
    };
    let status = if has_true_condition(job, "Complete") {
        "Complete"
    } else if has_true_condition(job, "Failed") {
        "Failed"
    } else if is_deleting(job) {
        "Terminating"
    } else if has_true_condition(job, "Suspended") {
        "Suspended"
    } else if has_true_condition(job, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let (names, images) = template_containers(job);
    vec![
        json!(name(job)),
        json!(status),
        json!(completions),
        json!(duration),
        object_age(job, now),
        json!(names),
        json!(images),
        json!(format_label_selector(at(job, &["spec", "selector"]))),
    ]
}

pub fn cron_job(cron: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let last_schedule = match str_at(cron, &["status", "lastScheduleTime"]) {
        Some(time) => age(Some(time), now),
        None => "<none>".to_string(),
    };
    let suspend = match bool_at(cron, &["spec", "suspend"]) {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    };
    let job_spec = at(cron, &["spec", "jobTemplate", "spec"]).unwrap_or(&Value::Null);
    let (names, images) = container_cells(array_at(job_spec, &["template", "spec", "containers"]));
    vec![
        json!(name(cron)),
        json!(string_at(cron, &["spec", "schedule"])),
        json!(or_placeholder(
            str_at(cron, &["spec", "timeZone"]),
            "<none>"
        )),
        json!(suspend),
        json!(len_at(cron, &["status", "active"])),
        json!(last_schedule),
        object_age(cron, now),
        json!(names),
        json!(images),
        json!(format_label_selector(job_spec.get("selector"))),
    ]
}

pub fn pod_disruption_budget(pdb: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let bound = |field: &str| {
        at(pdb, &["spec", field])
            .and_then(int_or_string)
            .unwrap_or_else(|| "N/A".to_string())
    };
    vec![
        json!(name(pdb)),
        json!(bound("minAvailable")),
        json!(bound("maxUnavailable")),
        json!(int_at(pdb, &["status", "disruptionsAllowed"]).unwrap_or(0)),
        object_age(pdb, now),
    ]
}

pub fn priority_class(pc: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        json!(name(pc)),
        json!(int_at(pc, &["value"]).unwrap_or(0)),
        json!(bool_at(pc, &["globalDefault"]).unwrap_or(false)),
        object_age(pc, now),
        json!(string_at(pc, &["preemptionPolicy"])),
    ]
}

pub fn lease(lease: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        json!(name(lease)),
        json!(string_at(lease, &["spec", "holderIdentity"])),
        object_age(lease, now),
    ]
}

pub fn ingress(ing: &Value, now: DateTime<Utc>) -> Vec<Value> {
    const MAX: usize = 3;
    let rules = array_at(ing, &["spec", "rules"]);
    let mut hosts: Vec<&str> = Vec::new();
    let mut more = false;
    for rule in rules {
        if hosts.len() == MAX {
            more = true;
        }
        if let Some(host) = str_at(rule, &["host"]).filter(|h| !more && !h.is_empty()) {
            hosts.push(host);
        }
    }
    let hosts = if hosts.is_empty() {
        "*".to_string()
    } else if more {
        format!("{} + {} more...", hosts.join(","), rules.len() - MAX)
    } else {
        hosts.join(",")
    };
    let ports = if array_at(ing, &["spec", "tls"]).is_empty() {
        "80"
    } else {
        "80, 443"
    };
    vec![
        json!(name(ing)),
        json!(or_placeholder(
            str_at(ing, &["spec", "ingressClassName"]),
            "<none>"
        )),
        json!(hosts),
        json!(load_balancer_ingress(array_at(
            ing,
            &["status", "loadBalancer", "ingress"]
        ))),
        json!(ports),
        object_age(ing, now),
    ]
}

/// RoleBinding and ClusterRoleBinding: `Kind/name` of the role and the
/// subjects by kind.
pub fn role_binding(binding: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut users = Vec::new();
    let mut groups = Vec::new();
    let mut service_accounts = Vec::new();
    for subject in array_at(binding, &["subjects"]) {
        let subject_name = string_at(subject, &["name"]);
        match str_at(subject, &["kind"]) {
            Some("ServiceAccount") => service_accounts.push(format!(
                "{}/{subject_name}",
                string_at(subject, &["namespace"])
            )),
            Some("User") => users.push(subject_name),
            Some("Group") => groups.push(subject_name),
            _ => {}
        }
    }
    vec![
        json!(name(binding)),
        json!(format!(
            "{}/{}",
            string_at(binding, &["roleRef", "kind"]),
            string_at(binding, &["roleRef", "name"])
        )),
        object_age(binding, now),
        json!(users.join(", ")),
        json!(groups.join(", ")),
        json!(service_accounts.join(", ")),
    ]
}

fn is_default_storage_class(sc: &Value) -> bool {
    let annotation = |key: &str| str_at(sc, &["metadata", "annotations", key]);
    annotation("storageclass.kubernetes.io/is-default-class") == Some("true")
        || annotation("storageclass.beta.kubernetes.io/is-default-class") == Some("true")
}

pub fn storage_class(sc: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut display_name = name(sc);
    if is_default_storage_class(sc) {
        display_name.push_str(" (default)");
    }
    vec![
        json!(display_name),
        json!(string_at(sc, &["provisioner"])),
        json!(str_at(sc, &["reclaimPolicy"]).unwrap_or("Delete")),
        json!(str_at(sc, &["volumeBindingMode"]).unwrap_or("Immediate")),
        json!(bool_at(sc, &["allowVolumeExpansion"]).unwrap_or(false)),
        object_age(sc, now),
    ]
}

/// kube-apiserver's default table: the name and the creation time in RFC 3339.
pub fn default_row(object: &Value, _now: DateTime<Utc>) -> Vec<Value> {
    let created = creation_timestamp(object)
        .and_then(parse_time)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|| "0001-01-01T00:00:00Z".to_string());
    vec![json!(name(object)), json!(created)]
}
