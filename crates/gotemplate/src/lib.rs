//! Go's `text/template`, evaluated over JSON data the way Go sees JSON decoded into
//! `interface{}` (objects are maps, numbers `float64`), with the hermetic sprig functions.
//!
//! Cluster API renders a ClusterClass's `enabledIf` and `valueFrom.template` with Go's
//! engine and sprig's `HermeticTxtFuncMap`; this crate renders the same strings the same
//! way so that upstream ClusterClasses run unchanged. `tests/go_oracle.rs` holds it to that:
//! it builds a small Go program (tests/gotemplate) on Debian's Go and sprig 3.2.3 and
//! requires identical output over a corpus of cases.
//!
//! # Why not the `gtmpl` crate
//!
//! `gtmpl` (0.7.1, the newest release `cargo info` reports) implements the template
//! language, but its function table (`src/funcs.rs`) has only Go's builtins: none of
//! sprig's functions (`default`, `semverCompare`, `regexReplaceAll`, ...) that ClusterClasses
//! call, and its values are its own type rather than Go's JSON types, on which printing
//! (`6443`, `1e+06`), comparison (`eq` of `float64` and `int` is an error) and argument
//! checks depend.
//!
//! # Language
//!
//! Text and actions, `{{-`/`-}}` trimming, comments, pipelines, variables (`:=`, `=`, `$`),
//! field chains on maps (a missing key is "no value", printed `<no value>`), literals with
//! Go's escapes and number syntax, `if`/`else if`, `range` (slices, maps in key order,
//! integers, `break`/`continue`), `with`/`else with`, `define`/`template`/`block`, and the
//! builtins `and or not len index print printf println eq ne lt le gt ge html js urlquery
//! call` (sprig's `slice` replaces the builtin one, as `Funcs` does in Go). `printf` follows
//! Go's `fmt` for the verbs `v s q d t f F e E g G x X o O b c U T %` with flags, width,
//! precision, `*` and `[n]`, and its `%!verb(...)` notes; `%x` on floats and `%#v` are not
//! implemented. The oracle runs Go 1.19; `else with` (Go 1.23) and ranging over an integer
//! (Go 1.22) follow the newer Go that Cluster API is built with.
//!
//! # Sprig functions not implemented
//!
//! Of `HermeticTxtFuncMap` (sprig 3.2.3), these are absent and fail to parse as undefined
//! functions: dates and durations (`ago`, `duration`, `durationRound`, `toDate`,
//! `mustToDate`, `unixEpoch`, `must_date_modify`, `mustDateModify`), decimal float
//! arithmetic (`add1f`, `addf`, `subf`, `mulf`, `divf`), `merge`, `mergeOverwrite`,
//! `mustMerge`, `mustMergeOverwrite`, word-case helpers (`abbrevboth`, `initials`, `wrap`,
//! `wrapWith`, `swapcase`, `camelcase`, `kebabcase`, `snakecase`, `shuffle`), `randInt`,
//! `urlParse`, `urlJoin`, and the crypto functions (`bcrypt`, `htpasswd`, `derivePassword`,
//! `genPrivateKey`, `genCA`, `genCAWithKey`, `genSelfSignedCert`, `genSelfSignedCertWithKey`,
//! `genSignedCert`, `genSignedCertWithKey`, `buildCustomCert`, `encryptAES`, `decryptAES`).
//! `env`, `expandenv` and the other non-hermetic functions are not in that map at all.
//! `keys` and `values` return map order sorted by key, where Go's is random.

use serde_json::Value;

mod exec;
mod fmt;
mod funcs;
mod lex;
mod parse;
mod semver;
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
        let trees =
            parse::parse(name, text, &|f| funcs::lookup(f).is_some()).map_err(|(pos, msg)| {
                let pos = pos.min(text.len());
                let line = 1 + text.get(..pos).unwrap_or("").matches('\n').count();
                if msg.starts_with("template: ") {
                    Error::Parse(msg)
                } else {
                    Error::Parse(format!("template: {name}:{line}: {msg}"))
                }
            })?;
        Ok(Template {
            name: name.to_string(),
            text: text.to_string(),
            trees,
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r(t: &str, d: serde_json::Value) -> String {
        render("tpl", t, &d).unwrap_or_else(|e| format!("ERR {e}"))
    }

    #[test]
    fn cluster_api_examples() {
        assert_eq!(
            r("{{ if .sshKey }}true{{end}}", json!({"sshKey": "k"})),
            "true"
        );
        assert_eq!(
            r(
                "host: '{{ .controlPlaneIpAddr }}'\nport: {{ .controlPlanePort }}",
                json!({"controlPlaneIpAddr": "10.0.0.1", "controlPlanePort": 6443})
            ),
            "host: '10.0.0.1'\nport: 6443"
        );
        assert_eq!(
            r(
                "kindest/node:{{ .v | replace \"+\" \"_\" }}",
                json!({"v": "v1.27.1+k3s1"})
            ),
            "kindest/node:v1.27.1_k3s1"
        );
        assert_eq!(
            r(
                "{{ semverCompare \">= v1.24.0-0\" .v }}",
                json!({"v": "v1.28.0"})
            ),
            "true"
        );
        assert_eq!(
            r(
                "{{- range $i, $e := .l }}{{ $i }}={{ $e }}{{ end -}}",
                json!({"l": ["a", "b"]})
            ),
            "0=a1=b"
        );
        assert_eq!(
            r("{{ .missing }}|{{ .missing.deeper }}", json!({})),
            "<no value>|<no value>"
        );
        assert_eq!(
            r("{{ .m }}", json!({"m": {"b": 1e6, "a": [0.5, null]}})),
            "map[a:[0.5 <nil>] b:1e+06]"
        );
    }

    #[test]
    fn newer_go_features() {
        assert_eq!(
            r(
                "{{ with .a }}a{{ else with .b }}{{ . }}{{ else }}none{{ end }}",
                json!({"b": "B"})
            ),
            "B"
        );
        assert_eq!(
            r(
                "{{ with .a }}a{{ else with .b }}b{{ else }}none{{ end }}",
                json!({})
            ),
            "none"
        );
        assert_eq!(r("{{ range 3 }}{{ . }}{{ end }}", json!({})), "012");
    }

    #[test]
    fn errors_use_go_wording() {
        let e = r("{{ foo }}", json!({}));
        assert_eq!(e, "ERR template: tpl:1: function \"foo\" not defined");
        let e = r("{{ .a.b }}", json!({"a": null}));
        assert!(
            e.starts_with("ERR template: tpl:1:3: executing \"tpl\" at <.a.b>: nil pointer"),
            "{e}"
        );
        assert!(
            r("{{ eq .p 6443 }}", json!({"p": 6443})).contains("incompatible types for comparison")
        );
    }
}
