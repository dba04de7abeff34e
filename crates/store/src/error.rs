//! The errors a store operation can end in. Each maps to one Kubernetes `Status` reason in
//! `kube-api`; the store itself knows nothing of HTTP.

use thiserror::Error;

/// What went wrong in a store operation.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// No object with that key.
    #[error("{resource} \"{name}\" not found")]
    NotFound { resource: String, name: String },

    /// An object with that key already exists.
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists { resource: String, name: String },

    /// A precondition (resourceVersion or uid) did not hold.
    #[error("{message}")]
    Conflict {
        resource: String,
        name: String,
        message: String,
    },

    /// The requested resourceVersion has left the event window.
    #[error("too old resource version: {requested} ({oldest_available})")]
    Expired {
        requested: u64,
        oldest_available: u64,
    },

    /// The requested resourceVersion is newer than anything the group has written.
    #[error("Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion { requested: u64, current: u64 },

    /// The object is not acceptable (bad metadata, forbidden change).
    #[error("{message}")]
    Invalid {
        resource: String,
        name: String,
        message: String,
    },

    /// The resource group does not exist (or was dropped).
    #[error("resource group {0:?} not found")]
    GroupNotFound(String),

    /// A resource group with that name already exists.
    #[error("resource group {0:?} already exists")]
    GroupExists(String),

    /// The durable backend refused the write; nothing was applied.
    #[error("storage backend: {0}")]
    Backend(String),

    /// The object could not be encoded.
    #[error("encoding: {0}")]
    Encoding(String),
}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        StoreError::Encoding(e.to_string())
    }
}

/// The store's result type.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
