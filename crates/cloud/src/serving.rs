//! The serving certificates of a cluster's API servers, one per control-plane node as kubeadm
//! issues them: what a client reaching `kube-apiserver-<node>:6443` through a port-forward is
//! shown, and what KubeadmControlPlane reads the machine's certificate expiry from.
//!
//! Every node's API server serves the certificate the cluster was made with, unless a
//! `CertificateExpiring` fault re-issued it to expire sooner (as a renewal with a short
//! validity would). A re-issued certificate is made on the first connection that needs it
//! and kept while its expiry holds: signing costs a key generation, and ten thousand clusters
//! must not pay it up front.

use chrono::{DateTime, Utc};
use infrasim_kube_api::pki::{self, CertificateAuthority, KeyedCert};
use infrasim_kube_api::WeakApiServer;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Who the certificates are for and what they say.
pub(crate) struct ServingCertificates {
    ca: CertificateAuthority,
    dns: Vec<String>,
    ips: Vec<IpAddr>,
    /// When the certificate the cluster was made with expires.
    issued_until: DateTime<Utc>,
    /// Its TLS configuration, what every node's API server serves unless re-issued.
    issued: Arc<rustls::ServerConfig>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The nodes whose certificate a fault re-issued, with its expiry (`""`: every node).
    expiring: BTreeMap<String, DateTime<Utc>>,
    /// Re-issued certificates' TLS configurations by node, with the expiry each was made for.
    reissued: HashMap<String, (DateTime<Utc>, Arc<rustls::ServerConfig>)>,
}

impl ServingCertificates {
    /// The certificates of a cluster whose API server serves `issued` (signed by `ca` for
    /// the names `dns` and `ips`) over `tls`.
    pub fn new(
        ca: CertificateAuthority,
        dns: Vec<String>,
        ips: Vec<IpAddr>,
        issued: &KeyedCert,
        tls: Arc<rustls::ServerConfig>,
    ) -> Result<Self, pki::PkiError> {
        Ok(ServingCertificates {
            ca,
            dns,
            ips,
            issued_until: pki::not_after(&issued.cert_pem)?,
            issued: tls,
            state: Mutex::new(State::default()),
        })
    }

    /// Sets which nodes' certificates are re-issued to expire when (`""` for every node);
    /// the others serve the issued certificate again.
    pub fn set_expiring(&self, expiring: BTreeMap<String, DateTime<Utc>>) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.reissued.retain(|node, (until, _)| {
            expiring
                .get(node)
                .or_else(|| expiring.get(""))
                .is_some_and(|e| e == until)
        });
        state.expiring = expiring;
    }

    /// When the certificate `node`'s API server serves expires.
    pub fn expiry(&self, node: &str) -> DateTime<Utc> {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        Self::reissued_until(&state, node).unwrap_or(self.issued_until)
    }

    fn reissued_until(state: &State, node: &str) -> Option<DateTime<Utc>> {
        state
            .expiring
            .get(node)
            .or_else(|| state.expiring.get(""))
            .copied()
    }

    /// The TLS configuration `node`'s API server serves with (`server` makes it accept the
    /// cluster's client certificates).
    pub fn tls(
        &self,
        node: &str,
        server: &WeakApiServer,
    ) -> Result<Arc<rustls::ServerConfig>, String> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let Some(until) = Self::reissued_until(&state, node) else {
            return Ok(self.issued.clone());
        };
        if let Some((made_for, tls)) = state.reissued.get(node) {
            if *made_for == until {
                return Ok(tls.clone());
            }
        }
        let server = server
            .upgrade()
            .ok_or_else(|| format!("pod kube-system/kube-apiserver-{node} is not running"))?;
        let cert = self
            .ca
            .serving_cert_until("kube-apiserver", &self.dns, &self.ips, until)
            .map_err(|e| format!("re-issuing {node}'s serving certificate: {e}"))?;
        let tls = server
            .tls_config(&cert)
            .map_err(|e| format!("re-issuing {node}'s serving certificate: {e}"))?;
        state
            .reissued
            .insert(node.to_string(), (until, tls.clone()));
        Ok(tls)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificates() -> ServingCertificates {
        let ca = CertificateAuthority::generate("kubernetes").expect("CA");
        let dns = vec!["kubernetes".to_string()];
        let issued = ca.serving_cert("kube-apiserver", &dns, &[]).expect("cert");
        let tls = infrasim_kube_api::tls_config(&ca, &issued).expect("tls");
        ServingCertificates::new(ca, dns, vec![], &issued, tls).expect("certificates")
    }

    #[test]
    fn a_fault_reissues_one_node_or_every_node_until_it_ends() {
        let certs = certificates();
        let year = certs.expiry("cp-1");
        assert!((year - Utc::now()).num_days() >= 364);
        let soon = DateTime::from_timestamp(Utc::now().timestamp() + 3_600, 0).expect("time");
        certs.set_expiring(BTreeMap::from([("cp-1".to_string(), soon)]));
        assert_eq!(certs.expiry("cp-1"), soon);
        assert_eq!(certs.expiry("cp-2"), year);
        certs.set_expiring(BTreeMap::from([(String::new(), soon)]));
        assert_eq!(certs.expiry("cp-2"), soon);
        certs.set_expiring(BTreeMap::new());
        assert_eq!(certs.expiry("cp-1"), year);
    }
}
