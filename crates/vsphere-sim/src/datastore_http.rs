//! Datastore files over HTTP, as ESXi and vCenter serve them: `/folder/<path>?dcPath=<datacenter>
//! &dsName=<datastore>`, in the session of the `vmware_soap_session` cookie. govmomi's
//! `Datastore.Upload`/`Download` (and `govc datastore.upload`) use it for ISOs, OVFs and
//! cloud-init seeds.
//!
//! Without a file, `/folder` answers HTML listings with a link per entry: the datacenters
//! (no query), a datacenter's datastores (`dcPath`), a datastore's folders and files
//! (`dcPath` and `dsName`, and a folder's path). On an ESXi host `dcPath` may be left out: it
//! is `ha-datacenter`.
//!
//! The files themselves are kept by `datastore_files`; this module only answers requests.

use crate::config::Flavor;
use crate::datastore_files::{percent_decode, query_param, FileAnswer};
use crate::engine::Engine;
use crate::objects::{Inventory, ManagedObject};
use crate::value::{Moref, Val};
use bytes::Bytes;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::collections::BTreeMap;

/// Answers a `/folder` request of a live session: `path` is the request's path (`/folder`
/// or `/folder/<file>`), `query` its query.
pub(crate) fn answer(
    sim: &Engine,
    method: &http::Method,
    path: &str,
    query: &str,
    body: Bytes,
) -> FileAnswer {
    let file = percent_decode(path.trim_start_matches("/folder").trim_matches('/'));
    let ds_name = query_param(query, "dsName");
    // An ESXi host has one datacenter, which a datastore's files need not name.
    let esx = sim.config().flavor == Flavor::Esx8;
    let dc_path = query_param(query, "dcPath")
        .or_else(|| (esx && ds_name.is_some()).then(|| "ha-datacenter".to_string()));
    let read = matches!(*method, http::Method::GET | http::Method::HEAD);
    match (dc_path, ds_name) {
        (Some(dc), Some(ds)) => on_datastore(sim, method, &dc, &ds, &file, body),
        (_, None) if file.is_empty() && !read => FileAnswer::text(405, "a listing is only read"),
        (None, None) if file.is_empty() => sim.with_inventory(datacenters_page),
        (Some(dc), None) if file.is_empty() => sim.with_inventory(|inv| datastores_page(inv, &dc)),
        _ => FileAnswer::text(404, "dcPath and dsName are required"),
    }
}

/// A request on one datastore: a stored file, else (read) a folder's listing.
fn on_datastore(
    sim: &Engine,
    method: &http::Method,
    dc: &str,
    ds: &str,
    file: &str,
    body: Bytes,
) -> FileAnswer {
    let datastore = sim.with_inventory(|inv| {
        let in_dc = find_datacenter(inv, dc)
            .map(datastores_of)
            .unwrap_or_default();
        in_dc
            .into_iter()
            .find(|m| inv.get(m).is_some_and(|o| o.name() == ds))
    });
    let Some(datastore) = datastore else {
        return FileAnswer::text(404, "no such datacenter or datastore");
    };
    let uploaded = sim.uploaded_files();
    let lock = || uploaded.lock().unwrap_or_else(|p| p.into_inner());
    match *method {
        http::Method::GET | http::Method::HEAD => {
            let stored = lock().get(&datastore.value, file);
            if stored.status == 200 {
                return stored;
            }
            // Lock order: the SOAP state, then the files (not held here).
            let all = sim.with_inventory(|inv| {
                crate::datastore_browser::files(inv, uploaded, &datastore, ds)
            });
            folder_page(dc, ds, file, &all).unwrap_or(stored)
        }
        // Kept (when the simulator is) under the files' lock, so two writes of one file are
        // kept in the order they were made.
        http::Method::PUT | http::Method::POST => {
            let mut files = lock();
            let answer = files.put(&datastore.value, file, body.clone());
            if let Some(keeper) = sim.keeper() {
                keeper.put_file(&datastore.value, file, &body);
            }
            answer
        }
        http::Method::DELETE => {
            let mut files = lock();
            let answer = files.delete(&datastore.value, file);
            if let (Some(keeper), 204) = (sim.keeper(), answer.status) {
                keeper.delete_file(&datastore.value, file);
            }
            answer
        }
        _ => FileAnswer::text(405, "method not allowed"),
    }
}

