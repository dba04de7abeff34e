//! The waiters' load of `bench vsphere`: what one VM's power change costs a server while
//! clients sit in `WaitForUpdatesEx`, as CAPV, VmGroup and govc's watches do.
//!
//! Half the waiters watch every VM (a container view over the root folder, name and power
//! state), half watch one VM each (the first of them the VM that changes). Each waiter is a
//! session of its own on a connection of its own, its filter on the session's property
//! collector, its first wait (the empty version) taken before the load. Then one more
//! session powers the VM off and on in turn; after each change, the load waits until every
//! waiter that selects the VM has its update. Each waiter makes a property collector of its
//! own for its filter, as govmomi's `property.Wait` (CAPV's, govc's) does; govmomi's
//! simulator registers every session's default collector under one reference, so only the
//! last of several sessions waiting on theirs would hear anything. Measured: the server's CPU per change (the
//! power call, its task and every waiter's answer) and the delivery latency from the power
//! call's start to each waiter's answer. An update that reaches a waiter not selecting the
//! VM is counted as spurious.

use crate::vim::{text_of, vm_view_spec, Session};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// What the waiters' load measured on one server.
#[derive(Debug, Default, Clone)]
pub(crate) struct UpdateFigures {
    pub(crate) changes: usize,
    pub(crate) cpu_per_change: Duration,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    pub(crate) spurious: usize,
}

/// One waiter's answer with an update: which waiter, and when.
type Heard = (usize, Instant);

/// Runs the waiters' load: `waiters` sessions waiting, power changes of `vms[0]` made
/// through `driver`, at least `changes` of them and for at least `window` (the server's CPU
/// is read in 10 ms ticks: a fast server needs many changes for a figure).
pub(crate) async fn measure(
    pid: u32,
    mut waiting: Vec<Session>,
    driver: &mut Session,
    vms: &[String],
    (changes, window): (usize, Duration),
) -> anyhow::Result<UpdateFigures> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Heard>();
    let half = waiting.len() / 2;
    let mut expected = Vec::new();
    let mut tasks = Vec::new();
    for (i, mut s) in waiting.drain(..).enumerate() {
        let spec = if i < half {
            expected.push(i);
            vm_view_spec(&s.vm_view().await?)
        } else {
            let vm = &vms[(i - half) % vms.len()];
            if i == half {
                expected.push(i);
            }
            one_vm(vm)
        };
        let (pc, version) = first_wait(&mut s, &spec).await?;
        tasks.push(tokio::spawn(wait_loop(i, s, pc, version, tx.clone())));
    }
    let vm = &vms[0];
    let mut latencies = Vec::new();
    let mut spurious = 0;
    let before = crate::process::cpu_time(pid)?;
    let deadline = Instant::now() + window;
    let mut n = 0;
    while n < changes || Instant::now() < deadline {
        while let Ok((who, _)) = rx.try_recv() {
            spurious += usize::from(!expected.contains(&who));
        }
        let method = if n % 2 == 0 {
            "PowerOffVM_Task"
        } else {
            "PowerOnVM_Task"
        };
        let started = Instant::now();
        driver
            .conn
            .call(&format!(r#"<{method} xmlns="urn:vim25"><_this type="VirtualMachine">{vm}</_this></{method}>"#))
            .await?;
        let mut missing: Vec<usize> = expected.clone();
        while !missing.is_empty() {
            let (who, at) = tokio::time::timeout(Duration::from_secs(120), rx.recv())
                .await
                .map_err(|_| anyhow::anyhow!("waiters {missing:?} heard nothing of change {n}"))?
                .ok_or_else(|| anyhow::anyhow!("every waiter stopped"))?;
            match missing.iter().position(|w| *w == who) {
                Some(k) => {
                    missing.swap_remove(k);
                    latencies.push(at - started);
                }
                None => spurious += usize::from(!expected.contains(&who)),
            }
        }
        n += 1;
    }
    let cpu = crate::process::cpu_time(pid)?.saturating_sub(before);
    for t in tasks {
        t.abort();
    }
    latencies.sort();
    let at = |q: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or_default()
    };
    Ok(UpdateFigures {
        changes: n,
        cpu_per_change: cpu.checked_div(n.max(1) as u32).unwrap_or_default(),
        p50: at(0.5),
        p99: at(0.99),
        spurious,
    })
}

/// A filter spec on one VM's power state.
fn one_vm(vm: &str) -> String {
    format!(
        r#"<propSet><type>VirtualMachine</type><pathSet>runtime.powerState</pathSet></propSet><objectSet><obj type="VirtualMachine">{vm}</obj></objectSet>"#
    )
}

/// Makes a property collector with the filter and takes its first report (everything it
/// selects); the collector and the report's version.
async fn first_wait(s: &mut Session, spec: &str) -> anyhow::Result<(String, String)> {
    let default = s.content.property_collector.clone();
    let pc = text_of(
        &s.conn
            .call(&format!(
                r#"<CreatePropertyCollector xmlns="urn:vim25"><_this type="PropertyCollector">{default}</_this></CreatePropertyCollector>"#
            ))
            .await?,
        "returnval",
    )?;
    s.conn
        .call(&format!(
            r#"<CreateFilter xmlns="urn:vim25"><_this type="PropertyCollector">{pc}</_this><spec>{spec}</spec><partialUpdates>false</partialUpdates></CreateFilter>"#
        ))
        .await?;
    let body = s.conn.call(&wait_body(&pc, "", 0)).await?;
    Ok((pc, text_of(&body, "version")?))
}

fn wait_body(pc: &str, version: &str, max_wait: u32) -> String {
    format!(
        r#"<WaitForUpdatesEx xmlns="urn:vim25"><_this type="PropertyCollector">{pc}</_this><version>{version}</version><options><maxWaitSeconds>{max_wait}</maxWaitSeconds></options></WaitForUpdatesEx>"#
    )
}

/// Waits for updates until stopped, telling `heard` of each answer that has one.
async fn wait_loop(
    who: usize,
    mut s: Session,
    pc: String,
    mut version: String,
    heard: mpsc::UnboundedSender<Heard>,
) -> anyhow::Result<()> {
    loop {
        let body = s.conn.call(&wait_body(&pc, &version, 10)).await?;
        if let Ok(v) = text_of(&body, "version") {
            if body.contains("<objectSet>") || body.contains("<objectSet ") {
                heard.send((who, Instant::now()))?;
            }
            version = v;
        }
    }
}
