//! `pods/{name}/ephemeralcontainers`: the one way to add a container to a pod that exists
//! (what `kubectl debug` uses). A write through it changes the pod's
//! `spec.ephemeralContainers` and nothing else; containers once added are never changed or
//! removed, their names are unique among all of the pod's containers, and they take none of
//! the fields that only make sense for a container the pod was started with.

use serde_json::Value;

/// The fields an ephemeral container may not set (kube-apiserver's validation forbids them).
const FORBIDDEN: &[&str] = &[
    "ports",
    "resources",
    "lifecycle",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "resizePolicy",
    "restartPolicy",
];

/// The pod as stored with the incoming `spec.ephemeralContainers` (and the incoming
/// `resourceVersion`, for the precondition, and `managedFields`, which the write path
/// recomputed for the change): everything else is the stored pod's.
pub(crate) fn prepare_for_update(old: &Value, new: &Value) -> Value {
    let mut out = old.clone();
    match new.pointer("/spec/ephemeralContainers") {
        Some(list) if !list.is_null() => out["spec"]["ephemeralContainers"] = list.clone(),
        _ => {
            if let Some(spec) = out.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("ephemeralContainers");
            }
        }
    }
    for field in ["resourceVersion", "managedFields"] {
        if let Some(v) = new.pointer(&format!("/metadata/{field}")) {
            out["metadata"][field] = v.clone();
        }
    }
    out
}

/// The checks of the change, as `(field, message)` causes.
pub(crate) fn validate_update(old: &Value, new: &Value) -> Vec<(String, String)> {
    let list = |v: &Value, key: &str| -> Vec<Value> {
        v.pointer(&format!("/spec/{key}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let name = |c: &Value| c["name"].as_str().unwrap_or("").to_string();
    let (before, after) = (
        list(old, "ephemeralContainers"),
        list(new, "ephemeralContainers"),
    );
    let mut causes = Vec::new();
    for kept in &before {
        match after.iter().find(|c| name(c) == name(kept)) {
            Some(now) if now == kept => {}
            _ => causes.push((
                "spec.ephemeralContainers".to_string(),
                format!(
                    "Forbidden: existing ephemeral containers {:?} may not be removed or changed",
                    name(kept)
                ),
            )),
        }
    }
    let mut names: Vec<String> = list(new, "containers")
        .iter()
        .chain(list(new, "initContainers").iter())
        .map(name)
        .collect();
    for (i, c) in after.iter().enumerate() {
        let path = format!("spec.ephemeralContainers[{i}]");
        let n = name(c);
        if n.is_empty() {
            causes.push((format!("{path}.name"), "Required value".into()));
        } else if names.contains(&n) {
            causes.push((format!("{path}.name"), format!("Duplicate value: {n:?}")));
        }
        names.push(n);
        if c["image"].as_str().unwrap_or("").is_empty() {
            causes.push((format!("{path}.image"), "Required value".into()));
        }
        for field in FORBIDDEN {
            if c.get(*field)
                .is_some_and(|v| !v.is_null() && v != &serde_json::json!({}))
            {
                causes.push((
                    format!("{path}.{field}"),
                    "Forbidden: cannot be set for an Ephemeral Container".into(),
                ));
            }
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(ephemeral: Value) -> Value {
        json!({"metadata": {"name": "p", "resourceVersion": "1"}, "spec": {
            "containers": [{"name": "app", "image": "nginx"}], "ephemeralContainers": ephemeral}})
    }

    #[test]
    fn only_the_ephemeral_containers_change() {
        let old = pod(json!([]));
        let mut new = pod(json!([{"name": "debug", "image": "busybox"}]));
        new["spec"]["containers"][0]["image"] = json!("evil");
        new["metadata"]["labels"] = json!({"x": "y"});
        let out = prepare_for_update(&old, &new);
        assert_eq!(out["spec"]["containers"][0]["image"], "nginx");
        assert_eq!(out["metadata"].get("labels"), None);
        assert_eq!(out["spec"]["ephemeralContainers"][0]["name"], "debug");
    }

    #[test]
    fn existing_ones_stay_and_names_are_unique() {
        let old = pod(json!([{"name": "debug", "image": "busybox"}]));
        let removed = pod(json!([]));
        assert_eq!(
            validate_update(&old, &removed)[0].0,
            "spec.ephemeralContainers"
        );
        let clash =
            pod(json!([{"name": "debug", "image": "busybox"}, {"name": "app", "image": "x"}]));
        assert_eq!(
            validate_update(&old, &clash),
            vec![(
                "spec.ephemeralContainers[1].name".to_string(),
                "Duplicate value: \"app\"".to_string()
            )]
        );
        let ported = pod(json!([{"name": "debug", "image": "busybox"},
                                {"name": "d2", "image": "x", "ports": [{"containerPort": 80}]}]));
        assert_eq!(
            validate_update(&old, &ported)[0].0,
            "spec.ephemeralContainers[1].ports"
        );
        let fine =
            pod(json!([{"name": "debug", "image": "busybox"}, {"name": "d2", "image": "x"}]));
        assert!(validate_update(&old, &fine).is_empty());
    }
}
