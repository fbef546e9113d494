//! The scale and binding subresources (eviction is in `eviction.rs`).

use super::patch::apply_generic_patch;
use super::*;

impl ResourceRequest {
    pub(super) fn scale_of(&self, object: &Value) -> Result<Value, ApiError> {
        let (spec_path, status_path) = self.scale_paths()?;
        let replicas = json_path_get(object, &spec_path)
            .cloned()
            .unwrap_or(json!(0));
        let status_replicas = json_path_get(object, &status_path)
            .cloned()
            .unwrap_or(json!(0));
        let selector = object["status"]["selector"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| {
                serde_json::from_value(object["spec"]["selector"].clone())
                    .ok()
                    .and_then(|selector| ksim_core::selector::label_selector_string(&selector).ok())
                    .unwrap_or_default()
            });
        let metadata = &object["metadata"];
        Ok(json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": metadata["name"],
                "namespace": metadata["namespace"],
                "uid": metadata["uid"],
                "resourceVersion": metadata["resourceVersion"],
                "creationTimestamp": metadata["creationTimestamp"],
            },
            "spec": {"replicas": replicas},
            "status": {"replicas": status_replicas, "selector": selector},
        }))
    }

    pub(super) fn scale_paths(&self) -> Result<(String, String), ApiError> {
        let resource = self.resource();
        if resource.custom {
            let crd = self
                .registry
                .crds()
                .iter()
                .find(|crd| {
                    crd["spec"]["group"] == json!(resource.group)
                        && crd["spec"]["names"]["plural"] == json!(resource.plural)
                })
                .ok_or_else(ApiError::not_found_path)?;
            crd_scale_paths(crd, &resource.version).ok_or_else(ApiError::not_found_path)
        } else {
            Ok((".spec.replicas".into(), ".status.replicas".into()))
        }
    }

    pub(super) fn get_scale(&self, output: Output) -> Result<Response, ApiError> {
        let object = self.stored()?;
        let scale = self.scale_of(&object.value)?;
        Ok(codec::respond_value(StatusCode::OK, plain(output), &scale))
    }

    /// The object with the replicas a (patched or sent) Scale asks for.
    pub(super) fn with_scale(
        &self,
        current: &StoredObject,
        scale: &Value,
    ) -> Result<Value, ApiError> {
        let replicas = scale["spec"]["replicas"].as_i64().ok_or_else(|| {
            ApiError::invalid(
                "autoscaling",
                "Scale",
                self.name(),
                vec![crate::StatusCause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value".into(),
                    field: "spec.replicas".into(),
                }],
            )
        })?;
        if replicas < 0 {
            return Err(ApiError::invalid(
                "autoscaling",
                "Scale",
                self.name(),
                vec![crate::StatusCause {
                    reason: "FieldValueInvalid".into(),
                    message: format!(
                        "Invalid value: {replicas}: must be greater than or equal to 0"
                    ),
                    field: "spec.replicas".into(),
                }],
            ));
        }
        let (spec_path, _) = self.scale_paths()?;
        let mut new = current.value.clone();
        json_path_set(&mut new, &spec_path, json!(replicas));
        let mut prepared = new.clone();
        strategy::prepare_for_update(self.resource(), &current.value, &mut prepared);
        if let Some(status) = current.value.get("status") {
            prepared["status"] = status.clone();
        }
        let definition = definition_of(self.resource());
        ksim_core::apply::track_subresource_update(
            definition.as_deref(),
            Some(&current.value),
            &mut prepared,
            &self.field_manager("unknown"),
            "scale",
            &self.resource().api_version(),
            &self.state.now(),
        );
        Ok(prepared)
    }

    pub(super) fn patch_scale(
        &self,
        current: &StoredObject,
        patch_type: &str,
        patch: &Value,
    ) -> Result<Value, ApiError> {
        let scale = self.scale_of(&current.value)?;
        let patched = match patch_type {
            "application/json-patch+json" | "application/merge-patch+json" => {
                apply_generic_patch(patch_type, &scale, patch)?
            }
            _ => {
                let mut merged = scale.clone();
                json_patch::merge(&mut merged, patch);
                merged
            }
        };
        self.with_scale(current, &patched)
    }

    pub(super) fn update_scale(&self, output: Output, body: &[u8]) -> Result<Response, ApiError> {
        let scale = codec::decode_object(&self.headers, body)?;
        let current = self.stored()?;
        let expected = match scale["metadata"]["resourceVersion"].as_str() {
            Some(v) if !v.is_empty() => Some(parse_revision(v)?),
            _ => None,
        };
        let new = self.with_scale(&current, &scale)?;
        self.write_scale(output, new, expected)
    }

    /// Writes an object changed through its scale subresource and answers
    /// the resulting Scale.
    pub(super) fn write_scale(
        &self,
        output: Output,
        new: Value,
        expected: Option<u64>,
    ) -> Result<Response, ApiError> {
        if self.query.dry_run() {
            let scale = self.scale_of(&new)?;
            return Ok(codec::respond_value(StatusCode::OK, plain(output), &scale));
        }
        let outcome = self
            .state
            .store
            .update(&self.collection(), new, expected)
            .map_err(|e| store_error(self.resource(), self.name(), e))?;
        let scale = self.scale_of(&outcome.object().value)?;
        Ok(codec::respond_value(StatusCode::OK, plain(output), &scale))
    }

    pub(super) fn bind(&self, body: &[u8]) -> Result<Response, ApiError> {
        let binding = codec::decode_object(&self.headers, body)?;
        let node = binding["target"]["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                ApiError::invalid(
                    "",
                    "Binding",
                    self.name(),
                    vec![crate::StatusCause {
                        reason: "FieldValueRequired".into(),
                        message: "Required value".into(),
                        field: "target.name".into(),
                    }],
                )
            })?
            .to_string();
        for _attempt in 0..8 {
            let current = self.stored()?;
            let pod = &current.value;
            if pod["metadata"]["deletionTimestamp"].is_string() {
                return Err(ApiError::conflict(
                    "",
                    "pods/binding",
                    self.name(),
                    &format!(
                        "pod {} is being deleted, cannot be assigned to a host",
                        self.name()
                    ),
                ));
            }
            if let Some(assigned) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
                return Err(ApiError::conflict(
                    "",
                    "pods/binding",
                    self.name(),
                    &format!(
                        "pod {} is already assigned to node \"{assigned}\"",
                        self.name()
                    ),
                ));
            }
            if pod["spec"]["schedulingGates"]
                .as_array()
                .is_some_and(|gates| !gates.is_empty())
            {
                return Err(ApiError::internal(format!(
                    "pod {} has non-empty .spec.schedulingGates",
                    self.name()
                )));
            }
            let mut new = pod.clone();
            new["spec"]["nodeName"] = json!(node);
            set_condition(
                &mut new,
                json!({
                    "type": "PodScheduled", "status": "True", "lastProbeTime": null,
                    "lastTransitionTime": self.state.now(),
                }),
            );
            if self.query.dry_run() {
                return Ok(success_status(StatusCode::CREATED));
            }
            match self
                .state
                .store
                .update(&self.collection(), new, Some(current.revision))
            {
                Ok(_) => return Ok(success_status(StatusCode::CREATED)),
                Err(StoreError::Conflict(_)) => continue,
                Err(e) => return Err(store_error(self.resource(), self.name(), e)),
            }
        }
        Err(ApiError::conflict(
            "",
            "pods/binding",
            self.name(),
            "the object has been modified; please apply your changes to the latest version and try again",
        ))
    }
}

/// `.spec.replicas` style path lookup.
pub(crate) fn json_path_get<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    path.trim_start_matches('.')
        .split('.')
        .try_fold(object, |value, part| value.get(part))
}

pub(crate) fn json_path_set(object: &mut Value, path: &str, new: Value) {
    let mut value = object;
    let parts: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        if !value.get(*part).is_some_and(Value::is_object) {
            value[*part] = json!({});
        }
        value = &mut value[*part];
    }
    if let Some(last) = parts.last() {
        value[*last] = new;
    }
}

/// Sets (or replaces by type) a status condition.
pub(crate) fn set_condition(object: &mut Value, condition: Value) {
    if !object["status"]["conditions"].is_array() {
        object["status"]["conditions"] = json!([]);
    }
    if let Some(conditions) = object["status"]["conditions"].as_array_mut() {
        match conditions
            .iter_mut()
            .find(|c| c["type"] == condition["type"])
        {
            Some(existing) => *existing = condition,
            None => conditions.push(condition),
        }
    }
}
