//! The EventManager's state: the event log (driven by `event_manager`, which other modules
//! add to through `emit`).

use crate::value::{Data, Moref};
use std::collections::VecDeque;

/// How many events the simulator keeps.
pub(crate) const MAX_EVENTS: usize = 10_000;

/// Events, oldest first, each with the entity it is about; the newest `MAX_EVENTS` only.
#[derive(Debug, Default)]
pub(crate) struct EventLog {
    /// The last event key handed out (keys keep counting past dropped events).
    key: u64,
    /// A queue: once full, each new event drops the oldest, which a list paid for by moving
    /// all the others.
    events: VecDeque<(Option<Moref>, Data)>,
    /// The events' arguments (datacenter, host, VM) are stored over earlier ones, as the
    /// inventory's objects are: thousands of events name the same datacenter and hosts.
    bases: crate::data::Bases,
}

impl EventLog {
    pub(crate) fn next_key(&mut self) -> i32 {
        self.key += 1;
        self.key as i32
    }

    pub(crate) fn push(&mut self, entity: Option<Moref>, mut event: Data) {
        self.bases.share_within(&mut event);
        self.events.push_back((entity, event));
        // Keep the newest events only, as vCenter's retention does.
        while self.events.len() > MAX_EVENTS {
            self.events.pop_front();
        }
    }

    pub(crate) fn newest_first(&self) -> impl Iterator<Item = &(Option<Moref>, Data)> {
        self.events.iter().rev()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Val;

    fn event(key: i32) -> Data {
        Data::new("VmClonedEvent").with("key", key).with(
            "datacenter",
            Data::new("DatacenterEventArgument")
                .with("name", "DC0")
                .with("datacenter", Moref::new("Datacenter", "datacenter-2")),
        )
    }

    #[test]
    fn the_log_keeps_the_newest_events_with_their_arguments_as_given() {
        let mut log = EventLog::default();
        for key in 1..=(MAX_EVENTS as i32 + 5) {
            log.push(None, event(key));
        }
        assert_eq!(log.events.len(), MAX_EVENTS);
        let keys: Vec<Option<&Val>> = log.newest_first().map(|(_, e)| e.get("key")).collect();
        assert_eq!(keys.first(), Some(&Some(&Val::Int(MAX_EVENTS as i32 + 5))));
        assert_eq!(keys.last(), Some(&Some(&Val::Int(6))));
        for (_, e) in log.newest_first() {
            assert_eq!(
                *e,
                event(match e.get("key") {
                    Some(Val::Int(k)) => *k,
                    _ => 0,
                })
            );
        }
        // The arguments after the first are stored over it, not whole.
        let whole = log
            .newest_first()
            .filter(|(_, e)| {
                e.get("datacenter")
                    .and_then(Val::as_data)
                    .is_some_and(Data::is_whole)
            })
            .count();
        assert_eq!(whole, 0, "the first event, the only whole one, was dropped");
    }
}
