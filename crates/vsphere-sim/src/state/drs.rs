//! The clusters' DRS configurations (`configurationEx`): DRS settings, VM and host groups,
//! rules. Driven by `cluster_compute_resource`, which checks and applies changes to them
//! and writes them into the clusters' properties.

use crate::value::Moref;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The DRS configuration of every cluster, by the cluster's reference value. A cluster
/// never reconfigured has the default one.
#[derive(Debug, Default)]
pub(crate) struct DrsConfigs {
    pub clusters: HashMap<String, ClusterConfig>,
}

/// One cluster's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ClusterConfig {
    pub drs: Drs,
    pub groups: Vec<Group>,
    pub rules: Vec<Rule>,
    /// The key the next rule added gets (vCenter numbers a cluster's rules).
    pub next_key: i32,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            drs: Drs::default(),
            groups: Vec::new(),
            rules: Vec::new(),
            next_key: 1,
        }
    }
}

/// `ClusterDrsConfigInfo`: DRS on and fully automated, as a new cluster with DRS has it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Drs {
    pub enabled: bool,
    pub enable_vm_behavior_overrides: bool,
    pub default_vm_behavior: String,
    pub vmotion_rate: i32,
}

impl Default for Drs {
    fn default() -> Self {
        Drs {
            enabled: true,
            enable_vm_behavior_overrides: true,
            default_vm_behavior: "fullyAutomated".into(),
            vmotion_rate: 3,
        }
    }
}

/// A VM group (`ClusterVmGroup`) or a host group (`ClusterHostGroup`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Group {
    pub name: String,
    pub user_created: Option<bool>,
    /// VMs for a VM group, hosts for a host group.
    pub members: Vec<Moref>,
    pub of_hosts: bool,
}

/// A rule: the fields every `ClusterRuleInfo` has, and its kind's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Rule {
    pub key: i32,
    pub name: String,
    pub enabled: bool,
    pub mandatory: bool,
    pub user_created: bool,
    pub uuid: String,
    pub in_compliance: bool,
    pub kind: RuleKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum RuleKind {
    /// `ClusterVmHostRuleInfo`: the VMs of a group on (or off) the hosts of a group.
    VmHost {
        vm_group: String,
        affine: Option<String>,
        anti_affine: Option<String>,
    },
    /// `ClusterAffinityRuleSpec`: the VMs together on one host.
    Affinity(Vec<Moref>),
    /// `ClusterAntiAffinityRuleSpec`: the VMs on different hosts.
    AntiAffinity(Vec<Moref>),
    /// `ClusterDependencyRuleInfo`: a VM group starts after another.
    Dependency {
        vm_group: String,
        depends_on: String,
    },
}

impl RuleKind {
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            RuleKind::VmHost { .. } => "ClusterVmHostRuleInfo",
            RuleKind::Affinity(_) => "ClusterAffinityRuleSpec",
            RuleKind::AntiAffinity(_) => "ClusterAntiAffinityRuleSpec",
            RuleKind::Dependency { .. } => "ClusterDependencyRuleInfo",
        }
    }
}
