//! The durable backend under a real store: writes survive a reopen with everything the
//! store keeps, watches resume across it, and a full disk, a held lock, a foreign format and
//! a corrupt file are each refused with what is wrong.

use super::*;
use infrasim_store::{ObjectKey, ReadAt, Store, StoreConfig};
use serde_json::json;

fn open_store(dir: &Path, faults: Arc<Faults>) -> Store {
    open_with_backend(dir, faults).0
}

fn open_with_backend(dir: &Path, faults: Arc<Faults>) -> (Store, Arc<DurableBackend>) {
    let backend = Arc::new(DurableBackend::open_with(dir, 50, faults).unwrap());
    let config = StoreConfig {
        watch_window: 50,
        ..StoreConfig::default()
    };
    let store = Store::open(
        config,
        infrasim_clock::SystemClock::shared(),
        backend.clone(),
    )
    .unwrap();
    (store, backend)
}

/// A store on `faults`' disk with group `g` holding ConfigMap `a`.
fn with_a(dir: &Path, faults: &Arc<Faults>) -> (Store, Arc<infrasim_store::Group>) {
    let store = open_store(dir, faults.clone());
    let g = store.create_group("g").unwrap();
    g.create("configmaps", cm("a", "1"), Default::default())
        .unwrap();
    (store, g)
}

fn cm(name: &str, data: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default", "finalizers": ["keep"]},
           "data": {"k": data}})
}

#[test]
fn writes_come_back_after_a_reopen_and_watches_resume_across_it() {
    let dir = tempfile::tempdir().unwrap();
    let (made, rv_before) = {
        let store = open_store(dir.path(), Faults::none());
        let g = store.create_group("management").unwrap();
        let made = g
            .create("configmaps", cm("a", "1"), Default::default())
            .unwrap();
        for i in 0..5 {
            g.create("configmaps", cm(&format!("b{i}"), "x"), Default::default())
                .unwrap();
        }
        g.delete(
            "configmaps",
            &ObjectKey::new("default", "b0"),
            &Default::default(),
        )
        .unwrap();
        (made, g.resource_version())
    };
    let store = open_store(dir.path(), Faults::none());
    let g = store.group("management").expect("restored");
    let back = g
        .get("configmaps", &ObjectKey::new("default", "a"))
        .unwrap();
    assert_eq!(
        back.bytes(),
        made.bytes(),
        "byte for byte: uid, rv, finalizers, time"
    );
    assert_eq!(back.meta, made.meta);
    let marked = g
        .get("configmaps", &ObjectKey::new("default", "b0"))
        .unwrap();
    assert!(
        marked.meta.deletion_timestamp.is_some(),
        "still waiting on its finalizer"
    );
    assert!(
        g.resource_version() >= rv_before,
        "the counter goes on from its reservation"
    );
    let next = g
        .create("configmaps", cm("c", "2"), Default::default())
        .unwrap();
    assert!(next.meta.resource_version > rv_before, "never reused");
    // A watch from before the restart replays what came after it, with no gap.
    let mut w = g.watch(Some(made.meta.resource_version)).unwrap();
    let replayed: Vec<u64> = w.backlog.drain(..).map(|e| e.resource_version).collect();
    let mut expected: Vec<u64> = (made.meta.resource_version + 1..=rv_before).collect();
    expected.push(next.meta.resource_version);
    assert!(
        replayed == expected,
        "replayed {} events, not the {} expected",
        replayed.len(),
        expected.len()
    );
    // An exact read of the past still works from the restored window.
    let past = g
        .snapshot("configmaps", ReadAt::Exact(made.meta.resource_version))
        .unwrap();
    assert_eq!(past.objects.len(), 1);
    drop((w, g, store));
    // The write after the restart (whose resourceVersion jumped by the reservation) trimmed
    // nothing from before it: a third run replays the same history.
    let store = open_store(dir.path(), Faults::none());
    let g = store.group("management").expect("restored again");
    let mut w = g.watch(Some(made.meta.resource_version)).unwrap();
    let replayed: Vec<u64> = w.backlog.drain(..).map(|e| e.resource_version).collect();
    assert!(
        replayed == expected,
        "after a second restart: replayed {} events, not the {} expected",
        replayed.len(),
        expected.len()
    );
}

#[test]
fn the_database_and_its_log_are_readable_by_their_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let _ = with_a(dir.path(), &Faults::none());
    for file in [FILE, LOGS[0], LOGS[1]] {
        let mode = std::fs::metadata(dir.path().join(file))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{file}: {mode:o}");
    }
}

