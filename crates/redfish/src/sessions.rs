//! Redfish sessions: a login (`POST .../SessionService/Sessions`) gets an `X-Auth-Token` and a
//! session resource; a session idle longer than the service's `SessionTimeout` ends, as does
//! one whose resource is deleted (a logout) or whose account goes.

use chrono::{DateTime, Utc};
use ring::rand::{SecureRandom, SystemRandom};
use subtle::ConstantTimeEq;

/// DSP0266's bounds on `SessionTimeout`, in seconds.
pub const TIMEOUT_RANGE: std::ops::RangeInclusive<u64> = 30..=86_400;

/// One session.
#[derive(Debug, Clone)]
pub struct Session {
    pub id: String,
    /// The account's `Id`.
    pub account: String,
    pub user: String,
    pub created: DateTime<Utc>,
    last_used: DateTime<Utc>,
    token: String,
}

/// The live sessions.
#[derive(Debug)]
pub struct Sessions {
    all: Vec<Session>,
    next: u64,
    /// `SessionTimeout`, in seconds.
    pub timeout: u64,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            all: Vec::new(),
            next: 0,
            timeout: 1800,
        }
    }
}

impl Sessions {
    /// A new session for `account`/`user`; its token.
    pub fn open(&mut self, account: &str, user: &str, now: DateTime<Utc>) -> (Session, String) {
        self.next += 1;
        let token = new_token();
        let s = Session {
            id: self.next.to_string(),
            account: account.to_string(),
            user: user.to_string(),
            created: now,
            last_used: now,
            token: token.clone(),
        };
        self.all.push(s.clone());
        (s, token)
    }

    /// The live session `token` opens, touched; sessions idle too long end first.
    pub fn by_token(&mut self, token: &str, now: DateTime<Utc>) -> Option<Session> {
        self.expire(now);
        let s = self
            .all
            .iter_mut()
            .find(|s| bool::from(s.token.as_bytes().ct_eq(token.as_bytes())))?;
        s.last_used = now;
        Some(s.clone())
    }

    /// Every live session.
    pub fn all(&mut self, now: DateTime<Utc>) -> &[Session] {
        self.expire(now);
        &self.all
    }

    pub fn get(&mut self, id: &str, now: DateTime<Utc>) -> Option<Session> {
        self.expire(now);
        self.all.iter().find(|s| s.id == id).cloned()
    }

    pub fn close(&mut self, id: &str) -> bool {
        let before = self.all.len();
        self.all.retain(|s| s.id != id);
        self.all.len() != before
    }

    /// Ends the sessions of account `account` (it was removed or disabled).
    pub fn close_account(&mut self, account: &str) {
        self.all.retain(|s| s.account != account);
    }

    fn expire(&mut self, now: DateTime<Utc>) {
        let limit = chrono::Duration::seconds(self.timeout as i64);
        self.all.retain(|s| now - s.last_used <= limit);
    }
}

/// A token no one guesses: 32 random bytes, hex.
fn new_token() -> String {
    let mut bytes = [0u8; 32];
    // The system's random source failing is not something a session can recover from; a
    // token of zeros would be guessable, so a fresh UUID (also random) stands in.
    if SystemRandom::new().fill(&mut bytes).is_err() {
        return uuid::Uuid::new_v4().simple().to_string();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_session_ends_and_a_used_one_lives_on() {
        let t0 = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let mut s = Sessions {
            timeout: 60,
            ..Default::default()
        };
        let (a, ta) = s.open("1", "root", t0);
        let (_, tb) = s.open("1", "root", t0);
        assert_ne!(ta, tb);
        let later = t0 + chrono::Duration::seconds(50);
        assert!(s.by_token(&ta, later).is_some());
        let much_later = t0 + chrono::Duration::seconds(100);
        assert_eq!(s.by_token(&ta, much_later).unwrap().id, a.id);
        assert!(s.by_token(&tb, much_later).is_none(), "idle for 100 s");
        assert!(s.close(&a.id));
        assert!(s.by_token(&ta, much_later).is_none());
    }
}
