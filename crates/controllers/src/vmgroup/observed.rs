//! What a vCenter holds for one VmGroup, read from the copy the vCenter's watch keeps: the
//! group's VMs by index (found by their owner mark and the names the group gives them), VMs
//! named as the group's but unmarked, and the template. The reconcile steps and the task
//! follower both read it, so it sits below both.

use super::types::VmGroup;
use super::Error;
use infrasim_controller_runtime::vcenters::VCenter;
use infrasim_vim_client::{ops, ObjectContent};
use kube::ResourceExt;
use std::sync::Arc;
use std::time::Duration;

/// How old a task in flight gets, its change not seen, before the task is read.
pub(super) const PENDING_CHECK: Duration = Duration::from_secs(5);

/// The CPUs and memory a group's VMs have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shape {
    pub cpus: i64,
    pub memory_mb: i64,
}

/// Whether a VM's copy has `shape`.
pub(super) fn has_shape(vm: &ObjectContent, shape: Shape) -> bool {
    vm.text("config.hardware.numCPU") == shape.cpus.to_string()
        && vm.text("config.hardware.memoryMB") == shape.memory_mb.to_string()
}

/// How long a reconcile waits for the first listing of a vCenter's VMs.
const SYNC_LIMIT: Duration = Duration::from_secs(30);

/// What the vCenter holds for one group.
pub(super) struct Observed {
    pub vc: Arc<VCenter>,
    /// The group's VMs by index.
    pub owned: Vec<(usize, ObjectContent)>,
    pub template: Option<ObjectContent>,
    /// VMs named as the group would name its own but not marked as anyone's.
    pub unmarked: Vec<(usize, ObjectContent)>,
}

/// `ns/name`: the owner mark of a group's VMs.
pub(super) fn owner_of(group: &VmGroup) -> String {
    format!(
        "{}/{}",
        group.namespace().unwrap_or_default(),
        group.name_any()
    )
}

/// The name of a group's VM `index`: `<namespace>-<group>-<index>`, within vCenter's 80
/// characters (a longer prefix is cut and made unique again with a hash of the whole).
pub(super) fn vm_name(group: &VmGroup, index: usize) -> String {
    let prefix = format!(
        "{}-{}",
        group.namespace().unwrap_or_default(),
        group.name_any()
    );
    let suffix = format!("-{index}");
    if prefix.len() + suffix.len() <= 80 {
        return format!("{prefix}{suffix}");
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, prefix.as_bytes());
    let hash: String = digest.as_ref()[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut keep = 80 - suffix.len() - hash.len() - 1;
    while !prefix.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}-{hash}{suffix}", &prefix[..keep])
}

/// The index in a name [`vm_name`] made for `group`.
pub(super) fn index_of(group: &VmGroup, name: &str) -> Option<usize> {
    let (prefix, index) = name.rsplit_once('-')?;
    let index: usize = index.parse().ok()?;
    (vm_name(group, index) == name && !prefix.is_empty()).then_some(index)
}

/// What the vCenter holds for `group`, from the copy its watch keeps (no call).
pub(super) async fn observe(vc: Arc<VCenter>, group: &VmGroup) -> Result<Observed, Error> {
    let mine = |vm: &ObjectContent| {
        let name = vm.text("name");
        name == group.spec.template || index_of(group, name).is_some()
    };
    let vms = vc.select(SYNC_LIMIT, mine).await.map_err(Error::VCenter)?;
    let owner = owner_of(group);
    let owner_key = vc.owner_key;
    let mut observed = Observed {
        vc,
        owned: Vec::new(),
        template: None,
        unmarked: Vec::new(),
    };
    for vm in vms {
        let mark = owner_key
            .and_then(|key| ops::custom_value(&vm, key))
            .unwrap_or("");
        let index = index_of(group, vm.text("name"));
        match (mark == owner, index) {
            (true, Some(i)) => observed.owned.push((i, vm)),
            (false, Some(i)) if mark.is_empty() => observed.unmarked.push((i, vm)),
            _ if vm.text("name") == group.spec.template => {
                // A template beats a VM of the same name.
                let is_template = vm.text("config.template") == "true";
                if observed.template.is_none() || is_template {
                    observed.template = Some(vm);
                }
            }
            _ => {}
        }
    }
    observed.owned.sort_by_key(|(i, _)| *i);
    Ok(observed)
}

impl Observed {
    /// The group's VMs by name, marked or not (one lookup per task in flight, not a scan:
    /// a scale-down of hundreds follows hundreds of tasks).
    pub fn by_name(&self) -> std::collections::HashMap<&str, &ObjectContent> {
        self.owned
            .iter()
            .chain(&self.unmarked)
            .map(|(_, vm)| (vm.text("name"), vm))
            .collect()
    }

    /// The VMs the group keeps: the lowest `replicas` indexes (those above are removed).
    pub fn kept(&self, replicas: usize) -> &[(usize, ObjectContent)] {
        &self.owned[..replicas.min(self.owned.len())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(ns: &str, name: &str) -> VmGroup {
        let mut g = VmGroup::new(name, Default::default());
        g.metadata.namespace = Some(ns.into());
        g
    }

    #[test]
    fn names_carry_namespace_group_and_index_within_80_characters() {
        let g = group("default", "vg-1");
        assert_eq!(vm_name(&g, 3), "default-vg-1-3");
        assert_eq!(index_of(&g, "default-vg-1-3"), Some(3));
        assert_eq!(index_of(&g, "default-vg-1-x"), None);
        assert_eq!(
            index_of(&group("default", "vg"), "default-vg-1-3"),
            None,
            "another group's"
        );
        let long = group("team", &"g".repeat(120));
        let name = vm_name(&long, 12);
        assert_eq!(name.len(), 80);
        assert_eq!(index_of(&long, &name), Some(12));
        assert_ne!(
            vm_name(&group("team", &"g".repeat(121)), 12),
            name,
            "the hash tells them apart"
        );
    }
}
