//! The `paths` of a group-version document: for each resource the collection
//! (list, create, deletecollection), the item (read, replace, patch, delete),
//! its subresources, with `x-kubernetes-action`,
//! `x-kubernetes-group-version-kind` and the query parameters kube documents.

use serde_json::{Map, Value, json};

use super::schemas::{
    BINDING, DELETE_OPTIONS, EVICTION, GVK_EXTENSION, PATCH, SCALE, STATUS, reference,
};

/// A resource whose paths go into a document.
pub(super) struct PathResource<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
    pub plural: &'a str,
    pub namespaced: bool,
    pub subresources: &'a [String],
    /// The component schema of the kind.
    pub definition: &'a str,
    /// The component schema of `<Kind>List`.
    pub list_definition: &'a str,
    /// Built-ins accept strategic merge patch and protobuf; custom resources do not.
    pub built_in: bool,
}

/// The kind an operation is about.
#[derive(Clone, Copy)]
struct Gvk<'a> {
    group: &'a str,
    version: &'a str,
    kind: &'a str,
}

impl Gvk<'_> {
    fn extension(self) -> Value {
        json!({ "group": self.group, "kind": self.kind, "version": self.version })
    }
}

/// `apps` → `Apps`, `` → `Core`, `rbac.authorization.k8s.io` → `RbacAuthorization`.
fn group_camel(group: &str) -> String {
    if group.is_empty() {
        return "Core".to_string();
    }
    group
        .strip_suffix(".k8s.io")
        .unwrap_or(group)
        .split(['.', '-'])
        .map(capitalize)
        .collect()
}

fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// `apps_v1`, `core_v1`, `rbacAuthorization_v1`: the tag kube gives operations.
fn tag(group: &str, version: &str) -> String {
    let camel = group_camel(group);
    let mut chars = camel.chars();
    let lowered: String = match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => camel,
    };
    format!("{lowered}_{version}")
}

fn query(name: &str, description: &str, kind: &str) -> Value {
    json!({
        "name": name,
        "in": "query",
        "description": description,
        "schema": { "type": kind, "uniqueItems": true },
    })
}

fn path_parameter(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "path",
        "description": description,
        "required": true,
        "schema": { "type": "string", "uniqueItems": true },
    })
}

fn pretty() -> Value {
    query(
        "pretty",
        "If 'true', then the output is pretty printed.",
        "string",
    )
}

fn dry_run() -> Value {
    query(
        "dryRun",
        "When present, indicates that modifications should not be persisted. The only valid value is \"All\".",
        "string",
    )
}

fn field_manager() -> Value {
    query(
        "fieldManager",
        "fieldManager is a name associated with the actor or entity that is making these changes.",
        "string",
    )
}

fn field_validation() -> Value {
    query(
        "fieldValidation",
        "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields: Ignore, Warn or Strict.",
        "string",
    )
}

fn force() -> Value {
    query(
        "force",
        "Force is going to \"force\" Apply requests: it re-acquires conflicting fields owned by other people. Must be unset for non-apply patch requests.",
        "boolean",
    )
}

fn list_parameters() -> Vec<Value> {
    vec![
        query(
            "allowWatchBookmarks",
            "allowWatchBookmarks requests watch events with type \"BOOKMARK\".",
            "boolean",
        ),
        query(
            "continue",
            "The continue option should be set when retrieving more results from the server.",
            "string",
        ),
        query(
            "fieldSelector",
            "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
            "string",
        ),
        query(
            "labelSelector",
            "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
            "string",
        ),
        query(
            "limit",
            "limit is a maximum number of responses to return for a list call.",
            "integer",
        ),
        query(
            "resourceVersion",
            "resourceVersion sets a constraint on what resource versions a request may be served from.",
            "string",
        ),
        query(
            "resourceVersionMatch",
            "resourceVersionMatch determines how resourceVersion is applied to list calls.",
            "string",
        ),
        query(
            "sendInitialEvents",
            "`sendInitialEvents=true` may be set together with `watch=true`: the stream begins with synthetic events for all existing objects.",
            "boolean",
        ),
        query(
            "timeoutSeconds",
            "Timeout for the list/watch call.",
            "integer",
        ),
        query(
            "watch",
            "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.",
            "boolean",
        ),
    ]
}

