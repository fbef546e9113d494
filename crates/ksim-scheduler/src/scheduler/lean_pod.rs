//! How the scheduler's pod informer decodes pods: [`PodForScheduling`], a
//! pod with everything the scheduler reads (all of `metadata` except
//! `managedFields`, all of `spec`) and, of `status`, only the fields a
//! scheduling decision or a status write reads: `phase` (finished pods
//! hold no room), `nominatedNodeName`, `conditions` (the PodScheduled
//! condition a failed cycle compares with) and `startTime` (preemption's
//! victim order). The rest of the status (container statuses, pod and
//! host IPs, QoS class, messages) is skipped unparsed: on a restored
//! cluster of 100,000 Running pods it is a large share of every pod's
//! bytes, and nothing in the scheduler looks at it (the scheduler never
//! writes a pod back whole; it binds, patches and deletes by name).
//!
//! The decoded value becomes a plain `Pod` with those fields set
//! ([`PodForScheduling::into_pod`]), so the cache, the queue and the
//! plugins see the same `Pod` they would with a full decode.

use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::Deserialize;

/// A pod as the scheduler decodes it (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct PodForScheduling {
    #[serde(default, deserialize_with = "null_as_default")]
    metadata: ObjectMeta,
    // Boxed: the decoded value is moved through kube's list and watch
    // streams and the informer's channel; a whole pod is 2 KB.
    #[serde(default)]
    spec: Option<Box<PodSpec>>,
    #[serde(default)]
    status: Option<Box<StatusForScheduling>>,
}

/// `null` as the default value (as k8s-openapi reads `"metadata": null`).
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// The part of a pod's status the scheduler reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusForScheduling {
    #[serde(default)]
    phase: Option<String>,
    #[serde(default)]
    nominated_node_name: Option<String>,
    #[serde(default)]
    conditions: Option<Vec<PodCondition>>,
    #[serde(default)]
    start_time: Option<Time>,
}

impl PodForScheduling {
    /// The pod, shared (the one place it is built: the cache and the
    /// queue keep this allocation).
    pub fn into_shared_pod(self) -> Arc<Pod> {
        Arc::new(self.into_pod())
    }

    /// The pod, with the fields decoded.
    pub fn into_pod(self) -> Pod {
        Pod {
            metadata: self.metadata,
            spec: self.spec.map(|spec| *spec),
            status: self.status.map(|status| PodStatus {
                phase: status.phase,
                nominated_node_name: status.nominated_node_name,
                conditions: status.conditions,
                start_time: status.start_time,
                ..PodStatus::default()
            }),
        }
    }
}

