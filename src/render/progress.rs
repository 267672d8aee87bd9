//! Progress during apply (on stderr): a bar on a terminal in human format,
//! one line per finished step when stderr is not a terminal, nothing for
//! JSON. Told of each finished step; the object and the outcome's words are
//! escaped and cut.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

use crate::model::Outcome;
use crate::plan::Step;
use crate::render::table::{entry_label, LAST_CELL_CHARS};
use crate::render::Format;
use crate::text::clip;

/// Progress during apply: a bar on a terminal (human format), one line per
/// finished step when stderr is not a terminal, nothing for JSON.
pub(crate) enum Progress {
    Bar { bar: ProgressBar, failures: usize },
    Lines,
    Quiet,
}

impl Progress {
    /// The display for `format` and a plan of `total` steps.
    pub(crate) fn new(format: Format, total: usize) -> Progress {
        match format {
            Format::Json | Format::Dot | Format::Mermaid => Progress::Quiet,
            Format::Human if std::io::stderr().is_terminal() && total > 0 => {
                let bar = ProgressBar::new(total as u64);
                bar.set_style(
                    ProgressStyle::with_template("{bar:30} {pos}/{len} done{msg} ({elapsed})")
                        .expect("static template"),
                );
                Progress::Bar { bar, failures: 0 }
            }
            _ => Progress::Lines,
        }
    }

    /// Clears the bar, if any.
    pub(crate) fn finish(&self) {
        if let Progress::Bar { bar, .. } = self {
            bar.finish_and_clear();
        }
    }
}

/// The line for a finished step: its number, the object, and what happened.
pub(crate) fn step_line(step: &Step, outcome: &Outcome) -> String {
    let what = match outcome {
        Outcome::Removed => "removed".to_string(),
        Outcome::AlreadyGone => "already gone".to_string(),
        Outcome::Failed(_) | Outcome::GaveUpWaiting { .. } | Outcome::ArchiveFailed(_) => {
            format!("FAILED: {outcome}")
        }
        Outcome::Refused(e) => format!("refused: {e}"),
        other => other.to_string(),
    };
    format!(
        "{:>4}. {} {}\n",
        step.step,
        entry_label(&step.object),
        clip(&what, LAST_CELL_CHARS)
    )
}

impl Progress {
    /// Shows that a step ended: moves the bar, or returns the line to print
    /// on stderr.
    pub(crate) fn finished(&mut self, step: &Step, outcome: &Outcome) -> Option<String> {
        match self {
            Progress::Quiet => None,
            Progress::Lines => Some(step_line(step, outcome)),
            Progress::Bar { bar, failures } => {
                if !outcome.is_success() {
                    *failures += 1;
                    bar.set_message(format!(", {failures} not removed"));
                }
                bar.inc(1);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EngineError, Kind, Reason};
    use crate::render::fixtures::{entry, EVIL_NAME};

    fn step(name: &str) -> Step {
        Step {
            step: 3,
            object: entry(Kind::Container, name, Some("c0ffee0000010000"), None),
            why: Reason::NoBoxLabel,
            waits_for: vec![],
            archive: None,
            reads: vec![],
            archived_by: None,
        }
    }

    #[test]
    fn one_line_per_finished_step() {
        let in_use = Outcome::Failed(EngineError::status_500(
            "remove container c0ffee000001",
            "boom",
        ));
        let lines: String = [
            Outcome::Removed,
            Outcome::AlreadyGone,
            in_use,
            Outcome::Refused("it changed".into()),
            Outcome::Skipped(1),
            Outcome::Interrupted,
        ]
        .iter()
        .map(|o| step_line(&step("web"), o))
        .collect();
        insta::assert_snapshot!(lines, @r"
           3. container web (c0ffee000001) removed
           3. container web (c0ffee000001) already gone
           3. container web (c0ffee000001) FAILED: remove container c0ffee000001: engine answered HTTP 500: boom
           3. container web (c0ffee000001) refused: it changed
           3. container web (c0ffee000001) skipped (step 1 did not succeed)
           3. container web (c0ffee000001) not started (interrupted)
        ");
    }

    #[test]
    fn hostile_text_is_escaped() {
        let line = step_line(
            &step(EVIL_NAME),
            &Outcome::Refused("gone\u{1b}[1m\nFORGED".into()),
        );
        assert_eq!(
            line,
            "   3. container evil\\u{1b}[2J\\n\\u{202e}x (c0ffee000001) refused: gone\\u{1b}[1m\\nFORGED\n"
        );
        assert!(matches!(Progress::new(Format::Json, 5), Progress::Quiet));
    }
}
