//! The explain view (`explain`): per object, its labels, whether it is
//! managed (or the label rule that excludes it), the plan's verdict with the
//! reason's words, where the state file declares it, and the steps it comes
//! after and before. JSON: the explanations, with reason codes and exact text.

use std::fmt::Write as _;

use crate::model::{Exclusion, Labels};
use crate::plan::explain::{Explanation, Verdict};
use crate::render::table::{entry_label, CELL_CHARS, LAST_CELL_CHARS};
use crate::render::{document, Format};
use crate::text::{clip, escape};

/// Explanations in `format`.
pub(crate) fn explain(items: &[Explanation], format: Format) -> String {
    match format {
        Format::Json => explain_json(items),
        _ => explain_human(items),
    }
}

/// `k=v, k=v` (each cut and escaped), or `(none)`.
fn labels_text(labels: &Labels) -> String {
    if labels.is_empty() {
        return "(none)".into();
    }
    labels
        .iter()
        .map(|(k, v)| format!("{}={}", clip(k, CELL_CHARS), clip(v, CELL_CHARS)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The label rule that keeps an object out of the managed set, in words.
fn exclusion_text(e: &Exclusion) -> String {
    match e {
        Exclusion::NoSandboxLabel => "it has no ca.sandbox label".into(),
        Exclusion::SandboxValue { value } => format!(
            "its ca.sandbox label is {:?}, not exactly \"1\"",
            clip(value, CELL_CHARS)
        ),
        Exclusion::ScopeLabel {
            key,
            want,
            have: None,
        } => format!(
            "it lacks the scope label {}={}",
            clip(key, CELL_CHARS),
            clip(want, CELL_CHARS)
        ),
        Exclusion::ScopeLabel {
            key,
            want,
            have: Some(have),
        } => format!(
            "its scope label {} is {:?}, not {:?}",
            clip(key, CELL_CHARS),
            clip(have, CELL_CHARS),
            clip(want, CELL_CHARS)
        ),
    }
}

/// Explanations as a person reads them: one block per object, as a chain.
pub(crate) fn explain_human(items: &[Explanation]) -> String {
    let mut out = String::new();
    for (i, e) in items.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "{}", entry_label(&e.object));
        let _ = writeln!(out, "  engine:   {}", escape(&e.object.engine));
        let _ = writeln!(out, "  labels:   {}", labels_text(&e.labels));
        match &e.excluded_by {
            None => {
                let _ = writeln!(
                    out,
                    "  managed:  yes (labeled ca.sandbox=1 and every scope label)"
                );
            }
            Some(ex) => {
                let _ = writeln!(out, "  managed:  no: {}", exclusion_text(ex));
            }
        }
        let reason = e
            .reason
            .as_ref()
            .map(|r| clip(&r.to_string(), LAST_CELL_CHARS).into_owned())
            .unwrap_or_default();
        let verdict = match (e.verdict, e.step) {
            (Verdict::Remove, Some(step)) => format!("remove, step {step}: {reason}"),
            (Verdict::Remove, None) => format!("remove: {reason}"),
            (Verdict::Keep, _) => format!("keep: {reason}"),
            (Verdict::Blocked, _) => format!("blocked (never forced): {reason}"),
            (Verdict::Unmanaged, _) => "never touched: it is not managed".into(),
        };
        let _ = writeln!(out, "  plan:     {verdict}");
        if let Some(owner) = &e.owner {
            let _ = writeln!(
                out,
                "  owner:    {}",
                clip(&owner.to_string(), LAST_CELL_CHARS)
            );
        }
        if let Some(at) = &e.declared_at {
            let _ = writeln!(out, "  state:    {}", escape(at));
        }
        for l in &e.leases {
            let state = l.state.to_string();
            let _ = writeln!(
                out,
                "  lease:    volume {} (ttl {}): {}",
                clip(&l.volume, CELL_CHARS),
                clip(&l.ttl, CELL_CHARS),
                clip(&state, LAST_CELL_CHARS)
            );
        }
        for (order, links) in [("after:", &e.waits_for), ("before:", &e.waited_for_by)] {
            for l in links {
                let _ = writeln!(
                    out,
                    "  {order:<10}step {} {}",
                    l.step,
                    entry_label(&l.object)
                );
            }
        }
    }
    out
}

/// The explain JSON document (`explain.schema.json`).
#[derive(serde::Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct ExplainDoc<'a> {
    /// Every object the query names, engine after engine (each names its `engine`).
    explanations: &'a [Explanation],
}

