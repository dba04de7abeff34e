//! ClusterComputeResource: its DRS configuration (`configurationEx`, and the older
//! `configuration`) and the method that changes it, ReconfigureComputeResource_Task.
//!
//! What a cluster's configuration holds here is what placement tools read and write: DRS's
//! settings, VM groups and host groups, and rules (VM-host affinity, VM-VM affinity and
//! anti-affinity, VM dependencies). CAPV's `HostGroup` failure domains check that a VM-host
//! rule ties their VM group to their host group, and put each machine's VM in the VM group.
//!
//! As DRS does for a mandatory ("must run on") VM-host rule, a change that leaves a VM of
//! the rule's VM group on a host the rule forbids moves it to an allowed host (fewest VMs
//! first) and logs a `DrsVmMigratedEvent`. A destroyed VM leaves every group and rule that
//! named it, as vCenter drops it.
//!
//! A spec is checked whole before any of it is applied: a fault leaves the configuration as
//! it was (govmomi's simulator applies the parts before the faulty one; vCenter does not).

use crate::call::Call;
use crate::fault::Fault;
use crate::soap::Element;
use crate::state::drs::{ClusterConfig, Drs, Group, Rule, RuleKind};
use crate::state::timeline::Operation;
use crate::state::State;
use crate::task;
use crate::value::{mor_array, Data, Moref, Val};

