//! Faults a server injects into its own answers when told to (the simulation's `Fault` kind:
//! `APILatency` and `APIErrors`): every authenticated request waits a while before it is
//! served, and a given fraction of them is refused as an overloaded or broken kube-apiserver
//! refuses them, so clients' retries and controllers' backoff meet what they would meet.
//!
//! What an error looks like is kube-apiserver's: a 429 is its priority-and-fairness refusal
//! (`TooManyRequests` with `details.retryAfterSeconds` and a `Retry-After` header, which
//! client-go waits for), a 500 an `InternalError`, a 503 `ServiceUnavailable`, a 504 a
//! `Timeout`. Which requests fail is not random: the n-th request fails when
//! `floor(n * fraction)` moves, so any run fails exactly the same ones.
//!
//! An alarm raised in the cluster's etcd (the `EtcdAlarm` fault) reaches the API server's
//! clients as kube-apiserver passes etcd's refusals on: a 500 whose message is etcd's error,
//! for writes under NOSPACE and for every request under CORRUPT.

use crate::http::{error_response, Body};
use crate::status::ApiError;
use http::Response;
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The codes an `APIErrors` fault may answer with.
pub const ERROR_CODES: [u16; 4] = [429, 500, 503, 504];

/// What a server does to its requests while a fault is in force.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestFault {
    /// How long each request waits before it is served.
    pub latency: Duration,
    /// The share of requests refused, from 0 to 1.
    pub error_fraction: f64,
    /// The code they are refused with (one of [`ERROR_CODES`]).
    pub error_code: u16,
    /// What a 429 tells the client to wait, in seconds.
    pub retry_after_seconds: u64,
    /// An alarm raised in the etcd the server stores in.
    pub storage: Option<StorageAlarm>,
}

/// An etcd alarm, as the API server's storage meets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum StorageAlarm {
    /// etcd refuses what would write a key: creates, updates and patches fail.
    NoSpace,
    /// etcd has lost its quorum: nothing is agreed on, so writes time out.
    NoQuorum,
    /// etcd refuses every request.
    Corrupt,
}

impl StorageAlarm {
    /// etcd's error, which kube-apiserver answers as it is (a `Status` of code 500 without
    /// a reason), as clients print it: "etcdserver: mvcc: database space exceeded".
    fn refusal(self, method: &http::Method) -> Option<Response<Body>> {
        let writes = [http::Method::POST, http::Method::PUT, http::Method::PATCH].contains(method);
        let message = match self {
            StorageAlarm::Corrupt => "etcdserver: corrupt cluster",
            _ if !writes => return None,
            StorageAlarm::NoSpace => "etcdserver: mvcc: database space exceeded",
            StorageAlarm::NoQuorum => "etcdserver: request timed out",
        };
        Some(error_response(&ApiError::storage(message)))
    }
}

impl Default for RequestFault {
    fn default() -> Self {
        RequestFault {
            latency: Duration::ZERO,
            error_fraction: 0.0,
            error_code: 500,
            retry_after_seconds: 1,
            storage: None,
        }
    }
}

/// A server's fault in force, if any; clones share it.
#[derive(Debug, Clone, Default)]
pub struct Faults(Arc<RwLock<Option<Arc<Active>>>>);

#[derive(Debug)]
struct Active {
    fault: RequestFault,
    /// Requests seen since the fault was set.
    seen: AtomicU64,
}

impl Faults {
    /// Puts `fault` in force (counting requests from zero again), or clears it with `None`.
    /// The fault already in force, set again, goes on counting.
    pub fn set(&self, fault: Option<RequestFault>) {
        if self.get() == fault {
            return;
        }
        let active = fault.map(|fault| {
            Arc::new(Active {
                fault,
                seen: AtomicU64::new(0),
            })
        });
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = active;
    }

    /// The fault in force.
    pub fn get(&self) -> Option<RequestFault> {
        self.active().map(|a| a.fault.clone())
    }

    fn active(&self) -> Option<Arc<Active>> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Applies the fault in force to one request of `method`: waits its latency, then
    /// answers the refusal if this request is one of those refused, or one its storage
    /// refuses (`None`: serve it).
    pub(crate) async fn apply(&self, method: &http::Method) -> Option<Response<Body>> {
        let active = self.active()?;
        if !active.fault.latency.is_zero() {
            tokio::time::sleep(active.fault.latency).await;
        }
        let n = active.seen.fetch_add(1, Ordering::Relaxed);
        if refused(n, active.fault.error_fraction) {
            return Some(refusal(&active.fault));
        }
        active.fault.storage?.refusal(method)
    }
}

/// Whether the `n`-th request (from 0) is refused when `fraction` of them are: it is when
/// the count of refusals due, `floor((n + 1) * fraction)`, grows with it.
fn refused(n: u64, fraction: f64) -> bool {
    let fraction = fraction.clamp(0.0, 1.0);
    let due = |k: u64| (k as f64 * fraction).floor() as u64;
    due(n + 1) > due(n)
}

