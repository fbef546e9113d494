//! Snapshot files: multi-document Kubernetes YAML, read with the number and
//! line of each document (so a malformed one is reported where it is), and
//! written in parallel. Reads what `kwokctl snapshot save --format k8s`
//! writes too: `List` documents are flattened and kwok's relative times,
//! `$(time-offset-nanosecond N)`, become times relative to the restore.
//!
//! A restore reads a file in two steps ([`scan_documents`]): every document
//! is checked and what the restore plans by is read of it (its [`Head`]:
//! kind, name, uid, owner references), the rest of a flow-style document
//! only checked, not built; its object is built from the text when it is
//! created ([`Body::into_object`]), so that a malformed file is refused
//! before anything is created and the objects are built while the API
//! server creates those before them.

use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use serde_json::Value;

use crate::Error;

/// The first line of a file ksim writes (a YAML comment; the version of
/// the layout: objects as multi-document YAML, server-owned fields dropped).
pub const HEADER: &str = "# ksim snapshot v1";

/// One object of a snapshot file.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// 1-based number of the YAML document it came from.
    pub number: usize,
    /// 1-based line where that document starts.
    pub line: usize,
    /// The object.
    pub object: Value,
}

/// What a restore needs to know of an object before building it: what
/// [`check_object`] checks, and what uids are remapped by.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Head {
    pub api_version: String,
    pub kind: String,
    /// `metadata.namespace`, if set.
    pub namespace: Option<String>,
    pub name: String,
    /// `metadata.uid`, if set.
    pub uid: Option<String>,
    /// `metadata.ownerReferences`, as the file has them.
    pub owner_references: Option<Value>,
}

impl Head {
    /// The head of a parsed object.
    pub fn of(object: &Value) -> Self {
        let text = |value: &Value| value.as_str().unwrap_or_default().to_string();
        let metadata = &object["metadata"];
        Head {
            api_version: text(&object["apiVersion"]),
            kind: text(&object["kind"]),
            namespace: metadata["namespace"].as_str().map(str::to_string),
            name: text(&metadata["name"]),
            uid: metadata["uid"].as_str().map(str::to_string),
            owner_references: metadata.get("ownerReferences").cloned(),
        }
    }
}

/// A document's object: built, or its text in the file, checked, to be
/// built when needed.
#[derive(Debug, Clone)]
pub enum Body {
    Object(Value),
    Text {
        file: Arc<String>,
        start: usize,
        end: usize,
    },
}

impl Default for Body {
    fn default() -> Self {
        Body::Object(Value::Null)
    }
}

impl Body {
    /// The object (built from its text if need be; the text was checked,
    /// so this fails only on what a check does not see, such as nesting
    /// beyond the parser's limit).
    pub fn into_object(self) -> Result<Value, String> {
        match self {
            Body::Object(object) => Ok(object),
            Body::Text { file, start, end } => {
                serde_json::from_str(&file[start..end]).map_err(|e| first_line(&e.to_string()))
            }
        }
    }
}

/// One document of a snapshot file as [`scan_documents`] reads it.
#[derive(Debug, Clone)]
pub struct ScannedDocument {
    /// 1-based number of the YAML document it came from.
    pub number: usize,
    /// 1-based line where that document starts.
    pub line: usize,
    pub head: Head,
    pub body: Body,
}

impl From<Document> for ScannedDocument {
    fn from(document: Document) -> Self {
        ScannedDocument {
            number: document.number,
            line: document.line,
            head: Head::of(&document.object),
            body: Body::Object(document.object),
        }
    }
}

/// The head of a flow-style document as read without building the rest
/// (which is checked as JSON while skipped). Anything unexpected in it
/// fails the read, and the document is then parsed whole instead (which
/// refuses it with the message a whole parse gives, or reads it).
#[derive(serde::Deserialize)]
struct FlowHead {
    #[serde(rename = "apiVersion")]
    api_version: String,
    kind: String,
    metadata: FlowMetadata,
}