#[test]
fn history_is_trimmed_to_the_window_and_older_versions_are_gone_not_gapped() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open_store(dir.path(), Faults::none());
        let g = store.create_group("g").unwrap();
        g.create("configmaps", cm("a", "0"), Default::default())
            .unwrap();
        for i in 1..300 {
            let mut v = cm("a", &i.to_string());
            v["metadata"]["resourceVersion"] = json!(null);
            g.update("configmaps", v, Default::default(), None).unwrap();
        }
    }
    let db = Database::open(dir.path().join(FILE)).unwrap();
    let kept = db
        .begin_read()
        .unwrap()
        .open_table(EVENTS)
        .unwrap()
        .len()
        .unwrap();
    assert!((50..=63).contains(&kept), "{kept} events on disk");
    drop(db);
    let store = open_store(dir.path(), Faults::none());
    let g = store.group("g").unwrap();
    let err = g.watch(Some(10)).unwrap_err();
    assert!(matches!(err, StoreError::Expired { .. }), "{err:?}");
    assert!(g.watch(Some(g.resource_version() - 40)).is_ok());
}

#[test]
fn a_commit_torn_at_any_point_is_discarded_and_everything_before_it_is_back() {
    // The power goes after each number of the commit's disk operations in turn (each page
    // of its log frame, then the sync), so the log is left with every prefix of the frame.
    // Before the commit's own durable point the write must be gone; past it (the power went
    // before the answer) it may be there, but whole. Either way the store opens with
    // everything durable before it.
    let big = "x".repeat(20_000);
    let mut present = Vec::new();
    for cut in 0..16 {
        let dir = tempfile::tempdir().unwrap();
        let faults = Faults::none();
        {
            let (store, backend) = open_with_backend(dir.path(), faults.clone());
            let g = store.create_group("g").unwrap();
            g.create("configmaps", cm("a", "1"), Default::default())
                .unwrap();
            // The database takes `a` first, so the cut counts the torn write's operations
            // alone (and the start replays whatever the log still holds).
            backend.flush().unwrap();
            faults.cut_power_after(cut);
            let torn = g.create("configmaps", cm("torn", &big), Default::default());
            if torn.is_ok() {
                break; // the whole commit fits in `cut` operations: nothing left to tear
            }
        }
        let store = open_store(dir.path(), Faults::none());
        let g = store.group("g").expect("the group is back");
        let get = |name: &str| g.get("configmaps", &ObjectKey::new("default", name));
        assert!(get("a").is_some(), "cut {cut}: what was durable is back");
        if let Some(torn) = get("torn") {
            assert_eq!(
                torn.to_value().unwrap()["data"]["k"],
                big.as_str(),
                "cut {cut}: whole"
            );
        }
        present.push(get("torn").is_some());
        g.create("configmaps", cm("after", "1"), Default::default())
            .unwrap_or_else(|e| panic!("cut {cut}: the store takes writes again: {e}"));
    }
    let torn = present.iter().take_while(|p| !**p).count();
    assert!(
        torn >= 3,
        "the commit was torn at {torn} points only: {present:?}"
    );
    assert!(
        present[torn..].iter().all(|p| *p),
        "once past its durable point a commit stays: {present:?}"
    );
}

#[test]
fn a_failing_disk_refuses_writes_applies_nothing_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Faults::none();
    let (store, g) = with_a(dir.path(), &faults);
    faults.set_failing(true);
    let err = g
        .create("configmaps", cm("b", "1"), Default::default())
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::Backend(why) if why.contains("No space left")),
        "{err:?}"
    );
    assert!(
        g.get("configmaps", &ObjectKey::new("default", "b"))
            .is_none(),
        "nothing applied"
    );
    assert!(
        g.get("configmaps", &ObjectKey::new("default", "a"))
            .is_some(),
        "reads work"
    );
    faults.set_failing(false);
    g.create("configmaps", cm("b", "2"), Default::default())
        .unwrap();
    drop(g);
    drop(store);
    let store = open_store(dir.path(), Faults::none());
    let g = store.group("g").unwrap();
    let b = g
        .get("configmaps", &ObjectKey::new("default", "b"))
        .unwrap();
    assert_eq!(b.to_value().unwrap()["data"]["k"], "2");
}

