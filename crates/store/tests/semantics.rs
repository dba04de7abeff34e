//! The store's Kubernetes semantics, exercised through its public API.

use infrasim_store::durability::{Accepted, Commit};
use infrasim_store::*;
use serde_json::{json, Value};
use std::sync::Arc;

fn group(window: usize) -> Arc<Group> {
    let store = Store::in_memory(StoreConfig {
        watch_window: window,
        watcher_buffer: 64,
        packed: false,
        fresh: None,
    });
    store.create_group("g").unwrap()
}

fn cm(name: &str, data: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "ns"}, "data": {"k": data}})
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new("ns", name)
}

fn with_meta(mut v: Value, meta: Value) -> Value {
    let m = v["metadata"].as_object_mut().unwrap();
    for (k, val) in meta.as_object().unwrap() {
        m.insert(k.clone(), val.clone());
    }
    v
}

#[test]
fn create_sets_server_metadata_and_refuses_duplicates() {
    let g = group(100);
    let a = g
        .create("configmaps", cm("a", "1"), Default::default())
        .unwrap();
    assert_eq!(a.meta.resource_version, 1);
    assert_eq!(a.meta.generation, 1);
    assert_eq!(a.meta.uid.len(), 36);
    let v = a.to_value().unwrap();
    assert_eq!(v["metadata"]["resourceVersion"], "1");
    assert!(v["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap()
        .ends_with('Z'));
    let err = g
        .create("configmaps", cm("a", "2"), Default::default())
        .unwrap_err();
    assert!(matches!(err, StoreError::AlreadyExists { .. }), "{err:?}");
    // Another resource with the same key is independent.
    g.create("secrets", cm("a", "1"), Default::default())
        .unwrap();
    assert_eq!(g.resource_version(), 2);
}

#[test]
fn stale_update_conflicts_and_generation_tracks_spec_only() {
    let g = group(100);
    let a = g
        .create("configmaps", cm("a", "1"), Default::default())
        .unwrap();
    let b = g
        .update(
            "configmaps",
            cm("a", "2"),
            Default::default(),
            Some(a.meta.resource_version),
        )
        .unwrap();
    assert_eq!(b.meta.generation, 2);
    assert_eq!(b.meta.uid, a.meta.uid);
    assert_eq!(b.meta.creation_timestamp, a.meta.creation_timestamp);
    let err = g
        .update(
            "configmaps",
            cm("a", "3"),
            Default::default(),
            Some(a.meta.resource_version),
        )
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err:?}");
    // A status-only change leaves generation alone.
    let mut with_status = cm("a", "2");
    with_status["status"] = json!({"phase": "x"});
    let c = g
        .update("configmaps", with_status.clone(), Default::default(), None)
        .unwrap();
    assert_eq!(c.meta.generation, 2);
    assert!(c.meta.resource_version > b.meta.resource_version);
    // Writing the same thing again is not a write.
    let d = g
        .update("configmaps", with_status, Default::default(), None)
        .unwrap();
    assert_eq!(d.meta.resource_version, c.meta.resource_version);
    let err = g
        .update("configmaps", cm("missing", "1"), Default::default(), None)
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }));
}

#[tokio::test]
async fn watch_resumes_without_gap_or_duplicate_and_expires_outside_window() {
    let g = group(5);
    for i in 0..3 {
        g.create("configmaps", cm(&format!("c{i}"), "1"), Default::default())
            .unwrap();
    }
    let mut w = g.watch(Some(1)).unwrap();
    let backlog: Vec<u64> = w.backlog.iter().map(|e| e.resource_version).collect();
    assert_eq!(backlog, vec![2, 3]);
    g.create("configmaps", cm("c3", "1"), Default::default())
        .unwrap();
    let live = w.next().await.unwrap();
    assert_eq!(live.resource_version, 4);
    assert_eq!(live.event_type, EventType::Added);
    for i in 4..10 {
        g.create("configmaps", cm(&format!("c{i}"), "1"), Default::default())
            .unwrap();
    }
    // 10 events written, window of 5: events 6..=10 remain, so resuming after 5 works
    // and after 4 does not.
    assert_eq!(g.watch(Some(5)).unwrap().backlog.len(), 5);
    let err = g.watch(Some(4)).unwrap_err();
    assert!(matches!(err, StoreError::Expired { .. }), "{err:?}");
}

