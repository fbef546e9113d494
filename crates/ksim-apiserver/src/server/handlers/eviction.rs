//! The eviction subresource (`POST pods/<name>/eviction`, policy/v1 and
//! v1beta1 `Eviction` bodies), with kube-apiserver's decisions, codes and
//! messages: pods that already left service (Pending, terminal,
//! terminating) are deleted without looking at budgets; otherwise the one
//! PodDisruptionBudget covering the pod must allow a disruption, which is
//! taken (disruptionsAllowed decremented, the pod listed in disruptedPods)
//! with the store's optimistic concurrency, so concurrent evictions never
//! exceed the budget. The pod gets the `DisruptionTarget` condition before it
//! is deleted.
//!
//! ksim also records each eviction and each refusal (429) with who asked
//! (the Eviction's `requested-by` annotation, as the descheduler and ksim's
//! autoscaler set it, kubectl's `Kubectl-Command` header, else the
//! User-Agent's product) at its own path `/ksim/v1alpha1/evictions`
//! ([`crate::server::evictions`]): refusals are no objects, and the web
//! view's timeline and `ksim run`'s `evictions` check read them there.
//! kube-apiserver records no events for either, and neither does ksim.

use super::subresources::set_condition;
use super::*;
use crate::server::evictions::{self, Outcome};
use ksim_core::status::is_terminal_phase;

/// The refusal kube-apiserver answers when a budget forbids the eviction.
pub(crate) const REFUSAL: &str =
    "Cannot evict pod as it would violate the pod's disruption budget.";
/// The answer for a pod covered by several budgets.
pub(crate) const MULTIPLE_BUDGETS: &str = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";
/// Upstream's `MaxDisruptedPodSize`.
const MAX_DISRUPTED_PODS: usize = 2000;
/// Upstream's `EvictionsRetry` steps: attempts on write conflicts.
const RETRIES: usize = 20;
/// Seconds a client is told to wait while a budget is being processed.
const RETRY_AFTER_SECONDS: u64 = 10;
const BUDGETS: &str = "policy/poddisruptionbudgets";

/// The pod's state as far as the eviction decision goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PodState {
    /// Pending, Succeeded or Failed.
    pub pending_or_terminal: bool,
    /// Succeeded or Failed.
    pub terminal: bool,
    /// Has a deletionTimestamp.
    pub terminating: bool,
    /// Ready condition True.
    pub ready: bool,
}

impl PodState {
    pub(crate) fn of(pod: &Value) -> Self {
        let phase = pod["status"]["phase"].as_str().unwrap_or_default();
        let ready = pod["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        PodState {
            pending_or_terminal: phase == "Pending" || is_terminal_phase(phase),
            terminal: is_terminal_phase(phase),
            terminating: pod["metadata"]["deletionTimestamp"].is_string(),
            ready,
        }
    }

    /// `canIgnorePDB`: the pod already left service.
    pub(crate) fn can_ignore_budget(self) -> bool {
        self.pending_or_terminal || self.terminating
    }

    /// `shouldEnforceResourceVersion`: a running pod could turn Ready
    /// between the check and the delete.
    fn should_enforce_resource_version(self) -> bool {
        !self.terminal && !self.terminating
    }
}

/// What a budget says about evicting one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BudgetDecision {
    /// Delete the unhealthy pod without taking a disruption, as long as it
    /// did not become Ready meanwhile (resourceVersion precondition).
    DeleteUnhealthy,
    /// Take one disruption: the new status to write.
    Take(Value),
    /// 429 while the controller has not processed the budget's generation.
    StillProcessing,
    /// 403: the status cannot be trusted.
    Forbidden(&'static str),
    /// 429: no disruption allowed.
    Refused { desired: i64, current: i64 },
}

