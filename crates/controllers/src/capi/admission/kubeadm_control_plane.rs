//! KubeadmControlPlane's webhooks (`default.kubeadmcontrolplane.controlplane.cluster.x-k8s.io`,
//! `validation.kubeadmcontrolplane…` and the scale subresource's `validation-scale…`), as
//! Cluster API v1.11 runs them. Upstream names the group of its errors `cluster.x-k8s.io`.

use super::field::FieldError;
use super::kubeadm_config::validate_spec;
use super::review::{Review, Verdict};
use super::rules::{self, object_at, text};
use crate::capi::CORE_GROUP;
use serde_json::{json, Map, Value};

/// Replicas (1), the version's `v` (even when empty), the rolling update strategy.
pub fn default(_review: &Review, object: &mut Value) -> Result<(), Verdict> {
    let spec = object_at(object, &["spec"]);
    if spec.get("replicas").is_none_or(Value::is_null) {
        spec.insert("replicas".into(), json!(1));
    }
    rules::default_version(object, "/spec/version", true);
    let strategy = object_at(object, &["spec", "rollout", "strategy"]);
    strategy.insert("type".into(), json!("RollingUpdate"));
    let rolling = object_at(object, &["spec", "rollout", "strategy", "rollingUpdate"]);
    rolling.entry("maxSurge").or_insert(json!(1));
    Ok(())
}

/// The validating webhook's checks: the spec's on create and update, the update's own.
pub fn validate(review: &Review) -> Verdict {
    let object = &review.object;
    let mut errors = Vec::new();
    replicas(object, &mut errors);
    let infra = object.pointer("/spec/machineTemplate/spec/infrastructureRef");
    for field in ["apiGroup", "kind", "name"] {
        let value = infra
            .and_then(|r| r.get(field))
            .and_then(Value::as_str)
            .unwrap_or("");
        if value.is_empty() {
            errors.push(FieldError::invalid(
                format!("spec.machineTemplate.infrastructure.{field}"),
                json!(value),
                "cannot be empty",
            ));
        }
    }
    super::machine_deployment::version(object, "/spec/version", "spec.version", &mut errors);
    let replicas = object.pointer("/spec/replicas").and_then(Value::as_i64);
    rollout(
        object.get("spec"),
        Some(replicas.unwrap_or(1)),
        "spec",
        &mut errors,
    );
    rules::naming_template(
        object,
        "/spec/machineNaming/template",
        "spec.machineNaming.template",
        &mut errors,
    );
    cluster_configuration(
        object.pointer("/spec/kubeadmConfigSpec/clusterConfiguration"),
        review
            .old
            .as_ref()
            .map(|o| o.pointer("/spec/kubeadmConfigSpec/clusterConfiguration")),
        "spec.kubeadmConfigSpec.clusterConfiguration",
        &mut errors,
    );
    validate_spec(
        object.pointer("/spec/kubeadmConfigSpec"),
        "spec.kubeadmConfigSpec",
        &mut errors,
    );
    if let Some(old) = &review.old {
        update(old, object, &mut errors);
    }
    Verdict::of(CORE_GROUP, "KubeadmControlPlane", errors)
}

fn has(v: &Value, key: &str) -> bool {
    v.get(key).is_some_and(|x| !x.is_null())
}

fn stacked_etcd(object: &Value) -> bool {
    !object
        .pointer("/spec/kubeadmConfigSpec/clusterConfiguration/etcd")
        .is_some_and(|e| has(e, "external"))
}

fn replicas(object: &Value, errors: &mut Vec<FieldError>) {
    match object.pointer("/spec/replicas").and_then(Value::as_i64) {
        None => errors.push(FieldError::required("spec.replicas", "is required")),
        Some(r) if r <= 0 => errors.push(FieldError::forbidden(
            "spec.replicas",
            "cannot be less than or equal to 0",
        )),
        Some(r) if r % 2 == 0 && stacked_etcd(object) => errors.push(FieldError::forbidden(
            "spec.replicas",
            "cannot be an even number when etcd is stacked",
        )),
        Some(_) => {}
    }
}

