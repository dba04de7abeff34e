//! The process metrics every Prometheus client library exports (`process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_open_fds`,
//! `process_max_fds`, `process_start_time_seconds`), read from `/proc` at each scrape as
//! the Go client reads them. `prometheus-client` has no such collector, and the `procfs`
//! crate would bring a dozen dependencies for six numbers from three files.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// The collector; it keeps nothing between scrapes.
#[derive(Debug, Default)]
pub struct Process;

/// What one scrape reads of this process.
#[derive(Debug, Default, PartialEq)]
struct Reading {
    cpu_seconds: f64,
    resident_bytes: f64,
    virtual_bytes: f64,
    open_fds: f64,
    max_fds: f64,
    start_time_seconds: f64,
}

impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // Off Linux (or without /proc) there is nothing to say, which is no error.
        let Some(r) = read() else {
            return Ok(());
        };
        let counter = ConstCounter::new(r.cpu_seconds);
        counter.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            None,
            counter.metric_type(),
        )?)?;
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                r.resident_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                r.virtual_bytes,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                r.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                r.max_fds,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                r.start_time_seconds,
            ),
        ];
        for (name, help, value) in gauges {
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}

fn read() -> Option<Reading> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let boot = std::fs::read_to_string("/proc/stat").ok()?;
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let open_fds = std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0);
    let mut r = parse(&stat, &boot, &limits, ticks_per_second(), page_size())?;
    r.open_fds = open_fds as f64;
    Some(r)
}

/// `/proc/self/stat`'s fields after the command name (which may hold spaces and
/// parentheses, so the last `)` ends it), `/proc/stat`'s boot time and the soft limit on
/// open files.
fn parse(stat: &str, boot: &str, limits: &str, ticks: f64, page: f64) -> Option<Reading> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    // Field 3 of proc(5) (the state) is the first here.
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |n: usize| -> Option<f64> { fields.get(n - 3)?.parse().ok() };
    let boot_time: f64 = boot
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let max_fds = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    Some(Reading {
        cpu_seconds: (field(14)? + field(15)?) / ticks,
        start_time_seconds: boot_time + field(22)? / ticks,
        virtual_bytes: field(23)?,
        resident_bytes: field(24)? * page,
        open_fds: 0.0,
        max_fds,
    })
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

fn page_size() -> f64 {
    // SAFETY: as above.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page > 0 {
        page as f64
    } else {
        4096.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fields_are_read_after_a_command_name_with_spaces() {
        let stat =
            "4242 (tokio (rt) x) S 1 2 3 4 5 6 7 8 9 10 250 150 0 0 20 0 8 0 5000 1048576 300 0";
        let reading = parse(
            stat,
            "cpu 1 2\nbtime 1700000000\n",
            "Max open files            1024                 4096                 files\n",
            100.0,
            4096.0,
        )
        .unwrap();
        assert_eq!(
            reading,
            Reading {
                cpu_seconds: 4.0,
                resident_bytes: 300.0 * 4096.0,
                virtual_bytes: 1048576.0,
                open_fds: 0.0,
                max_fds: 1024.0,
                start_time_seconds: 1700000050.0,
            }
        );
    }

    #[test]
    fn this_process_reads_as_started_and_running() {
        let r = read().unwrap();
        assert!(
            r.start_time_seconds > 1.6e9 && r.resident_bytes > 0.0 && r.open_fds > 0.0,
            "{r:?}"
        );
    }
}
