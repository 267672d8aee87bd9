//! What a signal makes sandboxctl say outside a watch's log: the notice of a
//! first Ctrl-C (a converging run stops starting removals, finishes those in
//! flight, then verifies and reports) and the closing line of a run that a
//! second Ctrl-C ended at once (no report: nothing was verified). A watch
//! says both as lines of its log (`log.rs`: `watch_stopping`, `watch_quit`).

/// The notice of a first Ctrl-C.
pub(crate) fn interrupt_notice() -> String {
    "interrupted: finishing removals in flight, then verifying (Ctrl-C again to quit at once)\n"
        .to_string()
}

/// The closing line of a run a second Ctrl-C ended at once.
pub(crate) fn quit_line() -> String {
    "interrupted again: quit at once, without verifying; removals in flight may have finished or not: `sandboxctl plan` shows what is left\n"
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_is_one_line() {
        for line in [interrupt_notice(), quit_line()] {
            assert!(
                line.ends_with('\n') && line.matches('\n').count() == 1,
                "{line}"
            );
        }
    }
}
