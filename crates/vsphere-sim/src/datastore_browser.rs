//! HostDatastoreBrowser: SearchDatastore_Task and SearchDatastoreSubFolders_Task (what
//! `govc datastore.ls` and installers that look for an uploaded ISO call), over a datastore's
//! files: its VMs' configuration and disk files, and those uploaded over HTTP (`/folder`).

use crate::call::Call;
use crate::datastore::datastore_for;
use crate::datastore_files::DatastoreFiles;
use crate::fault::Fault;
use crate::soap::Element;
use crate::state::timeline::Operation;
use crate::state::State;
use crate::value::{Data, Moref, Val};
use std::collections::BTreeSet;
use std::sync::Mutex;

pub(crate) fn dispatch(
    state: &mut State,
    call: &mut Call<'_>,
    this: &Moref,
    method: &str,
    args: &Element,
) -> Option<Result<String, Fault>> {
    let recursive = match method {
        "SearchDatastore_Task" => false,
        "SearchDatastoreSubFolders_Task" => true,
        _ => return None,
    };
    let outcome = search(state, call, this, args, recursive);
    let op = match outcome {
        Ok(result) => Operation::Done(result),
        Err(fault) => Operation::Fail(fault),
    };
    Some(Ok(crate::task::start(state, call, this, method, args, op)))
}

/// Every file on the datastore, as (path, size in bytes): its VMs' and the uploaded ones.
pub(crate) fn files(
    inventory: &crate::objects::Inventory,
    uploaded: &Mutex<DatastoreFiles>,
    ds: &Moref,
    ds_name: &str,
) -> Vec<(String, i64)> {
    let prefix = format!("[{ds_name}] ");
    // Lock order: the SOAP state (held by the caller), then the files.
    let mut out: Vec<(String, i64)> = uploaded
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .paths(&ds.value);
    for vm in inventory.iter().filter(|o| o.moref.ty == "VirtualMachine") {
        let on_ds = matches!(vm.props.get("datastore"), Some(Val::Array(_, items)) if items.contains(&Val::Mor(ds.clone())));
        if !on_ds {
            continue;
        }
        if let Some(vmx) = vm.path("config.files.vmPathName").and_then(Val::as_str) {
            if let Some(p) = vmx.strip_prefix(&prefix) {
                out.push((p.to_string(), 2048));
            }
        }
        if let Some(Val::Array(_, devices)) = vm.path("config.hardware.device") {
            for d in devices {
                let file = d.path("backing.fileName").and_then(Val::as_str);
                if let Some(p) = file.and_then(|f| f.strip_prefix(&prefix)) {
                    let size = match d.path("capacityInBytes") {
                        Some(Val::Long(n)) => *n,
                        _ => 0,
                    };
                    out.push((p.to_string(), size));
                }
            }
        }
    }
    out
}

fn search(
    state: &State,
    call: &Call<'_>,
    browser: &Moref,
    args: &Element,
    recursive: bool,
) -> Result<Option<Val>, Fault> {
    let path = args.text_of("datastorePath").unwrap_or("").trim();
    let (ds, ds_name) =
        datastore_for(state, browser, path).ok_or_else(|| Fault::not_found(browser))?;
    let folder = path
        .strip_prefix(&format!("[{ds_name}]"))
        .ok_or_else(|| file_not_found(path))?
        .trim()
        .trim_matches('/')
        .to_string();
    let patterns: Vec<String> = args
        .child("searchSpec")
        .map(|s| {
            s.children_named("matchPattern")
                .map(|p| p.text.trim().to_string())
                .collect()
        })
        .unwrap_or_default();
    let all = files(&state.inventory, call.files, &ds, &ds_name);
    let exists = folder.is_empty()
        || all
            .iter()
            .any(|(p, _)| p.starts_with(&format!("{folder}/")));
    if !exists {
        return Err(file_not_found(path));
    }
    let folders: Vec<String> = if recursive {
        let mut set: BTreeSet<String> = BTreeSet::from([folder.clone()]);
        for (p, _) in &all {
            let Some(rest) = under(&folder, p) else {
                continue;
            };
            let parts: Vec<&str> = rest.split('/').collect();
            for i in 1..parts.len() {
                let sub = parts[..i].join("/");
                set.insert(if folder.is_empty() {
                    sub
                } else {
                    format!("{folder}/{sub}")
                });
            }
        }
        set.into_iter().collect()
    } else {
        vec![folder]
    };
    let results: Vec<Val> = folders
        .iter()
        .map(|f| Val::from(results_in(&ds, &ds_name, f, &all, &patterns, call)))
        .collect();
    Ok(Some(match recursive {
        true => Val::Array("HostDatastoreBrowserSearchResults", results),
        false => results
            .into_iter()
            .next()
            .unwrap_or(Val::from(Data::new("HostDatastoreBrowserSearchResults"))),
    }))
}

/// `path` relative to `folder`, if it is under it.
fn under<'a>(folder: &str, path: &'a str) -> Option<&'a str> {
    if folder.is_empty() {
        Some(path)
    } else {
        path.strip_prefix(folder)?.strip_prefix('/')
    }
}

/// The entries directly in `folder`: its files (matching the patterns) and subfolders.
fn results_in(
    ds: &Moref,
    ds_name: &str,
    folder: &str,
    all: &[(String, i64)],
    patterns: &[String],
    call: &Call<'_>,
) -> Data {
    let mut entries: Vec<Val> = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for (p, size) in all {
        let Some(rest) = under(folder, p) else {
            continue;
        };
        let (name, is_folder) = match rest.split_once('/') {
            Some((sub, _)) => (sub.to_string(), true),
            None => (rest.to_string(), false),
        };
        if !seen.insert(name.clone()) {
            continue;
        }
        if !is_folder && !patterns.is_empty() && !patterns.iter().any(|pat| glob(pat, &name)) {
            continue;
        }
        let ty = match (is_folder, name.rsplit('.').next()) {
            (true, _) => "FolderFileInfo",
            (false, Some("vmx")) => "VmConfigFileInfo",
            (false, Some("vmdk")) => "VmDiskFileInfo",
            (false, Some("iso")) => "IsoImageFileInfo",
            _ => "FileInfo",
        };
        let mut info = Data::new(ty).with("path", name.as_str());
        if !is_folder {
            info = info.with("fileSize", Val::Long(*size));
        }
        entries.push(Val::from(info.with("modification", call.now)));
    }
    let folder_path = if folder.is_empty() {
        format!("[{ds_name}]")
    } else {
        format!("[{ds_name}] {folder}")
    };
    Data::new("HostDatastoreBrowserSearchResults")
        .with("datastore", ds.clone())
        .with("folderPath", folder_path.as_str())
        .with("file", Val::Array("FileInfo", entries))
}

fn file_not_found(path: &str) -> Fault {
    let mut f = Fault::new_pub("FileNotFound", format!("File {path} was not found"));
    f.fields = f.fields.with("file", path);
    f
}

/// Shell-style matching with `*` and `?`, as `matchPattern` has it.
fn glob(pattern: &str, name: &str) -> bool {
    fn go(p: &[u8], n: &[u8]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some(b'*'), _) => go(&p[1..], n) || (!n.is_empty() && go(p, &n[1..])),
            (Some(b'?'), Some(_)) => go(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &n[1..]),
            _ => false,
        }
    }
    go(pattern.as_bytes(), name.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn patterns_match_as_the_shell_does() {
        assert!(glob("*.vmx", "vm.vmx"));
        assert!(!glob("*.vmx", "vm.vmdk"));
        assert!(glob("*", "anything"));
        assert!(glob("v?.iso", "v1.iso"));
    }
}
