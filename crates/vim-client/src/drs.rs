//! A cluster's DRS groups and rules, as CAPV reads them for a `HostGroup` failure domain
//! (a VM-host rule tying its VM group to its host group, the hosts of the host group) and
//! the one change it makes: a VM added to a VM group (ReconfigureComputeResource_Task).

use crate::xml::{escape, Moref, Val};
use crate::{Client, Error, Result};

/// What of a cluster's `configurationEx` placement reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DrsConfiguration {
    pub groups: Vec<DrsGroup>,
    pub vm_host_rules: Vec<VmHostRule>,
}

/// A VM group or a host group, and its members.
#[derive(Debug, Clone, PartialEq)]
pub struct DrsGroup {
    pub name: String,
    /// A `ClusterHostGroup` (else a `ClusterVmGroup`).
    pub of_hosts: bool,
    pub members: Vec<Moref>,
}

/// A `ClusterVmHostRuleInfo`.
#[derive(Debug, Clone, PartialEq)]
pub struct VmHostRule {
    pub name: String,
    pub enabled: bool,
    pub mandatory: bool,
    pub vm_group: String,
    pub affine_host_group: Option<String>,
    pub anti_affine_host_group: Option<String>,
}

impl DrsConfiguration {
    /// Reads a `ClusterConfigInfoEx`.
    pub fn from_val(config: &Val) -> DrsConfiguration {
        let text = |v: &Val, f: &str| v.field(f).and_then(Val::text).map(str::to_string);
        let flag = |v: &Val, f: &str| v.field(f).and_then(Val::text) == Some("true");
        let groups = config
            .fields_named("group")
            .filter_map(|g| {
                let of_hosts = match g.type_name() {
                    Some("ClusterHostGroup") => true,
                    Some("ClusterVmGroup") => false,
                    _ => return None,
                };
                let field = if of_hosts { "host" } else { "vm" };
                Some(DrsGroup {
                    name: text(g, "name")?,
                    of_hosts,
                    members: g
                        .fields_named(field)
                        .filter_map(Val::moref)
                        .cloned()
                        .collect(),
                })
            })
            .collect();
        let vm_host_rules = config
            .fields_named("rule")
            .filter(|r| r.type_name() == Some("ClusterVmHostRuleInfo"))
            .filter_map(|r| {
                Some(VmHostRule {
                    name: text(r, "name")?,
                    enabled: flag(r, "enabled"),
                    mandatory: flag(r, "mandatory"),
                    vm_group: text(r, "vmGroupName")?,
                    affine_host_group: text(r, "affineHostGroupName"),
                    anti_affine_host_group: text(r, "antiAffineHostGroupName"),
                })
            })
            .collect();
        DrsConfiguration {
            groups,
            vm_host_rules,
        }
    }

    /// The VM group or host group named `name`.
    pub fn group(&self, name: &str, of_hosts: bool) -> Option<&DrsGroup> {
        self.groups
            .iter()
            .find(|g| g.name == name && g.of_hosts == of_hosts)
    }

    /// The VM-host rule that puts `vm_group`'s VMs on `host_group`'s hosts.
    pub fn affinity_rule(&self, host_group: &str, vm_group: &str) -> Option<&VmHostRule> {
        self.vm_host_rules
            .iter()
            .find(|r| r.vm_group == vm_group && r.affine_host_group.as_deref() == Some(host_group))
    }
}

impl Client {
    /// A cluster's DRS groups and rules.
    pub async fn drs_configuration(&self, cluster: &Moref) -> Result<DrsConfiguration> {
        let o = self.properties(cluster, &["configurationEx"]).await?;
        let config = o
            .prop("configurationEx")
            .ok_or_else(|| Error::Answer(format!("{cluster} has no configurationEx")))?;
        Ok(DrsConfiguration::from_val(config))
    }

    /// Starts adding `vm` to `group` (a VM group of `cluster`, as last read): the group is
    /// edited to its members and the VM, as CAPV edits it. The task.
    pub async fn add_to_vm_group(
        &self,
        cluster: &Moref,
        group: &DrsGroup,
        vm: &Moref,
    ) -> Result<Moref> {
        let members: String = group
            .members
            .iter()
            .chain(std::iter::once(vm))
            .map(|m| m.element("vm"))
            .collect();
        let body = format!(
            r#"<ReconfigureComputeResource_Task xmlns="urn:vim25">{}<spec xsi:type="ClusterConfigSpecEx"><groupSpec><operation>edit</operation><info xsi:type="ClusterVmGroup"><name>{}</name>{members}</info></groupSpec></spec><modify>true</modify></ReconfigureComputeResource_Task>"#,
            cluster.element("_this"),
            escape(&group.name),
        );
        let answer = self.call(&body).await?;
        answer
            .returnval("ReconfigureComputeResource_Task")?
            .moref()
            .cloned()
            .ok_or_else(|| Error::Answer("ReconfigureComputeResource_Task returned no task".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(ty: &str, fields: Vec<(&str, Val)>) -> Val {
        let mut all = vec![("@type".to_string(), Val::Text(ty.into()))];
        all.extend(fields.into_iter().map(|(n, v)| (n.to_string(), v)));
        Val::Object(all)
    }

    fn text(t: &str) -> Val {
        Val::Text(t.into())
    }

    #[test]
    fn groups_and_vm_host_rules_are_read_from_the_configuration() {
        let config = obj(
            "ClusterConfigInfoEx",
            vec![
                ("drsConfig", obj("ClusterDrsConfigInfo", vec![])),
                (
                    "rule",
                    obj(
                        "ClusterVmHostRuleInfo",
                        vec![
                            ("enabled", text("true")),
                            ("name", text("pin")),
                            ("mandatory", text("true")),
                            ("vmGroupName", text("vms")),
                            ("affineHostGroupName", text("hosts")),
                        ],
                    ),
                ),
                (
                    "rule",
                    obj("ClusterAffinityRuleSpec", vec![("name", text("a"))]),
                ),
                (
                    "group",
                    obj(
                        "ClusterHostGroup",
                        vec![
                            ("name", text("hosts")),
                            ("host", Val::Moref(Moref::new("HostSystem", "host-1"))),
                            ("host", Val::Moref(Moref::new("HostSystem", "host-2"))),
                        ],
                    ),
                ),
                ("group", obj("ClusterVmGroup", vec![("name", text("vms"))])),
            ],
        );
        let drs = DrsConfiguration::from_val(&config);
        let hosts = drs.group("hosts", true).expect("the host group");
        assert_eq!(hosts.members.len(), 2);
        assert!(drs.group("hosts", false).is_none());
        assert!(drs
            .group("vms", false)
            .is_some_and(|g| g.members.is_empty()));
        let rule = drs.affinity_rule("hosts", "vms").expect("the rule");
        assert!(rule.enabled && rule.mandatory);
        assert!(drs.affinity_rule("vms", "hosts").is_none());
        assert_eq!(
            drs.vm_host_rules.len(),
            1,
            "other kinds of rules are not read"
        );
    }
}
