//! kube-controller-manager's namespace controllers and kube-apiserver's system-namespaces
//! controller, in-process: the initial namespaces and the `kubernetes` Service; a new
//! namespace's `default` ServiceAccount and `kube-root-ca.crt` ConfigMap; and a terminating
//! namespace's content deleted, its conditions kept and the namespace released through
//! `finalize`. Each writes through the API as the component it stands for.

use crate::namespaces::INITIAL;
use crate::state::State;
use crate::system_writer::SystemWriter;
use crate::values::At;
use infrasim_store::{ObjectKey, Read, ReadAt};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Creates the initial namespaces and the `kubernetes` Service if the group is new; resumes
/// the deletion of namespaces that were terminating.
pub(crate) fn bootstrap(state: &Arc<State>) {
    // kube-apiserver's system-namespaces and kubernetes-service controllers write these
    // through its loopback client.
    let writer = SystemWriter::api_server(state);
    for name in INITIAL {
        let ns = json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
            "spec": {"finalizers": ["kubernetes"]},
        });
        if let Err(e) = writer.ensure("namespaces", ns) {
            tracing::error!(namespace = name, error = %e.message, "creating initial namespace");
        }
        populate(state, name);
    }
    let service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default",
                      "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"],
                  "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
                  "sessionAffinity": "None", "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                  "internalTrafficPolicy": "Cluster"},
    });
    if let Err(e) = writer.ensure("services", service) {
        tracing::error!(error = %e.message, "creating the kubernetes Service");
    }
    if let Ok(snapshot) = state.group.snapshot("namespaces", ReadAt::Latest) {
        for ns in snapshot.objects.values() {
            if ns.meta.deletion_timestamp.is_some() {
                spawn_finalizer(state.clone(), ns.meta.name.to_string());
            }
        }
    }
}

/// Creates the `default` ServiceAccount and `kube-root-ca.crt` ConfigMap of a namespace, as
/// the service-account and root-CA publisher controllers do (through the API, as their
/// service accounts).
pub(crate) fn populate(state: &Arc<State>, namespace: &str) {
    let sa = json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": namespace},
    });
    let ca = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kube-root-ca.crt", "namespace": namespace,
                      "annotations": {"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
        "data": {"ca.crt": state.ca.cert_pem},
    });
    for (controller, resource, object) in [
        ("service-account-controller", "serviceaccounts", sa),
        ("root-ca-cert-publisher", "configmaps", ca),
    ] {
        if let Err(e) = SystemWriter::controller(state, controller).ensure(resource, object) {
            tracing::warn!(namespace, resource, error = %e.message, "populating namespace");
        }
    }
}

/// Rewrites a namespace through `subresource` (`status`, `finalize`) as `writer`, retrying
/// on conflicts with concurrent writers.
fn write_namespace(
    writer: &SystemWriter,
    name: &str,
    subresource: &str,
    edit: impl Fn(&mut Value),
) {
    for _ in 0..16 {
        let key = ObjectKey::new("", name);
        let Some(current) = writer.group().get("namespaces", &key) else {
            return;
        };
        let Ok(old) = current.to_value() else {
            return;
        };
        let mut next = old.clone();
        edit(&mut next);
        let read = Read {
            object: &current,
            value: &old,
        };
        match writer.update_subresource("namespaces", subresource, next, read) {
            Err(e) if e.code == 409 => continue,
            Err(e) => {
                tracing::warn!(namespace = name, subresource, error = %e.message, "namespace controller");
                return;
            }
            Ok(_) => return,
        }
    }
}

/// Starts deleting a terminating namespace's content (once: a namespace already being
/// finalized is left to the task at work).
pub(crate) fn spawn_finalizer(state: Arc<State>, name: String) {
    {
        let mut running = state.terminating.lock().unwrap_or_else(|p| p.into_inner());
        if !running.insert(name.clone()) {
            return;
        }
    }
    tokio::spawn(async move {
        finalize(&state, &name).await;
        state
            .terminating
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&name);
    });
}

