//! A pod spec's volumes (`ValidateVolumes`, `validateVolumeSource`) and
//! the containers' volume mounts against them (`ValidateVolumeMounts`).

use std::collections::HashSet;

use serde_json::Value;

use crate::admission::field::{BadValue, FieldError, FieldErrors, child, index};
use crate::admission::json::{array_of, str_of};
use crate::admission::names::is_dns1123_label;
use ksim_core::quantity::Quantity;

/// The volume sources, in the order `validateVolumeSource` checks them:
/// (JSON key, the path segment kube's errors name it by). The second
/// differs for two sources, as upstream prints them.
const VOLUME_SOURCES: &[(&str, &str)] = &[
    ("emptyDir", "emptyDir"),
    ("hostPath", "hostPath"),
    ("gitRepo", "gitRepo"),
    ("gcePersistentDisk", "gcePersistentDisk"),
    ("awsElasticBlockStore", "awsElasticBlockStore"),
    ("secret", "secret"),
    ("nfs", "nfs"),
    ("iscsi", "iscsi"),
    ("glusterfs", "glusterfs"),
    ("flocker", "flocker"),
    ("persistentVolumeClaim", "persistentVolumeClaim"),
    ("rbd", "rbd"),
    ("cinder", "cinder"),
    ("cephfs", "cephFS"),
    ("quobyte", "quobyte"),
    ("downwardAPI", "downwarAPI"),
    ("fc", "fc"),
    ("flexVolume", "flexVolume"),
    ("configMap", "configMap"),
    ("azureFile", "azureFile"),
    ("vsphereVolume", "vsphereVolume"),
    ("photonPersistentDisk", "photonPersistentDisk"),
    ("portworxVolume", "portworxVolume"),
    ("azureDisk", "azureDisk"),
    ("storageos", "storageos"),
    ("projected", "projected"),
    ("scaleIO", "scaleIO"),
    ("csi", "csi"),
    ("ephemeral", "ephemeral"),
    ("image", "image"),
];

/// `fileModeErrorMsg`.
const FILE_MODE_ERROR: &str = "must be a number between 0 and 0777 (octal), both inclusive";

/// `ValidateVolumes`: the names of the valid volumes, for the mounts.
pub(crate) fn validate_volumes<'a>(
    volumes: &'a [Value],
    path: &str,
    errors: &mut FieldErrors,
) -> HashSet<&'a str> {
    let mut names = HashSet::new();
    for (i, volume) in volumes.iter().enumerate() {
        let volume_path = index(path, i);
        let name_path = child(&volume_path, "name");
        let mut own = FieldErrors::new();
        validate_volume_source(volume, &volume_path, &mut own);
        let name = str_of(volume, "name");
        if name.is_empty() {
            own.push(FieldError::required(&name_path, ""));
        } else {
            for msg in is_dns1123_label(name) {
                own.push(FieldError::invalid(&name_path, BadValue::str(name), &msg));
            }
        }
        if names.contains(name) {
            own.push(FieldError::duplicate(&name_path, BadValue::str(name)));
        }
        if own.is_empty() {
            names.insert(name);
        } else {
            errors.append(&mut own);
        }
    }
    names
}

/// Whether a JSON field is set (Go: a non-nil pointer).
fn is_set(object: &Value, key: &str) -> bool {
    object.get(key).is_some_and(|v| !v.is_null())
}

/// `validateVolumeSource`: exactly one source, and that source's own checks.
fn validate_volume_source(volume: &Value, path: &str, errors: &mut FieldErrors) {
    let mut sources = 0;
    for (key, segment) in VOLUME_SOURCES {
        if !is_set(volume, key) {
            continue;
        }
        let source_path = child(path, segment);
        if sources > 0 {
            errors.push(FieldError::forbidden(
                &source_path,
                "may not specify more than 1 volume type",
            ));
            continue;
        }
        sources += 1;
        validate_source(key, &volume[*key], &source_path, errors);
    }
    if sources == 0 {
        errors.push(FieldError::required(path, "must specify a volume type"));
    }
}

fn required_string(source: &Value, key: &str, path: &str, errors: &mut FieldErrors) {
    if str_of(source, key).is_empty() {
        errors.push(FieldError::required(&child(path, key), ""));
    }
}

