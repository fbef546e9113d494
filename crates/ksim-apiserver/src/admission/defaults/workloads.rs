//! Defaults of the apps and batch kinds (`pkg/apis/apps/v1/defaults.go`,
//! `pkg/apis/batch/v1/defaults.go`) and the Job selector kube-apiserver's
//! job strategy generates.

use serde_json::{Map, Value, json};

use super::pod::default_pod_spec;
use crate::admission::json::{
    default_field, each_object_mut, object_at_mut, object_entry, sort_keys,
};

/// Pod spec defaults for the template at `path` (e.g. `spec.template`).
pub(crate) fn default_template_at(object: &mut Value, path: &[&str]) {
    let mut full: Vec<&str> = path.to_vec();
    full.push("spec");
    if let Some(spec) = object_at_mut(object, &full) {
        default_pod_spec(spec);
    }
}

fn spec_of(object: &mut Value) -> Option<&mut Map<String, Value>> {
    object_entry(object.as_object_mut()?, "spec")
}

pub(crate) fn default_deployment(object: &mut Value) {
    if let Some(spec) = spec_of(object) {
        default_field(spec, "replicas", json!(1));
        if let Some(strategy) = object_entry(spec, "strategy") {
            default_field(strategy, "type", json!("RollingUpdate"));
            if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
                && let Some(rolling) = object_entry(strategy, "rollingUpdate")
            {
                default_field(rolling, "maxUnavailable", json!("25%"));
                default_field(rolling, "maxSurge", json!("25%"));
            }
        }
        default_field(spec, "revisionHistoryLimit", json!(10));
        default_field(spec, "progressDeadlineSeconds", json!(600));
    }
    default_template_at(object, &["spec", "template"]);
}

pub(crate) fn default_replica_set(object: &mut Value) {
    if let Some(spec) = spec_of(object) {
        default_field(spec, "replicas", json!(1));
    }
    default_template_at(object, &["spec", "template"]);
}

pub(crate) fn default_stateful_set(object: &mut Value) {
    if let Some(spec) = spec_of(object) {
        default_field(spec, "podManagementPolicy", json!("OrderedReady"));
        if let Some(strategy) = object_entry(spec, "updateStrategy") {
            default_field(strategy, "type", json!("RollingUpdate"));
            if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
                && let Some(rolling) = object_entry(strategy, "rollingUpdate")
            {
                default_field(rolling, "partition", json!(0));
            }
        }
        if let Some(retention) = object_entry(spec, "persistentVolumeClaimRetentionPolicy") {
            default_field(retention, "whenDeleted", json!("Retain"));
            default_field(retention, "whenScaled", json!("Retain"));
        }
        default_field(spec, "replicas", json!(1));
        default_field(spec, "revisionHistoryLimit", json!(10));
        for claim in each_object_mut(spec, "volumeClaimTemplates") {
            if let Some(claim_spec) = object_entry(claim, "spec") {
                default_field(claim_spec, "volumeMode", json!("Filesystem"));
            }
        }
    }
    default_template_at(object, &["spec", "template"]);
}

pub(crate) fn default_daemon_set(object: &mut Value) {
    if let Some(spec) = spec_of(object) {
        if let Some(strategy) = object_entry(spec, "updateStrategy") {
            default_field(strategy, "type", json!("RollingUpdate"));
            if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
                && let Some(rolling) = object_entry(strategy, "rollingUpdate")
            {
                default_field(rolling, "maxUnavailable", json!(1));
                default_field(rolling, "maxSurge", json!(0));
            }
        }
        default_field(spec, "revisionHistoryLimit", json!(10));
    }
    default_template_at(object, &["spec", "template"]);
}

/// Copies the template's labels onto a Job without labels (`SetDefaults_Job`).
fn copy_template_labels(object: &mut Value) {
    let template_labels = object
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object)
        .filter(|labels| !labels.is_empty())
        .cloned();
    let Some(template_labels) = template_labels else {
        return;
    };
    let Some(metadata) = object
        .as_object_mut()
        .and_then(|o| object_entry(o, "metadata"))
    else {
        return;
    };
    let empty = metadata
        .get("labels")
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty);
    if empty {
        metadata.insert("labels".into(), Value::Object(template_labels));
    }
}

