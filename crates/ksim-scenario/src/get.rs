//! `get:` in process: `kubectl get` arguments (`pods -l app=nginx`,
//! `pdb pdb-sample`, `deploy/web -n prod`, `nodes -A`, `--field-selector`)
//! parsed when the scenario is loaded, resolved through the server's
//! discovery (plurals, singulars, kinds and short names, as kubectl resolves
//! them), and answered with the JSON `kubectl get -o json` prints: the object
//! for one named object, else a `List` whose items carry `apiVersion` and
//! `kind`.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroupList, APIResourceList};
use serde_json::{Value, json};

use crate::args::split_args;

/// Parsed `kubectl get` arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetArgs {
    /// `(type, name)` pairs from `TYPE/NAME` arguments, or the types with
    /// the names that follow them.
    pub targets: Vec<(String, Option<String>)>,
    /// `-n`/`--namespace`.
    pub namespace: Option<String>,
    /// `-A`/`--all-namespaces`.
    pub all_namespaces: bool,
    /// `-l`/`--selector`.
    pub label_selector: Option<String>,
    /// `--field-selector`.
    pub field_selector: Option<String>,
    /// The arguments as written.
    pub source: String,
}

impl GetArgs {
    /// Parses `kubectl get` arguments (without `kubectl get`).
    pub fn parse(line: &str) -> Result<Self, String> {
        let words = split_args(line)?;
        let mut args = GetArgs {
            targets: Vec::new(),
            namespace: None,
            all_namespaces: false,
            label_selector: None,
            field_selector: None,
            source: line.trim().to_string(),
        };
        let mut positional = Vec::new();
        let mut words = words.into_iter();
        while let Some(word) = words.next() {
            if !word.starts_with('-') || word == "-" {
                positional.push(word);
                continue;
            }
            let (flag, inline) = match word.split_once('=') {
                Some((flag, value)) => (flag.to_string(), Some(value.to_string())),
                None => (word.clone(), None),
            };
            let mut value = |flag: &str| -> Result<String, String> {
                match inline.clone() {
                    Some(value) => Ok(value),
                    None => words
                        .next()
                        .ok_or_else(|| format!("flag needs an argument: {flag}")),
                }
            };
            match flag.as_str() {
                "-A" | "--all-namespaces" => args.all_namespaces = true,
                "-n" | "--namespace" => args.namespace = Some(value(&flag)?),
                "-l" | "--selector" => {
                    let selector = value(&flag)?;
                    ksim_core::selector::LabelSelectorRequirements::parse(&selector)
                        .map_err(|e| format!("invalid label selector {selector:?}: {e}"))?;
                    args.label_selector = Some(selector);
                }
                "--field-selector" => {
                    let selector = value(&flag)?;
                    ksim_core::selector::FieldSelector::parse(&selector)
                        .map_err(|e| format!("invalid field selector {selector:?}: {e}"))?;
                    args.field_selector = Some(selector);
                }
                "-o" | "--output" => {
                    let format = value(&flag)?;
                    if format != "json" {
                        return Err(format!("only -o json is meaningful here, not {format:?}"));
                    }
                }
                "-ojson" => {}
                other => return Err(format!("unknown flag: {other}")),
            }
        }
        let mut positional = positional.into_iter();
        let Some(first) = positional.next() else {
            return Err("a resource type is required (e.g. pods, pdb NAME, deploy/NAME)".into());
        };
        if first.contains('/') {
            for word in std::iter::once(first).chain(positional) {
                let Some((kind, name)) = word
                    .split_once('/')
                    .filter(|(k, n)| !k.is_empty() && !n.is_empty())
                else {
                    return Err(format!(
                        "there is no need to specify a resource type as a separate argument when passing arguments in resource/name form: {word:?}"
                    ));
                };
                args.targets
                    .push((kind.to_string(), Some(name.to_string())));
            }
        } else {
            let kinds: Vec<&str> = first.split(',').filter(|k| !k.is_empty()).collect();
            let names: Vec<String> = positional.collect();
            for kind in kinds {
                if names.is_empty() {
                    args.targets.push((kind.to_string(), None));
                }
                for name in &names {
                    args.targets.push((kind.to_string(), Some(name.clone())));
                }
            }
        }
        let named = args.targets.iter().any(|(_, name)| name.is_some());
        if named && (args.label_selector.is_some() || args.field_selector.is_some()) {
            return Err("name cannot be provided when a selector is specified".into());
        }
        if args.targets.is_empty() {
            return Err("a resource type is required".into());
        }
        Ok(args)
    }

    /// Whether `kubectl get` prints a single object (one named object).
    fn single(&self) -> bool {
        self.targets.len() == 1 && self.targets[0].1.is_some()
    }
}

/// One resource type the server serves.
#[derive(Debug, Clone)]
pub(crate) struct ApiType {
    group: String,
    version: String,
    plural: String,
    singular: String,
    kind: String,
    short_names: Vec<String>,
    pub(crate) namespaced: bool,
}

