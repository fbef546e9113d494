//! A fast path for the jq expressions stages use most: field paths such as
//! `.status.phase` or `.metadata.labels["a/b"]`, iteration `.[]`, and
//! `select( .field == "literal" )` in a pipeline. These are run straight on
//! the object's JSON, without converting it for jaq; any other expression
//! (and any output the fast path cannot reproduce exactly) goes to jaq.

use serde_json::Value;

/// One step of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    /// `.name` or `["name"]`.
    Field(String),
    /// `.[]` or `[]`.
    Iterate,
    /// `select( <path> == "literal" )`.
    SelectEq(Vec<Step>, String),
}

/// A compiled fast-path expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FastPath(Vec<Step>);

/// What running a fast path gave.
#[derive(Debug, PartialEq, Eq)]
pub enum FastOutput<'a> {
    /// The outputs (nulls included; the caller skips them as jq's callers do).
    Values(Vec<&'a Value>),
    /// jq would fail at run time (e.g. a field of a string): no output at all.
    Error,
}

impl FastPath {
    /// Parses `source` if it is in the fast path's grammar.
    pub fn parse(source: &str) -> Option<Self> {
        let mut steps = Vec::new();
        for (i, stage) in source.split('|').enumerate() {
            let stage = stage.trim();
            if let Some(inner) = stage
                .strip_prefix("select(")
                .and_then(|s| s.strip_suffix(')'))
            {
                let (path, literal) = inner.split_once("==")?;
                let literal = parse_string(literal.trim())?;
                let path = parse_path(path.trim())?;
                steps.push(Step::SelectEq(path, literal));
            } else {
                let path = parse_path(stage)?;
                if path.is_empty() && i > 0 {
                    return None;
                }
                steps.extend(path);
            }
        }
        Some(Self(steps))
    }

    /// The object fields the expression starts by reading (`.status.conditions`
    /// for `.status.conditions.[] | select( .type == "Ready" ) | .status`):
    /// everything it reads lies under this path (an empty path: the whole object).
    pub fn field_prefix(&self) -> Vec<&str> {
        self.0
            .iter()
            .map_while(|step| match step {
                Step::Field(name) => Some(name.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Runs the expression on `object`.
    pub fn run<'a>(&self, object: &'a Value) -> FastOutput<'a> {
        match run_steps(&self.0, vec![object]) {
            Some(values) => FastOutput::Values(values),
            None => FastOutput::Error,
        }
    }
}

fn run_steps<'a>(steps: &[Step], mut values: Vec<&'a Value>) -> Option<Vec<&'a Value>> {
    for step in steps {
        let mut next = Vec::with_capacity(values.len());
        for value in values {
            match step {
                Step::Field(name) => match value {
                    Value::Object(map) => next.push(map.get(name).unwrap_or(&Value::Null)),
                    Value::Null => next.push(&Value::Null),
                    _ => return None,
                },
                Step::Iterate => match value {
                    Value::Array(items) => next.extend(items.iter()),
                    Value::Object(map) => next.extend(map.values()),
                    _ => return None,
                },
                Step::SelectEq(path, literal) => {
                    let outputs = run_steps(path, vec![value])?;
                    for output in outputs {
                        if output.as_str() == Some(literal.as_str()) {
                            next.push(value);
                        }
                    }
                }
            }
        }
        values = next;
    }
    Some(values)
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Parses `.a.b["c"].[]`; `.` alone is the empty path.
fn parse_path(source: &str) -> Option<Vec<Step>> {
    let mut rest = source.strip_prefix('.')?;
    let mut steps = Vec::new();
    loop {
        if rest.is_empty() {
            return Some(steps);
        }
        if let Some(after) = rest.strip_prefix("[]") {
            steps.push(Step::Iterate);
            rest = after;
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            steps.push(Step::Field(parse_string(after[..end].trim())?));
            rest = &after[end + 1..];
        } else if rest.starts_with(is_ident_start) {
            let end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
            steps.push(Step::Field(rest[..end].to_owned()));
            rest = &rest[end..];
        } else {
            return None;
        }
        if rest.is_empty() {
            return Some(steps);
        }
        rest = match rest.strip_prefix('.') {
            Some(after) if !after.is_empty() => after,
            Some(_) => return None,
            None if rest.starts_with('[') => rest,
            None => return None,
        };
    }
}

/// A double-quoted string without escapes.
fn parse_string(source: &str) -> Option<String> {
    let inner = source.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains(['"', '\\'])).then(|| inner.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_expressions_stages_use() {
        let accepted = [
            ".status.phase",
            ".metadata.deletionTimestamp",
            r#".metadata.labels["node-not-ready.stage.kwok.x-k8s.io"]"#,
            ".metadata.ownerReferences.[].kind",
            r#".status.conditions.[] | select( .type == "Ready" ) | .status"#,
            ".status.initContainerStatuses.[].state.waiting.reason",
            ".a[]",
            ".",
        ];
        for source in accepted {
            assert!(FastPath::parse(source).is_some(), "{source}");
        }
        let rejected = [
            "status",
            ".a..b",
            ".a.",
            ".a, .b",
            r#".a["x\"y"]"#,
            ".a | length",
            r#"select(.a == 1)"#,
            ".a.b?",
            ".a | .",
        ];
        for source in rejected {
            assert_eq!(FastPath::parse(source), None, "{source}");
        }
    }

    #[test]
    fn prefixes_are_the_leading_fields() {
        let prefix = |source: &str| -> Vec<String> {
            let path = FastPath::parse(source).expect("parses");
            path.field_prefix().into_iter().map(str::to_owned).collect()
        };
        assert_eq!(prefix(".status.phase"), ["status", "phase"]);
        assert_eq!(
            prefix(r#".status.conditions.[] | select( .type == "Ready" ) | .status"#),
            ["status", "conditions"]
        );
        assert_eq!(
            prefix(r#".metadata.labels["a/b"]"#),
            ["metadata", "labels", "a/b"]
        );
        assert!(prefix(".[] | .a").is_empty());
        assert!(prefix(".").is_empty());
    }
}
