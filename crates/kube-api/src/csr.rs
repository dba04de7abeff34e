//! CertificateSigningRequests (`certificates.k8s.io/v1`) as kube-apiserver's registry keeps
//! them: the requester's identity stamped on create, a spec no update changes, approval
//! conditions writable only through the `approval` subresource (by a user allowed to
//! `approve` for the signer), the certificate only through `status` (by one allowed to
//! `sign`), and condition timestamps filled in by the server.
//!
//! Signing itself is kube-controller-manager's job; see [`sign`] for the part of it that
//! reads a request and issues a certificate with a cluster's CA.

use crate::auth::Identity;
use crate::authz::{self, Attributes, ResourceAttributes};
use crate::pki::{CertificateAuthority, PkiError};
use crate::state::State;
use crate::values::At;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

/// The usages a request may name (Kubernetes' `KeyUsage` values).
const USAGES: &[&str] = &[
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
];

/// The condition types only the `approval` subresource may set, and never both.
const APPROVAL: [&str; 2] = ["Approved", "Denied"];

/// Which part of a request a write goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Through {
    Main,
    Status,
    Approval,
}

impl Through {
    pub fn of(subresource: Option<&str>) -> Self {
        match subresource {
            Some("status") => Through::Status,
            Some("approval") => Through::Approval,
            _ => Through::Main,
        }
    }
}

/// A new request: no status, and the requester as the server knows them (whatever the
/// client wrote in `spec.username` and friends).
pub(crate) fn prepare_for_create(identity: &Identity, new: &mut Value) {
    if let Some(o) = new.as_object_mut() {
        o.remove("status");
    }
    if !new.get("spec").is_some_and(Value::is_object) {
        new["spec"] = json!({});
    }
    let spec = &mut new["spec"];
    spec["username"] = json!(identity.user);
    spec["groups"] = json!(identity.groups);
    if let Some(o) = spec.as_object_mut() {
        o.remove("uid");
        o.remove("extra");
    }
}

