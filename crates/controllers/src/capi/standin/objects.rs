//! The objects Cluster API refers to by contract: resolving `{apiGroup, kind}` to a served
//! version through the CRD's contract label, reading and patching such objects, owner
//! references, and cloning an object from its template, as the core does for any provider.

use super::merge_patch;
use crate::capi::core::{ContractRef, TemplateRef};
use infrasim_kube_api::values::At;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// Annotations a clone carries to name its template.
pub const CLONED_FROM_NAME: &str = "cluster.x-k8s.io/cloned-from-name";
pub const CLONED_FROM_GROUPKIND: &str = "cluster.x-k8s.io/cloned-from-groupkind";

/// Errors resolving or reading referenced objects.
#[derive(Debug, thiserror::Error)]
pub enum RefError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error(
        "the CRD of {kind}.{group} carries no cluster.x-k8s.io/v1beta2 or v1beta1 contract label"
    )]
    NoContract { group: String, kind: String },
}

/// Cluster API's pluralization of a kind, enough for the kinds it meets.
pub fn plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    if lower.ends_with('s')
        || lower.ends_with("sh")
        || lower.ends_with("ch")
        || lower.ends_with('x')
    {
        format!("{lower}es")
    } else if let Some(stem) = lower
        .strip_suffix('y')
        .filter(|s| !s.ends_with(['a', 'e', 'o', 'u']))
    {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

/// Resolves contract references to served versions, remembering each answer.
#[derive(Default)]
pub struct Resolver {
    known: Mutex<HashMap<(String, String), ApiResource>>,
}

impl Resolver {
    /// The resource `{group, kind}` is served as under the v1beta2 contract (or v1beta1):
    /// the highest version the CRD's contract label names.
    pub async fn resolve(
        &self,
        client: &Client,
        group: &str,
        kind: &str,
    ) -> Result<ApiResource, RefError> {
        let key = (group.to_string(), kind.to_string());
        if let Some(found) = self
            .known
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Ok(found.clone());
        }
        let plural = plural(kind);
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let crd = crds.get(&format!("{plural}.{group}")).await?;
        let labels = crd.labels();
        let versions = labels
            .get("cluster.x-k8s.io/v1beta2")
            .or_else(|| labels.get("cluster.x-k8s.io/v1beta1"))
            .ok_or_else(|| RefError::NoContract {
                group: group.to_string(),
                kind: kind.to_string(),
            })?;
        let version = versions.split('_').next_back().unwrap_or("").to_string();
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, &version, kind),
            &plural,
        );
        self.known
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, resource.clone());
        Ok(resource)
    }

    /// The Api of the object a contract reference points at, in `namespace`.
    pub async fn api(
        &self,
        client: &Client,
        namespace: &str,
        r: &ContractRef,
    ) -> Result<Api<DynamicObject>, RefError> {
        let resource = self.resolve(client, &r.api_group, &r.kind).await?;
        Ok(Api::namespaced_with(client.clone(), namespace, &resource))
    }

    /// The Api of the templates `r` names, at the version their CRD serves for the current
    /// contract: a ClusterClass written in v1beta1 names its templates' v1beta1, and the
    /// stand-in reads and clones them in the version it works in (upstream reads them at the
    /// named version, reports the class's references as outdated, and stores the same
    /// objects). A CRD with no contract label, or none at all, is read at the named version.
    pub async fn template_api(
        &self,
        client: &Client,
        namespace: &str,
        r: &TemplateRef,
    ) -> Result<Api<DynamicObject>, RefError> {
        let group = r.api_version.rsplit_once('/').map_or("", |(g, _)| g);
        match self.resolve(client, group, &r.kind).await {
            Ok(resource) => Ok(Api::namespaced_with(client.clone(), namespace, &resource)),
            Err(RefError::NoContract { .. }) => Ok(template_api(client, namespace, r)),
            Err(RefError::Kube(kube::Error::Api(e))) if e.code == 404 => {
                Ok(template_api(client, namespace, r))
            }
            Err(e) => Err(e),
        }
    }

    /// Reads the object a contract reference points at.
    pub async fn get(
        &self,
        client: &Client,
        namespace: &str,
        r: &ContractRef,
    ) -> Result<Option<DynamicObject>, RefError> {
        Ok(self
            .api(client, namespace, r)
            .await?
            .get_opt(&r.name)
            .await?)
    }
}

