//! The OpenAPI v3 schemas of the built-in kinds, generated once from
//! k8s-openapi's `schemars` implementations, and the type graph that
//! strategic merge patch and field validation walk.
//!
//! Definition names are Kubernetes' own (`io.k8s.api.core.v1.PodSpec`) and
//! references point at `#/components/schemas/<name>`, as in kube-apiserver's
//! `/openapi/v3` documents. The schemas carry no patch extensions: those come
//! from [`crate::patch::field_patch_meta`].

use std::collections::BTreeMap;
use std::sync::LazyLock;

use k8s_openapi::Resource;
use k8s_openapi::api::{
    apps::v1 as apps, batch::v1 as batch, coordination::v1 as coordination, core::v1 as core,
    events::v1 as events, networking::v1 as networking, policy::v1 as policy, rbac::v1 as rbac,
    scheduling::v1 as scheduling, storage::v1 as storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::Value;

/// The prefix of every `$ref` in the generated schemas.
pub const REF_PREFIX: &str = "#/components/schemas/";

/// A schema's `properties` by name, hashed (foldhash: the names are the
/// schemas', no untrusted input): walks look an object's keys up here
/// instead of in the schema's ordered map, a string comparison per step
/// down it.
pub type Properties =
    std::collections::HashMap<&'static str, &'static Value, foldhash::fast::FixedState>;

/// The hashed [`Properties`] of a schema's `properties` that lives as long
/// as the process (the built-in schemas, a CRD's kept schema), built once
/// per map for the process (a few hundred of them; never freed).
pub fn hashed_properties(
    properties: &'static serde_json::Map<String, Value>,
) -> &'static Properties {
    static BUILT: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<usize, &'static Properties, BuildAddressHasher>>,
    > = std::sync::OnceLock::new();
    let key = std::ptr::from_ref(properties) as usize;
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    built.entry(key).or_insert_with(|| {
        Box::leak(Box::new(
            properties
                .iter()
                .map(|(name, schema)| (name.as_str(), schema))
                .collect(),
        ))
    })
}

/// A hasher for maps keyed by addresses of schema nodes (and other words
/// that are no untrusted input): a multiply-rotate per word, where SipHash
/// costs more than the rest of a cache lookup on a walk's every node.
#[derive(Debug, Default, Clone, Copy)]
pub struct AddressHasher(u64);

/// Builds [`AddressHasher`]s.
pub type BuildAddressHasher = std::hash::BuildHasherDefault<AddressHasher>;

impl std::hash::Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.write_u64(u64::from(*byte));
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, word: usize) {
        self.write_u64(word as u64);
    }
}

/// A built-in kind and the definition name of its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindDefinition {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    /// e.g. `io.k8s.api.apps.v1.Deployment`.
    pub definition: String,
}

/// All definitions of the built-in kinds (and of every type they reach).
pub struct Definitions {
    schemas: BTreeMap<String, Value>,
    kinds: Vec<KindDefinition>,
}

impl Definitions {
    /// The schema of a definition, e.g. `io.k8s.api.core.v1.PodSpec`.
    pub fn get(&self, definition: &str) -> Option<&Value> {
        self.schemas.get(definition)
    }

    /// The name (as stored) and schema of a definition.
    pub fn get_key_value(&self, definition: &str) -> Option<(&str, &Value)> {
        self.schemas
            .get_key_value(definition)
            .map(|(name, schema)| (name.as_str(), schema))
    }

    /// Every definition, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.schemas
            .iter()
            .map(|(name, schema)| (name.as_str(), schema))
    }

    /// Every built-in kind with its definition name.
    pub fn kinds(&self) -> &[KindDefinition] {
        &self.kinds
    }

    /// The definition name of a built-in kind.
    pub fn definition_for_kind(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.kinds
            .iter()
            .find(|k| k.group == group && k.version == version && k.kind == kind)
            .map(|k| k.definition.as_str())
    }

    /// The schema of `field` in `definition`: its property schema.
    pub fn property<'a>(&'a self, definition: &str, field: &str) -> Option<&'a Value> {
        self.get(definition)?.get("properties")?.get(field)
    }

    /// The definition a property refers to, looking through `allOf`, array
    /// `items` and map `additionalProperties` (so `PodSpec`/`containers`
    /// gives `io.k8s.api.core.v1.Container`).
    pub fn field_definition(&self, definition: &str, field: &str) -> Option<&str> {
        referenced_definition(self.property(definition, field)?)
    }
}

