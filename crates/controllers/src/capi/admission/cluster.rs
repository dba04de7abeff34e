//! Cluster's webhooks (`default.cluster.cluster.x-k8s.io`, `validation.cluster…`), as
//! Cluster API v1.11 runs them. The checks that read the Cluster's ClusterClass take it as
//! found (`None`: not there) by the caller, which polls for it as upstream does.

use super::field::FieldError;
use super::review::{Review, Verdict};
use super::rules::{self, text};
use crate::capi::CORE_GROUP;
use serde_json::{json, Value};

/// The annotation that caps how many MachineDeployments upgrade at once.
const UPGRADE_CONCURRENCY: &str = "topology.cluster.x-k8s.io/upgrade-concurrency";

fn has_topology(object: &Value) -> bool {
    object
        .pointer("/spec/topology")
        .is_some_and(|t| t.as_object().is_some_and(|m| !m.is_empty()))
}

/// With a topology: the version's `v` (even when empty), and a class named.
pub fn default(_review: &Review, object: &mut Value) -> Result<(), Verdict> {
    if !has_topology(object) {
        return Ok(());
    }
    rules::default_version(object, "/spec/topology/version", true);
    if text(object, "/spec/topology/classRef/name").is_empty() {
        return Err(Verdict::of(
            CORE_GROUP,
            "Cluster",
            vec![FieldError::required(
                "spec.topology.classRef.name",
                "cannot be empty",
            )],
        ));
    }
    Ok(())
}

/// The checks that need no ClusterClass.
pub fn validate(review: &Review) -> Vec<FieldError> {
    let object = &review.object;
    let mut errors = Vec::new();
    let name = review.object_name();
    for why in rules::label_value_errors(&name) {
        errors.push(FieldError::invalid(
            "metadata.name",
            json!(name),
            format!("must be a valid label value {why}"),
        ));
    }
    let set = |o: &Value, p: &str| {
        o.pointer(p)
            .is_some_and(|v| v.as_object().is_some_and(|m| !m.is_empty()))
    };
    if let Some(old) = &review.old {
        for (pointer, path) in [
            ("/spec/infrastructureRef", "spec.infrastructureRef"),
            ("/spec/controlPlaneRef", "spec.controlPlaneRef"),
        ] {
            if set(old, pointer) && !set(object, pointer) {
                errors.push(FieldError::forbidden(path, "cannot be removed"));
            }
        }
        if has_topology(old) && !has_topology(object) {
            errors.push(FieldError::forbidden(
                "spec.topology",
                "cannot be removed from an existing Cluster",
            ));
        }
    }
    if !set(object, "/spec/infrastructureRef")
        && !set(object, "/spec/controlPlaneRef")
        && !has_topology(object)
    {
        errors.push(FieldError::forbidden(
            "spec",
            "one of spec.controlPlaneRef, spec.infrastructureRef or spec.topology must be set",
        ));
    }
    for kind in ["pods", "services"] {
        let blocks = object
            .pointer(&format!("/spec/clusterNetwork/{kind}/cidrBlocks"))
            .and_then(Value::as_array);
        for (i, block) in blocks.into_iter().flatten().enumerate() {
            let block = block.as_str().unwrap_or("");
            if !is_cidr(block) {
                errors.push(FieldError::invalid(
                    format!("spec.clusterNetwork.{kind}.cidrBlocks[{i}]"),
                    json!(block),
                    format!("invalid CIDR address: {block}"),
                ));
            }
        }
    }
    if has_topology(object) {
        topology(review, &mut errors);
    }
    errors
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => bits <= 32,
        Ok(std::net::IpAddr::V6(_)) => bits <= 128,
        Err(_) => false,
    }
}

/// The topology's own checks: a class, a version, the upgrade concurrency; on update, a
/// version that goes neither back nor more than one minor forward.
fn topology(review: &Review, errors: &mut Vec<FieldError>) {
    let object = &review.object;
    if text(object, "/spec/topology/classRef/name").is_empty() {
        errors.push(FieldError::required(
            "spec.topology.class",
            "classRef.name cannot be empty",
        ));
        return;
    }
    let version = text(object, "/spec/topology/version");
    if !rules::is_kube_semver(version) {
        errors.push(FieldError::invalid(
            "spec.topology.version",
            json!(version),
            "version must be a valid semantic version",
        ));
    }
    let concurrency = object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(UPGRADE_CONCURRENCY))
        .and_then(Value::as_str);
    if let Some(raw) = concurrency {
        let path = format!("metadata.annotations.{UPGRADE_CONCURRENCY}");
        match raw.parse::<i64>() {
            Err(_) => errors.push(FieldError::invalid(
                &path,
                json!(raw),
                format!("could not parse the value of the annotation: strconv.Atoi: parsing {}: invalid syntax", super::field::go_quote(raw)),
            )),
            Ok(n) if n < 1 => errors.push(FieldError::invalid(&path, json!(raw), "value cannot be less than 1")),
            Ok(_) => {}
        }
    }
    if let Some(old) = &review.old {
        if !has_topology(old) {
            errors.push(FieldError::forbidden(
                "spec.topology.class",
                "classRef cannot be set on an existing Cluster",
            ));
            return;
        }
        version_change(text(old, "/spec/topology/version"), version, errors);
    }
}