fn refusal(fault: &RequestFault) -> Response<Body> {
    match fault.error_code {
        429 => {
            let mut err = ApiError::too_many_requests("Too many requests, please try again later.");
            err.details = Some(json!({"retryAfterSeconds": fault.retry_after_seconds}));
            let mut resp = error_response(&err);
            if let Ok(value) = http::HeaderValue::from_str(&fault.retry_after_seconds.to_string()) {
                resp.headers_mut().insert(http::header::RETRY_AFTER, value);
            }
            resp
        }
        503 => error_response(&ApiError::service_unavailable(
            "the server is currently unable to handle the request (injected fault)",
        )),
        504 => error_response(&ApiError::timeout(
            "the server was unable to return a response in the time allotted (injected fault)",
        )),
        _ => error_response(&ApiError::internal(
            "Internal error occurred: injected fault",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusals(fraction: f64, requests: u64) -> Vec<u64> {
        (0..requests).filter(|n| refused(*n, fraction)).collect()
    }

    #[test]
    fn the_fraction_refused_is_exact_and_spread() {
        assert_eq!(refusals(0.0, 100), Vec::<u64>::new());
        assert_eq!(refusals(1.0, 5), vec![0, 1, 2, 3, 4]);
        assert_eq!(refusals(0.5, 6), vec![1, 3, 5]);
        assert_eq!(refusals(0.25, 1000).len(), 250);
        assert_eq!(refusals(0.1, 30), vec![9, 19, 29]);
    }

    #[tokio::test]
    async fn a_429_says_when_to_come_back_and_clearing_serves_again() {
        let faults = Faults::default();
        assert!(faults.apply(&http::Method::GET).await.is_none());
        faults.set(Some(RequestFault {
            error_fraction: 1.0,
            error_code: 429,
            retry_after_seconds: 3,
            ..RequestFault::default()
        }));
        let resp = faults.apply(&http::Method::GET).await.expect("refused");
        assert_eq!(resp.status(), 429);
        assert_eq!(resp.headers()[http::header::RETRY_AFTER], "3");
        let body = http_body_util::BodyExt::collect(resp.into_body()).await;
        let status: serde_json::Value =
            serde_json::from_slice(&body.expect("body").to_bytes()).expect("json");
        assert_eq!(status["reason"], "TooManyRequests");
        assert_eq!(status["details"]["retryAfterSeconds"], 3);
        faults.set(None);
        assert!(faults.apply(&http::Method::GET).await.is_none());
    }

    #[tokio::test]
    async fn a_storage_alarm_refuses_as_etcd_through_kube_apiserver() {
        let faults = Faults::default();
        faults.set(Some(RequestFault {
            storage: Some(StorageAlarm::NoSpace),
            ..RequestFault::default()
        }));
        assert!(
            faults.apply(&http::Method::GET).await.is_none(),
            "reads go on"
        );
        assert!(
            faults.apply(&http::Method::DELETE).await.is_none(),
            "deletes free space"
        );
        let resp = faults.apply(&http::Method::POST).await.expect("refused");
        assert_eq!(resp.status(), 500);
        let body = http_body_util::BodyExt::collect(resp.into_body()).await;
        let status: serde_json::Value =
            serde_json::from_slice(&body.expect("body").to_bytes()).expect("json");
        assert_eq!(
            status["message"],
            "etcdserver: mvcc: database space exceeded"
        );
        assert!(
            status.get("reason").is_none(),
            "kube-apiserver gives no reason: {status}"
        );
        faults.set(Some(RequestFault {
            storage: Some(StorageAlarm::Corrupt),
            ..RequestFault::default()
        }));
        assert!(
            faults.apply(&http::Method::GET).await.is_some(),
            "nothing is served"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn latency_is_waited_before_the_request_is_served() {
        let faults = Faults::default();
        faults.set(Some(RequestFault {
            latency: Duration::from_secs(2),
            ..RequestFault::default()
        }));
        let started = tokio::time::Instant::now();
        assert!(faults.apply(&http::Method::GET).await.is_none());
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test]
    async fn each_error_code_has_kube_apiservers_reason() {
        let faults = Faults::default();
        for (code, reason) in [
            (500, "InternalError"),
            (503, "ServiceUnavailable"),
            (504, "Timeout"),
        ] {
            faults.set(Some(RequestFault {
                error_fraction: 1.0,
                error_code: code,
                ..RequestFault::default()
            }));
            let resp = faults.apply(&http::Method::GET).await.expect("refused");
            assert_eq!(resp.status(), code);
            let body = http_body_util::BodyExt::collect(resp.into_body()).await;
            let status: serde_json::Value =
                serde_json::from_slice(&body.expect("body").to_bytes()).expect("json");
            assert_eq!(status["reason"], reason);
        }
    }
}
