//! What `waitFor:` and `assert:` check: a jq expression over what `kubectl
//! get -o json` prints, or a built-in question (`spread`, `placement`,
//! `pending`, `evictions`, `events`) answered from the cluster's pods, nodes
//! and Events (and, for evictions, the API server's records at
//! `/ksim/v1alpha1/evictions`), each with a readable account of what was
//! expected and what was seen.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use ksim_core::selector::LabelSelectorRequirements;
use ksim_kubelet::stage::JqQuery;
use kube::api::{Api, ListParams};
use serde::Deserialize;

use crate::get::{GetArgs, Resolver, describe_error};

/// One check.
#[derive(Debug, Clone)]
pub enum Check {
    /// `{get: ARGS, jq: EXPR}`: the expression must yield true.
    Jq(JqCheck),
    /// Max skew per topology domain.
    Spread(Spread),
    /// Pod counts per node or per topology domain.
    Placement(Placement),
    /// Pods the scheduler left Pending.
    Pending(Pending),
    /// Evictions, by who asked.
    Evictions(Evictions),
    /// Events by reason and message.
    Events(Events),
}

/// `{get: ARGS, jq: EXPR}`.
#[derive(Debug, Clone)]
pub struct JqCheck {
    /// `kubectl get` arguments.
    pub get: GetArgs,
    /// The expression.
    pub jq: JqQuery,
}

/// `spread: {selector, topologyKey, maxSkew, namespace?}`: over the nodes
/// carrying `topologyKey`, the scheduled pods matching `selector` differ by
/// at most `maxSkew` between the fullest and the emptiest domain.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Spread {
    /// Label selector of the pods (`app=nginx`).
    pub selector: String,
    /// The node label whose values are the domains.
    pub topology_key: String,
    /// The largest difference allowed.
    pub max_skew: u32,
    /// Only pods in this namespace (default: every namespace).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// `placement: {selector, counts: {DOMAIN: N}, topologyKey?, namespace?}`:
/// exactly N scheduled pods in each listed domain (node names when no
/// topologyKey is given).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Placement {
    /// Label selector of the pods.
    pub selector: String,
    /// Pods expected per node (or per value of `topologyKey`).
    pub counts: BTreeMap<String, usize>,
    /// The node label whose values are the domains.
    #[serde(default)]
    pub topology_key: Option<String>,
    /// Only pods in this namespace (default: every namespace).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// `pending: {count?, message?, selector?, namespace?}`: pods not bound to a
/// node; `count` exactly (default: at least one), each with kube-scheduler's
/// `message` (contained in its PodScheduled condition).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Pending {
    /// How many pods are Pending.
    #[serde(default)]
    pub count: Option<usize>,
    /// Text the scheduler's message of every pending pod contains.
    #[serde(default)]
    pub message: Option<String>,
    /// Label selector of the pods.
    #[serde(default)]
    pub selector: Option<String>,
    /// Only pods in this namespace (default: every namespace).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// `evictions: {count?, atLeast?, by?, refused?, pod?, namespace?}`:
/// evictions through the eviction API (as ksim's API server records them at
/// `/ksim/v1alpha1/evictions`; none on a cluster without that path) and by
/// the node lifecycle controller's taint manager (its
/// `TaintManagerEviction` Events); `by` is one of
/// `descheduler`, `drain` (`kubectl drain` and `ksim drain`),
/// `node-lifecycle`, `autoscaler`, or text of the requester (a user agent).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Evictions {
    /// Exactly this many evictions.
    #[serde(default)]
    pub count: Option<usize>,
    /// At least this many.
    #[serde(default)]
    pub at_least: Option<usize>,
    /// Only these requested by.
    #[serde(default)]
    pub by: Option<String>,
    /// Exactly this many refusals (429s: a budget forbade them).
    #[serde(default)]
    pub refused: Option<usize>,
    /// Only pods whose name starts with this.
    #[serde(default)]
    pub pod: Option<String>,
    /// Only this namespace.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// `events: {reason, message?, type?, kind?, name?, count?, atLeast?,
