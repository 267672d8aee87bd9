//! Tables and the small phrases every view shares: aligned columns whose
//! cells are escaped and cut, an object's name cell and label, counts in words.
//!
//! Owns the widest a cell may be (`CELL_CHARS`, the last column
//! `LAST_CELL_CHARS`) and the layout of a table. Everything an engine returned
//! passes through `table` (or `clip`) before it is shown; words are only
//! joined here, never decided.

use std::borrow::Cow;

use crate::model::{cut, short_id, ImageInfo, Kind, Natural};
use crate::plan::Entry;
use crate::text::{clip, escape};

/// The widest a table cell may be (in characters) before it is cut; the last
/// column (reasons, errors) may be wider.
pub(crate) const CELL_CHARS: usize = 64;
pub(crate) const LAST_CELL_CHARS: usize = 300;

/// Lays out rows as left-aligned columns separated by two spaces. Every cell
/// is escaped and cut (`CELL_CHARS`; the last column `LAST_CELL_CHARS`).
pub(crate) fn table(mut rows: Vec<Vec<String>>, indent: &str) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0; cols];
    let mut size = 0;
    for row in &mut rows {
        let last = row.len().saturating_sub(1);
        for (c, cell) in row.iter_mut().enumerate() {
            let max = if c == last {
                LAST_CELL_CHARS
            } else {
                CELL_CHARS
            };
            if let Cow::Owned(clipped) = clip(cell, max) {
                *cell = clipped;
            }
            if c < last {
                widths[c] = widths[c].max(cell.chars().count());
            }
            size += cell.len();
        }
        size += indent.len() + 1;
    }
    let mut out = String::with_capacity(size + rows.len() * widths.iter().sum::<usize>());
    for row in &rows {
        let start = out.len();
        out.push_str(indent);
        let last = row.len().saturating_sub(1);
        for (c, cell) in row.iter().enumerate() {
            out.push_str(cell);
            if c < last {
                let pad = widths[c] - cell.chars().count() + 2;
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        let line = out[start..].trim_end().len();
        out.truncate(start + line);
        out.push('\n');
    }
    out
}

/// `box <id>` (`box (empty)` for an empty `ca.sandbox.id=` label), or
/// `no box` for an object without the box label.
pub(crate) fn box_cell(b: Option<&str>) -> String {
    match b {
        Some(b) => format!("box {}", crate::model::box_words(b, usize::MAX)),
        None => "no box".to_string(),
    }
}

/// `name (short id)` for containers and networks, the name for volumes. Not
/// escaped (the table, the label or the log line escapes it, once); a name
/// with an ID is cut so that the ID still fits in a cell.
pub(crate) fn name_cell(name: &str, id: Option<&str>) -> String {
    match id {
        Some(id) => format!("{} ({})", cut(name, CELL_CHARS - 15), short_id(id)),
        None => name.to_string(),
    }
}

/// How a person names an object in a sentence: `container web (3f2a1b4c5d6e)`.
pub fn entry_label(e: &Entry) -> String {
    format!(
        "{} {}",
        e.kind,
        escape(&name_cell(&e.name, e.id.as_deref()))
    )
}

/// `1 object`, `2 objects`.
pub(crate) fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Images as table rows: tags and short ID.
pub(crate) fn image_table<'a>(images: impl IntoIterator<Item = &'a ImageInfo>) -> String {
    // By their tags in natural order (ca-sbx:cb2 before ca-sbx:cb10), then ID.
    let mut rows: Vec<(String, &str)> = images
        .into_iter()
        .map(|i| (i.tags.join(", "), i.id.as_str()))
        .collect();
    rows.sort_by(|a, b| (Natural(&a.0), a.1).cmp(&(Natural(&b.0), b.1)));
    let rows = rows
        .into_iter()
        .map(|(tags, id)| vec!["image".into(), tags, short_id(id).into()])
        .collect();
    table(rows, "  ")
}

/// Counts by kind in words: `2 containers, 1 volume and 0 networks`; the
/// Swarm kinds only when one counts something (`2 containers, 0 volumes,
/// 1 network and 1 service`).
pub(crate) fn kind_counts(count: impl Fn(Kind) -> usize) -> String {
    let parts: Vec<String> = Kind::ALL
        .iter()
        .filter(|&&k| !k.is_swarm() || count(k) > 0)
        .map(|&k| plural(count(k), k.as_str()))
        .collect();
    let (last, rest) = parts.split_last().expect("three kinds at least");
    format!("{} and {last}", rest.join(", "))
}