#[test]
fn a_write_whose_sync_failed_is_taken_back_even_if_its_data_reached_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Faults::none();
    {
        let (_store, g) = with_a(dir.path(), &faults);
        faults.set_failing_sync(true);
        let err = g
            .create("configmaps", cm("b", "1"), Default::default())
            .unwrap_err();
        assert!(matches!(err, StoreError::Backend(_)), "{err:?}");
        faults.set_failing_sync(false);
        g.create("configmaps", cm("c", "1"), Default::default())
            .unwrap();
    }
    let store = open_store(dir.path(), Faults::none());
    let g = store.group("g").unwrap();
    let has = |n: &str| g.get("configmaps", &ObjectKey::new("default", n)).is_some();
    assert!(has("a") && has("c"));
    assert!(!has("b"), "refused, so never there, after a restart too");
}

#[test]
fn a_closed_store_lets_go_of_its_directory_and_takes_no_more_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (store, backend) = open_with_backend(dir.path(), Faults::none());
    let g = store.create_group("g").unwrap();
    g.create("configmaps", cm("a", "1"), Default::default())
        .unwrap();
    // Closed while the store and its group are still held (as by a task that has not yet
    // noticed its cluster stopped): the directory opens again at once.
    backend.close();
    let late = g.create("configmaps", cm("late", "x"), Default::default());
    assert!(late.is_err(), "a write after the close is refused");
    let (again, _) = open_with_backend(dir.path(), Faults::none());
    let names: Vec<String> = again
        .group("g")
        .unwrap()
        .snapshot("configmaps", ReadAt::Latest)
        .unwrap()
        .objects
        .keys()
        .map(|k| k.name.to_string())
        .collect();
    assert_eq!(
        names,
        ["a"],
        "what was acknowledged before the close, nothing after"
    );
    drop(store);
}

#[test]
fn a_held_lock_a_foreign_format_and_a_corrupt_file_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let first = DurableBackend::open(dir.path(), 10).unwrap();
    let held = DurableBackend::open(dir.path(), 10).unwrap_err();
    assert!(matches!(held, OpenError::Locked(_)), "{held}");
    assert!(held.to_string().contains(LOCK));
    drop(first);
    {
        let db = Database::create(dir.path().join(FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(META).unwrap().insert("format", 99).unwrap();
        txn.commit().unwrap();
    }
    let foreign = DurableBackend::open(dir.path(), 10).unwrap_err();
    assert!(
        matches!(foreign, OpenError::Incompatible { found: 99, .. }),
        "{foreign}"
    );
    let corrupt = tempfile::tempdir().unwrap();
    let file = corrupt.path().join(FILE);
    std::fs::write(&file, vec![0x5a; 8192]).unwrap();
    let err = DurableBackend::open(corrupt.path(), 10).unwrap_err();
    assert!(
        err.to_string().contains(&file.display().to_string()),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&file).unwrap(),
        vec![0x5a; 8192],
        "left as it is"
    );
}

