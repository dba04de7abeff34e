//! Calling one webhook: the `AdmissionReview` request, the HTTPS POST to its `url` or to the
//! endpoints of its `service` (through the Service's EndpointSlices, so a webhook server on
//! the host can stand behind a selector-less Service), trusting its `caBundle`; and reading
//! the answer: allowed or denied, a JSON patch, warnings.

use super::{Subject, Webhook};
use crate::context::Ctx;
use crate::status::ApiError;
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use infrasim_store::{ObjectKey, ReadAt};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Where a webhook is served.
struct Target {
    /// `host:port` to connect to.
    address: String,
    /// The name its certificate must carry.
    server_name: String,
    path: String,
}

/// Calls `hook` about `subject`: its `response`, or `None` when the webhook failed and its
/// failure policy says to ignore that.
pub(super) async fn review(
    ctx: &Ctx,
    hook: &Webhook,
    subject: &Subject<'_>,
) -> Result<Option<Value>, ApiError> {
    let side_effects = hook.spec["sideEffects"].as_str().unwrap_or("Unknown");
    if subject.dry_run && !matches!(side_effects, "None" | "NoneOnDryRun") {
        return Err(ApiError::bad_request(format!(
            "admission webhook \"{}\" does not support dry run",
            hook.name
        )));
    }
    let uid = uuid::Uuid::new_v4().to_string();
    let body = request(ctx, subject, &uid);
    let timeout = hook.spec["timeoutSeconds"]
        .as_u64()
        .unwrap_or(10)
        .clamp(1, 30);
    let outcome = match target(ctx, &hook.spec["clientConfig"]) {
        Ok(target) => tokio::time::timeout(
            Duration::from_secs(timeout),
            post(&hook.spec["clientConfig"], &target, &body),
        )
        .await
        .unwrap_or_else(|_| Err(format!("context deadline exceeded after {timeout}s"))),
        Err(e) => Err(e),
    };
    let response = outcome.and_then(|answer| {
        let response = answer.get("response").cloned().unwrap_or(Value::Null);
        match response["uid"].as_str() {
            Some(u) if u == uid => Ok(response),
            other => Err(format!("expected response.uid={uid:?}, got {other:?}")),
        }
    });
    match response {
        Ok(r) => Ok(Some(r)),
        Err(_) if hook.spec["failurePolicy"].as_str() == Some("Ignore") => Ok(None),
        Err(e) => Err(ApiError::internal(format!(
            "Internal error occurred: failed calling webhook \"{}\": {e}",
            hook.name
        ))),
    }
}

