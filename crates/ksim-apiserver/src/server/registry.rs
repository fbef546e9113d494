//! The live resource registry: built-in resources plus those the stored
//! CustomResourceDefinitions define. Swapped as a whole when CRDs change,
//! so a request works on one consistent snapshot.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::resources::{ResourceInfo, built_in_resources};

/// A snapshot of everything served.
pub(crate) struct Registry {
    resources: Vec<Arc<ResourceInfo>>,
    by_path: HashMap<(String, String, String), Arc<ResourceInfo>>,
    /// The first resource serving each (group, version, kind).
    by_kind: HashMap<(String, String, String), Arc<ResourceInfo>>,
    /// `additionalPrinterColumns` of each CRD version, by (group, version, plural).
    printer_columns: HashMap<(String, String, String), Value>,
    /// The stored CRDs this snapshot was built from.
    crds: Vec<Value>,
}

impl Registry {
    /// The built-in resources and those of `crds` (CRD objects as JSON).
    pub(crate) fn new(crds: Vec<Value>) -> Self {
        let mut resources = built_in_resources();
        let mut printer_columns = HashMap::new();
        for crd in &crds {
            for (info, columns) in crd_resources(crd) {
                if let Some(columns) = columns {
                    printer_columns.insert(
                        (
                            info.group.clone(),
                            info.version.clone(),
                            info.plural.clone(),
                        ),
                        columns,
                    );
                }
                resources.push(Arc::new(info));
            }
        }
        let by_path = resources
            .iter()
            .map(|r| {
                (
                    (r.group.clone(), r.version.clone(), r.plural.clone()),
                    r.clone(),
                )
            })
            .collect();
        let mut by_kind = HashMap::new();
        for r in &resources {
            by_kind
                .entry((r.group.clone(), r.version.clone(), r.kind.clone()))
                .or_insert_with(|| r.clone());
        }
        Registry {
            resources,
            by_path,
            by_kind,
            printer_columns,
            crds,
        }
    }

    /// Every served resource.
    pub(crate) fn resources(&self) -> &[Arc<ResourceInfo>] {
        &self.resources
    }

    /// The stored CRDs.
    pub(crate) fn crds(&self) -> &[Value] {
        &self.crds
    }

    /// The resource served at `/<group>/<version>/<plural>`.
    pub(crate) fn find(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<Arc<ResourceInfo>> {
        self.by_path
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// The resource serving `kind` in `group/version` (the first one, when
    /// several do).
    pub(crate) fn find_kind(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Option<Arc<ResourceInfo>> {
        self.by_kind
            .get(&(group.to_string(), version.to_string(), kind.to_string()))
            .cloned()
    }

    /// Whether any resource is served in `group/version`.
    pub(crate) fn serves_group_version(&self, group: &str, version: &str) -> bool {
        self.resources
            .iter()
            .any(|r| r.group == group && r.version == version)
    }

    /// The printer columns of a custom resource version.
    pub(crate) fn printer_columns(&self, resource: &ResourceInfo) -> Option<&Value> {
        self.printer_columns.get(&(
            resource.group.clone(),
            resource.version.clone(),
            resource.plural.clone(),
        ))
    }
}

/// The storage collection of a resource: all versions of a resource share it.
/// `events.k8s.io` Events are stored as core Events (see `conversion`).
pub(crate) fn collection_of(resource: &ResourceInfo) -> String {
    if resource.group == "events.k8s.io" && resource.plural == "events" {
        return "/events".to_string();
    }
    format!("{}/{}", resource.group, resource.plural)
}

/// The resources one CRD defines: one per served version, with its printer columns.
fn crd_resources(crd: &Value) -> Vec<(ResourceInfo, Option<Value>)> {
    let spec = &crd["spec"];
    let Some(group) = spec["group"].as_str() else {
        return Vec::new();
    };
    let names = &spec["names"];
    let (Some(plural), Some(kind)) = (names["plural"].as_str(), names["kind"].as_str()) else {
        return Vec::new();
    };
    let singular = names["singular"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_lowercase());
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let namespaced = spec["scope"].as_str() != Some("Cluster");
    let mut out = Vec::new();
    for version in spec["versions"].as_array().into_iter().flatten() {
        if version["served"].as_bool() == Some(false) {
            continue;
        }
        let Some(name) = version["name"].as_str() else {
            continue;
        };
        let mut subresources = Vec::new();
        if version["subresources"]["status"].is_object() {
            subresources.push("status".to_string());
        }
        if version["subresources"]["scale"].is_object() {
            subresources.push("scale".to_string());
        }
        let columns = version
            .get("additionalPrinterColumns")
            .filter(|c| c.as_array().is_some_and(|a| !a.is_empty()))
            .cloned();
        out.push((
            ResourceInfo {
                group: group.to_string(),
                version: name.to_string(),
                kind: kind.to_string(),
                plural: plural.to_string(),
                singular: singular.clone(),
                namespaced,
                short_names: strings(&names["shortNames"]),
                categories: strings(&names["categories"]),
                subresources,
                custom: true,
            },
            columns,
        ));
    }
    out
}

/// The spec and status replica paths of a CRD version's scale subresource.
pub(crate) fn crd_scale_paths(crd: &Value, version: &str) -> Option<(String, String)> {
    let versions = crd["spec"]["versions"].as_array()?;
    let scale = versions
        .iter()
        .find(|v| v["name"].as_str() == Some(version))?
        .get("subresources")?
        .get("scale")?;
    Some((
        scale["specReplicasPath"].as_str()?.to_string(),
        scale["statusReplicasPath"].as_str()?.to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn crd_versions_become_resources_with_columns() {
        let crd = json!({"spec": {"group": "stable.example.com", "scope": "Namespaced",
        "names": {"plural": "crontabs", "kind": "CronTab", "shortNames": ["ct"]},
        "versions": [
            {"name": "v1", "served": true, "storage": true,
             "subresources": {"status": {}},
             "additionalPrinterColumns": [{"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"}]},
            {"name": "v0", "served": false, "storage": false}
        ]}});
        let registry = Registry::new(vec![crd]);
        let crontabs = registry
            .find("stable.example.com", "v1", "crontabs")
            .expect("served");
        assert!(crontabs.custom && crontabs.namespaced);
        assert_eq!(crontabs.short_names, ["ct"]);
        assert!(crontabs.has_subresource("status"));
        assert!(registry.printer_columns(&crontabs).is_some());
        assert!(
            registry
                .find("stable.example.com", "v0", "crontabs")
                .is_none()
        );
        let by_kind = registry
            .find_kind("stable.example.com", "v1", "CronTab")
            .expect("found by kind");
        assert_eq!(by_kind.plural, "crontabs");
        assert!(
            registry
                .find_kind("stable.example.com", "v0", "CronTab")
                .is_none()
        );
        let pods = registry.find_kind("", "v1", "Pod").expect("pods");
        assert_eq!(pods.plural, "pods");
    }
}
