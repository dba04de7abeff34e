//! kube-rs's derive and runtime against the API server: a CustomResource's CRD applied with
//! `Patch::Apply`, objects created, and a `kube::runtime::Controller` reconciling them through
//! `patch_status`.

mod common;

use common::TestServer;
use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "infrasim.test",
    version = "v1",
    kind = "Counter",
    namespaced,
    status = "CounterStatus"
)]
pub struct CounterSpec {
    target: i32,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
pub struct CounterStatus {
    seen: i32,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ReconcileError(#[from] kube::Error);

async fn reconcile(
    counter: Arc<Counter>,
    api: Arc<Api<Counter>>,
) -> Result<Action, ReconcileError> {
    let status = serde_json::json!({"status": {"seen": counter.spec.target}});
    api.patch_status(
        &counter.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&status),
    )
    .await?;
    Ok(Action::await_change())
}

fn error_policy(_: Arc<Counter>, _: &ReconcileError, _: Arc<Api<Counter>>) -> Action {
    Action::requeue(Duration::from_millis(200))
}

#[tokio::test]
async fn a_controller_reconciles_custom_resources() {
    let t = TestServer::start(10_000).await;
    let client = t.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        "counters.infrasim.test",
        &PatchParams::apply("infrasim-test").force(),
        &Patch::Apply(Counter::crd()),
    )
    .await
    .unwrap();
    let established = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let crd = crds.get("counters.infrasim.test").await.unwrap();
            let ok = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if ok {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(established.is_ok(), "the CRD became Established");

    let counters: Api<Counter> = Api::namespaced(client.clone(), "default");
    for (name, target) in [("a", 3), ("b", 5)] {
        counters
            .create(
                &PostParams::default(),
                &Counter::new(name, CounterSpec { target }),
            )
            .await
            .unwrap();
    }
    let api = Arc::new(counters.clone());
    let controller = tokio::spawn(
        Controller::new(counters.clone(), watcher::Config::default())
            .run(reconcile, error_policy, api)
            .for_each(|_| async {}),
    );
    let done = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let all = counters.list(&Default::default()).await.unwrap();
            if all
                .items
                .iter()
                .all(|c| c.status.as_ref().map(|s| s.seen) == Some(c.spec.target))
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    controller.abort();
    assert!(
        done.is_ok(),
        "every counter's status caught up with its spec"
    );
    // The status subresource left spec and generation alone.
    let a = counters.get("a").await.unwrap();
    assert_eq!(a.spec.target, 3);
    assert_eq!(a.metadata.generation, Some(1));
}

/// A kube-rs controller commonly applies an object's spec and then its status with one field
/// manager, the status apply naming no object (kube-apiserver takes the name from the URL).
/// The status apply must leave the spec, and the manager's ownership of it, alone.
#[tokio::test]
async fn one_manager_applies_spec_then_status_without_a_name() {
    let t = TestServer::start(10_000).await;
    let client = t.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        "counters.infrasim.test",
        &PatchParams::apply("infrasim-test").force(),
        &Patch::Apply(Counter::crd()),
    )
    .await
    .unwrap();
    let counters: Api<Counter> = Api::namespaced(client.clone(), "default");
    let spec = serde_json::json!({"apiVersion": "infrasim.test/v1", "kind": "Counter",
                                  "metadata": {"name": "c"}, "spec": {"target": 7}});
    let mut created = None;
    for _ in 0..100 {
        // The CRD is served once it is Established.
        match counters
            .patch("c", &PatchParams::apply("ctl"), &Patch::Apply(&spec))
            .await
        {
            Ok(c) => {
                created = Some(c);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    assert!(created.is_some(), "the spec was applied");
    let status = serde_json::json!({"apiVersion": "infrasim.test/v1", "kind": "Counter",
                                    "status": {"seen": 7}});
    let after = counters
        .patch_status("c", &PatchParams::apply("ctl"), &Patch::Apply(&status))
        .await
        .expect("a status apply by the spec's manager succeeds");
    assert_eq!(after.spec.target, 7);
    assert_eq!(after.status.map(|s| s.seen), Some(7));
    let entries: Vec<(String, Option<String>)> = after
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .map(|m| (m.manager.unwrap_or_default(), m.subresource))
        .collect();
    assert!(entries.contains(&("ctl".into(), None)), "{entries:?}");
    assert!(
        entries.contains(&("ctl".into(), Some("status".into()))),
        "{entries:?}"
    );
    // Applying the spec again (without status) keeps the status.
    let again = counters
        .patch("c", &PatchParams::apply("ctl"), &Patch::Apply(&spec))
        .await
        .unwrap();
    assert_eq!(again.status.map(|s| s.seen), Some(7));
}