/// Deletes everything in the namespace, waits for finalizers, then releases the namespace,
/// as kube-controller-manager's namespace controller does through the API.
async fn finalize(state: &Arc<State>, name: &str) {
    let controller = SystemWriter::controller(state, "namespace-controller");
    loop {
        // Subscribe before scanning, so a change made during the scan still wakes us.
        let Ok(mut changes) = state.group.watch(None) else {
            return;
        };
        let mut remaining = 0usize;
        // Per resource (`plural.group`) and per finalizer, what is left: the namespace's
        // conditions say so while deletion waits.
        let mut by_resource: BTreeMap<String, usize> = BTreeMap::new();
        let mut by_finalizer: BTreeMap<String, usize> = BTreeMap::new();
        for info in state.registry.all().iter().filter(|r| r.namespaced) {
            let Ok(snapshot) = state.group.snapshot(&info.store_key, ReadAt::Latest) else {
                continue;
            };
            let start = ObjectKey::new(name, "");
            for (key, object) in snapshot.objects.range(start..) {
                if &*key.namespace != name {
                    break;
                }
                remaining += 1;
                *by_resource
                    .entry(format!("{}.{}", info.plural, info.group))
                    .or_default() += 1;
                for f in &object.meta.finalizers {
                    *by_finalizer.entry(f.to_string()).or_default() += 1;
                }
                if object.meta.deletion_timestamp.is_none() {
                    let _ = controller.delete(&info.store_key, &key.namespace, &key.name);
                }
            }
        }
        let now = infrasim_store::format_time(state.clock.now());
        let conditions = termination_conditions(&by_resource, &by_finalizer);
        write_namespace(&controller, name, "status", |ns| {
            set_conditions(ns, &conditions, &now)
        });
        if remaining == 0 {
            write_namespace(&controller, name, "finalize", |ns| {
                if let Some(f) = ns
                    .pointer_mut("/spec/finalizers")
                    .and_then(Value::as_array_mut)
                {
                    f.retain(|v| v.as_str() != Some("kubernetes"));
                }
            });
            return;
        }
        if state
            .group
            .get("namespaces", &ObjectKey::new("", name))
            .is_none()
        {
            return;
        }
        // Wait for something to change (a finalizer removed), with a periodic re-check.
        tokio::select! {
            _ = changes.next() => {}
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
    }
}

/// The namespace controller's conditions on a terminating namespace: nothing failed, and
/// what content (and which finalizers) remain.
fn termination_conditions(
    by_resource: &BTreeMap<String, usize>,
    by_finalizer: &BTreeMap<String, usize>,
) -> Vec<(&'static str, &'static str, &'static str, String)> {
    let remaining = if by_resource.is_empty() {
        (
            "False",
            "ContentRemoved",
            "All content successfully removed".to_string(),
        )
    } else {
        let list: Vec<String> = by_resource
            .iter()
            .map(|(r, n)| format!("{r} has {n} resource instances"))
            .collect();
        (
            "True",
            "SomeResourcesRemain",
            format!("Some resources are remaining: {}", list.join(", ")),
        )
    };
    let finalizers = if by_finalizer.is_empty() {
        (
            "False",
            "ContentHasNoFinalizers",
            "All content-preserving finalizers finished".to_string(),
        )
    } else {
        let list: Vec<String> = by_finalizer
            .iter()
            .map(|(f, n)| format!("{f} in {n} resource instances"))
            .collect();
        (
            "True",
            "SomeFinalizersRemain",
            format!(
                "Some content in the namespace has finalizers remaining: {}",
                list.join(", ")
            ),
        )
    };
    vec![
        (
            "NamespaceDeletionDiscoveryFailure",
            "False",
            "ResourcesDiscovered",
            "All resources successfully discovered".to_string(),
        ),
        (
            "NamespaceDeletionGroupVersionParsingFailure",
            "False",
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed".to_string(),
        ),
        (
            "NamespaceDeletionContentFailure",
            "False",
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization".to_string(),
        ),
        (
            "NamespaceContentRemaining",
            remaining.0,
            remaining.1,
            remaining.2,
        ),
        (
            "NamespaceFinalizersRemaining",
            finalizers.0,
            finalizers.1,
            finalizers.2,
        ),
    ]
}

/// Writes `conditions` into the namespace's status, keeping the transition time of a
/// condition whose status did not change (so an unchanged state writes nothing).
fn set_conditions(
    ns: &mut Value,
    conditions: &[(&'static str, &'static str, &'static str, String)],
    now: &str,
) {
    let old = ns
        .at("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let list: Vec<Value> = conditions
        .iter()
        .map(|(ty, status, reason, message)| {
            let previous = old
                .iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(ty));
            let since = previous
                .filter(|c| c.get("status").and_then(Value::as_str) == Some(status))
                .and_then(|c| c.get("lastTransitionTime").cloned())
                .unwrap_or_else(|| json!(now));
            json!({"type": ty, "status": status, "reason": reason, "message": message, "lastTransitionTime": since})
        })
        .collect();
    ns["status"]["conditions"] = json!(list);
}
