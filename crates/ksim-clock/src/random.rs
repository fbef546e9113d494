//! The cluster's source of randomness: generated name suffixes, uids, the
//! scheduler's tie-breaks, jitter. Seeded, the same sequence of calls gives
//! the same values on every run; unseeded, it draws from the OS.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

/// A shared random source (cheap to clone; clones draw from one sequence).
#[derive(Clone, Debug)]
pub struct Random {
    rng: Arc<Mutex<StdRng>>,
    seed: Option<u64>,
    /// Draws per key so far (seeded sources only).
    keys: Arc<Mutex<HashMap<String, u64>>>,
}

/// The characters Kubernetes uses for generated name suffixes (no vowels,
/// no look-alikes).
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

impl Default for Random {
    fn default() -> Self {
        Self::from_entropy()
    }
}

impl Random {
    /// A source seeded by the OS: different on every run.
    pub fn from_entropy() -> Self {
        Self {
            rng: Arc::new(Mutex::new(StdRng::from_os_rng())),
            seed: None,
            keys: Arc::default(),
        }
    }

    /// A source that gives the same sequence for the same `seed`.
    pub fn seeded(seed: u64) -> Self {
        Self {
            rng: Arc::new(Mutex::new(StdRng::seed_from_u64(seed))),
            seed: Some(seed),
            keys: Arc::default(),
        }
    }

    /// The seed, if this source was seeded.
    pub fn seed(&self) -> Option<u64> {
        self.seed
    }

    fn with<T>(&self, f: impl FnOnce(&mut StdRng) -> T) -> T {
        f(&mut self.rng.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A source for one draw under `key`: on a seeded source it depends
    /// only on the seed, the key and how many draws the key had before, not
    /// on what other keys drew in between (independent clients whose
    /// requests interleave differently from run to run still get the same
    /// values); unseeded, it is this source.
    pub fn keyed(&self, key: &str) -> Random {
        let Some(seed) = self.seed else {
            return self.clone();
        };
        let draw = {
            let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
            let count = keys.entry(key.to_string()).or_insert(0);
            *count += 1;
            *count
        };
        // SipHash with fixed keys: stable within a build.
        let mut hasher = std::hash::DefaultHasher::new();
        (seed, key, draw).hash(&mut hasher);
        Random {
            rng: Arc::new(Mutex::new(StdRng::seed_from_u64(hasher.finish()))),
            seed: Some(seed),
            keys: Arc::default(),
        }
    }

    /// A uniformly random `u64`.
    pub fn next_u64(&self) -> u64 {
        self.with(|rng| rng.next_u64())
    }

    /// A uniformly random index below `n` (0 when `n` is 0).
    pub fn below(&self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        self.with(|rng| rng.random_range(0..n))
    }

    /// A uniformly random number in `[0, 1)`.
    pub fn unit(&self) -> f64 {
        self.with(|rng| rng.random::<f64>())
    }

    /// Fills `bytes` with random bytes.
    pub fn fill(&self, bytes: &mut [u8]) {
        self.with(|rng| rng.fill_bytes(bytes));
    }

    /// A random (version 4) UUID in its hyphenated form, as Kubernetes uids are.
    pub fn uuid(&self) -> String {
        let mut bytes = [0u8; 16];
        self.fill(&mut bytes);
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        uuid_text(&bytes)
    }

    /// A generated-name suffix of `len` characters from Kubernetes' alphabet
    /// (`generateName: web-` becomes `web-x7k2q`).
    pub fn name_suffix(&self, len: usize) -> String {
        self.with(|rng| {
            (0..len)
                .map(|_| {
                    let index = rng.random_range(0..SUFFIX_ALPHABET.len());
                    char::from(SUFFIX_ALPHABET[index])
                })
                .collect()
        })
    }
}

/// The canonical text of a UUID's bytes (`8-4-4-4-12` lowercase hex
/// digits), written digit by digit: a uuid is drawn per created object.
fn uuid_text(bytes: &[u8; 16]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(36);
    for (i, byte) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            text.push('-');
        }
        text.push(char::from(HEX[usize::from(byte >> 4)]));
        text.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uuid_is_written_in_its_canonical_form() {
        let bytes = [
            0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0x4d, 0xef, 0x80, 0x01, 0x02, 0x03, 0x04, 0x05,
            0xa6, 0xff,
        ];
        assert_eq!(uuid_text(&bytes), "12345678-9abc-4def-8001-02030405a6ff");
        let drawn = Random::seeded(3).uuid();
        assert_eq!(drawn.len(), 36, "{drawn}");
        assert_eq!(drawn.as_bytes()[14], b'4', "{drawn}");
    }

    #[test]
    fn a_seed_repeats_its_sequence() {
        let a = Random::seeded(7);
        let b = Random::seeded(7);
        for _ in 0..5 {
            assert_eq!(a.uuid(), b.uuid());
            assert_eq!(a.name_suffix(5), b.name_suffix(5));
            assert_eq!(a.below(10), b.below(10));
        }
        assert_ne!(Random::seeded(7).uuid(), Random::seeded(8).uuid());
    }

    #[test]
    fn keyed_draws_do_not_depend_on_other_keys() {
        let a = Random::seeded(7);
        let b = Random::seeded(7);
        let first = a.keyed("pods/default/web").uuid();
        b.keyed("pods/default/other").uuid();
        b.next_u64();
        assert_eq!(b.keyed("pods/default/web").uuid(), first);
        assert_ne!(
            a.keyed("pods/default/web").uuid(),
            first,
            "a second draw differs"
        );
        let unseeded = Random::from_entropy();
        assert_ne!(unseeded.keyed("k").uuid(), unseeded.keyed("k").uuid());
    }

    #[test]
    fn uuids_and_suffixes_have_kubernetes_shapes() {
        let random = Random::from_entropy();
        let uid = random.uuid();
        assert_eq!(uid.len(), 36);
        assert_eq!(&uid[14..15], "4");
        let suffix = random.name_suffix(5);
        assert_eq!(suffix.len(), 5);
        assert!(suffix.bytes().all(|b| SUFFIX_ALPHABET.contains(&b)));
    }
}