/// The decision for `pod_ready` under `budget` (its stored JSON): the
/// unhealthy-pod policy, then upstream's `checkAndDecrement`.
pub(crate) fn decide(
    budget: &Value,
    pod_name: &str,
    pod_ready: bool,
    dry_run: bool,
    now: &str,
) -> BudgetDecision {
    let status = &budget["status"];
    let int = |v: &Value| v.as_i64().unwrap_or(0);
    let current = int(&status["currentHealthy"]);
    let desired = int(&status["desiredHealthy"]);
    if !pod_ready {
        if budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow" {
            return BudgetDecision::DeleteUnhealthy;
        }
        if current >= desired && desired > 0 {
            return BudgetDecision::DeleteUnhealthy;
        }
    }
    if int(&status["observedGeneration"]) < int(&budget["metadata"]["generation"]) {
        return BudgetDecision::StillProcessing;
    }
    let allowed = int(&status["disruptionsAllowed"]);
    if allowed < 0 {
        return BudgetDecision::Forbidden("pdb disruptions allowed is negative");
    }
    let disrupted = status["disruptedPods"].as_object().map_or(0, |m| m.len());
    if disrupted > MAX_DISRUPTED_PODS {
        return BudgetDecision::Forbidden(
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        );
    }
    if allowed == 0 {
        return BudgetDecision::Refused { desired, current };
    }
    let mut new = budget.clone();
    new["status"]["disruptionsAllowed"] = json!(allowed - 1);
    if allowed - 1 == 0 {
        let observed = status["observedGeneration"].clone();
        set_disruption_allowed_false(&mut new, observed, now);
    }
    if !dry_run {
        if !new["status"]["disruptedPods"].is_object() {
            new["status"]["disruptedPods"] = json!({});
        }
        new["status"]["disruptedPods"][pod_name] = json!(now);
    }
    BudgetDecision::Take(new)
}

/// `UpdateDisruptionAllowedCondition` once no disruption is left.
fn set_disruption_allowed_false(budget: &mut Value, observed: Value, now: &str) {
    if !budget["status"]["conditions"].is_array() {
        budget["status"]["conditions"] = json!([]);
    }
    let Some(conditions) = budget["status"]["conditions"].as_array_mut() else {
        return;
    };
    let mut condition = json!({
        "type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods",
        "message": "", "lastTransitionTime": now,
    });
    if !observed.is_null() {
        condition["observedGeneration"] = observed;
    }
    match conditions
        .iter_mut()
        .find(|c| c["type"] == "DisruptionAllowed")
    {
        Some(existing) => {
            if existing["status"] == "False" {
                condition["lastTransitionTime"] = existing["lastTransitionTime"].clone();
            }
            *existing = condition;
        }
        None => conditions.push(condition),
    }
}

/// The budgets of the pod's namespace whose selector matches its labels
/// (a missing or invalid selector matches nothing; an empty one everything).
fn budgets_of(state: &State, namespace: &str, pod: &StoredObject) -> Vec<Arc<StoredObject>> {
    let labels = pod.labels().cloned().unwrap_or_default();
    state
        .store
        .list(BUDGETS, Some(namespace), None, None, |pdb| {
            let selector = &pdb.value["spec"]["selector"];
            selector.is_object()
                && LabelSelectorRequirements::from_json(selector).is_ok_and(|s| s.matches(&labels))
        })
        .items
}

fn refusal(causes: Value) -> ApiError {
    ApiError::too_many_requests(REFUSAL, causes)
}

/// 429 with `Retry-After`, as `createTooManyRequestsError`.
fn still_processing(name: &str) -> Response {
    let mut error = refusal(json!([{
        "reason": "DisruptionBudget",
        "message": format!("The disruption budget {name} is still being processed by the server."),
    }]));
    if let Some(details) = error.details.as_mut() {
        details["retryAfterSeconds"] = json!(RETRY_AFTER_SECONDS);
    }
    let mut response = error.into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
    response
}

fn forbidden(name: &str, why: &str) -> ApiError {
    let mut error = ApiError::forbidden(format!(
        "poddisruptionbudget.policy \"{name}\" is forbidden: {why}"
    ));
    error.details = Some(json!({"name": name, "group": "policy", "kind": "poddisruptionbudget"}));
    error
}

fn conflict_after_retries(name: &str) -> ApiError {
    let mut error = ApiError::internal(String::new());
    error.code = 504;
    error.reason = "Timeout";
    error.message = format!("couldn't update PodDisruptionBudget {name:?} due to conflicts");
    error.details = Some(json!({"retryAfterSeconds": RETRY_AFTER_SECONDS}));
    error
}

/// The 500 Status upstream returns (no reason) for several budgets.
fn multiple_budgets() -> Response {
    let status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": MULTIPLE_BUDGETS, "code": 500,
    });
    codec::respond_value(StatusCode::INTERNAL_SERVER_ERROR, Output::Json, &status)
}

/// Who asked for an eviction: the Eviction's `requested-by` annotation,
/// else kubectl's command (`kubectl drain`), else the User-Agent's product.
pub(crate) fn requester(eviction: &Value, headers: &HeaderMap) -> String {
    if let Some(by) = eviction["metadata"]["annotations"]["requested-by"]
        .as_str()
        .filter(|s| !s.is_empty())
    {
        return by.to_string();
    }
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .filter(|s| !s.is_empty())
    };
    if let Some(command) = header("kubectl-command") {
        return command.to_string();
    }
    header(header::USER_AGENT.as_str())
        .and_then(|agent| agent.split('/').next())
        .map(str::to_string)
        .unwrap_or_else(|| "unknown".to_string())
}

