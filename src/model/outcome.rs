//! What happened to one removal step: the one `Outcome` that apply returns,
//! observers hear of, the report keeps for what is gone, the audit log
//! records and the metrics count.
//!
//! Owns its stable code (`removed`, `alreadyGone`, `failed`, and for steps
//! never attempted `skipped`, `interrupted`), which is its JSON and its metric
//! label, and its words (`Display`), raw: escaping is `render`'s job.

use std::fmt;

use serde::{Serialize, Serializer};

use crate::model::{short_id, EngineError, ErrorKind};

/// What happened to one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The engine removed it.
    Removed,
    /// It was already gone (404), or another actor removed it while we waited.
    AlreadyGone,
    /// The engine refused or the call failed; the object may still be there.
    Failed(EngineError),
    /// Another actor's removal did not finish within the wait.
    GaveUpWaiting { seconds: u64 },
    /// Left alone on purpose: the object changed since it was listed.
    Refused(String),
    /// A volume left in place because its archive could not be written (why).
    ArchiveFailed(String),
    /// Not attempted because the step it waits for (by number) did not succeed.
    Skipped(usize),
    /// Not attempted because the run was interrupted.
    Interrupted,
}

impl Outcome {
    /// The codes of an attempted removal, as the audit log writes them and
    /// the metrics label them.
    pub(crate) const ATTEMPTED: [&'static str; 4] =
        ["removed", "alreadyGone", "failed", "archiveFailed"];

    /// The codes of an object that is gone, as the report's `removed` lists it.
    pub(crate) const GONE: [&'static str; 2] = ["removed", "alreadyGone"];

    /// True when the object is gone.
    pub fn is_success(&self) -> bool {
        matches!(self, Outcome::Removed | Outcome::AlreadyGone)
    }

    /// True when a removal was attempted (everything but `Skipped` and `Interrupted`).
    pub(crate) fn attempted(&self) -> bool {
        !matches!(self, Outcome::Skipped(_) | Outcome::Interrupted)
    }

    /// The stable code: `removed`, `alreadyGone`, `failed` (failed, gave up
    /// waiting, refused), `archiveFailed`, `skipped` or `interrupted`.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Outcome::Removed => "removed",
            Outcome::AlreadyGone => "alreadyGone",
            Outcome::Failed(_) | Outcome::GaveUpWaiting { .. } | Outcome::Refused(_) => "failed",
            Outcome::ArchiveFailed(_) => "archiveFailed",
            Outcome::Skipped(_) => "skipped",
            Outcome::Interrupted => "interrupted",
        }
    }
}

impl fmt::Display for Outcome {
    /// The outcome in words; for a failed step, what the report's `error` says.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Removed => f.write_str("removed"),
            Outcome::AlreadyGone => f.write_str("already gone"),
            Outcome::Failed(e) => match &e.kind {
                ErrorKind::InUse { holders, .. } if !holders.is_empty() => {
                    write!(f, "{e} (in use by container ")?;
                    for (i, h) in holders.iter().enumerate() {
                        if i > 0 {
                            f.write_str(", ")?;
                        }
                        f.write_str(short_id(h))?;
                    }
                    f.write_str("; never forced)")
                }
                _ => write!(f, "{e}"),
            },
            Outcome::GaveUpWaiting { seconds } => write!(
                f,
                "its removal was started by another actor and had not finished after {seconds}s"
            ),
            Outcome::Refused(detail) => f.write_str(detail),
            Outcome::ArchiveFailed(detail) => {
                write!(f, "not removed: its archive failed: {detail}")
            }
            Outcome::Skipped(after) => write!(f, "skipped (step {after} did not succeed)"),
            Outcome::Interrupted => f.write_str("not started (interrupted)"),
        }
    }
}

impl Serialize for Outcome {
    /// Its code (the words are in the report's `error` or the log's `error`).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.code())
    }
}

/// The schema of a string that is one of `codes`.
pub(crate) fn codes_schema(codes: &[&str], description: &str) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "enum": codes,
        "description": description,
    })
}

/// The schema of a removed object's outcome: one of [`Outcome::GONE`].
pub(crate) fn gone_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    codes_schema(
        &Outcome::GONE,
        "`removed`, or `alreadyGone` (another actor removed it first).",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_use(holders: &[&str]) -> Outcome {
        Outcome::Failed(EngineError::new(
            "remove volume v",
            ErrorKind::InUse {
                holders: holders.iter().map(|h| h.to_string()).collect(),
                message: "volume is in use".into(),
            },
        ))
    }

    #[test]
    fn codes_and_json() {
        let all = [
            Outcome::Removed,
            Outcome::AlreadyGone,
            in_use(&[]),
            Outcome::GaveUpWaiting { seconds: 30 },
            Outcome::Refused("changed".into()),
            Outcome::ArchiveFailed("disk full".into()),
            Outcome::Skipped(1),
            Outcome::Interrupted,
        ];
        let codes: Vec<String> = all
            .iter()
            .map(|o| serde_json::to_string(o).unwrap())
            .collect();
        assert_eq!(
            codes,
            [
                r#""removed""#,
                r#""alreadyGone""#,
                r#""failed""#,
                r#""failed""#,
                r#""failed""#,
                r#""archiveFailed""#,
                r#""skipped""#,
                r#""interrupted""#
            ]
        );
        let attempted: Vec<&str> = all
            .iter()
            .filter(|o| o.attempted())
            .map(Outcome::code)
            .collect();
        assert!(attempted.iter().all(|c| Outcome::ATTEMPTED.contains(c)));
        assert_eq!(attempted.len(), 6);
        let gone = all.iter().filter(|o| o.is_success()).map(Outcome::code);
        assert!(gone.into_iter().all(|c| Outcome::GONE.contains(&c)));
    }

    #[test]
    fn words_name_the_holders_by_short_id() {
        assert_eq!(
            in_use(&["0123456789abcdef", "fedcba9876543210"]).to_string(),
            "remove volume v: conflict: volume is in use (in use by container 0123456789ab, fedcba987654; never forced)"
        );
        assert_eq!(
            in_use(&[]).to_string(),
            "remove volume v: conflict: volume is in use"
        );
        assert_eq!(
            Outcome::Skipped(3).to_string(),
            "skipped (step 3 did not succeed)"
        );
    }
}
