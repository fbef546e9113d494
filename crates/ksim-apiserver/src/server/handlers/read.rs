//! Reads: get, list (with selectors and paging; answered as JSON from the
//! bytes serialized at write time, as YAML, a Table or metadata only) and
//! the continue tokens of paged lists.

use super::*;

impl ResourceRequest {
    pub(super) fn get(&self, output: Output) -> Result<Response, ApiError> {
        let object = self.stored()?;
        Ok(self.respond_object(StatusCode::OK, output, &object))
    }

    /// The label and field selectors of the request, as one filter.
    pub(crate) fn selectors(&self) -> Result<ObjectFilter, ApiError> {
        let labels = match self.query.get("labelSelector") {
            Some(s) => LabelSelectorRequirements::parse(s)
                .map_err(|e| ApiError::bad_request(e.to_string()))?,
            None => LabelSelectorRequirements::default(),
        };
        let mut fields = match self.query.get("fieldSelector") {
            Some(s) => FieldSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?,
            None => FieldSelector::default(),
        };
        strategy::check_field_selector(self.resource(), &fields)?;
        for requirement in &mut fields.requirements {
            requirement.field = conversion::storage_field(self.resource(), &requirement.field);
        }
        Ok(ObjectFilter { labels, fields })
    }

    pub(super) fn list(&self, output: Output) -> Result<Response, ApiError> {
        let filter = self.selectors()?;
        let limit = self
            .query
            .get("limit")
            .and_then(|l| l.parse::<usize>().ok());
        let (continue_after, first_page_revision, served_before) = match self.query.get("continue")
        {
            Some(token) => {
                let token = decode_continue(token)?;
                (Some(token.start), token.revision, token.served)
            }
            None => (None, None, None),
        };
        // kube-apiserver counts the items after a page only when no
        // selector narrows the list.
        let mut page = if filter.is_empty() {
            self.state.store.list_counted(
                &self.collection(),
                self.target.namespace.as_deref(),
                continue_after.as_ref(),
                limit,
                served_before,
            )
        } else {
            self.state.store.list(
                &self.collection(),
                self.target.namespace.as_deref(),
                continue_after.as_ref(),
                limit,
                |object| filter.matches(object),
            )
        };
        // Every page is read from the current state but carries the first
        // page's revision (kept in the continue token), so a client that
        // watches from the list's resourceVersion sees every change made
        // while it paged, as it would after kube-apiserver's snapshot list
        // (a change may be seen twice: in a later page and as an event).
        if let Some(revision) = first_page_revision {
            page.revision = page.revision.min(revision);
        }
        Ok(self.respond_list(output, &page))
    }

    pub(super) fn list_metadata(&self, page: &ListPage) -> Value {
        let mut metadata = json!({"resourceVersion": page.revision.to_string()});
        if let Some(key) = &page.continue_after {
            metadata["continue"] = json!(encode_continue(key, page.revision, page.served));
            if let Some(remaining) = page.remaining {
                metadata["remainingItemCount"] = json!(remaining);
            }
        }
        metadata
    }

