//! The rules for single values, shared by the state file and the command
//! line: box ids and engine names ([`check_box_id`]), volume names
//! ([`check_volume_name`]), scope labels ([`check_label`],
//! [`parse_label_arg`] for `--scope KEY=VALUE`), engine hosts and docker
//! context names, durations ([`parse_duration`]) and times ([`parse_time`]).
//!
//! Owns those limits and what a refusal says: a sentence that ends with what
//! to do. Pure functions of one value: must not know where the value came
//! from (schema.rs adds the key and position) and must not touch a file.

use std::time::{Duration, SystemTime};

use crate::model::duration::{self, Bare};
use crate::model::{SANDBOX_LABEL, SANDBOX_VALUE};
use crate::text::is_hidden;

use super::show::{clean_message, CharText, Shown};

/// The longest box id (and engine name), in characters.
pub(crate) const MAX_BOX_ID_CHARS: usize = 128;
/// The longest volume name in `[volumes].keep`, in characters.
pub(crate) const MAX_VOLUME_NAME_CHARS: usize = 255;
/// The longest scope label key, in characters.
pub(crate) const MAX_LABEL_KEY_CHARS: usize = 128;
/// The longest scope label value, in characters.
pub(crate) const MAX_LABEL_VALUE_CHARS: usize = 256;
/// The longest engine `host` URL, in characters.
pub(crate) const MAX_HOST_CHARS: usize = 1024;
/// The longest docker context name, in characters.
pub(crate) const MAX_CONTEXT_CHARS: usize = 128;
pub(super) const DURATION_HINT: &str = crate::model::duration::HINT;
pub(super) const TIME_HINT: &str = "write an RFC 3339 time in UTC, e.g. \"2026-12-24T18:00:00Z\"";

const HOST_SCHEMES: &[&str] = &["unix", "tcp", "http", "https", "ssh"];

/// Checks a scope label from the file or from `--scope`: returns what is wrong with it
/// (a sentence that ends with what to do).
pub fn check_label(key: &str, value: &str) -> Result<(), String> {
    label_key_problem(key).map_or(Ok(()), Err)?;
    label_value_problem(value).map_or(Ok(()), Err)
}

/// Splits a `--scope KEY=VALUE` argument at its first `=` and checks both halves
/// with [`check_label`].
pub(crate) fn parse_label_arg(arg: &str) -> Result<(String, String), String> {
    let Some((key, value)) = arg.split_once('=') else {
        return Err(format!(
            "{} has no '='; write KEY=VALUE, e.g. ca.sandbox.owner=team-a",
            Shown(arg)
        ));
    };
    check_label(key, value)?;
    Ok((key.to_string(), value.to_string()))
}

/// Checks a box id (`[A-Za-z0-9][A-Za-z0-9_.-]*`, at most `MAX_BOX_ID_CHARS`
/// (128) characters): returns what is wrong with it. Engine names follow the same rules.
pub fn check_box_id(id: &str) -> Result<(), String> {
    name_problem(id, MAX_BOX_ID_CHARS).map_or(Ok(()), Err)
}

/// Checks a Docker volume name (`[a-zA-Z0-9][a-zA-Z0-9_.-]*`, at most
/// `MAX_VOLUME_NAME_CHARS` (255) characters): returns what is wrong with it.
pub fn check_volume_name(name: &str) -> Result<(), String> {
    name_problem(name, MAX_VOLUME_NAME_CHARS).map_or(Ok(()), Err)
}

/// Parses a duration of the state file by the one grammar
/// (`model::duration`: `30s`, `10m`, `8h`, `2d`, `1h30m`, a unit required),
/// from 0 to 3650 days. The error is a predicate of the value that ends with
/// what a good value looks like ("is not a duration: use 30s, 10m, 8h or
/// 2d"); the caller names the value.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    duration::parse(s, Bare::Refused).map_err(|e| e.to_string())
}

/// Parses a duration given on the command line (a flag, the MCP `lease`
/// tool's `ttl`): the state file's grammar, and a bare whole number is
/// seconds. The error names the value, quoted and escaped: "\"soon\" is
/// not a duration: use 30s, 10m, 8h or 2d".
pub(crate) fn parse_flag_duration(s: &str) -> Result<Duration, String> {
    duration::parse(s, Bare::Seconds).map_err(|e| format!("{} {e}", Shown(s)))
}

