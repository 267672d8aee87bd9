//! The rules across entries of the desired-state file, once every table
//! is walked: engine names declared once, boxes and kept volumes each once
//! per engine, and every `engine =` naming a declared `[[engine]]`; the
//! entries that pass become the [`DesiredState`].
//!
//! Must not read the TOML document (the walk in `mod.rs` does, into the raw
//! entries) or judge single values (rules.rs does).

use std::collections::HashMap;
use std::path::Path;

use super::{At, RawFile, Walker};
use crate::state::error::StateErrorKind;
use crate::state::rules::{name_problem, MAX_BOX_ID_CHARS, MAX_VOLUME_NAME_CHARS};
use crate::state::{BoxDecl, DesiredState, EngineDecl, KeepVolume, Policy};

impl Walker<'_> {
    /// The rules across entries: names and ids, duplicates, engine references.
    pub(super) fn validate(&mut self, raw: RawFile, path: &Path) -> DesiredState {
        // Engines first: boxes and keep entries refer to them.
        let mut engines = Vec::new();
        let mut first_engine: HashMap<String, usize> = HashMap::new();
        let declared: Vec<String> = raw
            .engines
            .iter()
            .filter_map(|e| e.name.as_ref().map(|n| n.value.clone()))
            .collect();
        for engine in raw.engines {
            let Some(name) = engine.name else { continue };
            if name_problem(&name.value, MAX_BOX_ID_CHARS).is_some() {
                continue; // reported by the walk
            }
            if let Some(&first) = first_engine.get(&name.value) {
                let kind = StateErrorKind::DuplicateEngine {
                    name: name.value,
                    first: self.line_col(first),
                };
                self.problem(name.at, kind);
                continue;
            }
            first_engine.insert(name.value.clone(), name.at);
            engines.push(EngineDecl {
                line: self.line(name.key),
                name: name.value,
                target: engine.target,
                swarm: engine.swarm,
            });
        }

        let mut boxes = Vec::new();
        let mut seen = Seen::default();
        for b in raw.boxes {
            let Some(id) = b.id else { continue };
            let invalid = |id, reason| StateErrorKind::InvalidBoxId { id, reason };
            let Some(engine) = self.entry(&id, b.engine, MAX_BOX_ID_CHARS, &declared, invalid)
            else {
                continue;
            };
            if let Err((first, first_engine)) = seen.claim(&id.value, &engine, id.at) {
                let kind = StateErrorKind::DuplicateBox {
                    id: id.value,
                    engine,
                    first: self.line_col(first),
                    first_engine,
                };
                self.problem(id.at, kind);
                continue;
            }
            boxes.push(BoxDecl {
                line: self.line(id.key),
                id: id.value,
                engine,
                expiry: b.expiry,
                archive: b.archive,
            });
        }
        boxes.sort_by(|a, b| (&a.id, &a.engine).cmp(&(&b.id, &b.engine)));

        let mut keep_volumes = Vec::new();
        let mut seen = Seen::default();
        for k in raw.keep {
            let Some(name) = k.name else { continue };
            let invalid = |name, reason| StateErrorKind::InvalidVolumeName { name, reason };
            let max = MAX_VOLUME_NAME_CHARS;
            let Some(engine) = self.entry(&name, k.engine, max, &declared, invalid) else {
                continue;
            };
            if let Err((first, first_engine)) = seen.claim(&name.value, &engine, k.at) {
                let kind = StateErrorKind::DuplicateKeep {
                    name: name.value,
                    engine,
                    first: self.line_col(first),
                    first_engine,
                };
                self.problem(k.at, kind);
                continue;
            }
            keep_volumes.push(KeepVolume {
                line: self.line(k.at),
                name: name.value,
                engine,
                archive: k.archive,
            });
        }
        keep_volumes.sort_by(|a, b| (&a.name, &a.engine).cmp(&(&b.name, &b.engine)));

        DesiredState {
            source: Some(path.to_path_buf()),
            scope: raw.scope,
            boxes,
            keep_volumes,
            policy: Policy {
                grace: raw.grace,
                max_lease: raw.max_lease,
                archive: raw.archive,
            },
            engines,
            notify: raw.notify,
        }
    }

    /// True if `engine` is absent or names a declared `[[engine]]`; else reports it.
    /// The checks a `[[box]]` and a `volumes.keep` entry share: the engine it
    /// names is declared, and its name is valid (`invalid` words the problem).
    /// Returns the entry's engine when both hold.
    fn entry(
        &mut self,
        name: &At,
        engine: Option<At>,
        max: usize,
        declared: &[String],
        invalid: impl FnOnce(String, String) -> StateErrorKind,
    ) -> Option<Option<String>> {
        let engine_ok = self.engine_ref(engine.as_ref(), declared);
        if let Some(reason) = name_problem(&name.value, max) {
            self.problem(name.at, invalid(name.value.clone(), reason));
            return None;
        }
        engine_ok.then(|| engine.map(|e| e.value))
    }

    fn engine_ref(&mut self, engine: Option<&At>, declared: &[String]) -> bool {
        let Some(engine) = engine else { return true };
        if declared.contains(&engine.value) {
            return true;
        }
        let kind = StateErrorKind::UnknownEngine {
            name: engine.value.clone(),
            declared: declared.to_vec(),
        };
        self.problem(engine.at, kind);
        false
    }
}

/// Entries seen so far by name: each one's engine (`None`: every engine) and offset.
#[derive(Default)]
struct Seen(HashMap<String, Vec<(Option<String>, usize)>>);

impl Seen {
    /// Records the entry named `name` on `engine` (`None`: every engine) at
    /// offset `at`, unless an earlier entry of that name covers an engine this
    /// one covers too: then that entry's offset and engine.
    fn claim(
        &mut self,
        name: &str,
        engine: &Option<String>,
        at: usize,
    ) -> Result<(), (usize, Option<String>)> {
        let entries = self.0.entry(name.to_string()).or_default();
        if let Some((other, first)) = entries
            .iter()
            .find(|(other, _)| other.is_none() || engine.is_none() || other == engine)
        {
            return Err((*first, other.clone()));
        }
        entries.push((engine.clone(), at));
        Ok(())
    }
}
