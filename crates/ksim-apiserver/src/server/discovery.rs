//! Discovery: `/api`, `/apis`, `/apis/<group>`, the resource lists of
//! each group-version, and aggregated discovery (`apidiscovery.k8s.io/v2`)
//! when the client asks for it in `Accept`.

use http::HeaderMap;
use serde_json::{Value, json};

use crate::resources::{ResourceInfo, verbs};

use super::registry::Registry;

/// What a subresource answers: (kind, group, version, verbs).
fn subresource_shape(
    resource: &ResourceInfo,
    subresource: &str,
) -> (String, &'static str, &'static str, &'static [&'static str]) {
    const GET_UPDATE: &[&str] = &["get", "patch", "update"];
    match subresource {
        "scale" => ("Scale".into(), "autoscaling", "v1", GET_UPDATE),
        "binding" => ("Binding".into(), "", "v1", &["create"]),
        "eviction" => ("Eviction".into(), "policy", "v1", &["create"]),
        "finalize" => (resource.kind.clone(), "", "", &["update"]),
        "log" => (resource.kind.clone(), "", "", &["get"]),
        "exec" | "attach" | "portforward" => (
            format!("Pod{}Options", capitalized(subresource)),
            "",
            "",
            &["create", "get"],
        ),
        _ => (resource.kind.clone(), "", "", GET_UPDATE),
    }
}

fn capitalized(word: &str) -> String {
    match word {
        "portforward" => "PortForward".to_string(),
        other => {
            let mut chars = other.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        }
    }
}

/// Whether the client asked for aggregated discovery.
pub(crate) fn wants_aggregated(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| {
            accept.split(',').next().is_some_and(|first| {
                first.contains("as=APIGroupDiscoveryList")
                    && first.contains("g=apidiscovery.k8s.io")
            })
        })
}

/// The media type of an aggregated discovery answer.
pub(crate) const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// `GET /api`.
pub(crate) fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// The groups (other than core) with their versions, in registry order.
fn groups(registry: &Registry) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for resource in registry.resources() {
        if resource.group.is_empty() {
            continue;
        }
        match out.iter_mut().find(|(g, _)| *g == resource.group) {
            Some((_, versions)) => {
                if !versions.contains(&resource.version) {
                    versions.push(resource.version.clone());
                }
            }
            None => out.push((resource.group.clone(), vec![resource.version.clone()])),
        }
    }
    for (_, versions) in &mut out {
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    }
    out
}

/// Kubernetes' version ordering: GA > beta > alpha, then by number.
fn version_priority(version: &str) -> (u8, u32, u32) {
    let rest = version.trim_start_matches('v');
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (stability, minor) = if tail.is_empty() {
        (3, 0)
    } else if let Some(n) = tail.strip_prefix("beta") {
        (2, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n.parse().unwrap_or(0))
    } else {
        (0, 0)
    };
    (stability, major, minor)
}

fn group_json(group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({
        "name": group,
        "versions": versions,
        "preferredVersion": versions.first().cloned().unwrap_or(Value::Null),
    })
}