/// namespace?}`: Events with this reason (and message text); at least one
/// unless a count is given.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Events {
    /// The Event's reason.
    pub reason: String,
    /// Text its message contains.
    #[serde(default)]
    pub message: Option<String>,
    /// `Normal` or `Warning`.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    /// The involved object's kind.
    #[serde(default)]
    pub kind: Option<String>,
    /// The involved object's name.
    #[serde(default)]
    pub name: Option<String>,
    /// Exactly this many (summing each Event's count).
    #[serde(default)]
    pub count: Option<usize>,
    /// At least this many.
    #[serde(default)]
    pub at_least: Option<usize>,
    /// Only this namespace.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// What a check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Whether the check holds.
    pub holds: bool,
    /// What was expected, in words.
    pub expected: String,
    /// What was seen.
    pub seen: String,
}

impl Check {
    /// A short description for the timeline.
    pub fn describe(&self) -> String {
        match self {
            Check::Jq(check) => format!("get {}: {}", check.get.source, check.jq.source()),
            Check::Spread(s) => format!(
                "spread of {} by {} (maxSkew {})",
                s.selector, s.topology_key, s.max_skew
            ),
            Check::Placement(p) => format!(
                "placement of {} by {}",
                p.selector,
                p.topology_key.as_deref().unwrap_or("node")
            ),
            Check::Pending(p) => format!(
                "pending pods{}",
                p.selector
                    .as_deref()
                    .map(|s| format!(" {s}"))
                    .unwrap_or_default()
            ),
            Check::Evictions(e) => format!(
                "evictions{}",
                e.by.as_deref()
                    .map(|b| format!(" by {b}"))
                    .unwrap_or_default()
            ),
            Check::Events(e) => format!("events {}", e.reason),
        }
    }

    /// Validates what serde cannot: selectors and counts. Returns the field
    /// at fault and why.
    pub(crate) fn validate(&self) -> Result<(), (String, String)> {
        let selector = |field: &str, s: &str| {
            LabelSelectorRequirements::parse(s)
                .map(|_| ())
                .map_err(|e| {
                    (
                        field.to_string(),
                        format!("invalid label selector {s:?}: {e}"),
                    )
                })
        };
        match self {
            Check::Jq(_) => Ok(()),
            Check::Spread(s) => selector("spread.selector", &s.selector),
            Check::Placement(p) => selector("placement.selector", &p.selector),
            Check::Pending(p) => p
                .selector
                .as_deref()
                .map_or(Ok(()), |s| selector("pending.selector", s)),
            Check::Evictions(e) => {
                if e.count.is_some() && e.at_least.is_some() {
                    return Err(("evictions".into(), "give count or atLeast, not both".into()));
                }
                Ok(())
            }
            Check::Events(e) => {
                if e.count.is_some() && e.at_least.is_some() {
                    return Err(("events".into(), "give count or atLeast, not both".into()));
                }
                Ok(())
            }
        }
    }

    /// Checks once.
    pub(crate) async fn evaluate(&self, resolver: &Resolver) -> Verdict {
        let result = match self {
            Check::Jq(check) => Ok(jq_verdict(check, resolver.get(&check.get).await)),
            Check::Spread(s) => spread(s, resolver.client()).await,
            Check::Placement(p) => placement(p, resolver.client()).await,
            Check::Pending(p) => pending(p, resolver.client()).await,
            Check::Evictions(e) => evictions(e, resolver.client()).await,
            Check::Events(e) => events(e, resolver.client()).await,
        };
        result.unwrap_or_else(|(expected, error)| Verdict {
            holds: false,
            expected,
            seen: error,
        })
    }
}

