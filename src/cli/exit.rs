//! How a command ends: the one result every command, signal and engine
//! count ends in (`Ended`), and the one function that turns it into the
//! process exit status and the closing line (`Exit::of`).
//!
//! Every command of `run` returns an `Ended`: a `Verdict` made from its
//! merged result (every engine's part through `exec::report::merge`, or a
//! lease run, a restore, a hold, a validation, a page written), and how a
//! signal stopped it, if one did. Nothing else picks an exit status, not
//! even `hold`'s pass-through of its command's; `main` only hands
//! `Exit::code` to the process.
//!
//! Signals, decided here: a first Ctrl-C stops new work, the run still
//! verifies and reports, and exits 130 whatever it found; SIGTERM stops a
//! watch after its cycle in flight, and the watch exits with that last
//! cycle's status (0 only if it converged; a cycle the stop cut short did
//! not: 1); a second Ctrl-C ends the run at once, 130, with a closing line
//! saying nothing was verified.

use crate::exec::hold::CommandEnd;
use crate::exec::report::Verdict;
use crate::render::Format;

/// How a command ended: the one result `Exit::of` decides from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Ran to its end: the verdict of its result.
    Done(Verdict),
    /// Stopped by Ctrl-C (SIGINT): no new work started, what was in flight
    /// finished, then verified and reported (the verdict of that).
    Interrupted(Verdict),
    /// Stopped by SIGTERM (a watch; or a watch whose run was cancelled
    /// without a signal, as `run::run_on` can): after the cycle in flight,
    /// with the last cycle's verdict.
    Stopped(Verdict),
    /// A second Ctrl-C: ended at once, nothing verified, no report. `log`:
    /// the format of the watch log the closing line belongs to, when the
    /// run was a watch.
    Quit { log: Option<Format> },
}

/// How a command ended; `main` maps it to the process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: converged, or nothing to do.
    Success,
    /// 1: something failed; the output says what.
    Failure,
    /// 2: `plan --detailed-exitcode` with changes pending.
    Pending,
    /// 130: interrupted by Ctrl-C (after verifying and reporting, or at
    /// once on a second Ctrl-C).
    Interrupted,
    /// `hold`: the status of the command it ran, passed through (never 0:
    /// a command that succeeded is `Success`, or `Failure` when its lease
    /// could not be released).
    Passed(i32),
}

/// The exit status of a run and the line it closes with, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Closing {
    pub(crate) exit: Exit,
    /// Said on stderr last (a run a second Ctrl-C ended: nothing else says it).
    pub(crate) line: Option<String>,
}

impl Exit {
    pub fn code(self) -> i32 {
        match self {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::Pending => 2,
            Exit::Interrupted => 130,
            Exit::Passed(code) => code,
        }
    }

    /// The one decision: how a run ended -> its exit status and closing line.
    pub(crate) fn of(end: &Ended) -> Closing {
        let exit = match *end {
            Ended::Done(verdict) => decide(verdict),
            Ended::Interrupted(_) | Ended::Quit { .. } => Exit::Interrupted,
            // The last cycle's status: cut short by the stop, it did not
            // converge; SIGTERM is not a Ctrl-C, so never 130.
            Ended::Stopped(verdict) => decide(Verdict {
                failed: verdict.failed || verdict.interrupted,
                interrupted: false,
                ..verdict
            }),
        };
        let line = match *end {
            Ended::Quit { log: None } => Some(crate::render::quit_line()),
            Ended::Quit { log: Some(format) } => Some(crate::render::watch_quit(
                format,
                &crate::plan::rfc3339(crate::cli::config::now()),
            )),
            _ => None,
        };
        Closing { exit, line }
    }
}

/// True when a run that ended as `end` exits 0: the report's `ok`
/// (docs/report.md), made by the one decision, never on its own.
pub(crate) fn succeeds(end: &Ended) -> bool {
    Exit::of(end).exit == Exit::Success
}

/// The `ok` of `report` when nothing else (an audit write, a signal) bears
/// on the run: [`succeeds`] of the verdict made from it, as a run that ran
/// to its end decides it. For programs that render a report themselves.
pub fn report_ok(report: &crate::exec::report::Report) -> bool {
    succeeds(&Ended::Done(Verdict::of_report(report)))
}

/// A verdict's status: interrupted (the report says a Ctrl-C cut it short)
/// before a held command's own failure before failed (or a prune declined
/// at the terminal: nothing asked for was done) before pending. A run
/// whose audit log could not be written did not fully succeed; nor did a
/// hold whose command succeeded but whose lease could not be released (its
/// own failure, exit 1).
fn decide(verdict: Verdict) -> Exit {
    let passed = verdict.command.map(status).filter(|&code| code != 0);
    if verdict.interrupted {
        Exit::Interrupted
    } else if let Some(code) = passed {
        Exit::Passed(code)
    } else if verdict.failed || verdict.declined {
        Exit::Failure
    } else if verdict.pending {
        Exit::Pending
    } else {
        Exit::Success
    }
}