fn validate_mode(source: &Value, key: &str, path: &str, errors: &mut FieldErrors) {
    if let Some(mode) = source.get(key).and_then(Value::as_i64)
        && !(0..=0o777).contains(&mode)
    {
        errors.push(FieldError::invalid(
            &child(path, key),
            BadValue::Int(mode),
            FILE_MODE_ERROR,
        ));
    }
}

/// `validateKeyToPath` of each item of a secret or configMap source.
fn validate_items(source: &Value, path: &str, errors: &mut FieldErrors) {
    let items_path = child(path, "items");
    for (i, item) in array_of(source, "items").iter().enumerate() {
        let item_path = index(&items_path, i);
        required_string(item, "key", &item_path, errors);
        required_string(item, "path", &item_path, errors);
        let item_file = str_of(item, "path");
        validate_local_path(item_file, &child(&item_path, "path"), errors);
        if item_file.starts_with("..") && !item_file.starts_with("../") {
            errors.push(FieldError::invalid(
                &child(&item_path, "path"),
                BadValue::str(item_file),
                "must not start with '..'",
            ));
        }
        validate_mode(item, "mode", &item_path, errors);
    }
}

/// `ValidateLocalNonReservedPath` (and `validateLocalDescendingPath`): a
/// relative path without `..` elements, not starting with `..`.
fn validate_local_path(target: &str, path: &str, errors: &mut FieldErrors) {
    if target.starts_with('/') {
        errors.push(FieldError::invalid(
            path,
            BadValue::str(target),
            "must be a relative path",
        ));
    }
    validate_no_backsteps(target, path, errors);
}

/// `validatePathNoBacksteps`.
fn validate_no_backsteps(target: &str, path: &str, errors: &mut FieldErrors) {
    if target.split('/').any(|part| part == "..") {
        errors.push(FieldError::invalid(
            path,
            BadValue::str(target),
            "must not contain '..'",
        ));
    }
}

/// The checks of the sources ksim users write; the others are accepted as
/// they are.
fn validate_source(key: &str, source: &Value, path: &str, errors: &mut FieldErrors) {
    match key {
        "emptyDir" => {
            if let Some(limit) = source.get("sizeLimit").and_then(Value::as_str)
                && Quantity::parse(limit).is_ok_and(|q| q.nanos() < 0)
            {
                errors.push(FieldError::forbidden(
                    &child(path, "sizeLimit"),
                    "SizeLimit field must be a valid resource quantity",
                ));
            }
        }
        "hostPath" => {
            let host_path = str_of(source, "path");
            if host_path.is_empty() {
                errors.push(FieldError::required(&child(path, "path"), ""));
            } else {
                validate_no_backsteps(host_path, &child(path, "path"), errors);
            }
        }
        "secret" => {
            required_string(source, "secretName", path, errors);
            validate_mode(source, "defaultMode", path, errors);
            validate_items(source, path, errors);
        }
        "configMap" => {
            required_string(source, "name", path, errors);
            validate_mode(source, "defaultMode", path, errors);
            validate_items(source, path, errors);
        }
        "persistentVolumeClaim" => required_string(source, "claimName", path, errors),
        "nfs" => {
            required_string(source, "server", path, errors);
            required_string(source, "path", path, errors);
            let nfs_path = str_of(source, "path");
            if !nfs_path.starts_with('/') {
                errors.push(FieldError::invalid(
                    &child(path, "path"),
                    BadValue::str(nfs_path),
                    "must be an absolute path",
                ));
            }
        }
        "downwardAPI" | "projected" => validate_mode(source, "defaultMode", path, errors),
        _ => {}
    }
}