#[derive(serde::Deserialize)]
struct FlowMetadata {
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default, rename = "ownerReferences")]
    owner_references: Option<Value>,
}

/// A document's text and where it starts.
struct Chunk<'a> {
    number: usize,
    line: usize,
    /// Byte offset of `text` in the file.
    start: usize,
    text: &'a str,
}

/// Splits multi-document YAML at `---` lines, numbering the documents that
/// hold anything but comments and blank lines.
fn split(text: &str) -> Vec<Chunk<'_>> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut start_line = 1;
    let mut offset = 0;
    let mut number = 0;
    let mut bounds = Vec::new();
    let mut line_number = 0;
    // Lines found with a vectorized search (a flow-style file is a few
    // long lines a document); only those starting as a separator does are
    // looked at.
    let mut newlines = memchr::memchr_iter(b'\n', text.as_bytes());
    while offset < text.len() {
        let end = newlines.next().map_or(text.len(), |i| i + 1);
        line_number += 1;
        if matches!(text.as_bytes()[offset], b'-' | b'.') {
            let trimmed = text[offset..end].trim_end();
            let separator = trimmed == "---" || trimmed.starts_with("--- ") || trimmed == "...";
            if separator {
                bounds.push((start, offset, start_line));
                start = end;
                start_line = line_number + 1;
            }
        }
        offset = end;
    }
    bounds.push((start, text.len(), start_line));
    for (from, to, line) in bounds {
        let body = &text[from..to];
        let blank = body.lines().all(|l| {
            let l = l.trim();
            l.is_empty() || l.starts_with('#')
        });
        if !blank {
            number += 1;
            chunks.push(Chunk {
                number,
                line,
                start: from,
                text: body,
            });
        }
    }
    chunks
}

/// Parses one document's text: a JSON (flow-style) document with serde_json,
/// anything else (or a JSON one that fails, for the message) as YAML.
fn parse_chunk(chunk: &Chunk<'_>, now: Option<DateTime<Utc>>) -> Result<Vec<Document>, Error> {
    let json = chunk
        .text
        .trim_start()
        .starts_with('{')
        .then(|| serde_json::from_str::<Value>(chunk.text).ok())
        .flatten();
    let value = match json {
        Some(value) => value,
        None => parse_yaml(chunk)?,
    };
    finish_chunk(chunk, value, now)
}

fn parse_yaml(chunk: &Chunk<'_>) -> Result<Value, Error> {
    serde_saphyr::from_str(chunk.text).map_err(|e| {
        let (line, column) = e
            .location()
            .map_or((0, 0), |l| (l.line() as usize, l.column() as usize));
        let message = yaml_message(&e.to_string());
        let line = chunk.line + line.saturating_sub(1);
        Error::Document {
            document: chunk.number,
            line,
            message: if column > 0 {
                format!("column {column}: {message}")
            } else {
                message
            },
        }
    })
}

/// Checks a parsed document and flattens a `List`; kwok's relative times
/// are resolved against `now` (`None`: the file has none).
fn finish_chunk(
    chunk: &Chunk<'_>,
    value: Value,
    now: Option<DateTime<Utc>>,
) -> Result<Vec<Document>, Error> {
    let invalid = |message: String| Error::Document {
        document: chunk.number,
        line: chunk.line,
        message,
    };
    let Value::Object(map) = value else {
        return Err(invalid("not a Kubernetes object (a mapping)".into()));
    };
    let mut value = Value::Object(map);
    if let Some(now) = now {
        resolve_time_offsets(&mut value, now);
    }
    let kind = value["kind"].as_str().unwrap_or_default();
    if kind.ends_with("List") && value["items"].is_array() {
        let items = match value.get_mut("items").map(Value::take) {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        };
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            check_object(&item).map_err(&invalid)?;
            out.push(Document {
                number: chunk.number,
                line: chunk.line,
                object: item,
            });
        }
        return Ok(out);
    }
    check_object(&value).map_err(invalid)?;
    Ok(vec![Document {
        number: chunk.number,
        line: chunk.line,
        object: value,
    }])
}

