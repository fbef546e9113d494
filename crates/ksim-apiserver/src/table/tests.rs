//! Tests of [`super::build_table`] across every served kind.

use super::*;
use crate::resources::built_in_resources;

fn now() -> DateTime<Utc> {
    duration::parse_time("2024-01-01T12:00:00Z").expect("valid time")
}

fn resource(group: &str, kind: &str) -> ResourceInfo {
    built_in_resources()
        .into_iter()
        .find(|r| r.group == group && r.kind == kind)
        .map(|r| (*r).clone())
        .unwrap_or_else(|| panic!("{group}/{kind} is built in"))
}

fn table(group: &str, kind: &str, object: &Value) -> Value {
    build_table(
        &resource(group, kind),
        None,
        &[object],
        &TableOptions::default(),
        now(),
    )
}

/// `(name, priority)` of each column, names upper-cased as kubectl shows them.
fn header(table: &Value) -> Vec<(String, i64)> {
    table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .map(|c| {
            (
                c["name"].as_str().expect("name").to_uppercase(),
                c["priority"].as_i64().expect("priority"),
            )
        })
        .collect()
}

fn object() -> Value {
    json!({"metadata": {"name": "x", "namespace": "default",
        "creationTimestamp": "2024-01-01T11:00:00Z", "uid": "u1"}})
}

#[test]
fn every_built_in_kind_has_upstream_columns() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "",
            "Pod",
            "NAME READY STATUS RESTARTS AGE IP* NODE* NOMINATED NODE* READINESS GATES*",
        ),
        (
            "",
            "Node",
            "NAME STATUS ROLES AGE VERSION INTERNAL-IP* EXTERNAL-IP* OS-IMAGE* KERNEL-VERSION* CONTAINER-RUNTIME*",
        ),
        ("", "Namespace", "NAME STATUS AGE"),
        (
            "",
            "Event",
            "LAST SEEN TYPE REASON OBJECT SUBOBJECT* SOURCE* MESSAGE FIRST SEEN* COUNT* NAME*",
        ),
        (
            "events.k8s.io",
            "Event",
            "LAST SEEN TYPE REASON OBJECT SUBOBJECT* SOURCE* MESSAGE FIRST SEEN* COUNT* NAME*",
        ),
        ("", "ConfigMap", "NAME DATA AGE"),
        ("", "Secret", "NAME TYPE DATA AGE"),
        (
            "",
            "Service",
            "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE SELECTOR*",
        ),
        ("", "ServiceAccount", "NAME SECRETS AGE"),
        ("", "Endpoints", "NAME ENDPOINTS AGE"),
        (
            "",
            "PersistentVolume",
            "NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE VOLUMEMODE*",
        ),
        (
            "",
            "PersistentVolumeClaim",
            "NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE VOLUMEMODE*",
        ),
        ("", "ResourceQuota", "NAME REQUEST LIMIT AGE"),
        ("", "LimitRange", "NAME CREATED AT"),
        (
            "apps",
            "Deployment",
            "NAME READY UP-TO-DATE AVAILABLE AGE CONTAINERS* IMAGES* SELECTOR*",
        ),
        (
            "apps",
            "ReplicaSet",
            "NAME DESIRED CURRENT READY AGE CONTAINERS* IMAGES* SELECTOR*",
        ),
        ("apps", "StatefulSet", "NAME READY AGE CONTAINERS* IMAGES*"),
        (
            "apps",
            "DaemonSet",
            "NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE CONTAINERS* IMAGES* SELECTOR*",
        ),
        ("apps", "ControllerRevision", "NAME CONTROLLER REVISION AGE"),
        (
            "batch",
            "Job",
            "NAME STATUS COMPLETIONS DURATION AGE CONTAINERS* IMAGES* SELECTOR*",
        ),
        (
            "batch",
            "CronJob",
            "NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE CONTAINERS* IMAGES* SELECTOR*",
        ),
        (
            "policy",
            "PodDisruptionBudget",
            "NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE",
        ),
        (
            "scheduling.k8s.io",
            "PriorityClass",
            "NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY",
        ),
        ("coordination.k8s.io", "Lease", "NAME HOLDER AGE"),
        (
            "networking.k8s.io",
            "Ingress",
            "NAME CLASS HOSTS ADDRESS PORTS AGE",
        ),
        ("rbac.authorization.k8s.io", "Role", "NAME CREATED AT"),
        (
            "rbac.authorization.k8s.io",
            "RoleBinding",
            "NAME ROLE AGE USERS* GROUPS* SERVICEACCOUNTS*",
        ),
        (
            "rbac.authorization.k8s.io",
            "ClusterRole",
            "NAME CREATED AT",
        ),
        (
            "rbac.authorization.k8s.io",
            "ClusterRoleBinding",
            "NAME ROLE AGE USERS* GROUPS* SERVICEACCOUNTS*",
        ),
        (
            "storage.k8s.io",
            "StorageClass",
            "NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE",
        ),
        (
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            "NAME CREATED AT",
        ),
    ];
    for (group, kind, want) in cases {
        let t = table(group, kind, &object());
        let got: Vec<String> = header(&t)
            .into_iter()
            .map(|(name, priority)| {
                if priority > 0 {
                    format!("{name}*")
                } else {
                    name
                }
            })
            .collect();
        assert_eq!(got.join(" "), *want, "{group}/{kind}");
        let cells = t["rows"][0]["cells"].as_array().expect("cells");
        assert_eq!(
            cells.len(),
            got.len(),
            "{group}/{kind}: one cell per column"
        );
    }
}

