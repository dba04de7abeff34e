//! Prometheus' text format 0.0.4 from OpenMetrics text. The two differ in what a scraper of
//! our families meets in three ways only: a counter's family is named without `_total` in
//! OpenMetrics (its samples carry it) and with it in 0.0.4, OpenMetrics ends with `# EOF`,
//! and it may carry `# UNIT` lines. Histograms and gauges read the same in both. No crate
//! converts between them, and `prometheus-client` encodes only OpenMetrics.

/// `openmetrics` in the 0.0.4 text format.
pub fn from_openmetrics(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<&str> = None;
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            // Held until the TYPE line says whether the family is renamed.
            if let Some(held) = help.replace(rest) {
                push_line(&mut out, &format!("# HELP {held}"));
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let name = match kind {
                "counter" if !name.ends_with("_total") => format!("{name}_total"),
                _ => name.to_string(),
            };
            if let Some(held) = help.take() {
                let text = held.split_once(' ').map(|(_, t)| t).unwrap_or("");
                push_line(&mut out, &format!("# HELP {name} {text}"));
            }
            // 0.0.4 has no `info` or `stateset`; neither is registered here, and a scraper
            // reads an untyped family's samples the same.
            let kind = match kind {
                "counter" | "gauge" | "histogram" | "summary" => kind,
                _ => "untyped",
            };
            push_line(&mut out, &format!("# TYPE {name} {kind}"));
            continue;
        }
        if let Some(held) = help.take() {
            push_line(&mut out, &format!("# HELP {held}"));
        }
        push_line(&mut out, line);
    }
    if let Some(held) = help {
        push_line(&mut out, &format!("# HELP {held}"));
    }
    out
}

fn push_line(out: &mut String, line: &str) {
    out.push_str(line);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_family_takes_its_samples_name_and_the_rest_stays() {
        let om = "# HELP req Requests.\n# TYPE req counter\nreq_total{code=\"200\"} 2\n\
                  # HELP lat Latency.\n# TYPE lat histogram\n# UNIT lat seconds\nlat_bucket{le=\"+Inf\"} 1\nlat_sum 0.5\nlat_count 1\n\
                  # HELP up Up.\n# TYPE up gauge\nup 1\n# EOF\n";
        let classic = from_openmetrics(om);
        assert_eq!(
            classic,
            "# HELP req_total Requests.\n# TYPE req_total counter\nreq_total{code=\"200\"} 2\n\
             # HELP lat Latency.\n# TYPE lat histogram\nlat_bucket{le=\"+Inf\"} 1\nlat_sum 0.5\nlat_count 1\n\
             # HELP up Up.\n# TYPE up gauge\nup 1\n"
        );
    }
}
