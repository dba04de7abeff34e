//! Printers of the `batch` group's kinds.

use super::*;

pub(super) const JOB: Printer = Printer {
    kinds: &["Job"],
    columns: &[
        NAME,
        Column("Status", "string", 0),
        Column("Completions", "string", 0),
        Column("Duration", "string", 0),
        AGE,
        Column("Containers", "string", 1),
        Column("Images", "string", 1),
        Column("Selector", "string", 1),
    ],
    cells: job,
};

fn job(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    let (c, i) = containers_images(v, "spec.template.spec.containers");
    let has = |ty: &str| {
        arr(v, "status.conditions")
            .iter()
            .any(|c| s(c, "type") == ty && s(c, "status") == "True")
    };
    let status = if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else if v.at("/metadata/deletionTimestamp").is_some() {
        "Terminating"
    } else if has("Suspended") {
        "Suspended"
    } else if has("FailureTarget") {
        "FailureTarget"
    } else if has("SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    };
    let succeeded = n(v, "status.succeeded");
    let completions = match v.at("/spec/completions").and_then(Value::as_i64) {
        Some(total) => format!("{succeeded}/{total}"),
        None => match v.at("/spec/parallelism").and_then(Value::as_i64) {
            Some(p) if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let time = |path: &str| {
        DateTime::parse_from_rfc3339(s(v, path))
            .ok()
            .map(|t| t.with_timezone(&Utc))
    };
    let duration = match (time("status.startTime"), time("status.completionTime")) {
        (Some(start), Some(end)) => human_duration(end - start),
        (Some(start), None) => human_duration(now - start),
        _ => String::new(),
    };
    vec![
        name,
        json!(status),
        json!(completions),
        json!(duration),
        age(v, now),
        c,
        i,
        json!(selector_string(v.at("/spec/selector"))),
    ]
}

pub(super) const CRON_JOB: Printer = Printer {
    kinds: &["CronJob"],
    columns: &[
        NAME,
        Column("Schedule", "string", 0),
        Column("Timezone", "string", 0),
        Column("Suspend", "boolean", 0),
        Column("Active", "integer", 0),
        Column("Last Schedule", "string", 0),
        AGE,
        Column("Containers", "string", 1),
        Column("Images", "string", 1),
        Column("Selector", "string", 1),
    ],
    cells: cron_job,
};

fn cron_job(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    let (c, i) = containers_images(v, "spec.jobTemplate.spec.template.spec.containers");
    let last = DateTime::parse_from_rfc3339(s(v, "status.lastScheduleTime"))
        .map(|t| human_duration(now - t.with_timezone(&Utc)))
        .unwrap_or_else(|_| "<none>".into());
    vec![
        name,
        json!(s(v, "spec.schedule")),
        json!(or_none(s(v, "spec.timeZone").to_string())),
        json!(v
            .at("/spec/suspend")
            .and_then(Value::as_bool)
            .unwrap_or(false)),
        json!(arr(v, "status.active").len()),
        json!(last),
        age(v, now),
        c,
        i,
        json!(selector_string(v.at("/spec/jobTemplate/spec/selector"))),
    ]
}