/// Only rolling updates, surging by 1 or 0; scaling in needs three `replicas` (a template
/// has none); certificates valid no longer than their CA and renewed before they expire.
/// Upstream checks none of this when no strategy is set (a template may leave it out).
fn rollout(
    spec: Option<&Value>,
    replicas: Option<i64>,
    prefix: &str,
    errors: &mut Vec<FieldError>,
) {
    let Some(strategy) = spec
        .and_then(|s| s.pointer("/rollout/strategy"))
        .filter(|s| s.as_object().is_some_and(|m| !m.is_empty()))
    else {
        return;
    };
    if strategy["type"].as_str() != Some("RollingUpdate") {
        errors.push(FieldError::required(
            format!("{prefix}.rollout.strategy.type"),
            "only RollingUpdate is supported",
        ));
    }
    match strategy.pointer("/rollingUpdate/maxSurge").map(int_value) {
        Some(0) if replicas.is_some_and(|r| r < 3) => errors.push(FieldError::required(
            format!("{prefix}.rollout.strategy.rollingUpdate"),
            "when KubeadmControlPlane is configured to scale-in, replica count needs to be at least 3",
        )),
        Some(0) | Some(1) | None => {}
        Some(_) => errors.push(FieldError::required(
            format!("{prefix}.rollout.strategy.rollingUpdate.maxSurge"),
            "value must be 1 or 0",
        )),
    }
    certificate_validity(spec, prefix, errors);
}

/// Go's `intstr.IntValue`: an int as it is, a string parsed as an int (a percentage or
/// other text is 0).
fn int_value(v: &Value) -> i64 {
    v.as_i64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or(0)
}

/// The days kubeadm's CA is valid for when the configuration does not say (ten years).
const DEFAULT_CA_DAYS: i64 = 3650;

fn certificate_validity(spec: Option<&Value>, prefix: &str, errors: &mut Vec<FieldError>) {
    let days = |p: &str| {
        spec.and_then(|s| s.pointer(p))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let valid = days("/kubeadmConfigSpec/clusterConfiguration/certificateValidityPeriodDays");
    if valid == 0 {
        return;
    }
    let ca = days("/kubeadmConfigSpec/clusterConfiguration/caCertificateValidityPeriodDays");
    let at =
        format!("{prefix}.kubeadmConfigSpec.clusterConfiguration.certificateValidityPeriodDays");
    if ca != 0 && valid > ca {
        errors.push(FieldError::invalid(
            &at,
            json!(valid),
            format!("must be less than or equal to caCertificateValidityPeriodDays ({ca})"),
        ));
    } else if ca == 0 && valid > DEFAULT_CA_DAYS {
        errors.push(FieldError::invalid(
            &at,
            json!(valid),
            format!("must be less than or equal to the default value of caCertificateValidityPeriodDays ({DEFAULT_CA_DAYS})"),
        ));
    }
    let before = days("/rollout/before/certificatesExpiryDays");
    if before != 0 && before >= valid {
        errors.push(FieldError::invalid(
            format!("{prefix}.rollout.before.certificatesExpiryDays"),
            json!(before),
            format!("must be less than certificateValidityPeriodDays ({valid})"),
        ));
    }
}

/// The ClusterConfiguration's image tags (OCI's characters; CoreDNS's a version), one kind
/// of etcd, and no switch between local and external etcd on update (`old` is the previous
/// configuration, `Some(None)` when it had none).
fn cluster_configuration(
    new: Option<&Value>,
    old: Option<Option<&Value>>,
    prefix: &str,
    errors: &mut Vec<FieldError>,
) {
    let text = |p: &str| {
        new.and_then(|c| c.pointer(p))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let dns = text("/dns/imageTag");
    if !tag_is_valid(dns) {
        errors.push(FieldError::forbidden(
            format!("{prefix}.dns.imageTag"),
            format!("tag {dns} is invalid"),
        ));
    }
    let parsed = match dns.is_empty() {
        true => Ok(()),
        false => parse_tolerant(&dns.replace('_', "+")),
    };
    if let Err(why) = parsed {
        // Upstream names this field without its prefix.
        errors.push(FieldError::invalid(
            "dns.imageTag",
            json!(dns),
            format!("failed to parse CoreDNS version: {why}"),
        ));
    }
    let etcd = new.and_then(|c| c.get("etcd"));
    let local = etcd.is_some_and(|e| defined(e, "local"));
    let etcd_tag = text("/etcd/local/imageTag");
    if local && !tag_is_valid(etcd_tag) {
        errors.push(FieldError::forbidden(
            format!("{prefix}.etcd.local.imageTag"),
            format!("tag {etcd_tag} is invalid"),
        ));
    }
    let external = |c: Option<&Value>| {
        c.and_then(|c| c.get("etcd"))
            .is_some_and(|e| defined(e, "external"))
    };
    if local && external(new) {
        errors.push(FieldError::forbidden(
            format!("{prefix}.etcd.local"),
            "cannot have both external and local etcd",
        ));
    }
    if let Some(old) = old {
        if external(old) != external(new) {
            errors.push(FieldError::forbidden(
                format!("{prefix}.etcd.external"),
                "cannot change between external and local etcd",
            ));
        }
    }
}

/// Is `key` of `v` set to something other than an empty object (Go's `IsDefined`)?
fn defined(v: &Value, key: &str) -> bool {
    v.get(key)
        .is_some_and(|x| !x.is_null() && x.as_object().is_none_or(|m| !m.is_empty()))
}

/// An image tag holds only letters, digits, `_`, `.` and `-` (the empty tag passes).
fn tag_is_valid(tag: &str) -> bool {
    tag.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// blang/semver's `ParseTolerant` as far as a tag needs it: a `v` prefix and missing minor
/// or patch numbers are tolerated; each number must be digits.
fn parse_tolerant(version: &str) -> Result<(), String> {
    let v = version.trim();
    let v = v.strip_prefix('v').unwrap_or(v);
    let mut parts: Vec<String> = v.splitn(3, '.').map(str::to_string).collect();
    if parts.len() < 3 {
        if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
            return Err("Short version cannot contain PreRelease/Build meta data".into());
        }
        parts.resize(3, "0".into());
    }
    let patch = parts[2].split(['-', '+']).next().unwrap_or("").to_string();
    for (what, number) in [
        ("major", &parts[0]),
        ("minor", &parts[1]),
        ("patch", &patch),
    ] {
        let trimmed = match number.trim_start_matches('0') {
            "" if !number.is_empty() => "0",
            t => t,
        };
        if trimmed.is_empty() || !trimmed.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "Invalid character(s) found in {what} number {}",
                super::field::go_quote(trimmed)
            ));
        }
    }
    Ok(())
}

