//! When a control-plane machine's certificates expire, and the rollouts that follows from it,
//! as upstream's KubeadmControlPlane and Machine controllers keep it:
//!
//! - the control plane reads the expiry of the serving certificate of each machine's API
//!   server and writes it on the machine's KubeadmConfig as the annotation
//!   `machine.cluster.x-k8s.io/certificates-expiry` (RFC 3339);
//! - the Machine copies it into `status.certificatesExpiryDate`, its own annotation of that
//!   name taking precedence (a user's override);
//! - a machine whose certificates expire within `spec.rollout.before.certificatesExpiryDays`
//!   is out of date ("Certificates will expire soon") and rolled out.
//!
//! A cluster this process hosts is read in place (the cloud knows each node's certificate),
//! as its etcd's health is. Upstream discovers a certificate once: re-discovery after a
//! renewal needs the annotation removed. Here the only renewal is a `CertificateExpiring`
//! fault's re-issue (or its end), so the annotation follows the certificate whenever the two
//! differ.

use super::merge_patch;
use super::{Error, Reconciler};
use crate::capi::core::{KubeadmConfig, KubeadmControlPlane, Machine};
use crate::capi::infra::cloud_key;
use chrono::{DateTime, Utc};
use infrasim_controller_runtime::conditions;
use kube::ResourceExt;
use serde_json::json;

/// The annotation on a KubeadmConfig (written by the control plane) or a Machine (a user's
/// override) that says when the machine's certificates expire.
pub const ANNOTATION: &str = "machine.cluster.x-k8s.io/certificates-expiry";

/// Writes on each control-plane machine's KubeadmConfig when its API server's certificate
/// expires, where that changed (nothing for a cluster not hosted here).
pub(super) async fn discover(
    r: &Reconciler<KubeadmControlPlane>,
    namespace: &str,
    cluster: &str,
    machines: &[Machine],
) -> Result<(), Error> {
    let key = cloud_key(cluster, namespace);
    for m in machines {
        let Some(node) = m.status.as_ref().and_then(|s| s.node_ref.as_ref()) else {
            continue;
        };
        let Some(config_ref) = m.spec.bootstrap.config_ref.as_ref() else {
            continue;
        };
        let Some(expiry) = r
            .core
            .ctx
            .cloud
            .api_server_certificate_expiry(&key, &node.name)
        else {
            return Ok(());
        };
        let stamp = conditions::timestamp(expiry);
        let config = (r.core.informers)
            .get::<KubeadmConfig>(namespace, &config_ref.name)
            .await?;
        let Some(config) = config else { continue };
        if config.annotations().get(ANNOTATION) == Some(&stamp) {
            continue;
        }
        let patch = json!({"metadata": {"annotations": {ANNOTATION: stamp}}});
        let api = r.api::<KubeadmConfig>(namespace);
        merge_patch(&api, &config.name_any(), &patch).await?;
    }
    Ok(())
}

/// A Machine's `status.certificatesExpiryDate`: its own annotation, else its bootstrap
/// config's.
pub(super) fn of_machine(
    machine: &Machine,
    bootstrap_annotations: Option<&std::collections::BTreeMap<String, String>>,
) -> Option<String> {
    let stamp = machine
        .annotations()
        .get(ANNOTATION)
        .or_else(|| bootstrap_annotations.and_then(|a| a.get(ANNOTATION)))?;
    // Kept in the API's form, whatever offset the annotation was written with.
    conditions::parse_time(stamp).map(conditions::timestamp)
}

/// Why a control-plane machine is due for a rollout at `now` by time alone: its certificates
/// expire within the control plane's `rollout.before.certificatesExpiryDays`, or it was made
/// before `rollout.after` and that time has come. Upstream looks at the certificates first.
pub(super) fn due(kcp: &KubeadmControlPlane, m: &Machine, now: DateTime<Utc>) -> Option<String> {
    let due_at = |at: Option<DateTime<Utc>>| at.is_some_and(|at| at <= now);
    if due_at(renew_at(kcp, m)) {
        return Some("* Certificates will expire soon".into());
    }
    if due_at(rollout_after(kcp, m)) {
        return Some("* KubeadmControlPlane spec.rolloutAfter expired".into());
    }
    None
}

/// When a machine not yet [`due`] becomes due, if it ever does by time alone.
pub(super) fn due_next(
    kcp: &KubeadmControlPlane,
    m: &Machine,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    [renew_at(kcp, m), rollout_after(kcp, m)]
        .into_iter()
        .flatten()
        .filter(|at| *at > now)
        .min()
}

