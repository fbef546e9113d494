//! The shape of each field as server-side apply sees it: struct, granular
//! map, list (atomic, set or map with its keys), leaf, or untyped; read from
//! the OpenAPI schemas of [`crate::schema`] plus the list/struct/map types
//! Kubernetes declares with `+listType`, `+listMapKey`, `+structType` and
//! `+mapType` (which the generated schemas lack).

use serde_json::Value;

use crate::patch::{PatchStrategy, field_patch_meta};
use crate::schema::{BuildAddressHasher, Properties, REF_PREFIX, definitions, hashed_properties};

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// How the items of a list are identified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListType {
    /// The list is replaced as a whole.
    Atomic,
    /// Scalar items identified by their value.
    Set,
    /// Object items identified by these key fields.
    Map(&'static [&'static str]),
    /// Object items identified by one key (from the strategic merge key table).
    MergeKey(&'static str),
}

impl ListType {
    /// The key fields of an associative list.
    pub fn keys(self) -> Vec<&'static str> {
        match self {
            ListType::Map(keys) => keys.to_vec(),
            ListType::MergeKey(key) => vec![key],
            ListType::Atomic | ListType::Set => Vec::new(),
        }
    }
}

/// (definition, field, list type) as declared by `+listType`/`+listMapKey`.
const LIST_TYPES: &[(&str, &str, ListType)] = &[
    (
        "io.k8s.api.core.v1.PodSpec",
        "containers",
        ListType::Map(&["name"]),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "initContainers",
        ListType::Map(&["name"]),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "ephemeralContainers",
        ListType::Map(&["name"]),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "volumes",
        ListType::Map(&["name"]),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "imagePullSecrets",
        ListType::Map(&["name"]),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "hostAliases",
        ListType::Map(&["ip"]),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "topologySpreadConstraints",
        ListType::Map(&["topologyKey", "whenUnsatisfiable"]),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "schedulingGates",
        ListType::Map(&["name"]),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "resourceClaims",
        ListType::Map(&["name"]),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "tolerations",
        ListType::Atomic,
    ),
    (
        "io.k8s.api.core.v1.Container",
        "ports",
        ListType::Map(&["containerPort", "protocol"]),
    ),
    (
        "io.k8s.api.core.v1.Container",
        "env",
        ListType::Map(&["name"]),
    ),
    (
        "io.k8s.api.core.v1.Container",
        "volumeMounts",
        ListType::Map(&["mountPath"]),
    ),
    (
        "io.k8s.api.core.v1.Container",
        "volumeDevices",
        ListType::Map(&["devicePath"]),
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "ports",
        ListType::Map(&["containerPort", "protocol"]),
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "env",
        ListType::Map(&["name"]),
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeMounts",
        ListType::Map(&["mountPath"]),
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeDevices",
        ListType::Map(&["devicePath"]),
    ),
    (
        "io.k8s.api.core.v1.ResourceRequirements",
        "claims",
        ListType::Map(&["name"]),
    ),
    (
        "io.k8s.api.core.v1.VolumeMount",
        "bindMountOptions",
        ListType::Set,
    ),
    (
        "io.k8s.api.core.v1.ContainerStatus",
        "volumeMounts",
        ListType::Map(&["mountPath"]),
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        "conditions",
        ListType::Map(&["type"]),
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        "podIPs",
        ListType::Map(&["ip"]),
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        "resourceClaimStatuses",
        ListType::Map(&["name"]),
    ),
    ("io.k8s.api.core.v1.NodeSpec", "podCIDRs", ListType::Set),
    ("io.k8s.api.core.v1.NodeSpec", "taints", ListType::Atomic),
    (
        "io.k8s.api.core.v1.NodeStatus",
        "conditions",
        ListType::Map(&["type"]),
    ),
    (
        "io.k8s.api.core.v1.NodeStatus",
        "addresses",
        ListType::Map(&["type"]),
    ),
    (
        "io.k8s.api.core.v1.NamespaceStatus",
        "conditions",
        ListType::Map(&["type"]),
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimStatus",
        "conditions",
        ListType::Map(&["type"]),
    ),
    (
        "io.k8s.api.core.v1.ReplicationControllerStatus",
        "conditions",
        ListType::Map(&["type"]),
    ),
    (
        "io.k8s.api.core.v1.ServiceStatus",
        "conditions",
        ListType::Map(&["type"]),
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "ports",
        ListType::Map(&["port", "protocol"]),
    ),
    (
        "io.k8s.api.core.v1.ServiceAccount",
        "secrets",
        ListType::Map(&["name"]),
    ),
    (
        "io.k8s.api.apps.v1.DeploymentStatus",
        "conditions",
        ListType::Map(&["type"]),
    ),
    (
        "io.k8s.api.apps.v1.ReplicaSetStatus",
        "conditions",
        ListType::Map(&["type"]),
    ),
    (
        "io.k8s.api.apps.v1.StatefulSetStatus",
        "conditions",
        ListType::Map(&["type"]),
    ),
    (
        "io.k8s.api.apps.v1.DaemonSetStatus",
        "conditions",
        ListType::Map(&["type"]),
    ),
    (
        "io.k8s.api.batch.v1.UncountedTerminatedPods",
        "succeeded",
        ListType::Set,
    ),
    (
        "io.k8s.api.batch.v1.UncountedTerminatedPods",
        "failed",
        ListType::Set,
    ),
    (
        "io.k8s.api.batch.v1.PodFailurePolicyOnExitCodesRequirement",
        "values",
        ListType::Set,
    ),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetStatus",
        "conditions",
        ListType::Map(&["type"]),
    ),
    (
        "io.k8s.api.storage.v1.CSINodeSpec",
        "drivers",
        ListType::Map(&["name"]),
    ),
    (OBJECT_META, "finalizers", ListType::Set),
    (OBJECT_META, "ownerReferences", ListType::Map(&["uid"])),
    (OBJECT_META, "managedFields", ListType::Atomic),
];

