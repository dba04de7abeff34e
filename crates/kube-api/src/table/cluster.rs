//! Printers of the remaining built-in kinds: leases, disruption budgets, storage classes, RBAC
//! bindings, webhook configurations, EndpointSlices, APIServices, CertificateSigningRequests,
//! ComponentStatuses.

use super::*;

pub(super) const LEASE: Printer = Printer {
    kinds: &["Lease"],
    columns: &[NAME, Column("Holder", "string", 0), AGE],
    cells: lease,
};

fn lease(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    vec![
        name,
        json!(or_none(s(v, "spec.holderIdentity").to_string())),
        age(v, now),
    ]
}

pub(super) const POD_DISRUPTION_BUDGET: Printer = Printer {
    kinds: &["PodDisruptionBudget"],
    columns: &[
        NAME,
        Column("Min Available", "string", 0),
        Column("Max Unavailable", "string", 0),
        Column("Allowed Disruptions", "integer", 0),
        AGE,
    ],
    cells: pod_disruption_budget,
};

fn pod_disruption_budget(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    let iv = |p: &str| match v.at(p) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "N/A".into(),
    };
    vec![
        name,
        json!(iv("/spec/minAvailable")),
        json!(iv("/spec/maxUnavailable")),
        json!(n(v, "status.disruptionsAllowed")),
        age(v, now),
    ]
}

pub(super) const STORAGE_CLASS: Printer = Printer {
    kinds: &["StorageClass"],
    columns: &[
        NAME,
        Column("Provisioner", "string", 0),
        Column("ReclaimPolicy", "string", 0),
        Column("VolumeBindingMode", "string", 0),
        Column("AllowVolumeExpansion", "string", 0),
        AGE,
    ],
    cells: storage_class,
};

fn storage_class(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    let name = if v.at("/metadata/annotations/storageclass.kubernetes.io~1is-default-class")
        == Some(&json!("true"))
    {
        json!(format!("{} (default)", s(v, "metadata.name")))
    } else {
        name
    };
    vec![
        name,
        json!(s(v, "provisioner")),
        json!(match s(v, "reclaimPolicy") {
            "" => "Delete",
            p => p,
        }),
        json!(match s(v, "volumeBindingMode") {
            "" => "Immediate",
            m => m,
        }),
        json!(v
            .get("allowVolumeExpansion")
            .and_then(Value::as_bool)
            .unwrap_or(false)
            .to_string()),
        age(v, now),
    ]
}

pub(super) const ROLE_BINDING: Printer = Printer {
    kinds: &["RoleBinding", "ClusterRoleBinding"],
    columns: &[NAME, Column("Role", "string", 0), AGE],
    cells: role_binding,
};

fn role_binding(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    vec![
        name,
        json!(format!("{}/{}", s(v, "roleRef.kind"), s(v, "roleRef.name"))),
        age(v, now),
    ]
}

pub(super) const MUTATING_WEBHOOK_CONFIGURATION: Printer = Printer {
    kinds: &[
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ],
    columns: &[NAME, Column("Webhooks", "integer", 0), AGE],
    cells: mutating_webhook_configuration,
};

fn mutating_webhook_configuration(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    vec![name, json!(arr(v, "webhooks").len()), age(v, now)]
}

pub(super) const ENDPOINT_SLICE: Printer = Printer {
    kinds: &["EndpointSlice"],
    columns: &[
        NAME,
        Column("AddressType", "string", 0),
        Column("Ports", "string", 0),
        Column("Endpoints", "string", 0),
        AGE,
    ],
    cells: endpoint_slice,
};

fn endpoint_slice(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    let ports: Vec<String> = arr(v, "ports")
        .iter()
        .map(|p| n(p, "port").to_string())
        .collect();
    let addrs: Vec<&str> = arr(v, "endpoints")
        .iter()
        .flat_map(|e| arr(e, "addresses").iter().filter_map(Value::as_str))
        .collect();
    vec![
        name,
        json!(s(v, "addressType")),
        json!(if ports.is_empty() {
            "<unset>".to_string()
        } else {
            ports.join(",")
        }),
        json!(or_none(addrs.join(","))),
        age(v, now),
    ]
}

pub(super) const VALIDATING_ADMISSION_POLICY: Printer = Printer {
    kinds: &["ValidatingAdmissionPolicy"],
    columns: &[
        NAME,
        Column("Validations", "integer", 0),
        Column("ParamKind", "string", 0),
        AGE,
    ],
    cells: validating_admission_policy,
};

fn validating_admission_policy(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let param_kind = match (
        s(v, "spec.paramKind.apiVersion"),
        s(v, "spec.paramKind.kind"),
    ) {
        ("", _) | (_, "") => "<unset>".to_string(),
        (version, kind) => format!("{version}/{kind}"),
    };
    vec![
        json!(s(v, "metadata.name")),
        json!(count(v, "spec.validations")),
        json!(param_kind),
        age(v, now),
    ]
}

