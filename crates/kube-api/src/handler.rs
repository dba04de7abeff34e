//! Request dispatch: authenticate, route, negotiate, and call the handler for the verb.

use crate::auth::Identity;
use crate::context::Ctx;
use crate::http::{
    error_response, json_value, negotiate, read_body, Body, Format, HandlerResult, RequestBody,
};
use crate::request::{route, Query, ResourcePath, Route};
use crate::resources::Computed;
use crate::state::State;
use crate::status::ApiError;
use crate::verbs;
use crate::{discovery, list, watch};
use http::{HeaderMap, Method, Request, Response};
use serde_json::json;
use std::sync::Arc;

pub(crate) async fn handle(
    state: Arc<State>,
    req: Request<RequestBody>,
    cert_identity: Option<Identity>,
) -> Response<Body> {
    let identity = cert_identity.or_else(|| {
        req.headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| crate::authn::bearer(&state, v, state.clock.now()))
    });
    let Some(identity) = identity else {
        return error_response(&ApiError::unauthorized());
    };
    let identity = match crate::authz::impersonate(&state, identity, req.headers()) {
        Ok(i) => i,
        Err(e) => return error_response(&e),
    };
    let method = req.method().clone();
    let uri = req.uri().clone();
    let user = identity.user.clone();
    let (target, query) = (route(uri.path()), Query::parse(uri.query()));
    let attrs = crate::authz::attributes(&method, uri.path(), &target, &query);
    if let Err(e) = crate::authz::authorize(&state, &identity, &attrs) {
        tracing::debug!(%method, path = uri.path(), %user, "forbidden");
        return error_response(&e);
    }
    let observation = state
        .config
        .metrics
        .as_ref()
        .map(|m| m.start(&method, &uri, req.headers(), &target, &query));
    // An injected fault delays or refuses the request once it is known whose it is, as an
    // overloaded kube-apiserver's priority-and-fairness filter does, and the request's
    // metrics count it as any other.
    let resp = match state.faults.apply(&method).await {
        Some(refused) => refused,
        None => serve(state, req, identity).await,
    };
    let status = resp.status().as_u16();
    tracing::debug!(%method, path = uri.path(), %user, status, "request");
    match observation.and_then(|o| o.finish(status)) {
        // A watch's stream carries what keeps it counted, and drops it when it ends.
        Some(open) => resp.map(|body| {
            use http_body_util::BodyExt;
            body.map_frame(move |frame| {
                let _counted = &open;
                frame
            })
            .boxed_unsync()
        }),
        None => resp,
    }
}

/// Serves an admitted request: its writes are answered only once they are durable; the
/// store lets the group's other writers go on meanwhile, so concurrent requests share a sync.
async fn serve(state: Arc<State>, req: Request<RequestBody>, identity: Identity) -> Response<Body> {
    let (result, durable) = infrasim_store::durability::scope(dispatch(state, req, identity)).await;
    match durable.wait().await {
        Ok(()) => result.unwrap_or_else(|e| error_response(&e)),
        Err(e) => error_response(&ApiError::internal(e.to_string())),
    }
}

async fn dispatch(
    state: Arc<State>,
    req: Request<RequestBody>,
    identity: Identity,
) -> HandlerResult {
    let (mut parts, body) = req.into_parts();
    let target = route(parts.uri.path());
    if let Some(request) = port_forward_request(&state, &target) {
        return Ok(crate::portforward::handle(request, &mut parts));
    }
    let negotiated = negotiate(&parts.headers);
    let query = Query::parse(parts.uri.query());
    match target {
        Route::Resource(path) => {
            resource_route(state, identity, path, query, parts, body, negotiated).await
        }
        other => fixed_route(&state, other, &parts, negotiated),
    }
}

/// A pod's `portforward` subresource is an upgraded connection, not a request/response, so
/// it is picked out before anything reads the body or negotiates a format.
fn port_forward_request<'a>(
    state: &'a State,
    target: &'a Route,
) -> Option<crate::portforward::Request<'a>> {
    let Route::Resource(p) = target else {
        return None;
    };
    if let (true, Some(ns), Some(pod)) = (
        p.group.is_empty()
            && p.resource == "pods"
            && p.subresource.as_deref() == Some("portforward"),
        p.namespace.as_deref(),
        p.name.as_deref(),
    ) {
        return Some(crate::portforward::Request {
            forwarder: state.port_forwarder.get().map(|f| &f.0),
            sessions: &state.port_forwards,
            namespace: ns,
            pod,
        });
    }
    None
}