/// Structs declared `+structType=atomic`: owned and replaced as a whole.
const ATOMIC_STRUCTS: &[&str] = &[
    "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
    "io.k8s.api.core.v1.SecretReference",
    "io.k8s.api.core.v1.ObjectFieldSelector",
    "io.k8s.api.core.v1.ResourceFieldSelector",
    "io.k8s.api.core.v1.ConfigMapKeySelector",
    "io.k8s.api.core.v1.SecretKeySelector",
    "io.k8s.api.core.v1.NodeSelector",
    "io.k8s.api.core.v1.NodeSelectorTerm",
    "io.k8s.api.core.v1.TopologySelectorTerm",
    "io.k8s.api.core.v1.EndpointAddress",
    "io.k8s.api.core.v1.EndpointPort",
    "io.k8s.api.core.v1.ObjectReference",
    "io.k8s.api.core.v1.LocalObjectReference",
    "io.k8s.api.core.v1.TypedLocalObjectReference",
    "io.k8s.api.core.v1.ScopeSelector",
    "io.k8s.api.networking.v1.ServiceBackendPort",
    "io.k8s.api.rbac.v1.Subject",
    "io.k8s.api.rbac.v1.RoleRef",
];

/// Map fields declared `+mapType=atomic`.
const ATOMIC_MAPS: &[(&str, &str)] = &[
    ("io.k8s.api.core.v1.PodSpec", "nodeSelector"),
    ("io.k8s.api.core.v1.ServiceSpec", "selector"),
    ("io.k8s.api.core.v1.ReplicationControllerSpec", "selector"),
];

/// Defaults of list-map key fields (`+default=` on the key field), used to
/// identify items that omit the key.
const KEY_DEFAULTS: &[(&str, &str, &str)] = &[
    ("io.k8s.api.core.v1.ContainerPort", "protocol", "\"TCP\""),
    ("io.k8s.api.core.v1.ServicePort", "protocol", "\"TCP\""),
];

/// The type of a node of an object: its schema (None: untyped) and, for a
/// field of a struct, where it was declared (for the list/map tables).
#[derive(Debug, Clone, Copy, Default)]
pub struct TypeRef {
    schema: Option<&'static Value>,
    /// The definition name when `schema` is a definition itself.
    name: Option<&'static str>,
    declared_in: Option<(&'static str, &'static str)>,
    /// Whether this is a whole object (its `metadata` is always ObjectMeta).
    root: bool,
}

/// Where the static parts of a [`TypeRef`] are: the key of its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ShapeKey {
    schema: usize,
    name: (usize, usize),
    declared_in: ((usize, usize), (usize, usize)),
}

/// Keyed by addresses: hashed as [`crate::schema::AddressHasher`] hashes, not SipHash
/// (which cost more than everything else a lookup does).
type ShapeMap = std::collections::HashMap<ShapeKey, Shape, BuildAddressHasher>;

thread_local! {
    /// The shapes worked out so far (a few hundred types at most).
    static SHAPES: std::cell::RefCell<ShapeMap> = std::cell::RefCell::new(ShapeMap::default());
}

