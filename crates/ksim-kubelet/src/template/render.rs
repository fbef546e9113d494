//! Rendering Stage templates: parse once (trimmed, as KWOK does), cache, execute
//! against an object, and read the YAML output as JSON.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use gotmpl::Template;

use super::convert::to_template_value;
use super::env::TemplateEnv;
use super::funcs::{template_funcs, with_env};
use crate::error::KubeletError;

/// Renders Stage templates, caching each parsed template by its text.
#[derive(Default)]
pub struct Renderer {
    cache: RwLock<HashMap<String, Arc<Template>>>,
}

impl std::fmt::Debug for Renderer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cached = self.cache.read().map(|c| c.len()).unwrap_or(0);
        f.debug_struct("Renderer").field("cached", &cached).finish()
    }
}

impl Renderer {
    /// An empty renderer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses `text` (trimmed) or returns the cached parse.
    pub fn template(&self, text: &str) -> Result<Arc<Template>, KubeletError> {
        let text = text.trim();
        if let Ok(cache) = self.cache.read()
            && let Some(template) = cache.get(text)
        {
            return Ok(Arc::clone(template));
        }
        let template = Template::new("_")
            .funcs(template_funcs())
            .parse(text)
            .map_err(|e| KubeletError::Template(format!("build template: {e}")))?;
        let template = Arc::new(template);
        if let Ok(mut cache) = self.cache.write() {
            cache.insert(text.to_owned(), Arc::clone(&template));
        }
        Ok(template)
    }

    /// Renders `text` with `object` as dot.
    pub fn render_text(
        &self,
        text: &str,
        object: &serde_json::Value,
        env: &Arc<dyn TemplateEnv>,
    ) -> Result<String, KubeletError> {
        let template = self.template(text)?;
        let data = to_template_value(object);
        with_env(env, || template.execute_to_string(&data))
            .map_err(|e| KubeletError::Template(format!("gotpl execute: {e}")))
    }

    /// Renders `text` and reads the output as YAML. An empty output is an empty object.
    pub fn render_json(
        &self,
        text: &str,
        object: &serde_json::Value,
        env: &Arc<dyn TemplateEnv>,
    ) -> Result<serde_json::Value, KubeletError> {
        let rendered = self.render_text(text, object, env)?;
        yaml_to_json(&rendered)
    }
}

/// Parses YAML text into JSON; blank text is an empty object.
pub fn yaml_to_json(text: &str) -> Result<serde_json::Value, KubeletError> {
    if text.trim().is_empty() {
        return Ok(serde_json::Value::Object(serde_json::Map::new()));
    }
    // The usual output shape is read by the fast subset reader; the rest by saphyr.
    if let Some(value) = super::block_yaml::parse(text) {
        return Ok(value);
    }
    let value: serde_json::Value =
        serde_saphyr::from_str(text).map_err(|e| KubeletError::RenderedYaml {
            reason: e.to_string(),
            text: text.to_owned(),
        })?;
    Ok(match value {
        serde_json::Value::Null => serde_json::Value::Object(serde_json::Map::new()),
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::StaticTemplateEnv;
    use serde_json::json;

    fn env() -> Arc<dyn TemplateEnv> {
        Arc::new(StaticTemplateEnv {
            now: "2024-01-02T03:04:05Z".into(),
            node_ip: "10.1.0.1".into(),
            node_name: "node-0".into(),
            node_port: 10250,
            ..Default::default()
        })
    }

    #[test]
    fn renders_go_template_constructs_stages_use() {
        let cases = [
            ("{{ .a }}", json!({"a": "x"}), "x"),
            ("  {{ .a | Quote }}\n", json!({"a": "x"}), "\"x\""),
            ("{{ or .missing.deep \"d\" }}", json!({}), "d"),
            ("{{ $m := .m }}{{ or $m.k `\"\"` }}", json!({}), "\"\""),
            (
                "{{ range $i, $c := .l }}{{ $i }}{{ $c.n }}{{ end }}",
                json!({"l": [{"n": "a"}, {"n": "b"}]}),
                "0a1b",
            ),
            (
                "{{ with .n }}{{ . }}{{ else }}none{{ end }}",
                json!({}),
                "none",
            ),
            ("{{ printf \"ksim-%s\" Version }}", json!({}), "ksim-v0.1.0"),
            (
                "{{ Now }} {{ NodeName }} {{ NodePort }} {{ NodeIP }}",
                json!({}),
                "2024-01-02T03:04:05Z node-0 10250 10.1.0.1",
            ),
            (
                "{{ $a := or .metadata.annotations dict }}{{ or (index $a \"k\") \"dflt\" }}",
                json!({"metadata": {}}),
                "dflt",
            ),
            (
                "{{ if eq .restartPolicy \"Always\" }}y{{ else }}n{{ end }}",
                json!({}),
                "n",
            ),
            (
                "{{ $x := false }}{{ range .l }}{{ if eq .t \"A\" }}{{ $x = true }}{{ end }}{{ end }}{{ $x }}",
                json!({"l": [{"t": "A"}]}),
                "true",
            ),
        ];
        let renderer = Renderer::new();
        for (text, object, want) in cases {
            let got = renderer.render_text(text, &object, &env()).expect(text);
            assert_eq!(got, want, "{text}");
        }
    }

    #[test]
    fn parsed_templates_are_cached_by_trimmed_text() {
        let renderer = Renderer::new();
        let a = renderer.template(" {{ .a }} ").expect("parses");
        let b = renderer.template("{{ .a }}\n").expect("parses");
        assert!(Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn bad_template_is_an_error_not_a_panic() {
        let renderer = Renderer::new();
        let err = renderer
            .render_text("{{ if }}", &json!({}), &env())
            .expect_err("bad");
        assert!(
            err.to_string().starts_with("template: build template"),
            "{err}"
        );
        let err = renderer
            .render_text("{{ NoSuchFunc }}", &json!({}), &env())
            .expect_err("unknown function");
        assert!(matches!(err, KubeletError::Template(_)));
    }

    #[test]
    fn yaml_output_becomes_json() {
        let got = yaml_to_json("a: \"True\"\nb: 1\nc: null\nd:\n- x: 1k\n").expect("yaml");
        assert_eq!(
            got,
            json!({"a": "True", "b": 1, "c": null, "d": [{"x": "1k"}]})
        );
        assert_eq!(yaml_to_json("\n  \n").expect("blank"), json!({}));
        assert!(yaml_to_json("a: [").is_err());
    }
}