/// The negotiated format, or the 406 a client whose `Accept` names nothing servable gets.
fn acceptable(negotiated: Option<Format>, headers: &HeaderMap) -> Result<Format, ApiError> {
    negotiated.ok_or_else(|| {
        ApiError::not_acceptable(
            headers
                .get(http::header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or(""),
        )
    })
}

/// Health, metrics, version, discovery and OpenAPI: read-only paths outside any resource.
fn fixed_route(
    state: &State,
    target: Route,
    parts: &http::request::Parts,
    negotiated: Option<Format>,
) -> HandlerResult {
    let format = || acceptable(negotiated, &parts.headers);
    let get_only = |m: &Method| {
        if m == Method::GET || m == Method::HEAD {
            Ok(())
        } else {
            Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({m})"
            )))
        }
    };
    match target {
        Route::Health => {
            get_only(&parts.method)?;
            Ok(crate::http::json_typed(
                200,
                "ok",
                "text/plain; charset=utf-8",
            ))
        }
        Route::Metrics => {
            get_only(&parts.method)?;
            Ok(metrics_answer(state, &parts.headers))
        }
        Route::StateMetrics => {
            get_only(&parts.method)?;
            state_metrics_answer(state, &parts.headers, parts.uri.query())
        }
        Route::Version => {
            get_only(&parts.method)?;
            Ok(json_value(200, &discovery::version(state)))
        }
        Route::CoreGroup => {
            get_only(&parts.method)?;
            Ok(discovery::core_group(state, format()?))
        }
        Route::Groups => {
            get_only(&parts.method)?;
            Ok(discovery::groups(state, format()?))
        }
        Route::Group(group) => {
            get_only(&parts.method)?;
            discovery::group(state, &group)
        }
        Route::GroupVersion { group, version } => {
            get_only(&parts.method)?;
            discovery::group_version(state, &group, &version)
        }
        Route::OpenApi(rest) => {
            get_only(&parts.method)?;
            crate::openapi::serve(state, &rest, &parts.headers)
        }
        // Resource paths go to `resource_route`; only an unknown path is left.
        Route::Unknown | Route::Resource(_) => Err(not_found_path()),
    }
}

/// `/metrics`: the process's registry when this is the management plane (in the format the
/// scraper asks for), with this server's port-forward sessions; a workload cluster's server
/// has only the latter.
fn metrics_answer(state: &State, headers: &HeaderMap) -> Response<Body> {
    use infrasim_metrics::Format;
    let accept = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let format = Format::negotiate(accept);
    let sessions = state.port_forwards.metrics(format == Format::OpenMetrics);
    let text = match state.config.metrics.as_ref().and_then(|m| m.render(format)) {
        Some(all) => match all.strip_suffix("# EOF\n") {
            Some(open) => format!("{open}{sessions}# EOF\n"),
            None => format!("{all}{sessions}"),
        },
        None => return crate::http::json_typed(200, sessions, Format::Classic.content_type()),
    };
    crate::http::json_typed(200, text, format.content_type())
}

/// `/metrics/state`: the state metrics of the objects the controllers of this process
/// watch, on the management plane only, sent as they are rendered.
fn state_metrics_answer(state: &State, headers: &HeaderMap, query: Option<&str>) -> HandlerResult {
    use infrasim_metrics::Format;
    let accept = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let format = Format::negotiate(accept);
    match state.config.metrics.as_ref().and_then(|m| m.state()) {
        Some(table) => crate::metrics::state_metrics_response(table, format, query)
            .map_err(ApiError::bad_request),
        None => Err(not_found_path()),
    }
}

/// Looks the resource up, reads the body of a verb that has one, and answers with the
/// warning of a deprecated version attached.
async fn resource_route(
    state: Arc<State>,
    identity: Identity,
    path: ResourcePath,
    query: Query,
    parts: http::request::Parts,
    body: RequestBody,
    negotiated: Option<Format>,
) -> HandlerResult {
    let info = state
        .registry
        .find(&path.group, &path.version, &path.resource)
        .ok_or_else(not_found_path)?;
    if !info.namespaced && path.namespace.is_some() {
        return Err(not_found_path());
    }
    let max_body = state.config.max_body_bytes;
    let format = acceptable(negotiated, &parts.headers)?;
    let ctx = Ctx {
        state,
        info,
        path,
        query,
        format,
        headers: parts.headers,
        identity,
    };
    let method = parts.method;
    // kube-apiserver warns on every request to a deprecated version.
    let deprecation = ctx.info.deprecation.clone();
    let needs_body = method == Method::POST
        || method == Method::PUT
        || method == Method::PATCH
        || method == Method::DELETE;
    let body = if needs_body {
        read_body(body, &ctx.headers, max_body).await?
    } else {
        bytes::Bytes::new()
    };
    let answer = resource(ctx, method, body).await;
    match deprecation {
        Some(warning) => crate::write::input::with_warnings(answer, &[warning]),
        None => answer,
    }
}