    pub(super) fn respond_list(&self, output: Output, page: &ListPage) -> Response {
        let metadata = self.list_metadata(page);
        match output {
            Output::Table { v1beta1 } => {
                let values: Vec<std::borrow::Cow<'_, Value>> = page
                    .items
                    .iter()
                    .map(|o| conversion::for_table(self.resource(), &o.value))
                    .collect();
                let refs: Vec<&Value> = values.iter().map(|v| v.as_ref()).collect();
                let table = crate::table::write_table(
                    self.resource(),
                    self.registry.printer_columns(self.resource()),
                    &refs,
                    &self.table_options(false),
                    self.state.clock.now(),
                    meta_api_version(v1beta1),
                    &metadata,
                );
                codec::respond(StatusCode::OK, "application/json", Bytes::from(table))
            }
            Output::Metadata { v1beta1 } => {
                // Written as serializing the list would, keys in order; each
                // item straight from its stored metadata.
                let api_version = meta_api_version(v1beta1);
                let mut out = Vec::with_capacity(64 + page.items.len() * 512);
                out.extend_from_slice(b"{\"apiVersion\":\"");
                out.extend_from_slice(api_version.as_bytes());
                out.extend_from_slice(b"\",\"items\":[");
                for (n, object) in page.items.iter().enumerate() {
                    if n > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(&object.partial_metadata_json(api_version));
                }
                out.extend_from_slice(b"],\"kind\":\"PartialObjectMetadataList\",\"metadata\":");
                out.extend_from_slice(&serde_json::to_vec(&metadata).unwrap_or_default());
                out.push(b'}');
                codec::respond(StatusCode::OK, "application/json", Bytes::from(out))
            }
            Output::Yaml => {
                let items: Vec<Value> = page
                    .items
                    .iter()
                    .map(|o| self.for_version(o).into_owned())
                    .collect();
                let list = json!({
                    "kind": format!("{}List", self.resource().kind),
                    "apiVersion": self.resource().api_version(),
                    "metadata": metadata,
                    "items": items,
                });
                codec::respond_value(StatusCode::OK, Output::Yaml, &list)
            }
            Output::Json => {
                // Items are copied as the bytes serialized at write time.
                let api_version = self.resource().api_version();
                let head = json!({
                    "kind": format!("{}List", self.resource().kind),
                    "apiVersion": api_version,
                    "metadata": metadata,
                });
                let head = serde_json::to_vec(&head).unwrap_or_default();
                // Sized for the head (a continue token makes it longer than
                // a guess) and every item, so the body of a large list is
                // never moved to a bigger buffer while it is written.
                let mut body = BytesMut::with_capacity(
                    head.len() + 16 + page.items.iter().map(|o| o.json.len() + 1).sum::<usize>(),
                );
                // `{...}` without its closing brace, then the items.
                body.put_slice(&head[..head.len().saturating_sub(1)]);
                body.put_slice(b",\"items\":[");
                for (i, object) in page.items.iter().enumerate() {
                    if i > 0 {
                        body.put_u8(b',');
                    }
                    if conversion::is_identity(self.resource(), &object.value) {
                        body.put_slice(&object.json);
                    } else {
                        let value = self.for_version(object);
                        body.put_slice(&serde_json::to_vec(value.as_ref()).unwrap_or_default());
                    }
                }
                body.put_slice(b"]}");
                codec::respond(StatusCode::OK, "application/json", body.freeze())
            }
        }
    }
}

/// Continue tokens: base64 of `{"v":"meta.k8s.io/v1","rv":N,"start":"<ns>/<name>\u0000"}`,
/// the form kube-apiserver uses, with ksim's `"served":N` (how many items
/// the pages so far served: the next page counts `remainingItemCount` from
/// it instead of walking the rest of the collection).
pub(crate) fn encode_continue(key: &(String, String), revision: u64, served: usize) -> String {
    let start = format!("{}/{}", key.0, key.1);
    let token = json!({
        "v": "meta.k8s.io/v1",
        "rv": revision,
        "start": format!("{start}\u{0}"),
        "served": served,
    });
    base64_encode(&serde_json::to_vec(&token).unwrap_or_default())
}

/// What a continue token carries.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ContinueToken {
    /// The key of the last item served.
    pub start: (String, String),
    /// The revision of the list's first page, when the token carries one.
    pub revision: Option<u64>,
    /// How many items the pages so far served, when the token says.
    pub served: Option<usize>,
}

/// Reads a continue token.
pub(crate) fn decode_continue(token: &str) -> Result<ContinueToken, ApiError> {
    let invalid = || {
        ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let bytes = base64_decode(token).ok_or_else(invalid)?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    let start = value["start"].as_str().ok_or_else(invalid)?;
    let start = start.strip_suffix('\u{0}').unwrap_or(start);
    let (namespace, name) = start.split_once('/').ok_or_else(invalid)?;
    Ok(ContinueToken {
        start: (namespace.to_string(), name.to_string()),
        revision: value["rv"].as_u64(),
        served: value["served"]
            .as_u64()
            .and_then(|n| usize::try_from(n).ok()),
    })
}

pub(super) const BASE64: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub(crate) fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(BASE64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub(crate) fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut buffer = 0u32;
    let mut bits = 0;
    for c in text.bytes().filter(|c| *c != b'=') {
        let value = BASE64.iter().position(|b| *b == c)? as u32;
        buffer = (buffer << 6) | value;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let key = ("default".to_string(), "web-1".to_string());
        let token = encode_continue(&key, 42, 7);
        assert_eq!(
            decode_continue(&token).expect("valid"),
            ContinueToken {
                start: key,
                revision: Some(42),
                served: Some(7)
            }
        );
        assert_eq!(decode_continue("!!!").expect_err("invalid").code, 400);
    }

    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(base64_encode(b"ksim"), "a3NpbQ==");
        assert_eq!(base64_decode("a3NpbQ==").expect("valid"), b"ksim");
    }
}
