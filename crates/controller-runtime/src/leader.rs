//! Leader election through a `coordination.k8s.io` Lease, as client-go's leaderelection
//! does it: a candidate takes the Lease when nobody holds it or the holder stopped renewing
//! for `leaseDurationSeconds`, and renews it while it leads; every write is conditional on the
//! Lease's resourceVersion, so two candidates never both win. kube-rs has no leader election
//! of its own; the protocol is small enough to keep here.

use chrono::{DateTime, Utc};
use infrasim_clock::SharedClock;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use serde_json::json;
use std::time::Duration;

/// A Lease's holder (empty when none) and until when its hold lasts (none when it was never
/// renewed), a Lease without a duration held for `default_seconds`.
pub fn holder_until(lease: &Lease, default_seconds: i32) -> (String, Option<DateTime<Utc>>) {
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.unwrap_or_default();
    let renewed = spec
        .renew_time
        .as_ref()
        .and_then(|t| DateTime::parse_from_rfc3339(&t.0.to_string()).ok())
        .map(|t| t.with_timezone(&Utc));
    let held_for =
        chrono::Duration::seconds(spec.lease_duration_seconds.unwrap_or(default_seconds) as i64);
    (holder, renewed.map(|r| r + held_for))
}

/// Who holds `lease` at `now`: nobody when it has no holder or its holder stopped renewing
/// it for longer than its duration.
pub fn live_holder(lease: &Lease, now: DateTime<Utc>) -> Option<String> {
    let (holder, until) = holder_until(lease, 1);
    (!holder.is_empty() && until.is_some_and(|u| u > now)).then_some(holder)
}

/// One candidate for a Lease.
pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    clock: SharedClock,
    /// How long a holder that stopped renewing keeps the Lease.
    pub lease_duration: Duration,
}

/// What an attempt found.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    /// This candidate holds the Lease (taken or renewed).
    Leading,
    /// Another holds it, until at least this time.
    Following {
        holder: String,
        until: DateTime<Utc>,
    },
}

fn micro(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

impl Elector {
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: &str,
        clock: SharedClock,
    ) -> Self {
        Elector {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            identity: identity.to_string(),
            clock,
            lease_duration: Duration::from_secs(15),
        }
    }

    /// Takes or renews the Lease if it may.
    pub async fn try_acquire(&self) -> Result<Attempt, kube::Error> {
        let now = self.clock.now();
        let seconds = self.lease_duration.as_secs().max(1) as i32;
        let Some(current) = self.api.get_opt(&self.name).await? else {
            let lease: Lease = serde_json::from_value(json!({
                "metadata": {"name": self.name},
                "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": seconds,
                         "acquireTime": micro(now), "renewTime": micro(now), "leaseTransitions": 0},
            }))
            .map_err(kube::Error::SerdeError)?;
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Attempt::Leading),
                Err(kube::Error::Api(e)) if e.code == 409 => Box::pin(self.try_acquire()).await,
                Err(e) => Err(e),
            };
        };
        let (holder, until) = holder_until(&current, seconds);
        let mine = holder == self.identity;
        if !mine && !holder.is_empty() && until.is_some_and(|u| u > now) {
            return Ok(Attempt::Following {
                holder,
                until: until.unwrap_or(now),
            });
        }
        let mut next = current.clone();
        let s = next.spec.get_or_insert_with(Default::default);
        if !mine {
            s.acquire_time = serde_json::from_value(json!(micro(now))).ok();
            s.lease_transitions = Some(s.lease_transitions.unwrap_or(0) + 1);
        }
        s.holder_identity = Some(self.identity.clone());
        s.lease_duration_seconds = Some(seconds);
        s.renew_time = serde_json::from_value(json!(micro(now))).ok();
        // A replace carries the resourceVersion read: a concurrent writer makes it a 409.
        match self
            .api
            .replace(&self.name, &PostParams::default(), &next)
            .await
        {
            Ok(_) => Ok(Attempt::Leading),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(Attempt::Following {
                holder: "(contended)".into(),
                until: now,
            }),
            Err(e) => Err(e),
        }
    }

    /// Gives the Lease up if this candidate holds it, as client-go's `ReleaseOnCancel` does:
    /// no holder, a one-second duration, so the next candidate takes it at once rather than
    /// after a whole lease duration.
    pub async fn release(&self) -> Result<(), kube::Error> {
        let Some(current) = self.api.get_opt(&self.name).await? else {
            return Ok(());
        };
        let mut next = current.clone();
        let s = next.spec.get_or_insert_with(Default::default);
        if s.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        let now = self.clock.now();
        s.holder_identity = None;
        s.lease_duration_seconds = Some(1);
        s.renew_time = serde_json::from_value(json!(micro(now))).ok();
        s.acquire_time = serde_json::from_value(json!(micro(now))).ok();
        match self
            .api
            .replace(&self.name, &PostParams::default(), &next)
            .await
        {
            // Taken meanwhile: it is not ours to give up any more.
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// Waits until this candidate leads, trying every `lease_duration / 3`.
    pub async fn acquire(&self) -> Result<(), kube::Error> {
        loop {
            match self.try_acquire().await {
                Ok(Attempt::Leading) => return Ok(()),
                Ok(Attempt::Following { holder, .. }) => {
                    tracing::info!(lease = %self.name, %holder, "waiting for the leader's lease");
                }
                Err(e) => tracing::warn!(lease = %self.name, error = %e, "leader election"),
            }
            self.clock.sleep(self.lease_duration / 3).await;
        }
    }

    /// Renews the Lease every `lease_duration / 3`; returns when leadership is lost (another
    /// took the Lease, or renewing failed for a whole lease duration).
    pub async fn keep(&self) {
        let mut last_ok = self.clock.now();
        loop {
            self.clock.sleep(self.lease_duration / 3).await;
            match self.try_acquire().await {
                Ok(Attempt::Leading) => last_ok = self.clock.now(),
                Ok(Attempt::Following { holder, .. }) => {
                    tracing::error!(lease = %self.name, %holder, "leadership lost");
                    return;
                }
                Err(e) => {
                    tracing::warn!(lease = %self.name, error = %e, "renewing the lease");
                    let lost = self.clock.now() - last_ok
                        > chrono::Duration::from_std(self.lease_duration).unwrap_or_default();
                    if lost {
                        return;
                    }
                }
            }
        }
    }
}