/// A size in decimal units, as docker prints them, with one decimal:
/// `512 B`, `1.2 kB`, `7.3 MB`, `1.2 GB` (rounded to the nearest tenth; a
/// figure that rounds to 1000 of a unit is shown in the next one).
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["kB", "MB", "GB", "TB", "PB", "EB"];
    if n < 1000 {
        return format!("{n} B");
    }
    let mut unit: u128 = 1;
    for name in UNITS {
        unit *= 1000;
        let tenths = (u128::from(n) * 10 + unit / 2) / unit;
        if tenths < 10_000 || name == "EB" {
            return format!("{}.{} {name}", tenths / 10, tenths % 10);
        }
    }
    unreachable!("the last unit takes any figure")
}

/// Every non-empty line indented by two spaces.
pub(crate) fn indented(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.lines() {
        if !line.is_empty() {
            out.push_str("  ");
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_box_label_is_named_visibly() {
        assert_eq!(box_cell(Some("")), "box (empty)");
        assert_eq!(box_cell(Some("cb1")), "box cb1");
        assert_eq!(box_cell(None), "no box");
    }

    #[test]
    fn sizes_are_in_decimal_units_with_one_decimal() {
        for (n, text) in [
            (0, "0 B"),
            (999, "999 B"),
            (1000, "1.0 kB"),
            (1049, "1.0 kB"),
            (1050, "1.1 kB"),
            (999_949, "999.9 kB"),
            (999_950, "1.0 MB"),
            (7_340_032, "7.3 MB"),
            (1_234_567_890, "1.2 GB"),
            (1_250_000_000_000, "1.3 TB"),
            (u64::MAX, "18.4 EB"),
        ] {
            assert_eq!(bytes(n), text, "{n}");
        }
    }

    fn row(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn columns_are_aligned_and_trailing_space_trimmed() {
        let text = table(
            vec![
                row(&["container", "web (0123456789ab)", "box a", "running"]),
                row(&["volume", "data", "no box", ""]),
            ],
            "  ",
        );
        insta::assert_snapshot!(text, @r"
          container  web (0123456789ab)  box a   running
          volume     data                no box
        ");
    }

    #[test]
    fn hostile_cells_are_escaped_and_long_ones_cut() {
        let long = "n".repeat(100);
        let text = table(
            vec![row(&[
                "volume",
                "evil\u{1b}[2J\n\u{202e}name",
                &long,
                "last\ncolumn",
            ])],
            "",
        );
        let line = text.strip_suffix('\n').unwrap();
        assert!(
            !line.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{text:?}"
        );
        assert!(line.contains("evil\\u{1b}[2J\\n\\u{202e}name"), "{text:?}");
        assert!(
            line.contains(&format!("{}…", "n".repeat(CELL_CHARS - 1))),
            "{text:?}"
        );
        assert!(line.ends_with("last\\ncolumn"), "{text:?}");
    }

    #[test]
    fn counts_and_labels_in_words() {
        assert_eq!(plural(1, "object"), "1 object");
        assert_eq!(plural(0, "image"), "0 images");
        assert_eq!(
            kind_counts(|k| k as usize),
            "0 containers, 1 volume, 2 networks, 3 services, 4 configs and 5 secrets"
        );
        assert_eq!(
            kind_counts(|k| usize::from(k == Kind::Network)),
            "0 containers, 0 volumes and 1 network"
        );
        let mut e = Entry {
            engine: "default".into(),
            kind: Kind::Network,
            id: Some("0123456789abcdef".into()),
            name: "net\u{1b}]0;x".into(),
            box_id: None,
            state: None,
            created: None,
        };
        assert_eq!(entry_label(&e), "network net\\u{1b}]0;x (0123456789ab)");
        e.kind = Kind::Volume;
        e.id = None;
        assert_eq!(entry_label(&e), "volume net\\u{1b}]0;x");
        assert_eq!(indented("a\n\nb\n"), "  a\n\n  b\n");
    }
}