pub(crate) fn default_job(object: &mut Value) {
    if let Some(spec) = spec_of(object) {
        let has_completions = spec.get("completions").is_some_and(|v| !v.is_null());
        let has_parallelism = spec.get("parallelism").is_some_and(|v| !v.is_null());
        if !has_completions && !has_parallelism {
            spec.insert("completions".into(), json!(1));
        }
        default_field(spec, "parallelism", json!(1));
        let per_index = spec
            .get("backoffLimitPerIndex")
            .is_some_and(|v| !v.is_null());
        default_field(
            spec,
            "backoffLimit",
            json!(if per_index { i64::from(i32::MAX) } else { 6 }),
        );
        default_field(spec, "completionMode", json!("NonIndexed"));
        default_field(spec, "suspend", json!(false));
        let failure_policy = spec.get("podFailurePolicy").is_some_and(|v| !v.is_null());
        default_field(
            spec,
            "podReplacementPolicy",
            json!(if failure_policy {
                "Failed"
            } else {
                "TerminatingOrFailed"
            }),
        );
    }
    copy_template_labels(object);
    generate_job_selector(object);
    // On reads kube defaults again: a Job created without labels shows its template's.
    copy_template_labels(object);
    default_template_at(object, &["spec", "template"]);
}

/// The job strategy's `generateSelector`: unless `manualSelector` is true,
/// label the template with the job's name and uid and select the uid.
fn generate_job_selector(object: &mut Value) {
    let manual = object
        .pointer("/spec/manualSelector")
        .and_then(Value::as_bool)
        == Some(true);
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let uid = object
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if manual || uid.is_empty() {
        return;
    }
    let Some(spec) = spec_of(object) else {
        return;
    };
    if let Some(labels) = object_entry(spec, "template")
        .and_then(|t| object_entry(t, "metadata"))
        .and_then(|m| object_entry(m, "labels"))
    {
        for key in ["job-name", "batch.kubernetes.io/job-name"] {
            labels.entry(key).or_insert_with(|| json!(name));
        }
        for key in ["controller-uid", "batch.kubernetes.io/controller-uid"] {
            labels.entry(key).or_insert_with(|| json!(uid));
        }
        sort_keys(labels);
    }
    if let Some(match_labels) =
        object_entry(spec, "selector").and_then(|s| object_entry(s, "matchLabels"))
    {
        match_labels
            .entry("batch.kubernetes.io/controller-uid")
            .or_insert_with(|| json!(uid));
        sort_keys(match_labels);
    }
}

pub(crate) fn default_cron_job(object: &mut Value) {
    if let Some(spec) = spec_of(object) {
        default_field(spec, "concurrencyPolicy", json!("Allow"));
        default_field(spec, "suspend", json!(false));
        default_field(spec, "successfulJobsHistoryLimit", json!(3));
        default_field(spec, "failedJobsHistoryLimit", json!(1));
    }
    default_template_at(object, &["spec", "jobTemplate", "spec", "template"]);
}

#[cfg(test)]
mod tests {
    use super::*;

