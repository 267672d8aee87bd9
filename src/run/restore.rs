//! `restore`: one archive into a new volume on the one engine (resolve
//! checked that there is one).
//!
//! Owns naming what is restored (the volume asked for, else the manifest's)
//! in every error; the restore is `exec::archive`'s, the words `render`'s;
//! ends in a `Verdict` (failed when the restore failed).

use crate::cli::config::Job;
use crate::exec::report::Verdict;
use crate::render;

use super::context::{failed, Run, Sink};

/// `restore`: one archive into a new volume on the one engine.
pub(super) async fn restore(run: &Run<'_>, sink: &mut dyn Sink) -> Verdict {
    let config = run.config;
    let Job::Restore { archive, volume } = &config.job else {
        unreachable!("restore runs restore jobs")
    };
    let engine = run.engines[0].as_ref();
    let labels = crate::exec::archive::scope_labels(&config.scope);
    let result = crate::exec::archive::restore(engine, archive, volume.as_deref(), &labels).await;
    // Every error names the volume and the engine.
    let name = volume
        .clone()
        .or_else(|| {
            crate::exec::archive::read_manifest(archive)
                .ok()
                .map(|m| m.volume)
        })
        .unwrap_or_else(|| "(unknown: no manifest)".into());
    let what = render::restore_subject(&name, engine.name());
    sink.out(&render::restored(&result, &what, config.format));
    sink.err(&render::restore_error(&result, &what));
    failed(result.is_err())
}
