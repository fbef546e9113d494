//! Patches: JSON patch, merge patch, strategic merge patch and server-side
//! apply (which may create), retried on write conflicts.

use super::write::create_object_tracked;
use super::*;

impl ResourceRequest {
    pub(super) fn patch(&self, output: Output, body: &[u8]) -> Result<Response, ApiError> {
        let patch_type = codec::content_type(&self.headers);
        let resource = self.resource().clone();
        let manager = self.field_manager("unknown");
        let patch = match patch_type.as_str() {
            "application/json-patch+json"
            | "application/merge-patch+json"
            | "application/strategic-merge-patch+json" => serde_json::from_slice::<Value>(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?,
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                codec::decode(codec::BodyFormat::Yaml, body)?
            }
            other => return Err(ApiError::unsupported_media_type(other)),
        };
        if patch_type == "application/strategic-merge-patch+json" && resource.custom {
            return Err(ApiError::unsupported_media_type(&patch_type));
        }
        let apply = patch_type == "application/apply-patch+yaml";
        if apply && self.query.get("fieldManager").is_none() {
            return Err(ApiError::bad_request(
                "PATCH /apply requests require a fieldManager",
            ));
        }
        let mut warnings = Vec::new();
        for _attempt in 0..8 {
            let current =
                match self
                    .state
                    .store
                    .get(&self.collection(), self.namespace(), self.name())
                {
                    Some(current) => current,
                    None if apply && self.target.subresource.is_none() => {
                        return self.apply_create(output, &patch, &manager);
                    }
                    None => {
                        return Err(ApiError::not_found(
                            &resource.group,
                            &resource.plural,
                            self.name(),
                        ));
                    }
                };
            let new = if self.target.subresource.as_deref() == Some("scale") {
                self.patch_scale(&current, &patch_type, &patch)?
            } else {
                // A patch that does not name managedFields is applied to the
                // stored form: no copy of the object, managedFields not parsed.
                let live = if apply || mentions_managed_fields(body) {
                    self.for_version(&current)
                } else {
                    conversion::from_storage_for_patch(&resource, &current.value)
                };
                let mut patched = if apply {
                    self.apply_patch(Some(live.as_ref()), &patch, &manager)?
                } else {
                    apply_patch(&resource, &patch_type, live.as_ref(), &patch)?
                };
                let stored_managed_fields = conversion::take_stored_managed_fields(&mut patched);
                self.check_body(&mut patched, true)?;
                warnings = self.validate_fields(&mut patched, None)?;
                conversion::put_back_managed_fields(&mut patched, stored_managed_fields);
                let mut patched = conversion::to_storage(&resource, patched);
                if apply {
                    match self.target.subresource.as_deref() {
                        Some("status") => {
                            let mut new =
                                strategy::prepare_for_status_update(&current.value, &patched);
                            if resource.custom {
                                admit_update(&self.state, &resource, &current.value, &mut new)?;
                            }
                            new
                        }
                        _ => {
                            strategy::prepare_for_update(&resource, &current.value, &mut patched);
                            admit_update(&self.state, &resource, &current.value, &mut patched)?;
                            patched
                        }
                    }
                } else {
                    self.prepare_write(&current, patched, &manager)?
                }
            };
            // A resourceVersion in the patch is a precondition.
            let sent_version = patch["metadata"]["resourceVersion"].as_str();
            if let Some(version) = sent_version
                && parse_revision(version)? != current.revision
            {
                return Err(store_error(
                    &resource,
                    self.name(),
                    StoreError::Conflict("the object has been modified; please apply your changes to the latest version and try again".into()),
                ));
            }
            let written = if self.target.subresource.as_deref() == Some("scale") {
                self.write_scale(output, new, Some(current.revision))
            } else {
                // Tracked by prepare_write unless applied.
                let written = !apply && self.tracks_into_text();
                self.write(output, &current, new, Some(current.revision), written)
            };
            match written {
                Err(error) if error.reason == "Conflict" && sent_version.is_none() => continue,
                Ok(mut response) => {
                    add_warnings(&mut response, &warnings);
                    return Ok(response);
                }
                other => return other,
            }
        }
        Err(ApiError::conflict(
            &resource.group,
            &resource.plural,
            self.name(),
            "the object has been modified; please apply your changes to the latest version and try again",
        ))
    }

