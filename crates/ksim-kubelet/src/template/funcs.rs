//! The functions KWOK offers to Stage templates (Quote, Now, YAML, NodeConditions, NodeIP,
//! PodIPsWith, ...) and the sprig functions its shipped stages use.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use gotmpl::{FuncMap, TemplateError, Value, ValueFunc};

use super::convert::{to_json_value, to_template_value};
use super::env::TemplateEnv;
use super::yaml::to_yaml;

/// The simulator version templates print through `Version` (`ksim-%s` gives `ksim-v0.1.0`).
pub const VERSION: &str = concat!("v", env!("CARGO_PKG_VERSION"));

thread_local! {
    static CURRENT_ENV: RefCell<Option<Arc<dyn TemplateEnv>>> = const { RefCell::new(None) };
}

/// Makes `env` the environment of template functions on this thread while `render` runs.
pub(crate) fn with_env<T>(env: &Arc<dyn TemplateEnv>, render: impl FnOnce() -> T) -> T {
    struct Restore(Option<Arc<dyn TemplateEnv>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            CURRENT_ENV.with(|cell| *cell.borrow_mut() = previous);
        }
    }
    let previous = CURRENT_ENV.with(|cell| cell.borrow_mut().replace(Arc::clone(env)));
    let _restore = Restore(previous);
    render()
}

fn current_env() -> Result<Arc<dyn TemplateEnv>, TemplateError> {
    CURRENT_ENV
        .with(|cell| cell.borrow().clone())
        .ok_or_else(|| TemplateError::Exec("template rendered without an environment".into()))
}

fn string(s: impl AsRef<str>) -> Value {
    Value::String(Arc::from(s.as_ref()))
}

fn strings(items: Vec<String>) -> Value {
    Value::List(items.into_iter().map(string).collect())
}

/// Text of a value as Go's `fmt.Sprint` would give it for the kinds templates pass around.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.to_string(),
        Value::Nil => String::new(),
        other => other.to_string(),
    }
}

fn arg(args: &[Value], i: usize) -> Value {
    args.get(i).cloned().unwrap_or(Value::Nil)
}

/// `Quote`: JSON-encodes the value; a non-string result is quoted again (as KWOK does).
pub fn quote(value: &Value) -> String {
    let json = to_json_value(value).to_string();
    if json.starts_with('"') {
        json
    } else {
        serde_json::Value::String(json).to_string()
    }
}