/// The properties a new cluster starts with: its default configuration in both spellings.
pub(crate) fn default_properties() -> [(&'static str, Val); 2] {
    properties(&ClusterConfig::default())
}

fn properties(config: &ClusterConfig) -> [(&'static str, Val); 2] {
    let drs = drs_data(&config.drs);
    let groups = config.groups.iter().map(group_data).collect();
    let rules: Vec<Val> = config.rules.iter().map(rule_data).collect();
    let das = Data::new("ClusterDasConfigInfo")
        .with("enabled", false)
        .with("vmMonitoring", "vmMonitoringDisabled")
        .with("hostMonitoring", "enabled")
        .with("failoverLevel", 1i32)
        .with("admissionControlEnabled", true);
    let ex = Data::new("ClusterConfigInfoEx")
        .with("vmSwapPlacement", "vmDirectory")
        .with("spbmEnabled", true)
        .with("dasConfig", das.clone())
        .with("drsConfig", drs.clone())
        .with("rule", Val::Array("ClusterRuleInfo", rules.clone()))
        .with("group", Val::Array("ClusterGroupInfo", groups));
    let old = Data::new("ClusterConfigInfo")
        .with("dasConfig", das)
        .with("drsConfig", drs)
        .with("rule", Val::Array("ClusterRuleInfo", rules));
    [
        ("configurationEx", ex.into()),
        ("configuration", old.into()),
    ]
}

fn drs_data(d: &Drs) -> Val {
    Data::new("ClusterDrsConfigInfo")
        .with("enabled", d.enabled)
        .with("enableVmBehaviorOverrides", d.enable_vm_behavior_overrides)
        .with(
            "defaultVmBehavior",
            Val::Enum("DrsBehavior", d.default_vm_behavior.clone().into()),
        )
        .with("vmotionRate", d.vmotion_rate)
        .into()
}

fn group_data(g: &Group) -> Val {
    let (ty, field) = if g.of_hosts {
        ("ClusterHostGroup", "host")
    } else {
        ("ClusterVmGroup", "vm")
    };
    let mut d = Data::new(ty).with("name", g.name.as_str());
    if let Some(u) = g.user_created {
        d.set("userCreated", u);
    }
    d.with(field, mor_array(g.members.iter().cloned())).into()
}

fn rule_data(r: &Rule) -> Val {
    let status = if r.in_compliance { "green" } else { "yellow" };
    let mut d = Data::new(r.kind.type_name())
        .with("key", r.key)
        .with("status", Val::Enum("ManagedEntityStatus", status.into()))
        .with("enabled", r.enabled)
        .with("name", r.name.as_str())
        .with("mandatory", r.mandatory)
        .with("userCreated", r.user_created)
        .with("inCompliance", r.in_compliance)
        .with("ruleUuid", r.uuid.as_str());
    match &r.kind {
        RuleKind::VmHost {
            vm_group,
            affine,
            anti_affine,
        } => {
            d.set("vmGroupName", vm_group.as_str());
            if let Some(a) = affine {
                d.set("affineHostGroupName", a.as_str());
            }
            if let Some(a) = anti_affine {
                d.set("antiAffineHostGroupName", a.as_str());
            }
        }
        RuleKind::Affinity(vms) | RuleKind::AntiAffinity(vms) => {
            d.set("vm", mor_array(vms.iter().cloned()));
        }
        RuleKind::Dependency {
            vm_group,
            depends_on,
        } => {
            d.set("vmGroup", vm_group.as_str());
            d.set("dependsOnVmGroup", depends_on.as_str());
        }
    }
    d.into()
}

/// ClusterComputeResource's own methods: ReconfigureComputeResource_Task.
pub(crate) fn dispatch(
    state: &mut State,
    call: &mut Call<'_>,
    this: &Moref,
    method: &str,
    args: &Element,
) -> Option<Result<String, Fault>> {
    if method != "ReconfigureComputeResource_Task" {
        return None;
    }
    let Some(spec) = args.child("spec").cloned() else {
        return Some(Err(Fault::invalid_argument("spec")));
    };
    let modify = args.flag("modify").unwrap_or(false);
    let op = Operation::ReconfigureCluster {
        cluster: this.clone(),
        spec,
        modify,
    };
    Some(Ok(task::start(state, call, this, method, args, op)))
}

/// Runs a ReconfigureComputeResource_Task: the spec checked whole, then applied (over the
/// cluster's configuration with `modify`, over the default one without), then DRS's
/// mandatory rules enforced.
pub(crate) fn reconfigure(
    state: &mut State,
    call: &Call<'_>,
    cluster: &Moref,
    spec: &Element,
    modify: bool,
) -> Result<Option<Val>, Fault> {
    let hosts = cluster_hosts(state, cluster)?;
    let current = state
        .drs
        .clusters
        .get(&cluster.value)
        .cloned()
        .unwrap_or_default();
    let mut next = if modify {
        current
    } else {
        ClusterConfig {
            next_key: current.next_key,
            ..ClusterConfig::default()
        }
    };
    if let Some(drs) = spec.child("drsConfig") {
        apply_drs(&mut next.drs, drs)?;
    }
    for (i, g) in spec.children_named("groupSpec").enumerate() {
        apply_group(state, &mut next, &hosts, g)
            .map_err(|p| Fault::invalid_argument(&format!("spec.groupSpec[{i}].{p}")))?;
    }
    for (i, r) in spec.children_named("rulesSpec").enumerate() {
        apply_rule(state, &mut next, r)
            .map_err(|p| Fault::invalid_argument(&format!("spec.rulesSpec[{i}].{p}")))?;
    }
    enforce(state, call, cluster, &hosts, &mut next);
    save(state, cluster, next);
    let (name, dc) = names(state, cluster);
    let message = format!("Reconfigured cluster {name} in datacenter {dc}");
    crate::event_manager::emit(
        state,
        call,
        "ClusterReconfiguredEvent",
        Some(cluster),
        message,
    );
    Ok(None)
}

fn save(state: &mut State, cluster: &Moref, config: ClusterConfig) {
    if let Some(o) = state.inventory.get_mut(cluster) {
        for (name, value) in properties(&config) {
            o.set(name, value);
        }
    }
    state.drs.clusters.insert(cluster.value.clone(), config);
}

/// The hosts of a cluster (the reference must name one).
fn cluster_hosts(state: &State, cluster: &Moref) -> Result<Vec<Moref>, Fault> {
    let o = state
        .inventory
        .get(cluster)
        .ok_or_else(|| Fault::not_found(cluster))?;
    Ok(o.props.get("host").map(Val::morefs).unwrap_or_default())
}

fn names(state: &State, cluster: &Moref) -> (String, String) {
    let name = state
        .inventory
        .get(cluster)
        .map(|o| o.name().to_string())
        .unwrap_or_default();
    let dc = state
        .inventory
        .datacenter_of(cluster)
        .map(|d| d.name().to_string())
        .unwrap_or_default();
    (name, dc)
}

fn apply_drs(drs: &mut Drs, spec: &Element) -> Result<(), Fault> {
    if let Some(on) = spec.flag("enabled") {
        drs.enabled = on;
    }
    if let Some(on) = spec.flag("enableVmBehaviorOverrides") {
        drs.enable_vm_behavior_overrides = on;
    }
    if let Some(b) = spec.text_of("defaultVmBehavior") {
        if !matches!(b, "manual" | "partiallyAutomated" | "fullyAutomated") {
            return Err(Fault::invalid_argument("spec.drsConfig.defaultVmBehavior"));
        }
        drs.default_vm_behavior = b.to_string();
    }
    if let Some(rate) = spec.text_of("vmotionRate") {
        match rate.trim().parse::<i32>() {
            Ok(r @ 1..=5) => drs.vmotion_rate = r,
            _ => return Err(Fault::invalid_argument("spec.drsConfig.vmotionRate")),
        }
    }
    Ok(())
}

/// The operation of an `ArrayUpdateSpec`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Change {
    Add,
    Edit,
    Remove,
}

fn change_of(spec: &Element) -> Result<Change, &'static str> {
    match spec.text_of("operation").map(str::trim) {
        Some("add") => Ok(Change::Add),
        Some("edit") => Ok(Change::Edit),
        Some("remove") => Ok(Change::Remove),
        _ => Err("operation"),
    }
}

