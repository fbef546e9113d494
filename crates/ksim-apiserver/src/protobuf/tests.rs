//! Tests of [`decode`](super::decode): kubectl's captured bodies decode to exactly the JSON
//! `kubectl --dry-run=client -o json` prints, and bad input is a BadRequest, never a panic.

use serde_json::{Value, json};

use super::decode;

macro_rules! golden {
    ($($name:literal),* $(,)?) => {
        &[$((
            $name,
            include_bytes!(concat!("testdata/", $name, ".bin")) as &[u8],
            include_str!(concat!("testdata/expected/", $name, ".json")),
        )),*]
    };
}

static GOLDEN: &[(&str, &[u8], &str)] = golden![
    "00_namespaces",
    "01_deployments",
    "02_configmaps",
    "03_secrets",
    "04_services",
    "05_jobs",
    "100_deployments",
    "101_priorityclasses",
    "102_poddisruptionbudgets",
    "103_poddisruptionbudgets",
    "104_resourcequotas",
    "105_cronjobs",
    "106_ingresses",
    "107_roles",
    "108_clusterrolebindings",
    "109_serviceaccounts",
    "110_secrets",
    "111_configmaps",
    "112_services",
    "113_services",
];

static WITHOUT_EXPECTED: &[&[u8]] = &[
    include_bytes!("testdata/115_token.bin"),
    include_bytes!("testdata/116_selfsubjectaccessreviews.bin"),
    include_bytes!("testdata/117_selfsubjectaccessreviews.bin"),
];

#[test]
fn captured_kubectl_bodies_decode_to_their_dry_run_json() {
    for (name, body, expected) in GOLDEN {
        let expected: Value = serde_json::from_str(expected).expect("expected JSON parses");
        let decoded = decode(body).unwrap_or_else(|e| panic!("{name}: {}", e.message));
        assert_eq!(decoded, expected, "{name}");
    }
}

#[test]
fn token_request_and_access_reviews_decode_as_go_would_print_them() {
    let expected = [
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "metadata": {"creationTimestamp": null},
            "spec": {"audiences": ["api"], "expirationSeconds": 600},
            "status": {"token": "", "expirationTimestamp": null}}),
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "metadata": {"creationTimestamp": null},
            "spec": {"resourceAttributes": {"namespace": "default", "verb": "get",
                "resource": "pods", "subresource": "log"}},
            "status": {"allowed": false}}),
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "metadata": {"creationTimestamp": null},
            "spec": {"resourceAttributes": {"namespace": "kube-system", "verb": "create",
                "group": "apps", "resource": "deployments"}},
            "status": {"allowed": false}}),
    ];
    for (body, expected) in WITHOUT_EXPECTED.iter().zip(expected) {
        assert_eq!(decode(body).expect("decodes"), expected);
    }
}

// Minimal encoder for hand-built bodies.
fn varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn bytes_field(number: u32, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint(u64::from(number) << 3 | 2, &mut out);
    varint(bytes.len() as u64, &mut out);
    out.extend_from_slice(bytes);
    out
}

fn varint_field(number: u32, value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    varint(u64::from(number) << 3, &mut out);
    varint(value, &mut out);
    out
}

fn body(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let type_meta = [
        bytes_field(1, api_version.as_bytes()),
        bytes_field(2, kind.as_bytes()),
    ]
    .concat();
    let envelope = [bytes_field(1, &type_meta), bytes_field(2, raw)].concat();
    [b"k8s\x00".as_slice(), &envelope].concat()
}

#[test]
fn inline_fields_flatten_and_zero_values_follow_omitempty() {
    let volume = [
        bytes_field(1, b"cache"),
        bytes_field(2, &bytes_field(2, &[])), // volumeSource.emptyDir = {}
    ]
    .concat();
    let container = [
        bytes_field(1, b"c"),
        bytes_field(2, b"nginx"),
        bytes_field(13, b""), // terminationMessagePath "" (omitempty): dropped
        varint_field(16, 0),  // stdin false (omitempty): dropped
    ]
    .concat();
    let spec = [
        bytes_field(1, &volume),
        bytes_field(2, &container),
        varint_field(4, 0), // terminationGracePeriodSeconds *int64 = 0: kept
    ]
    .concat();
    let pod = [bytes_field(1, &bytes_field(1, b"p")), bytes_field(2, &spec)].concat();
    let decoded = decode(&body("v1", "Pod", &pod)).expect("pod decodes");
    assert_eq!(
        decoded,
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {
                "volumes": [{"name": "cache", "emptyDir": {}}],
                "containers": [{"name": "c", "image": "nginx"}],
                "terminationGracePeriodSeconds": 0
            }
        })
    );
}

#[test]
fn unknown_fields_are_skipped() {
    let namespace = [
        bytes_field(1, &bytes_field(1, b"n")),
        bytes_field(99, b"future"),
    ]
    .concat();
    let decoded = decode(&body("v1", "Namespace", &namespace)).expect("namespace decodes");
    assert_eq!(
        decoded,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}})
    );
}

