//! client-go's `rest_client_requests_total{code, host, method}` for the controllers' own
//! requests to their management plane, which controller-runtime registers and Cluster API's
//! `controller-runtime` dashboard reads ("Requests by code and method"). A `kube::Client`
//! is a tower service stack; [`Counted`] sits under it and counts each request once its
//! answer's status is known (`<error>` when none came, as client-go labels a failed one).

use futures::future::BoxFuture;
use infrasim_metrics::Metrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use std::sync::Arc;
use std::task::{Context, Poll};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Requested {
    code: String,
    host: Arc<str>,
    method: String,
}

/// The family of the controllers' requests; clones share it.
#[derive(Clone, Debug)]
pub struct ClientMetrics {
    requests: Family<Requested, Counter>,
}

impl ClientMetrics {
    /// Registers the family in `metrics`, once per process.
    pub fn register(metrics: &Metrics) -> Self {
        let requests = Family::default();
        metrics.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host",
            requests.clone(),
        );
        ClientMetrics { requests }
    }

    /// `service` (a client's), its requests counted under `host`.
    pub fn count<S>(&self, host: &str, service: S) -> Counted<S> {
        Counted {
            inner: service,
            layer: self.layer(host),
        }
    }

    /// A layer that counts the requests of the service it wraps under `host` (the plane's
    /// `host:port`, as client-go labels it).
    pub fn layer(&self, host: &str) -> CountLayer {
        CountLayer {
            requests: self.requests.clone(),
            host: Arc::from(host),
        }
    }
}

/// Wraps a client's service in [`Counted`].
#[derive(Clone, Debug)]
pub struct CountLayer {
    requests: Family<Requested, Counter>,
    host: Arc<str>,
}

impl<S> tower_layer::Layer<S> for CountLayer {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            layer: self.clone(),
        }
    }
}

/// A client service whose requests are counted.
#[derive(Clone, Debug)]
pub struct Counted<S> {
    inner: S,
    layer: CountLayer,
}

impl<S, B, R> tower_service::Service<http::Request<B>> for Counted<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = request.method().as_str().to_string();
        let answer = self.inner.call(request);
        let layer = self.layer.clone();
        Box::pin(async move {
            let answer = answer.await;
            let code = match &answer {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "<error>".to_string(),
            };
            let requested = Requested {
                code,
                host: layer.host,
                method,
            };
            layer.requests.get_or_create(&requested).inc();
            answer
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower_layer::Layer;
    use tower_service::Service;

    /// Answers every request with the status its path names.
    #[derive(Clone)]
    struct Echo;

    impl Service<http::Request<()>> for Echo {
        type Response = http::Response<()>;
        type Error = std::io::Error;
        type Future = std::future::Ready<Result<http::Response<()>, std::io::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: http::Request<()>) -> Self::Future {
            let path = request.uri().path().trim_start_matches('/');
            std::future::ready(match path.parse::<u16>() {
                Ok(code) => Ok(http::Response::builder()
                    .status(code)
                    .body(())
                    .unwrap_or_default()),
                Err(_) => Err(std::io::Error::other("refused")),
            })
        }
    }

    #[tokio::test]
    async fn each_answer_is_counted_by_code_method_and_host() {
        let metrics = Metrics::new();
        let counted = ClientMetrics::register(&metrics);
        let mut service = counted.layer("127.0.0.1:6443").layer(Echo);
        for (method, path) in [
            ("GET", "/200"),
            ("GET", "/200"),
            ("PATCH", "/409"),
            ("GET", "/x"),
        ] {
            let request = http::Request::builder().method(method).uri(path).body(());
            let _ = service.call(request.unwrap_or_default()).await;
        }
        let text = metrics.render(infrasim_metrics::Format::Classic);
        for line in [
            "rest_client_requests_total{code=\"200\",host=\"127.0.0.1:6443\",method=\"GET\"} 2",
            "rest_client_requests_total{code=\"409\",host=\"127.0.0.1:6443\",method=\"PATCH\"} 1",
            "rest_client_requests_total{code=\"<error>\",host=\"127.0.0.1:6443\",method=\"GET\"} 1",
        ] {
            assert!(text.contains(line), "{line} not in {text}");
        }
    }
}