/// The definition a schema refers to, looking through `allOf`, `items` and
/// `additionalProperties`.
pub fn referenced_definition(schema: &Value) -> Option<&str> {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        return reference.strip_prefix(REF_PREFIX);
    }
    if let Some(first) = schema
        .get("allOf")
        .and_then(Value::as_array)
        .and_then(|all| all.first())
    {
        return referenced_definition(first);
    }
    if let Some(items) = schema.get("items") {
        return referenced_definition(items);
    }
    if let Some(values) = schema.get("additionalProperties") {
        return referenced_definition(values);
    }
    None
}

/// The definitions of all built-in kinds, generated on first use.
pub fn definitions() -> &'static Definitions {
    static DEFINITIONS: LazyLock<Definitions> = LazyLock::new(generate);
    &DEFINITIONS
}

struct Collector {
    generator: SchemaGenerator,
    kinds: Vec<KindDefinition>,
}

impl Collector {
    fn add<T: Resource + schemars::JsonSchema>(&mut self) -> &mut Self {
        self.generator.subschema_for::<T>();
        self.kinds.push(KindDefinition {
            group: T::GROUP,
            version: T::VERSION,
            kind: T::KIND,
            definition: T::schema_name().into_owned(),
        });
        self
    }
}

fn generate() -> Definitions {
    let mut collector = Collector {
        generator: SchemaSettings::openapi3()
            .with(|s| s.meta_schema = None)
            .into_generator(),
        kinds: Vec::new(),
    };
    collector
        .add::<core::Namespace>()
        .add::<core::Node>()
        .add::<core::Pod>()
        .add::<core::Event>()
        .add::<core::ConfigMap>()
        .add::<core::Secret>()
        .add::<core::Service>()
        .add::<core::ServiceAccount>()
        .add::<core::Endpoints>()
        .add::<core::PersistentVolumeClaim>()
        .add::<core::PersistentVolume>()
        .add::<core::ResourceQuota>()
        .add::<core::LimitRange>()
        .add::<core::Binding>()
        .add::<apps::Deployment>()
        .add::<apps::ReplicaSet>()
        .add::<apps::StatefulSet>()
        .add::<apps::DaemonSet>()
        .add::<apps::ControllerRevision>()
        .add::<batch::Job>()
        .add::<batch::CronJob>()
        .add::<policy::PodDisruptionBudget>()
        .add::<policy::Eviction>()
        .add::<scheduling::PriorityClass>()
        .add::<coordination::Lease>()
        .add::<events::Event>()
        .add::<networking::Ingress>()
        .add::<rbac::Role>()
        .add::<rbac::RoleBinding>()
        .add::<rbac::ClusterRole>()
        .add::<rbac::ClusterRoleBinding>()
        .add::<storage::StorageClass>()
        .add::<apiextensions::CustomResourceDefinition>();
    collector
        .generator
        .subschema_for::<k8s_openapi::api::autoscaling::v1::Scale>();
    let schemas = collector
        .generator
        .take_definitions(true)
        .into_iter()
        .collect();
    Definitions {
        schemas,
        kinds: collector.kinds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_spec_containers_refer_to_container() {
        let definitions = definitions();
        assert_eq!(
            definitions.field_definition("io.k8s.api.core.v1.PodSpec", "containers"),
            Some("io.k8s.api.core.v1.Container")
        );
        assert_eq!(
            definitions.definition_for_kind("apps", "v1", "Deployment"),
            Some("io.k8s.api.apps.v1.Deployment")
        );
    }

    #[test]
    fn object_meta_is_reached_from_every_kind() {
        let definitions = definitions();
        assert!(
            definitions
                .get("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
                .is_some()
        );
        assert_eq!(
            definitions.field_definition("io.k8s.api.core.v1.Pod", "metadata"),
            Some("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
        );
    }
}