/// Judges a jq check on what `get` answered.
pub(crate) fn jq_verdict(check: &JqCheck, got: Result<serde_json::Value, String>) -> Verdict {
    let expected = format!("{} to yield true", check.jq.source());
    let object = match got {
        Ok(object) => object,
        Err(error) => {
            return Verdict {
                holds: false,
                expected,
                seen: error,
            };
        }
    };
    let about = match object.get("items").and_then(|i| i.as_array()) {
        Some(items) if object.get("kind").and_then(|k| k.as_str()) == Some("List") => {
            format!(" (over {} item{})", items.len(), plural(items.len()))
        }
        _ => String::new(),
    };
    match check.jq.evaluate(&object) {
        Ok(outputs) => {
            let holds = !outputs.is_empty() && outputs.iter().all(|o| o == "true");
            let seen = if outputs.is_empty() {
                "no output".to_string()
            } else {
                let mut shown: Vec<String> =
                    outputs.iter().take(5).map(|o| truncate(o, 200)).collect();
                if outputs.len() > 5 {
                    shown.push(format!("... ({} outputs)", outputs.len()));
                }
                shown.join(", ")
            };
            Verdict {
                holds,
                expected,
                seen: format!("{seen}{about}"),
            }
        }
        Err(error) => Verdict {
            holds: false,
            expected,
            seen: format!("jq error: {error}{about}"),
        },
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_string(),
    }
}

type CheckResult = Result<Verdict, (String, String)>;

async fn list_pods(
    client: &kube::Client,
    namespace: Option<&str>,
    selector: Option<&str>,
    expected: &str,
) -> Result<Vec<Pod>, (String, String)> {
    let api: Api<Pod> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut params = ListParams::default();
    if let Some(selector) = selector {
        params = params.labels(selector);
    }
    api.list(&params)
        .await
        .map(|list| list.items)
        .map_err(|e| (expected.to_string(), describe_error(&e)))
}

async fn list_nodes(client: &kube::Client, expected: &str) -> Result<Vec<Node>, (String, String)> {
    Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|list| list.items)
        .map_err(|e| (expected.to_string(), describe_error(&e)))
}

async fn list_events(
    client: &kube::Client,
    namespace: Option<&str>,
    expected: &str,
) -> Result<Vec<Event>, (String, String)> {
    let api: Api<Event> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    api.list(&ListParams::default())
        .await
        .map(|list| list.items)
        .map_err(|e| (expected.to_string(), describe_error(&e)))
}

/// Where ksim's API server records the eviction subresource's outcomes.
const EVICTION_RECORDS: &str = "/ksim/v1alpha1/evictions";

/// The API server's eviction records (of `namespace`); none where the path
/// is not served (a cluster that is not ksim's).
async fn eviction_records(
    client: &kube::Client,
    namespace: Option<&str>,
    expected: &str,
) -> Result<Vec<serde_json::Value>, (String, String)> {
    let path = match namespace {
        Some(ns) => format!("{EVICTION_RECORDS}?namespace={ns}"),
        None => EVICTION_RECORDS.to_string(),
    };
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| (expected.to_string(), e.to_string()))?;
    match client.request::<serde_json::Value>(request).await {
        Ok(mut list) => Ok(match list["items"].take() {
            serde_json::Value::Array(items) => items,
            _ => Vec::new(),
        }),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
        Err(error) => Err((expected.to_string(), describe_error(&error))),
    }
}

/// A pod that occupies its node: bound, not terminal, not being deleted.
fn placed_on(pod: &Pod) -> Option<&str> {
    if pod.metadata.deletion_timestamp.is_some() || ksim_core::status::is_pod_terminal(pod) {
        return None;
    }
    pod.spec.as_ref()?.node_name.as_deref()
}

