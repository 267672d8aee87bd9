//! The one rule for the user and host of an `ssh://` engine address, shared
//! by the state file's checks (`validate`), every engine resolution and the
//! ssh transport. ssh receives them as words of its command line and the
//! hints print them for a shell, so neither may begin with `-` (ssh would
//! take `-oProxyCommand=...` for an option) nor hold a control character,
//! written plainly or percent-encoded (`%2D`, `%0A`). Pure: a function of the
//! text, which it never repeats (the caller quotes it, escaped).

/// What is wrong with the user or host of `address` when it is an `ssh://`
/// URL (the scheme in any case): a clause such as `its ssh user begins with
/// '-' ...`, without the value. `None` when both are acceptable, and for
/// any other address or text that is no URL (other checks say why).
pub(crate) fn ssh_target_problem(address: &str) -> Option<String> {
    // The scheme as a URL parser reads it: leading C0 controls and spaces
    // trimmed, tabs and line breaks dropped (`s\nsh://` is `ssh://` to it).
    let scheme: String = address
        .trim_start_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .take(6)
        .collect();
    let ssh = scheme.eq_ignore_ascii_case("ssh://");
    if !ssh {
        return None;
    }
    // A URL parser drops tabs and line breaks without a word: judge the
    // text as written first.
    if let Some(c) = address.chars().find(|c| c.is_control()) {
        return Some(format!(
            "it contains the control character {}",
            char_text(c)
        ));
    }
    let url = url::Url::parse(address).ok()?;
    part_problem("user", url.username()).or_else(|| part_problem("host", url.host_str()?))
}

/// The rule for one part, as the URL holds it (percent-encoded or not).
fn part_problem(part: &str, raw: &str) -> Option<String> {
    let bytes: Vec<u8> = percent_encoding::percent_decode_str(raw).collect();
    let decoded = String::from_utf8_lossy(&bytes);
    if decoded.starts_with('-') {
        let how = if raw.starts_with('-') {
            ""
        } else {
            " once percent-decoded"
        };
        return Some(format!(
            "its ssh {part} begins with '-'{how}, which ssh would take for an option"
        ));
    }
    // The address holds no control character as written: any is encoded.
    decoded.chars().find(|c| c.is_control()).map(|c| {
        format!(
            "its ssh {part} contains the control character {} once percent-decoded",
            char_text(c)
        )
    })
}

/// `'\u{a}'`: a control character shown, never written.
fn char_text(c: char) -> String {
    format!("'\\u{{{:x}}}'", u32::from(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_and_hosts_that_ssh_would_misread_are_refused() {
        for ok in [
            "ssh://runner@ci-1",
            "ssh://root@10.0.0.5:2222",
            "ssh://ci-1/",
            "ssh://me%40corp@[::1]:22",
            "ssh://a-b@c-d",
            "SSH://runner@ci-1",
            // Not ssh, or not a URL: other checks judge these.
            "tcp://-h:2375",
            "ssh",
            "ssh://",
        ] {
            assert_eq!(ssh_target_problem(ok), None, "{ok}");
        }
        let refused: Vec<String> = [
            "ssh://-oProxyCommand=x@host",
            "ssh://%2DoProxyCommand=x@host",
            "ssh://%2doProxyCommand=x@host:22",
            "ssh://-oProxyCommand=x",
            "ssh://u@%2DoProxyCommand=x",
            "ssh://u@host%0a",
            "ssh://u%0d@host",
            "ssh://u%1b[2J@host",
            "ssh://u@ho\nst",
            "ssh://u\t@host",
        ]
        .iter()
        .map(|a| {
            let why = ssh_target_problem(a).unwrap_or_else(|| panic!("{a:?} accepted"));
            format!("{a:?}: {why}")
        })
        .collect();
        insta::assert_snapshot!(refused.join("\n"), @r#"
        "ssh://-oProxyCommand=x@host": its ssh user begins with '-', which ssh would take for an option
        "ssh://%2DoProxyCommand=x@host": its ssh user begins with '-' once percent-decoded, which ssh would take for an option
        "ssh://%2doProxyCommand=x@host:22": its ssh user begins with '-' once percent-decoded, which ssh would take for an option
        "ssh://-oProxyCommand=x": its ssh host begins with '-', which ssh would take for an option
        "ssh://u@%2DoProxyCommand=x": its ssh host begins with '-' once percent-decoded, which ssh would take for an option
        "ssh://u@host%0a": its ssh host contains the control character '\u{a}' once percent-decoded
        "ssh://u%0d@host": its ssh user contains the control character '\u{d}' once percent-decoded
        "ssh://u%1b[2J@host": its ssh user contains the control character '\u{1b}' once percent-decoded
        "ssh://u@ho\nst": it contains the control character '\u{a}'
        "ssh://u\t@host": it contains the control character '\u{9}'
        "#);
    }
}
