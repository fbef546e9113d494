//! End-to-end with the real kubectl: a StatefulSet's volumeClaimTemplates
//! become PersistentVolumeClaims (`kubectl get pvc`), its pods mount them,
//! and with `whenScaled: Delete` scaling down removes the claim of the
//! removed ordinal (the garbage collector follows the pod's ownership); a
//! DaemonSet's ControllerRevisions serve `kubectl rollout history|undo`.

use std::path::Path;

use ksim_testutils::TestCluster;
use ksim_testutils::kubectl::table_rows;
use ksim_testutils::poll_until;

const MANIFEST: &str = "\
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  replicas: 3
  serviceName: db
  podManagementPolicy: Parallel
  persistentVolumeClaimRetentionPolicy:
    whenScaled: Delete
  selector:
    matchLabels:
      app: db
  template:
    metadata:
      labels:
        app: db
    spec:
      containers:
      - name: db
        image: postgres
        volumeMounts:
        - name: data
          mountPath: /var/lib/postgresql
  volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1Gi
";

#[test]
fn kubectl_get_pvc_shows_the_claims_and_scaling_down_deletes_one() {
    let cluster = TestCluster::start(Path::new(env!("CARGO_BIN_EXE_ksim")));
    cluster.scale_nodes(2);
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], MANIFEST)
        .success();
    cluster
        .kubectl(&["rollout", "status", "sts/db", "--timeout=60s"])
        .success();

    let claims = cluster.kubectl(&["get", "pvc"]);
    claims.success();
    let rows = table_rows(&claims);
    let listed: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r[0].as_str(), r[1].as_str()))
        .collect();
    assert_eq!(
        listed,
        [
            ("data-db-0", "Pending"),
            ("data-db-1", "Pending"),
            ("data-db-2", "Pending")
        ],
        "no provisioner: the claims stay Pending\n{}",
        claims.stdout
    );
    let claim_of_db_1 = cluster
        .kubectl(&[
            "get",
            "pod",
            "db-1",
            "-o",
            "jsonpath={.spec.volumes[?(@.name==\"data\")].persistentVolumeClaim.claimName}",
        ])
        .success()
        .stdout
        .clone();
    assert_eq!(claim_of_db_1, "data-db-1");

    cluster
        .kubectl(&["scale", "sts", "db", "--replicas", "2"])
        .success();
    cluster.wait_for(&["get", "pvc", "-o", "name"], |out| {
        out.lines().collect::<Vec<_>>()
            == [
                "persistentvolumeclaim/data-db-0",
                "persistentvolumeclaim/data-db-1",
            ]
    });
    let pods = cluster
        .kubectl(&["get", "pods", "-l", "app=db", "-o", "name"])
        .success()
        .stdout
        .clone();
    assert_eq!(pods.lines().collect::<Vec<_>>(), ["pod/db-0", "pod/db-1"]);
}

#[test]
fn kubectl_rollout_history_and_undo_read_a_daemon_sets_revisions() {
    let cluster = TestCluster::start(Path::new(env!("CARGO_BIN_EXE_ksim")));
    cluster.scale_nodes(2);
    let manifest = "\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels:
      app: agent
  template:
    metadata:
      labels:
        app: agent
    spec:
      containers:
      - name: agent
        image: agent:1
";
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], manifest)
        .success();
    cluster
        .kubectl(&["rollout", "status", "ds/agent", "--timeout=60s"])
        .success();
    cluster
        .kubectl(&["set", "image", "ds/agent", "agent=agent:2"])
        .success();
    cluster
        .kubectl(&["rollout", "status", "ds/agent", "--timeout=60s"])
        .success();
    let revisions = |cluster: &TestCluster| -> Vec<String> {
        let history = cluster.kubectl(&["rollout", "history", "ds/agent"]);
        history.success();
        history
            .stdout
            .lines()
            .skip_while(|l| !l.starts_with("REVISION"))
            .skip(1)
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect()
    };
    assert_eq!(revisions(&cluster), ["1", "2"]);
    cluster.kubectl(&["rollout", "undo", "ds/agent"]).success();
    cluster.wait_for(
        &[
            "get",
            "ds",
            "agent",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        ],
        |image| image == "agent:1",
    );
    cluster
        .kubectl(&["rollout", "status", "ds/agent", "--timeout=60s"])
        .success();
    poll_until("the history after undo", || {
        let revisions = revisions(&cluster);
        if revisions == ["2", "3"] {
            Ok(())
        } else {
            Err(format!("{revisions:?}"))
        }
    });
}
