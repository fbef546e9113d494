//! A scanner over JSON text known to be valid (text the server sent, parsed
//! once already as it was received): it walks an object's entries and skips
//! the values nobody reads by their brackets and quotes alone, without
//! decoding or checking them, and decodes the values that are read with
//! serde_json. The simulator reads a few fields of every Node and Pod it is
//! told about (a restored cluster's 100,000 pods at its start), and skipping
//! the rest this way costs a fraction of serde_json's own skipping, which
//! checks every token.
//!
//! Text that is not valid JSON gives `None` somewhere or a wrong answer,
//! never a panic.

use std::borrow::Cow;

use serde_json::Value;

/// A position in JSON text.
pub(super) struct Scanner<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Scanner<'a> {
    /// A scanner at the start of `text`.
    pub(super) fn new(text: &'a str) -> Self {
        Self { text, pos: 0 }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn skip_whitespace(&mut self) {
        let bytes = self.bytes();
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    /// The next byte that is not whitespace, left unread.
    pub(super) fn peek(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.bytes().get(self.pos).copied()
    }

    /// Reads `byte` if it comes next (after whitespace).
    fn eat(&mut self, byte: u8) -> bool {
        if self.peek() == Some(byte) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// The end of the string whose opening quote is at `start`: the
    /// position after its closing quote.
    fn string_end(&self, start: usize) -> Option<usize> {
        let bytes = self.bytes();
        let mut i = start + 1;
        loop {
            let rest = bytes.get(i..)?;
            let found = memchr::memchr2(b'"', b'\\', rest)?;
            i += found;
            if bytes[i] == b'"' {
                return Some(i + 1);
            }
            // An escape: the next byte is escaped (`\"`, `\\`, `\u`...).
            i += 2;
        }
    }

    /// Skips the next value.
    pub(super) fn skip_value(&mut self) -> Option<()> {
        let bytes = self.bytes();
        match self.peek()? {
            b'"' => self.pos = self.string_end(self.pos)?,
            b'{' | b'[' => {
                let mut depth = 0usize;
                let mut i = self.pos;
                loop {
                    match *bytes.get(i)? {
                        b'"' => {
                            i = self.string_end(i)?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.pos = i + 1;
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
            }
            // A number, `true`, `false` or `null`.
            _ => {
                while let Some(byte) = bytes.get(self.pos) {
                    if matches!(
                        byte,
                        b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t' | b':'
                    ) {
                        break;
                    }
                    self.pos += 1;
                }
            }
        }
        Some(())
    }

    /// Reads the next value, which must be a string (as an object's key):
    /// borrowed from the text unless it holds escapes.
    pub(super) fn string(&mut self) -> Option<Cow<'a, str>> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.pos;
        let end = self.string_end(start)?;
        self.pos = end;
        let text = self.text;
        let inner = text.get(start + 1..end - 1)?;
        if inner.contains('\\') {
            serde_json::from_str::<String>(text.get(start..end)?)
                .ok()
                .map(Cow::Owned)
        } else {
            Some(Cow::Borrowed(inner))
        }
    }

    /// Decodes the next value.
    pub(super) fn value(&mut self) -> Option<Value> {
        self.skip_whitespace();
        let text = self.text.get(self.pos..)?;
        let mut values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
        let value = values.next()?.ok()?;
        self.pos += values.byte_offset();
        Some(value)
    }

    /// Reads the next value, which must be an object: calls `entry` with
    /// each key and the scanner at its value, which `entry` must read or
    /// skip; an `entry` returning `None` ends the walk there. `None` when
    /// the value is not an object, or `entry` stopped.
    pub(super) fn object(
        &mut self,
        mut entry: impl FnMut(Cow<'a, str>, &mut Self) -> Option<()>,
    ) -> Option<()> {
        if !self.eat(b'{') {
            return None;
        }
        if self.eat(b'}') {
            return Some(());
        }
        loop {
            let key = self.string()?;
            if !self.eat(b':') {
                return None;
            }
            entry(key, self)?;
            if self.eat(b',') {
                continue;
            }
            return self.eat(b'}').then_some(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every value of `text` skipped, then decoded, agrees with serde_json.
    #[test]
    fn values_are_skipped_to_their_end_and_decoded_as_serde_json_does() {
        let cases = [
            r#""plain""#,
            r#""with \"quotes\" and \\ and \u00e9 \n""#,
            r#""ends with a backslash \\""#,
            "12",
            "-1.5e3",
            "true",
            "null",
            "[]",
            "{}",
            r#"[1, "a]", {"b": [2, {"c": "}"}]}, null]"#,
            r#"{"a": {"b": "x\"}y"}, "c": [[], [[]]], "d": -0.0}"#,
        ];
        for case in cases {
            let text = format!(" {case} ,\"after\"");
            let mut scanner = Scanner::new(&text);
            scanner.skip_value().expect("skipped");
            assert!(scanner.eat(b','), "{case}: stopped at {}", scanner.pos);
            let mut scanner = Scanner::new(&text);
            let want: Value = serde_json::from_str(case).expect("valid");
            assert_eq!(scanner.value(), Some(want), "{case}");
            assert!(scanner.eat(b','), "{case}");
            assert_eq!(scanner.string().as_deref(), Some("after"));
        }
    }

    #[test]
    fn objects_are_walked_entry_by_entry() {
        let text = r#" { "a" : 1 , "b\"c" : {"x": [1]}, "d": "e" } "#;
        let mut seen = Vec::new();
        let mut scanner = Scanner::new(text);
        scanner
            .object(|key, scanner| {
                let value = if key == "d" {
                    scanner.value()
                } else {
                    scanner.skip_value().map(|()| Value::Null)
                };
                seen.push((key.into_owned(), value?));
                Some(())
            })
            .expect("an object");
        assert_eq!(
            seen,
            [
                ("a".to_owned(), Value::Null),
                ("b\"c".to_owned(), Value::Null),
                ("d".to_owned(), json!("e")),
            ]
        );
        assert!(Scanner::new("{}").object(|_, _| None).is_some());
        assert!(Scanner::new("[1]").object(|_, s| s.skip_value()).is_none());
        // A walk stopped by its entry.
        assert!(Scanner::new(r#"{"a": 1}"#).object(|_, _| None).is_none());
    }

    #[test]
    fn malformed_text_gives_none_not_a_panic() {
        for text in [
            "",
            "\"open",
            "{\"a\": [1, 2",
            "[\"\\",
            "{\"a\" 1}",
            "{\"a\": 1 \"b\": 2}",
        ] {
            let _ = Scanner::new(text).skip_value();
            let _ = Scanner::new(text).value();
            assert!(
                Scanner::new(text).object(|_, s| s.skip_value()).is_none(),
                "{text:?}"
            );
        }
    }
}