#[tokio::test]
async fn slow_watcher_is_cut_off_without_blocking_writers() {
    let g = group(1000);
    let mut w = g.watch(None).unwrap();
    for i in 0..200 {
        g.create("configmaps", cm(&format!("c{i}"), "1"), Default::default())
            .unwrap();
    }
    assert_eq!(w.next().await.unwrap_err(), WatchError::Lagged);
}

#[test]
fn exact_snapshot_rebuilds_the_past() {
    let g = group(100);
    g.create("configmaps", cm("a", "1"), Default::default())
        .unwrap();
    g.create("configmaps", cm("b", "1"), Default::default())
        .unwrap();
    g.update("configmaps", cm("a", "2"), Default::default(), None)
        .unwrap();
    g.delete("configmaps", &key("b"), &DeleteOptions::default())
        .unwrap();
    g.create("configmaps", cm("c", "1"), Default::default())
        .unwrap();
    let past = g.snapshot("configmaps", ReadAt::Exact(2)).unwrap();
    let names: Vec<&str> = past.objects.keys().map(|k| &*k.name).collect();
    assert_eq!(names, vec!["a", "b"]);
    let a = past.objects.get(&key("a")).unwrap().to_value().unwrap();
    assert_eq!(a["data"]["k"], "1");
    let now = g.snapshot("configmaps", ReadAt::Latest).unwrap();
    assert_eq!(
        now.objects
            .keys()
            .map(|k| k.name.to_string())
            .collect::<Vec<_>>(),
        vec!["a", "c"]
    );
    assert!(matches!(
        g.snapshot("configmaps", ReadAt::Exact(99)),
        Err(StoreError::TooLargeResourceVersion { .. })
    ));
}

#[test]
fn finalizers_hold_deletion_until_removed() {
    let g = group(100);
    let held = with_meta(cm("a", "1"), json!({"finalizers": ["example.com/hold"]}));
    g.create("configmaps", held, Default::default()).unwrap();
    let out = g
        .delete("configmaps", &key("a"), &DeleteOptions::default())
        .unwrap();
    let DeleteOutcome::Pending(obj) = out else {
        panic!("expected pending")
    };
    assert!(obj.meta.deletion_timestamp.is_some());
    assert!(g.get("configmaps", &key("a")).is_some());
    // No new finalizer may be added while deleting.
    let more = with_meta(
        cm("a", "1"),
        json!({"finalizers": ["example.com/hold", "x/y"]}),
    );
    assert!(matches!(
        g.update("configmaps", more, Default::default(), None),
        Err(StoreError::Invalid { .. })
    ));
    let released = with_meta(cm("a", "1"), json!({"finalizers": []}));
    g.update("configmaps", released, Default::default(), None)
        .unwrap();
    assert!(g.get("configmaps", &key("a")).is_none());
}

fn owned_by(name: &str, owner: &StoredObject, block: bool) -> Value {
    with_meta(
        cm(name, "1"),
        json!({"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
            "name": &*owner.meta.name, "uid": &*owner.meta.uid, "blockOwnerDeletion": block}]}),
    )
}

#[test]
fn background_deletion_collects_dependents_recursively() {
    let g = group(100);
    let owner = g
        .create("configmaps", cm("owner", "1"), Default::default())
        .unwrap();
    let child = g
        .create("pods", owned_by("child", &owner, false), Default::default())
        .unwrap();
    g.create(
        "secrets",
        owned_by("grandchild", &child, false),
        Default::default(),
    )
    .unwrap();
    let out = g
        .delete("configmaps", &key("owner"), &DeleteOptions::default())
        .unwrap();
    assert!(matches!(out, DeleteOutcome::Deleted(_)));
    assert!(g.get("pods", &key("child")).is_none());
    assert!(g.get("secrets", &key("grandchild")).is_none());
}