    type DefaultCase<'a> = (&'a str, fn(&mut Value), &'a [(&'a str, Value)]);

    fn with_template(kind: &str) -> Value {
        json!({"kind": kind, "metadata": {"name": "w", "uid": "u-1"}, "spec": {
            "template": {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}}
        }})
    }

    #[test]
    fn workloads_get_kubes_defaults() {
        let cases: &[DefaultCase] = &[
            (
                "Deployment",
                default_deployment,
                &[
                    ("/spec/replicas", json!(1)),
                    (
                        "/spec/strategy",
                        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
                    ),
                    ("/spec/revisionHistoryLimit", json!(10)),
                    ("/spec/progressDeadlineSeconds", json!(600)),
                    ("/spec/template/spec/restartPolicy", json!("Always")),
                ],
            ),
            (
                "ReplicaSet",
                default_replica_set,
                &[
                    ("/spec/replicas", json!(1)),
                    ("/spec/template/spec/dnsPolicy", json!("ClusterFirst")),
                ],
            ),
            (
                "StatefulSet",
                default_stateful_set,
                &[
                    ("/spec/replicas", json!(1)),
                    ("/spec/podManagementPolicy", json!("OrderedReady")),
                    (
                        "/spec/updateStrategy",
                        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
                    ),
                    ("/spec/revisionHistoryLimit", json!(10)),
                    (
                        "/spec/persistentVolumeClaimRetentionPolicy",
                        json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
                    ),
                ],
            ),
            (
                "DaemonSet",
                default_daemon_set,
                &[
                    (
                        "/spec/updateStrategy",
                        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
                    ),
                    ("/spec/revisionHistoryLimit", json!(10)),
                    (
                        "/spec/template/spec/schedulerName",
                        json!("default-scheduler"),
                    ),
                ],
            ),
            (
                "Job",
                default_job,
                &[
                    ("/spec/completions", json!(1)),
                    ("/spec/parallelism", json!(1)),
                    ("/spec/backoffLimit", json!(6)),
                    ("/spec/completionMode", json!("NonIndexed")),
                    ("/spec/suspend", json!(false)),
                    ("/spec/podReplacementPolicy", json!("TerminatingOrFailed")),
                    (
                        "/spec/selector",
                        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}),
                    ),
                    (
                        "/spec/template/metadata/labels",
                        json!({"app": "w", "batch.kubernetes.io/controller-uid": "u-1",
                    "batch.kubernetes.io/job-name": "w", "controller-uid": "u-1", "job-name": "w"}),
                    ),
                    ("/metadata/labels", json!({"app": "w"})),
                    ("/spec/template/spec/restartPolicy", json!("Always")),
                ],
            ),
        ];
        for (kind, default, want) in cases {
            let mut object = with_template(kind);
            default(&mut object);
            for (pointer, value) in *want {
                assert_eq!(object.pointer(pointer), Some(value), "{kind} {pointer}");
            }
        }
    }

    #[test]
    fn jobs_without_labels_show_the_generated_ones() {
        let mut job = json!({"metadata": {"name": "pi", "uid": "u"}, "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": []}}}});
        default_job(&mut job);
        assert_eq!(
            job["metadata"]["labels"]["batch.kubernetes.io/job-name"],
            "pi"
        );
        assert_eq!(job["metadata"]["labels"]["controller-uid"], "u");
    }

    #[test]
    fn manual_selector_jobs_keep_their_selector() {
        let mut job = json!({"metadata": {"name": "pi", "uid": "u"}, "spec": {"manualSelector": true,
            "selector": {"matchLabels": {"a": "b"}}, "parallelism": 2,
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": []}}}});
        default_job(&mut job);
        assert_eq!(job["spec"]["selector"], json!({"matchLabels": {"a": "b"}}));
        assert_eq!(
            job["spec"]["template"]["metadata"]["labels"],
            json!({"a": "b"})
        );
        assert!(job["spec"].get("completions").is_none());
    }

    #[test]
    fn recreate_deployments_get_no_rolling_update() {
        let mut deployment =
            json!({"spec": {"strategy": {"type": "Recreate"}, "template": {"spec": {}}}});
        default_deployment(&mut deployment);
        assert_eq!(deployment["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn cron_jobs_get_kubes_defaults() {
        let mut cron = json!({"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}}}});
        default_cron_job(&mut cron);
        assert_eq!(cron["spec"]["concurrencyPolicy"], "Allow");
        assert_eq!(cron["spec"]["suspend"], false);
        assert_eq!(cron["spec"]["successfulJobsHistoryLimit"], 3);
        assert_eq!(cron["spec"]["failedJobsHistoryLimit"], 1);
        assert_eq!(
            cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["dnsPolicy"],
            "ClusterFirst"
        );
        assert!(
            cron["spec"]["jobTemplate"]["spec"]
                .get("backoffLimit")
                .is_none()
        );
    }
}