#[test]
fn a_churned_store_stays_the_size_of_its_live_objects_and_window() {
    // 16,000 writes of ~300 bytes to 8 objects: a file that grew with the writes would pass
    // 4 MiB; one that holds the live objects and the window (50 events) stays well under 1.
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path(), Faults::none());
    let g = store.create_group("g").unwrap();
    let writers: Vec<_> = (0..8)
        .map(|t| {
            let g = g.clone();
            std::thread::spawn(move || {
                g.create("configmaps", cm(&format!("t{t}"), "0"), Default::default())
                    .unwrap();
                for i in 1..2_000 {
                    let mut v = cm(&format!("t{t}"), &i.to_string());
                    v["metadata"]["resourceVersion"] = json!(null);
                    g.update("configmaps", v, Default::default(), None).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let size = std::fs::metadata(dir.path().join(FILE)).unwrap().len();
    assert!(size < 1024 * 1024, "{size} bytes for 8 objects");
}

/// Writes `names` with the database refusing every commit: each is answered once the log
/// has it, and the store ends with the log holding writes the database never took.
fn answered_from_the_log_only(dir: &Path, names: &[&str]) -> Vec<u64> {
    let faults = Faults::none();
    let (_store, g) = with_a(dir, &faults);
    faults.set_failing_database(true);
    names
        .iter()
        .map(|n| {
            g.create("configmaps", cm(n, n), Default::default())
                .unwrap()
                .meta
                .resource_version
        })
        .collect()
}

fn objects_in_database(dir: &Path) -> u64 {
    let db = Database::open(dir.join(FILE)).unwrap();
    let txn = db.begin_read().unwrap();
    let objects = txn.open_table(OBJECTS).unwrap();
    objects.len().unwrap()
}

#[test]
fn writes_the_database_never_took_come_back_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let rvs = answered_from_the_log_only(dir.path(), &["b0", "b1", "b2"]);
    assert!(
        objects_in_database(dir.path()) < 4,
        "the database refused them"
    );
    {
        let store = open_store(dir.path(), Faults::none());
        let g = store.group("g").unwrap();
        for (name, rv) in ["b0", "b1", "b2"].iter().zip(&rvs) {
            let back = g.get("configmaps", &ObjectKey::new("default", name));
            assert_eq!(back.map(|o| o.meta.resource_version), Some(*rv), "{name}");
        }
        let mut w = g.watch(Some(rvs[0])).unwrap();
        let replayed: Vec<u64> = w.backlog.drain(..).map(|e| e.resource_version).collect();
        assert_eq!(replayed, rvs[1..], "their events came back too");
    }
    assert_eq!(
        objects_in_database(dir.path()),
        4,
        "replayed into the database"
    );
    // The log started over: a third start finds the same, from the database alone.
    let store = open_store(dir.path(), Faults::none());
    let g = store.group("g").unwrap();
    assert!(g
        .get("configmaps", &ObjectKey::new("default", "b2"))
        .is_some());
}

#[test]
fn a_damaged_log_frame_with_frames_after_it_stops_the_start_and_is_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    answered_from_the_log_only(dir.path(), &["b0", "b1", "b2"]);
    let log = dir.path().join(LOGS[0]);
    let mut bytes = std::fs::read(&log).unwrap();
    // The frames are `a`, b0, b1, b2, a page each: damage b0's.
    bytes[4096 + 40] ^= 0xff;
    std::fs::write(&log, &bytes).unwrap();
    let err = DurableBackend::open(dir.path(), 50).unwrap_err();
    let message = err.to_string();
    assert!(message.contains(&log.display().to_string()), "{message}");
    assert!(message.contains("damaged"), "{message}");
    assert!(std::fs::read(&log).unwrap() == bytes, "left as it is");
}

#[test]
fn a_log_that_runs_into_its_second_file_comes_back_whole() {
    // 48 writes of ~200 KB of frame each, the database refusing them all: the first file
    // fills, the log goes on in the second, and the first is not written over (the database
    // never took it). A start replays both, in order.
    let dir = tempfile::tempdir().unwrap();
    let big = "y".repeat(100_000);
    let faults = Faults::none();
    let rvs: Vec<u64> = {
        let (_store, g) = with_a(dir.path(), &faults);
        faults.set_failing_database(true);
        (0..48)
            .map(|i| {
                g.create(
                    "configmaps",
                    cm(&format!("big{i}"), &big),
                    Default::default(),
                )
                .unwrap()
                .meta
                .resource_version
            })
            .collect()
    };
    let sizes = LOGS.map(|f| std::fs::metadata(dir.path().join(f)).unwrap().len());
    assert!(
        sizes[1] > committer::APPLY_AT && sizes[0] > committer::APPLY_AT,
        "both files used: {sizes:?}"
    );
    let store = open_store(dir.path(), Faults::none());
    let g = store.group("g").unwrap();
    for (i, rv) in rvs.iter().enumerate() {
        let back = g.get("configmaps", &ObjectKey::new("default", &format!("big{i}")));
        assert_eq!(back.map(|o| o.meta.resource_version), Some(*rv), "big{i}");
    }
    drop((g, store));
    assert_eq!(
        objects_in_database(dir.path()),
        49,
        "replayed into the database"
    );
}

#[test]
fn a_dropped_group_made_again_comes_back_with_only_its_new_objects() {
    // The drop is logged in order with the writes around it, so a start that replays the
    // log (the database took none of it) drops the old objects before the new ones come.
    let dir = tempfile::tempdir().unwrap();
    {
        let faults = Faults::none();
        let (store, g) = with_a(dir.path(), &faults);
        faults.set_failing_database(true);
        g.create("configmaps", cm("old", "1"), Default::default())
            .unwrap();
        drop(g);
        store.drop_group("g").unwrap();
        let again = store.create_group("g").unwrap();
        again
            .create("configmaps", cm("new", "1"), Default::default())
            .unwrap();
        store.create_group("h").unwrap();
        store.drop_group("h").unwrap();
    }
    let store = open_store(dir.path(), Faults::none());
    let g = store.group("g").expect("made again");
    let has = |n: &str| g.get("configmaps", &ObjectKey::new("default", n)).is_some();
    assert!(has("new"));
    assert!(
        !has("a") && !has("old"),
        "the old group's objects stay dropped"
    );
    assert!(store.group("h").is_none());
}

/// Every file of the store in `dir`, by name, with its bytes.
fn files_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name() != LOCK)
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn a_database_damaged_mid_file_is_refused_and_not_one_byte_of_the_store_changes() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (store, backend) = open_with_backend(dir.path(), Faults::none());
        let g = store.create_group("g").unwrap();
        let big = "x".repeat(2_000);
        for i in 0..400 {
            g.create("configmaps", cm(&format!("c{i}"), &big), Default::default())
                .unwrap();
        }
        backend.flush().unwrap();
    }
    let file = dir.path().join(FILE);
    let mut bytes = std::fs::read(&file).unwrap();
    assert!(bytes.len() > 256 * 1024, "{} bytes", bytes.len());
    let mid = bytes.len() / 2;
    bytes[mid..mid + 64].fill(0xa5);
    std::fs::write(&file, &bytes).unwrap();
    let before = files_of(dir.path());

    let err = DurableBackend::open(dir.path(), 50).unwrap_err();
    assert!(err.to_string().ends_with("it is left as it is"), "{err}");
    assert!(err.to_string().contains("store.redb"), "{err}");
    let checked = check(dir.path(), 50).err().expect("check finds the damage");
    assert!(matches!(checked, OpenError::Unreadable { .. }), "{checked}");
    assert!(
        files_of(dir.path()) == before,
        "a failed start or check changed the store's files"
    );
}