impl kube::Resource for PodForScheduling {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        <Pod as kube::Resource>::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        <Pod as kube::Resource>::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        <Pod as kube::Resource>::version(dt)
    }
    fn api_version(dt: &()) -> Cow<'_, str> {
        <Pod as kube::Resource>::api_version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        <Pod as kube::Resource>::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Pod;
    use ksim_core::selector::LabelSelectorRequirements;
    use ksim_runtime::WithoutManagedFields;
    use serde_json::{Value, json};

    use super::PodForScheduling;
    use crate::framework::{HostPort, PodInfo, Snapshot};
    use crate::testing::node;

    /// A bound pod using everything the cache accounts (requests with init
    /// containers and overhead, host ports, pod affinity and anti-affinity,
    /// labels for spreading) and a status with everything a kubelet writes.
    fn bound_pod(name: &str, node: &str) -> Value {
        let term = json!({"labelSelector": {"matchLabels": {"app": "db"}},
            "topologyKey": "topology.kubernetes.io/zone"});
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "prod", "uid": format!("uid-{name}"),
                "resourceVersion": "42", "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"app": "db", "tier": "backend"},
                "annotations": {"note": "kept"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "db", "uid": "rs-uid", "controller": true}],
                "managedFields": [{"manager": "kubectl", "operation": "Update",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]},
            "spec": {
                "nodeName": node,
                "priority": 100,
                "schedulerName": "default-scheduler",
                "initContainers": [{"name": "init", "image": "busybox",
                    "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
                    {"name": "sidecar", "image": "envoy", "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "100m"}}}],
                "containers": [{"name": "db", "image": "postgres",
                    "resources": {"requests": {"cpu": "500m", "memory": "512Mi",
                        "example.com/gpu": "1"}},
                    "ports": [{"containerPort": 5432, "hostPort": 5432},
                        {"containerPort": 53, "hostPort": 53, "protocol": "UDP",
                            "hostIP": "10.0.0.1"}]},
                    {"name": "no-requests", "image": "busybox"}],
                "overhead": {"cpu": "10m"},
                "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
                "affinity": {
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [term.clone()],
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 10, "podAffinityTerm": term.clone()}]},
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"labelSelector": {"matchLabels": {"app": "db"}},
                                "topologyKey": "kubernetes.io/hostname"}],
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 5, "podAffinityTerm": term}]}},
                "topologySpreadConstraints": [{"maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "db"}}}]
            },
            "status": {
                "phase": "Running",
                "nominatedNodeName": "elsewhere",
                "startTime": "2026-01-01T00:00:01Z",
                "conditions": [{"type": "PodScheduled", "status": "True",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"},
                    {"type": "Ready", "status": "True"}],
                "hostIP": "10.0.0.1", "hostIPs": [{"ip": "10.0.0.1"}],
                "podIP": "10.64.0.1", "podIPs": [{"ip": "10.64.0.1"}],
                "qosClass": "Burstable", "message": "m", "reason": "r",
                "containerStatuses": [{"name": "db", "image": "postgres", "imageID": "",
                    "ready": true, "restartCount": 0, "started": true,
                    "state": {"running": {"startedAt": "2026-01-01T00:00:02Z"}}}],
                "initContainerStatuses": [{"name": "init", "image": "busybox", "imageID": "",
                    "ready": true, "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0,
                        "startedAt": "2026-01-01T00:00:01Z",
                        "finishedAt": "2026-01-01T00:00:02Z"}}}]
            }
        })
    }

    /// As kube-scheduler's informers and ksim's did before: the whole pod
    /// without managedFields.
    fn decode_full(value: &Value) -> Pod {
        serde_json::from_str::<WithoutManagedFields<Pod>>(&value.to_string())
            .expect("a pod")
            .0
    }

    fn decode_lean(value: &Value) -> Pod {
        serde_json::from_str::<WithoutManagedFields<PodForScheduling>>(&value.to_string())
            .expect("a pod")
            .0
            .into_pod()
    }

    #[test]
    fn the_lean_decode_is_the_full_one_without_the_unread_status() {
        let value = bound_pod("db-0", "n1");
        let lean = decode_lean(&value);
        let mut full = decode_full(&value);
        assert_eq!(lean.metadata, full.metadata);
        assert_eq!(lean.spec, full.spec);
        let status = full.status.take().expect("a status");
        let kept = lean.status.clone().expect("a status");
        assert_eq!(kept.phase.as_deref(), Some("Running"));
        assert_eq!(kept.nominated_node_name.as_deref(), Some("elsewhere"));
        assert_eq!(kept.conditions, status.conditions);
        assert_eq!(kept.start_time, status.start_time);
        assert!(status.container_statuses.is_some() && kept.container_statuses.is_none());
        assert!(kept.pod_ip.is_none() && kept.qos_class.is_none());
        assert!(lean.metadata.managed_fields.is_none());

        // Through the watch event kube decodes, and without optional parts.
        let event = json!({"type": "ADDED", "object": value}).to_string();
        let decoded: kube::core::WatchEvent<WithoutManagedFields<PodForScheduling>> =
            serde_json::from_str(&event).expect("an event");
        assert!(matches!(decoded, kube::core::WatchEvent::Added(_)));
        let bare = decode_lean(&json!({"metadata": null, "spec": null}));
        assert_eq!(bare, Pod::default());
        assert_eq!(decode_lean(&json!({})), Pod::default());
    }

    #[test]
    fn bad_pods_are_errors_not_panics() {
        for text in [
            r#"{"metadata": 5}"#,
            r#"{"status": {"phase": 3}}"#,
            r#"{"status": {"startTime": "yesterday"}}"#,
            r#"[1]"#,
        ] {
            assert!(
                serde_json::from_str::<WithoutManagedFields<PodForScheduling>>(text).is_err(),
                "{text}"
            );
        }
    }

    #[test]
    fn a_lean_bound_pod_counts_in_the_cache_as_a_full_one() {
        let zoned = |name: &str, zone: &str| {
            node(name)
                .cpu("16")
                .memory("64Gi")
                .label("topology.kubernetes.io/zone", zone)
                .label("kubernetes.io/hostname", name)
                .obj()
        };
        let nodes = || [zoned("n1", "a"), zoned("n2", "a"), zoned("n3", "b")];
        let pods = [("db-0", "n1"), ("db-1", "n3"), ("db-2", "n3")];
        let full = Snapshot::new(
            nodes(),
            pods.iter().map(|(p, n)| decode_full(&bound_pod(p, n))),
        );
        let lean = Snapshot::new(
            nodes(),
            pods.iter().map(|(p, n)| decode_lean(&bound_pod(p, n))),
        );
        for name in ["n1", "n2", "n3"] {
            let (a, b) = (full.get(name).expect("node"), lean.get(name).expect("node"));
            assert_eq!(a.requested, b.requested, "{name}");
            assert_eq!(a.non_zero_requested, b.non_zero_requested, "{name}");
            assert_eq!(a.used_ports.len(), b.used_ports.len(), "{name}");
            assert_eq!(a.pods.len(), b.pods.len(), "{name}");
            assert_eq!(a.pods_with_affinity.len(), b.pods_with_affinity.len());
            assert_eq!(
                a.pods_with_required_anti_affinity.len(),
                b.pods_with_required_anti_affinity.len()
            );
            for (x, y) in a.pods.iter().zip(&b.pods) {
                assert_eq!(x.requests, y.requests);
                assert_eq!(x.non_zero_milli_cpu, y.non_zero_milli_cpu);
                assert_eq!(x.non_zero_memory, y.non_zero_memory);
                assert_eq!(x.host_ports, y.host_ports);
                assert_eq!(x.required_affinity_terms, y.required_affinity_terms);
                assert_eq!(
                    x.required_anti_affinity_terms,
                    y.required_anti_affinity_terms
                );
                assert_eq!(x.preferred_affinity_terms, y.preferred_affinity_terms);
                assert_eq!(
                    x.preferred_anti_affinity_terms,
                    y.preferred_anti_affinity_terms
                );
            }
        }
        // The accounting itself is what the pod asks: sidecar and overhead
        // included, the init container's peak counted, ports held.
        let n3 = lean.get("n3").expect("n3");
        assert_eq!(n3.requested.milli_cpu, 2 * 2_010);
        assert_eq!(
            n3.requested.scalar_resources.get("example.com/gpu"),
            Some(&2)
        );
        let port = |ip: &str, protocol: &str, port: i32| HostPort {
            ip: ip.to_string(),
            protocol: protocol.to_string(),
            port,
        };
        assert!(n3.used_ports.check_conflict(&port("0.0.0.0", "TCP", 5432)));
        assert!(n3.used_ports.check_conflict(&port("10.0.0.1", "UDP", 53)));
        assert_eq!(n3.pods_with_required_anti_affinity.len(), 2);
        let info = PodInfo::new(Arc::new(decode_lean(&bound_pod("x", "n1")))).expect("valid");
        assert_eq!(info.required_affinity_terms.len(), 1);
        assert_eq!(info.preferred_anti_affinity_terms.len(), 1);

        let selector = Some(
            LabelSelectorRequirements::from_label_selector(&crate::testing::selector(&[(
                "app", "db",
            )]))
            .expect("a selector"),
        );
        for key in ["topology.kubernetes.io/zone", "kubernetes.io/hostname"] {
            let (a, b) = (
                full.domain_counts("prod", &selector, key),
                lean.domain_counts("prod", &selector, key),
            );
            assert_eq!(a, b, "{key}");
        }
        let zones = lean.domain_counts("prod", &selector, "topology.kubernetes.io/zone");
        assert_eq!((zones.get("a"), zones.get("b")), (Some(&1), Some(&2)));

        // A new db pod (spread, anti-affinity per node, affinity per zone,
        // host port) goes to the same node, for the same reasons, either way.
        let mut incoming = bound_pod("db-3", "");
        incoming["spec"]
            .as_object_mut()
            .expect("a spec")
            .remove("nodeName");
        incoming.as_object_mut().expect("a pod").remove("status");
        incoming["spec"]["containers"][0]["resources"]["requests"]
            .as_object_mut()
            .expect("requests")
            .remove("example.com/gpu");
        let incoming = decode_full(&incoming);
        let profile = crate::framework::Profile::default_profile();
        let place = |snapshot: &Snapshot| {
            let mut state = crate::framework::ScheduleState::seeded(7);
            crate::framework::schedule_one(&profile, snapshot, &incoming, &mut state)
                .map(|result| result.suggested_host)
                .map_err(|error| error.to_string())
        };
        assert_eq!(place(&full), Ok("n2".to_string()));
        assert_eq!(place(&lean), place(&full));
    }
}
