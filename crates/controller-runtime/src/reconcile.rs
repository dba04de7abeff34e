//! One shape for every reconciler, and the runner that drives it.
//!
//! A reconciler says what it does with an object that exists ([`Reconcile::apply`]) and, if
//! it keeps something that must go before the object does, what it does then
//! ([`Reconcile::cleanup`], behind its [`Reconcile::FINALIZER`]). The runner does the rest
//! the same way for every controller:
//!
//! - the finalizer is added before the first apply, and removed once a cleanup is done;
//! - a failed reconcile is retried after a backoff that doubles with each failure in a row,
//!   from one second to at most five minutes (controller-runtime's work queue backs off per
//!   object the same way), and a success forgets the failures;
//! - what a reconcile asks for next ([`Next`]) is a wakeup on the injected clock:
//!   kube-runtime's own requeue sleeps on tokio's clock, which a test cannot move.

use crate::context::Context;
use crate::controller::Controller;
use crate::informers::Watched;
use crate::prometheus::Outcome;
use crate::wakeups::Wakeups;
use crate::workqueue::WorkQueue;
use chrono::{DateTime, Utc};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// When a reconciler wants to look at an object again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// When the object, or something that wakes its controller, changes.
    AwaitChange,
    /// After this long on the injected clock: a retry of something outside the plane (a port
    /// another program holds, a vCenter that is down), or a backstop behind the watches.
    After(Duration),
    /// At this time on the injected clock: a deadline (a machine's boot is done at 10:02).
    At(DateTime<Utc>),
}

/// Where a cleanup stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cleanup {
    /// Done: the finalizer goes, and with it the object.
    Done,
    /// Not yet: the finalizer stays, and the cleanup runs again as `Next` says.
    Pending(Next),
}

/// What a controller does with the objects of kind `K`.
pub trait Reconcile<K>: Send + Sync + 'static {
    /// Why a reconcile failed (it is retried with backoff).
    type Error: std::error::Error + Send + Sync + 'static;

    /// Holds an object until [`Self::cleanup`] is done: added before the first apply,
    /// removed by the runner once cleanup is [`Cleanup::Done`]. `None` when the runner is to
    /// hold nothing: the controller keeps nothing that outlives its objects, or claims an
    /// object only once it knows it is its own (a VM on a vCenter of this process) and
    /// removes its finalizer itself in its cleanup.
    const FINALIZER: Option<&'static str> = None;

    /// Brings the world in line with `obj`, which is not being deleted (and holds the
    /// finalizer, if there is one).
    fn apply(&self, obj: Arc<K>) -> impl Future<Output = Result<Next, Self::Error>> + Send;

    /// Takes down what [`Self::apply`] made for `obj`, which is being deleted: while the
    /// object holds [`Self::FINALIZER`], or on every deletion event when there is none.
    fn cleanup(&self, obj: Arc<K>) -> impl Future<Output = Result<Cleanup, Self::Error>> + Send {
        let _ = obj;
        async { Ok(Cleanup::Done) }
    }
}

/// Why a reconcile failed: the reconciler's own error, or its finalizer's write.
#[derive(Debug, thiserror::Error)]
pub enum Failed<E: std::error::Error + 'static> {
    #[error(transparent)]
    Reconcile(E),
    #[error("updating the finalizer: {0}")]
    Finalizer(#[source] kube::Error),
}

/// Drives `reconciler` with `controller`'s triggers until the process ends.
pub async fn run<K, R>(ctx: &Context, controller: Controller<K>, reconciler: Arc<R>)
where
    K: Watched,
    R: Reconcile<K>,
{
    let (wakeups, due) = Wakeups::new(ctx.clock.clone());
    // controller-runtime's default name for a controller: its kind in lower case.
    let name = K::kind(&()).to_ascii_lowercase();
    if let Some(m) = &ctx.metrics {
        m.started(&name, i64::from(crate::triggers::CONCURRENCY));
        m.queues().measure(&controller.queue);
    }
    let controller = controller.reconcile_on(due);
    let queue = controller.queue.clone();
    let runner = Arc::new(Runner {
        ctx: ctx.clone(),
        name,
        reconciler,
        wakeups,
        failures: Mutex::new(HashMap::new()),
        queue: queue.clone(),
    });
    let runs = controller
        .inner
        .run(reconcile::<K, R>, error_policy::<K, R>, runner);
    crate::triggers::run_to_end(runs, &queue).await;
}

/// A reconciler with what the runner keeps beside it.
struct Runner<K: Resource<DynamicType = ()>, R> {
    ctx: Context,
    /// The controller's name in its metrics.
    name: String,
    reconciler: Arc<R>,
    wakeups: Wakeups<K>,
    /// Failed reconciles in a row, per object.
    failures: Mutex<HashMap<ObjectRef<K>, u32>>,
    /// The controller's work queue, told when a reconcile starts and ends.
    queue: Arc<WorkQueue>,
}