impl ApiType {
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether `name` (`pods`, `pod`, `po`, `Pod`, `deployments.apps`,
    /// `deployments.v1.apps`) names this type.
    fn matches(&self, name: &str) -> bool {
        let (resource, qualifier) = match name.split_once('.') {
            Some((resource, rest)) => (resource, Some(rest)),
            None => (name, None),
        };
        let qualified = match qualifier {
            None => true,
            Some(rest) => rest == self.group || rest == format!("{}.{}", self.version, self.group),
        };
        let resource = resource.to_ascii_lowercase();
        qualified
            && (resource == self.plural
                || resource == self.singular
                || resource == self.kind.to_ascii_lowercase()
                || self.short_names.contains(&resource))
    }

    pub(crate) fn path(&self, namespace: Option<&str>, name: Option<&str>) -> String {
        let mut path = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        if let (true, Some(namespace)) = (self.namespaced, namespace) {
            path.push_str("/namespaces/");
            path.push_str(namespace);
        }
        path.push('/');
        path.push_str(&self.plural);
        if let Some(name) = name {
            path.push('/');
            path.push_str(name);
        }
        path
    }
}

/// Resolves resource names through discovery (read once, and again when a
/// name is not found, as after a CRD is applied) and answers `get:`.
pub struct Resolver {
    client: kube::Client,
    types: tokio::sync::Mutex<Option<Arc<Vec<ApiType>>>>,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver").finish_non_exhaustive()
    }
}

/// kubectl's line for an API error.
pub(crate) fn describe_error(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            let reason = if status.reason.is_empty() {
                status.code.to_string()
            } else {
                status.reason.clone()
            };
            format!("Error from server ({reason}): {}", status.message)
        }
        other => other.to_string(),
    }
}

impl Resolver {
    /// A resolver over `client`'s server.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            types: tokio::sync::Mutex::new(None),
        }
    }

    /// The client.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    async fn request(&self, path: &str) -> Result<Value, kube::Error> {
        let request = http::Request::get(path)
            .body(Vec::new())
            .map_err(kube::Error::HttpError)?;
        self.client.request::<Value>(request).await
    }

    async fn discover(&self) -> Result<Vec<ApiType>, String> {
        let mut types = Vec::new();
        let mut add = |list: APIResourceList| {
            let (group, version) = match list.group_version.split_once('/') {
                Some((group, version)) => (group.to_string(), version.to_string()),
                None => (String::new(), list.group_version.clone()),
            };
            for resource in list.resources {
                if resource.name.contains('/') {
                    continue;
                }
                types.push(ApiType {
                    group: group.clone(),
                    version: version.clone(),
                    singular: if resource.singular_name.is_empty() {
                        resource.kind.to_ascii_lowercase()
                    } else {
                        resource.singular_name
                    },
                    plural: resource.name,
                    kind: resource.kind,
                    short_names: resource.short_names.unwrap_or_default(),
                    namespaced: resource.namespaced,
                });
            }
        };
        let decode = |value: Value, what: &str| -> Result<APIResourceList, String> {
            serde_json::from_value(value)
                .map_err(|e| format!("cannot read the discovery of {what}: {e}"))
        };
        let core = self
            .request("/api/v1")
            .await
            .map_err(|e| describe_error(&e))?;
        add(decode(core, "v1")?);
        let groups: APIGroupList = serde_json::from_value(
            self.request("/apis")
                .await
                .map_err(|e| describe_error(&e))?,
        )
        .map_err(|e| format!("cannot read the API groups: {e}"))?;
        for group in groups.groups {
            let Some(version) = group
                .preferred_version
                .or_else(|| group.versions.into_iter().next())
            else {
                continue;
            };
            let path = format!("/apis/{}", version.group_version);
            match self.request(&path).await {
                Ok(value) => add(decode(value, &version.group_version)?),
                // A group that went away between the two reads.
                Err(error) => {
                    tracing::debug!(group = %version.group_version, error = %error, "discovery skipped a group")
                }
            }
        }
        Ok(types)
    }

    async fn find(&self, found: impl Fn(&ApiType) -> bool) -> Result<Option<ApiType>, String> {
        let mut cache = self.types.lock().await;
        for refresh in [false, true] {
            if refresh || cache.is_none() {
                *cache = Some(Arc::new(self.discover().await?));
            }
            let types = cache.as_ref().expect("filled above");
            if let Some(found) = types.iter().find(|t| found(t)) {
                return Ok(Some(found.clone()));
            }
        }
        Ok(None)
    }

    /// The type a `kubectl get` name (`pods`, `pdb`, `deployments.apps`) names.
    pub(crate) async fn resolve(&self, name: &str) -> Result<ApiType, String> {
        self.find(|t| t.matches(name))
            .await?
            .ok_or_else(|| format!("error: the server doesn't have a resource type {name:?}"))
    }

    /// The type of objects with this `apiVersion` and `kind`.
    pub(crate) async fn resolve_kind(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<ApiType, String> {
        self.find(|t| t.api_version() == api_version && t.kind == kind)
            .await?
            .ok_or_else(|| {
                format!("resource mapping not found for kind {kind:?} in version {api_version:?}")
            })
    }

    /// Sends a request with a JSON body (`None`: no body).
    pub(crate) async fn send(
        &self,
        method: http::Method,
        path: &str,
        content_type: &str,
        body: Option<&Value>,
    ) -> Result<Value, kube::Error> {
        let bytes = match body {
            Some(body) => serde_json::to_vec(body).map_err(kube::Error::SerdeError)?,
            None => Vec::new(),
        };
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::CONTENT_TYPE, content_type)
            .body(bytes)
            .map_err(kube::Error::HttpError)?;
        self.client.request::<Value>(request).await
    }

    /// The namespace when none is given: the kubeconfig context's.
    pub(crate) fn default_namespace(&self) -> &str {
        self.client.default_namespace()
    }

    /// What `kubectl get ARGS -o json` prints, or its error line.
    pub async fn get(&self, args: &GetArgs) -> Result<Value, String> {
        let default_namespace = self.client.default_namespace().to_string();
        let namespace = if args.all_namespaces {
            None
        } else {
            Some(args.namespace.clone().unwrap_or(default_namespace))
        };
        let mut items = Vec::new();
        for (kind, name) in &args.targets {
            let api = self.resolve(kind).await?;
            match name {
                Some(name) => {
                    let namespace = namespace
                        .as_deref()
                        .or(Some(self.client.default_namespace()));
                    let mut object = self
                        .request(&api.path(namespace, Some(name)))
                        .await
                        .map_err(|e| describe_error(&e))?;
                    stamp(&mut object, &api);
                    if args.single() {
                        return Ok(object);
                    }
                    items.push(object);
                }
                None => {
                    let mut query = Vec::new();
                    if let Some(selector) = &args.label_selector {
                        query.push(("labelSelector", selector.as_str()));
                    }
                    if let Some(selector) = &args.field_selector {
                        query.push(("fieldSelector", selector.as_str()));
                    }
                    let mut path = api.path(namespace.as_deref(), None);
                    if !query.is_empty() {
                        path.push('?');
                        path.push_str(&encode_query(&query));
                    }
                    let list = self.request(&path).await.map_err(|e| describe_error(&e))?;
                    if let Some(Value::Array(listed)) = list.get("items") {
                        for item in listed {
                            let mut item = item.clone();
                            stamp(&mut item, &api);
                            items.push(item);
                        }
                    }
                }
            }
        }
        Ok(json!({
            "apiVersion": "v1",
            "items": items,
            "kind": "List",
            "metadata": {"resourceVersion": ""},
        }))
    }
}