/// Parses an RFC 3339 time in UTC, such as `2026-12-24T18:00:00Z` (fractional
/// seconds allowed; `+00:00` for `Z` too). The error is a sentence that ends
/// with what a good value looks like.
pub(crate) fn parse_time(s: &str) -> Result<SystemTime, String> {
    if s.is_empty() {
        return Err(format!("it is empty; {TIME_HINT}"));
    }
    humantime::parse_rfc3339(s).map_err(|e| {
        // A date and time of day that is not UTC: say so rather than "invalid format".
        let not_utc = s.len() >= 19
            && s.as_bytes().get(10) == Some(&b'T')
            && !s.ends_with('Z')
            && !s.ends_with("+00:00");
        if not_utc {
            format!("only UTC times are accepted: end it with Z (or +00:00); {TIME_HINT}")
        } else {
            format!("{}; {TIME_HINT}", clean_message(&e.to_string()))
        }
    })
}

/// What is wrong with a one-word value (a host, a context, a name): empty,
/// longer than `max` characters, a hidden character, whitespace.
fn word_problem(word: &str, max: usize) -> Option<String> {
    if word.is_empty() {
        return Some("it is empty".into());
    }
    let len = word.chars().count();
    if len > max {
        return Some(format!("it is {len} characters long (the limit is {max})"));
    }
    if let Some(c) = word.chars().find(|&c| is_hidden(c)) {
        return Some(format!(
            "it contains the {} {}",
            hidden_kind(c),
            CharText(c)
        ));
    }
    if word.chars().any(char::is_whitespace) {
        return Some("it contains whitespace".into());
    }
    None
}

/// What is wrong with an engine `host` URL; for `ssh://`, also its user and
/// host as ssh would receive them ([`crate::model::ssh_target_problem`]).
pub(super) fn host_problem(host: &str) -> Option<String> {
    if let Some(problem) = word_problem(host, MAX_HOST_CHARS) {
        return Some(problem);
    }
    let url = match url::Url::parse(host) {
        Ok(url) => url,
        Err(e) => return Some(format!("it is not a URL ({e})")),
    };
    let scheme = url.scheme();
    if !HOST_SCHEMES.contains(&scheme) {
        return Some(format!(
            "its scheme {} is not one of unix, tcp, http, https, ssh",
            Shown(scheme)
        ));
    }
    if scheme == "unix" {
        if url.path().is_empty() || url.path() == "/" {
            return Some("it names no socket path (write unix:///path/to/docker.sock)".into());
        }
    } else if url.host_str().is_none_or(str::is_empty) {
        return Some("it names no host".into());
    }
    // A user or host that ssh would misread (`-oProxyCommand=...`, `%0a`).
    crate::model::ssh_target_problem(host)
}

/// What is wrong with a `[[notify]]` `url`: `https://` to any host, or
/// `http://` only to a loopback address written as one (`127.0.0.0/8`,
/// `[::1]`: a name such as `localhost` is resolved by whatever the
/// machine's resolver says, so it is refused, as is any other host), no
/// user or password in it (URLs are named in messages and logs), at most
/// `MAX_HOST_CHARS` characters.
pub(super) fn notify_url_problem(text: &str) -> Option<String> {
    if let Some(problem) = word_problem(text, MAX_HOST_CHARS) {
        return Some(problem);
    }
    let url = match url::Url::parse(text) {
        Ok(url) => url,
        Err(e) => return Some(format!("it is not a URL ({e})")),
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Some(
            "it carries a user or password, which would be shown wherever the URL is named; \
             the receiver authenticates the body by its signature"
                .into(),
        );
    }
    let loopback = match url.host() {
        None => return Some("it names no host".into()),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(_)) => false,
    };
    match url.scheme() {
        "https" => None,
        "http" if loopback => None,
        "http" => Some(
            "plain http is allowed only to a loopback address (127.0.0.1 or [::1]), so that \
             nothing on the network reads or changes a notification: use https://"
                .into(),
        ),
        other => Some(format!("its scheme {} is not https or http", Shown(other))),
    }
}

