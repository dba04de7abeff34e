//! Strategic merge patch, as kube-apiserver applies it to the built-in kinds: maps merge,
//! `null` deletes, lists with a merge key merge item by item, lists with the merge strategy
//! union their primitive values, every other list is replaced; plus the `$patch`,
//! `$retainKeys`, `$setElementOrder/…` and `$deleteFromPrimitiveList/…` directives.
//!
//! The merge keys are those of the Kubernetes Go types' `patchMergeKey` / `patchStrategy`
//! tags. No Rust crate carries them as data (k8s-openapi encodes server-side-apply list types
//! in code, which differ: ports are keyed by port and protocol there, by port alone here), so
//! the table below states them, keyed by field name and, where a name is ambiguous, by its
//! parent field.

use serde_json::{Map, Value};

/// How a list field merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// Items are objects matched by this key.
    Key(&'static str),
    /// Primitive values, unioned.
    Union,
    /// Replaced whole.
    Replace,
}

/// The strategy of list field `name` whose parent field is `parent`.
pub fn list_key(parent: &str, name: &str) -> ListKind {
    strategy(parent, name)
}

fn strategy(parent: &str, name: &str) -> ListKind {
    use ListKind::*;
    match (parent, name) {
        ("containers" | "initContainers" | "ephemeralContainers", "ports") => Key("containerPort"),
        ("spec", "ports") => Key("port"),
        (_, "containers" | "initContainers" | "ephemeralContainers") => Key("name"),
        (_, "volumes" | "imagePullSecrets" | "env" | "resourceClaims" | "schedulingGates") => {
            Key("name")
        }
        (_, "volumeMounts") => Key("mountPath"),
        (_, "volumeDevices") => Key("devicePath"),
        (_, "hostAliases" | "podIPs" | "hostIPs") => Key("ip"),
        (_, "topologySpreadConstraints") => Key("topologyKey"),
        (_, "conditions") => Key("type"),
        ("status", "addresses") => Key("type"),
        ("metadata", "ownerReferences") => Key("uid"),
        ("metadata", "finalizers") => Union,
        ("spec", "finalizers") => Union,
        _ => Replace,
    }
}

/// Applies `patch` to `target` (both JSON objects of a built-in kind).
pub fn apply(target: &mut Value, patch: &Value) -> Result<(), String> {
    merge_value(target, patch, "")
}

fn merge_value(target: &mut Value, patch: &Value, parent: &str) -> Result<(), String> {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => merge_map(t, p, parent),
        _ => {
            *target = strip_directives(patch);
            Ok(())
        }
    }
}

/// A patch value without directive keys, for places where it is copied in whole.
fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

fn merge_map(
    target: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    _parent: &str,
) -> Result<(), String> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            *target = match strip_directives(&Value::Object(patch.clone())) {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            return Ok(());
        }
        Some("delete") => {
            target.clear();
            return Ok(());
        }
        Some(other) => return Err(format!("unknown patch type: {other:?}")),
        None => {}
    }
    if let Some(keys) = patch.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = keys.iter().filter_map(Value::as_str).collect();
        target.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (key, value) in patch {
        if key.starts_with('$') {
            continue;
        }
        if value.is_null() {
            target.remove(key);
            continue;
        }
        match value {
            Value::Array(items) => {
                let current = target.remove(key).unwrap_or(Value::Array(Vec::new()));
                let merged = merge_list(current, items, _parent, key)?;
                target.insert(key.clone(), merged);
            }
            Value::Object(_) => {
                let slot = target
                    .entry(key.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                merge_value(slot, value, key)?;
            }
            scalar => {
                target.insert(key.clone(), scalar.clone());
            }
        }
    }
    // Directives about sibling lists.
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(remove)) =
                (target.get_mut(field), value.as_array())
            {
                list.retain(|v| !remove.contains(v));
            }
        }
    }
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$setElementOrder/") {
            let strategy = strategy(_parent, field);
            if let (Some(Value::Array(list)), Some(order)) =
                (target.get_mut(field), value.as_array())
            {
                reorder(list, order, strategy);
            }
        }
    }
    Ok(())
}