/// What a node is, for merging and field sets.
#[derive(Debug, Clone, Copy)]
pub enum Shape {
    /// Named fields (definition name when known).
    Struct {
        properties: &'static Properties,
        definition: Option<&'static str>,
    },
    /// A map whose keys are owned one by one.
    Map(TypeRef),
    /// A list and the type of its items.
    List(ListType, TypeRef),
    /// Owned and replaced as a whole (scalars, atomic structs/maps/lists).
    Leaf,
    /// No schema: objects are granular maps, lists are atomic.
    Untyped,
}

/// An object node's type with its shape worked out once: the types of its
/// fields, one lookup each.
#[derive(Debug, Clone, Copy)]
pub struct ObjectType {
    ty: TypeRef,
    shape: Shape,
}

impl ObjectType {
    /// The object type of a node of type `ty`.
    pub fn new(ty: TypeRef) -> ObjectType {
        ObjectType {
            shape: ty.shape(),
            ty,
        }
    }

    /// The object type of a node of type `ty` whose shape is `shape`.
    pub fn with_shape(ty: TypeRef, shape: Shape) -> ObjectType {
        ObjectType { ty, shape }
    }

    /// [`TypeRef::child`].
    pub fn child(&self, field: &str) -> (TypeRef, bool) {
        self.ty.child_in(self.shape, field)
    }
}

impl TypeRef {
    /// The type of a whole object of the OpenAPI definition (None or an
    /// unknown name: untyped, with typed `metadata`).
    pub fn root(definition: Option<&str>) -> TypeRef {
        let found = definition.and_then(|wanted| definitions().get_key_value(wanted));
        TypeRef {
            schema: found.map(|(_, schema)| schema),
            name: found.map(|(name, _)| name),
            declared_in: None,
            root: true,
        }
    }

    fn untyped() -> TypeRef {
        TypeRef::default()
    }

    /// Whether the node has a schema (typed objects drop null fields, as
    /// decoding them into Kubernetes types does).
    pub fn is_typed(&self) -> bool {
        self.schema.is_some()
    }

