//! Operator tools: shell completion scripts and the manual page.
//!
//! Owns `sandboxctl completions SHELL` and `sandboxctl man`. Both are
//! generated from the clap definitions in `cli` (with `clap_complete` and
//! `clap_mangen`), never written by hand, so they cannot drift from the real
//! flags. Must not read the state file or reach the engine: they work with no
//! Docker and no state file at all.
//!
//! Writing to a closed pipe (`sandboxctl man | head -1`) is not an error the
//! user should see: [`emit`] ends such a run quietly, no failure, as
//! `render::stdout` does for every other command; the exit status is
//! decided in `cli::exit`, as every command's.

use std::io::{self, Write};

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;
use crate::exec::report::Verdict;

/// The name the scripts complete and the page documents.
const BIN_NAME: &str = "sandboxctl";

/// Writes the completion script for `shell` to `out`.
///
/// The script is generated in memory first: `clap_complete` panics on a write
/// error, so only the final copy to `out` may fail, and it fails as an
/// `io::Error` the caller can tell apart (e.g. `BrokenPipe`).
pub(crate) fn completions(shell: Shell, out: &mut dyn Write) -> io::Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), BIN_NAME, &mut script);
    out.write_all(&script)?;
    out.flush()
}

/// Writes the manual page, section 1, in roff to `out`: name, synopsis,
/// description, global options, then every subcommand with its synopsis,
/// description and options, then exit status, environment, files, safety and
/// version. One self-contained page: it refers to no other page.
pub(crate) fn man(out: &mut dyn Write) -> io::Result<()> {
    let cmd = Cli::command();
    let page = clap_mangen::Man::new(cmd.clone())
        .title(BIN_NAME.to_uppercase())
        .section("1")
        .manual("sandboxctl manual")
        .source(format!("sandboxctl {}", env!("CARGO_PKG_VERSION")));
    let mut text = Vec::new();
    page.render_title(&mut text)?;
    page.render_name_section(&mut text)?;
    page.render_synopsis_section(&mut text)?;
    page.render_description_section(&mut text)?;
    page.render_options_section(&mut text)?;
    writeln!(text, ".SH SUBCOMMANDS")?;
    for sub in cmd.get_subcommands() {
        subcommand(sub, &mut text)?;
    }
    roff_sections(&mut text)?;
    page.render_version_section(&mut text)?;
    out.write_all(&text)?;
    out.flush()
}

/// One `.SS "sandboxctl plan"` subsection: the synopsis, long help and
/// options that `sandboxctl plan --help` shows.
///
/// `clap_mangen` renders subcommands only as pages of their own; this renders
/// that page's sections into a buffer and nests them here, each section
/// heading replaced by a paragraph break.
fn subcommand(sub: &clap::Command, out: &mut dyn Write) -> io::Result<()> {
    let name = format!("{BIN_NAME} {}", sub.get_name());
    let mut sub = sub
        .clone()
        .bin_name(name.clone())
        .display_name(name.clone());
    sub.build();
    let page = clap_mangen::Man::new(sub);
    let mut body = Vec::new();
    page.render_synopsis_section(&mut body)?;
    page.render_description_section(&mut body)?;
    page.render_options_section(&mut body)?;
    let body = String::from_utf8(body).map_err(io::Error::other)?;
    writeln!(out, ".SS \"{name}\"")?;
    let mut first = true;
    for line in body.lines() {
        if line.starts_with(".SH ") {
            if !first {
                writeln!(out, ".PP")?;
            }
            first = false;
        } else {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// Sections clap does not know about: exit status, environment and files.
fn roff_sections(out: &mut dyn Write) -> io::Result<()> {
    use roff::{bold, roman, Roff};
    let mut doc = Roff::new();
    doc.control("SH", ["EXIT STATUS"]);
    for (code, meaning) in [
        ("0", "converged, or nothing to do"),
        ("1", "something failed; the output says what"),
        (
            "2",
            "invalid invocation, or plan --detailed-exitcode with changes pending",
        ),
        (
            "130",
            "interrupted by Ctrl-C (after verifying and reporting; at once on a second Ctrl-C)",
        ),
        (
            "watch",
            "stopped by SIGTERM: the status of its last cycle (0 only if it converged)",
        ),
        (
            "hold",
            "the status of COMMAND (128+N when signal N ended it, 127 when it was not found, \
             126 when it could not be run); 1 when no lease could be taken (COMMAND did not run) \
             or when COMMAND succeeded but its lease could not be released",
        ),
    ] {
        doc.control("TP", [])
            .text([bold(code)])
            .text([roman(meaning)]);
    }
    doc.control("SH", ["ENVIRONMENT"]);
    for (var, meaning) in [
        (
            "DOCKER_HOST",
            "the Docker engine to talk to (default: the local socket)",
        ),
        ("SANDBOXCTL_STATE", "the desired-state file, as --state"),
        (
            "SANDBOXCTL_TIMEOUT",
            "the deadline for each engine call, as --timeout",
        ),
    ] {
        doc.control("TP", [])
            .text([bold(var)])
            .text([roman(meaning)]);
    }
    doc.control("SH", ["FILES"]);
    doc.control("TP", [])
        .text([bold(crate::state::DEFAULT_STATE_PATH)])
        .text([roman(
            "the desired state, used when neither --state nor SANDBOXCTL_STATE is given",
        )]);
    doc.control("SH", ["SAFETY"]);
    doc.text([roman(
        "Only objects labeled exactly ca.sandbox=1 (and every scope label) are ever touched; \
         images are never removed.",
    )]);
    out.write_all(doc.to_roff().as_bytes())
}

/// Runs `write` against standard output and says whether it failed (the
/// exit status is `cli::exit`'s, as every command's): success, or a closed
/// pipe (the reader has all it wanted), is no failure and says nothing on
/// stderr; any other write error is reported and a failure.
pub(crate) fn emit(write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Verdict {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let failed = match write(&mut out) {
        Ok(()) => false,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => false,
        Err(e) => {
            crate::render::stderr(&format!("error: cannot write to standard output: {e}\n"));
            true
        }
    };
    Verdict {
        failed,
        ..Verdict::default()
    }
}
