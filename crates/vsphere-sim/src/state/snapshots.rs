//! The snapshot trees of every VM and their current snapshots (driven by `snapshot`; the
//! inventory holds the snapshot objects and the properties rendered from the trees).

use crate::persist::codec::{self, Corrupt};
use crate::value::{Moref, Val};
use chrono::{DateTime, Utc};
use std::collections::HashMap;

/// One snapshot of a VM.
#[derive(Debug, Clone)]
pub(crate) struct SnapNode {
    pub(crate) moref: Moref,
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) id: i32,
    pub(crate) created: DateTime<Utc>,
    pub(crate) power: String,
    pub(crate) parent: Option<Moref>,
    /// The VM's `config` when the snapshot was taken.
    pub(crate) config: Option<Val>,
}

impl SnapNode {
    fn record(&self) -> serde_json::Value {
        serde_json::json!({
            "ref": self.moref.value, "name": self.name, "description": self.description,
            "id": self.id, "created": self.created.to_rfc3339(), "power": self.power,
            "parent": self.parent.as_ref().map(|p| p.value.clone()),
            "config": self.config.as_ref().map(codec::encode),
        })
    }

    fn restore(v: &serde_json::Value) -> Result<SnapNode, Corrupt> {
        let text = |f: &str| {
            v[f].as_str()
                .map(str::to_string)
                .ok_or_else(|| Corrupt(format!("a snapshot without {f}")))
        };
        let snapshot = |value: &str| Moref::new("VirtualMachineSnapshot", value);
        let created = DateTime::parse_from_rfc3339(&text("created")?)
            .map_err(|e| Corrupt(format!("a snapshot's creation time: {e}")))?
            .with_timezone(&Utc);
        Ok(SnapNode {
            moref: snapshot(&text("ref")?),
            name: text("name")?,
            description: text("description")?,
            id: v["id"]
                .as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .unwrap_or(0),
            created,
            power: text("power")?,
            parent: v["parent"].as_str().map(snapshot),
            config: match &v["config"] {
                serde_json::Value::Null => None,
                c => Some(codec::decode(c)?),
            },
        })
    }
}

/// The snapshots of every VM, by the VM's moref value.
#[derive(Debug, Default)]
pub(crate) struct Snapshots {
    /// Each VM's snapshots, in the order they were taken (`parent` links make the tree).
    trees: HashMap<String, Vec<SnapNode>>,
    current: HashMap<String, Moref>,
}

impl Snapshots {
    pub(crate) fn tree(&self, vm: &str) -> &[SnapNode] {
        self.trees.get(vm).map(Vec::as_slice).unwrap_or_default()
    }

    pub(crate) fn tree_mut(&mut self, vm: &str) -> &mut Vec<SnapNode> {
        self.trees.entry(vm.to_string()).or_default()
    }

    /// One snapshot of a VM, if the VM has it.
    pub(crate) fn node_mut(&mut self, vm: &str, snapshot: &Moref) -> Option<&mut SnapNode> {
        self.trees
            .get_mut(vm)?
            .iter_mut()
            .find(|n| &n.moref == snapshot)
    }

    pub(crate) fn current(&self, vm: &str) -> Option<&Moref> {
        self.current.get(vm)
    }

    /// Sets (or with `None` clears) the VM's current snapshot.
    pub(crate) fn set_current(&mut self, vm: &str, snapshot: Option<Moref>) {
        match snapshot {
            Some(s) => self.current.insert(vm.to_string(), s),
            None => self.current.remove(vm),
        };
    }

    /// A VM's snapshots and its current one, as `persist` keeps them (`None`: it has none).
    pub(crate) fn record(&self, vm: &str) -> Option<serde_json::Value> {
        let tree = self.trees.get(vm).filter(|t| !t.is_empty())?;
        let nodes: Vec<serde_json::Value> = tree.iter().map(SnapNode::record).collect();
        let current = self.current.get(vm).map(|m| m.value.clone());
        Some(serde_json::json!({"nodes": nodes, "current": current}))
    }

    /// Takes back what [`Snapshots::record`] gave for `vm`.
    pub(crate) fn restore(&mut self, vm: &str, record: &serde_json::Value) -> Result<(), Corrupt> {
        let nodes = record["nodes"]
            .as_array()
            .ok_or_else(|| Corrupt(format!("{vm}: snapshots without nodes")))?;
        let nodes = nodes
            .iter()
            .map(SnapNode::restore)
            .collect::<Result<Vec<_>, _>>()?;
        self.trees.insert(vm.to_string(), nodes);
        if let Some(current) = record["current"].as_str() {
            self.set_current(vm, Some(Moref::new("VirtualMachineSnapshot", current)));
        }
        Ok(())
    }

    /// Forgets a VM's tree and current snapshot; returns the snapshots it had.
    pub(crate) fn remove_vm(&mut self, vm: &str) -> Vec<SnapNode> {
        self.current.remove(vm);
        self.trees.remove(vm).unwrap_or_default()
    }
}
