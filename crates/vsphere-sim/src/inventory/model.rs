//! What a generated inventory contains: the model's counts, govmomi's VPX model flags.

/// What the generated inventory contains (per datacenter, cluster, host or pool).
#[derive(Debug, Clone)]
pub struct Model {
    pub datacenters: usize,
    pub clusters: usize,
    pub hosts_per_cluster: usize,
    pub standalone_hosts: usize,
    /// VMs per standalone host and per resource pool (govmomi's `Machine`).
    pub vms: usize,
    pub datastores: usize,
    /// Extra resource pools per cluster, besides the root pool.
    pub pools: usize,
    /// Distributed port groups per datacenter.
    pub portgroups: usize,
    /// How many datacenters (the last ones) sit inside a folder (govmomi's `Folder`).
    pub folders: usize,
    /// A single-host ESX model instead of a vCenter.
    pub esx: bool,
}

impl Default for Model {
    fn default() -> Self {
        Model {
            datacenters: 1,
            clusters: 1,
            hosts_per_cluster: 3,
            standalone_hosts: 1,
            vms: 2,
            datastores: 1,
            pools: 0,
            portgroups: 1,
            folders: 0,
            esx: false,
        }
    }
}
