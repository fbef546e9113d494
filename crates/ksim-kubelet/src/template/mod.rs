//! Go text/template rendering of Stage templates with KWOK's functions.

mod block_yaml;
mod convert;
mod env;
mod funcs;
mod render;
mod yaml;

pub use convert::{to_json_value, to_template_value};
pub use env::{StaticTemplateEnv, TemplateEnv, format_time};
pub use funcs::{VERSION, node_conditions, quote, template_funcs};
pub use render::{Renderer, yaml_to_json};
pub use yaml::to_yaml;