#[test]
fn dependent_with_a_living_second_owner_survives() {
    let g = group(100);
    let a = g
        .create("configmaps", cm("a", "1"), Default::default())
        .unwrap();
    let b = g
        .create("configmaps", cm("b", "1"), Default::default())
        .unwrap();
    let mut dep = owned_by("dep", &a, false);
    dep["metadata"]["ownerReferences"]
        .as_array_mut()
        .unwrap()
        .push(json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": &*b.meta.uid}));
    g.create("pods", dep, Default::default()).unwrap();
    g.delete("configmaps", &key("a"), &DeleteOptions::default())
        .unwrap();
    // It survives, without its reference to the deleted owner.
    let dep = g.get("pods", &key("dep")).unwrap();
    let owners: Vec<&str> = dep.meta.owner_references.iter().map(|o| &*o.name).collect();
    assert_eq!(owners, ["b"]);
    g.delete("configmaps", &key("b"), &DeleteOptions::default())
        .unwrap();
    assert!(g.get("pods", &key("dep")).is_none());
}

#[test]
fn foreground_deletion_waits_for_blocking_dependents() {
    let g = group(100);
    let owner = g
        .create("configmaps", cm("owner", "1"), Default::default())
        .unwrap();
    let held = with_meta(
        owned_by("child", &owner, true),
        json!({"finalizers": ["x/hold"]}),
    );
    g.create("pods", held, Default::default()).unwrap();
    let opts = DeleteOptions {
        propagation: Propagation::Foreground,
        ..Default::default()
    };
    let out = g.delete("configmaps", &key("owner"), &opts).unwrap();
    let DeleteOutcome::Pending(o) = out else {
        panic!("owner must wait")
    };
    assert!(o
        .meta
        .finalizers
        .iter()
        .any(|f| &**f == FOREGROUND_FINALIZER));
    let child = g.get("pods", &key("child")).unwrap();
    assert!(child.meta.deletion_timestamp.is_some());
    // Releasing the child's finalizer removes it, which releases the owner.
    let mut released = child.to_value().unwrap();
    released["metadata"]["finalizers"] = json!([]);
    g.update("pods", released, Default::default(), None)
        .unwrap();
    assert!(g.get("pods", &key("child")).is_none());
    assert!(g.get("configmaps", &key("owner")).is_none());
}

#[test]
fn orphan_deletion_strips_owner_references() {
    let g = group(100);
    let owner = g
        .create("configmaps", cm("owner", "1"), Default::default())
        .unwrap();
    g.create("pods", owned_by("child", &owner, true), Default::default())
        .unwrap();
    let opts = DeleteOptions {
        propagation: Propagation::Orphan,
        ..Default::default()
    };
    assert!(matches!(
        g.delete("configmaps", &key("owner"), &opts).unwrap(),
        DeleteOutcome::Deleted(_)
    ));
    let child = g.get("pods", &key("child")).unwrap();
    assert!(child.meta.owner_references.is_empty());
}

#[test]
fn delete_preconditions_are_checked() {
    let g = group(100);
    let a = g
        .create("configmaps", cm("a", "1"), Default::default())
        .unwrap();
    let wrong = DeleteOptions {
        precondition_uid: Some("nope".into()),
        ..Default::default()
    };
    assert!(matches!(
        g.delete("configmaps", &key("a"), &wrong),
        Err(StoreError::Conflict { .. })
    ));
    let right = DeleteOptions {
        precondition_resource_version: Some(a.meta.resource_version),
        ..Default::default()
    };
    g.delete("configmaps", &key("a"), &right).unwrap();
    assert!(matches!(
        g.delete("configmaps", &key("a"), &right),
        Err(StoreError::NotFound { .. })
    ));
}

#[derive(Debug)]
struct FailingBackend;
impl Backend for FailingBackend {
    fn submit(&self, _: Commit<'_>) -> Result<Accepted> {
        Err(StoreError::Backend("disk full".into()))
    }
    fn drop_group(&self, _: &str) -> Result<()> {
        Ok(())
    }
}

#[test]
fn a_write_the_backend_refuses_leaves_no_trace() {
    let store = Store::new(
        StoreConfig::default(),
        infrasim_clock::SystemClock::shared(),
        Arc::new(FailingBackend),
    );
    let g = store.create_group("g").unwrap();
    assert!(matches!(
        g.create("configmaps", cm("a", "1"), Default::default()),
        Err(StoreError::Backend(_))
    ));
    assert!(g.get("configmaps", &key("a")).is_none());
    assert_eq!(g.resource_version(), 0);
}

#[test]
fn groups_are_independent() {
    let store = Store::in_memory(StoreConfig::default());
    let a = store.create_group("a").unwrap();
    let b = store.create_group("b").unwrap();
    a.create("configmaps", cm("x", "1"), Default::default())
        .unwrap();
    assert!(b.get("configmaps", &key("x")).is_none());
    assert_eq!(b.resource_version(), 0);
    assert!(matches!(
        store.create_group("a"),
        Err(StoreError::GroupExists(_))
    ));
    store.drop_group("a").unwrap();
    assert!(store.group("a").is_none());
}

#[test]
fn dry_runs_compute_everything_and_keep_nothing() {
    let g = group(100);
    let a = g
        .create_dry_run("configmaps", cm("a", "1"), Default::default())
        .unwrap();
    assert_eq!(a.meta.generation, 1);
    assert!(!a.meta.uid.is_empty());
    // Nothing was written, so no version: the answer can be created for real.
    assert_eq!(a.meta.resource_version, 0);
    assert!(a.to_value().unwrap()["metadata"]
        .get("resourceVersion")
        .is_none());
    assert!(g.get("configmaps", &key("a")).is_none());
    assert_eq!(g.resource_version(), 0);
    let real = g
        .create("configmaps", cm("a", "1"), Default::default())
        .unwrap();
    let changed = g
        .update_dry_run(
            "configmaps",
            cm("a", "2"),
            Default::default(),
            Some(real.meta.resource_version),
        )
        .unwrap();
    assert_eq!(changed.meta.generation, 2);
    // The dry update's answer carries the stored version, not the one its undone write took.
    assert_eq!(changed.meta.resource_version, real.meta.resource_version);
    assert_eq!(
        changed.to_value().unwrap()["metadata"]["resourceVersion"],
        real.meta.resource_version.to_string()
    );
    assert!(matches!(
        g.update_dry_run("configmaps", cm("a", "2"), Default::default(), Some(999)),
        Err(StoreError::Conflict { .. })
    ));
    match g
        .delete_dry_run("configmaps", &key("a"), &DeleteOptions::default())
        .unwrap()
    {
        DeleteOutcome::Deleted(o) => {
            assert_eq!(o.meta.resource_version, real.meta.resource_version)
        }
        other => panic!("expected Deleted, got {other:?}"),
    }
    let still = g.get("configmaps", &key("a")).unwrap();
    assert_eq!(still.meta.resource_version, real.meta.resource_version);
    assert_eq!(still.to_value().unwrap()["data"]["k"], "1");
}

#[test]
fn a_dry_delete_of_a_held_object_answers_it_marked_at_its_stored_version() {
    let g = group(100);
    let held = g
        .create(
            "configmaps",
            with_meta(cm("f", "1"), json!({"finalizers": ["example.com/hold"]})),
            Default::default(),
        )
        .unwrap();
    match g
        .delete_dry_run("configmaps", &key("f"), &DeleteOptions::default())
        .unwrap()
    {
        DeleteOutcome::Pending(o) => {
            assert!(o.meta.deletion_timestamp.is_some());
            assert_eq!(o.meta.resource_version, held.meta.resource_version);
        }
        other => panic!("expected Pending, got {other:?}"),
    }
    let still = g.get("configmaps", &key("f")).unwrap();
    assert!(still.meta.deletion_timestamp.is_none());
}

#[test]
fn references_to_owners_that_do_not_exist_are_collected() {
    let g = group(100);
    let live = g
        .create("configmaps", cm("live", "1"), Default::default())
        .unwrap();
    let ghost =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": "no-such-uid"});
    // Every owner missing: the dependent is collected as soon as it is written.
    let mut orphan = cm("orphan", "1");
    orphan["metadata"]["ownerReferences"] = json!([ghost.clone()]);
    g.create("pods", orphan, Default::default()).unwrap();
    assert!(g.get("pods", &key("orphan")).is_none());
    // One owner lives: only the dangling reference goes.
    let mut half = owned_by("half", &live, false);
    half["metadata"]["ownerReferences"]
        .as_array_mut()
        .unwrap()
        .push(ghost);
    g.create("pods", half, Default::default()).unwrap();
    let half = g.get("pods", &key("half")).unwrap();
    assert_eq!(half.meta.owner_references.len(), 1);
    assert_eq!(&*half.meta.owner_references[0].name, "live");
}

fn names(s: &Snapshot) -> Vec<String> {
    s.objects.keys().map(|k| k.name.to_string()).collect()
}

#[test]
fn labelled_snapshots_follow_labels_through_every_write() {
    let g = group(100);
    let labelled = |name: &str, cluster: &str| {
        with_meta(
            cm(name, "1"),
            json!({"labels": {"cluster": cluster, "role": "w"}}),
        )
    };
    g.create("configmaps", labelled("a", "one"), Default::default())
        .unwrap();
    let b = g
        .create("configmaps", labelled("b", "two"), Default::default())
        .unwrap();
    g.create("configmaps", labelled("c", "one"), Default::default())
        .unwrap();
    g.create("secrets", labelled("s", "one"), Default::default())
        .unwrap();
    let one = |g: &Group| {
        names(
            &g.snapshot_selected("configmaps", ReadAt::Latest, &[("cluster", "one")], &[])
                .unwrap(),
        )
    };
    assert_eq!(one(&g), ["a", "c"]);
    // Of several required labels, the rarest narrows the read (every object has `role=w`).
    let both = g
        .snapshot_selected(
            "configmaps",
            ReadAt::Latest,
            &[("role", "w"), ("cluster", "two")],
            &[],
        )
        .unwrap();
    assert_eq!(names(&both), ["b"]);
    let none = g
        .snapshot_selected(
            "configmaps",
            ReadAt::Latest,
            &[("role", "w"), ("cluster", "z")],
            &[],
        )
        .unwrap();
    assert!(none.objects.is_empty());
    // A relabel moves the object; a dry run and a refused write move nothing.
    g.update_dry_run(
        "configmaps",
        labelled("b", "one"),
        Default::default(),
        Some(b.meta.resource_version),
    )
    .unwrap();
    assert_eq!(one(&g), ["a", "c"]);
    g.update(
        "configmaps",
        labelled("b", "one"),
        Default::default(),
        Some(b.meta.resource_version),
    )
    .unwrap();
    assert_eq!(one(&g), ["a", "b", "c"]);
    g.delete("configmaps", &key("a"), &DeleteOptions::default())
        .unwrap();
    assert_eq!(one(&g), ["b", "c"]);
    let two = g
        .snapshot_selected("configmaps", ReadAt::Latest, &[("cluster", "two")], &[])
        .unwrap();
    assert!(two.objects.is_empty());
    // An exact older version is beyond the index: the whole resource, for the caller to filter.
    let past = g
        .snapshot_selected("configmaps", ReadAt::Exact(2), &[("cluster", "one")], &[])
        .unwrap();
    assert_eq!(names(&past), ["a", "b"]);
    assert!(matches!(
        g.snapshot_selected(
            "configmaps",
            ReadAt::NotOlderThan(999),
            &[("cluster", "one")],
            &[]
        ),
        Err(StoreError::TooLargeResourceVersion { .. })
    ));
}

#[test]
fn indexed_fields_narrow_a_snapshot_as_labels_do() {
    let g = group(100);
    let about = |uid: &str| {
        Arc::new(Derived {
            fields: [("involvedObject.uid", uid), ("reason", "Made")]
                .into_iter()
                .collect(),
            ..Derived::default()
        })
    };
    g.create("events", cm("before", "1"), about("u1")).unwrap();
    // Indexed after an object exists: that one is found too.
    g.index_field("events", "involvedObject.uid");
    g.index_field("events", "involvedObject.uid");
    g.create("events", cm("second", "1"), about("u2")).unwrap();
    let third = g.create("events", cm("third", "1"), about("u1")).unwrap();
    let holding = |g: &Group, fields: &[(&str, &str)]| {
        names(
            &g.snapshot_selected("events", ReadAt::Latest, &[], fields)
                .unwrap(),
        )
    };
    assert_eq!(
        holding(&g, &[("involvedObject.uid", "u1")]),
        ["before", "third"]
    );
    assert!(holding(&g, &[("involvedObject.uid", "none")]).is_empty());
    // A field not indexed narrows nothing: the whole resource, for the caller's filter.
    assert_eq!(holding(&g, &[("reason", "Other")]).len(), 3);
    // An update moves the object to its new value; a delete takes it out.
    g.update(
        "events",
        cm("third", "2"),
        about("u2"),
        Some(third.meta.resource_version),
    )
    .unwrap();
    assert_eq!(
        holding(&g, &[("involvedObject.uid", "u2")]),
        ["second", "third"]
    );
    g.delete("events", &key("before"), &DeleteOptions::default())
        .unwrap();
    assert!(holding(&g, &[("involvedObject.uid", "u1")]).is_empty());
    // With a label too, the rarer of the two reads.
    assert!(g
        .snapshot_selected(
            "events",
            ReadAt::Latest,
            &[("cluster", "x")],
            &[("involvedObject.uid", "u2")]
        )
        .unwrap()
        .objects
        .is_empty());
}

#[test]
fn a_quiet_resource_resumes_from_before_a_burst_of_others() {
    let g = group(3);
    g.create("configmaps", cm("quiet", "1"), Default::default())
        .unwrap();
    for i in 0..5 {
        g.create("secrets", cm(&format!("s{i}"), "1"), Default::default())
            .unwrap();
    }
    // The window holds rv 4..=6: the group as a whole cannot go back to rv 1 ...
    assert!(matches!(g.watch(Some(1)), Err(StoreError::Expired { .. })));
    assert!(matches!(
        g.watch_resource("secrets", Some(1)),
        Err(StoreError::Expired { .. })
    ));
    // ... but no configmap event after rv 1 has left it, so a configmap watcher can.
    let w = g.watch_resource("configmaps", Some(1)).unwrap();
    assert_eq!(w.start, 1);
    assert!(w.backlog.iter().all(|e| &*e.resource == "secrets"));
    let past = g.snapshot("configmaps", ReadAt::Exact(1)).unwrap();
    assert_eq!(names(&past), ["quiet"]);
    // Once a configmap event is evicted, older configmap versions are gone too.
    g.create("configmaps", cm("second", "1"), Default::default())
        .unwrap();
    for i in 5..9 {
        g.create("secrets", cm(&format!("s{i}"), "1"), Default::default())
            .unwrap();
    }
    assert!(matches!(
        g.watch_resource("configmaps", Some(1)),
        Err(StoreError::Expired { .. })
    ));
}

#[test]
fn a_fresh_window_keeps_recent_events_and_lets_old_ones_go_above_its_floor() {
    let clock = infrasim_clock::FakeClock::new(chrono::Utc::now());
    let store = Store::new(
        StoreConfig {
            watch_window: 8,
            watcher_buffer: 64,
            packed: false,
            fresh: Some(FreshWindow {
                keep: std::time::Duration::from_secs(75),
                floor: 3,
            }),
        },
        Arc::new(clock.clone()),
        Arc::new(MemoryBackend),
    );
    let g = store.create_group("g").unwrap();
    for i in 0..5 {
        g.create("configmaps", cm(&format!("a{i}"), "1"), Default::default())
            .unwrap();
    }
    // Young events stay, however many (up to the window): a watch from rv 1 resumes.
    clock.advance(std::time::Duration::from_secs(70));
    g.create("configmaps", cm("b", "1"), Default::default())
        .unwrap();
    assert_eq!(g.watch(Some(1)).unwrap().backlog.len(), 5);
    // 80 s on, the first five are stale: they go down to the floor of three events.
    clock.advance(std::time::Duration::from_secs(10));
    g.create("configmaps", cm("c", "1"), Default::default())
        .unwrap();
    assert!(matches!(g.watch(Some(3)), Err(StoreError::Expired { .. })));
    let w = g.watch(Some(4)).unwrap();
    assert_eq!(
        w.backlog
            .iter()
            .map(|e| e.resource_version)
            .collect::<Vec<_>>(),
        [5, 6, 7],
        "the floor keeps the newest three, old and fresh"
    );
    // Long quiet, then one write: the window shrinks to its floor, never below.
    clock.advance(std::time::Duration::from_secs(600));
    g.create("configmaps", cm("d", "1"), Default::default())
        .unwrap();
    assert_eq!(g.watch(Some(5)).unwrap().backlog.len(), 3);
    assert!(matches!(g.watch(Some(4)), Err(StoreError::Expired { .. })));
}

/// The window alone keeps events alive: a watcher's channel (longer than the window here)
/// does not hold the versions the window let go, and a watcher that had not taken one is
/// cut off (it resumes from the window, or lists again) rather than handed it.
#[tokio::test]
async fn versions_the_window_lets_go_are_freed_even_with_a_watcher_behind() {
    let g = group(4);
    let mut behind = g.watch(None).unwrap();
    let first = Arc::downgrade(
        &g.create("configmaps", cm("a", "0"), Default::default())
            .unwrap(),
    );
    let mut current = None;
    for i in 1..10 {
        current = Some(
            g.update(
                "configmaps",
                cm("a", &i.to_string()),
                Default::default(),
                None,
            )
            .unwrap(),
        );
    }
    assert!(
        first.upgrade().is_none(),
        "the first version is out of the window and nobody holds it"
    );
    assert!(matches!(behind.next().await, Err(WatchError::Lagged)));
    // A watcher that keeps up is handed every event, the last one included.
    let mut up = g.watch(None).unwrap();
    let latest = g
        .update("configmaps", cm("a", "10"), Default::default(), None)
        .unwrap();
    let event = up.next().await.unwrap();
    assert_eq!(event.resource_version, latest.meta.resource_version);
    assert!(current.is_some());
}

/// An object's JSON without what two stores set differently (its uid, its creation time).
fn same(json: &[u8]) -> Value {
    let mut value: Value = serde_json::from_slice(json).unwrap();
    let meta = value["metadata"].as_object_mut().unwrap();
    meta.remove("uid");
    meta.remove("creationTimestamp");
    value
}

/// A store that packs its objects answers exactly as one that does not: the same JSON from a
/// read, a past snapshot, a watch's backlog and a deletion's last state, once its resources
/// have dictionaries as well as before.
#[test]
fn a_packed_store_reads_back_what_was_written() {
    let config = |packed| StoreConfig {
        watch_window: 1000,
        watcher_buffer: 64,
        packed,
        fresh: None,
    };
    let plain = Store::in_memory(config(false)).create_group("g").unwrap();
    let packed = Store::in_memory(config(true)).create_group("g").unwrap();
    let data = "a value every ConfigMap here shares, long enough to be worth packing";
    for g in [&plain, &packed] {
        for i in 0..100 {
            g.create(
                "configmaps",
                cm(&format!("cm-{i}"), data),
                Default::default(),
            )
            .unwrap();
        }
        g.update(
            "configmaps",
            cm("cm-99", "changed"),
            Default::default(),
            None,
        )
        .unwrap();
        g.delete("configmaps", &key("cm-98"), &DeleteOptions::default())
            .unwrap();
    }
    let last = packed.get("configmaps", &key("cm-97")).unwrap();
    assert!(
        last.footprint() * 4 < last.len(),
        "packed to {} of {} bytes",
        last.footprint(),
        last.len()
    );
    for name in ["cm-0", "cm-97", "cm-99"] {
        let (a, b) = (
            plain.get("configmaps", &key(name)).unwrap(),
            packed.get("configmaps", &key(name)).unwrap(),
        );
        assert_eq!(same(&a.bytes()), same(&b.bytes()), "{name}");
        assert_eq!(a.len(), b.len());
    }
    let past = |g: &Group| {
        g.snapshot("configmaps", ReadAt::Exact(100))
            .unwrap()
            .objects
    };
    let (a, b) = (past(&plain), past(&packed));
    assert_eq!(b.len(), 100);
    for (k, o) in a.iter() {
        assert_eq!(
            same(&o.bytes()),
            same(&b.get(k).unwrap().bytes()),
            "{}",
            k.name
        );
    }
    let backlog = |g: &Group| g.watch(Some(95)).unwrap().backlog;
    let (a, b) = (backlog(&plain), backlog(&packed));
    assert_eq!(b.len(), 7);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.event_type, y.event_type);
        assert_eq!(same(&x.object.bytes()), same(&y.object.bytes()));
        let previous = |e: &Event| e.previous.as_ref().map(|p| same(&p.bytes()));
        assert_eq!(previous(x), previous(y));
    }
    assert_eq!(b.last().unwrap().event_type, EventType::Deleted);
}