/// The `AdmissionReview` kube-apiserver sends, objects in the version the client spoke.
fn request(ctx: &Ctx, subject: &Subject<'_>, uid: &str) -> Value {
    let info = &ctx.info;
    let as_requested = |o: Option<&Value>| {
        o.map(|o| {
            let mut o = o.clone();
            o["apiVersion"] = json!(info.api_version);
            o
        })
        .unwrap_or(Value::Null)
    };
    let kind = json!({"group": info.group, "version": info.version, "kind": info.kind});
    let resource = json!({"group": info.group, "version": info.version, "resource": info.plural});
    let mut request = json!({
        "uid": uid,
        "kind": kind, "resource": resource, "requestKind": kind, "requestResource": resource,
        "name": ctx.path.name.clone().or_else(|| subject.object.and_then(|o| {
            o.pointer("/metadata/name").and_then(Value::as_str).map(str::to_string)
        })).unwrap_or_default(),
        "operation": subject.operation.name(),
        "userInfo": super::user_info(ctx),
        "object": as_requested(subject.object),
        "oldObject": as_requested(subject.old),
        "dryRun": subject.dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": subject.operation.options_kind()},
    });
    if info.namespaced {
        request["namespace"] = json!(ctx.namespace());
    }
    if let Some(sub) = &ctx.path.subresource {
        request["subResource"] = json!(sub);
        request["requestSubResource"] = json!(sub);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

/// The webhook's address: its `url`, or its `service` resolved through EndpointSlices.
fn target(ctx: &Ctx, config: &Value) -> Result<Target, String> {
    if let Some(url) = config["url"].as_str() {
        let rest = url
            .strip_prefix("https://")
            .ok_or_else(|| format!("webhook URL {url:?} must be https"))?;
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
        let address = if authority.contains(':') {
            authority.to_string()
        } else {
            format!("{authority}:443")
        };
        return Ok(Target {
            address,
            server_name: host.trim_matches(|c| c == '[' || c == ']').to_string(),
            path: if path.is_empty() {
                "/".into()
            } else {
                path.into()
            },
        });
    }
    let service = &config["service"];
    let (namespace, name) = (
        service["namespace"].as_str().unwrap_or(""),
        service["name"].as_str().unwrap_or(""),
    );
    let port = service["port"].as_u64().unwrap_or(443);
    let address = endpoint(ctx, namespace, name, port)?;
    Ok(Target {
        address,
        server_name: format!("{name}.{namespace}.svc"),
        path: service["path"].as_str().unwrap_or("/").to_string(),
    })
}

/// A ready endpoint of Service `namespace/name` for its port `port`, from its EndpointSlices.
fn endpoint(ctx: &Ctx, namespace: &str, name: &str, port: u64) -> Result<String, String> {
    let group = &ctx.state.group;
    let svc = group
        .get("services", &ObjectKey::new(namespace, name))
        .and_then(|s| s.to_value().ok())
        .ok_or_else(|| format!("service \"{name}\" not found"))?;
    let service_port = svc["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["port"].as_u64() == Some(port))
        .cloned()
        .ok_or_else(|| format!("service {namespace}/{name} has no port {port}"))?;
    let port_name = service_port["name"].as_str().unwrap_or("");
    let slices = group
        .snapshot("endpointslices.discovery.k8s.io", ReadAt::Latest)
        .map_err(|e| e.to_string())?;
    for slice in slices.objects.values() {
        let Ok(slice) = slice.to_value() else {
            continue;
        };
        let owned = slice.pointer("/metadata/namespace").and_then(Value::as_str) == Some(namespace)
            && slice
                .pointer("/metadata/labels/kubernetes.io~1service-name")
                .and_then(Value::as_str)
                == Some(name);
        if !owned {
            continue;
        }
        let target_port = slice["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"].as_str().unwrap_or("") == port_name)
            .and_then(|p| p["port"].as_u64());
        let ready = slice["endpoints"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e.pointer("/conditions/ready").and_then(Value::as_bool) != Some(false));
        if let (Some(port), Some(address)) =
            (target_port, ready.and_then(|e| e["addresses"][0].as_str()))
        {
            return Ok(if address.contains(':') {
                format!("[{address}]:{port}")
            } else {
                format!("{address}:{port}")
            });
        }
    }
    Err(format!("no endpoints available for service \"{name}\""))
}

/// POSTs `body` to the webhook over HTTPS, trusting the configuration's `caBundle`.
async fn post(config: &Value, target: &Target, body: &Value) -> Result<Value, String> {
    let url = format!("https://{}{}", target.address, target.path);
    let fail = |e: &dyn std::fmt::Display| format!("failed to call webhook: Post \"{url}\": {e}");
    let ca = base64::engine::general_purpose::STANDARD
        .decode(config["caBundle"].as_str().unwrap_or(""))
        .map_err(|e| fail(&e))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in crate::tls::parse_certs(&String::from_utf8_lossy(&ca)).map_err(|e| fail(&e))? {
        roots.add(cert).map_err(|e| fail(&e))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| fail(&e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(target.server_name.clone())
        .map_err(|e| fail(&e))?;
    let tcp = tokio::net::TcpStream::connect(&target.address)
        .await
        .map_err(|e| fail(&e))?;
    let _ = tcp.set_nodelay(true);
    let stream = tokio_rustls::TlsConnector::from(Arc::new(tls))
        .connect(name, tcp)
        .await
        .map_err(|e| fail(&e))?;
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| fail(&e))?;
    tokio::spawn(conn);
    let request = http::Request::post(target.path.as_str())
        .header(http::header::HOST, target.server_name.as_str())
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| fail(&e))?;
    let response = send.send_request(request).await.map_err(|e| fail(&e))?;
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| fail(&e))?
        .to_bytes();
    if !status.is_success() {
        return Err(format!(
            "failed to call webhook: the server responded with {status}"
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("failed to decode the review: {e}"))
}

/// The request's refusal, if the webhook denied it: its status code (400 if none) and
/// message, as kube-apiserver words it.
pub(super) fn denied(hook: &Webhook, response: &Value) -> Result<(), ApiError> {
    if response["allowed"].as_bool() == Some(true) {
        return Ok(());
    }
    let status = &response["status"];
    let message = status["message"].as_str().unwrap_or("");
    let words = if message.is_empty() {
        format!(
            "admission webhook \"{}\" denied the request without explanation",
            hook.name
        )
    } else {
        format!(
            "admission webhook \"{}\" denied the request: {message}",
            hook.name
        )
    };
    let code = status["code"]
        .as_u64()
        .filter(|c| (400..600).contains(c))
        .unwrap_or(400);
    Err(ApiError::from_webhook(
        code as u16,
        status["reason"].as_str(),
        words,
    ))
}

/// The JSON patch of a mutating webhook's answer, if any.
pub(super) fn patch(
    hook: &Webhook,
    response: &Value,
) -> Result<Option<json_patch::Patch>, ApiError> {
    let Some(encoded) = response["patch"].as_str() else {
        return Ok(None);
    };
    let bad = |e: &dyn std::fmt::Display| {
        ApiError::internal(format!(
            "Internal error occurred: admission webhook \"{}\" returned an invalid patch: {e}",
            hook.name
        ))
    };
    if response["patchType"].as_str().unwrap_or("JSONPatch") != "JSONPatch" {
        return Err(bad(&"only JSONPatch is supported"));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| bad(&e))?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| bad(&e))
}

/// The warnings a webhook attached to its answer.
pub(super) fn warnings(response: &Value) -> Vec<String> {
    response["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str().map(str::to_string))
        .collect()
}