    /// Server-side apply onto `live`: the applied object, or 409 conflicts.
    pub(super) fn apply_patch(
        &self,
        live: Option<&Value>,
        applied: &Value,
        manager: &str,
    ) -> Result<Value, ApiError> {
        let resource = self.resource();
        let definition = definition_of(resource);
        let mut applied = applied.clone();
        self.check_body(&mut applied, false)?;
        if self.target.subresource.is_none()
            && resource.has_subresource("status")
            && let Some(map) = applied.as_object_mut()
        {
            map.remove("status");
        }
        let now = self.state.now();
        let api_version = resource.api_version();
        let request = ksim_core::apply::ApplyRequest {
            definition: definition.as_deref(),
            live,
            applied: &applied,
            manager,
            force: self.query.flag("force"),
            api_version: &api_version,
            now: &now,
        };
        match ksim_core::apply::server_side_apply(&request) {
            Ok(ksim_core::apply::ApplyOutcome::Applied(object)) => Ok(object),
            Ok(ksim_core::apply::ApplyOutcome::Conflicts(conflicts)) => {
                let mut error =
                    ApiError::conflict(&resource.group, &resource.plural, self.name(), "");
                error.message = ksim_core::apply::conflict_message(&conflicts);
                let causes: Vec<Value> = conflicts
                    .iter()
                    .map(|c| json!({"reason": "FieldManagerConflict", "message": c.cause_message(), "field": c.field}))
                    .collect();
                if let Some(details) = error.details.as_mut() {
                    details["causes"] = json!(causes);
                }
                Err(error)
            }
            Err(e) => Err(ApiError::bad_request(e.to_string())),
        }
    }

    pub(super) fn apply_create(
        &self,
        output: Output,
        patch: &Value,
        manager: &str,
    ) -> Result<Response, ApiError> {
        let mut applied = self.apply_patch(None, patch, manager)?;
        let _ = self.validate_fields(&mut applied, None)?;
        let applied = conversion::to_storage(self.resource(), applied);
        let created = if self.query.dry_run() {
            Arc::new(StoredObject::dry_run(prepare_new_object(
                &self.state,
                self.resource(),
                applied,
                None,
            )?))
        } else {
            create_object_tracked(&self.state, self.resource(), applied, None)?
        };
        Ok(self.respond_object(StatusCode::CREATED, output, &created))
    }
}

pub(crate) fn apply_generic_patch(
    patch_type: &str,
    original: &Value,
    patch: &Value,
) -> Result<Value, ApiError> {
    let mut result = original.clone();
    match patch_type {
        "application/json-patch+json" => {
            let operations: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            json_patch::patch(&mut result, &operations)
                .map_err(|e| ApiError::invalid_patch(e.to_string()))?;
        }
        _ => json_patch::merge(&mut result, patch),
    }
    Ok(result)
}

/// Applies a JSON, merge or strategic merge patch.
pub(crate) fn apply_patch(
    resource: &ResourceInfo,
    patch_type: &str,
    original: &Value,
    patch: &Value,
) -> Result<Value, ApiError> {
    if patch_type == "application/strategic-merge-patch+json" {
        let definition = definition_of(resource).unwrap_or_default();
        return ksim_core::patch::strategic_merge_patch(&definition, original, patch)
            .map_err(|e| ApiError::invalid_patch(e.to_string()));
    }
    if patch_type == "application/merge-patch+json" && !patch.is_object() {
        return Err(ApiError::bad_request(
            "error decoding patch: the patch must be a JSON object",
        ));
    }
    apply_generic_patch(patch_type, original, patch)
}

/// Whether a patch body names `managedFields` anywhere (then it is applied to
/// the API form of the object).
fn mentions_managed_fields(body: &[u8]) -> bool {
    body.windows(b"managedFields".len())
        .any(|window| window == b"managedFields")
}
