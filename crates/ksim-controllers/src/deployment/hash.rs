//! The `pod-template-hash` of a Deployment's ReplicaSets.
//!
//! Upstream (`controller.ComputeHash`) feeds FNV-32a with the Go `spew`
//! dump of the template struct, then the collision count as 8 little-endian
//! bytes (a uint32 and four zero bytes), and renders the decimal sum with
//! `rand.SafeEncodeString`. A Go struct dump cannot be reproduced from Rust,
//! so ksim hashes the template's canonical JSON instead (object keys sorted,
//! fields in the API's order): same algorithm, alphabet and length, and
//! deterministic, but the hash value differs from a real cluster's for the
//! same template.

use k8s_openapi::api::core::v1::PodTemplateSpec;

/// The label a Deployment adds to its ReplicaSets' selector and template.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";

/// The characters `rand.String` and `rand.SafeEncodeString` use (no vowels,
/// no confusable digits).
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// FNV-1a, 32 bits.
fn fnv32a(bytes: &[u8], mut hash: u32) -> u32 {
    for byte in bytes {
        hash ^= u32::from(*byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

const FNV32_OFFSET: u32 = 0x811c_9dc5;

/// `rand.SafeEncodeString`: each byte mapped onto [`ALPHANUMS`].
pub fn safe_encode_string(s: &str) -> String {
    s.bytes()
        .map(|b| char::from(ALPHANUMS[usize::from(b) % ALPHANUMS.len()]))
        .collect()
}

/// The hash of `template` with `collision_count` mixed in.
pub fn compute_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let canonical = serde_json::to_value(template)
        .and_then(|v| serde_json::to_vec(&v))
        .unwrap_or_default();
    let mut hash = fnv32a(&canonical, FNV32_OFFSET);
    if let Some(count) = collision_count {
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&count.to_le_bytes());
        hash = fnv32a(&bytes, hash);
    }
    safe_encode_string(&hash.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template(image: &str) -> PodTemplateSpec {
        serde_json::from_value(json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": image}]}
        }))
        .expect("template")
    }

    #[test]
    fn fnv32a_matches_the_reference_vectors() {
        assert_eq!(fnv32a(b"", FNV32_OFFSET), 0x811c_9dc5);
        assert_eq!(fnv32a(b"a", FNV32_OFFSET), 0xe40c_292c);
        assert_eq!(fnv32a(b"foobar", FNV32_OFFSET), 0xbf9c_f968);
    }

    #[test]
    fn safe_encoding_maps_digits_onto_the_safe_alphabet() {
        // '0' is byte 48: 48 % 27 = 21 -> '4'; '9' is 57: 57 % 27 = 3 -> 'f'.
        assert_eq!(safe_encode_string("09"), "4f");
    }

    #[test]
    fn the_hash_is_deterministic_and_follows_template_and_collisions() {
        let a = compute_hash(&template("nginx:1"), None);
        assert_eq!(a, compute_hash(&template("nginx:1"), None));
        assert_ne!(a, compute_hash(&template("nginx:2"), None));
        assert_ne!(a, compute_hash(&template("nginx:1"), Some(1)));
        assert!(a.len() <= 10 && !a.is_empty());
        assert!(a.bytes().all(|b| ALPHANUMS.contains(&b)), "{a}");
    }
}
