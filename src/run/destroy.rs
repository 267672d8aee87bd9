//! `destroy ID...` and `destroy --prune`: a converging run (`apply.rs`) whose
//! goal names boxes; here, its own part: the box IDs it named that no engine's
//! listing carries, said as warnings before the report.
//!
//! Owns gathering, from each engine's plan as it is made, which named IDs
//! some listing carries (`NamedBoxes`, an observer of the run). Must not
//! decide anything (a warning, no failure); the words are `render`'s.

use std::cell::RefCell;
use std::collections::BTreeSet;

use crate::cli::config::Job;
use crate::exec::event::{Event, Observer};
use crate::exec::report::FleetReport;
use crate::model::Scope;
use crate::render;

/// The box IDs `destroy` named, and those some engine's listing carries.
pub(super) struct NamedBoxes<'a> {
    named: &'a [String],
    present: RefCell<BTreeSet<String>>,
}

impl<'a> NamedBoxes<'a> {
    /// The IDs `job` names (none but for `destroy ID...`).
    pub(super) fn of(job: &'a Job) -> NamedBoxes<'a> {
        let named = match job {
            Job::Converge { named, .. } => named.as_slice(),
            _ => &[],
        };
        NamedBoxes {
            named,
            present: RefCell::new(BTreeSet::new()),
        }
    }

    /// A warning per named ID no listing carried (on the engines that could
    /// be listed, when some could not).
    pub(super) fn warnings(&self, scope: &Scope, report: &FleetReport) -> String {
        let present = self.present.borrow();
        let partial = report.parts.iter().any(|p| p.result.is_err());
        self.named
            .iter()
            .filter(|id| !present.contains(id.as_str()))
            .map(|id| render::unknown_box_warning(id, scope, partial))
            .collect()
    }
}

impl Observer for NamedBoxes<'_> {
    fn on(&self, event: &Event<'_>) {
        if self.named.is_empty() {
            return;
        }
        if let Event::Planned { inventory, .. } = event {
            let ids = inventory.box_ids();
            self.present.borrow_mut().extend(
                self.named
                    .iter()
                    .filter(|n| ids.contains(n.as_str()))
                    .cloned(),
            );
        }
    }
}
