//! The cluster templates in `deploy/infrastructure-in-memory/v0.1.0`, built in, and the `${VAR}` substitution
//! clusterctl applies to them (`${VAR}`, and `${VAR:=default}` or `${VAR:-default}`).

use infrasim_kube_api::values::At;
use std::collections::HashMap;

/// The ClusterClass `in-memory` and its templates.
pub const CLUSTERCLASS_IN_MEMORY: &str =
    include_str!("../../../../deploy/infrastructure-in-memory/v0.1.0/clusterclass-in-memory.yaml");
/// A Cluster of ClusterClass `in-memory`.
pub const CLUSTER_IN_MEMORY: &str = include_str!(
    "../../../../deploy/infrastructure-in-memory/v0.1.0/cluster-template-in-memory.yaml"
);
/// A Cluster without a class, with the seed's InMemory kinds.
pub const CLUSTER_IN_MEMORY_DEVELOPMENT: &str =
    include_str!("../../../../deploy/infrastructure-in-memory/v0.1.0/cluster-template-in-memory-development.yaml");

/// A variable the template needs and nobody set.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("variable {0} is required by the template and not set")]
pub struct MissingVariable(pub String);

/// Replaces `${NAME}` with `vars[NAME]`, and `${NAME:=default}` / `${NAME:-default}` with the
/// value or the default.
pub fn substitute(text: &str, vars: &HashMap<String, String>) -> Result<String, MissingVariable> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let inner = &after[..end];
        let (name, default) = match inner.find([':', '=', '-']) {
            Some(i) => {
                let op_end = if inner[i..].starts_with(":=") || inner[i..].starts_with(":-") {
                    i + 2
                } else {
                    i + 1
                };
                (&inner[..i], Some(&inner[op_end..]))
            }
            None => (inner, None),
        };
        match (vars.get(name), default) {
            (Some(v), _) if !v.is_empty() => out.push_str(v),
            (_, Some(d)) => out.push_str(d),
            (Some(v), None) => out.push_str(v),
            (None, None) => return Err(MissingVariable(name.to_string())),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The YAML documents of a multi-document text, as JSON values (empty documents skipped).
pub fn documents(text: &str) -> Result<Vec<serde_json::Value>, serde_yaml::Error> {
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let value: serde_json::Value = serde::Deserialize::deserialize(doc)?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

/// Server-side applies every document of `yaml` (in `namespace` unless a document names
/// one) under `manager`, as `kubectl apply --server-side --force-conflicts` would.
pub async fn apply(
    client: &kube::Client,
    yaml: &str,
    namespace: &str,
    manager: &str,
) -> Result<(), ApplyError> {
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
    for mut doc in documents(yaml)? {
        let field = |p: &str| {
            doc.at(p)
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
        };
        let (Some(api_version), Some(kind), Some(name)) = (
            field("/apiVersion"),
            field("/kind"),
            field("/metadata/name"),
        ) else {
            return Err(ApplyError::Incomplete);
        };
        let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, version, &kind),
            &crate::capi::standin::objects::plural(&kind),
        );
        let ns = field("/metadata/namespace").unwrap_or_else(|| namespace.to_string());
        doc["metadata"]["namespace"] = serde_json::json!(ns);
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
        api.patch(
            &name,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(&doc),
        )
        .await
        .map_err(|source| ApplyError::Kube { kind, name, source })?;
    }
    Ok(())
}

/// Why a template could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(transparent)]
    Yaml(#[from] serde_yaml::Error),
    #[error("a document lacks apiVersion, kind or metadata.name")]
    Incomplete,
    #[error("applying {kind} {name}: {source}")]
    Kube {
        kind: String,
        name: String,
        source: kube::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_and_defaults() {
        let vars = HashMap::from([("CLUSTER_NAME".to_string(), "c1".to_string())]);
        assert_eq!(
            substitute("name: ${CLUSTER_NAME}", &vars).unwrap(),
            "name: c1"
        );
        assert_eq!(
            substitute("n: ${N:=3}, m: ${M:-x}", &vars).unwrap(),
            "n: 3, m: x"
        );
        assert_eq!(
            substitute("cidr: ${POD_CIDR:=[\"192.168.0.0/16\"]}", &vars).unwrap(),
            "cidr: [\"192.168.0.0/16\"]"
        );
        assert_eq!(
            substitute("${NOPE}", &vars),
            Err(MissingVariable("NOPE".into()))
        );
    }

    #[test]
    fn the_built_in_templates_parse_after_substitution() {
        let vars = HashMap::from([("CLUSTER_NAME".to_string(), "c1".to_string())]);
        for t in [
            CLUSTERCLASS_IN_MEMORY,
            CLUSTER_IN_MEMORY,
            CLUSTER_IN_MEMORY_DEVELOPMENT,
        ] {
            let docs = documents(&substitute(t, &vars).unwrap()).unwrap();
            assert!(docs.iter().all(|d| d["kind"].is_string()), "{docs:?}");
        }
        let cluster = &documents(&substitute(CLUSTER_IN_MEMORY, &vars).unwrap()).unwrap()[0];
        assert_eq!(cluster["spec"]["topology"]["controlPlane"]["replicas"], 1);
        assert_eq!(
            cluster["spec"]["clusterNetwork"]["pods"]["cidrBlocks"][0],
            "192.168.0.0/16"
        );
    }
}
