//! AuthorizationManager: vCenter's system roles and their privileges, the users a simulator
//! is configured with (each holding one system role on the root folder, propagating), the
//! privilege each changing method needs, and the queries clients make (`roleList`,
//! `privilegeList`, HasPrivilegeOnEntity/Entities, HasUserPrivilegeOnEntities,
//! FetchUserPrivilegeOnEntities, RetrieveAllPermissions, RetrieveEntityPermissions,
//! RetrieveRolePermissions).
//!
//! A user's role holds everywhere (one permission at the root folder, as a fresh vCenter
//! grants its administrator), so checking a call is checking the session's role for the
//! method's privilege; the simulator's own user is `Admin`. Reads are not filtered by
//! permission: a `ReadOnly` or `View` user sees what an administrator sees.

use crate::call::Call;
use crate::fault::Fault;
use crate::objects::{refs, Inventory, ManagedObject};
use crate::roles::all_privileges;
pub(crate) use crate::roles::required;
pub use crate::roles::{SimUser, SystemRole};
use crate::soap::Element;
use crate::state::State;
use crate::value::{string_array, write_element, Data, Moref, Val};

/// NoPermission: the session's role lacks `privilege` on `object`. `missingPrivileges` is
/// written only for API 8.0 (the field came after 7.0.3.0, whose clients reject it).
pub(crate) fn no_permission(object: &Moref, privilege: &str, api8: bool) -> Fault {
    let mut f = Fault::new_pub(
        "NoPermission",
        format!("Permission to perform this operation was denied. Missing privilege: {privilege}"),
    );
    let missing = Data::new("NoPermissionEntityPrivileges")
        .with("entity", object.clone())
        .with("privilegeIds", string_array([privilege]));
    f.fields = f
        .fields
        .with("object", object.clone())
        .with("privilegeId", privilege);
    if api8 {
        f.fields.set(
            "missingPrivileges",
            Val::Array("NoPermissionEntityPrivileges", vec![Val::from(missing)]),
        );
    }
    f
}

/// The manager's reference on a vCenter and on an ESXi host.
pub(crate) fn manager(esx: bool) -> Moref {
    Moref::new(
        "AuthorizationManager",
        if esx {
            "ha-authmgr"
        } else {
            "AuthorizationManager"
        },
    )
}

/// Adds the AuthorizationManager with its roles and privileges.
pub(crate) fn install(inv: &mut Inventory) {
    let m = manager(inv.esx());
    let mut o = ManagedObject::new(&m.ty, &m.value);
    let privileges: Vec<Val> = all_privileges()
        .into_iter()
        .map(|p| {
            let (group, name) = p.rsplit_once('.').unwrap_or(("", p));
            Val::from(
                Data::new("AuthorizationPrivilege")
                    .with("privId", p)
                    .with("onParent", false)
                    .with("name", name)
                    .with("privGroupName", group),
            )
        })
        .collect();
    o.set(
        "privilegeList",
        Val::Array("AuthorizationPrivilege", privileges),
    );
    let roles: Vec<Val> = SystemRole::ALL
        .into_iter()
        .map(|r| {
            let (label, summary) = r.label();
            Val::from(
                Data::new("AuthorizationRole")
                    .with("roleId", r.id())
                    .with("system", true)
                    .with("name", r.name())
                    .with(
                        "info",
                        Data::new("Description")
                            .with("label", label)
                            .with("summary", summary),
                    )
                    .with("privilege", string_array(r.privileges())),
            )
        })
        .collect();
    o.set("roleList", Val::Array("AuthorizationRole", roles));
    inv.insert(o);
}

/// The role of the session `key` names, or of the call's own session.
fn session_role(state: &State, call: &Call<'_>, key: Option<&str>) -> Option<SystemRole> {
    let key = key.or(call.session.as_deref())?;
    state.sessions.get(key).map(|s| s.role)
}

/// Checks that the call's session may run `method` on `this`.
pub(crate) fn check(
    state: &State,
    call: &Call<'_>,
    this: &Moref,
    method: &str,
) -> Result<(), Fault> {
    let Some(privilege) = required(&this.ty, method) else {
        return Ok(());
    };
    match session_role(state, call, None) {
        Some(role) if !role.holds(privilege) => {
            let api8 = call.config.flavor != crate::config::Flavor::VCenter7;
            Err(no_permission(this, privilege, api8))
        }
        _ => Ok(()),
    }
}