/// Sets `apiVersion` and `kind` as kubectl's printer does.
fn stamp(object: &mut Value, api: &ApiType) {
    if let Some(map) = object.as_object_mut() {
        map.insert("apiVersion".into(), Value::String(api.api_version()));
        map.insert("kind".into(), Value::String(api.kind.clone()));
    }
}

pub(crate) fn encode_query(pairs: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (i, (key, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        out.push_str(key);
        out.push('=');
        for byte in value.bytes() {
            match byte {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    out.push(byte as char)
                }
                other => out.push_str(&format!("%{other:02X}")),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_get_forms_parse() {
        let args = GetArgs::parse("pods -l app=nginx -n prod").expect("parses");
        assert_eq!(args.targets, vec![("pods".to_string(), None)]);
        assert_eq!(args.label_selector.as_deref(), Some("app=nginx"));
        assert_eq!(args.namespace.as_deref(), Some("prod"));
        let args = GetArgs::parse("pdb pdb-sample").expect("parses");
        assert!(args.single());
        let args = GetArgs::parse("deploy/web pod/a -o json").expect("parses");
        assert_eq!(
            args.targets,
            vec![
                ("deploy".to_string(), Some("web".to_string())),
                ("pod".to_string(), Some("a".to_string()))
            ]
        );
        assert!(!args.single());
        let args =
            GetArgs::parse("pods,nodes -A --field-selector=status.phase=Running").expect("parses");
        assert_eq!(args.targets.len(), 2);
        assert!(args.all_namespaces);
    }

    #[test]
    fn bad_get_arguments_say_why() {
        for (line, want) in [
            ("", "resource type is required"),
            ("pods --watch", "unknown flag: --watch"),
            ("pods -l", "flag needs an argument: -l"),
            ("pods -l 'app in (a'", "invalid label selector"),
            ("pods x -l app=a", "name cannot be provided"),
            ("pods -o wide", "only -o json"),
        ] {
            let error = GetArgs::parse(line).expect_err(line);
            assert!(error.contains(want), "{line}: {error}");
        }
    }

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(
            encode_query(&[("labelSelector", "app in (a,b)")]),
            "labelSelector=app%20in%20%28a%2Cb%29"
        );
    }
}