    /// The resolved schema and its definition name.
    fn resolved(&self) -> Option<(&'static Value, Option<&'static str>)> {
        let mut schema = self.schema?;
        let mut name = self.name;
        for _ in 0..16 {
            if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
                let definition = reference.strip_prefix(REF_PREFIX)?;
                schema = definitions().get(definition)?;
                name = Some(definition);
                continue;
            }
            if let Some(first) = schema
                .get("allOf")
                .and_then(Value::as_array)
                .and_then(|all| all.first())
            {
                schema = first;
                continue;
            }
            return Some((schema, name));
        }
        None
    }

    /// The shape of this node.
    pub fn shape(&self) -> Shape {
        let Some(schema) = self.schema else {
            return Shape::Untyped;
        };
        // Everything a shape depends on is static: it is worked out once
        // per type (per thread) and looked up by where the type's parts are.
        let text = |t: Option<&'static str>| t.map_or((0, 0), |t| (t.as_ptr() as usize, t.len()));
        let key = ShapeKey {
            schema: std::ptr::from_ref(schema) as usize,
            name: text(self.name),
            declared_in: (
                text(self.declared_in.map(|(definition, _)| definition)),
                text(self.declared_in.map(|(_, field)| field)),
            ),
        };
        if let Some(shape) = SHAPES.with(|shapes| shapes.borrow().get(&key).copied()) {
            return shape;
        }
        let shape = self.work_out_shape();
        SHAPES.with(|shapes| shapes.borrow_mut().insert(key, shape));
        shape
    }

    /// [`Self::shape`], from the schemas.
    fn work_out_shape(&self) -> Shape {
        let Some((schema, definition)) = self.resolved() else {
            return Shape::Untyped;
        };
        if let Some(name) = definition
            && ATOMIC_STRUCTS.contains(&name)
        {
            return Shape::Leaf;
        }
        if let Some(properties) = schema.get("properties").and_then(Value::as_object)
            && !properties.is_empty()
        {
            return Shape::Struct {
                properties: hashed_properties(properties),
                definition,
            };
        }
        if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
            if self
                .declared_in
                .is_some_and(|declared| ATOMIC_MAPS.contains(&declared))
            {
                return Shape::Leaf;
            }
            return Shape::Map(TypeRef {
                schema: Some(values),
                ..TypeRef::default()
            });
        }
        if schema.get("type").and_then(Value::as_str) == Some("array") {
            let items = TypeRef {
                schema: schema.get("items"),
                ..TypeRef::default()
            };
            return Shape::List(self.list_type(), items);
        }
        if schema.get("type").and_then(Value::as_str) == Some("object") {
            return Shape::Untyped;
        }
        Shape::Leaf
    }

    fn list_type(&self) -> ListType {
        let Some((definition, field)) = self.declared_in else {
            return ListType::Atomic;
        };
        if let Some((_, _, list_type)) = LIST_TYPES
            .iter()
            .find(|(d, f, _)| *d == definition && *f == field)
        {
            return *list_type;
        }
        match field_patch_meta(definition, field) {
            Some(meta) if meta.strategy != PatchStrategy::Replace => match meta.merge_key {
                Some(key) => ListType::MergeKey(key),
                None => ListType::Set,
            },
            _ => ListType::Atomic,
        }
    }

    /// The type of `field` of a struct or map node, and whether the field is
    /// a declared struct field (map keys and unknown fields are not).
    pub fn child(&self, field: &str) -> (TypeRef, bool) {
        self.child_in(self.shape(), field)
    }

    /// [`Self::child`] given this node's shape (worked out once for all
    /// the fields of an object).
    fn child_in(&self, shape: Shape, field: &str) -> (TypeRef, bool) {
        match shape {
            Shape::Struct {
                properties,
                definition,
            } => match properties.get_key_value(field) {
                Some((&name, &schema)) => {
                    let declared_in = definition.map(|d| (d, name));
                    (
                        TypeRef {
                            schema: Some(schema),
                            declared_in,
                            ..TypeRef::default()
                        },
                        true,
                    )
                }
                None => (TypeRef::untyped(), false),
            },
            Shape::Map(values) => (values, false),
            Shape::Untyped if self.root && field == "metadata" => (
                TypeRef {
                    schema: definitions().get(OBJECT_META),
                    name: Some(OBJECT_META),
                    ..TypeRef::default()
                },
                true,
            ),
            _ => (TypeRef::untyped(), false),
        }
    }

    /// The default of key field `key` of this (list item) type, as JSON text.
    pub fn key_default(&self, key: &str) -> Option<&'static str> {
        let (_, definition) = self.resolved()?;
        let definition = definition?;
        KEY_DEFAULTS
            .iter()
            .find(|(d, k, _)| *d == definition && *k == key)
            .map(|(_, _, value)| *value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(definition: &str, path: &[&str]) -> TypeRef {
        let mut ty = TypeRef::root(Some(definition));
        for field in path {
            ty = match ty.shape() {
                Shape::List(_, items) => items.child(field).0,
                _ => ty.child(field).0,
            };
        }
        ty
    }

    #[test]
    fn containers_are_a_list_map_keyed_by_name() {
        let ty = at(
            "io.k8s.api.apps.v1.Deployment",
            &["spec", "template", "spec", "containers"],
        );
        match ty.shape() {
            Shape::List(list_type, items) => {
                assert_eq!(list_type.keys(), vec!["name"]);
                assert!(matches!(items.shape(), Shape::Struct { .. }));
            }
            other => panic!("containers: {other:?}"),
        }
    }

    #[test]
    fn shapes_follow_the_declared_types() {
        let deployment = "io.k8s.api.apps.v1.Deployment";
        assert!(matches!(
            at(deployment, &["spec", "selector"]).shape(),
            Shape::Leaf
        ));
        assert!(matches!(
            at(deployment, &["spec", "replicas"]).shape(),
            Shape::Leaf
        ));
        assert!(matches!(
            at(deployment, &["metadata", "labels"]).shape(),
            Shape::Map(_)
        ));
        assert!(matches!(
            at(deployment, &["spec", "template", "spec", "nodeSelector"]).shape(),
            Shape::Leaf
        ));
        assert!(matches!(
            at(deployment, &["metadata", "finalizers"]).shape(),
            Shape::List(ListType::Set, _)
        ));
        assert!(matches!(
            at(
                deployment,
                &["spec", "template", "spec", "containers", "args"]
            )
            .shape(),
            Shape::List(ListType::Atomic, _)
        ));
        assert!(matches!(TypeRef::root(None).shape(), Shape::Untyped));
        assert!(matches!(
            TypeRef::root(None).child("metadata").0.shape(),
            Shape::Struct {
                definition: Some(OBJECT_META),
                ..
            }
        ));
    }

    #[test]
    fn container_port_protocol_defaults_to_tcp() {
        let ports = at("io.k8s.api.core.v1.Pod", &["spec", "containers", "ports"]);
        let Shape::List(list_type, items) = ports.shape() else {
            panic!("ports is a list");
        };
        assert_eq!(list_type.keys(), vec!["containerPort", "protocol"]);
        assert_eq!(items.key_default("protocol"), Some("\"TCP\""));
    }
}