/// What an update may not do: change fields outside the allowed ones, skip a minor version
/// (switching between local and external etcd is [`cluster_configuration`]'s).
fn update(old: &Value, new: &Value, errors: &mut Vec<FieldError>) {
    let mut changed = Vec::new();
    leaf_changes(old.get("spec"), new.get("spec"), "spec", &mut changed);
    for path in changed {
        if !allowed(&path) {
            errors.push(FieldError::forbidden(path, "cannot be modified"));
        }
    }
    let (from, to) = (text(old, "/spec/version"), text(new, "/spec/version"));
    if let (Some(a), Some(b)) = (rules::minor_of(from), rules::minor_of(to)) {
        if b.0 > a.0 || (b.0 == a.0 && b.1 >= a.1 + 2) {
            errors.push(FieldError::forbidden(
                "spec.version",
                format!("cannot update Kubernetes version from {from} to {to}"),
            ));
        }
    }
}

/// The paths under `spec` a KubeadmControlPlane's update may change (v1.11's allow-list:
/// a path is allowed if it is, or lies under, one of these).
const MUTABLE: &[&str] = &[
    "spec.replicas",
    "spec.version",
    "spec.remediation",
    "spec.machineNaming",
    "spec.rollout",
    "spec.machineTemplate.metadata",
    "spec.machineTemplate.spec",
    "spec.kubeadmConfigSpec.clusterConfiguration.etcd",
    "spec.kubeadmConfigSpec.clusterConfiguration.dns",
    "spec.kubeadmConfigSpec.clusterConfiguration.imageRepository",
    "spec.kubeadmConfigSpec.clusterConfiguration.featureGates",
    "spec.kubeadmConfigSpec.clusterConfiguration.apiServer",
    "spec.kubeadmConfigSpec.clusterConfiguration.controllerManager",
    "spec.kubeadmConfigSpec.clusterConfiguration.scheduler",
    "spec.kubeadmConfigSpec.clusterConfiguration.certificateValidityPeriodDays",
    "spec.kubeadmConfigSpec.initConfiguration.nodeRegistration",
    "spec.kubeadmConfigSpec.initConfiguration.patches",
    "spec.kubeadmConfigSpec.initConfiguration.skipPhases",
    "spec.kubeadmConfigSpec.initConfiguration.bootstrapTokens",
    "spec.kubeadmConfigSpec.initConfiguration.localAPIEndpoint",
    "spec.kubeadmConfigSpec.initConfiguration.timeouts",
    "spec.kubeadmConfigSpec.joinConfiguration.nodeRegistration",
    "spec.kubeadmConfigSpec.joinConfiguration.patches",
    "spec.kubeadmConfigSpec.joinConfiguration.skipPhases",
    "spec.kubeadmConfigSpec.joinConfiguration.caCertPath",
    "spec.kubeadmConfigSpec.joinConfiguration.controlPlane",
    "spec.kubeadmConfigSpec.joinConfiguration.discovery",
    "spec.kubeadmConfigSpec.joinConfiguration.timeouts",
    "spec.kubeadmConfigSpec.bootCommands",
    "spec.kubeadmConfigSpec.preKubeadmCommands",
    "spec.kubeadmConfigSpec.postKubeadmCommands",
    "spec.kubeadmConfigSpec.files",
    "spec.kubeadmConfigSpec.verbosity",
    "spec.kubeadmConfigSpec.users",
    "spec.kubeadmConfigSpec.ntp",
    "spec.kubeadmConfigSpec.ignition",
    "spec.kubeadmConfigSpec.diskSetup",
    "spec.kubeadmConfigSpec.format",
    "spec.kubeadmConfigSpec.mounts",
];

