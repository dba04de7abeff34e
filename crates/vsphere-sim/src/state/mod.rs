//! What one simulator remembers, all of it behind the simulator's lock: the inventory, and
//! beside it each managed object's own state in a file of its own here (sessions, property
//! collectors, the timeline, events, snapshots), driven by the module that implements that
//! object.
//!
//! These modules sit below every managed-object module (they all take `&mut State`) and
//! import none of them, so the methods can import the state without a loop back; routing
//! work to the methods is the registry's job (`handlers`).

pub(crate) mod collectors;
pub(crate) mod drs;
pub(crate) mod events;
pub(crate) mod sessions;
pub(crate) mod snapshots;
pub(crate) mod timeline;

/// Everything behind the simulator's lock.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub inventory: crate::objects::Inventory,
    pub sessions: sessions::Sessions,
    pub collectors: collectors::Collectors,
    pub timeline: timeline::Timeline,
    /// The VMs' guests: boots and addresses (driven by `virtual_machine`).
    pub guests: crate::guest::Guests,
    pub events: events::EventLog,
    pub snapshots: snapshots::Snapshots,
    /// The storage policies of VMs (read by PBM).
    pub profiles: crate::pbm::Associations,
    /// The clusters' DRS configurations (driven by `cluster_compute_resource`).
    pub drs: drs::DrsConfigs,
}

impl State {
    /// Keeps the inventory's journal of changed objects exactly while a property filter
    /// exists: only a filter's waits read it (see `crate::journal`).
    pub(crate) fn journal_follows_filters(&mut self) {
        self.inventory.keep_journal(self.collectors.any_filter());
    }
}