fn node_label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn render_counts(counts: &BTreeMap<String, usize>) -> String {
    if counts.is_empty() {
        return "none".to_string();
    }
    counts
        .iter()
        .map(|(domain, n)| format!("{domain}={n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn spread(s: &Spread, client: &kube::Client) -> CheckResult {
    let expected = format!(
        "pods {} spread by {} with skew at most {}",
        s.selector, s.topology_key, s.max_skew
    );
    let nodes = list_nodes(client, &expected).await?;
    let pods = list_pods(client, s.namespace.as_deref(), Some(&s.selector), &expected).await?;
    let domain_of: BTreeMap<&str, &str> = nodes
        .iter()
        .filter_map(|n| Some((n.metadata.name.as_deref()?, node_label(n, &s.topology_key)?)))
        .collect();
    let mut counts: BTreeMap<String, usize> = domain_of
        .values()
        .map(|domain| (domain.to_string(), 0))
        .collect();
    if counts.is_empty() {
        return Ok(Verdict {
            holds: false,
            expected,
            seen: format!("no node has the label {}", s.topology_key),
        });
    }
    let mut outside = 0;
    for pod in &pods {
        let Some(node) = placed_on(pod) else { continue };
        match domain_of.get(node) {
            Some(domain) => *counts.entry(domain.to_string()).or_default() += 1,
            None => outside += 1,
        }
    }
    let max = counts.values().copied().max().unwrap_or(0);
    let min = counts.values().copied().min().unwrap_or(0);
    let skew = max - min;
    let mut seen = format!("skew {skew}: {}", render_counts(&counts));
    if outside > 0 {
        seen.push_str(&format!(" ({outside} on nodes without {})", s.topology_key));
    }
    Ok(Verdict {
        holds: skew <= s.max_skew as usize,
        expected,
        seen,
    })
}

async fn placement(p: &Placement, client: &kube::Client) -> CheckResult {
    let by = p.topology_key.as_deref().unwrap_or("node");
    let expected = format!("pods {} by {by}: {}", p.selector, render_counts(&p.counts));
    let pods = list_pods(client, p.namespace.as_deref(), Some(&p.selector), &expected).await?;
    let nodes = match &p.topology_key {
        Some(_) => list_nodes(client, &expected).await?,
        None => Vec::new(),
    };
    let domain_of: BTreeMap<&str, &str> = match &p.topology_key {
        Some(key) => nodes
            .iter()
            .filter_map(|n| Some((n.metadata.name.as_deref()?, node_label(n, key)?)))
            .collect(),
        None => BTreeMap::new(),
    };
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for pod in &pods {
        let Some(node) = placed_on(pod) else { continue };
        let domain = match &p.topology_key {
            Some(_) => match domain_of.get(node) {
                Some(domain) => *domain,
                None => continue,
            },
            None => node,
        };
        *counts.entry(domain.to_string()).or_default() += 1;
    }
    let holds = p
        .counts
        .iter()
        .all(|(domain, want)| counts.get(domain).copied().unwrap_or(0) == *want);
    Ok(Verdict {
        holds,
        expected,
        seen: render_counts(&counts),
    })
}

/// The message of a pod's PodScheduled=False condition.
fn scheduler_message(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")?
        .message
        .as_deref()
}

async fn pending(p: &Pending, client: &kube::Client) -> CheckResult {
    let count = match p.count {
        Some(n) => format!("{n} pending pod{}", plural(n)),
        None => "a pending pod".to_string(),
    };
    let expected = match &p.message {
        Some(message) => format!("{count} with the scheduler's message containing {message:?}"),
        None => count,
    };
    let pods = list_pods(
        client,
        p.namespace.as_deref(),
        p.selector.as_deref(),
        &expected,
    )
    .await?;
    let pending: Vec<&Pod> = pods
        .iter()
        .filter(|pod| {
            pod.metadata.deletion_timestamp.is_none()
                && pod.spec.as_ref().is_none_or(|s| s.node_name.is_none())
                && pod
                    .status
                    .as_ref()
                    .and_then(|s| s.phase.as_deref())
                    .is_none_or(|phase| phase == "Pending")
        })
        .collect();
    let count_holds = match p.count {
        Some(n) => pending.len() == n,
        None => !pending.is_empty(),
    };
    let mut messages: BTreeMap<&str, usize> = BTreeMap::new();
    for pod in &pending {
        *messages
            .entry(scheduler_message(pod).unwrap_or("(no scheduler message yet)"))
            .or_default() += 1;
    }
    let message_holds = p.message.as_deref().is_none_or(|want| {
        pending
            .iter()
            .all(|pod| scheduler_message(pod).is_some_and(|m| m.contains(want)))
    });
    let mut seen = format!("{} pending pod{}", pending.len(), plural(pending.len()));
    for (message, n) in messages.iter().take(3) {
        seen.push_str(&format!("; {n}: {message}"));
    }
    Ok(Verdict {
        holds: count_holds && message_holds,
        expected,
        seen,
    })
}

/// Who asked for an eviction, in the web view's words.
pub(crate) fn evicted_by(requester: &str) -> String {
    if requester.contains("descheduler") {
        "descheduler".into()
    } else if requester.starts_with("kubectl drain") || requester.starts_with("ksim drain") {
        "drain".into()
    } else if requester.contains("autoscaler") {
        "autoscaler".into()
    } else if requester.contains("node") || requester.contains("taint") {
        "node-lifecycle".into()
    } else {
        requester.to_string()
    }
}

fn event_count(event: &Event) -> usize {
    event
        .series
        .as_ref()
        .map(|s| s.count.unwrap_or(1))
        .or(event.count)
        .unwrap_or(1)
        .max(1) as usize
}

async fn evictions(e: &Evictions, client: &kube::Client) -> CheckResult {
    let mut parts = Vec::new();
    match (e.count, e.at_least) {
        (Some(n), _) => parts.push(format!("{n} eviction{}", plural(n))),
        (None, Some(n)) => parts.push(format!("at least {n} eviction{}", plural(n))),
        (None, None) => {}
    }
    if let Some(n) = e.refused {
        parts.push(format!("{n} refusal{}", plural(n)));
    }
    if parts.is_empty() {
        parts.push("at least 1 eviction".into());
    }
    let mut expected = parts.join(" and ");
    if let Some(by) = &e.by {
        expected.push_str(&format!(" by {by}"));
    }
    let records = eviction_records(client, e.namespace.as_deref(), &expected).await?;
    let events = list_events(client, e.namespace.as_deref(), &expected).await?;
    let mut evicted: BTreeMap<String, usize> = BTreeMap::new();
    let mut refused: BTreeMap<String, usize> = BTreeMap::new();
    // (outcome, who asked as recorded, pod name, how many)
    let from_records = records.iter().map(|record| {
        let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
        (
            text(&record["outcome"]),
            Some(text(&record["requestedBy"])),
            text(&record["pod"]["name"]),
            1,
        )
    });
    let from_events = events.iter().filter_map(|event| {
        let cancelled = event
            .message
            .as_deref()
            .unwrap_or_default()
            .starts_with("Cancelling");
        (event.reason.as_deref() == Some("TaintManagerEviction") && !cancelled).then(|| {
            (
                "TaintManagerEviction".to_string(),
                None,
                event.involved_object.name.clone().unwrap_or_default(),
                event_count(event),
            )
        })
    });
    for (outcome, requested, pod, count) in from_records.chain(from_events) {
        let (by, tally) = match (outcome.as_str(), &requested) {
            ("Evicted", Some(by)) => (evicted_by(by), &mut evicted),
            ("Refused", Some(by)) => (evicted_by(by), &mut refused),
            ("TaintManagerEviction", _) => ("node-lifecycle".to_string(), &mut evicted),
            _ => continue,
        };
        if let Some(want) = &e.by
            && by != *want
            && !requested
                .as_deref()
                .is_some_and(|r| r.contains(want.as_str()))
        {
            continue;
        }
        if let Some(prefix) = &e.pod
            && !pod.starts_with(prefix.as_str())
        {
            continue;
        }
        *tally.entry(by).or_default() += count;
    }
    let total: usize = evicted.values().sum();
    let total_refused: usize = refused.values().sum();
    let holds = match (e.count, e.at_least) {
        (Some(n), _) => total == n,
        (None, Some(n)) => total >= n,
        (None, None) => e.refused.is_some() || total >= 1,
    } && e.refused.is_none_or(|n| total_refused == n);
    let mut seen = format!("{total} eviction{}", plural(total));
    if !evicted.is_empty() {
        seen.push_str(&format!(" ({})", render_counts(&evicted)));
    }
    if e.refused.is_some() || total_refused > 0 {
        seen.push_str(&format!(", {total_refused} refused"));
        if !refused.is_empty() {
            seen.push_str(&format!(" ({})", render_counts(&refused)));
        }
    }
    Ok(Verdict {
        holds,
        expected,
        seen,
    })
}

async fn events(e: &Events, client: &kube::Client) -> CheckResult {
    let mut expected = match (e.count, e.at_least) {
        (Some(n), _) => format!("{n} {} event{}", e.reason, plural(n)),
        (None, Some(n)) => format!("at least {n} {} event{}", e.reason, plural(n)),
        (None, None) => format!("a {} event", e.reason),
    };
    if let Some(message) = &e.message {
        expected.push_str(&format!(" with a message containing {message:?}"));
    }
    let all = list_events(client, e.namespace.as_deref(), &expected).await?;
    let with_reason: Vec<&Event> = all
        .iter()
        .filter(|event| event.reason.as_deref() == Some(e.reason.as_str()))
        .collect();
    let matching: Vec<&&Event> = with_reason
        .iter()
        .filter(|event| {
            e.message
                .as_deref()
                .is_none_or(|want| event.message.as_deref().is_some_and(|m| m.contains(want)))
                && e.type_
                    .as_deref()
                    .is_none_or(|t| event.type_.as_deref() == Some(t))
                && e.kind
                    .as_deref()
                    .is_none_or(|k| event.involved_object.kind.as_deref() == Some(k))
                && e.name
                    .as_deref()
                    .is_none_or(|n| event.involved_object.name.as_deref() == Some(n))
        })
        .collect();
    let total: usize = matching.iter().map(|event| event_count(event)).sum();
    let holds = match (e.count, e.at_least) {
        (Some(n), _) => total == n,
        (None, Some(n)) => total >= n,
        (None, None) => total >= 1,
    };
    let mut seen = format!("{total} matching");
    let mut messages: BTreeMap<&str, usize> = BTreeMap::new();
    for event in &with_reason {
        *messages
            .entry(event.message.as_deref().unwrap_or_default())
            .or_default() += event_count(event);
    }
    if messages.is_empty() {
        seen.push_str(&format!("; no {} event at all", e.reason));
    }
    for (message, n) in messages.iter().take(3) {
        seen.push_str(&format!("; {n}: {message}"));
    }
    Ok(Verdict {
        holds,
        expected,
        seen,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(get: &str, jq: &str) -> JqCheck {
        JqCheck {
            get: GetArgs::parse(get).expect("get"),
            jq: JqQuery::compile(jq).expect("jq"),
        }
    }

    #[test]
    fn jq_holds_only_when_every_output_is_true() {
        let list = json!({"apiVersion": "v1", "kind": "List", "items": [
            {"status": {"phase": "Running"}}, {"status": {"phase": "Pending"}}
        ], "metadata": {"resourceVersion": ""}});
        let running = check(
            "pods",
            r#"[.items[] | select(.status.phase == "Running")] | length == 2"#,
        );
        let verdict = jq_verdict(&running, Ok(list.clone()));
        assert!(!verdict.holds);
        assert_eq!(verdict.seen, "false (over 2 items)");
        assert!(verdict.expected.contains("to yield true"), "{verdict:?}");
        let one = check(
            "pods",
            r#"[.items[] | select(.status.phase == "Running")] | length == 1"#,
        );
        assert!(jq_verdict(&one, Ok(list.clone())).holds);
        let several = check("pods", ".items[] | .status.phase == \"Running\"");
        assert!(!jq_verdict(&several, Ok(list.clone())).holds);
        let nothing = check("pods", "empty");
        assert_eq!(
            jq_verdict(&nothing, Ok(list)).seen,
            "no output (over 2 items)"
        );
    }

    #[test]
    fn jq_failures_show_the_error() {
        let pdb = check("pdb x", ".status.disruptionsAllowed == 0");
        let verdict = jq_verdict(
            &pdb,
            Err("Error from server (NotFound): poddisruptionbudgets.policy \"x\" not found".into()),
        );
        assert!(!verdict.holds);
        assert!(verdict.seen.contains("NotFound"), "{verdict:?}");
        let bad = check("pdb x", ".spec.x.y");
        let verdict = jq_verdict(&bad, Ok(json!({"spec": {"x": "s"}})));
        assert!(verdict.seen.starts_with("jq error: "), "{verdict:?}");
    }

    #[test]
    fn requesters_are_named_as_the_web_view_names_them() {
        assert_eq!(evicted_by("sigs.k8s.io/descheduler"), "descheduler");
        assert_eq!(evicted_by("kubectl drain"), "drain");
        assert_eq!(evicted_by("ksim drain"), "drain");
        assert_eq!(evicted_by("cluster-autoscaler"), "autoscaler");
        assert_eq!(evicted_by("curl"), "curl");
    }
}