/// The Api of the object a template reference (with its apiVersion) points at.
pub fn template_api(client: &Client, namespace: &str, r: &TemplateRef) -> Api<DynamicObject> {
    let (group, version) = r
        .api_version
        .split_once('/')
        .unwrap_or(("", &r.api_version));
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, &r.kind),
        &plural(&r.kind),
    );
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// An owner reference to `owner`.
pub fn owner_ref<K: Resource<DynamicType = ()>>(owner: &K, controller: bool) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).to_string(),
        kind: K::kind(&()).to_string(),
        name: owner.name_any(),
        uid: owner.uid().unwrap_or_default(),
        controller: controller.then_some(true),
        block_owner_deletion: controller.then_some(true),
    }
}

/// The owner references `current` should have so that `owner` is among them (as the
/// controller, replacing any other controller, if `owner.controller`); `None` if it already is.
pub fn with_owner(
    current: &[OwnerReference],
    owner: &OwnerReference,
) -> Option<Vec<OwnerReference>> {
    let controller = owner.controller == Some(true);
    if current
        .iter()
        .any(|o| o.uid == owner.uid && (o.controller == Some(true)) == controller)
    {
        return None;
    }
    let mut next: Vec<OwnerReference> = current
        .iter()
        .filter(|o| o.uid != owner.uid && !(controller && o.controller == Some(true)))
        .cloned()
        .collect();
    next.push(owner.clone());
    Some(next)
}

/// Makes sure a referenced object carries `labels` and is owned by `owner`, with one merge
/// patch when something is missing.
pub async fn adopt(
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
    owner: &OwnerReference,
    labels: &BTreeMap<String, String>,
    drop_owner_kinds: &[&str],
) -> Result<(), kube::Error> {
    let current: Vec<OwnerReference> = obj
        .owner_references()
        .iter()
        .filter(|o| !(drop_owner_kinds.contains(&o.kind.as_str()) && o.uid != owner.uid))
        .cloned()
        .collect();
    let dropped = current.len() != obj.owner_references().len();
    let owners = with_owner(&current, owner).or_else(|| dropped.then(|| current.clone()));
    let missing: BTreeMap<&String, &String> = labels
        .iter()
        .filter(|(k, v)| obj.labels().get(*k) != Some(*v))
        .collect();
    if owners.is_none() && missing.is_empty() {
        return Ok(());
    }
    let mut patch = json!({"metadata": {}});
    if let Some(owners) = owners {
        patch["metadata"]["ownerReferences"] = json!(owners);
    }
    if !missing.is_empty() {
        patch["metadata"]["labels"] = json!(missing);
    }
    merge_patch(api, &obj.name_any(), &patch).await?;
    Ok(())
}

/// Five characters from the alphabet Kubernetes' name generator uses.
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// What a clone of a template gets besides the template's own content.
pub struct CloneSpec<'a> {
    pub name: &'a str,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub owner: Option<OwnerReference>,
    /// Changes to the cloned spec (for a control plane: replicas, version, …).
    pub spec_overrides: Option<Value>,
}

/// Clones `template` (an object whose `spec.template` holds `metadata` and `spec`) into a new
/// object of the kind the template makes (its kind without `Template`), as Cluster API clones
/// infrastructure machines and bootstrap configs. An object of that name that exists is
/// left as it is.
pub async fn clone_template(
    client: &Client,
    namespace: &str,
    template: &DynamicObject,
    clone: CloneSpec<'_>,
) -> Result<ContractRef, kube::Error> {
    let (api, object, made) = cloned_object(client, namespace, template, clone)?;
    let obj: DynamicObject = serde_json::from_value(object).map_err(kube::Error::SerdeError)?;
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e),
    }
    Ok(made)
}

