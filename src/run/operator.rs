//! `completions SHELL` and `man`: generated from the clap definitions
//! (`cli::operator`), no state file, no engine.
//!
//! Owns only dispatching them; ends in a `Verdict` (failed when standard
//! output could not be written, a closed pipe aside).

use clap_complete::Shell;

use crate::cli::operator::{completions as write_completions, emit, man as write_man};
use crate::exec::report::Verdict;

/// `completions SHELL`.
pub(super) fn completions(shell: Shell) -> Verdict {
    emit(|out| write_completions(shell, out))
}

/// `man`.
pub(super) fn man() -> Verdict {
    emit(write_man)
}
