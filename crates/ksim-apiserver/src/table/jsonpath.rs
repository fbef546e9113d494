//! The subset of Kubernetes JSONPath that CRD `additionalPrinterColumns`
//! use: `.a.b`, `['a.b']`, `[0]`, `[-1]`, `[*]`, `..`-free filters such as
//! `[?(@.type=="Ready")]`, evaluated with missing keys allowed.

use serde_json::Value;

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    Wildcard,
    Filter(Filter),
}

/// `[?(@.path op literal)]` or `[?(@.path)]`.
#[derive(Debug, Clone, PartialEq)]
struct Filter {
    path: Vec<Step>,
    comparison: Option<(String, Value)>,
}

/// A parsed JSONPath.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

/// Why a path does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

impl JsonPath {
    /// Parses a path such as `.status.conditions[?(@.type=="Ready")].status`
    /// (optionally wrapped in `{}`).
    pub fn parse(path: &str) -> Result<Self, ParseError> {
        let path = path.trim();
        let path = path
            .strip_prefix('{')
            .and_then(|p| p.strip_suffix('}'))
            .unwrap_or(path);
        let chars: Vec<char> = path.chars().collect();
        let mut pos = 0;
        let steps = parse_steps(&chars, &mut pos, false)?;
        if pos != chars.len() {
            return Err(ParseError(format!("unexpected {:?}", chars[pos])));
        }
        Ok(JsonPath { steps })
    }

    /// Every value the path selects, in document order.
    pub fn find<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        evaluate(&self.steps, root)
    }
}

fn parse_steps(chars: &[char], pos: &mut usize, in_filter: bool) -> Result<Vec<Step>, ParseError> {
    let mut steps = Vec::new();
    while *pos < chars.len() {
        match chars[*pos] {
            '.' => {
                *pos += 1;
                let mut name = String::new();
                while *pos < chars.len() {
                    let c = chars[*pos];
                    if c == '\\' && *pos + 1 < chars.len() {
                        name.push(chars[*pos + 1]);
                        *pos += 2;
                        continue;
                    }
                    if c == '.' || c == '[' || (in_filter && (c == ')' || "=!<> ".contains(c))) {
                        break;
                    }
                    name.push(c);
                    *pos += 1;
                }
                if name.is_empty() {
                    if steps.is_empty() && *pos == chars.len() {
                        break;
                    }
                    return Err(ParseError("empty field name".to_string()));
                }
                if name == "*" {
                    steps.push(Step::Wildcard);
                } else {
                    steps.push(Step::Field(name));
                }
            }
            '[' => {
                *pos += 1;
                steps.push(parse_bracket(chars, pos)?);
            }
            _ if in_filter => break,
            c => return Err(ParseError(format!("unexpected {c:?}"))),
        }
    }
    Ok(steps)
}

fn parse_bracket(chars: &[char], pos: &mut usize) -> Result<Step, ParseError> {
    let rest: String = chars[*pos..].iter().collect();
    if let Some(quote) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') {
        let end = rest[1..]
            .find(quote)
            .ok_or_else(|| ParseError("unterminated quote".to_string()))?;
        let name = rest[1..1 + end].to_string();
        *pos += rest[..end + 2].chars().count();
        expect(chars, pos, ']')?;
        return Ok(Step::Field(name));
    }
    if rest.starts_with("?(") {
        *pos += 2;
        skip_spaces(chars, pos);
        expect(chars, pos, '@')?;
        let path = parse_steps(chars, pos, true)?;
        skip_spaces(chars, pos);
        let mut operator = String::new();
        while *pos < chars.len() && "=!<>".contains(chars[*pos]) {
            operator.push(chars[*pos]);
            *pos += 1;
        }
        let comparison = if operator.is_empty() {
            None
        } else {
            if !["==", "!=", "<", ">", "<=", ">="].contains(&operator.as_str()) {
                return Err(ParseError(format!("unknown operator {operator}")));
            }
            skip_spaces(chars, pos);
            Some((operator, parse_literal(chars, pos)?))
        };
        skip_spaces(chars, pos);
        expect(chars, pos, ')')?;
        expect(chars, pos, ']')?;
        return Ok(Step::Filter(Filter { path, comparison }));
    }
    let end = rest
        .find(']')
        .ok_or_else(|| ParseError("unterminated [".to_string()))?;
    let inner = rest[..end].trim();
    *pos += rest[..=end].chars().count();
    if inner == "*" {
        return Ok(Step::Wildcard);
    }
    inner
        .parse::<i64>()
        .map(Step::Index)
        .map_err(|_| ParseError(format!("unsupported subscript [{inner}]")))
}

