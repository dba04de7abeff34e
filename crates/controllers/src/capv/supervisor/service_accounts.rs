//! CAPV's ProviderServiceAccount reconciler: for each ProviderServiceAccount that names a
//! supervisor VSphereCluster, a ServiceAccount, a token Secret (`<name>-secret`, filled by
//! the plane's tokens controller), a Role with the account's `rules` and a RoleBinding, all
//! named after it and controlled by it in the cluster's namespace; then the token Secret's
//! data copied into the workload cluster as `targetSecretName` in `targetNamespace` (made if
//! missing). The cluster's `ProviderServiceAccountsReady` says how it went; while the
//! workload cluster cannot be reached it is left as it was, as CAPV leaves it.

use super::super::types::supervisor::{ProviderServiceAccount, VSphereCluster};
use super::super::{Error, Reconciler};
use crate::capi::core::Cluster;
use infrasim_controller_runtime::conditions::Condition;
use infrasim_controller_runtime::writes::apply;
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::{json, Value};

const MANAGER: &str = "infrasim-capv/providerserviceaccount";

/// What became of a cluster's accounts.
pub(super) enum Outcome {
    /// The condition to report.
    Reported(Condition),
    /// A token Secret the plane has not filled yet: look again shortly.
    WaitingForToken,
    /// The workload cluster cannot be reached yet: nothing to report.
    Unreachable,
}

/// Ensures the accounts of `c` (see the module's doc).
pub(super) async fn reconcile(r: &Reconciler, c: &VSphereCluster, cluster: &Cluster) -> Outcome {
    let ns = c.namespace().unwrap_or_default();
    let accounts: Vec<_> = r
        .informers
        .of::<ProviderServiceAccount>()
        .store()
        .state()
        .into_iter()
        .filter(|a| a.namespace().as_deref() == Some(ns.as_str()))
        .filter(|a| a.meta().deletion_timestamp.is_none())
        .filter(|a| {
            a.spec
                .cluster_ref
                .as_ref()
                .is_some_and(|n| n.name == c.name_any())
        })
        .filter(|a| !a.annotations().contains_key(crate::capi::PAUSED_ANNOTATION))
        .collect();
    let guest = match r.workloads.of(&r.ctx.client, cluster).await {
        Ok(client) => client,
        Err(_) => return Outcome::Unreachable,
    };
    let mut waiting = false;
    for account in &accounts {
        match ensure(r, &guest, account, &cluster.name_any()).await {
            Ok(filled) => waiting |= !filled,
            Err(e) => {
                let why = format!("failed to ensure ProviderServiceAccounts: {e}");
                return Outcome::Reported(Condition::new(
                    "ProviderServiceAccountsReady",
                    false,
                    "NotReady",
                    why,
                ));
            }
        }
    }
    if waiting {
        return Outcome::WaitingForToken;
    }
    Outcome::Reported(Condition::new(
        "ProviderServiceAccountsReady",
        true,
        "Ready",
        "",
    ))
}

/// The owner references of what an account makes: the account, as their controller.
fn controlled_by(account: &ProviderServiceAccount) -> Value {
    json!([{
        "apiVersion": ProviderServiceAccount::api_version(&()), "kind": "ProviderServiceAccount",
        "name": account.name_any(), "uid": account.uid().unwrap_or_default(),
        "controller": true, "blockOwnerDeletion": true,
    }])
}

/// One account's objects in the supervisor and its Secret in the workload cluster; false
/// while its token Secret has no token yet.
async fn ensure(
    r: &Reconciler,
    guest: &Client,
    account: &ProviderServiceAccount,
    cluster: &str,
) -> Result<bool, Error> {
    let ns = account.namespace().unwrap_or_default();
    let name = account.name_any();
    let client = r.ctx.client.clone();
    let owner = controlled_by(account);
    let meta = |n: &str| json!({"name": n, "namespace": ns, "ownerReferences": owner});
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
    let body = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(&name)});
    apply(&accounts, &name, MANAGER, &body).await?;
    let secret_name = format!("{name}-secret");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let mut token = secrets.get_opt(&secret_name).await?;
    if token.is_none() {
        let mut m = meta(&secret_name);
        m["labels"] = json!({crate::capi::CLUSTER_NAME_LABEL: cluster});
        m["annotations"] = json!({"kubernetes.io/service-account.name": name});
        let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": m,
                          "type": "kubernetes.io/service-account-token"});
        let made = secrets
            .create(&PostParams::default(), &serde_json::from_value(body)?)
            .await?;
        // The plane's tokens controller may have filled it already.
        token = secrets.get_opt(&made.name_any()).await?;
    }
    let roles: Api<Role> = Api::namespaced(client.clone(), &ns);
    let body = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                      "metadata": meta(&name), "rules": account.spec.rules});
    apply(&roles, &name, MANAGER, &body).await?;
    role_binding(r, account).await?;
    let Some(data) = token.and_then(|s| s.data).filter(|d| !d.is_empty()) else {
        return Ok(false);
    };
    copy_into_workload(guest, account, json!(data)).await?;
    Ok(true)
}

/// The RoleBinding of the account's Role to its ServiceAccount; one bound to another role
/// is deleted first (a binding's `roleRef` cannot change).
async fn role_binding(r: &Reconciler, account: &ProviderServiceAccount) -> Result<(), Error> {
    let ns = account.namespace().unwrap_or_default();
    let name = account.name_any();
    let bindings: Api<RoleBinding> = Api::namespaced(r.ctx.client.clone(), &ns);
    if let Some(existing) = bindings.get_opt(&name).await? {
        let role = &existing.role_ref;
        if role.name != name || role.kind != "Role" || role.api_group != "rbac.authorization.k8s.io"
        {
            bindings.delete(&name, &DeleteParams::default()).await?;
        }
    }
    let owner = controlled_by(account);
    let body = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": ns, "ownerReferences": owner},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
    });
    apply(&bindings, &name, MANAGER, &body).await?;
    Ok(())
}

/// The token Secret's data as `targetSecretName` in `targetNamespace` of the workload
/// cluster, the namespace made first if it is missing.
async fn copy_into_workload(
    guest: &Client,
    account: &ProviderServiceAccount,
    data: Value,
) -> Result<(), Error> {
    let target_ns = &account.spec.target_namespace;
    let namespaces: Api<Namespace> = Api::all(guest.clone());
    if namespaces.get_opt(target_ns).await?.is_none() {
        let body =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": target_ns}});
        match namespaces
            .create(&PostParams::default(), &serde_json::from_value(body)?)
            .await
        {
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            other => {
                other?;
            }
        }
    }
    let name = &account.spec.target_secret_name;
    let secrets: Api<Secret> = Api::namespaced(guest.clone(), target_ns);
    let body = json!({"apiVersion": "v1", "kind": "Secret",
                      "metadata": {"name": name, "namespace": target_ns}, "data": data});
    apply(&secrets, name, MANAGER, &body).await?;
    Ok(())
}