#[test]
fn every_served_resource_gets_a_row_per_object_without_panicking() {
    let odd = json!({"metadata": {"name": 5, "creationTimestamp": "yesterday"},
        "spec": "nope", "status": [1, 2]});
    for resource in built_in_resources() {
        for object in [json!({}), json!(null), odd.clone(), object()] {
            let t = build_table(&resource, None, &[&object], &TableOptions::default(), now());
            let columns = t["columnDefinitions"].as_array().expect("columns").len();
            let cells = t["rows"][0]["cells"].as_array().expect("cells").len();
            assert_eq!(cells, columns, "{}", resource.qualified_plural());
        }
    }
}

#[test]
fn name_column_has_name_format_and_metadata_description() {
    let t = table("", "ConfigMap", &object());
    let name = &t["columnDefinitions"][0];
    assert_eq!(name["format"], json!("name"));
    assert_eq!(name["type"], json!("string"));
    assert!(
        name["description"]
            .as_str()
            .is_some_and(|d| d.starts_with("Name must be unique within a namespace")),
        "{name}"
    );
    assert_eq!(t["columnDefinitions"][1]["format"], json!(""));
}

#[test]
fn include_object_controls_row_object() {
    let object = object();
    let resource = resource("", "ConfigMap");
    let build = |include_object| {
        build_table(
            &resource,
            None,
            &[&object],
            &TableOptions {
                include_object,
                no_headers: false,
            },
            now(),
        )
    };
    assert_eq!(build(IncludeObject::None)["rows"][0].get("object"), None);
    assert_eq!(
        build(IncludeObject::Metadata)["rows"][0]["object"],
        json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
               "metadata": object["metadata"]})
    );
    assert_eq!(build(IncludeObject::Object)["rows"][0]["object"], object);
    assert_eq!(IncludeObject::parse(""), Some(IncludeObject::Metadata));
    assert_eq!(IncludeObject::parse("Object"), Some(IncludeObject::Object));
    assert_eq!(IncludeObject::parse("None"), Some(IncludeObject::None));
    assert_eq!(IncludeObject::parse("all"), None);
    assert_eq!(
        IncludeObject::from_query(None).ok(),
        Some(IncludeObject::Metadata)
    );
    let error = IncludeObject::from_query(Some("all")).expect_err("unknown value");
    assert_eq!(error.to_status()["code"], json!(400));
    assert_eq!(
        error.to_status()["message"],
        json!("unrecognized includeObject value: \"all\"")
    );
}

#[test]
fn set_table_version_relabels_table_and_partial_metadata() {
    let object = object();
    let mut t = build_table(
        &resource("", "ConfigMap"),
        None,
        &[&object],
        &TableOptions::default(),
        now(),
    );
    set_table_version(&mut t, "meta.k8s.io/v1beta1");
    assert_eq!(t["apiVersion"], json!("meta.k8s.io/v1beta1"));
    assert_eq!(
        t["rows"][0]["object"]["apiVersion"],
        json!("meta.k8s.io/v1beta1")
    );
}

