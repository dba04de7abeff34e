//! What the benchmarks read of a server process from `/proc`: its CPU time (every thread)
//! and its resident memory, whole and anonymous.

use anyhow::Context;
use std::time::Duration;

/// User + system CPU of every thread of a process, from `/proc/<pid>/stat`.
pub(crate) fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) start at field 3.
    let after = stat
        .rsplit_once(')')
        .context("/proc stat without a command")?
        .1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields.get(11).context("utime")?.parse::<u64>()?
        + fields.get(12).context("stime")?.parse::<u64>()?;
    // The kernel reports in USER_HZ, 100 on every Linux this runs on.
    Ok(Duration::from_millis(ticks * 10))
}

/// Resident memory of a process in bytes.
pub(crate) fn rss(pid: u32) -> anyhow::Result<u64> {
    memory_status(pid, "VmRSS")
}

/// Resident anonymous memory of a process in bytes (heap, stacks; not file-backed pages).
pub(crate) fn anonymous_memory(pid: u32) -> anyhow::Result<u64> {
    memory_status(pid, "RssAnon")
}

/// One `kB` field of `/proc/<pid>/status`, in bytes.
fn memory_status(pid: u32, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .with_context(|| format!("{field} in /proc/{pid}/status"))?;
    Ok(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_of_this_process_is_read() {
        let pid = std::process::id();
        assert!(cpu_time(pid).is_ok());
        assert!(rss(pid).unwrap() > 0);
    }

    #[test]
    fn anonymous_memory_is_part_of_the_resident_memory() {
        let pid = std::process::id();
        let anon = anonymous_memory(pid).unwrap();
        assert!(anon > 0 && anon <= rss(pid).unwrap());
        assert!(memory_status(pid, "NoSuchField").is_err());
    }
}
