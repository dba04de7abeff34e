//! The certificate signing controller: kube-controller-manager's `csrsigning`, which issues
//! the certificates of approved CertificateSigningRequests for the `kubernetes.io` signers
//! (API server clients, kubelet clients, kubelet serving) with the cluster's CA, or marks a
//! request that breaks its signer's rules `Failed`. Approval stays with whoever holds the
//! right to approve (`kubectl certificate approve`).

use super::{condition, Cluster};
use base64::Engine;
use infrasim_kube_api::csr::{self, Signed};
use infrasim_kube_api::pki::CertificateAuthority;
use serde_json::Value;

pub(super) const RESOURCE: &str = "certificatesigningrequests.certificates.k8s.io";

pub(super) fn sign_approved(c: &Cluster, ca: &CertificateAuthority) {
    for request in c.list(RESOURCE).iter() {
        let status = request.value.get("status").cloned().unwrap_or(Value::Null);
        let has = |ty: &str| {
            status["conditions"]
                .as_array()
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == ty))
        };
        let issued = status["certificate"]
            .as_str()
            .is_some_and(|s| !s.is_empty());
        if !has("Approved") || has("Denied") || has("Failed") || issued {
            continue;
        }
        let mut status = status.clone();
        match csr::sign(ca, &request.value, c.now()) {
            Ok(Signed::Issued(pem)) => {
                status["certificate"] =
                    Value::String(base64::engine::general_purpose::STANDARD.encode(pem));
            }
            Ok(Signed::Refused(message)) => {
                let now = infrasim_store::format_time(c.now());
                let failed = condition(
                    status.get("conditions"),
                    "Failed",
                    "True",
                    "SignerValidationFailure",
                    &message,
                    &now,
                    true,
                );
                let mut conditions = status["conditions"].as_array().cloned().unwrap_or_default();
                conditions.push(failed);
                status["conditions"] = Value::Array(conditions);
            }
            Ok(Signed::NotMine) => continue,
            Err(e) => {
                tracing::warn!(request = request.name(), error = %e, "signing a certificate request");
                continue;
            }
        }
        c.set_status_as("certificate-controller", RESOURCE, request, status);
    }
}