/// Applies one `ClusterGroupSpec`; on a fault, the path of the field at fault.
fn apply_group(
    state: &State,
    config: &mut ClusterConfig,
    hosts: &[Moref],
    spec: &Element,
) -> Result<(), &'static str> {
    let change = change_of(spec)?;
    if change == Change::Remove {
        let key = spec.text_of("removeKey").map(str::trim).unwrap_or("");
        let at = config.groups.iter().position(|g| g.name == key);
        config.groups.remove(at.ok_or("removeKey")?);
        return Ok(());
    }
    let info = spec.child("info").ok_or("info")?;
    let group = parse_group(state, hosts, info)?;
    let at = config.groups.iter().position(|g| g.name == group.name);
    match (change, at) {
        (Change::Add, None) => config.groups.push(group),
        // A group keeps its kind: a VM group edited into a host group is refused.
        (Change::Edit, Some(i)) if config.groups[i].of_hosts == group.of_hosts => {
            config.groups[i] = group
        }
        _ => return Err("info.name"),
    }
    Ok(())
}

fn parse_group(state: &State, hosts: &[Moref], info: &Element) -> Result<Group, &'static str> {
    let of_hosts = match info.xsi_type.as_deref() {
        Some("ClusterHostGroup") => true,
        Some("ClusterVmGroup") => false,
        _ => return Err("info"),
    };
    let name = info.text_of("name").map(str::trim).unwrap_or("");
    if name.is_empty() {
        return Err("info.name");
    }
    let field = if of_hosts { "host" } else { "vm" };
    let mut members = Vec::new();
    for m in info.children_named(field).filter_map(Element::moref) {
        // Hosts of this cluster, or VMs the vCenter has.
        let known = if of_hosts {
            hosts.contains(&m)
        } else {
            m.ty == "VirtualMachine" && state.inventory.get(&m).is_some()
        };
        if !known {
            return Err(if of_hosts { "info.host" } else { "info.vm" });
        }
        if !members.contains(&m) {
            members.push(m);
        }
    }
    Ok(Group {
        name: name.to_string(),
        user_created: info.flag("userCreated"),
        members,
        of_hosts,
    })
}

