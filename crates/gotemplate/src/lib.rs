//! Go's `text/template`, evaluated over JSON data the way Go sees JSON decoded into
//! `interface{}` (objects are maps, numbers `float64`), with the hermetic sprig functions.
//!
//! Cluster API renders a ClusterClass's `enabledIf` and `valueFrom.template` with Go's
//! engine and sprig's `HermeticTxtFuncMap`; this crate renders the same strings the same
//! way so that upstream ClusterClasses run unchanged.

use serde_json::Value;

mod exec;
mod fmt;
mod funcs;
mod lex;
mod parse;
mod value;

/// A template that failed to parse or to execute, with Go's wording.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Parse(String),
    #[error("{0}")]
    Exec(String),
}

/// A parsed template.
#[derive(Debug, Clone)]
pub struct Template {
    name: String,
    text: String,
    trees: parse::Trees,
}

impl Template {
    /// Parses `text` as a template called `name` (the name appears in error messages).
    pub fn parse(name: &str, text: &str) -> Result<Template, Error> {
        let trees = parse::parse(name, text, &|f| funcs::lookup(f).is_some()).map_err(|(pos, msg)| {
            let pos = pos.min(text.len());
            let line = 1 + text.get(..pos).unwrap_or("").matches('\n').count();
            if msg.starts_with("template: ") {
                Error::Parse(msg)
            } else {
                Error::Parse(format!("template: {name}:{line}: {msg}"))
            }
        })?;
        Ok(Template { name: name.to_string(), text: text.to_string(), trees })
    }

    /// Executes the template with `data` as dot.
    pub fn execute(&self, data: &Value) -> Result<String, Error> {
        // A JSON null decodes into a nil map, which reads like an empty one.
        let dot = match data {
            Value::Null => value::V::map(Default::default()),
            d => value::V::from_json(d),
        };
        exec::execute(&self.trees, &self.text, &self.name, dot).map_err(Error::Exec)
    }
}

/// Parses and executes in one step.
pub fn render(name: &str, text: &str, data: &Value) -> Result<String, Error> {
    Template::parse(name, text)?.execute(data)
}
