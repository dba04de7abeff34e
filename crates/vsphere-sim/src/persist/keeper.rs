//! The records of one simulator in its store group: one per kept managed object (its
//! properties and what the simulator keeps beside it), one for the simulator itself (the
//! counters new references and addresses are made from), and one per REST service or
//! identity record a caller keeps ([`Keeper::put_record`]).

use super::codec::{self, Corrupt};
use super::pieces;
use crate::guest::{GuestCounters, GuestRecord};
use crate::objects::ManagedObject;
use crate::state::State;
use crate::value::{Moref, Val};
use infrasim_store::{DeleteOptions, Group, ObjectKey, ReadAt, StoreError};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

const OBJECTS: &str = "managedobjects";
/// The pieces of long lists (see `pieces`), named `<object>/<property>/<hash>`.
const PIECES: &str = "listpieces";
/// Files uploaded to datastores, one record each, named `<datastore>/<path>`.
const FILES: &str = "datastorefiles";
const RECORDS: &str = "simrecords";
/// In `RECORDS`: the simulator's own record.
const SIM: &str = "simulator";

/// Where a simulator keeps what survives its restart. Cheap to clone.
#[derive(Clone)]
pub struct Keeper {
    group: Arc<Group>,
    /// The pieces each long list (`<object>/<property>`) is kept in now, to drop those a
    /// change leaves unused.
    pieces: Arc<Mutex<HashMap<String, Vec<String>>>>,
    /// The first write that failed since the server last asked (see [`Keeper::take_error`]).
    failed: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for Keeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keeper")
            .field("group", &self.group.name())
            .finish()
    }
}

/// The simulator's own record: what makes its next references and addresses.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SimRecord {
    next_id: u64,
    guests: GuestCounters,
}

/// What is kept beside a VM or a cluster.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Side {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    guest: Option<GuestRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    snapshots: Option<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    policies: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    disk_policies: BTreeMap<String, Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    drs: Option<crate::state::drs::ClusterConfig>,
}

impl Keeper {
    /// A keeper writing to `group` (a group of its own: everything in it is the simulator's).
    pub fn new(group: Arc<Group>) -> Self {
        Keeper {
            group,
            pieces: Arc::default(),
            failed: Arc::default(),
        }
    }

    /// Whether the group holds a simulator (a restart) rather than nothing (a first start).
    pub fn holds_a_simulator(&self) -> bool {
        self.group.get(RECORDS, &ObjectKey::new("", SIM)).is_some()
    }

    /// Keeps `record` under `name` (a caller's record: its certificate, its REST state).
    pub fn put_record<T: Serialize>(&self, name: &str, record: &T) {
        match serde_json::to_value(record) {
            Ok(v) => self.put(RECORDS, name, json!({"record": v})),
            Err(e) => self.fail(format!("record {name}: {e}")),
        }
    }

