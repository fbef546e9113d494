//! Parsing of REST paths (`/api/v1/namespaces/default/pods/x/status`,
//! `/apis/apps/v1/deployments`, ...) into what they address.

use std::sync::Arc;

use crate::ApiError;
use crate::resources::ResourceInfo;

use super::registry::Registry;

/// What a request path addresses.
#[derive(Debug)]
pub(crate) enum Target {
    /// `/api`: the core API versions.
    CoreVersions,
    /// `/apis`: the API groups.
    Groups,
    /// `/apis/<group>`.
    Group(String),
    /// `/api/v1` or `/apis/<group>/<version>`: the resource list.
    GroupVersion(String, String),
    /// A resource collection, object or subresource.
    Resource(ResourcePath),
}

/// A path under a resource.
#[derive(Debug, Clone)]
pub(crate) struct ResourcePath {
    pub resource: Arc<ResourceInfo>,
    /// The namespace in the path (None for cluster-scoped resources and
    /// for lists across all namespaces).
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// The deprecated `/watch/` path prefix was used.
    pub watch_prefix: bool,
}

/// Parses `path` (without query) against the registry.
pub(crate) fn parse(path: &str, registry: &Registry) -> Result<Target, ApiError> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let not_found = ApiError::not_found_path;
    let (group, version, rest) = match segments.as_slice() {
        ["api"] => return Ok(Target::CoreVersions),
        ["apis"] => return Ok(Target::Groups),
        ["apis", group] => return Ok(Target::Group(group.to_string())),
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(not_found()),
    };
    if !registry.serves_group_version(group, version) {
        return Err(not_found());
    }
    let (watch_prefix, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        rest => (false, rest),
    };
    if rest.is_empty() {
        return Ok(Target::GroupVersion(group.to_string(), version.to_string()));
    }
    let find = |plural: &str| registry.find(group, version, plural);
    let namespaced_under = match rest {
        ["namespaces", _, plural, ..] => find(plural).filter(|r| r.namespaced),
        _ => None,
    };
    let (resource, namespace, name, subresource) = match (rest, namespaced_under) {
        (["namespaces", namespace, _, tail @ ..], Some(resource)) => (
            resource,
            Some(namespace.to_string()),
            tail.first(),
            tail.get(1),
        ),
        ([plural, tail @ ..], _) => {
            let resource = find(plural).ok_or_else(not_found)?;
            (resource, None, tail.first(), tail.get(1))
        }
        _ => return Err(not_found()),
    };
    let extra = match rest {
        ["namespaces", _, _, tail @ ..] if namespace.is_some() => tail.len() > 2,
        [_, tail @ ..] => tail.len() > 2,
        _ => false,
    };
    if extra || name.is_some_and(|n| n.is_empty()) {
        return Err(not_found());
    }
    if let Some(sub) = subresource
        && !resource.has_subresource(sub)
    {
        return Err(not_found());
    }
    if namespace.is_none() && resource.namespaced && name.is_some() {
        // `/api/v1/pods/x` is not a path.
        return Err(not_found());
    }
    Ok(Target::Resource(ResourcePath {
        resource,
        namespace,
        name: name.map(|n| n.to_string()),
        subresource: subresource.map(|s| s.to_string()),
        watch_prefix,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(path: &str) -> ResourcePath {
        let registry = Registry::new(Vec::new());
        match parse(path, &registry).expect(path) {
            Target::Resource(p) => p,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn namespaced_and_cluster_paths() {
        let p = resource("/api/v1/namespaces/default/pods/web/status");
        assert_eq!(p.resource.plural, "pods");
        assert_eq!(p.namespace.as_deref(), Some("default"));
        assert_eq!(p.name.as_deref(), Some("web"));
        assert_eq!(p.subresource.as_deref(), Some("status"));

        let p = resource("/api/v1/namespaces/kube-system");
        assert_eq!(p.resource.plural, "namespaces");
        assert_eq!(p.name.as_deref(), Some("kube-system"));

        let p = resource("/api/v1/namespaces/x/status");
        assert_eq!(p.resource.plural, "namespaces");
        assert_eq!(p.subresource.as_deref(), Some("status"));

        let p = resource("/apis/apps/v1/deployments");
        assert!(p.namespace.is_none() && p.name.is_none());

        let p = resource("/api/v1/watch/namespaces/default/pods");
        assert!(p.watch_prefix);
    }

    #[test]
    fn unknown_paths_are_not_found() {
        let registry = Registry::new(Vec::new());
        for path in [
            "/api/v2/pods",
            "/apis/apps/v1/widgets",
            "/api/v1/namespaces/default/pods/a/b/c",
            "/api/v1/namespaces/default/pods/a/nope",
            "/api/v1/pods/a",
            "/nope",
        ] {
            let error = parse(path, &registry).expect_err(path);
            assert_eq!(error.code, 404, "{path}");
        }
    }
}
