//! A fast reader for the block YAML that Stage templates render (nested block
//! mappings and sequences, Go-style sequences at their key's indentation, plain
//! and double-quoted scalars). It reads only a conservative subset and answers
//! `None` for anything else (comments, flow collections, anchors, tags, block
//! scalars, single quotes, ambiguous plain scalars, duplicate keys, tabs), so the
//! caller falls back to the full YAML parser and the result is always the same.

use serde_json::{Map, Value};

/// One non-blank line: its indentation and its text after it.
#[derive(Clone, Copy, Debug)]
struct Line<'a> {
    indent: usize,
    text: &'a str,
}

impl Line<'_> {
    fn is_item(&self) -> bool {
        self.text == "-" || self.text.starts_with("- ")
    }
}

/// Reads `text` when it is in the subset; `None` when the full parser must decide.
pub fn parse(text: &str) -> Option<Value> {
    let mut lines = Vec::new();
    for raw in text.lines() {
        let text = raw.trim_end_matches([' ', '\r']);
        let body = text.trim_start_matches(' ');
        if body.is_empty() {
            continue;
        }
        if body.starts_with(['#', '\t', '%']) || body == "---" || body == "..." {
            return None;
        }
        lines.push(Line {
            indent: text.len() - body.len(),
            text: body,
        });
    }
    let first = *lines.first()?;
    let mut reader = Reader { lines, at: 0 };
    let value = reader.block(first.indent)?;
    (reader.at == reader.lines.len()).then_some(value)
}

struct Reader<'a> {
    lines: Vec<Line<'a>>,
    at: usize,
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<Line<'a>> {
        self.lines.get(self.at).copied()
    }

    /// The mapping or sequence starting at the current line, of indentation `indent`.
    fn block(&mut self, indent: usize) -> Option<Value> {
        let line = self.peek()?;
        if line.indent != indent {
            return None;
        }
        if line.is_item() {
            self.sequence(indent)
        } else {
            self.mapping(indent)
        }
    }

    fn mapping(&mut self, indent: usize) -> Option<Value> {
        let mut map = Map::new();
        while let Some(line) = self.peek() {
            if line.indent < indent {
                break;
            }
            if line.indent > indent || line.is_item() {
                return None;
            }
            let (key, rest) = split_key(line.text)?;
            self.at += 1;
            let value = if rest.is_empty() {
                match self.peek() {
                    Some(next) if next.indent > indent => self.block(next.indent)?,
                    Some(next) if next.indent == indent && next.is_item() => {
                        self.sequence(indent)?
                    }
                    _ => Value::Null,
                }
            } else {
                scalar(rest)?
            };
            if map.insert(key, value).is_some() {
                return None;
            }
        }
        Some(Value::Object(map))
    }

    fn sequence(&mut self, indent: usize) -> Option<Value> {
        let mut items = Vec::new();
        while let Some(line) = self.peek() {
            if line.indent < indent || (line.indent == indent && !line.is_item()) {
                break;
            }
            if line.indent > indent {
                return None;
            }
            let after = &line.text[1..];
            let rest = after.trim_start_matches(' ');
            if rest.is_empty() {
                self.at += 1;
                items.push(match self.peek() {
                    Some(next) if next.indent > indent => self.block(next.indent)?,
                    _ => Value::Null,
                });
            } else if rest == "-" || rest.starts_with("- ") {
                return None;
            } else if split_key(rest).is_some() {
                // `- key: value`: a mapping whose first line starts after the dash.
                let inner = indent + 1 + (after.len() - rest.len());
                self.lines[self.at] = Line {
                    indent: inner,
                    text: rest,
                };
                items.push(self.mapping(inner)?);
            } else {
                self.at += 1;
                items.push(scalar(rest)?);
            }
        }
        Some(Value::Array(items))
    }
}

/// `key: rest` or `key:` with a plain or double-quoted key.
fn split_key(text: &str) -> Option<(String, &str)> {
    let (key, after) = if text.starts_with('"') {
        let end = quoted_end(text)?;
        (decode_quoted(&text[..end])?, &text[end..])
    } else {
        let colon = text.find(':')?;
        let key = &text[..colon];
        let plain = !key.is_empty()
            && key.starts_with(|c: char| c.is_ascii_alphabetic())
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'));
        if !plain {
            return None;
        }
        (key.to_owned(), &text[colon..])
    };
    let after = after.strip_prefix(':')?;
    if after.is_empty() {
        return Some((key, ""));
    }
    after.starts_with(' ').then(|| (key, after.trim_start()))
}

