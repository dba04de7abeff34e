//! The controller runtime's runner ([`infrasim_controllers::runtime::reconcile`]) on an
//! embedded plane and a fake clock: the finalizer added before the first apply and removed
//! after the last cleanup, deadlines and retries on the injected clock, backoff that doubles.

mod common;

use common::{eventually, Plane};
use infrasim_controllers::runtime::reconcile::{self, Cleanup, Next, Reconcile};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

const FINALIZER: &str = "test.infrasim.dev/cleanup";

#[derive(Debug, thiserror::Error)]
#[error("asked to fail")]
struct AskedToFail;

/// Counts its applies and cleanups of the ConfigMaps the test made (the namespace has one of
/// its own, `kube-root-ca.crt`); fails while the ConfigMap says `fail`, and holds the
/// ConfigMap for one more cleanup after the first.
#[derive(Default)]
struct Counting {
    applies: AtomicU32,
    cleanups: AtomicU32,
}

impl Reconcile<ConfigMap> for Counting {
    type Error = AskedToFail;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    async fn apply(&self, cm: Arc<ConfigMap>) -> Result<Next, AskedToFail> {
        if !ours(&cm) {
            return Ok(Next::AwaitChange);
        }
        self.applies.fetch_add(1, Ordering::SeqCst);
        if cm.data.as_ref().is_some_and(|d| d.contains_key("fail")) {
            return Err(AskedToFail);
        }
        Ok(Next::After(Duration::from_secs(60)))
    }

    async fn cleanup(&self, cm: Arc<ConfigMap>) -> Result<Cleanup, AskedToFail> {
        if !ours(&cm) {
            return Ok(Cleanup::Done);
        }
        Ok(match self.cleanups.fetch_add(1, Ordering::SeqCst) {
            0 => Cleanup::Pending(Next::After(Duration::from_secs(10))),
            _ => Cleanup::Done,
        })
    }
}

fn ours(cm: &ConfigMap) -> bool {
    cm.labels().contains_key("test")
}

async fn start(plane: &Plane) -> Arc<Counting> {
    let informers = Arc::new(infrasim_controllers::informers::Informers::new(
        plane.client.clone(),
        Some("default".into()),
    ));
    let counting = Arc::new(Counting::default());
    let controller =
        infrasim_controllers::runtime::triggers::controller(&informers.of::<ConfigMap>(), None);
    let (ctx, r) = (plane.ctx.clone(), counting.clone());
    tokio::spawn(async move {
        let _informers = informers;
        reconcile::run(&ctx, controller, r).await
    });
    counting
}

/// Waits until `counter` reaches `n`, then a little more to see that it stays there.
async fn settles_at(counter: &AtomicU32, n: u32, what: &str) {
    eventually(what, || async {
        (counter.load(Ordering::SeqCst) >= n).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(
        counter.load(Ordering::SeqCst),
        n,
        "{what}: no more than {n}"
    );
}

fn named(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {"test": "runtime"}},
        "data": data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<std::collections::BTreeMap<_, _>>(),
    }))
    .unwrap()
}

#[tokio::test]
async fn the_finalizer_holds_an_object_until_its_cleanup_is_done() {
    let plane = Plane::start(21900..=21909).await;
    let counting = start(&plane).await;
    let api: Api<ConfigMap> = Api::namespaced(plane.client.clone(), "default");
    api.create(&PostParams::default(), &named("held", &[]))
        .await
        .unwrap();
    // The runner adds the finalizer, and the write's event brings the first apply.
    settles_at(&counting.applies, 1, "the first apply").await;
    let cm = api.get("held").await.unwrap();
    assert_eq!(cm.finalizers(), [FINALIZER]);

    // The apply asked to look again in a minute: on the injected clock, not before.
    plane.advance(Duration::from_secs(59)).await;
    settles_at(&counting.applies, 1, "nothing before the deadline").await;
    plane.advance(Duration::from_secs(1)).await;
    settles_at(&counting.applies, 2, "the apply at the deadline").await;

    api.delete("held", &DeleteParams::default()).await.unwrap();
    settles_at(&counting.cleanups, 1, "the first cleanup").await;
    let cm = api.get("held").await.unwrap();
    assert_eq!(cm.finalizers(), [FINALIZER], "a pending cleanup keeps it");
    plane.advance(Duration::from_secs(10)).await;
    settles_at(&counting.cleanups, 2, "the cleanup after its wait").await;
    eventually("the object goes", || async {
        api.get_opt("held").await.unwrap().is_none().then_some(())
    })
    .await;
    assert_eq!(
        counting.applies.load(Ordering::SeqCst),
        2,
        "no apply while deleting"
    );
}

#[tokio::test]
async fn failures_are_retried_after_a_doubling_wait_on_the_injected_clock() {
    let plane = Plane::start(21910..=21919).await;
    let counting = start(&plane).await;
    let api: Api<ConfigMap> = Api::namespaced(plane.client.clone(), "default");
    api.create(
        &PostParams::default(),
        &named("failing", &[("fail", "yes")]),
    )
    .await
    .unwrap();
    settles_at(&counting.applies, 1, "the first attempt").await;
    // Retried after 1 s, then 2 s, then 4 s: each wait is on the fake clock.
    plane.advance(Duration::from_secs(1)).await;
    settles_at(&counting.applies, 2, "the retry after a second").await;
    plane.advance(Duration::from_secs(1)).await;
    settles_at(&counting.applies, 2, "the second retry waits two seconds").await;
    plane.advance(Duration::from_secs(1)).await;
    settles_at(&counting.applies, 3, "the retry after two seconds").await;
    plane.advance(Duration::from_secs(3)).await;
    settles_at(&counting.applies, 3, "the third retry waits four seconds").await;
    plane.advance(Duration::from_secs(1)).await;
    settles_at(&counting.applies, 4, "the retry after four seconds").await;

    // Mended, it succeeds, and the failures are forgotten: it next looks in a minute. (A
    // ConfigMap has no generation: the label is what wakes the controller.)
    let mended = serde_json::json!({"metadata": {"labels": {"mended": "yes"}},
                                    "data": {"fail": null, "ok": "yes"}});
    api.patch("failing", &PatchParams::default(), &Patch::Merge(&mended))
        .await
        .unwrap();
    settles_at(&counting.applies, 5, "the apply after the change").await;
    plane.advance(Duration::from_secs(60)).await;
    settles_at(&counting.applies, 6, "the backstop a minute later").await;
}