#[test]
fn a_check_reads_a_healthy_store_whole_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (store, backend) = open_with_backend(dir.path(), Faults::none());
        let g = store.create_group("g").unwrap();
        for i in 0..10 {
            g.create("configmaps", cm(&format!("c{i}"), "v"), Default::default())
                .unwrap();
        }
        backend.flush().unwrap();
        g.create("configmaps", cm("late", "v"), Default::default())
            .unwrap();
    }
    let before = files_of(dir.path());
    let verified = check(dir.path(), 50).unwrap();
    assert_eq!(verified.objects(), 11);
    assert_eq!(verified.images.len(), 1);
    assert!(
        files_of(dir.path()) == before,
        "the check wrote to the store"
    );

    let logged = tempfile::tempdir().unwrap();
    answered_from_the_log_only(logged.path(), &["b0", "b1"]);
    let before = files_of(logged.path());
    let verified = check(logged.path(), 50).unwrap();
    assert!(verified.pending_frames > 0, "the database refused them");
    assert_eq!(verified.objects(), 3, "replayed from the log, in memory");
    assert!(
        files_of(logged.path()) == before,
        "the check wrote to the store"
    );

    let missing = tempfile::tempdir().unwrap();
    assert!(
        check(missing.path(), 50).is_err(),
        "no store, nothing to check"
    );
    assert!(!missing.path().join(LOCK).exists());
}

#[test]
fn a_packed_store_comes_back_packed_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        let backend = Arc::new(DurableBackend::open_with(dir.path(), 50, Faults::none()).unwrap());
        let config = StoreConfig {
            watch_window: 50,
            packed: true,
            ..StoreConfig::default()
        };
        Store::open(config, infrasim_clock::SystemClock::shared(), backend).unwrap()
    };
    let long = "a value every ConfigMap here shares, long enough to be worth packing";
    let made: Vec<_> = {
        let store = open();
        let g = store.create_group("cluster").unwrap();
        (0..100)
            .map(|i| {
                g.create("configmaps", cm(&format!("c{i}"), long), Default::default())
                    .unwrap()
            })
            .collect()
    };
    let store = open();
    let g = store.group("cluster").expect("restored");
    for object in &made {
        let back = g.get("configmaps", &object.meta.key()).unwrap();
        assert_eq!(back.bytes(), object.bytes(), "{}", object.meta.name);
    }
    let last = g.get("configmaps", &made[99].meta.key()).unwrap();
    assert!(
        last.footprint() * 4 < last.len(),
        "{} of {}",
        last.footprint(),
        last.len()
    );
    let backlog = g.watch(Some(90)).unwrap().backlog;
    assert_eq!(backlog.len(), 10);
    assert_eq!(backlog[9].object.bytes(), made[99].bytes());
}