impl ResourceRequest {
    /// `POST pods/<name>/eviction`, recording the outcome at
    /// `/ksim/v1alpha1/evictions`.
    pub(super) fn evict(&self, body: &[u8]) -> Result<Response, ApiError> {
        // The pod's uid, read before it goes.
        let uid = self.stored().ok().and_then(|p| p.uid().map(str::to_string));
        let result = self.evict_pod(body);
        let refused = match &result {
            Ok(response) if response.status() == StatusCode::TOO_MANY_REQUESTS => Some(format!(
                "Cannot evict pod: the disruption budget of pod {} is still being processed by the server.",
                self.name()
            )),
            Ok(_) => None,
            Err(error) if error.code == 429 => {
                let cause = error
                    .details
                    .as_ref()
                    .and_then(|d| d["causes"][0]["message"].as_str())
                    .map(|m| format!(" {m}"))
                    .unwrap_or_default();
                Some(format!("{}{cause}", error.message))
            }
            Err(_) => return result,
        };
        let Ok(eviction) = codec::decode_object(&self.headers, body) else {
            return result;
        };
        let dry_run = self.query.dry_run()
            || eviction["deleteOptions"]["dryRun"]
                .as_array()
                .is_some_and(|modes| modes.iter().any(|m| m == "All"));
        if !dry_run {
            let by = requester(&eviction, &self.headers);
            let (outcome, message) = match refused {
                None => (
                    Outcome::Evicted,
                    format!("Evicted through the eviction API (requested by {by})"),
                ),
                Some(message) => (Outcome::Refused, message),
            };
            evictions::record(
                &self.state,
                (self.namespace(), self.name(), uid.as_deref()),
                outcome,
                &by,
                &message,
            );
        }
        result
    }