fn not_found_path() -> ApiError {
    ApiError::not_found("the server could not find the requested resource")
        .with_details(json!({"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]}))
}

async fn resource(ctx: Ctx, method: Method, body: bytes::Bytes) -> HandlerResult {
    if let Some(computed) = ctx.info.computed {
        return match (computed, method, ctx.path.name.is_some()) {
            (Computed::CreateOnly, Method::POST, false) => {
                crate::access_review::create(&ctx, &body)
            }
            (Computed::ReadOnly, Method::GET, _) if ctx.info.kind == "ComponentStatus" => {
                crate::component_status::get(&ctx)
            }
            (Computed::ReadOnly, Method::GET, _) => crate::resource_metrics::get(&ctx),
            _ => Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            )),
        };
    }
    if ctx.info.kind == "ServiceAccount" && ctx.path.subresource.as_deref() == Some("token") {
        return match method {
            Method::POST => crate::token_resources::token_request(&ctx, &body),
            _ => Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            )),
        };
    }
    if ctx.info.kind == "Pod" && !ctx.info.custom {
        match ctx.path.subresource.as_deref() {
            Some("log") if method == Method::GET => return crate::pod_log::log(&ctx),
            Some("binding") if method == Method::POST && ctx.path.name.is_some() => {
                return crate::binding::create(&ctx, &body).await
            }
            Some("eviction") if method == Method::POST && ctx.path.name.is_some() => {
                return crate::eviction::evict(&ctx, &body).await
            }
            Some("exec" | "attach") => {
                let name = ctx.path.name.clone().unwrap_or_default();
                return Err(ApiError::bad_request(format!(
                    "pods \"{name}\" is simulated by infrasim: no container process runs, so {} is not possible",
                    ctx.path.subresource.as_deref().unwrap_or("")
                )));
            }
            _ => {}
        }
    }
    if ctx.path.subresource.as_deref() == Some("scale") && ctx.path.name.is_some() {
        return crate::scale::handle(&ctx, &method, &body).await;
    }
    let sub = ctx.path.subresource.clone();
    let has_name = ctx.path.name.is_some();
    let cluster_wide_namespaced = ctx.info.namespaced && ctx.path.namespace.is_none();
    match sub.as_deref() {
        None => {}
        Some("status") if ctx.info.has_status => {}
        Some("approval") if ctx.info.kind == "CertificateSigningRequest" && !ctx.info.custom => {}
        Some("finalize")
            if ctx.info.kind == "Namespace" && !ctx.info.custom && method == Method::PUT => {}
        Some("ephemeralcontainers")
            if ctx.info.kind == "Pod" && !ctx.info.custom && method != Method::POST => {}
        Some(other) => {
            return Err(ApiError::not_found(format!(
                "the server could not find the requested resource ({} {}/{other})",
                &ctx.info.plural,
                ctx.path.name.as_deref().unwrap_or("")
            )))
        }
    }
    if cluster_wide_namespaced && (has_name || method != Method::GET) {
        return Err(if has_name {
            not_found_path()
        } else {
            ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            )
        });
    }
    let watching =
        ctx.path.watch_prefix || ctx.query.flag("watch").map_err(ApiError::bad_request)?;
    match (method, has_name, sub.is_some()) {
        (Method::GET, false, false) if watching => watch::watch(ctx).await,
        (Method::GET, false, false) => list::list(&ctx).await,
        (Method::GET, true, _) if watching => {
            // Watching one object: a watch with a name field selector, as kube-apiserver does.
            watch::watch(ctx).await
        }
        (Method::GET, true, _) => verbs::get::get(&ctx).await,
        (Method::POST, false, false) => verbs::create::create(&ctx, &body).await,
        (Method::PUT, true, _) => verbs::update::update(&ctx, &body).await,
        (Method::PATCH, true, _) if verbs::apply::requested(&ctx) => {
            verbs::apply::apply(&ctx, &body).await
        }
        (Method::PATCH, true, _) => verbs::patch::patch(&ctx, &body).await,
        (Method::DELETE, true, false) => verbs::delete::delete(&ctx, &body).await,
        (Method::DELETE, false, false) => verbs::delete::delete_collection(&ctx, &body).await,
        _ => Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        )),
    }
}