pub(super) const VALIDATING_ADMISSION_POLICY_BINDING: Printer = Printer {
    kinds: &["ValidatingAdmissionPolicyBinding"],
    columns: &[
        NAME,
        Column("PolicyName", "string", 0),
        Column("ParamRef", "string", 0),
        AGE,
    ],
    cells: validating_admission_policy_binding,
};

fn validating_admission_policy_binding(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let param_ref = match (s(v, "spec.paramRef.namespace"), s(v, "spec.paramRef.name")) {
        (_, "") => "<unset>".to_string(),
        ("", name) => format!("*/{name}"),
        (namespace, name) => format!("{namespace}/{name}"),
    };
    vec![
        json!(s(v, "metadata.name")),
        json!(s(v, "spec.policyName")),
        json!(param_ref),
        age(v, now),
    ]
}

/// kube-aggregator's columns: where the API is served (`Local`, or the Service), and its
/// `Available` condition (with the reason when it is not True).
pub(super) const API_SERVICE: Printer = Printer {
    kinds: &["APIService"],
    columns: &[
        NAME,
        Column("Service", "string", 0),
        Column("Available", "string", 0),
        AGE,
    ],
    cells: api_service,
};

fn api_service(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let service = match v.at("/spec/service").filter(|s| s.is_object()) {
        Some(_) => format!(
            "{}/{}",
            s(v, "spec.service.namespace"),
            s(v, "spec.service.name")
        ),
        None => "Local".to_string(),
    };
    let available = v
        .at("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Available"));
    let status = match available {
        None => "Unknown".to_string(),
        Some(c) => {
            let (status, reason) = (
                c["status"].as_str().unwrap_or(""),
                c["reason"].as_str().unwrap_or(""),
            );
            match (status, reason) {
                ("True", _) | (_, "") => status.to_string(),
                _ => format!("{status} ({reason})"),
            }
        }
    };
    vec![
        json!(s(v, "metadata.name")),
        json!(service),
        json!(status),
        age(v, now),
    ]
}

/// kubectl's CSR columns: the signer, who asked, the lifetime asked for, and the condition
/// (Denied or Approved or Pending, then Failed, then Issued once a certificate is there).
pub(super) const CERTIFICATE_SIGNING_REQUEST: Printer = Printer {
    kinds: &["CertificateSigningRequest"],
    columns: &[
        NAME,
        AGE,
        Column("SignerName", "string", 0),
        Column("Requestor", "string", 0),
        Column("RequestedDuration", "string", 0),
        Column("Condition", "string", 0),
    ],
    cells: certificate_signing_request,
};

fn certificate_signing_request(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let types: Vec<&str> = v
        .at("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c["type"].as_str())
        .collect();
    let mut condition = if types.contains(&"Denied") {
        "Denied"
    } else if types.contains(&"Approved") {
        "Approved"
    } else {
        "Pending"
    }
    .to_string();
    if types.contains(&"Failed") {
        condition.push_str(",Failed");
    }
    if !s(v, "status.certificate").is_empty() {
        condition.push_str(",Issued");
    }
    let duration = v
        .at("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .map(|secs| human_duration(chrono::Duration::seconds(secs)))
        .unwrap_or_else(|| "<none>".into());
    vec![
        json!(s(v, "metadata.name")),
        age(v, now),
        json!(or_none(s(v, "spec.signerName").to_string())),
        json!(s(v, "spec.username")),
        json!(duration),
        json!(condition),
    ]
}

/// kubectl's ComponentStatus columns: the Healthy condition as Healthy/Unhealthy/Unknown,
/// its message and error.
pub(super) const COMPONENT_STATUS: Printer = Printer {
    kinds: &["ComponentStatus"],
    columns: &[
        NAME,
        Column("Status", "string", 0),
        Column("Message", "string", 0),
        Column("Error", "string", 0),
    ],
    cells: component_status,
};

fn component_status(v: &Value, _now: DateTime<Utc>) -> Vec<Value> {
    let healthy = v
        .get("conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Healthy"));
    let (status, message, error) = match healthy {
        Some(c) => (
            match c["status"].as_str() {
                Some("True") => "Healthy",
                Some("False") => "Unhealthy",
                _ => "Unknown",
            },
            c["message"].as_str().unwrap_or(""),
            c["error"].as_str().unwrap_or(""),
        ),
        None => ("Unknown", "", ""),
    };
    vec![
        json!(s(v, "metadata.name")),
        json!(status),
        json!(message),
        json!(error),
    ]
}