/// The datacenter a `dcPath` names: by its inventory path (`F0/DC1`), else by the name in
/// its last part.
fn find_datacenter<'a>(inv: &'a Inventory, dc_path: &str) -> Option<&'a ManagedObject> {
    let dc_path = dc_path.trim_matches('/');
    let last = dc_path.rsplit('/').next().unwrap_or(dc_path);
    let dcs = || inv.iter().filter(|o| o.moref.ty == "Datacenter");
    dcs()
        .find(|o| inv.path_of(&o.moref).trim_start_matches('/') == dc_path)
        .or_else(|| dcs().find(|o| o.name() == last))
}

fn datastores_of(dc: &ManagedObject) -> Vec<Moref> {
    dc.props
        .get("datastore")
        .map(Val::morefs)
        .unwrap_or_default()
}

/// Query values: everything but unreserved characters escaped.
const QUERY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');
/// Paths: as query values, with `/` kept.
const PATH: &AsciiSet = &QUERY.remove(b'/');

fn enc(s: &str, set: &'static AsciiSet) -> String {
    utf8_percent_encode(s, set).to_string()
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One row of a listing: link, label, size (files only).
type Row = (String, String, Option<i64>);

/// An HTML directory listing.
fn page(title: &str, rows: &[Row]) -> FileAnswer {
    let title = escape(title);
    let mut html = format!(
        "<!DOCTYPE html>\n<html><head><title>Index of {title}</title></head><body>\n<h1>Index of {title}</h1>\n<table>\n<tr><th>Name</th><th>Size</th></tr>\n"
    );
    for (href, label, size) in rows {
        let size = size.map_or("-".to_string(), |n| n.to_string());
        html.push_str(&format!(
            "<tr><td><a href=\"{}\">{}</a></td><td>{size}</td></tr>\n",
            escape(href),
            escape(label)
        ));
    }
    html.push_str("</table>\n</body></html>\n");
    FileAnswer {
        status: 200,
        body: Bytes::from(html),
        content_type: "text/html; charset=utf-8",
    }
}

fn datacenters_page(inv: &Inventory) -> FileAnswer {
    let mut rows: Vec<Row> = inv
        .iter()
        .filter(|o| o.moref.ty == "Datacenter")
        .map(|o| {
            let path = inv.path_of(&o.moref).trim_start_matches('/').to_string();
            (format!("/folder?dcPath={}", enc(&path, QUERY)), path, None)
        })
        .collect();
    rows.sort();
    page("/folder", &rows)
}

fn datastores_page(inv: &Inventory, dc: &str) -> FileAnswer {
    let Some(dco) = find_datacenter(inv, dc) else {
        return FileAnswer::text(404, "no such datacenter");
    };
    let mut rows: Vec<Row> = datastores_of(dco)
        .iter()
        .filter_map(|m| inv.get(m))
        .map(|o| {
            let href = format!(
                "/folder?dcPath={}&dsName={}",
                enc(dc, QUERY),
                enc(o.name(), QUERY)
            );
            (href, o.name().to_string(), None)
        })
        .collect();
    rows.sort();
    page(&format!("/folder?dcPath={dc}"), &rows)
}

/// The listing of `folder` (`""` for the top level) on a datastore holding `all` (paths and
/// sizes); none when there is no such folder.
fn folder_page(dc: &str, ds: &str, folder: &str, all: &[(String, i64)]) -> Option<FileAnswer> {
    let mut entries: BTreeMap<String, Option<i64>> = BTreeMap::new();
    for (path, size) in all {
        let rest = if folder.is_empty() {
            Some(path.as_str())
        } else {
            path.strip_prefix(folder).and_then(|r| r.strip_prefix('/'))
        };
        let Some(rest) = rest else {
            continue;
        };
        match rest.split_once('/') {
            Some((sub, _)) => entries.insert(format!("{sub}/"), None),
            None => entries.insert(rest.to_string(), Some(*size)),
        };
    }
    if entries.is_empty() && !folder.is_empty() {
        return None;
    }
    let query = format!("?dcPath={}&dsName={}", enc(dc, QUERY), enc(ds, QUERY));
    let base = if folder.is_empty() {
        String::new()
    } else {
        format!("{folder}/")
    };
    let rows: Vec<Row> = entries
        .into_iter()
        .map(|(name, size)| {
            let href = format!("/folder/{}{query}", enc(&format!("{base}{name}"), PATH));
            (href, name, size)
        })
        .collect();
    Some(page(&format!("[{ds}] {folder}"), &rows))
}