    fn evict_pod(&self, body: &[u8]) -> Result<Response, ApiError> {
        let eviction = codec::decode_object(&self.headers, body)?;
        match eviction["apiVersion"].as_str() {
            None | Some("policy/v1" | "policy/v1beta1") => {}
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({other}) does not match the expected API version (policy/v1)"
                )));
            }
        }
        if let Some(kind) = eviction["kind"].as_str()
            && kind != "Eviction"
        {
            return Err(ApiError::bad_request(format!(
                "not a Eviction object: {kind}"
            )));
        }
        if eviction["metadata"]["name"].as_str() != Some(self.name()) {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Eviction object",
            ));
        }
        let mut options = match &eviction["deleteOptions"] {
            Value::Object(_) => eviction["deleteOptions"].clone(),
            _ => json!({}),
        };
        let dry_run = self.query.dry_run()
            || options["dryRun"]
                .as_array()
                .is_some_and(|modes| modes.iter().any(|m| m == "All"));
        if dry_run {
            options["dryRun"] = json!(["All"]);
        }
        let user_revision = options["preconditions"]["resourceVersion"].is_string();

        // Pods that already left service are deleted without a budget check.
        let mut attempts = 0;
        let pod = loop {
            attempts += 1;
            let pod = self.stored()?;
            let state = PodState::of(&pod.value);
            if !state.can_ignore_budget() {
                break pod;
            }
            let mut delete_options = options.clone();
            if state.should_enforce_resource_version() && !user_revision {
                delete_options["preconditions"]["resourceVersion"] =
                    json!(pod.revision.to_string());
            }
            match self.mark_and_delete(&delete_options, dry_run) {
                Ok(()) => return Ok(success_status(StatusCode::CREATED)),
                Err(e) if e.code == 409 && !user_revision && attempts < RETRIES => continue,
                Err(e) => return Err(e),
            }
        };

        let budgets = budgets_of(&self.state, self.namespace(), &pod);
        let mut delete_options = options.clone();
        let mut unhealthy_delete = None;
        match budgets.as_slice() {
            [] => {}
            [_, _, ..] => return Ok(multiple_budgets()),
            [budget] => {
                let name = budget.name().to_string();
                let ready = PodState::of(&pod.value).ready;
                let mut budget = budget.clone();
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    match decide(
                        &budget.value,
                        self.name(),
                        ready,
                        dry_run,
                        &self.state.now(),
                    ) {
                        BudgetDecision::DeleteUnhealthy => {
                            delete_options["preconditions"]["resourceVersion"] =
                                json!(pod.revision.to_string());
                            unhealthy_delete = Some(name.clone());
                            break;
                        }
                        BudgetDecision::StillProcessing => return Ok(still_processing(&name)),
                        BudgetDecision::Forbidden(why) => return Err(forbidden(&name, why)),
                        BudgetDecision::Refused { desired, current } => {
                            return Err(refusal(json!([{
                                "reason": "DisruptionBudget",
                                "message": format!("The disruption budget {name} needs {desired} healthy pods and has {current} currently"),
                            }])));
                        }
                        BudgetDecision::Take(_) if dry_run => break,
                        BudgetDecision::Take(new) => {
                            match self.state.store.update(BUDGETS, new, Some(budget.revision)) {
                                Ok(_) => break,
                                Err(StoreError::Conflict(_)) if attempt < RETRIES => {
                                    budget = self
                                        .state
                                        .store
                                        .get(BUDGETS, self.namespace(), &name)
                                        .ok_or_else(|| {
                                            ApiError::not_found(
                                                "policy",
                                                "poddisruptionbudgets",
                                                &name,
                                            )
                                        })?;
                                }
                                Err(StoreError::Conflict(_)) => {
                                    return Err(conflict_after_retries(&name));
                                }
                                Err(e) => {
                                    return Err(store_error(self.resource(), &name, e));
                                }
                            }
                        }
                    }
                }
            }
        }
        match self.mark_and_delete(&delete_options, dry_run) {
            Ok(()) => Ok(success_status(StatusCode::CREATED)),
            Err(e) if e.code == 409 && !user_revision => match unhealthy_delete {
                Some(name) => Ok(still_processing(&name)),
                None => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    /// `addConditionAndDeletePod`: the DisruptionTarget condition on the
    /// latest pod (checked against the preconditions), then the delete.
    fn mark_and_delete(&self, options: &Value, dry_run: bool) -> Result<(), ApiError> {
        if dry_run {
            let pod = self.stored()?;
            check_preconditions(&pod, options)?;
            return Ok(());
        }
        let mut options = options.clone();
        let collection = self.collection();
        for attempt in 1..=RETRIES {
            let pod = self.stored()?;
            check_preconditions(&pod, &options)?;
            let mut marked = pod.value.clone();
            set_condition(
                &mut marked,
                json!({
                    "type": "DisruptionTarget", "status": "True", "lastProbeTime": null,
                    "lastTransitionTime": self.state.now(), "reason": "EvictionByEvictionAPI",
                    "message": "Eviction API: evicting",
                }),
            );
            match self
                .state
                .store
                .update(&collection, marked, Some(pod.revision))
            {
                Ok(outcome) => {
                    if options["preconditions"]["resourceVersion"].is_string() {
                        options["preconditions"]["resourceVersion"] =
                            json!(outcome.object().revision.to_string());
                    }
                    break;
                }
                Err(StoreError::Conflict(_)) if attempt < RETRIES => continue,
                Err(e) => return Err(store_error(self.resource(), self.name(), e)),
            }
        }
        delete_object(
            &self.state,
            self.resource(),
            self.namespace(),
            self.name(),
            &options,
        )?;
        Ok(())
    }
}

/// The UID and resourceVersion preconditions against the latest pod, with
/// upstream's conflict messages.
fn check_preconditions(pod: &StoredObject, options: &Value) -> Result<(), ApiError> {
    let name = pod.name();
    if let Some(uid) = options["preconditions"]["uid"]
        .as_str()
        .filter(|u| !u.is_empty())
    {
        let actual = pod.uid().unwrap_or_default();
        if uid != actual {
            return Err(ApiError::conflict(
                "",
                "Pod",
                name,
                &format!(
                    "the UID in the precondition ({uid}) does not match the UID in record ({actual}). The object might have been deleted and then recreated"
                ),
            ));
        }
    }
    if let Some(revision) = options["preconditions"]["resourceVersion"]
        .as_str()
        .filter(|r| !r.is_empty())
    {
        let actual = pod.revision.to_string();
        if revision != actual {
            return Err(ApiError::conflict(
                "",
                "Pod",
                name,
                &format!(
                    "the ResourceVersion in the precondition ({revision}) does not match the ResourceVersion in record ({actual}). The object might have been modified"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-01-01T00:00:00Z";

    fn budget(spec: Value, status: Value, generation: i64) -> Value {
        json!({"metadata": {"name": "web", "generation": generation}, "spec": spec, "status": status})
    }

    fn status(allowed: i64, desired: i64, current: i64) -> Value {
        json!({"disruptionsAllowed": allowed, "desiredHealthy": desired, "currentHealthy": current,
               "expectedPods": current, "observedGeneration": 1})
    }

    #[test]
    fn the_decision_table_follows_kube_apiserver() {
        let always = json!({"unhealthyPodEvictionPolicy": "AlwaysAllow"});
        let if_healthy = json!({"unhealthyPodEvictionPolicy": "IfHealthyBudget"});
        let cases: Vec<(&str, Value, bool, &str)> = vec![
            (
                "ready pod, budget allows",
                budget(json!({}), status(1, 2, 3), 1),
                true,
                "take",
            ),
            (
                "ready pod, budget exhausted",
                budget(json!({}), status(0, 3, 3), 1),
                true,
                "refused",
            ),
            (
                "generation not observed yet",
                budget(json!({}), status(5, 1, 6), 2),
                true,
                "processing",
            ),
            (
                "negative allowance",
                budget(json!({}), status(-1, 1, 1), 1),
                true,
                "forbidden",
            ),
            (
                "unready pod, healthy budget",
                budget(json!({}), status(0, 3, 3), 1),
                false,
                "unhealthy",
            ),
            (
                "unready pod, unhealthy budget",
                budget(if_healthy.clone(), status(0, 3, 2), 1),
                false,
                "refused",
            ),
            (
                "unready pod, zero desired",
                budget(json!({}), status(0, 0, 0), 1),
                false,
                "refused",
            ),
            (
                "unready pod, AlwaysAllow",
                budget(always, status(0, 3, 1), 1),
                false,
                "unhealthy",
            ),
            (
                "unready pod, budget with room",
                budget(if_healthy, status(1, 2, 1), 1),
                false,
                "take",
            ),
        ];
        for (what, budget, ready, want) in cases {
            let got = match decide(&budget, "p", ready, false, NOW) {
                BudgetDecision::DeleteUnhealthy => "unhealthy",
                BudgetDecision::Take(_) => "take",
                BudgetDecision::StillProcessing => "processing",
                BudgetDecision::Forbidden(_) => "forbidden",
                BudgetDecision::Refused { .. } => "refused",
            };
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn taking_a_disruption_decrements_and_lists_the_pod() {
        let budget = budget(json!({}), status(1, 2, 3), 1);
        let BudgetDecision::Take(new) = decide(&budget, "p", true, false, NOW) else {
            panic!("expected a disruption to be taken");
        };
        assert_eq!(new["status"]["disruptionsAllowed"], 0);
        assert_eq!(new["status"]["disruptedPods"]["p"], NOW);
        let condition = &new["status"]["conditions"][0];
        assert_eq!(condition["reason"], "InsufficientPods");
        assert_eq!(condition["status"], "False");
        let BudgetDecision::Take(dry) = decide(&budget, "p", true, true, NOW) else {
            panic!("expected a disruption to be taken");
        };
        assert!(dry["status"]["disruptedPods"].is_null());
    }

    #[test]
    fn refusals_carry_the_budget_numbers() {
        let budget = budget(json!({}), status(0, 10, 9), 1);
        assert_eq!(
            decide(&budget, "p", true, false, NOW),
            BudgetDecision::Refused {
                desired: 10,
                current: 9
            }
        );
    }

    #[test]
    fn the_requester_is_the_annotation_then_kubectl_then_the_user_agent() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::USER_AGENT,
            HeaderValue::from_static("cluster-autoscaler/v1.33"),
        );
        assert_eq!(requester(&json!({}), &headers), "cluster-autoscaler");
        headers.insert("kubectl-command", HeaderValue::from_static("kubectl drain"));
        assert_eq!(requester(&json!({}), &headers), "kubectl drain");
        let eviction =
            json!({"metadata": {"annotations": {"requested-by": "sigs.k8s.io/descheduler"}}});
        assert_eq!(requester(&eviction, &headers), "sigs.k8s.io/descheduler");
        assert_eq!(requester(&json!({}), &HeaderMap::new()), "unknown");
    }

    #[test]
    fn pods_out_of_service_skip_the_budget() {
        let cases = [
            (json!({"status": {"phase": "Pending"}}), true),
            (json!({"status": {"phase": "Succeeded"}}), true),
            (json!({"status": {"phase": "Failed"}}), true),
            (
                json!({"metadata": {"deletionTimestamp": NOW}, "status": {"phase": "Running"}}),
                true,
            ),
            (json!({"status": {"phase": "Running"}}), false),
        ];
        for (pod, ignore) in cases {
            assert_eq!(PodState::of(&pod).can_ignore_budget(), ignore, "{pod}");
        }
        assert!(
            PodState::of(&json!({"status": {"phase": "Pending"}}))
                .should_enforce_resource_version()
        );
        assert!(
            !PodState::of(&json!({"status": {"phase": "Failed"}}))
                .should_enforce_resource_version()
        );
    }
}
