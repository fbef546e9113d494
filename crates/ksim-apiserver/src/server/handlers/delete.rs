//! Deletes: graceful pod deletion, finalizers and propagation policies,
//! deletecollection, and the cascade of CRDs. A deleted namespace stays
//! Terminating with its `kubernetes` finalizer until the namespace controller
//! has emptied it and calls `/finalize`.

use super::*;

impl ResourceRequest {
    pub(super) fn delete(&self, output: Output, body: &[u8]) -> Result<Response, ApiError> {
        let options = self.delete_options(body)?;
        let resource = self.resource();
        if resource.group.is_empty()
            && resource.plural == "namespaces"
            && SYSTEM_NAMESPACES.contains(&self.name())
        {
            return Err(ApiError::forbidden(format!(
                "namespaces \"{}\" is forbidden: this namespace may not be deleted",
                self.name()
            )));
        }
        if resource.group == "scheduling.k8s.io"
            && resource.plural == "priorityclasses"
            && matches!(
                self.name(),
                "system-node-critical" | "system-cluster-critical"
            )
        {
            return Err(ApiError::forbidden(format!(
                "priorityclasses.scheduling.k8s.io \"{}\" is forbidden: this is a system priority class and cannot be deleted",
                self.name()
            )));
        }
        if self.dry_run_delete(&options) {
            let current = self.stored()?;
            return Ok(self.respond_object(StatusCode::OK, output, &current));
        }
        let (status, object) = delete_object(
            &self.state,
            resource,
            self.namespace(),
            self.name(),
            &options,
        )?;
        Ok(self.respond_object(status, output, &object))
    }

    /// `dryRun=All`, in the query or (as kubectl sends it) in the DeleteOptions.
    fn dry_run_delete(&self, options: &Value) -> bool {
        self.query.dry_run()
            || options["dryRun"]
                .as_array()
                .is_some_and(|modes| modes.iter().any(|m| m == "All"))
    }

    pub(super) fn delete_options(&self, body: &[u8]) -> Result<Value, ApiError> {
        let mut options = if body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            // kubectl sends DeleteOptions as protobuf when it can
            // (`kubectl drain --disable-eviction`), JSON otherwise.
            codec::decode_object(&self.headers, body)?
        };
        if let Some(grace) = self.query.get("gracePeriodSeconds") {
            let grace: i64 = grace.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid gracePeriodSeconds: {grace}"))
            })?;
            options["gracePeriodSeconds"] = json!(grace);
        }
        if let Some(policy) = self.query.get("propagationPolicy") {
            options["propagationPolicy"] = json!(policy);
        }
        Ok(options)
    }

    pub(super) fn delete_collection(
        &self,
        output: Output,
        body: &[u8],
    ) -> Result<Response, ApiError> {
        let options = self.delete_options(body)?;
        let filter = self.selectors()?;
        let page = self.state.store.list(
            &self.collection(),
            self.target.namespace.as_deref(),
            None,
            None,
            |object| filter.matches(object),
        );
        let mut deleted = Vec::new();
        for object in &page.items {
            if self.resource().plural == "namespaces" && SYSTEM_NAMESPACES.contains(&object.name())
            {
                continue;
            }
            if self.dry_run_delete(&options) {
                deleted.push(object.clone());
                continue;
            }
            match delete_object(
                &self.state,
                self.resource(),
                object.namespace(),
                object.name(),
                &options,
            ) {
                Ok((_, object)) => deleted.push(object),
                Err(error) if error.code == 404 => {}
                Err(error) => return Err(error),
            }
        }
        let result = ListPage {
            items: deleted,
            revision: self.state.store.revision(),
            continue_after: None,
            remaining: None,
            served: 0,
        };
        Ok(self.respond_list(output, &result))
    }
}