/// The YAML reader's message without its own location (relative to the
/// document; the error says the file's), nesting limits in words.
fn yaml_message(message: &str) -> String {
    let message = first_line(message);
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    let located = message
        .strip_prefix("line ")
        .and_then(|rest| rest.split_once(": "))
        .filter(|(place, _)| {
            place
                .split(" column ")
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        });
    let message = located.map_or(message, |(_, rest)| rest);
    if message == "recursion limit exceeded" || message.starts_with("budget breached: Depth") {
        "nested too deeply".to_string()
    } else {
        message.to_string()
    }
}

/// The first line of a parser's message (the rest is a snippet of the input).
fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or(message).trim().to_string()
}

/// An object needs apiVersion, kind and metadata.name.
fn check_object(object: &Value) -> Result<(), String> {
    for field in ["apiVersion", "kind"] {
        if object[field].as_str().is_none_or(str::is_empty) {
            return Err(format!("{field} not set"));
        }
    }
    if object["metadata"]["name"]
        .as_str()
        .is_none_or(str::is_empty)
    {
        return Err(format!(
            "{}: metadata.name not set",
            object["kind"].as_str().unwrap_or_default()
        ));
    }
    Ok(())
}

/// How kwok writes a time relative to the restore.
const TIME_OFFSET: &str = "$(time-offset-nanosecond ";

/// Whether a file holds kwok's relative times (a vectorized search).
fn has_time_offsets(text: &str) -> bool {
    memchr::memmem::find(text.as_bytes(), TIME_OFFSET.as_bytes()).is_some()
}

/// Replaces kwok's `$(time-offset-nanosecond N)` strings by `now + N`.
fn resolve_time_offsets(value: &mut Value, now: DateTime<Utc>) {
    match value {
        Value::String(s) => {
            if let Some(n) = s
                .strip_prefix(TIME_OFFSET)
                .and_then(|rest| rest.strip_suffix(')'))
                .and_then(|n| n.trim().parse::<i64>().ok())
            {
                let time = now + TimeDelta::nanoseconds(n);
                *s = time.to_rfc3339_opts(SecondsFormat::Secs, true);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| resolve_time_offsets(v, now)),
        Value::Object(map) => map.values_mut().for_each(|v| resolve_time_offsets(v, now)),
        _ => {}
    }
}

/// Parses a snapshot file: every object with its document number and line.
/// Kwok's relative times are resolved against `now` (objects are walked for
/// them only if the file holds any). Large files are parsed on all cores.
pub fn parse_documents(text: &str, now: DateTime<Utc>) -> Result<Vec<Document>, Error> {
    let now = has_time_offsets(text).then_some(now);
    let chunks = split(text);
    let workers = std::thread::available_parallelism()
        .map(std::num::NonZero::get)
        .unwrap_or(1)
        .min(8);
    if chunks.len() < 256 || workers == 1 {
        let mut out = Vec::with_capacity(chunks.len());
        for chunk in &chunks {
            out.extend(parse_chunk(chunk, now)?);
        }
        return Ok(out);
    }
    let per = chunks.len().div_ceil(workers);
    let parts: Vec<Result<Vec<Document>, Error>> = std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .chunks(per)
            .map(|part| {
                scope.spawn(move || {
                    let mut out = Vec::with_capacity(part.len());
                    for chunk in part {
                        out.extend(parse_chunk(chunk, now)?);
                    }
                    Ok(out)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Invalid("a parser thread panicked".into())))
            })
            .collect()
    });
    let mut out = Vec::with_capacity(chunks.len());
    // The first error in file order wins: parts are in order.
    for part in parts {
        out.extend(part?);
    }
    Ok(out)
}

