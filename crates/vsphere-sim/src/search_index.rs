//! SearchIndex: FindByInventoryPath, FindChild, FindByUuid, FindAllByUuid.

use crate::call::{arg_moref, Call};
use crate::fault::Fault;
use crate::soap::Element;
use crate::state::State;
use crate::value::{write_element, Moref, Val};

pub(crate) fn dispatch(
    state: &mut State,
    _call: &mut Call<'_>,
    _this: &Moref,
    method: &str,
    args: &Element,
) -> Option<Result<String, Fault>> {
    Some(match method {
        "FindByInventoryPath" => {
            let path = args.text_of("inventoryPath").unwrap_or("").trim();
            Ok(one(find_by_path(state, path)))
        }
        "FindChild" => arg_moref(args, "entity").map(|parent| {
            let name = args.text_of("name").unwrap_or("");
            one(state.inventory.child_named(&parent, name))
        }),
        "FindByIp" | "FindByDnsName" | "FindAllByIp" | "FindAllByDnsName" => {
            let (field, wanted) = if method.contains("Ip") {
                (
                    "guest.ipAddress",
                    args.text_of("ip").unwrap_or("").trim().to_string(),
                )
            } else {
                (
                    "guest.hostName",
                    args.text_of("dnsName").unwrap_or("").trim().to_string(),
                )
            };
            let vm_search = args.flag("vmSearch").unwrap_or(true);
            let found: Vec<Moref> = state
                .inventory
                .iter()
                .filter(|o| vm_search && o.moref.ty == "VirtualMachine")
                .filter(|o| o.path(field).and_then(Val::as_str) == Some(wanted.as_str()))
                .map(|o| o.moref.clone())
                .collect();
            if method.starts_with("FindAll") {
                let mut out = String::new();
                for m in found {
                    write_element(&mut out, "returnval", &Val::Mor(m), false);
                }
                Ok(out)
            } else {
                Ok(one(found.into_iter().next()))
            }
        }
        "FindByUuid" | "FindAllByUuid" => {
            let uuid = args
                .text_of("uuid")
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            let vm_search = args.flag("vmSearch").unwrap_or(false);
            let instance = args.flag("instanceUuid").unwrap_or(false);
            let found: Vec<Moref> = state
                .inventory
                .iter()
                .filter(|o| {
                    if vm_search {
                        let field = if instance {
                            "config.instanceUuid"
                        } else {
                            "config.uuid"
                        };
                        o.moref.ty == "VirtualMachine"
                            && o.path(field)
                                .and_then(Val::as_str)
                                .map(str::to_ascii_lowercase)
                                == Some(uuid.clone())
                    } else {
                        o.moref.ty == "HostSystem"
                            && o.path("summary.hardware.uuid")
                                .and_then(Val::as_str)
                                .map(str::to_ascii_lowercase)
                                == Some(uuid.clone())
                    }
                })
                .map(|o| o.moref.clone())
                .collect();
            if method == "FindByUuid" {
                Ok(one(found.into_iter().next()))
            } else {
                let mut out = String::new();
                for m in found {
                    write_element(&mut out, "returnval", &Val::Mor(m), false);
                }
                Ok(out)
            }
        }
        _ => return None,
    })
}

fn one(m: Option<Moref>) -> String {
    let mut out = String::new();
    if let Some(m) = m {
        write_element(&mut out, "returnval", &Val::Mor(m), false);
    }
    out
}

/// Resolves `DC0/vm/folder/vm-name` from the root folder, by names.
pub(crate) fn find_by_path(state: &State, path: &str) -> Option<Moref> {
    let mut cur = crate::objects::refs::root_folder(state.inventory.esx());
    for part in path.split('/').filter(|p| !p.is_empty()) {
        cur = state.inventory.child_named(&cur, part)?;
    }
    Some(cur)
}