/// A held command's status as a shell gives it: its exit code; 128+N when
/// signal N ended it; 127 when it was not found, 126 when it could not be run.
fn status(end: CommandEnd) -> i32 {
    match end {
        CommandEnd::Exited(code) => code,
        CommandEnd::Signaled(signal) => 128 + signal,
        CommandEnd::NotFound => 127,
        CommandEnd::NotRun => 126,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(failed: bool, interrupted: bool, pending: bool) -> Verdict {
        Verdict {
            failed,
            interrupted,
            pending,
            command: None,
            declined: false,
        }
    }

    fn exit(end: Ended) -> Exit {
        Exit::of(&end).exit
    }

    /// Every verdict a run can end with: failed, interrupted, pending.
    fn every_verdict() -> Vec<Verdict> {
        let mut all = Vec::new();
        for failed in [false, true] {
            for interrupted in [false, true] {
                for pending in [false, true] {
                    all.push(v(failed, interrupted, pending));
                }
            }
        }
        all
    }

    /// Each verdict, and how a run that `end`ed with it closes.
    fn closings(end: fn(Verdict) -> Ended) -> impl Iterator<Item = (Verdict, Closing)> {
        every_verdict()
            .into_iter()
            .map(move |verdict| (verdict, Exit::of(&end(verdict))))
    }

    #[test]
    fn a_run_to_its_end_interrupted_wins_then_failure_then_pending() {
        assert_eq!(exit(Ended::Done(v(false, false, false))), Exit::Success);
        assert_eq!(exit(Ended::Done(v(true, false, true))), Exit::Failure);
        assert_eq!(exit(Ended::Done(v(false, false, true))), Exit::Pending);
        assert_eq!(exit(Ended::Done(v(true, true, false))), Exit::Interrupted);
        assert_eq!(exit(Ended::Done(v(false, true, false))), Exit::Interrupted);
        for (_, closing) in closings(Ended::Done) {
            assert_eq!(closing.line, None);
        }
    }

    #[test]
    fn a_ctrl_c_is_130_whatever_the_run_found_and_says_nothing_more() {
        for (verdict, closing) in closings(Ended::Interrupted) {
            assert_eq!(closing.exit, Exit::Interrupted, "{verdict:?}");
            assert_eq!(closing.exit.code(), 130);
            assert_eq!(closing.line, None, "the report says it");
        }
    }

    #[test]
    fn sigterm_exits_with_the_last_cycles_status_never_130() {
        assert_eq!(exit(Ended::Stopped(v(false, false, false))), Exit::Success);
        for (verdict, closing) in closings(Ended::Stopped) {
            // The status of the last cycle, run to its end; one the stop cut
            // short did not converge.
            let last_cycle = v(
                verdict.failed || verdict.interrupted,
                false,
                verdict.pending,
            );
            assert_eq!(closing.exit, exit(Ended::Done(last_cycle)), "{verdict:?}");
            assert_ne!(closing.exit, Exit::Interrupted, "{verdict:?}");
            assert_eq!(
                closing.exit == Exit::Failure,
                verdict.failed || verdict.interrupted
            );
            assert_eq!(closing.line, None);
        }
    }

    #[test]
    fn a_second_ctrl_c_is_130_with_a_closing_line_in_the_runs_own_format() {
        let closing = Exit::of(&Ended::Quit { log: None });
        assert_eq!(closing.exit.code(), 130);
        let line = closing.line.unwrap();
        assert!(
            line.starts_with("interrupted again: quit at once, without verifying"),
            "{line}"
        );
        let closing = Exit::of(&Ended::Quit {
            log: Some(Format::Json),
        });
        assert_eq!(closing.exit, Exit::Interrupted);
        let line: serde_json::Value = serde_json::from_str(&closing.line.unwrap()).unwrap();
        assert_eq!(line["event"], "quit");
        assert_eq!(line["signal"], "SIGINT");
        let closing = Exit::of(&Ended::Quit {
            log: Some(Format::Human),
        });
        assert!(closing
            .line
            .unwrap()
            .contains(" SIGINT again: quit at once"));
    }

    #[test]
    fn a_held_commands_failure_is_passed_through_and_its_success_is_not_enough() {
        let held = |end, failed| {
            exit(Ended::Done(Verdict {
                failed,
                command: Some(end),
                ..Verdict::default()
            }))
        };
        assert_eq!(held(CommandEnd::Exited(0), false), Exit::Success);
        assert_eq!(held(CommandEnd::Exited(3), false), Exit::Passed(3));
        // The command's own failure wins over a lease left behind...
        assert_eq!(held(CommandEnd::Exited(3), true), Exit::Passed(3));
        // ...but a success with a lease left behind is a failure.
        assert_eq!(held(CommandEnd::Exited(0), true), Exit::Failure);
        assert_eq!(held(CommandEnd::Signaled(15), false).code(), 143);
        assert_eq!(held(CommandEnd::Signaled(2), true).code(), 130);
        assert_eq!(held(CommandEnd::NotFound, false).code(), 127);
        assert_eq!(held(CommandEnd::NotRun, false).code(), 126);
    }

    #[test]
    fn a_prune_declined_at_the_terminal_is_a_failure_not_a_success() {
        let declined = Verdict {
            declined: true,
            ..Verdict::default()
        };
        assert_eq!(exit(Ended::Done(declined)), Exit::Failure);
        assert_eq!(exit(Ended::Interrupted(declined)), Exit::Interrupted);
    }
}