/// `GET /apis` (legacy form).
pub(crate) fn group_list(registry: &Registry) -> Value {
    let groups: Vec<Value> = groups(registry)
        .iter()
        .map(|(g, v)| group_json(g, v))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /apis/<group>`.
pub(crate) fn group(registry: &Registry, name: &str) -> Option<Value> {
    let (group, versions) = groups(registry).into_iter().find(|(g, _)| g == name)?;
    let mut value = group_json(&group, &versions);
    value["kind"] = json!("APIGroup");
    value["apiVersion"] = json!("v1");
    Some(value)
}

/// `GET /api/v1` or `/apis/<group>/<version>`.
pub(crate) fn resource_list(registry: &Registry, group: &str, version: &str) -> Value {
    let mut resources = Vec::new();
    for resource in registry
        .resources()
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let mut entry = json!({
            "name": resource.plural,
            "singularName": resource.singular,
            "namespaced": resource.namespaced,
            "kind": resource.kind,
            "verbs": verbs(resource),
        });
        if !resource.short_names.is_empty() {
            entry["shortNames"] = json!(resource.short_names);
        }
        if !resource.categories.is_empty() {
            entry["categories"] = json!(resource.categories);
        }
        resources.push(entry);
        for sub in &resource.subresources {
            let (kind, sub_group, sub_version, verbs) = subresource_shape(resource, sub);
            let mut entry = json!({
                "name": format!("{}/{}", resource.plural, sub),
                "singularName": "",
                "namespaced": resource.namespaced,
                "kind": kind,
                "verbs": verbs,
            });
            if !sub_group.is_empty() || !sub_version.is_empty() {
                entry["group"] = json!(sub_group);
                entry["version"] = json!(sub_version);
            }
            resources.push(entry);
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources})
}

fn aggregated_resource(resource: &ResourceInfo) -> Value {
    let mut entry = json!({
        "resource": resource.plural,
        "responseKind": {"group": "", "version": "", "kind": resource.kind},
        "scope": if resource.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": resource.singular,
        "verbs": verbs(resource),
    });
    if !resource.short_names.is_empty() {
        entry["shortNames"] = json!(resource.short_names);
    }
    if !resource.categories.is_empty() {
        entry["categories"] = json!(resource.categories);
    }
    let subresources: Vec<Value> = resource
        .subresources
        .iter()
        .map(|sub| {
            let (kind, group, version, verbs) = subresource_shape(resource, sub);
            json!({
                "subresource": sub,
                "responseKind": {"group": group, "version": version, "kind": kind},
                "verbs": verbs,
            })
        })
        .collect();
    if !subresources.is_empty() {
        entry["subresources"] = json!(subresources);
    }
    entry
}

fn aggregated_group(registry: &Registry, group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|version| {
            let resources: Vec<Value> = registry
                .resources()
                .iter()
                .filter(|r| r.group == group && r.version == *version)
                .map(|r| aggregated_resource(r))
                .collect();
            json!({"version": version, "resources": resources, "freshness": "Current"})
        })
        .collect();
    json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": versions})
}

/// Aggregated discovery of `/api` (core) or `/apis` (every group).
pub(crate) fn aggregated(registry: &Registry, core: bool) -> Value {
    let items: Vec<Value> = if core {
        vec![aggregated_group(registry, "", &["v1".to_string()])]
    } else {
        groups(registry)
            .iter()
            .map(|(g, v)| aggregated_group(registry, g, v))
            .collect()
    };
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_resource_list_has_subresources_and_short_names() {
        let registry = Registry::new(Vec::new());
        let list = resource_list(&registry, "", "v1");
        let resources = list["resources"].as_array().expect("array");
        let pods = resources
            .iter()
            .find(|r| r["name"] == "pods")
            .expect("pods");
        assert_eq!(pods["shortNames"], json!(["po"]));
        let eviction = resources
            .iter()
            .find(|r| r["name"] == "pods/eviction")
            .expect("eviction");
        assert_eq!(eviction["group"], "policy");
        assert_eq!(eviction["kind"], "Eviction");
    }

    #[test]
    fn aggregated_discovery_lists_every_group() {
        let registry = Registry::new(Vec::new());
        let apis = aggregated(&registry, false);
        let names: Vec<&str> = apis["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter_map(|g| g["metadata"]["name"].as_str())
            .collect();
        for group in ["apps", "batch", "policy", "apiextensions.k8s.io"] {
            assert!(names.contains(&group), "{group} in {names:?}");
        }
        let deployments = &apis["items"][0]["versions"][0]["resources"][0];
        assert_eq!(deployments["resource"], "deployments");
        assert_eq!(
            deployments["subresources"][1]["responseKind"]["kind"],
            "Scale"
        );
    }

    #[test]
    fn versions_sort_ga_before_beta_before_alpha() {
        let mut versions = vec!["v1alpha1", "v2", "v1beta2", "v1"];
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(versions, ["v2", "v1", "v1beta2", "v1alpha1"]);
    }
}