fn allowed(path: &str) -> bool {
    MUTABLE.iter().any(|m| {
        path == *m
            || path
                .strip_prefix(m)
                .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    })
}

/// The paths of the leaves that differ between `old` and `new` (a list counts as a leaf,
/// as a merge patch replaces lists whole).
fn leaf_changes(old: Option<&Value>, new: Option<&Value>, path: &str, out: &mut Vec<String>) {
    let empty = Map::new();
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                leaf_changes(a.get(k), b.get(k), &format!("{path}.{k}"), out);
            }
        }
        (Some(Value::Object(a)), None) | (None, Some(Value::Object(a))) => leaf_changes(
            Some(&Value::Object(a.clone())),
            Some(&Value::Object(empty)),
            path,
            out,
        ),
        (a, b) if a.unwrap_or(&Value::Null) != b.unwrap_or(&Value::Null) => {
            out.push(path.to_string())
        }
        _ => {}
    }
}

/// KubeadmControlPlaneTemplate's validating webhook
/// (`validation.kubeadmcontrolplanetemplate.controlplane.cluster.x-k8s.io`): on create the
/// control plane's own rules under `spec.template.spec` (no replicas to check), on update
/// nothing under `spec.template.spec` may change. Upstream has no defaulting webhook here.
pub fn validate_template(review: &Review) -> Verdict {
    let object = &review.object;
    let spec = object.pointer("/spec/template/spec");
    let prefix = "spec.template.spec";
    let mut errors = Vec::new();
    let Some(old) = &review.old else {
        rollout(spec, None, prefix, &mut errors);
        rules::naming_template(
            object,
            "/spec/template/spec/machineNaming/template",
            "spec.template.spec.machineNaming.template",
            &mut errors,
        );
        cluster_configuration(
            spec.and_then(|s| s.pointer("/kubeadmConfigSpec/clusterConfiguration")),
            None,
            "spec.template.spec.kubeadmConfigSpec.clusterConfiguration",
            &mut errors,
        );
        validate_spec(
            spec.and_then(|s| s.get("kubeadmConfigSpec")),
            "spec.template.spec.kubeadmConfigSpec",
            &mut errors,
        );
        return Verdict::of(CORE_GROUP, "KubeadmControlPlaneTemplate", errors);
    };
    let before = old.pointer("/spec/template/spec").cloned();
    let mut after = spec.cloned();
    // A strategy left out keeps the one the defaults of older releases wrote.
    let old_strategy = before.as_ref().and_then(|b| b.pointer("/rollout/strategy"));
    let kept = old_strategy.filter(|s| {
        s["type"] == "RollingUpdate"
            && s.pointer("/rollingUpdate/maxSurge").map(int_value) == Some(1)
    });
    let unset = after
        .as_ref()
        .and_then(|a| a.pointer("/rollout/strategy"))
        .is_none_or(|s| s.as_object().is_none_or(|m| m.is_empty()));
    if let (Some(kept), true, Some(a)) = (kept, unset, after.as_mut()) {
        object_at(a, &["rollout"]).insert("strategy".into(), kept.clone());
    }
    let mut changed = Vec::new();
    leaf_changes(before.as_ref(), after.as_ref(), prefix, &mut changed);
    if !changed.is_empty() {
        let diff: Vec<String> = changed
            .iter()
            .map(|path| {
                let at = |v: Option<&Value>| {
                    let pointer = path_pointer(path.strip_prefix(prefix).unwrap_or(""));
                    v.and_then(|v| v.pointer(&pointer))
                        .cloned()
                        .unwrap_or(Value::Null)
                };
                format!("{path}: {} -> {}", at(before.as_ref()), at(after.as_ref()))
            })
            .collect();
        errors.push(FieldError::invalid_shown(
            prefix,
            object.to_string(),
            format!("KubeadmControlPlaneTemplate spec.template.spec field is immutable. Please create new resource instead. Diff: {}", diff.join("; ")),
        ));
    }
    Verdict::of(CORE_GROUP, "KubeadmControlPlaneTemplate", errors)
}