#[test]
fn table_envelope_and_no_headers() {
    let t = build_table(
        &resource("", "Pod"),
        None,
        &[],
        &TableOptions {
            include_object: IncludeObject::Metadata,
            no_headers: true,
        },
        now(),
    );
    assert_eq!(
        t,
        json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {},
               "columnDefinitions": [], "rows": []})
    );
}

#[test]
fn finished_pods_carry_completed_row_condition() {
    let mut pod = object();
    pod["status"] = json!({"phase": "Succeeded"});
    let t = table("", "Pod", &pod);
    assert_eq!(
        t["rows"][0]["conditions"],
        json!([{"type": "Completed", "status": "True", "reason": "Succeeded",
                "message": "The pod has completed successfully."}])
    );
    pod["status"] = json!({"phase": "Running"});
    assert_eq!(table("", "Pod", &pod)["rows"][0].get("conditions"), None);
}

fn cells(group: &str, kind: &str, object: &Value) -> Vec<Value> {
    table(group, kind, object)["rows"][0]["cells"]
        .as_array()
        .expect("cells")
        .clone()
}

#[test]
fn workload_cells_match_upstream_formats() {
    let deployment = json!({
        "metadata": {"name": "web", "creationTimestamp": "2024-01-01T11:58:00Z"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"spec": {"containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "busybox"}]}}},
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    });
    assert_eq!(
        cells("apps", "Deployment", &deployment),
        vec![
            json!("web"),
            json!("2/3"),
            json!(3),
            json!(2),
            json!("2m"),
            json!("a,b"),
            json!("nginx,busybox"),
            json!("app=web")
        ]
    );
    assert_eq!(
        cells("apps", "ReplicaSet", &deployment),
        vec![
            json!("web"),
            json!(3),
            json!(0),
            json!(2),
            json!("2m"),
            json!("a,b"),
            json!("nginx,busybox"),
            json!("app=web")
        ]
    );
    assert_eq!(
        cells("apps", "StatefulSet", &deployment)[..3],
        [json!("web"), json!("2/3"), json!("2m")]
    );
    let ds = json!({"metadata": {"name": "ds"}, "spec": {"template": {"spec": {
        "nodeSelector": {"kubernetes.io/os": "linux"}}}},
        "status": {"desiredNumberScheduled": 4, "numberReady": 3}});
    assert_eq!(
        cells("apps", "DaemonSet", &ds)[..8],
        [
            json!("ds"),
            json!(4),
            json!(0),
            json!(3),
            json!(0),
            json!(0),
            json!("kubernetes.io/os=linux"),
            json!("<unknown>")
        ]
    );
}

#[test]
fn job_status_completions_and_duration() {
    let job = |spec: Value, status: Value| json!({"metadata": {"name": "j"}, "spec": spec, "status": status});
    let cases = [
        (
            job(
                json!({"completions": 3}),
                json!({"succeeded": 1, "startTime": "2024-01-01T11:59:00Z"}),
            ),
            "Running",
            "1/3",
            "60s",
        ),
        (
            job(json!({"parallelism": 2}), json!({})),
            "Running",
            "0/1 of 2",
            "",
        ),
        (
            job(
                json!({}),
                json!({"succeeded": 1, "startTime": "2024-01-01T11:00:00Z",
            "completionTime": "2024-01-01T11:00:05Z",
            "conditions": [{"type": "Complete", "status": "True"}]}),
            ),
            "Complete",
            "1/1",
            "5s",
        ),
        (
            job(
                json!({}),
                json!({"conditions": [{"type": "Failed", "status": "True"}]}),
            ),
            "Failed",
            "0/1",
            "",
        ),
        (
            job(
                json!({"suspend": true}),
                json!({"conditions": [{"type": "Suspended", "status": "True"}]}),
            ),
            "Suspended",
            "0/1",
            "",
        ),
        (
            job(
                json!({}),
                json!({"conditions": [{"type": "FailureTarget", "status": "True"}]}),
            ),
            "FailureTarget",
            "0/1",
            "",
        ),
    ];
    for (job, status, completions, duration) in cases {
        let row = cells("batch", "Job", &job);
        assert_eq!(
            row[1..4],
            [json!(status), json!(completions), json!(duration)],
            "{job}"
        );
    }
}

#[test]
fn cron_job_and_pdb_and_priority_class_cells() {
    let cron = json!({"metadata": {"name": "c"}, "spec": {"schedule": "*/5 * * * *", "suspend": false},
        "status": {"active": [{"name": "c-1"}], "lastScheduleTime": "2024-01-01T11:55:00Z"}});
    assert_eq!(
        cells("batch", "CronJob", &cron)[..6],
        [
            json!("c"),
            json!("*/5 * * * *"),
            json!("<none>"),
            json!("False"),
            json!(1),
            json!("5m")
        ]
    );
    let pdb = json!({"metadata": {"name": "p"}, "spec": {"minAvailable": "50%"},
        "status": {"disruptionsAllowed": 1}});
    assert_eq!(
        cells("policy", "PodDisruptionBudget", &pdb)[..4],
        [json!("p"), json!("50%"), json!("N/A"), json!(1)]
    );
    let pc = json!({"metadata": {"name": "high"}, "value": 1000, "globalDefault": true,
        "preemptionPolicy": "Never"});
    assert_eq!(
        cells("scheduling.k8s.io", "PriorityClass", &pc),
        vec![
            json!("high"),
            json!(1000),
            json!(true),
            json!("<unknown>"),
            json!("Never")
        ]
    );
}

#[test]
fn service_cells_by_type() {
    let svc = |spec: Value, status: Value| json!({"metadata": {"name": "s"}, "spec": spec, "status": status});
    let cases = [
        (
            svc(
                json!({"type": "ClusterIP", "clusterIP": "10.96.0.1",
            "ports": [{"port": 443, "protocol": "TCP"}], "selector": {"app": "a"}}),
                json!({}),
            ),
            ["ClusterIP", "10.96.0.1", "<none>", "443/TCP"],
            "app=a",
        ),
        (
            svc(
                json!({"type": "NodePort", "clusterIPs": ["10.96.0.2"],
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}),
                json!({}),
            ),
            ["NodePort", "10.96.0.2", "<none>", "80:30080/TCP,53/UDP"],
            "<none>",
        ),
        (
            svc(
                json!({"type": "LoadBalancer", "clusterIP": "10.96.0.3"}),
                json!({}),
            ),
            ["LoadBalancer", "10.96.0.3", "<pending>", "<none>"],
            "<none>",
        ),
        (
            svc(
                json!({"type": "LoadBalancer", "clusterIP": "10.96.0.3", "externalIPs": ["1.1.1.1"]}),
                json!({"loadBalancer": {"ingress": [{"ip": "2.2.2.2"}, {"hostname": "lb.example.com"}]}}),
            ),
            [
                "LoadBalancer",
                "10.96.0.3",
                "2.2.2.2,lb.example.com,1.1.1.1",
                "<none>",
            ],
            "<none>",
        ),
        (
            svc(
                json!({"type": "ExternalName", "externalName": "db.example.com"}),
                json!({}),
            ),
            ["ExternalName", "<none>", "db.example.com", "<none>"],
            "<none>",
        ),
    ];
    for (service, want, selector) in cases {
        let row = cells("", "Service", &service);
        assert_eq!(row[1..5], want.map(|w| json!(w)), "{service}");
        assert_eq!(row[6], json!(selector), "{service}");
    }
}

#[test]
fn core_kind_cells() {
    let cm =
        json!({"metadata": {"name": "cm"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": ""}});
    assert_eq!(cells("", "ConfigMap", &cm)[1], json!(3));
    let secret = json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"a": ""}, "stringData": {"a": "x", "b": "y"}});
    assert_eq!(
        cells("", "Secret", &secret)[1..3],
        [json!("Opaque"), json!(2)]
    );
    let ns = json!({"metadata": {"name": "default"}, "status": {"phase": "Active"}});
    assert_eq!(cells("", "Namespace", &ns)[1], json!("Active"));
    let lease = json!({"metadata": {"name": "n1"}, "spec": {"holderIdentity": "n1"}});
    assert_eq!(
        cells("coordination.k8s.io", "Lease", &lease)[1],
        json!("n1")
    );
    let ep = json!({"metadata": {"name": "e"}, "subsets": [{"addresses": [
        {"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "10.0.0.3"}, {"ip": "10.0.0.4"}],
        "ports": [{"port": 80}]}]});
    assert_eq!(
        cells("", "Endpoints", &ep)[1],
        json!("10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 1 more...")
    );
    assert_eq!(cells("", "Endpoints", &object())[1], json!("<none>"));
    let quota = json!({"metadata": {"name": "q"}, "status": {
        "hard": {"pods": "10", "limits.cpu": "4", "requests.cpu": "2"},
        "used": {"pods": "3", "requests.cpu": "500m"}}});
    assert_eq!(
        cells("", "ResourceQuota", &quota)[1..3],
        [
            json!("pods: 3/10, requests.cpu: 500m/2"),
            json!("limits.cpu: 0/4")
        ]
    );
}

#[test]
fn storage_cells() {
    let pvc = json!({"metadata": {"name": "data"}, "spec": {"volumeName": "pv1", "storageClassName": "standard"},
        "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}});
    assert_eq!(
        cells("", "PersistentVolumeClaim", &pvc),
        vec![
            json!("data"),
            json!("Bound"),
            json!("pv1"),
            json!("1Gi"),
            json!("RWO"),
            json!("standard"),
            json!("<unset>"),
            json!("<unknown>"),
            json!("<unset>")
        ]
    );
    let pv = json!({"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Retain",
        "claimRef": {"namespace": "default", "name": "data"}, "volumeMode": "Filesystem"},
        "status": {"phase": "Bound"}});
    assert_eq!(
        cells("", "PersistentVolume", &pv),
        vec![
            json!("pv1"),
            json!("1Gi"),
            json!("RWO"),
            json!("Retain"),
            json!("Bound"),
            json!("default/data"),
            json!(""),
            json!("<unset>"),
            json!(""),
            json!("<unknown>"),
            json!("Filesystem")
        ]
    );
    let sc = json!({"metadata": {"name": "standard", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "rancher.io/local-path"});
    assert_eq!(
        cells("storage.k8s.io", "StorageClass", &sc)[..5],
        [
            json!("standard (default)"),
            json!("rancher.io/local-path"),
            json!("Delete"),
            json!("Immediate"),
            json!(false)
        ]
    );
}

#[test]
fn rbac_and_ingress_and_revision_cells() {
    let binding = json!({"metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "devs"},
                     {"kind": "ServiceAccount", "namespace": "kube-system", "name": "sa"}, {"kind": "User", "name": "bob"}]});
    assert_eq!(
        cells("rbac.authorization.k8s.io", "RoleBinding", &binding),
        vec![
            json!("b"),
            json!("ClusterRole/view"),
            json!("<unknown>"),
            json!("alice, bob"),
            json!("devs"),
            json!("kube-system/sa")
        ]
    );
    let ingress = json!({"metadata": {"name": "i"}, "spec": {"rules": [{"host": "a.com"}, {}],
        "tls": [{}]}, "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}});
    assert_eq!(
        cells("networking.k8s.io", "Ingress", &ingress)[1..5],
        [
            json!("<none>"),
            json!("a.com"),
            json!("1.2.3.4"),
            json!("80, 443")
        ]
    );
    let revision = json!({"metadata": {"name": "web-5d", "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "controller": true}]}, "revision": 2});
    assert_eq!(
        cells("apps", "ControllerRevision", &revision)[1..3],
        [json!("statefulset.apps/web"), json!(2)]
    );
}

#[test]
fn default_table_prints_creation_time() {
    let role = json!({"metadata": {"name": "r", "creationTimestamp": "2024-01-01T11:00:00Z"}});
    assert_eq!(
        cells("rbac.authorization.k8s.io", "Role", &role),
        vec![json!("r"), json!("2024-01-01T11:00:00Z")]
    );
    let t = table("rbac.authorization.k8s.io", "Role", &role);
    assert_eq!(t["columnDefinitions"][1]["type"], json!("date"));
}

#[test]
fn events_of_both_apis_print_alike() {
    let core = json!({"metadata": {"name": "e1"}, "type": "Warning", "reason": "FailedScheduling",
        "involvedObject": {"kind": "Pod", "name": "web-0", "fieldPath": "spec.containers{app}"},
        "message": " 0/3 nodes are available. ", "source": {"component": "default-scheduler"},
        "firstTimestamp": "2024-01-01T11:00:00Z", "lastTimestamp": "2024-01-01T11:59:00Z", "count": 4});
    let new = json!({"metadata": {"name": "e1"}, "type": "Warning", "reason": "FailedScheduling",
        "regarding": {"kind": "Pod", "name": "web-0", "fieldPath": "spec.containers{app}"},
        "note": " 0/3 nodes are available. ", "reportingController": "default-scheduler",
        "deprecatedFirstTimestamp": "2024-01-01T11:00:00Z",
        "deprecatedLastTimestamp": "2024-01-01T11:59:00Z", "deprecatedCount": 4});
    let want = vec![
        json!("60s"),
        json!("Warning"),
        json!("FailedScheduling"),
        json!("pod/web-0"),
        json!("spec.containers{app}"),
        json!("default-scheduler"),
        json!("0/3 nodes are available."),
        json!("60m"),
        json!(4),
        json!("e1"),
    ];
    assert_eq!(cells("", "Event", &core), want);
    assert_eq!(cells("events.k8s.io", "Event", &new), want);

    let series = json!({"metadata": {"name": "e2"}, "eventTime": "2024-01-01T11:00:00.000000Z",
        "series": {"count": 7, "lastObservedTime": "2024-01-01T11:58:00.000000Z"},
        "regarding": {"kind": "Node"}, "reportingController": "kubelet", "reportingInstance": "n1"});
    let row = cells("events.k8s.io", "Event", &series);
    assert_eq!(row[0], json!("2m"));
    assert_eq!(row[3], json!("node"));
    assert_eq!(row[5], json!("kubelet, n1"));
    assert_eq!(row[7..9], [json!("60m"), json!(7)]);
}

#[test]
fn custom_resources_use_printer_columns() {
    let mut crd = resource("apps", "Deployment");
    crd.group = "example.com".to_string();
    crd.kind = "Widget".to_string();
    crd.custom = true;
    let columns = json!([
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]);
    let widget = json!({"metadata": {"name": "w", "creationTimestamp": "2024-01-01T11:00:00Z"}, "spec": {"size": 2}});
    let t = build_table(
        &crd,
        Some(&columns),
        &[&widget],
        &TableOptions::default(),
        now(),
    );
    assert_eq!(
        header(&t),
        vec![
            ("NAME".to_string(), 0),
            ("SIZE".to_string(), 0),
            ("AGE".to_string(), 0)
        ]
    );
    assert_eq!(t["rows"][0]["cells"], json!(["w", 2, "60m"]));

    let t = build_table(&crd, None, &[&widget], &TableOptions::default(), now());
    assert_eq!(
        header(&t),
        vec![("NAME".to_string(), 0), ("AGE".to_string(), 0)]
    );
    assert_eq!(t["rows"][0]["cells"], json!(["w", "60m"]));
}

#[test]
fn written_table_is_the_built_table_with_list_metadata() {
    let pods = resource("", "Pod");
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        "status": {"phase": "Succeeded", "containerStatuses": [{"name": "c", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}});
    let now = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:05:00Z")
        .expect("valid time")
        .with_timezone(&chrono::Utc);
    for include_object in [
        IncludeObject::None,
        IncludeObject::Metadata,
        IncludeObject::Object,
    ] {
        let options = TableOptions {
            include_object,
            no_headers: false,
        };
        let mut built = build_table(&pods, None, &[&pod], &options, now);
        built["metadata"] = json!({"resourceVersion": "7"});
        let written = write_table(
            &pods,
            None,
            &[&pod],
            &options,
            now,
            "meta.k8s.io/v1",
            &json!({"resourceVersion": "7"}),
        );
        let written: Value = serde_json::from_slice(&written).expect("valid JSON");
        assert_eq!(written, built, "{include_object:?}");
    }
}