/// The conditions a healthy node reports, in KWOK's order and words.
pub fn node_conditions() -> serde_json::Value {
    serde_json::json!([
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"},
        {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "message": "kubelet has sufficient memory available"},
        {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure", "message": "kubelet has no disk pressure"},
        {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID", "message": "kubelet has sufficient PID available"},
        {"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated", "message": "RouteController created a route"}
    ])
}

fn pod_ips_from_args(args: &[Value]) -> Result<Vec<String>, TemplateError> {
    let env = current_env()?;
    let node_name = text(&arg(args, 0));
    let host_network = gotmpl::is_true(&arg(args, 1));
    Ok(env.pod_ips_with(
        &node_name,
        host_network,
        &text(&arg(args, 2)),
        &text(&arg(args, 3)),
        &text(&arg(args, 4)),
    ))
}

fn node_ip_with(node_name: &str) -> Result<String, TemplateError> {
    let env = current_env()?;
    Ok(env
        .node_ips_with(node_name)
        .into_iter()
        .next()
        .unwrap_or_else(|| env.node_ip()))
}

fn insert(
    map: &mut FuncMap,
    name: &str,
    f: impl Fn(&[Value]) -> gotmpl::Result<Value> + Send + Sync + 'static,
) {
    let f: ValueFunc = Arc::new(f);
    map.insert(name.to_owned(), f);
}

/// Every function a Stage template can call.
pub fn template_funcs() -> FuncMap {
    let mut map = FuncMap::new();
    // KWOK's own functions.
    insert(&mut map, "Quote", |args| Ok(string(quote(&arg(args, 0)))));
    insert(&mut map, "Now", |_| Ok(string(current_env()?.now())));
    insert(&mut map, "StartTime", |_| {
        Ok(string(current_env()?.start_time()))
    });
    insert(&mut map, "Version", |_| Ok(string(VERSION)));
    insert(&mut map, "YAML", |args| {
        let mut data = to_yaml(&arg(args, 0));
        let indent = args.get(1).and_then(Value::as_int).unwrap_or(0);
        if indent > 0 {
            let pad = " ".repeat(usize::try_from(indent).unwrap_or(0).saturating_mul(2));
            data = format!("\n{data}").replace('\n', &format!("\n{pad}"));
        }
        Ok(string(data))
    });
    insert(&mut map, "NodeConditions", |_| {
        Ok(to_template_value(&node_conditions()))
    });
    insert(&mut map, "NodeIP", |_| Ok(string(current_env()?.node_ip())));
    insert(&mut map, "NodeName", |_| {
        Ok(string(current_env()?.node_name()))
    });
    insert(&mut map, "NodePort", |_| {
        Ok(Value::Int(current_env()?.node_port()))
    });
    insert(&mut map, "NodeIPWith", |args| {
        Ok(string(node_ip_with(&text(&arg(args, 0)))?))
    });
    insert(&mut map, "NodeIPsWith", |args| {
        let env = current_env()?;
        let ips = env.node_ips_with(&text(&arg(args, 0)));
        Ok(strings(ips))
    });
    insert(&mut map, "PodIP", |_| {
        let env = current_env()?;
        let ips = env.pod_ips_with("", false, "", "", "");
        Ok(string(
            ips.into_iter().next().unwrap_or_else(|| env.node_ip()),
        ))
    });
    insert(&mut map, "PodIPWith", |args| {
        let ips = pod_ips_from_args(args)?;
        match ips.into_iter().next() {
            Some(ip) => Ok(string(ip)),
            None => Ok(string(current_env()?.node_ip())),
        }
    });
    insert(&mut map, "PodIPsWith", |args| {
        Ok(strings(pod_ips_from_args(args)?))
    });
    // The sprig functions stages use.
    insert(&mut map, "dict", |args| {
        let mut out = BTreeMap::new();
        for pair in args.chunks(2) {
            let key = text(&pair[0]);
            let value = pair.get(1).cloned().unwrap_or_else(|| string(""));
            out.insert(Arc::from(key.as_str()), value);
        }
        Ok(Value::Map(Arc::new(out)))
    });
    insert(&mut map, "list", |args| {
        Ok(Value::List(args.iter().cloned().collect()))
    });
    insert(&mut map, "default", |args| {
        let given = arg(args, 1);
        Ok(if gotmpl::is_true(&given) {
            given
        } else {
            arg(args, 0)
        })
    });
    insert(&mut map, "empty", |args| {
        Ok(Value::Bool(!gotmpl::is_true(&arg(args, 0))))
    });
    insert(&mut map, "hasKey", |args| {
        let key = text(&arg(args, 1));
        Ok(Value::Bool(
            matches!(&arg(args, 0), Value::Map(m) if m.contains_key(key.as_str())),
        ))
    });
    insert(&mut map, "quote", |args| {
        let quoted: Vec<String> = args
            .iter()
            .filter(|a| !matches!(a, Value::Nil))
            .map(|a| serde_json::Value::String(text(a)).to_string())
            .collect();
        Ok(string(quoted.join(" ")))
    });
    insert(&mut map, "toJson", |args| {
        Ok(string(to_json_value(&arg(args, 0)).to_string()))
    });
    insert(&mut map, "trim", |args| {
        Ok(string(text(&arg(args, 0)).trim()))
    });
    insert(&mut map, "upper", |args| {
        Ok(string(text(&arg(args, 0)).to_uppercase()))
    });
    insert(&mut map, "lower", |args| {
        Ok(string(text(&arg(args, 0)).to_lowercase()))
    });
    map
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quote_follows_kwok() {
        let cases = [
            (json!("a\"b"), r#""a\"b""#),
            (json!(null), r#""null""#),
            (json!(5), r#""5""#),
            (json!(true), r#""true""#),
        ];
        for (value, want) in cases {
            assert_eq!(quote(&to_template_value(&value)), want, "{value}");
        }
    }

    #[test]
    fn env_is_restored_after_render() {
        let env: Arc<dyn TemplateEnv> = Arc::new(crate::template::StaticTemplateEnv::default());
        with_env(&env, || assert!(current_env().is_ok()));
        assert!(current_env().is_err());
    }
}