/// Applies one `ClusterRuleSpec`; on a fault, the path of the field at fault.
fn apply_rule(
    state: &State,
    config: &mut ClusterConfig,
    spec: &Element,
) -> Result<(), &'static str> {
    let change = change_of(spec)?;
    if change == Change::Remove {
        let key = spec.text_of("removeKey").map(str::trim).unwrap_or("");
        let at = config.rules.iter().position(|r| r.key.to_string() == key);
        config.rules.remove(at.ok_or("removeKey")?);
        return Ok(());
    }
    let info = spec.child("info").ok_or("info")?;
    let mut rule = parse_rule(state, config, info)?;
    // An edit names its rule by key (by name when it gives none); an added rule's name is
    // new.
    let key = info
        .text_of("key")
        .and_then(|k| k.trim().parse::<i32>().ok());
    let at = config.rules.iter().position(|r| match (change, key) {
        (Change::Edit, Some(k)) => r.key == k,
        _ => r.name == rule.name,
    });
    match (change, at) {
        (Change::Add, None) => {
            rule.key = config.next_key;
            config.next_key += 1;
            rule.uuid = uuid::Uuid::new_v4().to_string();
            config.rules.push(rule);
        }
        (Change::Edit, Some(i)) => {
            let old = &config.rules[i];
            if old.kind.type_name() != rule.kind.type_name() {
                return Err("info");
            }
            rule.key = old.key;
            rule.uuid = old.uuid.clone();
            config.rules[i] = rule;
        }
        (Change::Add, Some(_)) => return Err("info.name"),
        _ => return Err("info.key"),
    }
    Ok(())
}

fn parse_rule(state: &State, config: &ClusterConfig, info: &Element) -> Result<Rule, &'static str> {
    let name = info.text_of("name").map(str::trim).unwrap_or("");
    if name.is_empty() {
        return Err("info.name");
    }
    let group = |field: &'static str, hosts: bool| -> Result<Option<String>, &'static str> {
        let Some(n) = info.text_of(field).map(str::trim).filter(|n| !n.is_empty()) else {
            return Ok(None);
        };
        // The groups a rule names must exist, of the kind the field says.
        if !config
            .groups
            .iter()
            .any(|g| g.name == n && g.of_hosts == hosts)
        {
            return Err(field_path(field));
        }
        Ok(Some(n.to_string()))
    };
    let vms = || -> Result<Vec<Moref>, &'static str> {
        let vms: Vec<Moref> = info
            .children_named("vm")
            .filter_map(Element::moref)
            .collect();
        if vms.len() < 2 || vms.iter().any(|v| state.inventory.get(v).is_none()) {
            return Err("info.vm");
        }
        Ok(vms)
    };
    let kind = match info.xsi_type.as_deref() {
        Some("ClusterVmHostRuleInfo") => {
            let vm_group = group("vmGroupName", false)?.ok_or("info.vmGroupName")?;
            let affine = group("affineHostGroupName", true)?;
            let anti_affine = group("antiAffineHostGroupName", true)?;
            // Exactly one of the two host groups.
            if affine.is_some() == anti_affine.is_some() {
                return Err("info.affineHostGroupName");
            }
            RuleKind::VmHost {
                vm_group,
                affine,
                anti_affine,
            }
        }
        Some("ClusterAffinityRuleSpec") => RuleKind::Affinity(vms()?),
        Some("ClusterAntiAffinityRuleSpec") => RuleKind::AntiAffinity(vms()?),
        Some("ClusterDependencyRuleInfo") => RuleKind::Dependency {
            vm_group: group("vmGroup", false)?.ok_or("info.vmGroup")?,
            depends_on: group("dependsOnVmGroup", false)?.ok_or("info.dependsOnVmGroup")?,
        },
        _ => return Err("info"),
    };
    Ok(Rule {
        key: 0,
        name: name.to_string(),
        enabled: info.flag("enabled").unwrap_or(false),
        mandatory: info.flag("mandatory").unwrap_or(false),
        user_created: info.flag("userCreated").unwrap_or(true),
        uuid: String::new(),
        in_compliance: true,
        kind,
    })
}