fn assert_bad_request(input: &[u8], mentions: &str) {
    let err = decode(input).expect_err("bad input is refused");
    assert_eq!(
        (err.code, err.reason),
        (400, "BadRequest"),
        "{}",
        err.message
    );
    assert!(
        err.message.contains(mentions),
        "{:?} should mention {mentions:?}",
        err.message
    );
}

#[test]
fn bad_bodies_are_bad_requests() {
    let deployment = GOLDEN[1].1;
    assert_bad_request(&deployment[..deployment.len() - 10], "truncated");
    assert_bad_request(&deployment[4..], "k8s\\x00");
    assert_bad_request(b"", "k8s\\x00");
    assert_bad_request(&body("example.com/v1", "Widget", &[]), "\"Widget\"");
    assert_bad_request(&body("v1", "Deployment", &[]), "\"Deployment\"");
    assert_bad_request(&body("", "", &[]), "no kind");
    let wrong_wire_type = [bytes_field(1, &varint_field(1, 5))].concat(); // metadata.name as varint
    assert_bad_request(&body("v1", "Namespace", &wrong_wire_type), "metadata.name");
}

/// xorshift64: deterministic pseudo-random bytes without a dependency.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn decode_never_panics(input: &[u8]) {
    if let Err(err) = decode(input) {
        assert_eq!(err.code, 400, "{}", err.message);
    }
}

#[test]
fn truncated_mutated_and_random_bodies_never_panic() {
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    let mut errors = 0;
    for (_, body, _) in GOLDEN {
        for len in 0..body.len() {
            decode_never_panics(&body[..len]);
        }
        for _ in 0..300 {
            let mut mutated = body.to_vec();
            for _ in 0..1 + random.next() % 4 {
                let index = (random.next() % mutated.len() as u64) as usize;
                mutated[index] = random.next() as u8;
            }
            decode_never_panics(&mutated);
        }
    }
    for _ in 0..3000 {
        let len = (random.next() % 200) as usize;
        let mut bytes = b"k8s\x00".to_vec();
        bytes.extend((0..len).map(|_| random.next() as u8));
        if decode(&bytes).is_err() {
            errors += 1;
        }
    }
    assert!(
        errors > 2900,
        "random bytes are almost never a known object ({errors})"
    );
}

#[test]
fn deep_nesting_is_refused() {
    // A RawExtension holding a body holding a RawExtension ... (ControllerRevision.data).
    let mut inner = body("v1", "Namespace", &[]);
    for _ in 0..200 {
        let revision = bytes_field(2, &bytes_field(1, &inner));
        inner = body("apps/v1", "ControllerRevision", &revision);
    }
    assert_bad_request(&inner, "nesting");
}

#[test]
fn special_types_take_their_go_json_forms() {
    // Service port: IntOrString 0 is a struct and stays; nodePort 0 (omitempty int32) goes.
    let port = [
        varint_field(3, 80),
        bytes_field(4, &[varint_field(1, 0), varint_field(2, 0)].concat()),
        varint_field(5, 0),
    ]
    .concat();
    let service = bytes_field(2, &bytes_field(1, &port));
    assert_eq!(
        decode(&body("v1", "Service", &service)).expect("service decodes")["spec"],
        json!({"ports": [{"port": 80, "targetPort": 0}]})
    );
    // ControllerRevision: data is embedded JSON, revision an int64 kept at any value.
    let revision = [
        bytes_field(2, &bytes_field(1, br#"{"spec":{"x":1}}"#)),
        varint_field(3, 7),
    ]
    .concat();
    let decoded = decode(&body("apps/v1", "ControllerRevision", &revision)).expect("decodes");
    assert_eq!(decoded["data"], json!({"spec": {"x": 1}}));
    assert_eq!(decoded["revision"], 7);
    // Node capacity: map<string, Quantity>; PDB disruptedPods: map<string, Time>.
    let capacity = [
        bytes_field(1, b"cpu"),
        bytes_field(2, &bytes_field(1, b"4")),
    ]
    .concat();
    let node = bytes_field(3, &bytes_field(1, &capacity));
    assert_eq!(
        decode(&body("v1", "Node", &node)).expect("node decodes")["status"],
        json!({"capacity": {"cpu": "4"}})
    );
    let when = [
        bytes_field(1, b"p1"),
        bytes_field(2, &varint_field(1, 86_400)),
    ]
    .concat();
    let pdb = bytes_field(3, &bytes_field(2, &when));
    assert_eq!(
        decode(&body("policy/v1", "PodDisruptionBudget", &pdb)).expect("pdb decodes")["status"],
        json!({"disruptedPods": {"p1": "1970-01-02T00:00:00Z"}})
    );
}
