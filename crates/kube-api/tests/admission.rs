//! Admission webhooks, called as kube-apiserver calls them: an HTTPS webhook server in the
//! test (a certificate of its own CA, given to the configurations as `caBundle`), reached by
//! `url` and through a selector-less Service and its EndpointSlice pointing at 127.0.0.1, the
//! way a controller manager on the host registers its webhooks.

use base64::Engine;
use infrasim_clock::SystemClock;
use infrasim_kube_api::pki::CertificateAuthority;
use infrasim_kube_api::{ApiConfig, ApiServer};
use infrasim_store::{Store, StoreConfig};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

mod common;

/// Reviews the webhook server received: (path, request).
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// The webhook server: `/mutate` labels objects `mutated=true` and warns; `/validate`
/// refuses a ConfigMap with a `forbidden` key (403) and the deletion of one labelled
/// `protect=yes`.
fn answer(path: &str, review: &Value) -> Value {
    let request = &review["request"];
    let uid = request["uid"].clone();
    let object = &request["object"];
    match path {
        "/mutate" => {
            let patch = if object.pointer("/metadata/labels").is_some() {
                json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "true"}])
            } else {
                json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "true"}}])
            };
            let patch = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
            json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch,
                   "warnings": ["mutated by the test webhook"]})
        }
        _ => {
            let forbidden = object.pointer("/data/forbidden").is_some();
            let protected = request["operation"] == "DELETE"
                && request.pointer("/oldObject/metadata/labels/protect") == Some(&json!("yes"));
            if forbidden || protected {
                let message = if forbidden {
                    "forbidden key"
                } else {
                    "protected"
                };
                json!({"uid": uid, "allowed": false,
                       "status": {"code": 403, "message": message}})
            } else {
                json!({"uid": uid, "allowed": true})
            }
        }
    }
}

async fn webhook_server(ca: &CertificateAuthority, seen: Seen) -> u16 {
    common::https_json_server(ca, move |path, review| {
        seen.lock()
            .expect("lock")
            .push((path.to_string(), review["request"].clone()));
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
               "response": answer(path, &review)})
    })
    .await
}

async fn send(
    server: &ApiServer,
    method: &str,
    path: &str,
    body: Value,
) -> (u16, Value, Vec<String>) {
    let content_type = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let answer = common::as_admin(server, method, path, content_type, body.to_string()).await;
    (answer.status, answer.json(), answer.warnings)
}

fn webhook(name: &str, client: Value, operations: &[&str], policy: &str) -> Value {
    json!({"name": name, "clientConfig": client, "sideEffects": "None",
           "admissionReviewVersions": ["v1"], "failurePolicy": policy, "timeoutSeconds": 5,
           "rules": [{"operations": operations, "apiGroups": [""], "apiVersions": ["v1"],
                      "resources": ["configmaps"]}]})
}