pub(crate) fn dispatch(
    state: &mut State,
    call: &mut Call<'_>,
    _this: &Moref,
    method: &str,
    args: &Element,
) -> Option<Result<String, Fault>> {
    Some(match method {
        "HasPrivilegeOnEntity" => has_privilege_on_entity(state, call, args),
        "HasPrivilegeOnEntities" => {
            let role = session_role(state, call, args.text_of("sessionId").map(str::trim));
            Ok(entity_privileges(args, role))
        }
        "HasUserPrivilegeOnEntities" => {
            let role = call
                .config
                .role_of(args.text_of("userName").unwrap_or("").trim());
            Ok(entity_privileges(args, role))
        }
        "FetchUserPrivilegeOnEntities" => {
            let role = call
                .config
                .role_of(args.text_of("userName").unwrap_or("").trim());
            Ok(user_privileges(args, role))
        }
        "RetrieveAllPermissions" => Ok(permissions(state, call, |_| true)),
        "RetrieveEntityPermissions" => {
            let root = refs::root_folder(state.inventory.esx());
            let entity = args.child("entity").and_then(Element::moref);
            let inherited = args.flag("inherited").unwrap_or(false);
            let at_root = entity.as_ref().is_some_and(|e| *e == root);
            Ok(permissions(state, call, |_| at_root || inherited))
        }
        "RetrieveRolePermissions" => {
            let id = args
                .text_of("roleId")
                .and_then(|r| r.trim().parse::<i32>().ok());
            Ok(permissions(state, call, |role| Some(role.id()) == id))
        }
        _ => return None,
    })
}

fn has_privilege_on_entity(
    state: &State,
    call: &Call<'_>,
    args: &Element,
) -> Result<String, Fault> {
    let role = session_role(state, call, args.text_of("sessionId").map(str::trim));
    let mut out = String::new();
    for p in args.children_named("privId") {
        let granted = role.is_some_and(|r| r.holds(p.text.trim()));
        write_element(&mut out, "returnval", &Val::Bool(granted), false);
    }
    Ok(out)
}

/// EntityPrivilege per entity: whether `role` holds each asked privilege.
fn entity_privileges(args: &Element, role: Option<SystemRole>) -> String {
    let privs: Vec<&str> = args
        .children_named("privId")
        .map(|p| p.text.trim())
        .collect();
    let mut out = String::new();
    for entity in args.children_named("entity").filter_map(Element::moref) {
        let availability: Vec<Val> = privs
            .iter()
            .map(|p| {
                Val::from(
                    Data::new("PrivilegeAvailability")
                        .with("privId", *p)
                        .with("isGranted", role.is_some_and(|r| r.holds(p))),
                )
            })
            .collect();
        let ep = Data::new("EntityPrivilege").with("entity", entity).with(
            "privAvailability",
            Val::Array("PrivilegeAvailability", availability),
        );
        write_element(&mut out, "returnval", &Val::from(ep), false);
    }
    out
}

/// UserPrivilegeResult per entity: every privilege the user's role holds.
fn user_privileges(args: &Element, role: Option<SystemRole>) -> String {
    let privileges = role.map(SystemRole::privileges).unwrap_or_default();
    let mut out = String::new();
    for entity in args.children_named("entities").filter_map(Element::moref) {
        let r = Data::new("UserPrivilegeResult")
            .with("entity", entity)
            .with("privileges", string_array(privileges.iter().copied()));
        write_element(&mut out, "returnval", &Val::from(r), false);
    }
    out
}

/// The permissions at the root folder (the simulator's user and every configured user),
/// those whose role `keep` accepts.
fn permissions(state: &State, call: &Call<'_>, keep: impl Fn(SystemRole) -> bool) -> String {
    let root = refs::root_folder(state.inventory.esx());
    let users = std::iter::once((call.config.username.as_str(), SystemRole::Admin))
        .chain(call.config.users.iter().map(|u| (u.name.as_str(), u.role)));
    let mut out = String::new();
    for (user, role) in users.filter(|(_, r)| keep(*r)) {
        let p = Data::new("Permission")
            .with("entity", root.clone())
            .with("principal", user)
            .with("group", false)
            .with("roleId", role.id())
            .with("propagate", true);
        write_element(&mut out, "returnval", &Val::from(p), false);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_roles_hold_what_vcenter_grants_them() {
        assert!(SystemRole::Admin.holds("VirtualMachine.Provisioning.Clone"));
        assert!(!SystemRole::ReadOnly.holds("VirtualMachine.Provisioning.Clone"));
        assert!(SystemRole::ReadOnly.holds("System.Read"));
        assert!(!SystemRole::View.holds("System.Read"));
        assert!(SystemRole::NoAccess.privileges().is_empty());
        assert_eq!("ReadOnly".parse::<SystemRole>(), Ok(SystemRole::ReadOnly));
        assert!("Root"
            .parse::<SystemRole>()
            .unwrap_err()
            .contains("ReadOnly"));
        assert_eq!(SystemRole::ALL.map(SystemRole::id), [-1, -2, -3, -4, -5]);
    }

    #[test]
    fn changing_methods_need_their_privilege_and_reads_none() {
        assert_eq!(
            required("VirtualMachine", "CloneVM_Task"),
            Some("VirtualMachine.Provisioning.Clone")
        );
        assert_eq!(required("Folder", "Destroy_Task"), Some("Folder.Delete"));
        assert_eq!(required("PropertyCollector", "RetrievePropertiesEx"), None);
        let all = all_privileges();
        let mut unique = all.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(all.len(), unique.len(), "each privilege listed once");
    }
}