/// When the machine's certificates are within the control plane's renewal window.
fn renew_at(kcp: &KubeadmControlPlane, m: &Machine) -> Option<DateTime<Utc>> {
    let days = kcp
        .spec
        .rollout
        .as_ref()?
        .before
        .as_ref()?
        .get("certificatesExpiryDays")?
        .as_i64()?;
    let expiry = m.status.as_ref()?.certificates_expiry_date.as_deref()?;
    conditions::parse_time(expiry)?.checked_sub_signed(chrono::Duration::days(days))
}

/// `rollout.after`, for a machine created before it.
fn rollout_after(kcp: &KubeadmControlPlane, m: &Machine) -> Option<DateTime<Utc>> {
    let after = conditions::parse_time(kcp.spec.rollout.as_ref()?.after.as_deref()?)?;
    let created = m.metadata.creation_timestamp.as_ref()?.0.as_second();
    (created < after.timestamp()).then_some(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kcp(rollout: serde_json::Value) -> KubeadmControlPlane {
        serde_json::from_value(json!({
            "apiVersion": "controlplane.cluster.x-k8s.io/v1beta2",
            "kind": "KubeadmControlPlane",
            "metadata": {"name": "cp", "namespace": "default"},
            "spec": {"version": "v1.33.0", "rollout": rollout,
                     "machineTemplate": {"spec": {"infrastructureRef": {
                         "apiGroup": "infrastructure.cluster.x-k8s.io",
                         "kind": "DevMachineTemplate", "name": "t"}}}},
        }))
        .expect("a KubeadmControlPlane")
    }

    fn machine(created: &str, expiry: Option<&str>) -> Machine {
        serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "Machine",
            "metadata": {"name": "m", "namespace": "default", "creationTimestamp": created},
            "spec": {"clusterName": "c", "bootstrap": {},
                     "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                           "kind": "DevMachine", "name": "m"}},
            "status": {"certificatesExpiryDate": expiry},
        }))
        .expect("a Machine")
    }

    fn at(s: &str) -> DateTime<Utc> {
        conditions::parse_time(s).expect("a time")
    }

    #[test]
    fn certificates_within_the_window_make_a_machine_due_and_say_when_it_will_be() {
        let kcp = kcp(json!({"before": {"certificatesExpiryDays": 21}}));
        let m = machine("2026-01-01T00:00:00Z", Some("2026-03-01T00:00:00Z"));
        let now = at("2026-02-01T00:00:00Z");
        assert_eq!(due(&kcp, &m, now), None);
        assert_eq!(due_next(&kcp, &m, now), Some(at("2026-02-08T00:00:00Z")));
        assert_eq!(
            due(&kcp, &m, at("2026-02-08T00:00:00Z")).as_deref(),
            Some("* Certificates will expire soon")
        );
        let unknown = machine("2026-01-01T00:00:00Z", None);
        assert_eq!(due(&kcp, &unknown, now), None);
        assert_eq!(due_next(&kcp, &unknown, now), None);
    }

    #[test]
    fn rollout_after_replaces_machines_made_before_it_once_it_passes() {
        let kcp = kcp(json!({"after": "2026-02-01T00:00:00Z"}));
        let old = machine("2026-01-01T00:00:00Z", None);
        let new = machine("2026-02-02T00:00:00Z", None);
        let before = at("2026-01-15T00:00:00Z");
        assert_eq!(due(&kcp, &old, before), None);
        assert_eq!(
            due_next(&kcp, &old, before),
            Some(at("2026-02-01T00:00:00Z"))
        );
        let later = at("2026-02-03T00:00:00Z");
        assert_eq!(
            due(&kcp, &old, later).as_deref(),
            Some("* KubeadmControlPlane spec.rolloutAfter expired")
        );
        assert_eq!(due(&kcp, &new, later), None);
    }

    #[test]
    fn a_machine_annotation_overrides_its_bootstrap_config() {
        let mut m = machine("2026-01-01T00:00:00Z", None);
        let config = std::collections::BTreeMap::from([(
            ANNOTATION.to_string(),
            "2027-01-01T00:00:00+00:00".to_string(),
        )]);
        assert_eq!(
            of_machine(&m, Some(&config)).as_deref(),
            Some("2027-01-01T00:00:00Z")
        );
        m.annotations_mut()
            .insert(ANNOTATION.into(), "2026-06-01T00:00:00Z".into());
        assert_eq!(
            of_machine(&m, Some(&config)).as_deref(),
            Some("2026-06-01T00:00:00Z")
        );
        assert_eq!(
            of_machine(&machine("2026-01-01T00:00:00Z", None), None),
            None
        );
    }
}
