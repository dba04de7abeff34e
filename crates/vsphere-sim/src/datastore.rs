//! Datastore: the generated datastores (vCenter's `LocalDS_<n>`, ESXi's `datastore<n>` named
//! by their VMFS UUIDs), and which datastore a browser's search path names.
//!
//! A datastore's own methods (Rename_Task, Destroy_Task) are the shared ManagedEntity ones;
//! its files are searched by `datastore_browser` and served over HTTP by `datastore_http`.

use crate::state::State;
use crate::value::{Moref, Val};

/// The datastore a search of `path` (`[name] folder`) through `browser` is on:
/// (reference, name). A browser reaches its own datastore (vCenter's per-datastore
/// browsers) or those of the host it belongs to (a host's `datastoreBrowser`); the one the
/// path names is chosen, otherwise the first the browser reaches.
pub(crate) fn datastore_for(state: &State, browser: &Moref, path: &str) -> Option<(Moref, String)> {
    let wanted = path
        .trim()
        .strip_prefix('[')
        .and_then(|p| p.split_once(']'))
        .map(|(name, _)| name);
    let by_host: Vec<Moref> = state
        .inventory
        .iter()
        .filter(|o| {
            o.moref.ty == "HostSystem"
                && o.props.get("datastoreBrowser") == Some(&Val::Mor(browser.clone()))
        })
        .filter_map(|h| match h.props.get("datastore") {
            Some(Val::Array(_, items)) => Some(items.iter().filter_map(Val::as_mor).cloned()),
            _ => None,
        })
        .flatten()
        .collect();
    let reachable: Vec<(Moref, String)> = state
        .inventory
        .iter()
        .filter(|o| {
            o.moref.ty == "Datastore"
                && (o.props.get("browser") == Some(&Val::Mor(browser.clone()))
                    || by_host.contains(&o.moref))
        })
        .map(|o| (o.moref.clone(), o.name().to_string()))
        .collect();
    let named = reachable
        .iter()
        .find(|(_, name)| Some(name.as_str()) == wanted)
        .cloned();
    named.or_else(|| reachable.into_iter().next())
}