#[tokio::test]
async fn webhooks_mutate_refuse_warn_and_fail_as_their_policies_say() {
    let store = Store::in_memory(StoreConfig::default());
    let group = store.create_group("g").expect("a group");
    let ca = CertificateAuthority::generate("ca").expect("a CA");
    let server = ApiServer::new(
        group,
        ca.clone(),
        SystemClock::shared(),
        ApiConfig::default(),
    );
    let seen: Seen = Arc::default();
    let webhook_ca = CertificateAuthority::generate("webhook-ca").expect("a CA");
    let port = webhook_server(&webhook_ca, seen.clone()).await;
    let bundle = base64::engine::general_purpose::STANDARD.encode(&webhook_ca.cert_pem);

    // The mutating webhook through a selector-less Service and its EndpointSlice.
    let created = [
        (
            "/api/v1/namespaces/default/services",
            json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "webhook"}, "spec": {"ports": [{"name": "https", "port": 443}]}}),
        ),
        (
            "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
            json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "webhook-1", "labels": {"kubernetes.io/service-name": "webhook"}},
            "addressType": "IPv4", "ports": [{"name": "https", "port": port}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]}),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
            json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "labeller"},
            "webhooks": [webhook("mutate.example.com", json!({"caBundle": bundle,
                "service": {"namespace": "default", "name": "webhook", "path": "/mutate"}}),
                &["CREATE"], "Fail")]}),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "guard"},
            "webhooks": [
                webhook("validate.example.com", json!({"caBundle": bundle,
                    "url": format!("https://127.0.0.1:{port}/validate")}),
                    &["CREATE", "UPDATE", "DELETE"], "Fail"),
                webhook("gone.example.com", json!({"caBundle": bundle,
                    "url": "https://127.0.0.1:1/validate"}), &["CREATE"], "Ignore")]}),
        ),
    ];
    for (path, body) in created {
        let (status, answer, _) = send(&server, "POST", path, body).await;
        assert_eq!(status, 201, "{path}: {answer}");
    }

    let cms = "/api/v1/namespaces/default/configmaps";
    let (status, made, warnings) = send(&server, "POST", cms,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}})).await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(
        made["metadata"]["labels"]["mutated"], "true",
        "the mutating webhook's patch"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("mutated by the test webhook")),
        "{warnings:?}"
    );
    // The review named the operation, the user, and carried the object.
    {
        let seen = seen.lock().expect("lock");
        let (_, review) = seen
            .iter()
            .find(|(p, _)| p == "/mutate")
            .expect("the mutating webhook was called");
        assert_eq!(review["operation"], "CREATE");
        assert_eq!(review["userInfo"]["username"], "admin");
        assert_eq!(review["object"]["data"]["k"], "v");
        assert_eq!(
            review["resource"],
            json!({"group": "", "version": "v1", "resource": "configmaps"})
        );
    }

    // The validating webhook refuses, with its code and words, whichever verb tries.
    let forbidden = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"},
                           "data": {"forbidden": "x"}});
    let (status, refused, _) = send(&server, "POST", cms, forbidden).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "admission webhook \"validate.example.com\" denied the request: forbidden key"
    );
    let (status, _, _) = send(
        &server,
        "PATCH",
        &format!("{cms}/a"),
        json!({"data": {"forbidden": "x"}}),
    )
    .await;
    assert_eq!(status, 403);
    let mut replaced = made.clone();
    replaced["data"]["forbidden"] = json!("x");
    let (status, _, _) = send(&server, "PUT", &format!("{cms}/a"), replaced).await;
    assert_eq!(status, 403);

    // DELETE goes to the validating webhook with the old object.
    let (status, _, _) = send(
        &server,
        "PATCH",
        &format!("{cms}/a"),
        json!({"metadata": {"labels": {"protect": "yes"}}}),
    )
    .await;
    assert_eq!(status, 200);
    let (status, refused, _) = send(&server, "DELETE", &format!("{cms}/a"), json!({})).await;
    assert_eq!(
        (status, refused["message"].as_str()),
        (
            403,
            Some("admission webhook \"validate.example.com\" denied the request: protected")
        )
    );

    // A webhook that cannot be reached fails the request unless its policy says Ignore.
    let path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/guard";
    let (_, mut guard, _) = send(&server, "GET", path, json!({})).await;
    guard["webhooks"][1]["failurePolicy"] = json!("Fail");
    let (status, _, _) = send(&server, "PUT", path, guard).await;
    assert_eq!(status, 200);
    let (status, failed, _) = send(
        &server,
        "POST",
        cms,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
    )
    .await;
    assert_eq!(status, 500, "{failed}");
    let message = failed["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with("Internal error occurred: failed calling webhook \"gone.example.com\""),
        "{message}"
    );
}

#[tokio::test]
async fn validating_admission_policies_deny_and_warn_as_their_bindings_say() {
    let store = Store::in_memory(StoreConfig::default());
    let group = store.create_group("g").expect("a group");
    let ca = CertificateAuthority::generate("ca").expect("a CA");
    let server = ApiServer::new(group, ca, SystemClock::shared(), ApiConfig::default());
    let rules = json!({"resourceRules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""],
                                          "apiVersions": ["v1"], "resources": ["configmaps"]}]});
    let vap = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
    let vapb = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
    let cms = "/api/v1/namespaces/default/configmaps";
    for (path, body) in [
        (
            cms,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "limits"},
                     "data": {"max": "2"}}),
        ),
        (
            vap,
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "max-keys"},
            "spec": {"matchConstraints": rules, "failurePolicy": "Fail",
                     "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                     "matchConditions": [{"name": "not-the-limits", "expression": "object.metadata.name != 'limits'"}],
                     "variables": [{"name": "keys", "expression": "has(object.data) ? size(object.data) : 0"}],
                     "validations": [{"expression": "variables.keys <= int(params.data.max)",
                                      "messageExpression": "'too many keys: ' + string(variables.keys)"}]}}),
        ),
        (
            vapb,
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "max-keys-binding"},
            "spec": {"policyName": "max-keys", "validationActions": ["Deny"],
                     "paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"}}}),
        ),
        (
            vap,
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "labelled"},
            "spec": {"matchConstraints": rules,
                     "validations": [{"expression": "has(object.metadata.labels)", "message": "labels, please"}]}}),
        ),
        (
            vapb,
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "labelled-binding"},
            "spec": {"policyName": "labelled", "validationActions": ["Warn"]}}),
        ),
    ] {
        let (status, answer, _) = send(&server, "POST", path, body).await;
        assert_eq!(status, 201, "{path}: {answer}");
    }

    let three = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
                       "data": {"a": "1", "b": "2", "c": "3"}});
    let (status, refused, _) = send(&server, "POST", cms, three).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["message"],
               "ValidatingAdmissionPolicy 'max-keys' with binding 'max-keys-binding' denied request: too many keys: 3");
    let two = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "small"},
                     "data": {"a": "1", "b": "2"}});
    let (status, made, warnings) = send(&server, "POST", cms, two).await;
    assert_eq!(status, 201, "{made}");
    assert!(warnings.iter().any(|w| w.contains(
        "Validation failed for ValidatingAdmissionPolicy 'labelled' with binding 'labelled-binding': labels, please")),
        "{warnings:?}");
    // Without its parameters, a Deny binding refuses.
    let (status, _, _) = send(&server, "DELETE", &format!("{cms}/limits"), json!({})).await;
    assert_eq!(status, 200);
    let (status, refused, _) = send(
        &server,
        "POST",
        cms,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "later"}}),
    )
    .await;
    // A configuration error has no reason of its own: 422 Invalid, as kube-apiserver answers.
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["message"],
        "ValidatingAdmissionPolicy 'max-keys' with binding 'max-keys-binding' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction");
}

