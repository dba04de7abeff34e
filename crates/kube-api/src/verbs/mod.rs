//! The resource verbs. Each depends on the request context ([`crate::context`]) and, if it
//! writes, on the one write path ([`crate::write`]); never on another verb.

pub(crate) mod apply;
pub(crate) mod create;
pub(crate) mod delete;
pub(crate) mod get;
pub(crate) mod patch;
pub(crate) mod update;