/// As [`clone_template`], but made (or brought back to what the template says) by
/// server-side apply as `manager`, which so owns every field it sets: applied again with
/// what the template says later, the object loses what `manager` set before and no longer
/// does, as Cluster API's topology controller keeps the objects it makes. With `current`
/// (the object as it stands), nothing is sent when its spec says all the clone's does and
/// holds nothing `manager` set that the clone dropped.
pub async fn apply_template_clone(
    client: &Client,
    namespace: &str,
    template: &DynamicObject,
    clone: CloneSpec<'_>,
    manager: &str,
    current: Option<(&DynamicObject, &InLine)>,
) -> Result<ContractRef, kube::Error> {
    let name = clone.name.to_string();
    let (api, object, made) = cloned_object(client, namespace, template, clone)?;
    let spec = object.get("spec").cloned().unwrap_or(json!({}));
    let in_line = match current {
        Some((c, known)) => known.check(c, &api, manager, &spec).await?,
        None => false,
    };
    if !in_line {
        infrasim_controller_runtime::writes::apply(&api, &name, manager, &object).await?;
    }
    Ok(made)
}

/// The object [`clone_template`] makes, the API it goes to and a reference to it.
fn cloned_object(
    client: &Client,
    namespace: &str,
    template: &DynamicObject,
    clone: CloneSpec<'_>,
) -> Result<(Api<DynamicObject>, Value, ContractRef), kube::Error> {
    let types = template.types.clone().unwrap_or_default();
    let kind = types
        .kind
        .strip_suffix("Template")
        .unwrap_or(&types.kind)
        .to_string();
    let (group, version) = types
        .api_version
        .split_once('/')
        .unwrap_or(("", &types.api_version));
    let inner = template
        .data
        .at("/spec/template")
        .cloned()
        .unwrap_or(json!({}));
    let mut labels: BTreeMap<String, String> = inner
        .at("/metadata/labels")
        .and_then(|l| serde_json::from_value(l.clone()).ok())
        .unwrap_or_default();
    labels.extend(clone.labels);
    let mut annotations: BTreeMap<String, String> = inner
        .at("/metadata/annotations")
        .and_then(|a| serde_json::from_value(a.clone()).ok())
        .unwrap_or_default();
    annotations.extend(clone.annotations);
    annotations.insert(CLONED_FROM_NAME.into(), template.name_any());
    annotations.insert(
        CLONED_FROM_GROUPKIND.into(),
        format!("{}.{group}", types.kind),
    );
    let mut spec = inner.get("spec").cloned().unwrap_or(json!({}));
    if let Some(overrides) = clone.spec_overrides {
        json_merge(&mut spec, &overrides);
    }
    let mut metadata = json!({"name": clone.name, "namespace": namespace, "labels": labels, "annotations": annotations});
    if let Some(owner) = clone.owner {
        metadata["ownerReferences"] = json!([owner]);
    }
    let object =
        json!({"apiVersion": types.api_version, "kind": kind, "metadata": metadata, "spec": spec});
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, &kind),
        &plural(&kind),
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let made = ContractRef {
        api_group: group.to_string(),
        kind,
        name: clone.name.to_string(),
    };
    Ok((api, object, made))
}

/// Copies a template object under a new name (the topology gives each cluster its own copy of
/// the class's templates), with `labels` added and owned by `owner`. A copy that exists is
/// left as it is.
pub async fn copy_template(
    client: &Client,
    namespace: &str,
    source: &DynamicObject,
    name: &str,
    labels: &BTreeMap<String, String>,
    owner: OwnerReference,
    manager: &str,
) -> Result<TemplateRef, kube::Error> {
    let types = source.types.clone().unwrap_or_default();
    let (group, version) = types
        .api_version
        .split_once('/')
        .unwrap_or(("", &types.api_version));
    let mut all_labels: BTreeMap<String, String> = source.labels().clone();
    all_labels.extend(labels.clone());
    let annotations = BTreeMap::from([
        (CLONED_FROM_NAME.to_string(), source.name_any()),
        (
            CLONED_FROM_GROUPKIND.to_string(),
            format!("{}.{group}", types.kind),
        ),
    ]);
    let object = json!({
        "apiVersion": types.api_version, "kind": types.kind,
        "metadata": {"name": name, "namespace": namespace, "labels": all_labels,
                     "annotations": annotations, "ownerReferences": [owner]},
        "spec": source.data.get("spec").cloned().unwrap_or(json!({})),
    });
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, &types.kind),
        &plural(&types.kind),
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    // Made by server-side apply, so the manager's managedFields say what it set (see
    // [`dropped_from`]).
    infrasim_controller_runtime::writes::apply(&api, name, manager, &object).await?;
    Ok(TemplateRef {
        api_version: types.api_version,
        kind: types.kind,
        name: name.to_string(),
    })
}

