//! Writing JSON text by hand (the store's serializer, managedFields):
//! whether a string needs escaping, checked eight bytes at a time, since
//! almost none does and every string of every object written is checked.

/// Whether JSON escapes a character of `text` (a quote, a backslash or a
/// control character below 0x20); other text is written as it is.
pub fn needs_escape(text: &str) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    /// Whether a byte of `word` is below `n` (n <= 128), exactly: the
    /// high bit of each byte that is, set (bytes of `word` are below 0x80
    /// where this is used, so no borrow crosses a byte).
    fn below(word: u64, n: u8) -> u64 {
        word.wrapping_sub(ONES * u64::from(n)) & !word & HIGH
    }
    let bytes = text.as_bytes();
    let mut words = bytes.chunks_exact(8);
    for chunk in &mut words {
        let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        if word & HIGH != 0 {
            // Non-ASCII (UTF-8 bytes are never escaped): its bytes alone.
            if chunk.iter().any(|&b| escaped(b)) {
                return true;
            }
            continue;
        }
        // A byte equal to c is a byte of word ^ (c * ONES) below 1.
        let hits =
            below(word, 0x20) | below(word ^ (ONES * 0x22), 1) | below(word ^ (ONES * 0x5c), 1);
        if hits != 0 {
            return true;
        }
    }
    words.remainder().iter().any(|&b| escaped(b))
}

fn escaped(byte: u8) -> bool {
    byte == b'"' || byte == b'\\' || byte < 0x20
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_at_every_place_is_judged_as_json_escapes_it() {
        // Each byte value at each place of strings of 0..=24 bytes among
        // plain letters and non-ASCII text.
        for len in 0..=24 {
            for at in 0..len {
                for byte in 0u8..=0x7f {
                    let mut text = vec![b'a'; len];
                    text[at] = byte;
                    let text = String::from_utf8(text).expect("ASCII");
                    let escapes =
                        serde_json::to_string(&text).expect("a string") != format!("\"{text}\"");
                    assert_eq!(needs_escape(&text), escapes, "{text:?}");
                    let wide = format!("é{text}ü");
                    assert_eq!(needs_escape(&wide), escapes, "{wide:?}");
                }
            }
        }
        assert!(!needs_escape(""));
        assert!(!needs_escape("héllo wörld, ünïcode ✓ and more"));
        assert!(needs_escape("héllo wörld\"ünïcode"));
    }
}
