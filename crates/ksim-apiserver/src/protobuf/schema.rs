//! The shape of the wire-facts table: per protobuf message, each field's number, JSON name,
//! kind and flags, and the lookups the decoder uses.

/// How a field's bytes become JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    String,
    /// `[]byte`: base64 in JSON.
    Bytes,
    Bool,
    Int32,
    Int64,
    Double,
    /// A nested message, by its full protobuf name.
    Message(&'static str),
    /// `metav1.Time`: RFC 3339 at second precision, `null` when zero.
    Time,
    /// `metav1.MicroTime`: RFC 3339 at microsecond precision, `null` when zero.
    MicroTime,
    /// `metav1.Duration`: Go duration string such as `1h0m0s`. No kind in the table has one
    /// yet (it appears in kinds the table may grow to cover).
    #[allow(dead_code)]
    Duration,
    /// `resource.Quantity`: its canonical string.
    Quantity,
    /// `intstr.IntOrString`: a number or a string.
    IntOrString,
    /// `runtime.RawExtension`: embedded JSON (or a nested protobuf object).
    RawExtension,
    /// `metav1.FieldsV1`: embedded JSON.
    FieldsV1,
    /// A named `[]string` type (such as `ExtraValue`) wrapped in a message with `items = 1`.
    StringList,
    /// `map<string, V>`: repeated entries with key 1 and value 2.
    Map(&'static Kind),
}

/// The field is `repeated` on the wire and a JSON array.
pub(super) const REP: u8 = 1;
/// Go's JSON drops the field's zero value (`omitempty` on a non-pointer field).
pub(super) const OMIT: u8 = 2;
/// The field's object is flattened into its parent (`json:",inline"`).
pub(super) const INLINE: u8 = 4;

/// The wire facts of one field.
#[derive(Debug, Clone, Copy)]
pub(super) struct FieldFact {
    pub(super) number: u32,
    pub(super) json_name: &'static str,
    pub(super) kind: Kind,
    pub(super) flags: u8,
}

impl FieldFact {
    pub(super) fn is(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// Builds one row of the table.
pub(super) const fn f(number: u32, json_name: &'static str, kind: Kind, flags: u8) -> FieldFact {
    FieldFact {
        number,
        json_name,
        kind,
        flags,
    }
}

/// The wire facts of one message; `fields` is sorted by number.
#[derive(Debug)]
pub(super) struct MessageFacts {
    pub(super) name: &'static str,
    pub(super) fields: &'static [FieldFact],
}

impl MessageFacts {
    pub(super) fn field(&self, number: u32) -> Option<&'static FieldFact> {
        self.fields
            .binary_search_by_key(&number, |field| field.number)
            .ok()
            .and_then(|index| self.fields.get(index))
    }
}

/// A kind a client may send, with the message its body decodes as.
#[derive(Debug)]
pub(super) struct RootKind {
    pub(super) api_version: &'static str,
    pub(super) kind: &'static str,
    pub(super) message: &'static str,
}

/// The facts of a message by its full protobuf name.
pub(super) fn message(name: &str) -> Option<&'static MessageFacts> {
    let messages = super::facts::MESSAGES;
    messages
        .binary_search_by(|facts| facts.name.cmp(name))
        .ok()
        .and_then(|index| messages.get(index))
}

/// The kinds of meta.k8s.io/v1 that kube registers into every group
/// version (`metav1.AddToGroupVersion`), so clients send them under the
/// resource's own apiVersion: `kubectl drain --disable-eviction` sends a
/// `v1` DeleteOptions.
const OPTIONS_KINDS_OF_EVERY_GROUP_VERSION: &[&str] = &[
    "DeleteOptions",
    "CreateOptions",
    "UpdateOptions",
    "PatchOptions",
    "GetOptions",
    "ListOptions",
];

/// The message an object of this apiVersion and kind is encoded as.
pub(super) fn root_message(api_version: &str, kind: &str) -> Option<&'static str> {
    let lookup = |api_version: &str| {
        super::facts::ROOT_KINDS
            .iter()
            .find(|root| root.api_version == api_version && root.kind == kind)
            .map(|root| root.message)
    };
    lookup(api_version).or_else(|| {
        OPTIONS_KINDS_OF_EVERY_GROUP_VERSION
            .contains(&kind)
            .then(|| lookup("meta.k8s.io/v1"))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn delete_options_of_any_group_version_decode_as_meta_v1() {
        let meta = super::root_message("meta.k8s.io/v1", "DeleteOptions");
        assert!(meta.is_some());
        assert_eq!(super::root_message("v1", "DeleteOptions"), meta);
        assert_eq!(super::root_message("apps/v1", "DeleteOptions"), meta);
        assert_eq!(super::root_message("v1", "NoSuchKind"), None);
    }

    use super::super::facts::{MESSAGES, ROOT_KINDS};
    use super::*;

    #[test]
    fn messages_are_sorted_by_name_and_fields_by_number() {
        for pair in MESSAGES.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} before {}",
                pair[0].name,
                pair[1].name
            );
        }
        for facts in MESSAGES {
            for pair in facts.fields.windows(2) {
                assert!(pair[0].number < pair[1].number, "{}", facts.name);
            }
        }
    }

    fn referenced(kind: &Kind) -> Option<&'static str> {
        match kind {
            Kind::Message(name) => Some(name),
            Kind::Map(value) => referenced(value),
            _ => None,
        }
    }

    #[test]
    fn every_referenced_message_and_root_has_facts() {
        for facts in MESSAGES {
            for field in facts.fields {
                if let Some(name) = referenced(&field.kind) {
                    assert!(message(name).is_some(), "{name} from {}", facts.name);
                }
            }
        }
        for root in ROOT_KINDS {
            assert!(message(root.message).is_some(), "{}", root.message);
        }
    }

    #[test]
    fn field_names_differing_from_proto_names_use_the_json_name() {
        let status = message("k8s.io.api.core.v1.PodStatus").expect("PodStatus in the table");
        assert_eq!(status.field(6).map(|f| f.json_name), Some("podIP"));
        assert_eq!(status.field(12).map(|f| f.json_name), Some("podIPs"));
        let spec = message("k8s.io.api.apps.v1.DeploymentSpec").expect("DeploymentSpec");
        let replicas = spec.field(1).expect("replicas is field 1");
        assert_eq!(replicas.json_name, "replicas");
        assert!(!replicas.is(OMIT), "a *int32 keeps its zero");
    }

    #[test]
    fn roots_cover_the_kinds_clients_send() {
        for (api_version, kind) in [
            ("v1", "Namespace"),
            ("v1", "Pod"),
            ("v1", "Node"),
            ("v1", "Binding"),
            ("v1", "Event"),
            ("apps/v1", "Deployment"),
            ("apps/v1", "DaemonSet"),
            ("policy/v1", "Eviction"),
            ("coordination.k8s.io/v1", "Lease"),
            ("events.k8s.io/v1", "Event"),
            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
        ] {
            assert!(
                root_message(api_version, kind).is_some(),
                "{api_version} {kind}"
            );
        }
        assert_eq!(root_message("v1", "Deployment"), None);
    }
}
