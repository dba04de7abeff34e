#![allow(dead_code)] // each test file uses what it needs
//! An embedded management plane for the controllers' tests: the engine over a store on a
//! fake clock, a kube-rs client over its in-process service, a cloud on the same clock.

use infrasim_clock::FakeClock;
use infrasim_cloud::{Cloud, CloudConfig};
use infrasim_controllers::Context;
use infrasim_kube_api::pki::CertificateAuthority;
use infrasim_kube_api::{ApiConfig, ApiServer, Identity};
use infrasim_store::{MemoryBackend, Store, StoreConfig};
use std::sync::Arc;
use std::time::Duration;

pub struct Plane {
    pub clock: FakeClock,
    pub client: kube::Client,
    pub cloud: Arc<Cloud>,
    pub ctx: Context,
    pub server: ApiServer,
}

impl Plane {
    /// A plane whose workload clusters take ports from `ports`.
    pub async fn start(ports: std::ops::RangeInclusive<u16>) -> Plane {
        // RUST_LOG=debug shows what the controllers did.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
        let shared: infrasim_clock::SharedClock = Arc::new(clock.clone());
        let store = Store::new(
            StoreConfig::default(),
            shared.clone(),
            Arc::new(MemoryBackend),
        );
        let group = store.create_group("management").unwrap();
        let ca = CertificateAuthority::generate("test-ca").unwrap();
        let server = ApiServer::new(group, ca, shared.clone(), ApiConfig::default());
        let admin = Identity {
            user: "infrasim-controllers".into(),
            groups: vec!["system:masters".into()],
        };
        let client = kube::Client::new(server.local_service(admin), "default");
        let cloud = Arc::new(Cloud::with_clock(
            CloudConfig {
                ports,
                ..CloudConfig::default()
            },
            shared.clone(),
        ));
        let ctx = Context::new(client.clone(), cloud.clone(), shared);
        Plane {
            clock,
            client,
            cloud,
            ctx,
            server,
        }
    }

    /// Moves the fake clock on and lets the controllers react.
    pub async fn advance(&self, by: Duration) {
        self.clock.advance(by);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `check` on the real clock (controllers run in their own tasks) until it yields.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..400 {
        if let Some(v) = check().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("never happened: {what}");
}

/// Server-side applies every document of `yaml` (in `namespace` unless a document names
/// one), as `kubectl apply --server-side` would.
pub async fn apply_yaml(client: &kube::Client, yaml: &str, namespace: &str) {
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
    for doc in infrasim_controllers::capi::templates::documents(yaml).unwrap() {
        let api_version = doc["apiVersion"].as_str().unwrap().to_string();
        let kind = doc["kind"].as_str().unwrap().to_string();
        let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, version, &kind),
            &infrasim_controllers::capi::standin::objects::plural(&kind),
        );
        let ns = doc["metadata"]["namespace"]
            .as_str()
            .unwrap_or(namespace)
            .to_string();
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
        let name = doc["metadata"]["name"].as_str().unwrap().to_string();
        let mut body = doc.clone();
        body["metadata"]["namespace"] = serde_json::json!(ns);
        api.patch(
            &name,
            &PatchParams::apply("test").force(),
            &Patch::Apply(&body),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {kind} {name}: {e}"));
    }
}
