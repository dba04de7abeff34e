//! The webhooks admission calls, as decoded from their configurations, and the cache that
//! keeps them decoded between changes. Below the admission pipeline and the server's shared
//! state (which holds the cache), so neither imports the other through it.

use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One webhook of a configuration, with the name kube-apiserver reports it by.
#[derive(Debug, Clone)]
pub(crate) struct Webhook {
    pub name: String,
    /// Shared with the decoded configuration the cache holds.
    pub spec: Arc<Value>,
    /// The version of the resource the webhook sees the object in, when its rules name
    /// another version than the request's (`matchPolicy: Equivalent`): the object goes to it
    /// converted, and its patch comes back converted.
    pub target: Option<Arc<crate::resources::ResourceInfo>>,
}

/// The decoded webhooks of each kind of configuration, with the resourceVersions of the
/// configurations they were decoded from: every write looks at them, and they change rarely,
/// so a write decodes them only when one of them changed.
#[derive(Debug, Default)]
pub(crate) struct ConfigCache(pub(super) Mutex<HashMap<&'static str, Decoded>>);

/// The configurations' resourceVersions, and their webhooks.
pub(super) type Decoded = (Vec<u64>, Arc<Vec<Webhook>>);