/// A new version shares with the one it supersedes what did not change (the window keeps
/// both), and holds its own copy of what did.
#[test]
fn a_new_version_shares_what_did_not_change() {
    let g = group(100);
    let labelled = |data: &str, tier: &str| {
        with_meta(
            cm("a", data),
            json!({"labels": {"app": "web", "tier": tier}}),
        )
    };
    let first = g
        .create("configmaps", labelled("1", "front"), Default::default())
        .unwrap();
    let second = g
        .update(
            "configmaps",
            labelled("2", "front"),
            Default::default(),
            None,
        )
        .unwrap();
    assert!(Arc::ptr_eq(&first.meta.uid, &second.meta.uid));
    assert!(Arc::ptr_eq(&first.meta.name, &second.meta.name));
    assert!(Arc::ptr_eq(&first.derived, &second.derived));
    assert_eq!(second.meta.labels.get("tier"), Some("front"));
    let third = g
        .update(
            "configmaps",
            labelled("3", "back"),
            Default::default(),
            None,
        )
        .unwrap();
    assert_eq!(third.meta.labels.get("tier"), Some("back"));
    assert_eq!(
        second.meta.labels.get("tier"),
        Some("front"),
        "the old version unchanged"
    );
    assert_eq!(second.to_value().unwrap()["data"]["k"], "2");
}