impl<K: Watched, R> Runner<K, R> {
    /// Asks for the object again as `next` says; kube-runtime is told to wait for a change.
    fn schedule(&self, obj: &K, next: Next) -> Action {
        let at = match next {
            Next::AwaitChange => return Action::await_change(),
            Next::After(wait) => self
                .ctx
                .now()
                .checked_add_signed(chrono_duration(wait))
                .unwrap_or(DateTime::<Utc>::MAX_UTC),
            Next::At(at) => at,
        };
        self.wakeups.at(ObjectRef::from_obj(obj), at);
        Action::await_change()
    }

    fn failures(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectRef<K>, u32>> {
        self.failures.lock().unwrap_or_else(|p| p.into_inner())
    }
}

async fn reconcile<K, R>(obj: Arc<K>, runner: Arc<Runner<K, R>>) -> Result<Action, Failed<R::Error>>
where
    K: Watched,
    R: Reconcile<K>,
{
    let measured = runner.ctx.metrics.as_ref().map(|m| m.begin(&runner.name));
    let key = (obj.namespace(), obj.name_any());
    runner.queue.start(key.clone(), std::time::Instant::now());
    let outcome = reconcile_once(&obj, &runner).await;
    runner.queue.done(key, std::time::Instant::now());
    let next = match outcome {
        Ok(next) => next,
        Err(e) => {
            if let Some(m) = measured {
                m.end(Outcome::Error);
            }
            return Err(e);
        }
    };
    if let Some(m) = measured {
        m.end(match next {
            Next::AwaitChange => Outcome::Success,
            Next::After(_) | Next::At(_) => Outcome::RequeueAfter,
        });
    }
    runner.failures().remove(&ObjectRef::from_obj(&*obj));
    Ok(runner.schedule(&obj, next))
}

/// The finalizer's part around the reconciler's.
async fn reconcile_once<K, R>(obj: &Arc<K>, runner: &Runner<K, R>) -> Result<Next, Failed<R::Error>>
where
    K: Watched,
    R: Reconcile<K>,
{
    let r = &runner.reconciler;
    let client = &runner.ctx.client;
    if !runner.ctx.watches(obj.labels()) {
        // Another manager's, by Cluster API's watch filter: not touched, finalizers included.
        return Ok(Next::AwaitChange);
    }
    if obj.meta().deletion_timestamp.is_some() {
        let held = R::FINALIZER.filter(|f| obj.finalizers().iter().any(|g| g == f));
        if R::FINALIZER.is_some() && held.is_none() {
            return Ok(Next::AwaitChange);
        }
        return match r.cleanup(obj.clone()).await.map_err(Failed::Reconcile)? {
            Cleanup::Pending(next) => Ok(next),
            Cleanup::Done => {
                if let Some(finalizer) = held {
                    crate::finalizers::remove(client, &**obj, finalizer)
                        .await
                        .map_err(Failed::Finalizer)?;
                }
                Ok(Next::AwaitChange)
            }
        };
    }
    if let Some(finalizer) = R::FINALIZER {
        let added = crate::finalizers::ensure(client, &**obj, finalizer)
            .await
            .map_err(Failed::Finalizer)?;
        if added {
            // The write's own event brings the next reconcile.
            return Ok(Next::AwaitChange);
        }
    }
    r.apply(obj.clone()).await.map_err(Failed::Reconcile)
}

fn error_policy<K, R>(obj: Arc<K>, err: &Failed<R::Error>, runner: Arc<Runner<K, R>>) -> Action
where
    K: Watched,
    R: Reconcile<K>,
{
    let failures = {
        let mut all = runner.failures();
        let n = all.entry(ObjectRef::from_obj(&*obj)).or_insert(0);
        *n = n.saturating_add(1);
        *n - 1
    };
    let wait = backoff(failures);
    runner.queue.retry();
    tracing::warn!(
        kind = %K::kind(&()),
        namespace = %obj.namespace().unwrap_or_default(),
        name = %obj.name_any(),
        error = %err,
        retry_in = ?wait,
        "reconcile failed"
    );
    runner.schedule(&obj, Next::After(wait))
}

/// The wait before retrying after `failures` earlier failures in a row: 1 s, doubling, at
/// most 5 minutes (something that is down is not asked more than it must be).
pub fn backoff(failures: u32) -> Duration {
    Duration::from_secs(1u64 << failures.min(9)).min(Duration::from_secs(300))
}

fn chrono_duration(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_from_a_second_to_five_minutes() {
        assert_eq!(backoff(0), Duration::from_secs(1));
        assert_eq!(backoff(1), Duration::from_secs(2));
        assert_eq!(backoff(3), Duration::from_secs(8));
        assert_eq!(backoff(8), Duration::from_secs(256));
        assert_eq!(backoff(9), Duration::from_secs(300));
        assert_eq!(backoff(u32::MAX), Duration::from_secs(300));
    }

    #[test]
    fn a_long_wait_does_not_overflow_the_clock() {
        assert_eq!(
            chrono_duration(Duration::from_secs(5)),
            chrono::Duration::seconds(5)
        );
        assert_eq!(chrono_duration(Duration::MAX), chrono::Duration::MAX);
    }
}