/// What is wrong with a `secret_env` name: an environment variable's name,
/// `[A-Za-z_][A-Za-z0-9_]*`, at most 128 characters.
pub(super) fn env_name_problem(name: &str) -> Option<String> {
    let mut chars = name.chars();
    match chars.next() {
        None => return Some("it is empty".into()),
        Some(c) if !(c.is_ascii_alphabetic() || c == '_') => {
            return Some("it does not begin with a letter or _".into())
        }
        _ => {}
    }
    if name.chars().count() > MAX_BOX_ID_CHARS {
        return Some(format!("it is longer than {MAX_BOX_ID_CHARS} characters"));
    }
    (!chars.all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .then(|| "it holds a character other than A-Z, a-z, 0-9 and _".into())
}

/// What is wrong with a docker context name (`[a-zA-Z0-9][a-zA-Z0-9_.+-]+`).
pub(super) fn context_problem(name: &str) -> Option<String> {
    if let Some(problem) = word_problem(name, MAX_CONTEXT_CHARS) {
        return Some(problem);
    }
    if let Some(c) = name
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '+' | '-')))
    {
        return Some(format!("it contains {}, which is not allowed", CharText(c)));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Some("it must start with a letter or digit".into());
    }
    if name.chars().count() < 2 {
        return Some("it is shorter than 2 characters".into());
    }
    None
}

/// Box ids and volume names: `[A-Za-z0-9][A-Za-z0-9_.-]*`, at most `max` characters.
pub(super) fn name_problem(name: &str, max: usize) -> Option<String> {
    if let Some(problem) = word_problem(name, max) {
        return Some(problem);
    }
    if let Some(c) = name.chars().find(|&c| c == '/' || c == '\\') {
        return Some(format!("it contains the path separator {}", CharText(c)));
    }
    if name == "." || name == ".." {
        return Some("it is a path component".into());
    }
    if let Some(c) = name
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Some(format!("it contains {}, which is not allowed", CharText(c)));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Some("it must start with a letter or digit".into());
    }
    None
}

pub(super) fn label_key_problem(key: &str) -> Option<String> {
    if key.is_empty() {
        return Some("label key is empty; give a key such as \"ca.sandbox.owner\"".into());
    }
    if key == SANDBOX_LABEL {
        return Some(format!(
            "label key \"{SANDBOX_LABEL}\" is reserved: sandboxctl always requires \
             {SANDBOX_LABEL}={SANDBOX_VALUE} itself; remove it"
        ));
    }
    let len = key.chars().count();
    if len > MAX_LABEL_KEY_CHARS {
        return Some(format!(
            "label key is {len} characters long (the limit is {MAX_LABEL_KEY_CHARS}); shorten it"
        ));
    }
    if let Some(c) = key.chars().find(|&c| is_hidden(c)) {
        return Some(format!(
            "label key contains the {} {}; remove it",
            hidden_kind(c),
            CharText(c)
        ));
    }
    if key.contains('=') {
        return Some("label key contains '=', which separates key from value; remove it".into());
    }
    if key.chars().any(char::is_whitespace) {
        return Some("label key contains whitespace; remove it".into());
    }
    if let Some(c) = key
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-')))
    {
        return Some(format!(
            "label key contains {}; label keys may contain only letters, digits, \
             '.', '_', '/' and '-'",
            CharText(c)
        ));
    }
    let alnum = |c: char| c.is_ascii_alphanumeric();
    if !key.starts_with(alnum) || !key.ends_with(alnum) {
        return Some("label key must start and end with a letter or digit; fix it".into());
    }
    None
}

pub(super) fn label_value_problem(value: &str) -> Option<String> {
    if value.is_empty() {
        return Some(
            "label value is empty (often an unset shell variable); give the exact value the \
             objects carry"
                .into(),
        );
    }
    let len = value.chars().count();
    if len > MAX_LABEL_VALUE_CHARS {
        return Some(format!(
            "label value is {len} characters long (the limit is {MAX_LABEL_VALUE_CHARS}); \
             shorten it"
        ));
    }
    if let Some(c) = value.chars().find(|&c| is_hidden(c)) {
        return Some(format!(
            "label value contains the {} {}; remove it",
            hidden_kind(c),
            CharText(c)
        ));
    }
    if value.starts_with(char::is_whitespace) || value.ends_with(char::is_whitespace) {
        return Some("label value has leading or trailing whitespace; remove it".into());
    }
    None
}

