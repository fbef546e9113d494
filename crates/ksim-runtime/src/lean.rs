//! Decoding watched objects without `metadata.managedFields`.
//!
//! A component that watches a resource decodes every event; for a Pod, most
//! of that work is `metadata.managedFields` (each entry's `fieldsV1` becomes
//! a `serde_json::Value` tree), which no controller, scheduler or simulator
//! decision reads. [`WithoutManagedFields<K>`] is `K` decoded with that list
//! skipped unparsed — the same effect as client-go informers'
//! `TransformStripManagedFields`, but paid before the decode rather than after.
//! Everything else decodes exactly as `K` does.
//!
//! It is a [`kube::Resource`] like `K`, so `Api<WithoutManagedFields<Pod>>`
//! lists and watches `pods`. Writing an object read this way back whole (a
//! PUT) is safe: an update that sends no managedFields keeps the live ones.
//!
//! How: the wrapper's [`Deserializer`] recognises the top-level `metadata`
//! key as the object's visitor reads it, and inside `metadata` presents the
//! `managedFields` key under a name no `ObjectMeta` field has, so the type's
//! own decoder skips the value as an unknown field (k8s-openapi's and
//! kube's object types all ignore unknown fields).

use std::borrow::Cow;
use std::fmt;
use std::ops::{Deref, DerefMut};

use kube::Resource;
use kube::core::ObjectMeta;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

/// `K` as decoded without `metadata.managedFields` (see the module docs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WithoutManagedFields<K>(pub K);

impl<K> WithoutManagedFields<K> {
    /// The object.
    pub fn into_inner(self) -> K {
        self.0
    }
}

/// A watcher event of objects decoded this way, as an event of the objects.
pub fn into_inner_event<K>(
    event: kube::runtime::watcher::Event<WithoutManagedFields<K>>,
) -> kube::runtime::watcher::Event<K> {
    use kube::runtime::watcher::Event;
    match event {
        Event::Apply(object) => Event::Apply(object.0),
        Event::Delete(object) => Event::Delete(object.0),
        Event::Init => Event::Init,
        Event::InitApply(object) => Event::InitApply(object.0),
        Event::InitDone => Event::InitDone,
    }
}

impl<K> Deref for WithoutManagedFields<K> {
    type Target = K;

    fn deref(&self) -> &K {
        &self.0
    }
}

impl<K> DerefMut for WithoutManagedFields<K> {
    fn deref_mut(&mut self) -> &mut K {
        &mut self.0
    }
}

impl<K: Resource> Resource for WithoutManagedFields<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        self.0.meta()
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.meta_mut()
    }
}

impl<K: Serialize> Serialize for WithoutManagedFields<K> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de, K: Deserialize<'de>> Deserialize<'de> for WithoutManagedFields<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        K::deserialize(Lean {
            inner: deserializer,
            level: Level::Object,
        })
        .map(WithoutManagedFields)
    }
}

/// Where in the object a [`Lean`] deserializer stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    /// The object itself: watch for its `metadata` key.
    Object,
    /// Its `metadata`: hide the `managedFields` key.
    Metadata,
}

/// A key no object's metadata has: what `managedFields` is presented as.
const SKIPPED_KEY: &str = "\u{0}managedFields";

/// The wrapping deserializer: maps (and an optional map, as `metadata` is
/// decoded) get a [`LeanMap`]; everything else is the inner deserializer's.
struct Lean<D> {
    inner: D,
    level: Level,
}