fn merge_list(current: Value, patch: &[Value], parent: &str, name: &str) -> Result<Value, String> {
    let mut current = match current {
        Value::Array(a) => a,
        _ => Vec::new(),
    };
    match strategy(parent, name) {
        ListKind::Replace => Ok(Value::Array(patch.iter().map(strip_directives).collect())),
        ListKind::Union => {
            for v in patch {
                if !current.contains(v) {
                    current.push(v.clone());
                }
            }
            Ok(Value::Array(current))
        }
        ListKind::Key(key) => {
            for item in patch {
                let Some(obj) = item.as_object() else {
                    return Err(format!(
                        "{name}: list items must be objects to merge by {key:?}"
                    ));
                };
                if obj.get("$patch").and_then(Value::as_str) == Some("replace") {
                    // The whole list is replaced by the patch's items.
                    return Ok(Value::Array(
                        patch
                            .iter()
                            .filter(|i| i.get("$patch").is_none())
                            .map(strip_directives)
                            .collect(),
                    ));
                }
                let id = obj.get(key).cloned();
                let position = id
                    .as_ref()
                    .and_then(|id| current.iter().position(|c| c.get(key) == Some(id)));
                if obj.get("$patch").and_then(Value::as_str) == Some("delete") {
                    if let Some(i) = position {
                        current.remove(i);
                    }
                    continue;
                }
                match position {
                    Some(i) => merge_value(&mut current[i], item, name)?,
                    None => current.push(strip_directives(item)),
                }
            }
            Ok(Value::Array(current))
        }
    }
}

/// Orders a list as `$setElementOrder` says; items it does not name keep their place after.
fn reorder(list: &mut Vec<Value>, order: &[Value], strategy: ListKind) {
    let id = |v: &Value| match strategy {
        ListKind::Key(k) => v.get(k).cloned(),
        _ => Some(v.clone()),
    };
    let wanted: Vec<Value> = order.iter().filter_map(&id).collect();
    let mut ordered = Vec::with_capacity(list.len());
    for w in &wanted {
        if let Some(i) = list.iter().position(|v| id(v).as_ref() == Some(w)) {
            ordered.push(list.remove(i));
        }
    }
    ordered.append(list);
    *list = ordered;
}

#[cfg(test)]
mod tests {
    use super::apply;
    use serde_json::json;

    #[test]
    fn containers_merge_by_name_and_env_by_name() {
        let mut d = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "web", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]},
            {"name": "side", "image": "busybox"}
        ]}}}});
        apply(
            &mut d,
            &json!({"spec": {"template": {"spec": {"containers": [
                {"name": "web", "image": "nginx:2", "env": [{"name": "B", "value": "2"}]}
            ]}}}}),
        )
        .unwrap();
        let c = &d["spec"]["template"]["spec"]["containers"];
        assert_eq!(c[0]["image"], "nginx:2");
        assert_eq!(
            c[0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
        );
        assert_eq!(c[1]["name"], "side");
    }

    #[test]
    fn directives_delete_replace_and_order() {
        let mut p = json!({"metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
                           "spec": {"containers": [{"name": "a"}, {"name": "b"}], "tolerations": [{"key": "t"}]}});
        apply(
            &mut p,
            &json!({
                "metadata": {"labels": {"a": null}, "finalizers": ["y"]},
                "spec": {"containers": [{"name": "a", "$patch": "delete"}, {"name": "c"}],
                         "$setElementOrder/containers": [{"name": "c"}, {"name": "b"}],
                         "tolerations": [{"key": "u"}]}
            }),
        )
        .unwrap();
        assert_eq!(p["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(p["metadata"]["finalizers"], json!(["x", "y"]));
        assert_eq!(
            p["spec"]["containers"],
            json!([{"name": "c"}, {"name": "b"}])
        );
        assert_eq!(
            p["spec"]["tolerations"],
            json!([{"key": "u"}]),
            "lists without a strategy are replaced"
        );
        apply(
            &mut p,
            &json!({"metadata": {"labels": {"$patch": "replace", "z": "9"}}}),
        )
        .unwrap();
        assert_eq!(p["metadata"]["labels"], json!({"z": "9"}));
        apply(
            &mut p,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}),
        )
        .unwrap();
        assert_eq!(p["metadata"]["finalizers"], json!(["y"]));
    }

    #[test]
    fn service_and_container_ports_use_their_own_keys() {
        let mut s = json!({"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}});
        apply(
            &mut s,
            &json!({"spec": {"ports": [{"port": 443, "targetPort": 8443}]}}),
        )
        .unwrap();
        assert_eq!(
            s["spec"]["ports"][1],
            json!({"port": 443, "name": "https", "targetPort": 8443})
        );
        let mut p =
            json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80}]}]}});
        apply(
            &mut p,
            &json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 81}]}]}}),
        )
        .unwrap();
        assert_eq!(
            p["spec"]["containers"][0]["ports"],
            json!([{"containerPort": 80}, {"containerPort": 81}])
        );
    }
}