fn version_change(from: &str, to: &str, errors: &mut Vec<FieldError>) {
    let (Some(a), Some(b)) = (rules::minor_of(from), rules::minor_of(to)) else {
        return;
    };
    let (from, to) = (from.trim_start_matches('v'), to.trim_start_matches('v'));
    let patch = |v: &str| {
        v.split('.')
            .nth(2)
            .and_then(|p| p.split(['-', '+']).next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let older = b < a || (b == a && patch(to) < patch(from));
    if older {
        errors.push(FieldError::invalid(
            "spec.topology.version",
            json!(format!("v{to}")),
            format!("version cannot be decreased from {:?} to {:?}", from, to),
        ));
    } else if b.0 == a.0 && b.1 >= a.1 + 2 {
        errors.push(FieldError::invalid(
            "spec.topology.version",
            json!(format!("v{to}")),
            format!("version cannot be increased from {:?} to {:?}", from, to),
        ));
    }
}

/// The checks against the Cluster's ClusterClass (`class`), or the warning that it is not
/// there yet.
pub fn against_class(
    review: &Review,
    class: Option<&Value>,
    errors: &mut Vec<FieldError>,
) -> Vec<String> {
    let object = &review.object;
    if !has_topology(object) || text(object, "/spec/topology/classRef/name").is_empty() {
        return Vec::new();
    }
    let Some(class) = class else {
        let namespace = object
            .pointer("/spec/topology/classRef/namespace")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .unwrap_or(&review.namespace);
        return vec![format!(
            "Cluster refers to ClusterClass {namespace}/{}, but this ClusterClass does not exist. Cluster topology has not been fully validated. The ClusterClass must be created to reconcile the Cluster",
            text(object, "/spec/topology/classRef/name")
        )];
    };
    let classes: Vec<&str> = class
        .pointer("/spec/workers/machineDeployments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c["class"].as_str())
        .collect();
    let class_name = class
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let topologies = object
        .pointer("/spec/topology/workers/machineDeployments")
        .and_then(Value::as_array);
    let mut names = std::collections::HashSet::new();
    for (i, md) in topologies.into_iter().flatten().enumerate() {
        let at = format!("spec.topology.workers.machineDeployments[{i}]");
        let wanted = md["class"].as_str().unwrap_or("");
        if !classes.contains(&wanted) {
            errors.push(FieldError::invalid(
                format!("{at}.class"),
                json!(wanted),
                format!("MachineDeploymentClass with name {wanted:?} does not exist in ClusterClass {class_name:?}"),
            ));
        }
        let name = md["name"].as_str().unwrap_or("");
        if name.is_empty() {
            errors.push(FieldError::required(
                format!("{at}.name"),
                "name must not be empty",
            ));
        } else if !names.insert(name.to_string()) {
            errors.push(FieldError::invalid(
                format!("{at}.name"),
                json!(name),
                format!("name must be unique. MachineDeployment with name {name:?} is defined more than once"),
            ));
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(object: Value, old: Option<Value>) -> Review {
        Review::of("c1", object, old)
    }

    fn cluster(version: &str) -> Value {
        json!({"metadata": {"name": "c1"}, "spec": {"topology": {
            "classRef": {"name": "quick-start"}, "version": version,
            "workers": {"machineDeployments": [{"class": "default-worker", "name": "md-0"},
                                                {"class": "gpu", "name": "md-0"}]}}}})
    }

    #[test]
    fn a_topology_gets_its_v_and_is_checked_against_its_class() {
        let mut object = cluster("1.31.0");
        default(&review(object.clone(), None), &mut object).unwrap();
        assert_eq!(object["spec"]["topology"]["version"], "v1.31.0");
        let r = review(object, None);
        assert!(validate(&r).is_empty());
        let class = json!({"metadata": {"name": "quick-start"},
            "spec": {"workers": {"machineDeployments": [{"class": "default-worker"}]}}});
        let mut errors = Vec::new();
        against_class(&r, Some(&class), &mut errors);
        let texts: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(texts, [
            "spec.topology.workers.machineDeployments[1].class: Invalid value: \"gpu\": MachineDeploymentClass with name \"gpu\" does not exist in ClusterClass \"quick-start\"",
            "spec.topology.workers.machineDeployments[1].name: Invalid value: \"md-0\": name must be unique. MachineDeployment with name \"md-0\" is defined more than once",
        ]);
        let warnings = against_class(&r, None, &mut Vec::new());
        assert!(warnings[0].starts_with("Cluster refers to ClusterClass default/quick-start, but this ClusterClass does not exist"));
    }

    #[test]
    fn versions_move_forward_one_minor_at_a_time() {
        let old = cluster("v1.31.0");
        let texts = |new: &str| -> Vec<String> {
            validate(&review(cluster(new), Some(old.clone())))
                .iter()
                .map(|e| e.to_string())
                .collect()
        };
        assert!(texts("v1.32.0").is_empty());
        assert_eq!(texts("v1.30.0"), ["spec.topology.version: Invalid value: \"v1.30.0\": version cannot be decreased from \"1.31.0\" to \"1.30.0\""]);
        assert_eq!(texts("v1.33.0"), ["spec.topology.version: Invalid value: \"v1.33.0\": version cannot be increased from \"1.31.0\" to \"1.33.0\""]);
        let no_class = json!({"metadata": {"name": "c1"}, "spec": {"topology": {"version": "v1.31.0", "classRef": {"name": ""}}}});
        assert_eq!(
            default(&review(no_class.clone(), None), &mut no_class.clone()).unwrap_err(),
            Verdict::of(
                CORE_GROUP,
                "Cluster",
                vec![FieldError::required(
                    "spec.topology.classRef.name",
                    "cannot be empty"
                )]
            )
        );
        let bare = json!({"metadata": {"name": "c1"}, "spec": {}});
        assert_eq!(validate(&review(bare, None))[0].to_string(),
                   "spec: Forbidden: one of spec.controlPlaneRef, spec.infrastructureRef or spec.topology must be set");
    }
}