fn parse_literal(chars: &[char], pos: &mut usize) -> Result<Value, ParseError> {
    let Some(&first) = chars.get(*pos) else {
        return Err(ParseError("missing literal".to_string()));
    };
    if first == '\'' || first == '"' {
        *pos += 1;
        let start = *pos;
        while *pos < chars.len() && chars[*pos] != first {
            *pos += 1;
        }
        if *pos == chars.len() {
            return Err(ParseError("unterminated quote".to_string()));
        }
        let text: String = chars[start..*pos].iter().collect();
        *pos += 1;
        return Ok(Value::String(text));
    }
    let start = *pos;
    while *pos < chars.len() && chars[*pos] != ')' && chars[*pos] != ' ' {
        *pos += 1;
    }
    let text: String = chars[start..*pos].iter().collect();
    match text.as_str() {
        "true" => Ok(Value::Bool(true)),
        "false" => Ok(Value::Bool(false)),
        _ => serde_json::from_str::<serde_json::Number>(&text)
            .map(Value::Number)
            .map_err(|_| ParseError(format!("bad literal {text}"))),
    }
}

fn skip_spaces(chars: &[char], pos: &mut usize) {
    while chars.get(*pos) == Some(&' ') {
        *pos += 1;
    }
}

fn expect(chars: &[char], pos: &mut usize, c: char) -> Result<(), ParseError> {
    if chars.get(*pos) == Some(&c) {
        *pos += 1;
        Ok(())
    } else {
        Err(ParseError(format!("expected {c:?}")))
    }
}

fn evaluate<'a>(steps: &[Step], root: &'a Value) -> Vec<&'a Value> {
    let mut current = vec![root];
    for step in steps {
        let mut next = Vec::new();
        for value in current {
            match step {
                Step::Field(name) => next.extend(value.get(name.as_str())),
                Step::Index(index) => {
                    if let Some(items) = value.as_array() {
                        let len = items.len() as i64;
                        let i = if *index < 0 { len + index } else { *index };
                        if (0..len).contains(&i) {
                            next.extend(items.get(i as usize));
                        }
                    }
                }
                Step::Wildcard => match value {
                    Value::Array(items) => next.extend(items.iter()),
                    Value::Object(map) => next.extend(map.values()),
                    _ => {}
                },
                Step::Filter(filter) => {
                    if let Some(items) = value.as_array() {
                        next.extend(items.iter().filter(|item| filter.matches(item)));
                    }
                }
            }
        }
        current = next;
    }
    current
}

impl Filter {
    fn matches(&self, item: &Value) -> bool {
        let found = evaluate(&self.path, item);
        let Some((operator, literal)) = &self.comparison else {
            return !found.is_empty();
        };
        let Some(left) = found.first() else {
            return false;
        };
        match operator.as_str() {
            "==" => equal(left, literal),
            "!=" => !equal(left, literal),
            _ => match (left.as_f64(), literal.as_f64()) {
                (Some(l), Some(r)) => match operator.as_str() {
                    "<" => l < r,
                    ">" => l > r,
                    "<=" => l <= r,
                    _ => l >= r,
                },
                _ => false,
            },
        }
    }
}

fn equal(left: &Value, right: &Value) -> bool {
    match (left.as_f64(), right.as_f64()) {
        (Some(l), Some(r)) => l == r,
        _ => left == right,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_values_of_printer_column_paths() {
        let object = json!({
            "metadata": {"labels": {"app.kubernetes.io/name": "web"}},
            "spec": {"replicas": 3, "items": [{"name": "a"}, {"name": "b"}]},
            "status": {"conditions": [
                {"type": "Progressing", "status": "True"},
                {"type": "Ready", "status": "False", "count": 2}
            ]}
        });
        let cases = [
            (".spec.replicas", vec![json!(3)]),
            ("{.spec.replicas}", vec![json!(3)]),
            (".spec.missing", vec![]),
            (".spec.items[0].name", vec![json!("a")]),
            (".spec.items[-1].name", vec![json!("b")]),
            (".spec.items[5].name", vec![]),
            (".spec.items[*].name", vec![json!("a"), json!("b")]),
            (
                ".metadata.labels['app.kubernetes.io/name']",
                vec![json!("web")],
            ),
            (
                ".metadata.labels.app\\.kubernetes\\.io/name",
                vec![json!("web")],
            ),
            (
                ".status.conditions[?(@.type==\"Ready\")].status",
                vec![json!("False")],
            ),
            (
                ".status.conditions[?(@.type == 'Progressing')].status",
                vec![json!("True")],
            ),
            (
                ".status.conditions[?(@.count>1)].type",
                vec![json!("Ready")],
            ),
            (".status.conditions[?(@.count)].type", vec![json!("Ready")]),
        ];
        for (path, want) in cases {
            let parsed = JsonPath::parse(path).expect(path);
            let found: Vec<Value> = parsed.find(&object).into_iter().cloned().collect();
            assert_eq!(found, want, "{path}");
        }
    }

    #[test]
    fn rejects_malformed_paths() {
        for path in [".spec[", ".spec['x]", ".a[?(@.b=)]", ".a[x]", "spec"] {
            assert!(JsonPath::parse(path).is_err(), "{path}");
        }
    }
}
