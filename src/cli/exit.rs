//! How a command ends: the process exit status, decided in one place.
//!
//! Owns the mapping from a run's `Verdict` (made from the merged report of
//! every engine, or from a plan or an inventory) to the exit code. Every
//! command and engine shape ends here; nothing else picks an exit status.

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
}

impl Exit {
    pub fn code(self) -> i32 {
        match self {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::Pending => 2,
            Exit::Interrupted => 130,
        }
    }

    /// The one decision: interrupted before failed before pending. A run
    /// whose audit log could not be written did not fully succeed.
    pub(crate) fn of(verdict: Verdict) -> Exit {
        if verdict.interrupted {
            Exit::Interrupted
        } else if verdict.failed {
            Exit::Failure
        } else if verdict.pending {
            Exit::Pending
        } else {
            Exit::Success
        }
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
        };
        assert_eq!(Exit::of(v(false, false, false)), Exit::Success);
        assert_eq!(Exit::of(v(true, false, true)), Exit::Failure);
        assert_eq!(Exit::of(v(false, false, true)), Exit::Pending);
        assert_eq!(Exit::of(v(true, true, false)), Exit::Interrupted);
    }
}