/// Reads a snapshot file as a restore wants it: every document checked
/// (a malformed one is refused with its number and line, as
/// [`parse_documents`] refuses it), its [`Head`] read, and a flow-style
/// object's body left as its text in `file` (checked JSON), built when it
/// is created. Lists, block-style YAML, CustomResourceDefinitions (their
/// kinds are read before the restore) and files with kwok's relative times
/// are parsed whole. Large files are scanned on all cores.
pub fn scan_documents(
    file: Arc<String>,
    now: DateTime<Utc>,
) -> Result<Vec<ScannedDocument>, Error> {
    let now = has_time_offsets(&file).then_some(now);
    let chunks = split(&file);
    let scan = |part: &[Chunk<'_>]| -> Result<Vec<ScannedDocument>, Error> {
        let mut out = Vec::with_capacity(part.len());
        for chunk in part {
            match scan_flow(chunk, &file, now) {
                Some(document) => out.push(document),
                None => out.extend(
                    parse_chunk(chunk, now)?
                        .into_iter()
                        .map(ScannedDocument::from),
                ),
            }
        }
        Ok(out)
    };
    let workers = std::thread::available_parallelism()
        .map(std::num::NonZero::get)
        .unwrap_or(1)
        .min(8);
    if chunks.len() < 256 || workers == 1 {
        return scan(&chunks);
    }
    let per = chunks.len().div_ceil(workers);
    let parts: Vec<Result<Vec<ScannedDocument>, Error>> = std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .chunks(per)
            .map(|part| scope.spawn(|| scan(part)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Invalid("a parser thread panicked".into())))
            })
            .collect()
    });
    let mut out = Vec::with_capacity(chunks.len());
    // The first error in file order wins: parts are in order.
    for part in parts {
        out.extend(part?);
    }
    Ok(out)
}

/// A flow-style (JSON) document read for its head only, if it is one of
/// an object that [`check_object`] accepts, not a List nor a CRD, in a
/// file without relative times; `None` for anything else.
fn scan_flow(
    chunk: &Chunk<'_>,
    file: &Arc<String>,
    now: Option<DateTime<Utc>>,
) -> Option<ScannedDocument> {
    if now.is_some() || !chunk.text.trim_start().starts_with('{') {
        return None;
    }
    let head: FlowHead = serde_json::from_str(chunk.text).ok()?;
    let FlowHead {
        api_version,
        kind,
        metadata,
    } = head;
    if api_version.is_empty()
        || kind.is_empty()
        || metadata.name.is_empty()
        || kind.ends_with("List")
        || kind == "CustomResourceDefinition"
    {
        return None;
    }
    Some(ScannedDocument {
        number: chunk.number,
        line: chunk.line,
        head: Head {
            api_version,
            kind,
            namespace: metadata.namespace,
            name: metadata.name,
            uid: metadata.uid,
            owner_references: metadata.owner_references,
        },
        body: Body::Text {
            file: file.clone(),
            start: chunk.start,
            end: chunk.start + chunk.text.len(),
        },
    })
}

/// How objects are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Style {
    /// Each object on one line in YAML's flow style (JSON, which every YAML
    /// reader reads): fast to write and read at 100,000 objects.
    #[default]
    Flow,
    /// Block-style YAML, as `kubectl get -o yaml` prints.
    Block,
}

/// Appends one object as a document of a snapshot file: `---`, then the
/// object in `style`.
pub fn write_document(object: &Value, style: Style, out: &mut Vec<u8>) -> Result<(), String> {
    out.extend_from_slice(b"---\n");
    match style {
        Style::Flow => {
            serde_json::to_writer(&mut *out, object).map_err(|e| e.to_string())?;
            out.push(b'\n');
        }
        Style::Block => {
            out.extend_from_slice(
                serde_saphyr::to_string(object)
                    .map_err(|e| e.to_string())?
                    .as_bytes(),
            );
        }
    }
    Ok(())
}

