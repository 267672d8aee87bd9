//! What refused an invocation, as a `model::Refusal`: its code, its words
//! and the file and place it points at, from the error that refused it
//! (clap's, the command line's own checks, the state file's, resolving the
//! config and the engine's address, a saved plan's, the plan key's); and
//! whether a command line that clap refused asked for JSON (`asks_for_json`,
//! read from the words themselves, since clap gave no `Cli`).
//!
//! Owns the one mapping from error types to codes. Must not print (the
//! error document is `render::refusal`'s, where it goes `run`'s) nor decide
//! an exit status.

use std::ffi::OsString;

use clap::error::ErrorKind as ClapKind;
use clap::CommandFactory;

use crate::cli::config::ConfigError;
use crate::cli::{Cli, Command};
use crate::engine::endpoint::EndpointError;
use crate::exec::report::PlanFileError;
use crate::exec::seal::SealError;
use crate::model::{Refusal, RefusalCode as Code};
use crate::render::Format;
use crate::state::{StateError, StateErrorKind};

/// The refusal of a run that `error` stopped before any work: the code its
/// type says, else `otherwise` (what the caller was doing: opening the
/// audit log, listening for metrics); its text the whole cause chain.
pub(crate) fn of(error: &anyhow::Error, otherwise: Code) -> Refusal {
    let text = format!("{error:#}");
    if let Some(e) = error.downcast_ref::<StateError>() {
        return Refusal::new(state_code(&e.kind), text)
            .at(e.path.display().to_string(), e.line_col());
    }
    if let Some(e) = error.downcast_ref::<PlanFileError>() {
        return Refusal::new(Code::PlanFile, text).at(e.path.display().to_string(), None);
    }
    let code = if let Some(e) = error.downcast_ref::<ConfigError>() {
        config_code(e)
    } else if let Some(e) = error.downcast_ref::<EndpointError>() {
        endpoint_code(e)
    } else if error.downcast_ref::<SealError>().is_some() {
        Code::PlanKey
    } else {
        otherwise
    };
    Refusal::new(code, text)
}

/// The refusal of a command line clap refused (`None` for `--help` and
/// `--version`, which are no refusal): the first paragraph of clap's
/// message, without its `error: `.
pub(crate) fn of_clap(error: &clap::Error) -> Option<Refusal> {
    if !error.use_stderr() {
        return None;
    }
    let code = match error.kind() {
        ClapKind::UnknownArgument | ClapKind::InvalidSubcommand => Code::UnknownArgument,
        ClapKind::MissingRequiredArgument
        | ClapKind::MissingSubcommand
        | ClapKind::DisplayHelpOnMissingArgumentOrSubcommand => Code::MissingArgument,
        ClapKind::InvalidValue
        | ClapKind::ValueValidation
        | ClapKind::NoEquals
        | ClapKind::TooManyValues
        | ClapKind::TooFewValues
        | ClapKind::WrongNumberOfValues
        | ClapKind::InvalidUtf8 => Code::InvalidValue,
        ClapKind::ArgumentConflict => Code::ConflictingArguments,
        _ => Code::InvalidArguments,
    };
    Some(Refusal::new(code, clap_text(error)))
}

/// What clap says first, without `error: ` and the usage after it; for a
/// refusal that is all usage (a missing subcommand), its first line.
fn clap_text(error: &clap::Error) -> String {
    let rendered = error.render().to_string();
    let first = rendered.split("\n\n").next().unwrap_or_default().trim();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    first.to_string()
}

/// True when a refusal of `command` under `format` is also the error
/// document on stdout: with `--format json`, for every command but `mcp`
/// (whose stdout carries only the protocol).
pub(crate) fn documented(format: Format, command: &Command) -> bool {
    format == Format::Json && !matches!(command, Command::Mcp { .. })
}

/// True when a command line (`raw`, the program's name first) gives
/// `--format json` before any `--` (what follows `--` is `hold`'s command),
/// to a command other than `mcp` (whose stdout carries only the protocol).
/// For a command line clap refused: one it parsed says its format itself.
pub(crate) fn asks_for_json(raw: &[OsString]) -> bool {
    let command = Cli::command();
    // A global flag that takes a value: the word after it is that value.
    let takes_value = |word: &str| {
        command.get_arguments().any(|a| {
            a.get_action().takes_values()
                && (a.get_long().is_some_and(|l| word == format!("--{l}"))
                    || a.get_short().is_some_and(|s| word == format!("-{s}")))
        })
    };
    let (mut json, mut subcommand) = (false, None);
    let mut words = raw.iter().skip(1).map(|w| w.to_string_lossy());
    while let Some(word) = words.next() {
        if word == "--" {
            break;
        }
        if word == "--format" {
            json = words.next().is_some_and(|v| v == "json");
        } else if let Some(value) = word.strip_prefix("--format=") {
            json = value == "json";
        } else if subcommand.is_none() && !word.starts_with('-') {
            subcommand = Some(word.into_owned());
        } else if subcommand.is_none() && takes_value(&word) {
            words.next();
        }
    }
    json && subcommand.as_deref() != Some("mcp")
}