/// The JSON pointer of a dotted path's tail (`.a.b` → `/a/b`).
fn path_pointer(tail: &str) -> String {
    tail.split('.')
        .filter(|s| !s.is_empty())
        .map(|s| format!("/{}", s.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// The scale subresource's webhook: the Scale asks for `replicas` of the control plane.
pub fn validate_scale(replicas: i64, kcp: &Value) -> Verdict {
    if replicas == 0 {
        return Verdict::denied("replicas cannot be 0");
    }
    if replicas % 2 == 0 && stacked_etcd(kcp) {
        return Verdict::denied("replicas cannot be an even number when etcd is stacked");
    }
    Verdict::allowed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kcp() -> Value {
        json!({"metadata": {"name": "cp"}, "spec": {"version": "1.31.0",
            "machineTemplate": {"spec": {"infrastructureRef": {
                "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevMachineTemplate", "name": "t"}}},
            "kubeadmConfigSpec": {"clusterConfiguration": {"networking": {"podSubnet": "10.0.0.0/16"}}}}})
    }

    fn review(object: Value, old: Option<Value>) -> Review {
        Review::of("cp", object, old)
    }

    #[test]
    fn defaults_then_the_replicas_and_update_rules() {
        let mut object = kcp();
        default(&review(object.clone(), None), &mut object).unwrap();
        assert_eq!(object["spec"]["replicas"], 1);
        assert_eq!(object["spec"]["version"], "v1.31.0");
        assert_eq!(
            object["spec"]["rollout"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}})
        );
        assert_eq!(validate(&review(object.clone(), None)), Verdict::allowed());

        let mut even = object.clone();
        even["spec"]["replicas"] = json!(2);
        let Verdict::Invalid { group, errors, .. } = validate(&review(even, None)) else {
            panic!("refused")
        };
        assert_eq!(group, "cluster.x-k8s.io");
        assert_eq!(
            errors[0].to_string(),
            "spec.replicas: Forbidden: cannot be an even number when etcd is stacked"
        );

        let mut changed = object.clone();
        changed["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["networking"]["podSubnet"] =
            json!("10.1.0.0/16");
        changed["spec"]["version"] = json!("v1.33.0");
        changed["spec"]["replicas"] = json!(3);
        let Verdict::Invalid { errors, .. } = validate(&review(changed, Some(object))) else {
            panic!("refused")
        };
        let texts: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(texts, [
            "spec.kubeadmConfigSpec.clusterConfiguration.networking.podSubnet: Forbidden: cannot be modified",
            "spec.version: Forbidden: cannot update Kubernetes version from v1.31.0 to v1.33.0",
        ]);
    }

    #[test]
    fn the_scale_webhook_refuses_zero_and_even_stacked_counts() {
        assert_eq!(
            validate_scale(0, &kcp()),
            Verdict::denied("replicas cannot be 0")
        );
        assert!(matches!(
            validate_scale(2, &kcp()),
            Verdict::Denied { code: 403, .. }
        ));
        assert_eq!(validate_scale(3, &kcp()), Verdict::allowed());
    }
    fn texts(verdict: Verdict) -> Vec<String> {
        match verdict {
            Verdict::Invalid { errors, .. } => errors.iter().map(|e| e.to_string()).collect(),
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn image_tags_certificates_and_etcd_are_checked_as_upstream_does() {
        let mut object = kcp();
        default(&review(object.clone(), None), &mut object).unwrap();
        let config = &mut object["spec"]["kubeadmConfigSpec"]["clusterConfiguration"];
        config["dns"] = json!({"imageTag": "v1.11.1"});
        config["certificateValidityPeriodDays"] = json!(400);
        config["caCertificateValidityPeriodDays"] = json!(365);
        config["etcd"] =
            json!({"local": {"imageTag": "3.5:0"}, "external": {"endpoints": ["https://e:2379"]}});
        object["spec"]["rollout"]["before"] = json!({"certificatesExpiryDays": 500});
        assert_eq!(texts(validate(&review(object.clone(), None))), [
            "spec.kubeadmConfigSpec.clusterConfiguration.certificateValidityPeriodDays: Invalid value: 400: must be less than or equal to caCertificateValidityPeriodDays (365)",
            "spec.rollout.before.certificatesExpiryDays: Invalid value: 500: must be less than certificateValidityPeriodDays (400)",
            "spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag: Forbidden: tag 3.5:0 is invalid",
            "spec.kubeadmConfigSpec.clusterConfiguration.etcd.local: Forbidden: cannot have both external and local etcd",
        ]);
        let config = &mut object["spec"]["kubeadmConfigSpec"]["clusterConfiguration"];
        config["dns"]["imageTag"] = json!("latest");
        config["etcd"] = json!({});
        config["caCertificateValidityPeriodDays"] = json!(3650);
        object["spec"]["rollout"]["before"] = json!({});
        assert_eq!(texts(validate(&review(object, None))), [
            "dns.imageTag: Invalid value: \"latest\": failed to parse CoreDNS version: Invalid character(s) found in major number \"latest\"",
        ]);
    }

    fn template() -> Value {
        json!({"metadata": {"name": "cp"}, "spec": {"template": {"spec": {
            "kubeadmConfigSpec": {"clusterConfiguration": {"apiServer": {"certSANs": ["localhost"]}}}}}}})
    }

    #[test]
    fn a_template_is_checked_on_create_and_immutable_after() {
        assert_eq!(
            validate_template(&review(template(), None)),
            Verdict::allowed()
        );
        let mut bad = template();
        bad["spec"]["template"]["spec"]["rollout"] =
            json!({"strategy": {"type": "OnDelete", "rollingUpdate": {"maxSurge": 0}}});
        bad["spec"]["template"]["spec"]["machineNaming"] =
            json!({"template": "{{ .cluster.name }}"});
        assert_eq!(texts(validate_template(&review(bad, None))), [
            "spec.template.spec.rollout.strategy.type: Required value: only RollingUpdate is supported",
            "spec.template.spec.machineNaming.template: Invalid value: \"{{ .cluster.name }}\": invalid template, {{ .random }} is missing",
        ]);
        let mut changed = template();
        changed["spec"]["template"]["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]
            ["apiServer"]["certSANs"] = json!(["localhost", "10.0.0.1"]);
        let t = texts(validate_template(&review(changed, Some(template()))));
        assert_eq!(t.len(), 1);
        assert!(
            t[0].starts_with("spec.template.spec: Invalid value: "),
            "{t:?}"
        );
        assert!(t[0].ends_with("KubeadmControlPlaneTemplate spec.template.spec field is immutable. Please create new resource instead. Diff: spec.template.spec.kubeadmConfigSpec.clusterConfiguration.apiServer.certSANs: [\"localhost\"] -> [\"localhost\",\"10.0.0.1\"]"), "{t:?}");
        let mut relabelled = template();
        relabelled["metadata"]["labels"] = json!({"a": "b"});
        assert_eq!(
            validate_template(&review(relabelled, Some(template()))),
            Verdict::allowed()
        );
        // An older release's default strategy may be left out on update.
        let mut old = template();
        old["spec"]["template"]["spec"]["rollout"] =
            json!({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}});
        assert_eq!(
            validate_template(&review(template(), Some(old))),
            Verdict::allowed()
        );
    }
}