fn delete_parameters() -> Vec<Value> {
    vec![
        dry_run(),
        query(
            "gracePeriodSeconds",
            "The duration in seconds before the object should be deleted. Zero means delete immediately.",
            "integer",
        ),
        query(
            "ignoreStoreReadErrorWithClusterBreakingPotential",
            "if set to true, it will trigger an unsafe deletion of the resource in case the normal deletion flow fails with a corrupt object error.",
            "boolean",
        ),
        query(
            "orphanDependents",
            "Deprecated: please use the PropagationPolicy.",
            "boolean",
        ),
        query(
            "propagationPolicy",
            "Whether and how garbage collection will be performed: 'Orphan', 'Background' or 'Foreground'.",
            "string",
        ),
    ]
}

fn content(definition: &str, media_types: &[&str]) -> Value {
    let schema = json!({ "schema": reference(definition) });
    Value::Object(
        media_types
            .iter()
            .map(|m| (m.to_string(), schema.clone()))
            .collect(),
    )
}

/// The operations of one resource, with what differs between built-ins and CRDs.
struct Operations<'a> {
    resource: &'a PathResource<'a>,
    /// Media types of responses.
    produces: Vec<&'static str>,
}

impl<'a> Operations<'a> {
    fn new(resource: &'a PathResource<'a>) -> Self {
        let mut produces = vec!["application/json", "application/yaml"];
        if resource.built_in {
            produces.push("application/vnd.kubernetes.protobuf");
        }
        Operations { resource, produces }
    }

    fn responses(&self, codes: &[(&str, &str)], definition: &str) -> Value {
        let mut responses = Map::new();
        for (code, description) in codes {
            responses.insert(
                code.to_string(),
                json!({ "description": description, "content": content(definition, &self.produces) }),
            );
        }
        responses.insert("401".into(), json!({ "description": "Unauthorized" }));
        Value::Object(responses)
    }