/// A writer that asks for what it wrote gets the JSON the store sealed: the object's bytes
/// decoded, server fields and all; a write that changes nothing answers with the stored
/// version, and a write whose owners are collected with the version the collector wrote.
#[test]
fn a_decoded_write_answers_with_what_was_stored() {
    let g = group(100);
    let created = g
        .create_decoded("configmaps", cm("a", "1"), Default::default())
        .unwrap();
    assert_eq!(created.value, created.object.to_value().unwrap());
    assert_eq!(created.value["metadata"]["resourceVersion"], json!("1"));
    assert!(created.value["metadata"]["uid"].is_string());

    let mut next = created.value.clone();
    next["data"]["k"] = json!("2");
    let updated = g
        .update_read_decoded(
            "configmaps",
            next,
            Default::default(),
            Some(1),
            created.read(),
        )
        .unwrap();
    assert_eq!(updated.object.meta.resource_version, 2);
    assert_eq!(updated.value, updated.object.to_value().unwrap());
    assert_eq!(updated.value["data"]["k"], json!("2"));

    let same = g
        .update_read_decoded(
            "configmaps",
            updated.value.clone(),
            Default::default(),
            Some(2),
            updated.read(),
        )
        .unwrap();
    assert!(Arc::ptr_eq(&same.object, &updated.object));
    assert_eq!(same.value, updated.value);

    // An owner that does not exist: the collector removes the reference, a later version.
    let owner = g
        .create_decoded("configmaps", cm("owner", "x"), Default::default())
        .unwrap();
    let owned = with_meta(
        cm("owned", "y"),
        json!({"ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.object.meta.uid.to_string()},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": "no-such-uid"}]}),
    );
    let kept = g
        .create_decoded("configmaps", owned, Default::default())
        .unwrap();
    assert_eq!(kept.value, kept.object.to_value().unwrap());
    assert_eq!(
        kept.value["metadata"]["ownerReferences"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
}