/// A policy whose expressions cannot run is refused when written; its auditAnnotations are
/// evaluated on every request it applies to, and one that fails refuses under `Fail`.
#[tokio::test]
async fn policies_are_validated_and_their_audit_annotations_evaluated() {
    let store = Store::in_memory(StoreConfig::default());
    let group = store.create_group("g").expect("a group");
    let ca = CertificateAuthority::generate("ca").expect("a CA");
    let server = ApiServer::new(group, ca, SystemClock::shared(), ApiConfig::default());
    let vap = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
    let vapb = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
    let cms = "/api/v1/namespaces/default/configmaps";
    let policy = |name: &str, failure: &str, spec: Value| {
        let mut p = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {"failurePolicy": failure, "matchConstraints": {"resourceRules": [{
                "operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]}}});
        for (k, v) in spec.as_object().into_iter().flatten() {
            p["spec"][k] = v.clone();
        }
        p
    };
    let binding = |name: &str, actions: Value| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name}, "spec": {"policyName": name, "validationActions": actions}})
    };

    let broken = policy(
        "broken",
        "Fail",
        json!({"validations": [{"expression": "object.data.x =="}]}),
    );
    let (status, refused, _) = send(&server, "POST", vap, broken).await;
    assert_eq!(status, 422, "{refused}");
    let message = refused["message"].as_str().unwrap_or("");
    assert!(message.starts_with("ValidatingAdmissionPolicy.admissionregistration.k8s.io \"broken\" is invalid: spec.validations[0].expression: Invalid value: \"object.data.x ==\": compilation failed: ERROR: <input>:1:17: Syntax error:"), "{message}");
    assert_eq!(
        refused["details"]["causes"][0]["field"],
        "spec.validations[0].expression"
    );
    let (status, refused, _) = send(
        &server,
        "POST",
        vapb,
        binding("both", json!(["Deny", "Warn"])),
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(
        refused["details"]["causes"][0]["field"],
        "spec.validationActions"
    );

    for (name, failure, expression) in [
        ("fails", "Fail", "string(object.data.missing)"),
        ("ignores", "Ignore", "string(object.data.missing)"),
        ("records", "Fail", "'keys: ' + string(size(object.data))"),
    ] {
        let p = policy(
            name,
            failure,
            json!({"auditAnnotations": [{"key": "k", "valueExpression": expression}]}),
        );
        let (status, made, _) = send(&server, "POST", vap, p).await;
        assert_eq!(status, 201, "{made}");
        // Created with its defaults.
        assert_eq!(
            made["spec"]["matchConstraints"]["matchPolicy"],
            "Equivalent"
        );
        let (status, made, _) = send(&server, "POST", vapb, binding(name, json!(["Audit"]))).await;
        assert_eq!(status, 201, "{made}");
    }
    // The status controller's type checking: a field ConfigMaps lack is warned of, the spec's
    // generation is observed, and the generation stays.
    let typo = policy(
        "typo",
        "Fail",
        json!({"validations": [{"expression": "has(object.dta)"}]}),
    );
    let (status, _, _) = send(&server, "POST", vap, typo).await;
    assert_eq!(status, 201);
    let (_, read, _) = send(&server, "GET", &format!("{vap}/typo"), json!({})).await;
    assert_eq!(read["metadata"]["generation"], 1, "{read}");
    assert_eq!(read["status"]["observedGeneration"], 1, "{read}");
    assert_eq!(
        read["status"]["typeChecking"]["expressionWarnings"],
        json!([{
        "fieldRef": "spec.validations[0].expression",
        "warning": "/v1, Kind=ConfigMap: ERROR: <input>:1:11: undefined field 'dta'\n | has(object.dta)\n | ..........^\n"}])
    );
    let fixed = json!({"spec": {"validations": [{"expression": "has(object.data)"}]}});
    let (status, patched, _) = send(&server, "PATCH", &format!("{vap}/typo"), fixed).await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["metadata"]["generation"], 2, "{patched}");
    assert_eq!(
        patched["status"],
        json!({"observedGeneration": 2, "typeChecking": {}})
    );

    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
    let (status, refused, _) = send(&server, "POST", cms, cm.clone()).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["message"],
        "ValidatingAdmissionPolicy 'fails' with binding 'fails' denied request: expression 'string(object.data.missing)' resulted in error: No such key: missing");
    let (status, _, _) = send(&server, "DELETE", &format!("{vapb}/fails"), json!({})).await;
    assert_eq!(status, 200);
    let (status, made, _) = send(&server, "POST", cms, cm).await;
    assert_eq!(status, 201, "{made}");
}
