//! The records of one simulator in its store group: one per kept managed object (its
//! properties and what the simulator keeps beside it), one for the simulator itself (the
//! counters new references and addresses are made from), and one per REST service or
//! identity record a caller keeps ([`Keeper::put_record`]).

use super::codec::{self, Corrupt};
use crate::guest::{GuestCounters, GuestRecord};
use crate::objects::ManagedObject;
use crate::state::State;
use crate::value::Moref;
use infrasim_store::{DeleteOptions, Group, ObjectKey, ReadAt, StoreError};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

const OBJECTS: &str = "managedobjects";
/// Files uploaded to datastores, one record each, named `<datastore>/<path>`.
const FILES: &str = "datastorefiles";
const RECORDS: &str = "simrecords";
/// In `RECORDS`: the simulator's own record.
const SIM: &str = "simulator";

/// Where a simulator keeps what survives its restart. Cheap to clone.
#[derive(Clone)]
pub struct Keeper {
    group: Arc<Group>,
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
                Some(o) if super::kept(&o.moref.ty, &value) => {
                    let record = object_record(state, o);
                    self.put(OBJECTS, &value, record);
                }
                Some(_) => {}
                None => self.delete(OBJECTS, &value),
            }
        }
        self.save_sim(state);
    }

    /// Writes every object of `state` (a simulator's first start on an empty group).
    pub(crate) fn save_all(&self, state: &mut State) {
        state.inventory.take_dirty();
        for o in state.inventory.iter() {
            if super::kept(&o.moref.ty, &o.moref.value) {
                self.put(OBJECTS, &o.moref.value, object_record(state, o));
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
        let key = ObjectKey::new("", name);
        let written = if self.group.get(resource, &key).is_some() {
            self.group
                .update(resource, object, Default::default(), None)
                .map(drop)
        } else {
            self.group
                .create(resource, object, Default::default())
                .map(drop)
        };
        if let Err(e) = written {
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

    /// Every kept object's record.
    fn objects(&self) -> Vec<Value> {
        let Ok(snapshot) = self.group.snapshot(OBJECTS, ReadAt::Latest) else {
            return Vec::new();
        };
        snapshot
            .objects
            .values()
            .filter_map(|o| o.to_value().ok())
            .collect()
    }
}

/// An object's record: its type, its properties, what is kept beside it.
fn object_record(state: &State, o: &ManagedObject) -> Value {
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
        "props": codec::encode_data(o.props.as_data()),
        "side": serde_json::to_value(side).unwrap_or_default(),
    })
}

/// Brings `state` back from `keeper`'s records; `false` when the group holds no simulator.
pub(crate) fn restore(keeper: &Keeper, state: &mut State) -> Result<bool, Corrupt> {
    let Some(sim) = keeper.record::<SimRecord>(SIM) else {
        return Ok(false);
    };
    for record in keeper.objects() {
        restore_object(state, &record)?;
    }
    state.inventory.set_next_id(sim.next_id);
    state.guests.restore_counters(sim.guests);
    // The restored objects are what the store holds: nothing to write back.
    state.inventory.take_dirty();
    Ok(true)
}

fn restore_object(state: &mut State, record: &Value) -> Result<(), Corrupt> {
    let value = record["metadata"]["name"]
        .as_str()
        .ok_or_else(|| Corrupt("a record without a name".into()))?;
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
    let side: Side = serde_json::from_value(record["side"].clone())
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
