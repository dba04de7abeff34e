//! An injectable clock.
//!
//! Everything in infrasim that reads the time (creation and deletion timestamps, session
//! expiry, startup delays, requeues) reads it through a [`Clock`], so that tests advance a
//! [`FakeClock`] instead of sleeping. Production code uses [`SystemClock`].
//!
//! ```
//! use infrasim_clock::{Clock, FakeClock};
//! use std::time::Duration;
//!
//! let clock = FakeClock::new("2026-01-01T00:00:00Z".parse().unwrap());
//! let before = clock.now();
//! clock.advance(Duration::from_secs(90));
//! assert_eq!((clock.now() - before).num_seconds(), 90);
//! ```

use chrono::{DateTime, Utc};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// A source of wall-clock time and of delays measured against it.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time.
    fn now(&self) -> DateTime<Utc>;

    /// Waits until `duration` has passed on this clock.
    fn sleep(&self, duration: Duration) -> futures_sleep::Sleep;
}

/// A shared clock handle.
pub type SharedClock = Arc<dyn Clock>;

/// The real clock: `Utc::now()` and tokio timers.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl SystemClock {
    /// A shared handle to the system clock.
    pub fn shared() -> SharedClock {
        Arc::new(SystemClock)
    }
}

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn sleep(&self, duration: Duration) -> futures_sleep::Sleep {
        futures_sleep::Sleep::real(duration)
    }
}

/// A clock that only moves when a test calls [`FakeClock::advance`] or [`FakeClock::set`].
///
/// Sleeps on a fake clock complete as soon as the clock has been advanced past their deadline.
#[derive(Debug, Clone)]
pub struct FakeClock {
    inner: Arc<FakeInner>,
}

#[derive(Debug)]
struct FakeInner {
    // A std Mutex: the critical sections are a read or a write of one value.
    now: Mutex<DateTime<Utc>>,
    // Wakes sleepers whenever the time changes.
    changed: watch::Sender<DateTime<Utc>>,
}

impl FakeClock {
    /// A fake clock standing at `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        let (changed, _) = watch::channel(start);
        FakeClock {
            inner: Arc::new(FakeInner {
                now: Mutex::new(start),
                changed,
            }),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let delta = chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
        let now = {
            let mut now = self.inner.now.lock().unwrap_or_else(|p| p.into_inner());
            *now += delta;
            *now
        };
        self.inner.changed.send_replace(now);
    }

    /// Sets the clock to `to` (which may be earlier than now).
    pub fn set(&self, to: DateTime<Utc>) {
        *self.inner.now.lock().unwrap_or_else(|p| p.into_inner()) = to;
        self.inner.changed.send_replace(to);
    }
}

impl Clock for FakeClock {
    fn now(&self) -> DateTime<Utc> {
        *self.inner.now.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn sleep(&self, duration: Duration) -> futures_sleep::Sleep {
        let deadline =
            self.now() + chrono::Duration::from_std(duration).unwrap_or(chrono::Duration::MAX);
        futures_sleep::Sleep::fake(self.inner.changed.subscribe(), deadline)
    }
}

/// The future returned by [`Clock::sleep`].
pub mod futures_sleep {
    use chrono::{DateTime, Utc};
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use std::time::Duration;
    use tokio::sync::watch;

    /// Completes when the clock it came from reaches its deadline.
    pub struct Sleep {
        inner: Pin<Box<dyn Future<Output = ()> + Send>>,
    }

    impl Sleep {
        pub(crate) fn real(duration: Duration) -> Self {
            Sleep {
                inner: Box::pin(tokio::time::sleep(duration)),
            }
        }

        pub(crate) fn fake(
            mut changes: watch::Receiver<DateTime<Utc>>,
            deadline: DateTime<Utc>,
        ) -> Self {
            Sleep {
                inner: Box::pin(async move {
                    loop {
                        if *changes.borrow_and_update() >= deadline {
                            return;
                        }
                        if changes.changed().await.is_err() {
                            // The clock is gone: nothing will ever wake us, so finish now
                            // rather than hang a task forever.
                            return;
                        }
                    }
                }),
            }
        }
    }

    impl Future for Sleep {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.inner.as_mut().poll(cx)
        }
    }

    impl std::fmt::Debug for Sleep {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Sleep")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fake_sleep_completes_only_after_advance() {
        let clock = FakeClock::new("2026-01-01T00:00:00Z".parse().unwrap());
        let mut sleep = Box::pin(clock.sleep(Duration::from_secs(10)));
        // Not ready before the clock moves.
        assert!(futures_poll_once(&mut sleep).await.is_pending());
        clock.advance(Duration::from_secs(5));
        assert!(futures_poll_once(&mut sleep).await.is_pending());
        clock.advance(Duration::from_secs(5));
        sleep.await;
    }

    async fn futures_poll_once<F: std::future::Future + Unpin>(
        f: &mut F,
    ) -> std::task::Poll<F::Output> {
        std::future::poll_fn(|cx| std::task::Poll::Ready(std::pin::Pin::new(&mut *f).poll(cx)))
            .await
    }
}