/// Serializes objects as multi-document YAML after [`HEADER`], in parallel
/// for large snapshots.
pub fn write_documents(
    objects: &[Value],
    style: Style,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let render = |part: &[Value]| -> Result<Vec<u8>, String> {
        let mut text = Vec::with_capacity(part.len() * 1024);
        for object in part {
            write_document(object, style, &mut text)?;
        }
        Ok(text)
    };
    let workers = std::thread::available_parallelism()
        .map(std::num::NonZero::get)
        .unwrap_or(1)
        .min(8);
    writeln!(out, "{HEADER}")?;
    let per = objects.len().div_ceil(workers).max(256);
    let parts: Vec<Result<Vec<u8>, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = objects
            .chunks(per)
            .map(|part| scope.spawn(move || render(part)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a writer thread panicked".into()))
            })
            .collect()
    });
    for part in parts {
        let text = part.map_err(std::io::Error::other)?;
        out.write_all(&text)?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .expect("valid time")
            .with_timezone(&Utc)
    }

    #[test]
    fn documents_are_numbered_and_located() {
        let text = "# header\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\n\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: b\n";
        let docs = parse_documents(text, now()).expect("valid");
        assert_eq!(docs.len(), 2);
        assert_eq!((docs[0].number, docs[0].line), (1, 3));
        assert_eq!((docs[1].number, docs[1].line), (2, 10));
        assert_eq!(docs[1].object["metadata"]["name"], "b");
    }

    #[test]
    fn a_malformed_document_reports_its_number_and_file_line() {
        let text = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: [unclosed\n";
        let error = parse_documents(text, now()).expect_err("malformed");
        let Error::Document { document, line, .. } = &error else {
            panic!("unexpected error {error}");
        };
        assert_eq!(*document, 2);
        assert!(*line >= 9, "line {line} is not in the second document");
    }

    #[test]
    fn a_malformed_flow_document_is_located_by_the_yaml_reader() {
        let text = "---\n{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"a\"}}\n---\n{\"apiVersion\": \"v1\",\n \"kind\": [}\n";
        let error = parse_documents(text, now()).expect_err("malformed");
        let Error::Document { document, line, .. } = &error else {
            panic!("unexpected error {error}");
        };
        assert_eq!((*document, *line), (2, 5), "{error}");
    }

    #[test]
    fn deep_nesting_is_refused_with_its_document_and_line() {
        let deep = |open: &str, close: &str| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\ndata:\n  x: {}1{}\n",
                open.repeat(10_000),
                close.repeat(10_000)
            )
        };
        let block = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\ndata:\n  x:\n    {}1\n",
            "- ".repeat(10_000)
        );
        for text in [deep("[", "]"), deep("{a: ", "}"), block] {
            let error = parse_documents(&text, now()).expect_err("too deep");
            let Error::Document {
                document,
                line,
                message,
            } = &error
            else {
                panic!("unexpected error {error}");
            };
            assert_eq!(*document, 2, "{error}");
            assert!(message.ends_with(": nested too deeply"), "{error}");
            assert!(!message.contains("line"), "{error}");
            assert!((10..=12).contains(line), "{error}");
        }
    }

    #[test]
    fn an_object_without_a_kind_is_refused_with_its_document() {
        let text = "apiVersion: v1\nmetadata:\n  name: a\n";
        let error = parse_documents(text, now()).expect_err("no kind");
        assert_eq!(error.to_string(), "document 1 (line 1): kind not set");
    }

    #[test]
    fn kwok_relative_times_and_lists_are_read() {
        let text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: p\n    creationTimestamp: $(time-offset-nanosecond -60000000000)\n";
        let docs = parse_documents(text, now()).expect("valid");
        assert_eq!(docs.len(), 1);
        assert_eq!(
            docs[0].object["metadata"]["creationTimestamp"],
            "2025-12-31T23:59:00Z"
        );
    }

    /// What `scan_documents` reads, built: each document's number, line,
    /// head and object.
    fn scanned(text: &str) -> Result<Vec<(usize, usize, Head, Value)>, Error> {
        Ok(scan_documents(Arc::new(text.to_string()), now())?
            .into_iter()
            .map(|d| {
                let object = d.body.into_object().expect("a checked body");
                (d.number, d.line, d.head, object)
            })
            .collect())
    }

    #[test]
    fn scanned_documents_are_the_parsed_ones_whatever_their_style() {
        let mut objects: Vec<Value> = (0..300)
            .map(|i| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("p{i}"), "namespace": "a", "uid": format!("u{i}"),
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "r"}]}, "spec": {"nodeName": "n"}}))
            .collect();
        objects.push(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "w.example.com"}}));
        for style in [Style::Flow, Style::Block] {
            let mut out = Vec::new();
            write_documents(&objects, style, &mut out).expect("written");
            let mut text = String::from_utf8(out).expect("utf-8");
            // A List and kwok's times, block style, among flow documents.
            text.push_str("---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: a\n");
            let parsed = parse_documents(&text, now()).expect("valid");
            let scanned = scanned(&text).expect("valid");
            assert_eq!(parsed.len(), scanned.len(), "{style:?}");
            for (parsed, (number, line, head, object)) in parsed.into_iter().zip(scanned) {
                assert_eq!((parsed.number, parsed.line), (number, line), "{style:?}");
                assert_eq!(Head::of(&parsed.object), head, "{style:?}");
                assert_eq!(parsed.object, object, "{style:?}");
            }
        }
        // Only flow documents are left as text; CRDs are built at once.
        let mut out = Vec::new();
        write_documents(&objects, Style::Flow, &mut out).expect("written");
        let documents =
            scan_documents(Arc::new(String::from_utf8(out).expect("utf-8")), now()).expect("valid");
        let texts = documents
            .iter()
            .filter(|d| matches!(d.body, Body::Text { .. }))
            .count();
        assert_eq!(texts, 300);
        assert!(matches!(documents[300].body, Body::Object(_)));
    }

    #[test]
    fn a_malformed_document_late_in_a_large_flow_file_is_refused_where_it_is() {
        let objects: Vec<Value> = (0..5_000)
            .map(|i| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("c{i}"), "namespace": "a"}}))
            .collect();
        let mut out = Vec::new();
        write_documents(&objects, Style::Flow, &mut out).expect("written");
        let text = String::from_utf8(out).expect("utf-8");
        // Document 4,990 (after the header, `---` and the object a document:
        // line 2 * 4,990 + 1) loses its closing brace.
        let broken = text.replacen(
            "\"name\":\"c4989\",\"namespace\":\"a\"}}",
            "\"name\":\"c4989\",\"namespace\":\"a\"}",
            1,
        );
        let error = scanned(&broken).expect_err("malformed");
        let parsed = parse_documents(&broken, now()).expect_err("malformed");
        assert_eq!(error.to_string(), parsed.to_string());
        let Error::Document { document, line, .. } = error else {
            panic!("unexpected error {error}");
        };
        assert_eq!((document, line), (4_990, 9_981));
        // A head the quick read does not take is checked as a whole parse
        // checks it.
        let unnamed = text.replacen("\"name\":\"c4000\",", "\"name\":7,", 1);
        let error = scanned(&unnamed).expect_err("no name");
        assert_eq!(
            error.to_string(),
            "document 4001 (line 8003): ConfigMap: metadata.name not set"
        );
    }

    #[test]
    fn written_documents_read_back() {
        let objects: Vec<Value> = (0..600)
            .map(|i| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("c{i}"), "namespace": "default"}, "data": {"k": "a: b\n---\nc"}}))
            .collect();
        for style in [Style::Flow, Style::Block] {
            let mut out = Vec::new();
            write_documents(&objects, style, &mut out).expect("written");
            let text = String::from_utf8(out).expect("utf-8");
            assert!(text.starts_with(HEADER));
            let docs = parse_documents(&text, now()).expect("valid");
            let read: Vec<Value> = docs.into_iter().map(|d| d.object).collect();
            assert_eq!(read, objects, "{style:?}");
        }
    }
}