/// Deletes an object as kube-apiserver does: graceful for bound pods,
/// marking when finalizers remain, at once otherwise. Returns 200 with the
/// deleted object, or 202 with the marked one.
pub(crate) fn delete_object(
    state: &Arc<State>,
    resource: &ResourceInfo,
    namespace: &str,
    name: &str,
    options: &Value,
) -> Result<(StatusCode, Arc<StoredObject>), ApiError> {
    let collection = collection_of(resource);
    let preconditions = Preconditions {
        uid: options["preconditions"]["uid"].as_str().map(str::to_string),
        resource_version: match options["preconditions"]["resourceVersion"].as_str() {
            Some(v) => Some(parse_revision(v)?),
            None => None,
        },
    };
    for _attempt in 0..8 {
        let current = state
            .store
            .get(&collection, namespace, name)
            .ok_or_else(|| ApiError::not_found(&resource.group, &resource.plural, name))?;
        let value = &current.value;
        let mut finalizers: Vec<Value> = value["metadata"]["finalizers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        match options["propagationPolicy"].as_str() {
            Some("Foreground") => push_unique(&mut finalizers, "foregroundDeletion"),
            Some("Orphan") => push_unique(&mut finalizers, "orphan"),
            _ if options["orphanDependents"].as_bool() == Some(true) => {
                push_unique(&mut finalizers, "orphan")
            }
            _ => {}
        }
        let is_namespace = resource.group.is_empty() && resource.plural == "namespaces";
        let grace = pod_grace_period(resource, value, options);
        let already_terminating = value["metadata"]["deletionTimestamp"].is_string();
        if finalizers.is_empty() && grace == 0 && !is_namespace {
            let deleted = state
                .store
                .delete(&collection, namespace, name, &preconditions)
                .map_err(|e| store_error(resource, name, e))?;
            if resource.group == "apiextensions.k8s.io" {
                remove_custom_resources(state, &deleted.value);
                state.reload_custom_resources();
            }
            return Ok((StatusCode::OK, deleted));
        }
        if already_terminating && !is_namespace {
            let shorter = grace
                < value["metadata"]["deletionGracePeriodSeconds"]
                    .as_i64()
                    .unwrap_or(0);
            if !shorter {
                return Ok((StatusCode::ACCEPTED, current));
            }
        }
        let mut marked = value.clone();
        let deletion_time = state.clock.now() + chrono::Duration::seconds(grace);
        marked["metadata"]["deletionTimestamp"] =
            json!(deletion_time.to_rfc3339_opts(SecondsFormat::Secs, true));
        marked["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
        if !finalizers.is_empty() {
            marked["metadata"]["finalizers"] = json!(finalizers);
        }
        if is_namespace {
            marked["status"]["phase"] = json!("Terminating");
            if already_terminating {
                marked["metadata"]["deletionTimestamp"] =
                    value["metadata"]["deletionTimestamp"].clone();
            }
        }
        match state
            .store
            .update(&collection, marked, Some(current.revision))
        {
            Ok(outcome) => {
                let status = if matches!(outcome, UpdateOutcome::Deleted(_)) {
                    StatusCode::OK
                } else {
                    StatusCode::ACCEPTED
                };
                return Ok((status, outcome.object().clone()));
            }
            Err(StoreError::Conflict(_)) if preconditions.resource_version.is_none() => continue,
            Err(error) => return Err(store_error(resource, name, error)),
        }
    }
    Err(ApiError::conflict(
        &resource.group,
        &resource.plural,
        name,
        "the object has been modified; please apply your changes to the latest version and try again",
    ))
}

pub(crate) fn push_unique(finalizers: &mut Vec<Value>, finalizer: &str) {
    if !finalizers.iter().any(|f| f == finalizer) {
        finalizers.push(json!(finalizer));
    }
}

/// The grace period of a delete: pods bound to a node and not finished wait
/// for their kubelet; everything else goes at once.
pub(crate) fn pod_grace_period(resource: &ResourceInfo, pod: &Value, options: &Value) -> i64 {
    if !(resource.group.is_empty() && resource.plural == "pods") {
        return 0;
    }
    let requested = options["gracePeriodSeconds"]
        .as_i64()
        .or_else(|| pod["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(30)
        .max(0);
    let bound = pod["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| !n.is_empty());
    let finished = pod["status"]["phase"]
        .as_str()
        .is_some_and(ksim_core::status::is_terminal_phase);
    if !bound || finished { 0 } else { requested }
}

/// Deletes every custom resource of a deleted CRD.
pub(crate) fn remove_custom_resources(state: &State, crd: &Value) {
    let (Some(group), Some(plural)) = (
        crd["spec"]["group"].as_str(),
        crd["spec"]["names"]["plural"].as_str(),
    ) else {
        return;
    };
    let collection = format!("{group}/{plural}");
    let page = state.store.list(&collection, None, None, None, |_| true);
    for object in page.items {
        let _ = state.store.delete(
            &collection,
            object.namespace(),
            object.name(),
            &Preconditions::default(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_pods_wait_for_their_kubelet() {
        let pods = crate::resources::built_in_resources()
            .into_iter()
            .find(|r| r.plural == "pods")
            .expect("pods");
        let bound = json!({"spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 30}, "status": {"phase": "Running"}});
        assert_eq!(pod_grace_period(&pods, &bound, &json!({})), 30);
        assert_eq!(
            pod_grace_period(&pods, &bound, &json!({"gracePeriodSeconds": 0})),
            0
        );
        let unbound = json!({"spec": {}, "status": {"phase": "Pending"}});
        assert_eq!(pod_grace_period(&pods, &unbound, &json!({})), 0);
    }
}
