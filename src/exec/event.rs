//! The one event type of a run, and the one observer that hears it.
//!
//! Owns the vocabulary of "what happened" between the engine work (`exec`,
//! `watch`) and everything that reports it (progress, logs, the audit log,
//! metrics): each is an `Observer`, and a run fans one stream of events out to
//! them. Must not decide anything: an event is told after the fact.

use std::time::Duration;

use crate::engine::EngineError;
use crate::exec::report::FleetReport;
use crate::model::Outcome;
use crate::plan::inventory::Inventory;
use crate::plan::{Plan, Step};

/// Why a watch cycle ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    Start,
    Events,
    Timer,
    StateChanged,
    Resync,
    Reconnected,
}

impl Trigger {
    /// Every trigger, in the order of the type.
    pub(crate) const ALL: [Trigger; 6] = [
        Trigger::Start,
        Trigger::Events,
        Trigger::Timer,
        Trigger::StateChanged,
        Trigger::Resync,
        Trigger::Reconnected,
    ];

    /// The trigger in words, as the watch log says it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Trigger::Start => "start",
            Trigger::Events => "events",
            Trigger::Timer => "grace, expiry or a lease ran out",
            Trigger::StateChanged => "state file changed",
            Trigger::Resync => "resync",
            Trigger::Reconnected => "event stream reconnected",
        }
    }
}

/// Something that happened in a run, on one engine or over all of them.
#[derive(Debug)]
pub enum Event<'a> {
    /// An engine was listed and planned; nothing is removed yet.
    Planned {
        engine: &'a str,
        inventory: &'a Inventory,
        plan: &'a Plan,
    },
    /// A removal starts.
    Started { engine: &'a str, step: &'a Step },
    /// A volume was archived (under its final name); its removal follows.
    Archived {
        engine: &'a str,
        step: &'a Step,
        archived: &'a crate::exec::archive::Archived,
    },
    /// A step ended (removed, gone, failed, skipped, interrupted), with
    /// what its object gave back when it was removed and measured (bytes).
    Finished {
        engine: &'a str,
        step: &'a Step,
        outcome: &'a Outcome,
        reclaimed: Option<u64>,
    },
    /// `--reclaimed`: the engine could not say what its objects hold (the
    /// read failed or passed its deadline); removals go on, their figures
    /// unknown.
    Unmeasured {
        engine: &'a str,
        error: &'a EngineError,
    },
    /// Apply is over on this engine; verification starts.
    Applied { engine: &'a str },
    /// How many calls of `engine` passed their deadline so far, by endpoint
    /// (told after every watch cycle, before `Cycle`).
    DeadlineMisses {
        engine: &'a str,
        misses: &'a [(String, u64)],
    },
    /// A watch cycle ended on every engine; `report` is its merged report.
    Cycle {
        trigger: Trigger,
        took: Duration,
        report: &'a FleetReport,
    },
    /// An engine's event stream was lost (`error`) or came back (`None`).
    Stream {
        engine: &'a str,
        error: Option<&'a EngineError>,
    },
    /// The state file changed and was loaded (`None`), or is broken (the last
    /// good state stays).
    State { broken: Option<&'a str> },
}

/// Hears every event of a run. Shared by the engines of a fleet, which run
/// at once: implementations keep their state behind `&self`.
pub trait Observer {
    fn on(&self, event: &Event<'_>);
}

/// Hears nothing.
pub struct Silent;

impl Observer for Silent {
    fn on(&self, _: &Event<'_>) {}
}

/// Tells every observer, in order.
pub(crate) struct Fanout<'a>(pub(crate) Vec<&'a dyn Observer>);

impl Observer for Fanout<'_> {
    fn on(&self, event: &Event<'_>) {
        for o in &self.0 {
            o.on(event);
        }
    }
}
