//! How a command ends: the process exit status, decided in one place.
//!
//! Owns the mapping from a run's `Verdict` (made from the merged report of
//! every engine, or from a plan, an inventory, a lease run or a hold) to the
//! exit code. Every command and engine shape ends here; nothing else picks
//! an exit status, not even `hold`'s pass-through of its command's.

use crate::exec::hold::CommandEnd;
use crate::exec::report::Verdict;

/// How a command ended; `main` maps it to the process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: converged, or nothing to do.
    Success,
    /// 1: something failed; the output says what.
    Failure,
    /// 2: `plan --detailed-exitcode` with changes pending.
    Pending,
    /// 130: interrupted by Ctrl-C (after verifying and reporting).
    Interrupted,
    /// `hold`: the status of the command it ran, passed through (never 0:
    /// a command that succeeded is `Success`, or `Failure` when its lease
    /// could not be released).
    Passed(i32),
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

    /// The one decision: interrupted before a held command's own failure
    /// before failed before pending. A run whose audit log could not be
    /// written did not fully succeed; nor did a hold whose command succeeded
    /// but whose lease could not be released (its own failure, exit 1).
    pub(crate) fn of(verdict: Verdict) -> Exit {
        let passed = verdict.command.map(status).filter(|&code| code != 0);
        if verdict.interrupted {
            Exit::Interrupted
        } else if let Some(code) = passed {
            Exit::Passed(code)
        } else if verdict.failed {
            Exit::Failure
        } else if verdict.pending {
            Exit::Pending
        } else {
            Exit::Success
        }
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

    #[test]
    fn interrupted_wins_then_failure_then_pending() {
        let v = |failed, interrupted, pending| Verdict {
            failed,
            interrupted,
            pending,
            command: None,
        };
        assert_eq!(Exit::of(v(false, false, false)), Exit::Success);
        assert_eq!(Exit::of(v(true, false, true)), Exit::Failure);
        assert_eq!(Exit::of(v(false, false, true)), Exit::Pending);
        assert_eq!(Exit::of(v(true, true, false)), Exit::Interrupted);
    }

    #[test]
    fn a_held_commands_failure_is_passed_through_and_its_success_is_not_enough() {
        let held = |end, failed| {
            Exit::of(Verdict {
                failed,
                command: Some(end),
                ..Verdict::default()
            })
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
}