/// The code of a state file's problem: its kind.
fn state_code(kind: &StateErrorKind) -> Code {
    use StateErrorKind as K;
    match kind {
        K::NotFound => Code::NotFound,
        K::NotAFile { .. } => Code::NotAFile,
        K::Read(_) => Code::Unreadable,
        K::TooLarge { .. } => Code::TooLarge,
        K::InvalidUtf8 { .. } => Code::InvalidUtf8,
        K::TooDeep { .. } => Code::TooDeep,
        K::TooManyKeyDots { .. } => Code::TooManyKeyDots,
        K::Syntax { .. } => Code::Syntax,
        K::UnknownKey { .. } => Code::UnknownKey,
        K::WrongType { .. } => Code::WrongType,
        K::MissingKey { .. } => Code::MissingKey,
        K::Conflict { .. } => Code::Conflict,
        K::DuplicateBox { .. } => Code::DuplicateBox,
        K::DuplicateKeep { .. } => Code::DuplicateKeep,
        K::DuplicateEngine { .. } => Code::DuplicateEngine,
        K::UnknownEngine { .. } => Code::UnknownEngine,
        K::InvalidBoxId { .. } => Code::InvalidBoxId,
        K::InvalidEngineName { .. } => Code::InvalidEngineName,
        K::InvalidVolumeName { .. } => Code::InvalidVolumeName,
        K::InvalidScopeLabel { .. } => Code::InvalidScopeLabel,
        K::InvalidHost { .. } => Code::InvalidHost,
        K::InvalidContext { .. } => Code::InvalidContext,
        K::InvalidDuration { .. } => Code::InvalidDuration,
        K::InvalidTime { .. } => Code::InvalidTime,
        K::InvalidNotifyUrl { .. } => Code::InvalidNotifyUrl,
        K::UnknownNotifyEvent { .. } => Code::UnknownNotifyEvent,
        K::InvalidSecretEnv { .. } => Code::InvalidSecretEnv,
    }
}

/// The code of a config that does not resolve.
fn config_code(e: &ConfigError) -> Code {
    match e {
        ConfigError::NoStateFile => Code::NoStateFile,
        ConfigError::UnknownEngine { .. } => Code::UnknownEngine,
        ConfigError::NoFleet { .. } => Code::NoFleet,
        ConfigError::FleetAndHost { .. } => Code::FleetAndHost,
        ConfigError::WatchNeedsGrace => Code::WatchNeedsGrace,
        ConfigError::TtlOverMax { .. } => Code::TtlOverMax,
        ConfigError::OneEngine { .. } => Code::OneEngine,
        ConfigError::ScopeConflict { .. } => Code::ScopeConflict,
        ConfigError::NotifySecretMissing { .. } => Code::NotifySecretMissing,
    }
}

/// The code of an engine that could not be chosen.
fn endpoint_code(e: &EndpointError) -> Code {
    match e {
        EndpointError::ContextAndHost { .. } => Code::ConflictingArguments,
        EndpointError::UnknownContext { .. } => Code::UnknownContext,
        EndpointError::Unreadable { .. }
        | EndpointError::BadFile { .. }
        | EndpointError::NoConfigDir { .. } => Code::DockerConfig,
        EndpointError::BadSshTarget { .. } => Code::InvalidHost,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn words(line: &str) -> Vec<OsString> {
        std::iter::once("sandboxctl")
            .chain(line.split_whitespace())
            .map(OsString::from)
            .collect()
    }

    #[test]
    fn json_is_asked_before_any_double_dash_and_never_of_mcp() {
        for asked in [
            "--format json plan",
            "plan --format json",
            "--format=json apply --bogus",
            "--state x.toml destroy a --format json",
            "hold b --format json -- sh -c true",
            "--state mcp plan --format json",
        ] {
            assert!(asks_for_json(&words(asked)), "{asked}");
        }
        for not in [
            "plan",
            "plan --format human",
            "--format json mcp",
            "mcp --format=json --bogus",
            "hold b -- prog --format json",
            "--format",
            "--format=jsonx plan",
        ] {
            assert!(!asks_for_json(&words(not)), "{not}");
        }
    }

    #[test]
    fn clap_refusals_take_their_first_paragraph_and_a_code() {
        let refused = |line: &str| {
            let e = Cli::try_parse_from(words(line)).expect_err(line);
            of_clap(&e).unwrap_or_else(|| panic!("{line}: no refusal"))
        };
        let r = refused("plan --timeout soon");
        assert_eq!(r.code, Code::InvalidValue);
        assert!(
            r.text
                .starts_with("invalid value 'soon' for '--timeout <DURATION>'"),
            "{}",
            r.text
        );
        assert!(!r.text.contains("\n\n"), "{}", r.text);
        assert_eq!(refused("plan --bogus").code, Code::UnknownArgument);
        assert_eq!(refused("frobnicate").code, Code::UnknownArgument);
        assert_eq!(refused("hold b").code, Code::MissingArgument);
        assert_eq!(refused("--format json").code, Code::MissingArgument);
        assert_eq!(
            refused("destroy --prune --keep-volume").code,
            Code::ConflictingArguments
        );
        let help = Cli::try_parse_from(words("plan --help")).unwrap_err();
        assert_eq!(of_clap(&help), None, "help is no refusal");
    }
}
