//! The SessionManager's state: the live sessions, by key (driven by `session_manager`).

use chrono::{DateTime, Utc};
use std::collections::HashMap;

/// A logged-in session.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub key: String,
    pub user: String,
    pub login_time: DateTime<Utc>,
    pub last_active: DateTime<Utc>,
    pub user_agent: String,
    pub call_count: i64,
    /// The user's role (the configured users', or Admin for the simulator's own).
    pub role: crate::roles::SystemRole,
}

/// The live sessions, by key, and the clone tickets not yet redeemed.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    by_key: HashMap<String, Session>,
    /// Ticket → (user, role, redeemable until).
    tickets: HashMap<String, (String, crate::roles::SystemRole, DateTime<Utc>)>,
}

impl Sessions {
    pub(crate) fn get(&self, key: &str) -> Option<&Session> {
        self.by_key.get(key)
    }

    pub(crate) fn contains(&self, key: &str) -> bool {
        self.by_key.contains_key(key)
    }

    pub(crate) fn insert(&mut self, session: Session) {
        self.by_key.insert(session.key.clone(), session);
    }

    pub(crate) fn remove(&mut self, key: &str) {
        self.by_key.remove(key);
    }

    /// Keeps a clone ticket of `user`, redeemable until `until`.
    pub(crate) fn add_ticket(
        &mut self,
        ticket: &str,
        (user, role): (String, crate::roles::SystemRole),
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) {
        // Tickets nobody redeemed go when the next is made, so they cannot pile up.
        self.tickets.retain(|_, (_, _, t)| *t >= now);
        self.tickets.insert(ticket.to_string(), (user, role, until));
    }

    /// Spends a clone ticket: its user and role, if it is known and not expired at `now`.
    pub(crate) fn redeem_ticket(
        &mut self,
        ticket: &str,
        now: DateTime<Utc>,
    ) -> Option<(String, crate::roles::SystemRole)> {
        let (user, role, until) = self.tickets.remove(ticket)?;
        (now <= until).then_some((user, role))
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Session> {
        self.by_key.values()
    }

    /// Counts a call in a session: `None` if there is no such session, `Some(false)` (and
    /// nothing counted) if it has been idle longer than `idle`, so the caller ends it.
    pub(crate) fn touch(
        &mut self,
        key: &str,
        idle: chrono::Duration,
        now: DateTime<Utc>,
    ) -> Option<bool> {
        let session = self.by_key.get_mut(key)?;
        if now - session.last_active > idle {
            return Some(false);
        }
        session.last_active = now;
        session.call_count += 1;
        Some(true)
    }
}
