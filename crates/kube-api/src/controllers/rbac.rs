//! kube-apiserver's RBAC bootstrap (its `rbac/bootstrap-roles` post-start hook), in-process:
//! the default cluster roles and bindings ([`crate::authz::bootstrap_roles`]) created if
//! missing, through the API as kube-apiserver.

use crate::authz::{bootstrap_roles, BOOTSTRAP_BINDINGS};
use crate::state::State;
use crate::system_writer::SystemWriter;
use serde_json::{json, Value};
use std::sync::Arc;

/// Creates the roles and bindings kube-apiserver bootstraps, if missing, as its RBAC
/// post-start hook does through its loopback client.
pub(crate) fn bootstrap(state: &Arc<State>) {
    let writer = SystemWriter::api_server(state);
    let bootstrap_label = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    for mut role in bootstrap_roles() {
        role["apiVersion"] = json!("rbac.authorization.k8s.io/v1");
        role["kind"] = json!("ClusterRole");
        let labels = role["metadata"].get("labels").cloned().unwrap_or(json!({}));
        let mut merged = bootstrap_label.clone();
        if let (Some(m), Some(l)) = (merged.as_object_mut(), labels.as_object()) {
            m.extend(l.clone());
        }
        role["metadata"]["labels"] = merged;
        ensure(&writer, "clusterroles.rbac.authorization.k8s.io", role);
    }
    for (name, role, subject) in BOOTSTRAP_BINDINGS {
        let subject = match subject.split_once("serviceaccount:") {
            Some((_, sa)) => {
                let (namespace, name) = sa.split_once(':').unwrap_or(("", sa));
                json!({"kind": "ServiceAccount", "namespace": namespace, "name": name})
            }
            None => {
                json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": subject})
            }
        };
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": bootstrap_label},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [subject],
        });
        ensure(
            &writer,
            "clusterrolebindings.rbac.authorization.k8s.io",
            binding,
        );
    }
}

/// Creates a bootstrapped RBAC object unless it exists (a restarted server keeps the ones
/// it made, and whatever an administrator changed in them).
fn ensure(writer: &SystemWriter, resource: &str, object: Value) {
    if let Err(e) = writer.ensure(resource, object) {
        tracing::warn!(resource, error = %e.message, "bootstrapping RBAC");
    }
}