/// An update as stored: the spec never changes; through the main resource the status
/// stays, through `approval` only the conditions change, through `status` all of it but the
/// approval conditions; condition timestamps the client left out are filled in.
pub(crate) fn prepare_for_update(
    through: Through,
    old: &Value,
    mut new: Value,
    now: &str,
) -> Value {
    new["spec"] = old.get("spec").cloned().unwrap_or(json!({}));
    let old_status = old.get("status").cloned().unwrap_or(json!({}));
    match through {
        Through::Main => new["status"] = old_status,
        Through::Approval => {
            let conditions = new.at("/status/conditions").cloned();
            new["status"] = old_status;
            match conditions {
                Some(c) => new["status"]["conditions"] = c,
                None => {
                    if let Some(s) = new["status"].as_object_mut() {
                        s.remove("conditions");
                    }
                }
            }
        }
        Through::Status => {
            // Approval conditions are the approval subresource's: kept as they were.
            let kept: Vec<Value> = conditions(&old_status)
                .filter(|c| APPROVAL.contains(&c["type"].as_str().unwrap_or("")))
                .cloned()
                .collect();
            let mut rest: Vec<Value> = new
                .at("/status/conditions")
                .and_then(Value::as_array)
                .map(|c| {
                    c.iter()
                        .filter(|c| !APPROVAL.contains(&c["type"].as_str().unwrap_or("")))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            let mut all = kept;
            all.append(&mut rest);
            if !new.get("status").is_some_and(Value::is_object) {
                new["status"] = json!({});
            }
            new["status"]["conditions"] = json!(all);
        }
    }
    stamp_conditions(&mut new, old, now);
    if new.get("status").is_some_and(|s| s == &json!({})) {
        if let Some(o) = new.as_object_mut() {
            o.remove("status");
        }
    }
    if new
        .at("/status/conditions")
        .is_some_and(|c| c == &json!([]))
    {
        if let Some(s) = new["status"].as_object_mut() {
            s.remove("conditions");
        }
    }
    new
}

fn conditions(status: &Value) -> impl Iterator<Item = &Value> {
    status
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// Fills `lastUpdateTime` and `lastTransitionTime` the client left out: the transition
/// time carries over from the old condition of that type while its status is unchanged.
fn stamp_conditions(new: &mut Value, old: &Value, now: &str) {
    let old_status = old.get("status").cloned().unwrap_or(json!({}));
    let Some(list) = new
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for c in list.iter_mut() {
        if c.get("lastUpdateTime").is_none_or(Value::is_null) {
            c["lastUpdateTime"] = json!(now);
        }
        if c.get("lastTransitionTime").is_none_or(Value::is_null) {
            let before = conditions(&old_status)
                .find(|o| o["type"] == c["type"] && o["status"] == c["status"])
                .and_then(|o| o.get("lastTransitionTime"))
                .filter(|t| !t.is_null());
            c["lastTransitionTime"] = before.cloned().unwrap_or_else(|| json!(now));
        }
    }
}

/// The checks of any request: a PEM certificate request, a signer, known usages, a
/// lifetime of at least ten minutes, and conditions that make sense together.
pub(crate) fn validate(new: &Value) -> Vec<(String, String)> {
    let mut causes = Vec::new();
    let mut cause = |f: &str, m: String| causes.push((f.to_string(), m));
    match new.at("/spec/request").and_then(Value::as_str) {
        None | Some("") => cause("spec.request", "Required value".into()),
        Some(encoded) => {
            if let Err(problem) = request_pem(encoded).and_then(|pem| parse_request(&pem)) {
                cause(
                    "spec.request",
                    format!("Invalid value: []byte{{...}}: {problem}"),
                );
            }
        }
    }
    match new.at("/spec/signerName").and_then(Value::as_str) {
        None | Some("") => cause("spec.signerName", "Required value".into()),
        Some("kubernetes.io/legacy-unknown") => cause(
            "spec.signerName",
            "Invalid value: \"kubernetes.io/legacy-unknown\": the legacy signerName is not allowed via this API version".into(),
        ),
        Some(signer) if !valid_signer_name(signer) => cause(
            "spec.signerName",
            format!("Invalid value: {signer:?}: must be a fully qualified domain and path of the form 'example.com/signer-name'"),
        ),
        Some(_) => {}
    }
    validate_usages(new, &mut cause);
    if let Some(seconds) = new.at("/spec/expirationSeconds").and_then(Value::as_i64) {
        if seconds < 600 {
            cause(
                "spec.expirationSeconds",
                format!("Invalid value: {seconds}: may not specify a duration less than 600 seconds (10 minutes)"),
            );
        }
    }
    validate_conditions(new, &mut cause);
    causes
}

fn validate_usages(new: &Value, cause: &mut impl FnMut(&str, String)) {
    let usages = new
        .at("/spec/usages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if usages.is_empty() {
        cause("spec.usages", "Required value".into());
    }
    let mut seen = Vec::new();
    for (i, u) in usages.iter().enumerate() {
        let u = u.as_str().unwrap_or("");
        if !USAGES.contains(&u) {
            let supported: Vec<String> = USAGES.iter().map(|u| format!("{u:?}")).collect();
            cause(
                &format!("spec.usages[{i}]"),
                format!(
                    "Unsupported value: {u:?}: supported values: {}",
                    supported.join(", ")
                ),
            );
        } else if seen.contains(&u) {
            cause(
                &format!("spec.usages[{i}]"),
                format!("Duplicate value: {u:?}"),
            );
        }
        seen.push(u);
    }
}

fn validate_conditions(new: &Value, cause: &mut impl FnMut(&str, String)) {
    let status = new.get("status").cloned().unwrap_or(json!({}));
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in conditions(&status).enumerate() {
        let path = format!("status.conditions[{i}]");
        let ty = c["type"].as_str().unwrap_or("");
        if ty.is_empty() {
            cause(&format!("{path}.type"), "Required value".into());
        }
        if APPROVAL.contains(&ty) || ty == "Failed" {
            if seen.contains(&ty) {
                cause(&format!("{path}.type"), format!("Duplicate value: {ty:?}"));
            }
            if c["status"] != "True" {
                cause(
                    &format!("{path}.status"),
                    format!(
                        "Unsupported value: {}: supported values: \"True\"",
                        c["status"]
                    ),
                );
            }
        }
        seen.push(ty);
    }
    if seen.contains(&"Approved") && seen.contains(&"Denied") {
        cause(
            "status.conditions",
            "Invalid value: \"Approved\": Approved and Denied conditions are mutually exclusive"
                .into(),
        );
    }
}

/// The checks of a change: an approval or denial once given stays; a certificate is set
/// only once, only on an approved request that has not failed, and is PEM certificates.
pub(crate) fn validate_update(through: Through, old: &Value, new: &Value) -> Vec<(String, String)> {
    let mut causes = validate(new);
    let types = |v: &Value| -> Vec<String> {
        conditions(v.get("status").unwrap_or(&Value::Null))
            .filter_map(|c| c["type"].as_str().map(str::to_string))
            .collect()
    };
    let (before, after) = (types(old), types(new));
    for ty in APPROVAL {
        if before.iter().any(|t| t == ty) && !after.iter().any(|t| t == ty) {
            causes.push((
                "status.conditions".into(),
                format!("Forbidden: updates may not remove a condition of type {ty:?}"),
            ));
        }
    }
    let old_cert = old.at("/status/certificate").and_then(Value::as_str);
    let new_cert = new.at("/status/certificate").and_then(Value::as_str);
    if through == Through::Status && new_cert != old_cert {
        if old_cert.is_some_and(|c| !c.is_empty()) {
            causes.push((
                "status.certificate".into(),
                "Forbidden: updates may not modify existing certificate content".into(),
            ));
        } else if let Some(cert) = new_cert.filter(|c| !c.is_empty()) {
            if !after.iter().any(|t| t == "Approved") || after.iter().any(|t| t == "Failed") {
                causes.push(("status.certificate".into(), "Forbidden: certificate issuance requires an Approved condition and no Failed condition".into()));
            } else if let Err(problem) = certificates_pem(cert) {
                causes.push((
                    "status.certificate".into(),
                    format!("Invalid value: \"<certificate data>\": {problem}"),
                ));
            }
        }
    }
    causes
}

/// What kube-apiserver's CertificateApproval and CertificateSigning admission plugins ask:
/// may the writer `approve` (or, setting a certificate, `sign`) for this request's signer?
pub(crate) fn authorize(
    state: &State,
    who: &Identity,
    through: Through,
    old: &Value,
    new: &Value,
) -> Result<(), String> {
    let verb = match through {
        Through::Approval if approval_of(old) != approval_of(new) => "approve",
        Through::Status
            if new.at("/status/certificate") != old.at("/status/certificate")
                && new.at("/status/certificate").is_some() =>
        {
            "sign"
        }
        _ => return Ok(()),
    };
    let signer = new
        .at("/spec/signerName")
        .and_then(Value::as_str)
        .unwrap_or("");
    let domain = signer.split('/').next().unwrap_or("");
    for name in [signer.to_string(), format!("{domain}/*")] {
        let attrs = Attributes {
            verb: verb.into(),
            resource: Some(ResourceAttributes {
                group: "certificates.k8s.io".into(),
                resource: "signers".into(),
                subresource: String::new(),
                namespace: String::new(),
                name,
            }),
            path: String::new(),
        };
        if authz::allowed(state, who, &attrs).0 {
            return Ok(());
        }
    }
    Err(format!(
        "user not permitted to {verb} requests with signerName {signer:?}"
    ))
}

fn approval_of(v: &Value) -> Vec<String> {
    conditions(v.get("status").unwrap_or(&Value::Null))
        .filter_map(|c| c["type"].as_str())
        .filter(|t| APPROVAL.contains(t))
        .map(str::to_string)
        .collect()
}

/// The PEM text of `spec.request` (base64 of the PEM, as the API carries bytes).
fn request_pem(encoded: &str) -> Result<String, String> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| format!("illegal base64 data: {e}"))?;
    String::from_utf8(bytes).map_err(|_| "PEM block type must be CERTIFICATE REQUEST".into())
}

/// A certificate request, parsed and its signature checked.
fn parse_request(pem: &str) -> Result<rcgen::CertificateSigningRequestParams, String> {
    if !pem.contains("-----BEGIN CERTIFICATE REQUEST-----") {
        return Err("PEM block type must be CERTIFICATE REQUEST".into());
    }
    rcgen::CertificateSigningRequestParams::from_pem(pem).map_err(|e| format!("x509: {e}"))
}

/// That `encoded` (base64 of PEM) holds only certificates.
fn certificates_pem(encoded: &str) -> Result<(), String> {
    use base64::Engine;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| format!("illegal base64 data: {e}"))?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{e:?}"))?;
    if certs.is_empty() {
        return Err("must contain at least one CERTIFICATE PEM block".into());
    }
    for cert in &certs {
        x509_parser::parse_x509_certificate(cert.as_ref()).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `example.com/name`: a DNS subdomain, a slash, and a path of at least one character.
fn valid_signer_name(signer: &str) -> bool {
    let Some((domain, path)) = signer.split_once('/') else {
        return false;
    };
    !path.is_empty()
        && domain.contains('.')
        && domain.len() <= 253
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// The signers kube-controller-manager signs for with the cluster CA.
pub const KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";
pub const KUBELET_CLIENT: &str = "kubernetes.io/kube-apiserver-client-kubelet";
pub const KUBELET_SERVING: &str = "kubernetes.io/kubelet-serving";

/// What a signer decided about an approved request.
#[derive(Debug)]
pub enum Signed {
    /// The certificate chain to store in `status.certificate` (PEM).
    Issued(String),
    /// The request breaks the signer's rules: the `Failed` condition's message.
    Refused(String),
    /// Not a signer this one signs for: left for another.
    NotMine,
}

/// Signs an approved request as kube-controller-manager's `csrsigning` controller does for
/// the built-in `kubernetes.io` signers: checks the signer's rules on subject, names and
/// usages, then issues a certificate valid from five minutes ago (clock skew) for the
/// requested lifetime, at most a year and never past the CA's own.
pub fn sign(
    ca: &CertificateAuthority,
    csr: &Value,
    now: DateTime<Utc>,
) -> Result<Signed, PkiError> {
    let signer = csr
        .at("/spec/signerName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if ![KUBE_APISERVER_CLIENT, KUBELET_CLIENT, KUBELET_SERVING].contains(&signer) {
        return Ok(Signed::NotMine);
    }
    let pem = match csr
        .at("/spec/request")
        .and_then(Value::as_str)
        .ok_or_else(|| "no request".to_string())
        .and_then(request_pem)
    {
        Ok(pem) => pem,
        Err(e) => return Ok(Signed::Refused(e)),
    };
    let mut request = match parse_request(&pem) {
        Ok(r) => r,
        Err(e) => return Ok(Signed::Refused(e)),
    };
    let usages: Vec<&str> = csr
        .at("/spec/usages")
        .and_then(Value::as_array)
        .map(|u| u.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Err(problem) = signer_rules(signer, &request.params, &usages) {
        return Ok(Signed::Refused(problem));
    }
    let lifetime = csr
        .at("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(365 * 24 * 3600)
        .min(365 * 24 * 3600);
    let params = &mut request.params;
    params.not_before = to_offset(now - chrono::Duration::minutes(5));
    params.not_after = to_offset(now + chrono::Duration::seconds(lifetime));
    params.is_ca = rcgen::IsCa::ExplicitNoCa;
    params.key_usages = key_usages(&usages);
    params.extended_key_usages = extended_key_usages(&usages);
    params.serial_number = Some(rcgen::SerialNumber::from_slice(
        uuid::Uuid::new_v4().as_bytes(),
    ));
    let cert = ca.sign_request(&request)?;
    Ok(Signed::Issued(cert))
}

fn to_offset(t: DateTime<Utc>) -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp(t.timestamp())
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

/// The rules of the `kubernetes.io` signers (Kubernetes' "Signers" documentation).
fn signer_rules(
    signer: &str,
    params: &rcgen::CertificateParams,
    usages: &[&str],
) -> Result<(), String> {
    let dn = |ty: rcgen::DnType| -> Vec<String> {
        params
            .distinguished_name
            .iter()
            .filter(|(t, _)| **t == ty)
            .map(|(_, v)| match v {
                rcgen::DnValue::PrintableString(s) => s.to_string(),
                rcgen::DnValue::Utf8String(s) => s.clone(),
                other => format!("{other:?}"),
            })
            .collect()
    };
    let (cn, orgs) = (
        dn(rcgen::DnType::CommonName),
        dn(rcgen::DnType::OrganizationName),
    );
    let cn = cn.first().cloned().unwrap_or_default();
    let (dns_or_ip, other_names) =
        params
            .subject_alt_names
            .iter()
            .fold((0, 0), |(a, b), san| match san {
                rcgen::SanType::DnsName(_) | rcgen::SanType::IpAddress(_) => (a + 1, b),
                _ => (a, b + 1),
            });
    let only = |allowed: &[&str], required: &[&str]| -> Result<(), String> {
        if let Some(u) = usages.iter().find(|u| !allowed.contains(u)) {
            return Err(format!("usage {u:?} is not allowed for signer {signer}"));
        }
        match required.iter().find(|r| !usages.contains(r)) {
            Some(r) => Err(format!("usage {r:?} is required for signer {signer}")),
            None => Ok(()),
        }
    };
    let node = || -> Result<(), String> {
        if orgs != ["system:nodes"] {
            return Err("subject organization is not system:nodes".into());
        }
        if !cn.starts_with("system:node:") || cn.len() == "system:node:".len() {
            return Err("subject common name does not begin with system:node:".into());
        }
        Ok(())
    };
    match signer {
        KUBELET_CLIENT => {
            node()?;
            if dns_or_ip + other_names > 0 {
                return Err("subject alternative names are not allowed".into());
            }
            only(
                &["digital signature", "key encipherment", "client auth"],
                &["client auth"],
            )
        }
        KUBELET_SERVING => {
            node()?;
            if other_names > 0 {
                return Err("only DNS and IP subject alternative names are allowed".into());
            }
            if dns_or_ip == 0 {
                return Err("at least one DNS or IP subject alternative name is required".into());
            }
            only(
                &["digital signature", "key encipherment", "server auth"],
                &["server auth"],
            )
        }
        _ => {
            if cn.is_empty() {
                return Err("subject common name is required".into());
            }
            only(
                &["digital signature", "key encipherment", "client auth"],
                &["client auth"],
            )
        }
    }
}

fn key_usages(usages: &[&str]) -> Vec<rcgen::KeyUsagePurpose> {
    use rcgen::KeyUsagePurpose as K;
    usages
        .iter()
        .filter_map(|u| match *u {
            "digital signature" | "signing" => Some(K::DigitalSignature),
            "key encipherment" => Some(K::KeyEncipherment),
            _ => None,
        })
        .collect()
}

fn extended_key_usages(usages: &[&str]) -> Vec<rcgen::ExtendedKeyUsagePurpose> {
    use rcgen::ExtendedKeyUsagePurpose as E;
    usages
        .iter()
        .filter_map(|u| match *u {
            "client auth" => Some(E::ClientAuth),
            "server auth" => Some(E::ServerAuth),
            _ => None,
        })
        .collect()
}