macro_rules! forward {
    ($($method:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, Self::Error> {
                self.inner.$method($($arg,)* visitor)
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Lean<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.inner.deserialize_any(LeanVisitor {
            inner: visitor,
            level: self.level,
        })
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.inner.deserialize_map(LeanVisitor {
            inner: visitor,
            level: self.level,
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.inner.deserialize_struct(
            name,
            fields,
            LeanVisitor {
                inner: visitor,
                level: self.level,
            },
        )
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.inner.deserialize_option(LeanVisitor {
            inner: visitor,
            level: self.level,
        })
    }

    forward! {
        deserialize_bool(), deserialize_i8(), deserialize_i16(), deserialize_i32(),
        deserialize_i64(), deserialize_i128(), deserialize_u8(), deserialize_u16(),
        deserialize_u32(), deserialize_u64(), deserialize_u128(), deserialize_f32(),
        deserialize_f64(), deserialize_char(), deserialize_str(), deserialize_string(),
        deserialize_bytes(), deserialize_byte_buf(), deserialize_unit(), deserialize_seq(),
        deserialize_identifier(), deserialize_ignored_any(),
        deserialize_unit_struct(name: &'static str),
        deserialize_newtype_struct(name: &'static str),
        deserialize_tuple(len: usize),
        deserialize_tuple_struct(name: &'static str, len: usize),
        deserialize_enum(name: &'static str, variants: &'static [&'static str]),
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// The type's visitor, handed a [`LeanMap`] for a map and a [`Lean`]
/// deserializer for an option's content.
struct LeanVisitor<V> {
    inner: V,
    level: Level,
}

macro_rules! forward_visit {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(
            fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
                self.inner.$method(v)
            }
        )*
    };
}

/// The visits both wrapping visitors pass through to the inner one unchanged.
macro_rules! forward_passthrough {
    () => {
        fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
            self.inner.visit_none()
        }
        fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
            self.inner.visit_unit()
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
            self.inner.visit_seq(seq)
        }
        fn visit_newtype_struct<D: Deserializer<'de>>(
            self,
            deserializer: D,
        ) -> Result<V::Value, D::Error> {
            self.inner.visit_newtype_struct(deserializer)
        }
        fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
            self.inner.visit_enum(data)
        }
        fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<V::Value, E> {
            self.inner.visit_borrowed_bytes(v)
        }
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for LeanVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(LeanMap {
            inner: map,
            level: self.level,
            next_is_metadata: false,
        })
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Lean {
            inner: deserializer,
            level: self.level,
        })
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<V::Value, E> {
        self.inner.visit_borrowed_str(v)
    }

    forward_passthrough!();

    forward_visit! {
        visit_bool(bool), visit_i8(i8), visit_i16(i16), visit_i32(i32), visit_i64(i64),
        visit_i128(i128), visit_u8(u8), visit_u16(u16), visit_u32(u32), visit_u64(u64),
        visit_u128(u128), visit_f32(f32), visit_f64(f64), visit_char(char),
        visit_str(&str), visit_string(String), visit_bytes(&[u8]), visit_byte_buf(Vec<u8>),
    }
}

/// The object's (or its metadata's) fields: keys pass through a [`KeySeed`];
/// the value after a `metadata` key is decoded by a [`Lean`] at
/// [`Level::Metadata`].
struct LeanMap<A> {
    inner: A,
    level: Level,
    next_is_metadata: bool,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for LeanMap<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let mut is_metadata = false;
        let key = self.inner.next_key_seed(KeySeed {
            inner: seed,
            level: self.level,
            is_metadata: &mut is_metadata,
        })?;
        self.next_is_metadata = is_metadata;
        Ok(key)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        if std::mem::take(&mut self.next_is_metadata) {
            self.inner.next_value_seed(MetadataSeed(seed))
        } else {
            self.inner.next_value_seed(seed)
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// Decodes a `metadata` value with a [`Lean`] at [`Level::Metadata`].
struct MetadataSeed<T>(T);

impl<'de, T: DeserializeSeed<'de>> DeserializeSeed<'de> for MetadataSeed<T> {
    type Value = T::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<T::Value, D::Error> {
        self.0.deserialize(Lean {
            inner: deserializer,
            level: Level::Metadata,
        })
    }
}

/// A key as the type's field visitor reads it, seen on its way: notes a
/// top-level `metadata`, renames a `managedFields` inside it.
struct KeySeed<'a, K> {
    inner: K,
    level: Level,
    is_metadata: &'a mut bool,
}

impl<'de, K: DeserializeSeed<'de>> DeserializeSeed<'de> for KeySeed<'_, K> {
    type Value = K::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<K::Value, D::Error> {
        self.inner.deserialize(KeyDeserializer {
            inner: deserializer,
            level: self.level,
            is_metadata: self.is_metadata,
        })
    }
}

/// The key's deserializer: whatever the field visitor asks for, its string
/// goes through a [`KeyVisitor`].
struct KeyDeserializer<'a, D> {
    inner: D,
    level: Level,
    is_metadata: &'a mut bool,
}

macro_rules! key_through_visitor {
    ($($method:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, Self::Error> {
                self.inner.$method($($arg,)* KeyVisitor {
                    inner: visitor,
                    level: self.level,
                    is_metadata: self.is_metadata,
                })
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for KeyDeserializer<'_, D> {
    type Error = D::Error;

    key_through_visitor! {
        deserialize_any(), deserialize_str(), deserialize_string(), deserialize_identifier(),
        deserialize_bool(), deserialize_i8(), deserialize_i16(), deserialize_i32(),
        deserialize_i64(), deserialize_i128(), deserialize_u8(), deserialize_u16(),
        deserialize_u32(), deserialize_u64(), deserialize_u128(), deserialize_f32(),
        deserialize_f64(), deserialize_char(), deserialize_bytes(), deserialize_byte_buf(),
        deserialize_option(), deserialize_unit(), deserialize_seq(), deserialize_map(),
        deserialize_ignored_any(),
        deserialize_unit_struct(name: &'static str),
        deserialize_newtype_struct(name: &'static str),
        deserialize_tuple(len: usize),
        deserialize_tuple_struct(name: &'static str, len: usize),
        deserialize_struct(name: &'static str, fields: &'static [&'static str]),
        deserialize_enum(name: &'static str, variants: &'static [&'static str]),
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// Sees a key's string before the field visitor does.
struct KeyVisitor<'a, V> {
    inner: V,
    level: Level,
    is_metadata: &'a mut bool,
}

impl<V> KeyVisitor<'_, V> {
    /// The key the field visitor should see, after noting `metadata`.
    fn key(&mut self, key: &str) -> Option<&'static str> {
        match (self.level, key) {
            (Level::Object, "metadata") => {
                *self.is_metadata = true;
                None
            }
            (Level::Metadata, "managedFields") => Some(SKIPPED_KEY),
            _ => None,
        }
    }
}

impl<'de, V: Visitor<'de>> Visitor<'de> for KeyVisitor<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    fn visit_str<E: de::Error>(mut self, v: &str) -> Result<V::Value, E> {
        match self.key(v) {
            Some(renamed) => self.inner.visit_str(renamed),
            None => self.inner.visit_str(v),
        }
    }

    fn visit_borrowed_str<E: de::Error>(mut self, v: &'de str) -> Result<V::Value, E> {
        match self.key(v) {
            Some(renamed) => self.inner.visit_str(renamed),
            None => self.inner.visit_borrowed_str(v),
        }
    }

    fn visit_string<E: de::Error>(mut self, v: String) -> Result<V::Value, E> {
        match self.key(&v) {
            Some(renamed) => self.inner.visit_str(renamed),
            None => self.inner.visit_string(v),
        }
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(deserializer)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(map)
    }

    forward_passthrough!();

    forward_visit! {
        visit_bool(bool), visit_i8(i8), visit_i16(i16), visit_i32(i32), visit_i64(i64),
        visit_i128(i128), visit_u8(u8), visit_u16(u16), visit_u32(u32), visit_u64(u64),
        visit_u128(u128), visit_f32(f32), visit_f64(f64), visit_char(char),
        visit_bytes(&[u8]), visit_byte_buf(Vec<u8>),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use kube::core::{DynamicObject, PartialObjectMeta, WatchEvent};
    use serde_json::json;

    use super::*;

    fn pod_json() -> serde_json::Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web-1",
                "namespace": "default",
                "labels": {"managedFields": "a label keeps its name", "metadata": "x"},
                "managedFields": [{
                    "manager": "kubectl",
                    "operation": "Update",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {}}}
                }],
                "resourceVersion": "7"
            },
            "spec": {"containers": [{"name": "c", "image": "nginx",
                "env": [{"name": "metadata", "value": "managedFields"}]}]},
            "status": {"phase": "Running"}
        })
    }

    #[test]
    fn a_pod_decodes_as_itself_but_without_managed_fields() {
        let text = pod_json().to_string();
        let lean: WithoutManagedFields<Pod> = serde_json::from_str(&text).expect("decodes");
        let mut full: Pod = serde_json::from_str(&text).expect("decodes");
        assert!(full.metadata.managed_fields.is_some());
        full.metadata.managed_fields = None;
        assert_eq!(lean.0, full);
    }

    #[test]
    fn only_the_metadata_managed_fields_are_skipped() {
        let mut value = pod_json();
        value["spec"]["managedFields"] = json!(["kept"]);
        let object: WithoutManagedFields<DynamicObject> =
            serde_json::from_value(value).expect("decodes");
        assert!(object.metadata.managed_fields.is_none());
        assert_eq!(object.data["spec"]["managedFields"], json!(["kept"]));
        assert_eq!(
            object.metadata.labels.as_ref().expect("labels")["managedFields"],
            "a label keeps its name"
        );
    }

    #[test]
    fn watch_events_and_partial_metadata_decode_without_managed_fields() {
        let event = json!({"type": "MODIFIED", "object": pod_json()}).to_string();
        let decoded: WatchEvent<WithoutManagedFields<Pod>> =
            serde_json::from_str(&event).expect("decodes");
        let WatchEvent::Modified(pod) = decoded else {
            panic!("a MODIFIED event");
        };
        assert_eq!(pod.metadata.name.as_deref(), Some("web-1"));
        assert!(pod.metadata.managed_fields.is_none());
        assert_eq!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Running")
        );

        let metadata: WithoutManagedFields<PartialObjectMeta<DynamicObject>> =
            serde_json::from_value(pod_json()).expect("decodes");
        assert_eq!(metadata.metadata.resource_version.as_deref(), Some("7"));
        assert!(metadata.metadata.managed_fields.is_none());
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        for text in [
            r#"{"metadata": 5}"#,
            r#"{"metadata": {"managedFields": 5, "name": 3}}"#,
            r#"[1, 2]"#,
            r#"{"metadata": {"name": "x"}"#,
        ] {
            assert!(
                serde_json::from_str::<WithoutManagedFields<Pod>>(text).is_err(),
                "{text}"
            );
        }
        let null_metadata: WithoutManagedFields<Pod> =
            serde_json::from_str(r#"{"metadata": null}"#).expect("null metadata is none");
        assert!(null_metadata.metadata.name.is_none());
    }
}