/// `ValidateVolumeMounts` of one container against the pod's volumes.
pub(crate) fn validate_volume_mounts(
    container: &Value,
    volumes: &HashSet<&str>,
    path: &str,
    errors: &mut FieldErrors,
) {
    let mut mount_points = HashSet::new();
    for (i, mount) in array_of(container, "volumeMounts").iter().enumerate() {
        let mount_path_field = index(path, i);
        let name = str_of(mount, "name");
        let name_path = child(&mount_path_field, "name");
        if name.is_empty() {
            errors.push(FieldError::required(&name_path, ""));
        }
        if !volumes.contains(name) {
            errors.push(FieldError::not_found(&name_path, BadValue::str(name)));
        }
        let mount_path = str_of(mount, "mountPath");
        let mount_path_path = child(&mount_path_field, "mountPath");
        if mount_path.is_empty() {
            errors.push(FieldError::required(&mount_path_path, ""));
        }
        if !mount_points.insert(mount_path) {
            errors.push(FieldError::invalid(
                &mount_path_path,
                BadValue::str(mount_path),
                "must be unique",
            ));
        }
        // Upstream names the list, not the item, for sub-path errors.
        let sub_path = str_of(mount, "subPath");
        if !sub_path.is_empty() {
            validate_local_path(sub_path, &child(path, "subPath"), errors);
        }
        let expression = str_of(mount, "subPathExpr");
        if !expression.is_empty() {
            if !sub_path.is_empty() {
                errors.push(FieldError::invalid(
                    &child(&mount_path_field, "subPathExpr"),
                    BadValue::str(expression),
                    "subPathExpr and subPath are mutually exclusive",
                ));
            }
            validate_local_path(expression, &child(path, "subPathExpr"), errors);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn volume_errors(volumes: Value) -> Vec<String> {
        let mut errors = Vec::new();
        let list = volumes.as_array().cloned().unwrap_or_default();
        validate_volumes(&list, "spec.volumes", &mut errors);
        errors.iter().map(FieldError::rendered).collect()
    }

    #[test]
    fn a_volume_has_exactly_one_source() {
        assert_eq!(
            volume_errors(json!([{"name": "data", "emptyDir": {}, "configMap": {"name": "c"}}])),
            vec!["spec.volumes[0].configMap: Forbidden: may not specify more than 1 volume type"]
        );
        assert_eq!(
            volume_errors(json!([{"name": "data"}])),
            vec!["spec.volumes[0]: Required value: must specify a volume type"]
        );
        assert_eq!(
            volume_errors(
                json!([{"name": "d", "downwardAPI": {}, "cephfs": {}, "hostPath": {"path": "/x"}}])
            ),
            vec![
                "spec.volumes[0].cephFS: Forbidden: may not specify more than 1 volume type",
                "spec.volumes[0].downwarAPI: Forbidden: may not specify more than 1 volume type",
            ]
        );
    }

    #[test]
    fn volume_names_and_sources_are_checked() {
        assert_eq!(
            volume_errors(json!([
                {"name": "a", "emptyDir": {}},
                {"name": "a", "emptyDir": {}},
                {"name": "B", "secret": {"defaultMode": 1000}},
                {"emptyDir": {}},
                {"name": "c", "configMap": {"items": [{"key": "k", "path": "../x"}]}},
                {"name": "p", "persistentVolumeClaim": {}},
                {"name": "h", "hostPath": {"path": "/a/../b"}},
            ])),
            vec![
                "spec.volumes[1].name: Duplicate value: \"a\"",
                "spec.volumes[2].secret.secretName: Required value",
                "spec.volumes[2].secret.defaultMode: Invalid value: 1000: must be a number between 0 and 0777 (octal), both inclusive",
                "spec.volumes[2].name: Invalid value: \"B\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                "spec.volumes[3].name: Required value",
                "spec.volumes[4].configMap.name: Required value",
                "spec.volumes[4].configMap.items[0].path: Invalid value: \"../x\": must not contain '..'",
                "spec.volumes[5].persistentVolumeClaim.claimName: Required value",
                "spec.volumes[6].hostPath.path: Invalid value: \"/a/../b\": must not contain '..'",
            ]
        );
    }

    #[test]
    fn mounts_name_existing_volumes_at_unique_paths() {
        let volumes = HashSet::from(["data"]);
        let container = json!({"volumeMounts": [
            {"name": "data", "mountPath": "/data"},
            {"name": "missing", "mountPath": "/data"},
            {"name": "data", "mountPath": "", "subPath": "/abs"},
        ]});
        let mut errors = Vec::new();
        validate_volume_mounts(
            &container,
            &volumes,
            "spec.containers[0].volumeMounts",
            &mut errors,
        );
        let rendered: Vec<String> = errors.iter().map(FieldError::rendered).collect();
        assert_eq!(
            rendered,
            vec![
                "spec.containers[0].volumeMounts[1].name: Not found: \"missing\"",
                "spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/data\": must be unique",
                "spec.containers[0].volumeMounts[2].mountPath: Required value",
                "spec.containers[0].volumeMounts.subPath: Invalid value: \"/abs\": must be a relative path",
            ]
        );
    }
}