/// How many objects [`InLine`] remembers at most (ten thousand clusters' topology objects).
const IN_LINE_KEPT: usize = 100_000;

/// The objects found in line with what their manager would apply (their spec says all of
/// it, and holds nothing it set and dropped), by UID: the resourceVersion seen and a hash of
/// the spec checked. A cached object carries no managedFields, so checking one means reading
/// it afresh; this spares that read until the object or what is wanted of it changes.
#[derive(Default)]
pub struct InLine(Mutex<HashMap<String, (String, u64)>>);

impl InLine {
    /// Whether `current` is in line with `wanted` (its spec) for `manager`.
    pub async fn check(
        &self,
        current: &DynamicObject,
        api: &Api<DynamicObject>,
        manager: &str,
        wanted: &Value,
    ) -> Result<bool, kube::Error> {
        if !covers(current.data.get("spec"), wanted) {
            return Ok(false);
        }
        let uid = current.metadata.uid.clone().unwrap_or_default();
        let rv = current
            .metadata
            .resource_version
            .clone()
            .unwrap_or_default();
        let hash = infrasim_controller_runtime::triggers::hash(wanted.to_string()).unwrap_or(0);
        let seen = self.lock().get(&uid) == Some(&(rv.clone(), hash));
        if seen {
            return Ok(true);
        }
        let fresh = match current.metadata.managed_fields {
            Some(_) => Some(current.clone()),
            None => api.get_opt(&current.name_any()).await?,
        };
        let ok = fresh.is_some_and(|f| !dropped_from(&f, manager, wanted));
        if ok {
            let mut known = self.lock();
            // Deleted objects are never taken out one by one: the memory is bounded by
            // starting over now and then (each object is then read afresh once).
            if known.len() >= IN_LINE_KEPT {
                known.clear();
            }
            known.insert(uid, (rv, hash));
        }
        Ok(ok)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, u64)>> {
        // The map holds no invariant a panic halfway could break.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Whether `manager` set (by server-side apply) a field of `object`'s spec that `wanted`
/// (the spec it would set now) no longer has: what a patch stopped setting. Read from the
/// manager's managedFields entry; a list, set or map it owns whole counts as one field.
pub fn dropped_from(object: &DynamicObject, manager: &str, wanted: &Value) -> bool {
    let entries = object
        .metadata
        .managed_fields
        .as_deref()
        .unwrap_or_default();
    let Some(fields) = entries
        .iter()
        .find(|e| e.manager.as_deref() == Some(manager) && e.operation.as_deref() == Some("Apply"))
        .and_then(|e| e.fields_v1.as_ref())
        .and_then(|f| f.0.get("f:spec"))
    else {
        return false;
    };
    let mut owned = Vec::new();
    owned_leaves(fields, &mut Vec::new(), &mut owned);
    owned
        .iter()
        .any(|path| path.iter().try_fold(wanted, |v, key| v.get(key)).is_none())
}

/// The paths (`f:` keys, without the prefix) of the leaves of a `fieldsV1` tree; a node
/// whose members are list items or map keys (`k:`, `v:`, `i:`) is a leaf itself.
fn owned_leaves(node: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let children: Vec<(&String, &Value)> = node
        .as_object()
        .map(|o| o.iter().filter(|(k, _)| k.as_str() != ".").collect())
        .unwrap_or_default();
    let itemized = children.iter().any(|(k, _)| !k.starts_with("f:"));
    if children.is_empty() || itemized {
        out.push(path.clone());
        return;
    }
    for (key, child) in children {
        path.push(key.trim_start_matches("f:").to_string());
        owned_leaves(child, path, out);
        path.pop();
    }
}

/// Whether `have` already says everything `wanted` says (so no write is sent): fields it
/// adds (defaults the API server filled in, in a list's items too) do not count.
pub fn covers(have: Option<&Value>, wanted: &Value) -> bool {
    match (have, wanted) {
        (Some(Value::Object(have)), Value::Object(wanted)) => {
            wanted.iter().all(|(k, v)| covers(have.get(k), v))
        }
        (Some(Value::Array(have)), Value::Array(wanted)) => {
            have.len() == wanted.len() && have.iter().zip(wanted).all(|(h, w)| covers(Some(h), w))
        }
        (Some(have), wanted) => have == wanted,
        (None, _) => false,
    }
}

/// RFC 7386 merge of `patch` into `target`.
pub fn json_merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    json_merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

/// `status.initialization.<field>` under the v1beta2 contract, or `status.<v1beta1>`.
pub fn contract_flag(obj: &DynamicObject, v1beta2: &str, v1beta1: &str) -> bool {
    obj.data
        .at(&format!("/status/initialization/{v1beta2}"))
        .or_else(|| obj.data.at(&format!("/status/{v1beta1}")))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_the_manager_applied_and_the_template_dropped_is_found() {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate",
            "metadata": {"name": "t", "managedFields": [
                {"manager": "capi-topology", "operation": "Apply", "apiVersion": "v1",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:template": {"f:spec": {
                     "f:files": {}, "f:users": {"k:{\"name\":\"a\"}": {".": {}}},
                     "f:joinConfiguration": {"f:nodeRegistration": {"f:name": {}}}}}}}},
                {"manager": "someone", "operation": "Update", "apiVersion": "v1",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:extra": {}}}}]},
            "spec": {},
        }))
        .expect("an object");
        let everything = json!({"template": {"spec": {
            "files": [], "users": [{"name": "a"}],
            "joinConfiguration": {"nodeRegistration": {"name": "n"}}}}});
        assert!(!dropped_from(&object, "capi-topology", &everything));
        let mut no_files = everything.clone();
        no_files["template"]["spec"]
            .as_object_mut()
            .map(|s| s.remove("files"));
        assert!(dropped_from(&object, "capi-topology", &no_files));
        // A keyed list is owned as one field; another manager's fields do not count.
        let mut no_users = everything.clone();
        no_users["template"]["spec"]
            .as_object_mut()
            .map(|s| s.remove("users"));
        assert!(dropped_from(&object, "capi-topology", &no_users));
        assert!(!dropped_from(&object, "someone", &everything));
    }

    #[test]
    fn plurals_as_cluster_api_derives_crd_names() {
        assert_eq!(plural("DevCluster"), "devclusters");
        assert_eq!(plural("KubeadmControlPlane"), "kubeadmcontrolplanes");
        assert_eq!(
            plural("InMemoryMachineTemplate"),
            "inmemorymachinetemplates"
        );
        assert_eq!(plural("ClusterClass"), "clusterclasses");
        assert_eq!(plural("Policy"), "policies");
        assert_eq!(plural("Gateway"), "gateways");
    }

    fn owner(uid: &str, controller: bool) -> OwnerReference {
        OwnerReference {
            uid: uid.into(),
            kind: "X".into(),
            controller: controller.then_some(true),
            ..Default::default()
        }
    }

    #[test]
    fn a_new_controller_replaces_the_old_one() {
        let current = vec![owner("ms", true), owner("cluster", false)];
        let next = with_owner(&current, &owner("machine", true)).unwrap();
        let uids: Vec<&str> = next.iter().map(|o| o.uid.as_str()).collect();
        assert_eq!(uids, ["cluster", "machine"]);
        assert!(with_owner(&next, &owner("machine", true)).is_none());
        let mut target = json!({"a": {"b": 1, "c": 2}});
        json_merge(&mut target, &json!({"a": {"b": null, "d": 3}}));
        assert_eq!(target, json!({"a": {"c": 2, "d": 3}}));
    }
}