fn field_path(field: &'static str) -> &'static str {
    match field {
        "vmGroupName" => "info.vmGroupName",
        "affineHostGroupName" => "info.affineHostGroupName",
        "antiAffineHostGroupName" => "info.antiAffineHostGroupName",
        "vmGroup" => "info.vmGroup",
        _ => "info.dependsOnVmGroup",
    }
}

/// The hosts a VM-host rule lets its VMs run on.
fn allowed_hosts(config: &ClusterConfig, hosts: &[Moref], rule: &Rule) -> Option<Vec<Moref>> {
    let RuleKind::VmHost {
        affine,
        anti_affine,
        ..
    } = &rule.kind
    else {
        return None;
    };
    let members = |name: &str| {
        config
            .groups
            .iter()
            .find(|g| g.of_hosts && g.name == name)
            .map(|g| g.members.clone())
            .unwrap_or_default()
    };
    Some(match (affine, anti_affine) {
        (Some(a), _) => members(a),
        (None, Some(a)) => {
            let banned = members(a);
            hosts
                .iter()
                .filter(|h| !banned.contains(h))
                .cloned()
                .collect()
        }
        (None, None) => hosts.to_vec(),
    })
}

/// DRS's part: a mandatory, enabled VM-host rule moves its VMs onto hosts it allows; every
/// VM-host rule then reports whether its VMs comply.
fn enforce(
    state: &mut State,
    call: &Call<'_>,
    cluster: &Moref,
    hosts: &[Moref],
    config: &mut ClusterConfig,
) {
    let host_of = |state: &State, vm: &Moref| {
        state
            .inventory
            .get(vm)
            .and_then(|o| o.path("runtime.host"))
            .and_then(Val::as_mor)
            .cloned()
    };
    for i in 0..config.rules.len() {
        let rule = &config.rules[i];
        let Some(allowed) = allowed_hosts(config, hosts, rule) else {
            continue;
        };
        let RuleKind::VmHost { vm_group, .. } = &rule.kind else {
            continue;
        };
        let vms = config
            .groups
            .iter()
            .find(|g| !g.of_hosts && &g.name == vm_group)
            .map(|g| g.members.clone())
            .unwrap_or_default();
        let must = rule.enabled && rule.mandatory;
        let mut complies = true;
        for vm in &vms {
            let Some(at) = host_of(state, vm) else {
                continue;
            };
            if allowed.contains(&at) {
                continue;
            }
            match least_loaded(state, &allowed).filter(|_| must) {
                Some(to) => migrate(state, call, cluster, vm, &at, &to),
                None => complies = false,
            }
        }
        config.rules[i].in_compliance = complies;
    }
}

/// The allowed host with the fewest VMs (the first such, in the cluster's order).
fn least_loaded(state: &State, allowed: &[Moref]) -> Option<Moref> {
    allowed
        .iter()
        .min_by_key(|h| {
            state
                .inventory
                .get(h)
                .and_then(|o| o.props.get("vm"))
                .map_or(0, |v| v.morefs().len())
        })
        .cloned()
}

fn migrate(
    state: &mut State,
    call: &Call<'_>,
    cluster: &Moref,
    vm: &Moref,
    from: &Moref,
    to: &Moref,
) {
    crate::virtual_machine::move_to_host(state, vm, to);
    let name = |m: &Moref| {
        state
            .inventory
            .get(m)
            .map(|o| o.name().to_string())
            .unwrap_or_default()
    };
    let (cl, dc) = names(state, cluster);
    let message = format!(
        "DRS migrated {} from {} to {} in cluster {cl} in {dc}",
        name(vm),
        name(from),
        name(to)
    );
    crate::event_manager::emit(state, call, "DrsVmMigratedEvent", Some(vm), message);
}

/// A destroyed VM leaves every group and rule of its cluster that names it.
pub(crate) fn forget_vm(state: &mut State, vm: &Moref) {
    let touched: Vec<String> = state
        .drs
        .clusters
        .iter()
        .filter(|(_, c)| {
            c.groups.iter().any(|g| g.members.contains(vm))
                || c.rules.iter().any(|r| match &r.kind {
                    RuleKind::Affinity(v) | RuleKind::AntiAffinity(v) => v.contains(vm),
                    _ => false,
                })
        })
        .map(|(k, _)| k.clone())
        .collect();
    for value in touched {
        let Some(mut config) = state.drs.clusters.get(&value).cloned() else {
            continue;
        };
        for g in config.groups.iter_mut().filter(|g| !g.of_hosts) {
            g.members.retain(|m| m != vm);
        }
        for r in &mut config.rules {
            if let RuleKind::Affinity(v) | RuleKind::AntiAffinity(v) = &mut r.kind {
                v.retain(|m| m != vm);
            }
        }
        save(state, &Moref::new("ClusterComputeResource", &value), config);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm_host_rule(affine: Option<&str>, anti: Option<&str>) -> Rule {
        Rule {
            key: 1,
            name: "r".into(),
            enabled: true,
            mandatory: true,
            user_created: true,
            uuid: "u".into(),
            in_compliance: true,
            kind: RuleKind::VmHost {
                vm_group: "vms".into(),
                affine: affine.map(str::to_string),
                anti_affine: anti.map(str::to_string),
            },
        }
    }

    fn config_with_host_group(members: &[&str]) -> ClusterConfig {
        ClusterConfig {
            groups: vec![Group {
                name: "hosts".into(),
                user_created: None,
                members: members
                    .iter()
                    .map(|h| Moref::new("HostSystem", h))
                    .collect(),
                of_hosts: true,
            }],
            ..ClusterConfig::default()
        }
    }

    #[test]
    fn an_affine_rule_allows_its_group_and_an_anti_affine_one_the_other_hosts() {
        let hosts: Vec<Moref> = ["host-1", "host-2", "host-3"]
            .iter()
            .map(|h| Moref::new("HostSystem", h))
            .collect();
        let config = config_with_host_group(&["host-2"]);
        let on = allowed_hosts(&config, &hosts, &vm_host_rule(Some("hosts"), None));
        assert_eq!(on, Some(vec![hosts[1].clone()]));
        let off = allowed_hosts(&config, &hosts, &vm_host_rule(None, Some("hosts")));
        assert_eq!(off, Some(vec![hosts[0].clone(), hosts[2].clone()]));
    }

    #[test]
    fn the_configuration_lists_groups_and_rules_with_their_types() {
        let mut config = config_with_host_group(&["host-2"]);
        config.rules.push(vm_host_rule(Some("hosts"), None));
        let [(name, ex), (old_name, old)] = properties(&config);
        assert_eq!((name, old_name), ("configurationEx", "configuration"));
        let ex = ex.as_data().expect("a data object");
        let Some(Val::Array(_, groups)) = ex.get("group") else {
            panic!("no groups: {ex:?}")
        };
        assert_eq!(groups[0].xsi_type(), "ClusterHostGroup");
        let Some(Val::Array(_, rules)) = old.as_data().and_then(|d| d.get("rule")) else {
            panic!("no rules in the older spelling")
        };
        assert_eq!(rules[0].xsi_type(), "ClusterVmHostRuleInfo");
        assert_eq!(
            rules[0].path("affineHostGroupName").and_then(Val::as_str),
            Some("hosts")
        );
    }

    #[test]
    fn operations_are_read_as_array_updates() {
        let spec = |op: &str| Element {
            name: "groupSpec".into(),
            children: vec![Element {
                name: "operation".into(),
                text: op.into(),
                ..Element::default()
            }],
            ..Element::default()
        };
        assert_eq!(change_of(&spec("add")), Ok(Change::Add));
        assert_eq!(change_of(&spec("remove")), Ok(Change::Remove));
        assert_eq!(change_of(&spec("replace")), Err("operation"));
    }
}
