//! Machine conditions written by a controller other than the Machine controller, each under
//! a field manager of its own that holds only its condition items of the `map`-typed
//! conditions list, so no other writer's apply removes them: the health check's and the
//! owners' remediation conditions (see [`super::remediation`]) and the control plane's view
//! of its Machines' components (see [`super::component_health`]).

use super::Error;
use crate::capi::core::Machine;
use chrono::{DateTime, Utc};
use infrasim_controller_runtime::conditions::{self, Condition};
use kube::api::Api;
use kube::{Resource, ResourceExt};
use serde_json::json;

/// Sets the conditions of types `mine` that `manager` holds on `m`'s status to `wanted` (those
/// of `mine` not in `wanted` go), by server-side apply of that one manager's items; nothing
/// is written when the Machine already shows them.
pub async fn set_owned(
    api: &Api<Machine>,
    m: &Machine,
    manager: &str,
    mine: &[&str],
    wanted: Vec<Condition>,
    now: DateTime<Utc>,
) -> Result<(), Error> {
    let mut current = m
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let unchanged = mine.iter().all(|t| {
        let have = conditions::find(&current, t);
        let want = wanted.iter().find(|c| c.type_ == *t);
        match (have, want) {
            (None, None) => true,
            (Some(h), Some(w)) => {
                (&h.status, &h.reason, &h.message) == (&w.status, &w.reason, &w.message)
            }
            _ => false,
        }
    });
    if unchanged {
        return Ok(());
    }
    let mut out = Vec::new();
    for c in wanted {
        let t = c.type_.clone();
        conditions::set(&mut current, c, now);
        out.extend(conditions::find(&current, &t).cloned());
    }
    let body = json!({
        "apiVersion": Machine::api_version(&()), "kind": "Machine",
        "status": {"conditions": out},
    });
    match infrasim_controller_runtime::writes::apply_status(api, &m.name_any(), manager, &body)
        .await
    {
        Ok(()) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