fn hidden_kind(c: char) -> &'static str {
    if c.is_control() {
        "control character"
    } else {
        "invisible character"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testing::{err, parse};

    #[test]
    fn box_id_rules() {
        for ok in ["a", "A", "0", "explore-ripgrep", "a.b_c-d", "a..b"] {
            check_box_id(ok).unwrap();
        }
        check_box_id(&"a".repeat(MAX_BOX_ID_CHARS)).unwrap();
        for (bad, why) in [
            ("", "empty"),
            ("a\u{7}", "control character '\\u{7}'"),
            ("a\u{202e}b", "invisible character '\\u{202e}'"),
            ("a b", "whitespace"),
            ("a\tb", "control character '\\t'"),
            ("a/b", "path separator '/'"),
            ("a\\b", "path separator '\\'"),
            ("..", "path component"),
            (".", "path component"),
            ("-rf", "start with a letter or digit"),
            ("_a", "start with a letter or digit"),
            ("a:b", "':', which is not allowed"),
            ("é", "'é', which is not allowed"),
        ] {
            let e = check_box_id(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        assert!(check_box_id(&"a".repeat(MAX_BOX_ID_CHARS + 1))
            .unwrap_err()
            .contains("129 characters long"));
    }

    #[test]
    fn volume_name_rules() {
        check_volume_name("ca-sbx-notes").unwrap();
        check_volume_name(&"f".repeat(64)).unwrap();
        check_volume_name(&"v".repeat(MAX_VOLUME_NAME_CHARS)).unwrap();
        for bad in ["", "../x", "a b", ".hidden", "a:rw", "a\nb"] {
            assert!(check_volume_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_volume_name(&"v".repeat(MAX_VOLUME_NAME_CHARS + 1)).is_err());
    }

    #[test]
    fn label_rules() {
        for (k, v) in [
            ("ca.sandbox.owner", "team-a"),
            ("owner", "x"),
            ("io.example/team_1", "Ünïcode value with spaces"),
            ("ca.sandbox.id", "box"),
            ("a", "a=b"),
        ] {
            check_label(k, v).unwrap();
        }
        for (k, v, why) in [
            ("", "x", "label key is empty"),
            ("ca.sandbox", "1", "reserved"),
            ("a=b", "x", "contains '='"),
            ("a\u{1b}", "x", "control character '\\u{1b}'"),
            ("a b", "x", "whitespace"),
            ("é", "x", "contains 'é'"),
            ("a:b", "x", "contains ':'"),
            (".a", "x", "start and end with a letter or digit"),
            ("a-", "x", "start and end with a letter or digit"),
            ("a", "", "label value is empty"),
            ("a", "x\ny", "control character '\\n'"),
            ("a", "x\u{200b}", "invisible character '\\u{200b}'"),
            ("a", " x", "leading or trailing whitespace"),
        ] {
            let e = check_label(k, v).unwrap_err();
            assert!(e.contains(why), "{k:?}={v:?}: {e}");
        }
        assert!(check_label(&"k".repeat(MAX_LABEL_KEY_CHARS + 1), "v").is_err());
        assert!(check_label("k", &"v".repeat(MAX_LABEL_VALUE_CHARS + 1)).is_err());
        check_label(
            &"k".repeat(MAX_LABEL_KEY_CHARS),
            &"v".repeat(MAX_LABEL_VALUE_CHARS),
        )
        .unwrap();
    }

    #[test]
    fn duration_rules_and_boundaries() {
        let ok = |s: &str| parse_duration(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
        assert_eq!(ok("0s"), Duration::ZERO);
        assert_eq!(ok("30s"), Duration::from_secs(30));
        assert_eq!(ok("10m"), Duration::from_secs(600));
        assert_eq!(ok("8h"), Duration::from_secs(8 * 3600));
        assert_eq!(ok("2d"), Duration::from_secs(2 * 86_400));
        assert_eq!(ok("1h30m"), Duration::from_secs(5400));
        assert_eq!(ok("3650d"), crate::model::duration::MAX_DURATION);
        for (bad, why) in [
            ("", "is empty"),
            (" 10m", "no spaces"),
            ("10m ", "no spaces"),
            ("1h 30m", "no spaces"),
            ("10", "a number needs its unit"),
            ("-1s", "is not a duration"),
            ("soon", "is not a duration"),
            ("1ns", "ns is not a unit"),
            ("1ms", "ms is not a unit"),
            ("1y", "y is not a unit"),
            ("1.5h", "whole numbers only"),
            ("10 fortnights", "no spaces"),
            ("3651d", "longer than the limit of 3650 days"),
            ("3650d1s", "longer than the limit of 3650 days"),
            ("99999999999999999999s", "longer than the limit"),
        ] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
            assert!(e.ends_with(": use 30s, 10m, 8h or 2d"), "{bad:?}: {e}");
        }
        // On the command line a bare number is seconds; the value is named.
        assert_eq!(parse_flag_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_flag_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(
            parse_flag_duration("soon").unwrap_err(),
            "\"soon\" is not a duration: use 30s, 10m, 8h or 2d"
        );
        assert_eq!(
            parse_flag_duration("\u{1b}[2J").unwrap_err(),
            "\"\\u{1b}[2J\" is not a duration: use 30s, 10m, 8h or 2d"
        );
        // A zero ttl is refused in the file (grace 0 is fine).
        assert!(err("[[box]]\nid = \"a\"\nttl = \"0s\"\n")
            .contains("is zero, which would expire the box at once"));
        assert_eq!(
            parse("[policy]\ngrace = \"0s\"\n").unwrap().policy.grace,
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn time_rules_and_boundaries() {
        let secs = |s: &str| {
            parse_time(s)
                .unwrap_or_else(|e| panic!("{s:?}: {e}"))
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
        };
        assert_eq!(secs("1970-01-01T00:00:00Z"), Duration::ZERO);
        assert_eq!(
            secs("2026-12-24T18:00:00Z"),
            Duration::from_secs(1_798_135_200)
        );
        assert_eq!(
            secs("2026-12-24T18:00:00+00:00"),
            Duration::from_secs(1_798_135_200)
        );
        assert_eq!(
            secs("2026-12-24T18:00:00.5Z"),
            Duration::from_millis(1_798_135_200_500)
        );
        assert_eq!(
            secs("2028-02-29T00:00:00Z"),
            Duration::from_secs(1_835_395_200)
        );
        assert_eq!(
            secs("9999-12-31T23:59:59Z"),
            Duration::from_secs(253_402_300_799)
        );
        for (bad, why) in [
            ("", "it is empty"),
            ("2026-12-24T18:00:00+01:00", "only UTC times are accepted"),
            ("2026-12-24T18:00:00", "only UTC times are accepted"),
            ("2026-02-29T00:00:00Z", "out of range"),
            ("2026-12-24T24:00:00Z", "out of range"),
            ("2026-13-01T00:00:00Z", "out of range"),
            ("1969-12-31T23:59:59Z", "out of range"),
            ("2026-12-24 18:00:00Z", "format is invalid"),
            ("2026-12-24", "format is invalid"),
            ("tomorrow", "format is invalid"),
        ] {
            let e = parse_time(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
            assert!(e.ends_with("\"2026-12-24T18:00:00Z\""), "{bad:?}: {e}");
        }
    }

    #[test]
    fn engine_host_and_context_rules() {
        for ok in [
            "unix:///var/run/docker.sock",
            "tcp://ci-1:2376",
            "tcp://127.0.0.1:2375",
            "http://ci-1:2375",
            "https://ci-1:2376",
            "ssh://runner@ci-1",
            "ssh://runner@ci-1:2222",
        ] {
            assert_eq!(host_problem(ok), None, "{ok}");
        }
        for (bad, why) in [
            ("", "empty"),
            ("ci-1:2376", "scheme \"ci-1\""),
            ("npipe:////./pipe/docker_engine", "scheme \"npipe\""),
            ("/var/run/docker.sock", "not a URL"),
            ("unix://", "no socket path"),
            ("tcp://", "no host"),
            ("ssh://runner@", "not a URL"),
            ("tcp://ci 1", "whitespace"),
            ("tcp://ci-1\u{202e}", "invisible character"),
            ("ssh://-oProxyCommand=x@ci-1", "user begins with '-'"),
            (
                "ssh://%2DoProxyCommand=x@ci-1",
                "user begins with '-' once percent-decoded",
            ),
            ("ssh://runner@-oProxyCommand=x", "host begins with '-'"),
            (
                "ssh://runner@ci-1%0a",
                "host contains the control character '\\u{a}'",
            ),
            (
                "ssh://run%0Aner@ci-1",
                "user contains the control character '\\u{a}'",
            ),
            ("ssh://runner@ci-1\n", "control character"),
        ] {
            let e = host_problem(bad).unwrap_or_else(|| panic!("{bad:?} accepted"));
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        assert!(host_problem(&format!("tcp://{}", "h".repeat(MAX_HOST_CHARS))).is_some());
        for ok in ["colima", "desktop-linux", "a.b+c_d", "default", "c2"] {
            assert_eq!(context_problem(ok), None, "{ok}");
        }
        for bad in ["", "c", "-x", "a/b", "a b", "a:b", "é1"] {
            assert!(context_problem(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn label_args_split_at_the_first_equals() {
        assert_eq!(
            parse_label_arg("owner=a=b").unwrap(),
            ("owner".to_string(), "a=b".to_string())
        );
        assert!(parse_label_arg("owner").unwrap_err().contains("no '='"));
        assert!(parse_label_arg("=x")
            .unwrap_err()
            .contains("label key is empty"));
        assert!(parse_label_arg("owner=")
            .unwrap_err()
            .contains("unset shell variable"));
    }
}
