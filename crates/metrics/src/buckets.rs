//! The histogram buckets upstream uses, so that a dashboard's `histogram_quantile` over our
//! series reads as it does over theirs.

/// kube-apiserver's `apiserver_request_duration_seconds` (and Cluster API's in-memory
/// `inmemory_apiserver_request_duration_seconds`), in seconds.
pub const APISERVER_REQUEST_DURATION: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];