/// Explanations as JSON, with the reason codes.
pub(crate) fn explain_json(items: &[Explanation]) -> String {
    document(ExplainDoc {
        explanations: items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Kind, Reason};
    use crate::plan::explain::Link;
    use crate::render::fixtures::{entry, EVIL_BOX, EVIL_NAME};

    fn removed_volume() -> Explanation {
        Explanation {
            object: entry(Kind::Volume, "data-a", None, Some("a")),
            labels: [
                ("ca.sandbox".to_string(), "1".to_string()),
                ("ca.sandbox.id".to_string(), "a".to_string()),
            ]
            .into(),
            managed: true,
            excluded_by: None,
            verdict: Verdict::Remove,
            step: Some(2),
            reason: Some(Reason::BoxNotDeclared { box_id: "a".into() }),
            owner: None,
            declared_at: None,
            waits_for: vec![Link {
                step: 1,
                object: entry(
                    Kind::Container,
                    "sbx-a",
                    Some("c0ffee0000010000"),
                    Some("a"),
                ),
            }],
            waited_for_by: vec![],
            leases: vec![],
        }
    }

    fn look_alike() -> Explanation {
        Explanation {
            object: entry(
                Kind::Container,
                EVIL_NAME,
                Some("c0ffee0000020000"),
                Some(EVIL_BOX),
            ),
            labels: [
                ("ca.sandbox".to_string(), "1\u{1b}[8m".to_string()),
                ("ca.sandbox.id".to_string(), EVIL_BOX.to_string()),
            ]
            .into(),
            managed: false,
            excluded_by: Some(Exclusion::ScopeLabel {
                key: "owner".into(),
                want: "team-a".into(),
                have: None,
            }),
            verdict: Verdict::Unmanaged,
            step: None,
            reason: None,
            owner: None,
            declared_at: None,
            waits_for: vec![],
            waited_for_by: vec![],
            leases: vec![],
        }
    }

    #[test]
    fn one_block_per_object_as_a_chain() {
        insta::assert_snapshot!(explain_human(&[removed_volume()]), @r"
        volume data-a
          engine:   default
          labels:   ca.sandbox=1, ca.sandbox.id=a
          managed:  yes (labeled ca.sandbox=1 and every scope label)
          plan:     remove, step 2: leaked: box a is not declared
          after:    step 1 container sbx-a (c0ffee000001)
        ");
        let v: serde_json::Value =
            serde_json::from_str(&explain(&[removed_volume()], Format::Json)).unwrap();
        let v = &v["explanations"];
        assert_eq!(v[0]["reason"]["code"], "boxNotDeclared");
        assert_eq!(v[0]["reason"]["text"], "leaked: box a is not declared");
        assert_eq!(v[0]["waitsFor"][0]["step"], 1);
    }

    #[test]
    fn hostile_text_is_escaped_in_human_output_and_exact_in_json() {
        let human = explain_human(&[look_alike()]);
        insta::assert_snapshot!(human, @r"
        container evil\u{1b}[2J\n\u{202e}x (c0ffee000002)
          engine:   default
          labels:   ca.sandbox=1\u{1b}[8m, ca.sandbox.id=b\u{1b}]0;t\u{7}\nFORGED
          managed:  no: it lacks the scope label owner=team-a
          plan:     never touched: it is not managed
        ");
        assert!(!human.contains('\u{1b}') && !human.contains('\u{202e}'));
        let v: serde_json::Value = serde_json::from_str(&explain_json(&[look_alike()])).unwrap();
        let v = &v["explanations"];
        assert_eq!(v[0]["name"], EVIL_NAME);
        assert_eq!(v[0]["labels"]["ca.sandbox.id"], EVIL_BOX);
        assert_eq!(v[0]["excludedBy"]["rule"], "scopeLabel");
    }
}
