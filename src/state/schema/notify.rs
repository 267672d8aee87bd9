//! The `[[notify]]` tables of the state file: each walked key by key into a
//! `NotifyDecl` (`url`, `secret_env`, `events`, `before`).
//!
//! Owns the table's keys and hints. Must not judge single values itself
//! (`rules.rs`: the url, the variable's name, durations) nor read the
//! variable: the key is resolved when a command starts (`cli::config`).

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use crate::model::notify::{NotifyEvent, DEFAULT_BEFORE};
use crate::state::error::StateErrorKind;
use crate::state::rules::{env_name_problem, notify_url_problem};
use crate::state::NotifyDecl;

use super::{At, Walker};

const NOTIFY_KEYS: &[&str] = &["url", "secret_env", "events", "before"];
const NOTIFY_HINT: &str = "each receiver is a table: [[notify]] url = \"https://...\", \
     secret_env = \"VARIABLE\", and optionally events = [\"removed\", \"failed\"], before = \"10m\"";
const EVENTS_HINT: &str =
    "write events = [\"expiring\", \"stopped\", \"removed\", \"failed\"] (any of them)";

impl Walker<'_> {
    pub(super) fn notifies(&mut self, value: &Spanned<DeValue<'_>>) -> Vec<NotifyDecl> {
        let hint = "declare receivers as [[notify]] tables (double brackets, one per receiver)";
        self.tables(
            value,
            hint,
            "a [[notify]] table",
            NOTIFY_HINT,
            Self::a_notify,
        )
        .into_iter()
        .flatten()
        .collect()
    }

    /// One `[[notify]]` table, at offset `at`: the receiver, or `None` when
    /// one of its keys is missing or refused (reported).
    fn a_notify(&mut self, table: &DeTable<'_>, at: usize) -> Option<NotifyDecl> {
        let (mut url, mut secret_env, mut before) = (None, None, Some(DEFAULT_BEFORE));
        let mut events = Some(NotifyEvent::ALL.to_vec());
        let mut line = self.line(at);
        for entry in self.known(table, NOTIFY_KEYS, "remove it or fix its spelling") {
            match entry.0.get_ref().as_ref() {
                "url" => {
                    let Some(text) = self.string(entry, "a URL string", NOTIFY_HINT) else {
                        url = Some(None);
                        continue;
                    };
                    line = self.line(text.key);
                    url = Some(self.judged(text, notify_url_problem, |url, reason| {
                        StateErrorKind::InvalidNotifyUrl { url, reason }
                    }));
                }
                "secret_env" => {
                    let hint = "write secret_env = \"SBX_NOTIFY_SECRET\": the variable that \
                                holds the key";
                    let Some(text) = self.string(entry, "a variable name string", hint) else {
                        secret_env = Some(None);
                        continue;
                    };
                    secret_env = Some(self.judged(text, env_name_problem, |name, reason| {
                        StateErrorKind::InvalidSecretEnv { name, reason }
                    }));
                }
                "events" => events = self.events(entry.1),
                _ => {
                    let hint = "write before = \"10m\"";
                    before = self
                        .string(entry, "a duration string", hint)
                        .and_then(|text| self.duration("before", &text));
                }
            }
        }
        let hint = "add url = \"https://...\" to this [[notify]] table";
        self.require(table, at, "url", hint);
        let hint = "add secret_env = \"SBX_NOTIFY_SECRET\" (the variable that holds the HMAC \
                    key) to this [[notify]] table";
        self.require(table, at, "secret_env", hint);
        Some(NotifyDecl {
            url: url.flatten()?,
            secret_env: secret_env.flatten()?,
            events: events?,
            before: before?,
            line,
        })
    }

    /// A string value judged by `rule`: the value, or `None` when the rule
    /// finds a problem, reported at the value as `refused(value, problem)`.
    fn judged(
        &mut self,
        text: At,
        rule: fn(&str) -> Option<String>,
        refused: fn(String, String) -> StateErrorKind,
    ) -> Option<String> {
        match rule(&text.value) {
            Some(problem) => {
                self.problem(text.at, refused(text.value, problem));
                None
            }
            None => Some(text.value),
        }
    }

    /// `events`: a non-empty list of event names, each known, kept in the
    /// order of `NotifyEvent` without repeats.
    fn events(&mut self, value: &Spanned<DeValue<'_>>) -> Option<Vec<NotifyEvent>> {
        let items = self.array(value, EVENTS_HINT)?;
        let mut events = Vec::new();
        let mut good = true;
        for item in items {
            let DeValue::String(name) = item.get_ref() else {
                self.wrong_type(item, "an event name string", EVENTS_HINT);
                good = false;
                continue;
            };
            match NotifyEvent::parse(name) {
                Some(event) => events.push(event),
                None => {
                    let kind = StateErrorKind::UnknownNotifyEvent {
                        event: name.to_string(),
                    };
                    self.problem(item.span().start, kind);
                    good = false;
                }
            }
        }
        if good && events.is_empty() {
            let kind = StateErrorKind::WrongType {
                found: "an empty sequence".into(),
                expected: "at least one event".into(),
                hint: "leave events out for all four, or remove this [[notify]] table".into(),
            };
            self.problem(value.span().start, kind);
            return None;
        }
        events.sort();
        events.dedup();
        good.then_some(events)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::model::notify::NotifyEvent;
    use crate::state::testing::{all, err, parse};

    #[test]
    fn a_receiver_with_defaults_and_one_with_everything() {
        let state = parse(
            "[[notify]]\nurl = \"http://127.0.0.1:9000/sbx\"\nsecret_env = \"SBX_SECRET\"\n\n\
             [[notify]]\nurl = \"https://hooks.example/x?a=1\"\nsecret_env = \"_K2\"\n\
             events = [\"failed\", \"removed\", \"failed\"]\nbefore = \"1h\"\n",
        )
        .unwrap();
        assert_eq!(state.notify.len(), 2);
        let (a, b) = (&state.notify[0], &state.notify[1]);
        assert_eq!((a.line, a.events.len()), (2, 4));
        assert_eq!(a.before, Duration::from_secs(600));
        assert_eq!(b.events, [NotifyEvent::Removed, NotifyEvent::Failed]);
        assert_eq!((b.before, b.line), (Duration::from_secs(3600), 6));
        assert!(parse("[[notify]]\nurl = \"http://[::1]:1/\"\nsecret_env = \"K\"\n").is_ok());
    }

    #[test]
    fn each_refusal_names_its_place() {
        let head = "[[notify]]\nsecret_env = \"K\"\n";
        let e = err(&format!("{head}url = \"http://10.1.2.3/x\"\n"));
        assert!(
            e.starts_with("s.toml:3:7: invalid notify url \"http://10.1.2.3/x\": plain http"),
            "{e}"
        );
        for url in ["http://localhost:9000/", "http://example.com/"] {
            assert!(err(&format!("{head}url = \"{url}\"\n")).contains("plain http"));
        }
        let e = err(&format!("{head}url = \"ftp://127.0.0.1/\"\n"));
        assert!(e.contains("scheme \"ftp\""), "{e}");
        let e = err(&format!("{head}url = \"https://u:p@h/\"\n"));
        assert!(e.contains("user or password"), "{e}");
        let url = "url = \"https://h/\"\n";
        let e = err(&format!("{head}{url}events = [\"removed\", \"deleted\"]\n"));
        assert!(
            e.starts_with("s.toml:4:22: unknown notify event \"deleted\""),
            "{e}"
        );
        let e = err(&format!("{head}{url}events = []\n"));
        assert!(
            e.starts_with("s.toml:4:10: invalid type: an empty sequence"),
            "{e}"
        );
        let e = err(&format!("{head}{url}before = \"soon\"\n"));
        assert!(
            e.starts_with("s.toml:4:10: before \"soon\" is not a duration"),
            "{e}"
        );
        assert_eq!(
            all(&format!("[[notify]]\n{url}")),
            [
                "s.toml:1:1: missing key `secret_env`; add secret_env = \"SBX_NOTIFY_SECRET\" \
              (the variable that holds the HMAC key) to this [[notify]] table"
            ]
        );
        let e = err(&format!("[[notify]]\n{url}secret_env = \"1BAD\"\n"));
        assert!(
            e.starts_with("s.toml:3:14: invalid secret_env \"1BAD\""),
            "{e}"
        );
        let e = err("[[notify]]\nsecret_env = \"K\"\n");
        assert!(e.starts_with("s.toml:1:1: missing key `url`"), "{e}");
    }
}
