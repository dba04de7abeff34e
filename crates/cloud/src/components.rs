//! Who writes a simulated cluster's objects in-process: the components of a kubeadm cluster,
//! each with the identity and field manager the real one has, so that `managedFields`, audit
//! and admission see the writers a real cluster shows (`kubectl get -o yaml
//! --show-managed-fields` names `kube-controller-manager`, `kube-scheduler`, `kubelet`).

use infrasim_kube_api::{ApiServer, Identity, SystemWriter};

fn identity(user: &str, groups: &[&str]) -> Identity {
    Identity {
        user: user.to_string(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
    }
}

/// kube-controller-manager's controllers (Deployments, ReplicaSets, endpoints, ...).
pub fn controller_manager(server: &ApiServer) -> SystemWriter {
    server.system_writer(
        identity("system:kube-controller-manager", &["system:authenticated"]),
        "kube-controller-manager",
    )
}

/// A controller of kube-controller-manager that writes as its own service account in
/// `kube-system` (kubeadm runs it with `--use-service-account-credentials`), where what it
/// may do is checked (the certificate signer's `sign` on its signers).
pub fn controller(writer: &SystemWriter, service_account: &str) -> SystemWriter {
    writer.as_component(
        identity(
            &format!("system:serviceaccount:kube-system:{service_account}"),
            &[
                "system:serviceaccounts",
                "system:serviceaccounts:kube-system",
                "system:authenticated",
            ],
        ),
        "kube-controller-manager",
    )
}

/// kube-scheduler, as `writer`'s component.
pub fn scheduler(writer: &SystemWriter) -> SystemWriter {
    writer.as_component(
        identity("system:kube-scheduler", &["system:authenticated"]),
        "kube-scheduler",
    )
}

/// The kubelet of `node`, as `writer`'s component.
pub fn kubelet(writer: &SystemWriter, node: &str) -> SystemWriter {
    writer.as_component(
        identity(
            &format!("system:node:{node}"),
            &["system:nodes", "system:authenticated"],
        ),
        "kubelet",
    )
}

/// kubeadm, which writes the cluster's configuration and add-ons as its administrator.
pub fn kubeadm(writer: &SystemWriter) -> SystemWriter {
    writer.as_component(
        identity(
            "kubernetes-admin",
            &["kubeadm:cluster-admins", "system:authenticated"],
        ),
        "kubeadm",
    )
}

/// kube-apiserver itself (the `kubernetes` Service's endpoints).
pub fn api_server(writer: &SystemWriter) -> SystemWriter {
    writer.as_component(
        identity(
            "system:apiserver",
            &["system:authenticated", "system:masters"],
        ),
        "kube-apiserver",
    )
}