    fn operation_id(&self, verb: &str, namespaced: bool, suffix: &str) -> String {
        let r = self.resource;
        format!(
            "{verb}{}{}{}{}{suffix}",
            group_camel(r.group),
            capitalize(r.version),
            if namespaced { "Namespaced" } else { "" },
            r.kind
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn operation(
        &self,
        action: &str,
        description: String,
        operation_id: String,
        gvk: Gvk<'_>,
        parameters: Vec<Value>,
        request: Option<(&str, &[&str])>,
        responses: Value,
    ) -> Value {
        let r = self.resource;
        let mut op = Map::new();
        op.insert("tags".into(), json!([tag(r.group, r.version)]));
        op.insert("description".into(), json!(description));
        op.insert("operationId".into(), json!(operation_id));
        if !parameters.is_empty() {
            op.insert("parameters".into(), Value::Array(parameters));
        }
        if let Some((definition, media_types)) = request {
            op.insert(
                "requestBody".into(),
                json!({ "content": content(definition, media_types), "required": true }),
            );
        }
        op.insert("responses".into(), responses);
        op.insert("x-kubernetes-action".into(), json!(action));
        op.insert(GVK_EXTENSION.into(), gvk.extension());
        Value::Object(op)
    }

    fn patch_media_types(&self) -> Vec<&'static str> {
        let mut types = vec![
            "application/apply-patch+yaml",
            "application/json-patch+json",
            "application/merge-patch+json",
        ];
        if self.resource.built_in {
            types.push("application/strategic-merge-patch+json");
        }
        types
    }

    /// read / replace / patch of the item or of a subresource returning `definition`.
    fn item_operations(
        &self,
        verbs: &[&str],
        suffix: &str,
        what: &str,
        gvk: Gvk<'_>,
        definition: &str,
    ) -> Map<String, Value> {
        let r = self.resource;
        let kind = r.kind;
        let mut item = Map::new();
        for verb in verbs {
            let (method, op) = match *verb {
                "get" => (
                    "get",
                    self.operation(
                        "get",
                        format!("read {what}the specified {kind}"),
                        self.operation_id("read", r.namespaced, suffix),
                        gvk,
                        Vec::new(),
                        None,
                        self.responses(&[("200", "OK")], definition),
                    ),
                ),
                "put" => (
                    "put",
                    self.operation(
                        "put",
                        format!("replace {what}the specified {kind}"),
                        self.operation_id("replace", r.namespaced, suffix),
                        gvk,
                        vec![dry_run(), field_manager(), field_validation()],
                        Some((definition, &["*/*"])),
                        self.responses(&[("200", "OK"), ("201", "Created")], definition),
                    ),
                ),
                "patch" => {
                    let media_types = self.patch_media_types();
                    (
                        "patch",
                        self.operation(
                            "patch",
                            format!("partially update {what}the specified {kind}"),
                            self.operation_id("patch", r.namespaced, suffix),
                            gvk,
                            vec![dry_run(), field_manager(), field_validation(), force()],
                            Some((PATCH, &media_types)),
                            self.responses(&[("200", "OK"), ("201", "Created")], definition),
                        ),
                    )
                }
                _ => continue,
            };
            item.insert(method.to_string(), op);
        }
        item
    }

    fn prefix(&self) -> String {
        let r = self.resource;
        if r.group.is_empty() {
            format!("/api/{}", r.version)
        } else {
            format!("/apis/{}/{}", r.group, r.version)
        }
    }

    fn add_to(&self, paths: &mut Map<String, Value>) {
        let r = self.resource;
        let kind = r.kind;
        let gvk = Gvk {
            group: r.group,
            version: r.version,
            kind,
        };
        let prefix = self.prefix();
        let scope = if r.namespaced {
            "namespaces/{namespace}/"
        } else {
            ""
        };
        let mut scope_parameters = Vec::new();
        if r.namespaced {
            scope_parameters.push(path_parameter(
                "namespace",
                "object name and auth scope, such as for teams and projects",
            ));
        }
        scope_parameters.push(pretty());

        // The collection.
        let mut collection = Map::new();
        collection.insert(
            "get".into(),
            self.operation(
                "list",
                format!("list or watch objects of kind {kind}"),
                self.operation_id("list", r.namespaced, ""),
                gvk,
                list_parameters(),
                None,
                self.responses(&[("200", "OK")], r.list_definition),
            ),
        );
        collection.insert(
            "post".into(),
            self.operation(
                "post",
                format!("create a {kind}"),
                self.operation_id("create", r.namespaced, ""),
                gvk,
                vec![dry_run(), field_manager(), field_validation()],
                Some((r.definition, &["*/*"])),
                self.responses(
                    &[("200", "OK"), ("201", "Created"), ("202", "Accepted")],
                    r.definition,
                ),
            ),
        );
        let mut delete_collection_parameters = list_parameters();
        delete_collection_parameters.extend(delete_parameters());
        collection.insert(
            "delete".into(),
            self.operation(
                "deletecollection",
                format!("delete collection of {kind}"),
                self.operation_id("deleteCollection", r.namespaced, ""),
                gvk,
                delete_collection_parameters,
                Some((DELETE_OPTIONS, &["*/*"])),
                self.responses(&[("200", "OK")], STATUS),
            ),
        );
        collection.insert("parameters".into(), Value::Array(scope_parameters.clone()));
        paths.insert(
            format!("{prefix}/{scope}{}", r.plural),
            Value::Object(collection),
        );

        // Across namespaces.
        if r.namespaced {
            let mut all = Map::new();
            all.insert(
                "get".into(),
                self.operation(
                    "list",
                    format!("list or watch objects of kind {kind}"),
                    format!(
                        "list{}{}{kind}ForAllNamespaces",
                        group_camel(r.group),
                        capitalize(r.version)
                    ),
                    gvk,
                    list_parameters(),
                    None,
                    self.responses(&[("200", "OK")], r.list_definition),
                ),
            );
            all.insert("parameters".into(), json!([pretty()]));
            paths.insert(format!("{prefix}/{}", r.plural), Value::Object(all));
        }

        // The item.
        let mut item_parameters = vec![path_parameter("name", &format!("name of the {kind}"))];
        item_parameters.extend(scope_parameters);
        let item_path = format!("{prefix}/{scope}{}/{{name}}", r.plural);
        let mut item = self.item_operations(&["get", "put", "patch"], "", "", gvk, r.definition);
        item.insert(
            "delete".into(),
            self.operation(
                "delete",
                format!("delete a {kind}"),
                self.operation_id("delete", r.namespaced, ""),
                gvk,
                delete_parameters(),
                Some((DELETE_OPTIONS, &["*/*"])),
                self.responses(&[("200", "OK"), ("202", "Accepted")], STATUS),
            ),
        );
        item.insert("parameters".into(), Value::Array(item_parameters.clone()));
        paths.insert(item_path.clone(), Value::Object(item));

        // Subresources.
        for subresource in r.subresources {
            let mut ops = match subresource.as_str() {
                "status" => self.item_operations(
                    &["get", "put", "patch"],
                    "Status",
                    "status of ",
                    gvk,
                    r.definition,
                ),
                "scale" => self.item_operations(
                    &["get", "put", "patch"],
                    "Scale",
                    "scale of ",
                    Gvk {
                        group: "autoscaling",
                        version: "v1",
                        kind: "Scale",
                    },
                    SCALE,
                ),
                "finalize" => {
                    self.item_operations(&["put"], "Finalize", "finalize of ", gvk, r.definition)
                }
                "binding" | "eviction" => {
                    let (definition, sub_gvk, sub_kind) = if subresource == "binding" {
                        (
                            BINDING,
                            Gvk {
                                group: "",
                                version: "v1",
                                kind: "Binding",
                            },
                            "Binding",
                        )
                    } else {
                        (
                            EVICTION,
                            Gvk {
                                group: "policy",
                                version: "v1",
                                kind: "Eviction",
                            },
                            "Eviction",
                        )
                    };
                    let mut ops = Map::new();
                    ops.insert(
                        "post".into(),
                        self.operation(
                            "post",
                            format!("create {sub_kind} of a {kind}"),
                            self.operation_id("create", r.namespaced, sub_kind),
                            sub_gvk,
                            vec![dry_run(), field_manager(), field_validation()],
                            Some((definition, &["*/*"])),
                            self.responses(
                                &[("200", "OK"), ("201", "Created"), ("202", "Accepted")],
                                definition,
                            ),
                        ),
                    );
                    ops
                }
                _ => continue,
            };
            let mut parameters = item_parameters.clone();
            if let Some(name) = parameters.first_mut() {
                name["description"] = json!(format!("name of the {subresource}"));
                if subresource == "status" || subresource == "scale" || subresource == "finalize" {
                    name["description"] = json!(format!("name of the {kind}"));
                }
            }
            ops.insert("parameters".into(), Value::Array(parameters));
            paths.insert(format!("{item_path}/{subresource}"), Value::Object(ops));
        }
    }
}

/// Adds the paths of `resource` to `paths`.
pub(super) fn add_paths(paths: &mut Map<String, Value>, resource: &PathResource<'_>) {
    Operations::new(resource).add_to(paths);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_become_camel_case_operation_prefixes() {
        for (group, camel, tagged) in [
            ("", "Core", "core_v1"),
            ("apps", "Apps", "apps_v1"),
            (
                "rbac.authorization.k8s.io",
                "RbacAuthorization",
                "rbacAuthorization_v1",
            ),
            (
                "stable.example.com",
                "StableExampleCom",
                "stableExampleCom_v1",
            ),
        ] {
            assert_eq!(group_camel(group), camel);
            assert_eq!(tag(group, "v1"), tagged);
        }
    }

    #[test]
    fn namespaced_resource_has_collection_item_and_all_namespaces_paths() {
        let subresources = vec!["status".to_string(), "scale".to_string()];
        let resource = PathResource {
            group: "apps",
            version: "v1",
            kind: "Deployment",
            plural: "deployments",
            namespaced: true,
            subresources: &subresources,
            definition: "io.k8s.api.apps.v1.Deployment",
            list_definition: "io.k8s.api.apps.v1.DeploymentList",
            built_in: true,
        };
        let mut paths = Map::new();
        add_paths(&mut paths, &resource);
        let item = &paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"];
        assert_eq!(
            item["patch"]["operationId"],
            "patchAppsV1NamespacedDeployment"
        );
        assert_eq!(item["get"]["x-kubernetes-action"], "get");
        assert!(paths.contains_key("/apis/apps/v1/deployments"));
        assert!(paths.contains_key("/apis/apps/v1/namespaces/{namespace}/deployments"));
        let scale = &paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"];
        assert_eq!(scale["patch"][GVK_EXTENSION]["kind"], "Scale");
        assert_eq!(scale["patch"][GVK_EXTENSION]["group"], "autoscaling");
    }
}
