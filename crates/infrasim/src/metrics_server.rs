//! `--metrics-bind-address`: the process's metrics (`/metrics`, and the objects' state at
//! `/metrics/state`) for a controller whose management plane is in another process, served
//! as controller-runtime's secure metrics server serves a manager's: over HTTPS with a
//! certificate of a CA made at start (scrapers skip verifying it, or are given it out of
//! band, as with controller-runtime's self-signed one), and only to a bearer token the plane
//! authenticates (a TokenReview) and authorizes to `get` the path (a SubjectAccessReview of
//! a non-resource URL, as kube-apiserver authorizes its own `/metrics`: `system:monitoring`
//! may). A process with no plane to ask (`infrasim fleet`) admits one token instead,
//! made at start and written where only its user reads it.

use hyper::body::Incoming;
use infrasim_kube_api::http::{json_typed, Body};
use infrasim_kube_api::metrics::state_metrics_response;
use infrasim_metrics::{Format, Metrics};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use std::net::SocketAddr;
use std::sync::Arc;

type Response = http::Response<Body>;

/// A `--metrics-bind-address` as controller-runtime reads one: `HOST:PORT`, `:PORT` for
/// every address (as Go's listeners read it, and as kubebuilder's manifests write
/// `:8443`), or `0` for no metrics server at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindAddress(pub Option<SocketAddr>);

impl std::str::FromStr for BindAddress {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "0" {
            return Ok(BindAddress(None));
        }
        let full = match s.strip_prefix(':') {
            Some(port) => format!("0.0.0.0:{port}"),
            None => s.to_string(),
        };
        full.parse().map(|a| BindAddress(Some(a))).map_err(|_| {
            format!("{s:?} is not HOST:PORT, :PORT or 0 (an IP address, not a name, for HOST)")
        })
    }
}

/// Who may read the metrics.
#[derive(Clone)]
pub enum Access {
    /// Whom this plane authenticates and allows to `get` the path.
    Plane(kube::Client),
    /// The bearer of this token.
    Token(Arc<str>),
}

/// Serves `metrics` on `listen` to those `access` admits; the address it listens on and the
/// CA that signed its certificate (PEM).
pub async fn serve(
    listen: SocketAddr,
    metrics: Metrics,
    access: Access,
) -> anyhow::Result<(SocketAddr, String)> {
    let answer = move |req| {
        let (metrics, access) = (metrics.clone(), access.clone());
        async move { answer(&metrics, access, req).await }
    };
    let (addr, ca) = crate::https::serve(listen, "infrasim-metrics", "metrics", answer).await?;
    Ok((addr, ca.cert_pem.clone()))
}

fn reply(code: u16, content_type: &'static str, body: String) -> Response {
    json_typed(code, body, content_type)
}

async fn answer(metrics: &Metrics, access: Access, req: http::Request<Incoming>) -> Response {
    let path = req.uri().path().to_string();
    if path != "/metrics" && path != "/metrics/state" {
        return reply(404, "text/plain", "404 page not found\n".into());
    }
    if req.method() != http::Method::GET {
        return reply(405, "text/plain", "only GET\n".into());
    }
    let header = |name| req.headers().get(name).and_then(|v| v.to_str().ok());
    let Some(token) = header(http::header::AUTHORIZATION).and_then(|a| a.strip_prefix("Bearer "))
    else {
        return reply(401, "text/plain", "Unauthorized\n".into());
    };
    let decided = match access {
        Access::Plane(client) => allowed(client, token.trim(), &path).await,
        Access::Token(expected) if same(token.trim().as_bytes(), expected.as_bytes()) => Ok(true),
        Access::Token(_) => Err(Refused::Unauthenticated),
    };
    match decided {
        Ok(true) => {}
        Ok(false) => {
            let why = format!("Authorization denied for get on {path}\n");
            return reply(403, "text/plain", why);
        }
        Err(Refused::Unauthenticated) => return reply(401, "text/plain", "Unauthorized\n".into()),
        Err(Refused::Plane(e)) => {
            tracing::warn!(error = %e, "asking the plane about a metrics scrape");
            return reply(500, "text/plain", format!("{e}\n"));
        }
    }
    let format = Format::negotiate(header(http::header::ACCEPT));
    match path.as_str() {
        "/metrics/state" => {
            match state_metrics_response(metrics.state(), format, req.uri().query()) {
                Ok(answer) => answer,
                Err(why) => reply(400, "text/plain", format!("{why}\n")),
            }
        }
        _ => reply(200, format.content_type(), metrics.render(format)),
    }
}

/// Whether two secrets are equal, in a time that does not say where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

enum Refused {
    Unauthenticated,
    Plane(kube::Error),
}

/// Whether the plane says `token` is someone who may `get` `path`.
async fn allowed(client: kube::Client, token: &str, path: &str) -> Result<bool, Refused> {
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    let reviewed = Api::<TokenReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .map_err(Refused::Plane)?;
    let status = reviewed.status.unwrap_or_default();
    let (true, Some(user)) = (status.authenticated.unwrap_or(false), status.user) else {
        return Err(Refused::Unauthenticated);
    };
    let access = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username,
            groups: user.groups,
            uid: user.uid,
            extra: user.extra,
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.to_string()),
                verb: Some("get".to_string()),
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let decided = Api::<SubjectAccessReview>::all(client)
        .create(&PostParams::default(), &access)
        .await
        .map_err(Refused::Plane)?;
    Ok(decided.status.is_some_and(|s| s.allowed))
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_controller_runtimes_forms() {
        use super::BindAddress;
        let read = |s: &str| s.parse::<BindAddress>().map(|b| b.0.map(|a| a.to_string()));
        assert_eq!(read(":8443"), Ok(Some("0.0.0.0:8443".into())));
        assert_eq!(read("127.0.0.1:9000"), Ok(Some("127.0.0.1:9000".into())));
        assert_eq!(read("[::1]:9000"), Ok(Some("[::1]:9000".into())));
        assert_eq!(read("0"), Ok(None));
        assert!(read("localhost:9000").is_err());
        assert!(read("8443").is_err());
    }

    use super::*;

    #[test]
    fn only_the_same_token_is_the_same() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
        assert!(!same(b"", b"a"));
    }
}