/// The byte index just past the closing quote of the double-quoted string `text` opens.
fn quoted_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// A double-quoted scalar whose escapes mean the same in JSON and YAML.
fn decode_quoted(quoted: &str) -> Option<String> {
    let mut escaped = false;
    for b in quoted.bytes() {
        if escaped {
            // JSON's escapes, all of which YAML reads alike (`\u` surrogates aside).
            if !matches!(b, b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') {
                return None;
            }
            escaped = false;
        } else if b == b'\\' {
            escaped = true;
        }
    }
    serde_json::from_str(quoted).ok()
}

/// Words some YAML schema reads as other than a string; only their lowercase
/// `true`/`false`/`null` spellings are read here.
const AMBIGUOUS: &[&str] = &["true", "false", "null", "yes", "no", "on", "off", "y", "n"];

fn scalar(text: &str) -> Option<Value> {
    let text = text.trim_end();
    if text.starts_with('"') {
        let end = quoted_end(text)?;
        return (end == text.len())
            .then(|| decode_quoted(text))
            .flatten()
            .map(Value::String);
    }
    match text {
        "null" | "~" => return Some(Value::Null),
        "true" => return Some(Value::Bool(true)),
        "false" => return Some(Value::Bool(false)),
        "[]" => return Some(Value::Array(Vec::new())),
        "{}" => return Some(Value::Object(Map::new())),
        _ => {}
    }
    let first = text.bytes().next()?;
    if first.is_ascii_digit() || first == b'-' {
        let digits = text.strip_prefix('-').unwrap_or(text);
        let canonical = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        return if canonical {
            text.parse::<i64>().ok().map(Value::from)
        } else {
            None
        };
    }
    let plain = first.is_ascii_alphabetic()
        && text.bytes().all(|b| (b' '..=b'~').contains(&b))
        && !text.contains(": ")
        && !text.contains(" #")
        && !text.ends_with(':')
        && !AMBIGUOUS.contains(&text.to_ascii_lowercase().as_str());
    plain.then(|| Value::String(text.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn saphyr(text: &str) -> Value {
        serde_saphyr::from_str(text).expect("valid yaml")
    }

    #[test]
    fn reads_the_layout_stage_templates_render_as_yaml_would() {
        let cases = [
            "conditions:\n- type: Ready\n  status: \"True\"\n  lastTransitionTime: \"2024-01-02T03:04:05Z\"\n\n\ncontainerStatuses:\n\n- name: \"app\"\n  image: \"pause:3.10\"\n  ready: true\n  restartCount: 0\n  state:\n    running:\n      startedAt: \"t\"\n\n\ninitContainerStatuses:\n\n\nhostIP: \"10.0.0.1\"\nhostIPs:\n\n- ip: \"10.0.0.1\"\n\nphase: Running\n",
            "a:\n  b:\n    - x\n    - -3\n    -\n      c: 0\n  d: null\n  e: ~\ne: {}\nf: []\n",
            "items:\n  - name: a b c\n    value: http://x/y\n  - \"quoted \\\"q\\\" \\n\"\n",
            "\"odd key\": v\nk: \"\"\n",
            "- - nested\n",
        ];
        for text in cases {
            match parse(text) {
                Some(fast) => assert_eq!(fast, saphyr(text), "{text}"),
                None => assert!(text.starts_with("- -"), "not read: {text}"),
            }
        }
    }

    #[test]
    fn leaves_everything_outside_the_subset_to_the_full_parser() {
        let cases = [
            "a: 1.5\n",
            "a: 010\n",
            "a: True\n",
            "a: yes\n",
            "a: 'single'\n",
            "a: [1, 2]\n",
            "a: &anchor x\n",
            "a: |\n  block\n",
            "# comment\na: b\n",
            "a: b # comment\n",
            "a: b\na: c\n",
            "a: \"\\x41\"\n",
            "a:\n\t- b\n",
            "a: b\n  c: d\n",
            "just a scalar\n",
            "a: 99999999999999999999\n",
            "---\na: b\n",
        ];
        for text in cases {
            assert_eq!(parse(text), None, "{text}");
        }
    }

    #[test]
    fn blank_text_is_not_read() {
        assert_eq!(parse(""), None);
        assert_eq!(parse("\n   \n"), None);
    }

    #[test]
    fn reads_what_to_yaml_writes() {
        let value = json!({
            "b": {"cpu": "1k", "pods": 110},
            "a": [{"address": "10.0.0.1", "type": "InternalIP"}, {"x": [1, 2]}],
            "c": [],
            "d": {},
            "e": "True",
            "f": null,
            "g": [[]],
        });
        let yaml = super::super::yaml::to_yaml(&super::super::convert::to_template_value(&value));
        assert_eq!(parse(&yaml), Some(value), "{yaml}");
    }
}