    /// The record kept under `name`, if there is one it can read.
    pub fn record<T: DeserializeOwned>(&self, name: &str) -> Option<T> {
        let stored = self.group.get(RECORDS, &ObjectKey::new("", name))?;
        let value = stored.to_value().ok()?;
        match serde_json::from_value(value.get("record")?.clone()) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::error!(group = self.group.name(), name, error = %e, "a simulator record cannot be read");
                None
            }
        }
    }

    /// The first write that failed since the last call: the call that made it must not be
    /// answered as done.
    pub fn take_error(&self) -> Option<String> {
        self.failed.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    fn fail(&self, why: String) {
        tracing::error!(group = self.group.name(), %why, "a simulator write was not kept");
        let mut failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        failed.get_or_insert(why);
    }

    /// Writes what changed in `state` since the last save: each changed object's record (or
    /// its deletion), then the simulator's record.
    pub(crate) fn save(&self, state: &mut State) {
        let dirty = state.inventory.take_dirty();
        if dirty.is_empty() {
            return;
        }
        for value in dirty {
            match state.inventory.by_value(&value) {
                Some(o) if super::kept(&o.moref.ty, &value) => self.put_object(state, o),
                Some(_) => {}
                None => {
                    self.delete(OBJECTS, &value);
                    self.drop_pieces_of(&value);
                }
            }
        }
        self.save_sim(state);
    }

    /// Writes every object of `state` (a simulator's first start on an empty group).
    pub(crate) fn save_all(&self, state: &mut State) {
        state.inventory.take_dirty();
        for o in state.inventory.iter() {
            if super::kept(&o.moref.ty, &o.moref.value) {
                self.put_object(state, o);
            }
        }
        self.save_sim(state);
    }

    fn save_sim(&self, state: &State) {
        let record = SimRecord {
            next_id: state.inventory.next_id(),
            guests: state.guests.counters(),
        };
        self.put_record(SIM, &record);
    }

    fn put(&self, resource: &str, name: &str, mut object: Value) {
        object["apiVersion"] = json!("infrasim.dev/v1");
        object["kind"] = json!("SimulatorRecord");
        object["metadata"] = json!({"name": name});
        if let Err(e) = self.group.put(resource, &ObjectKey::new("", name), object) {
            self.fail(format!("{resource}/{name}: {e}"));
        }
    }

    fn delete(&self, resource: &str, name: &str) {
        let key = ObjectKey::new("", name);
        match self.group.delete(resource, &key, &DeleteOptions::default()) {
            Ok(_) | Err(StoreError::NotFound { .. }) => {}
            Err(e) => self.fail(format!("deleting {resource}/{name}: {e}")),
        }
    }

    /// Keeps a file uploaded to `datastore` (a reference value) at `path`.
    pub(crate) fn put_file(&self, datastore: &str, path: &str, body: &[u8]) {
        use base64::Engine;
        let data = base64::engine::general_purpose::STANDARD.encode(body);
        let record = json!({"datastore": datastore, "path": path, "data": data});
        self.put(FILES, &format!("{datastore}/{path}"), record);
    }

    pub(crate) fn delete_file(&self, datastore: &str, path: &str) {
        self.delete(FILES, &format!("{datastore}/{path}"));
    }

    /// The kept files: (datastore, path, contents).
    pub(crate) fn files(&self) -> Vec<(String, String, Vec<u8>)> {
        use base64::Engine;
        let Ok(snapshot) = self.group.snapshot(FILES, ReadAt::Latest) else {
            return Vec::new();
        };
        let engine = base64::engine::general_purpose::STANDARD;
        snapshot
            .objects
            .values()
            .filter_map(|o| {
                let v = o.to_value().ok()?;
                let text = |f: &str| v.get(f)?.as_str().map(str::to_string);
                let data = engine.decode(text("data")?).ok()?;
                Some((text("datastore")?, text("path")?, data))
            })
            .collect()
    }

    /// Every kept object, still encoded: decoded one at a time, ten thousand VMs' records
    /// never sit decoded in memory at once.
    fn objects(&self) -> Vec<Arc<infrasim_store::StoredObject>> {
        let Ok(snapshot) = self.group.snapshot(OBJECTS, ReadAt::Latest) else {
            return Vec::new();
        };
        snapshot.objects.values().cloned().collect()
    }
}

impl Keeper {
    /// Writes `o`'s record, its long lists as pieces: the pieces it did not hold yet, then
    /// the record naming them, then the deletion of the pieces it no longer names.
    fn put_object(&self, state: &State, o: &ManagedObject) {
        let value = o.moref.value.as_str();
        let mut unused = Vec::new();
        let props = codec::encode_data_with(o.props.as_data(), |name, v| match v {
            Val::Array(item, items) if items.len() > pieces::OVER => {
                Some(self.put_pieces(&format!("{value}/{name}"), item, items, &mut unused))
            }
            _ => None,
        });
        self.put(OBJECTS, value, object_record(state, o, props));
        for name in unused {
            self.delete(PIECES, &name);
        }
    }

    /// Keeps the long list `list` (`<object>/<property>`) in pieces; what its record holds
    /// instead of the items. The pieces it held before and no longer does go to `unused`.
    fn put_pieces(&self, list: &str, item: &str, items: &[Val], unused: &mut Vec<String>) -> Value {
        let mut held = self.pieces.lock().unwrap_or_else(|p| p.into_inner());
        let before = held.remove(list).unwrap_or_default();
        let mut now = Vec::new();
        let mut hashes = Vec::new();
        for (hash, piece) in pieces::cut(items) {
            let name = format!("{list}/{hash:016x}");
            if !before.contains(&name) && !now.contains(&name) {
                let encoded: Vec<Value> = piece.iter().map(codec::encode).collect();
                self.put(PIECES, &name, json!({"v": encoded}));
            }
            hashes.push(Value::String(format!("{hash:016x}")));
            now.push(name);
        }
        unused.extend(before.into_iter().filter(|n| !now.contains(n)));
        held.insert(list.to_string(), now);
        json!({"a": item, "pieces": hashes})
    }

    /// Forgets the pieces of a deleted object's lists.
    fn drop_pieces_of(&self, value: &str) {
        let prefix = format!("{value}/");
        let dropped: Vec<String> = {
            let mut held = self.pieces.lock().unwrap_or_else(|p| p.into_inner());
            let lists: Vec<String> = held
                .keys()
                .filter(|l| l.starts_with(&prefix))
                .cloned()
                .collect();
            lists
                .into_iter()
                .flat_map(|l| held.remove(&l).unwrap_or_default())
                .collect()
        };
        for name in dropped {
            self.delete(PIECES, &name);
        }
    }

    /// The items of the list `list` kept in the pieces `hashes` (noted as held).
    fn read_pieces(&self, list: &str, hashes: &[Value]) -> Result<Vec<Value>, Corrupt> {
        let mut items = Vec::new();
        let mut names = Vec::new();
        for hash in hashes {
            let name = format!("{list}/{}", hash.as_str().unwrap_or_default());
            let mut piece = self
                .group
                .get(PIECES, &ObjectKey::new("", &name))
                .and_then(|o| o.to_value().ok())
                .ok_or_else(|| Corrupt(format!("the piece {name} of a list is missing")))?;
            match piece.get_mut("v").map(Value::take) {
                Some(Value::Array(v)) => items.extend(v),
                _ => return Err(Corrupt(format!("the piece {name} holds no items"))),
            }
            names.push(name);
        }
        self.pieces
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(list.to_string(), names);
        Ok(items)
    }
}

/// An object's record: its type, its properties (`props`, encoded), what is kept beside it.
fn object_record(state: &State, o: &ManagedObject, props: Value) -> Value {
    let value = o.moref.value.as_str();
    let mut side = Side::default();
    match &*o.moref.ty {
        "VirtualMachine" => {
            side.guest = state.guests.record(value);
            side.snapshots = state.snapshots.record(value);
            (side.policies, side.disk_policies) = state.profiles.record(value);
        }
        "ClusterComputeResource" => side.drs = state.drs.clusters.get(value).cloned(),
        _ => {}
    }
    json!({
        "type": o.moref.ty,
        "props": props,
        "side": serde_json::to_value(side).unwrap_or_default(),
    })
}

/// Brings `state` back from `keeper`'s records; `false` when the group holds no simulator.
pub(crate) fn restore(keeper: &Keeper, state: &mut State) -> Result<bool, Corrupt> {
    let Some(sim) = keeper.record::<SimRecord>(SIM) else {
        return Ok(false);
    };
    for stored in keeper.objects() {
        let record = stored
            .to_value()
            .map_err(|e| Corrupt(format!("a record cannot be read: {e}")))?;
        restore_object(keeper, state, record)?;
    }
    // What restoring grew one object at a time, given back.
    state.inventory.compact();
    state.inventory.set_next_id(sim.next_id);
    state.guests.restore_counters(sim.guests);
    // The restored objects are what the store holds: nothing to write back.
    state.inventory.take_dirty();
    Ok(true)
}

fn restore_object(keeper: &Keeper, state: &mut State, mut record: Value) -> Result<(), Corrupt> {
    let value = record["metadata"]["name"]
        .as_str()
        .ok_or_else(|| Corrupt("a record without a name".into()))?
        .to_string();
    let value = value.as_str();
    // Long lists come back from their pieces.
    if let Some(flat) = record["props"]["f"].as_array_mut() {
        for pair in flat.chunks_exact_mut(2) {
            let Some(hashes) = pair[1].get("pieces").and_then(Value::as_array) else {
                continue;
            };
            let list = format!("{value}/{}", pair[0].as_str().unwrap_or_default());
            let items = keeper.read_pieces(&list, hashes)?;
            pair[1] = json!({"a": pair[1]["a"], "v": items});
        }
    }
    let ty = record["type"]
        .as_str()
        .ok_or_else(|| Corrupt(format!("{value}: no type")))?;
    let props = &record["props"];
    let data = codec::decode_fields(props.get("o"), &props["f"])
        .map_err(|Corrupt(why)| Corrupt(format!("{value}: {why}")))?;
    state.inventory.insert(ManagedObject {
        moref: Moref::new(ty, value),
        props: crate::data::Props::from_data(data),
    });
    let side: Side = serde_json::from_value(record["side"].take())
        .map_err(|e| Corrupt(format!("{value}: {e}")))?;
    if let Some(guest) = side.guest {
        state.guests.restore(value, guest);
    }
    if let Some(snapshots) = &side.snapshots {
        state.snapshots.restore(value, snapshots)?;
    }
    if !side.policies.is_empty() || !side.disk_policies.is_empty() {
        state
            .profiles
            .restore(value, side.policies, side.disk_policies);
    }
    if let Some(drs) = side.drs {
        state.drs.clusters.insert(value.to_string(), drs);
    }
    Ok(())
}
