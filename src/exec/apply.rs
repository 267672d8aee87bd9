//! Apply: carry out a plan, exactly, through an engine.
//!
//! Owns what one step does (remove; a volume is re-checked just before, and
//! archived first when its step says so: removed only once its archive stands
//! under its final name; a container whose step reads volumes is stopped,
//! they are archived through it, then it is removed; with `--reclaimed`, the
//! engine measures what every object holds once, before the first removal,
//! and each removed object carries its figure: what it gave back) and
//! the error policy as a pure function (`next`: a typed engine error in, what
//! to do next out: the shape of kube-rs's error policy). The scheduling is the
//! generic walk in `walk.rs`. Must not remove anything the plan does not name,
//! retry a failed removal, or print.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::engine::{Engine, EngineError, ErrorKind};
use crate::exec::archive::{archive_through, archive_volume, ArchiveError, Archived};
use crate::exec::event::{Event, Observer};
use crate::exec::walk::{walk, Walked};
use crate::model::Outcome;
use crate::model::{Kind, Object, ObjectKey, Scope};
use crate::plan::{Plan, Step};

/// The default number of removals in flight. Measured on 2 cores with Docker
/// 20.10 (`scripts/bench-teardown.sh`, README): 12 was fastest at 50 and 200
/// boxes; past 16 the daemon only queues, and each removal in flight holds a
/// connection (one file descriptor).
pub(crate) const DEFAULT_PARALLELISM: usize = 12;

/// How apply runs.
#[derive(Debug, Clone)]
pub struct ApplyOptions {
    /// Removals in flight at once (at least 1).
    pub parallelism: usize,
    /// How long to wait for an object whose removal another actor started.
    pub in_progress_wait: Duration,
    /// How often to look while waiting.
    pub poll_interval: Duration,
    /// A budget shared with other applies running at the same time (a fleet's
    /// engines): a removal starts only with a permit from it.
    pub budget: Option<Arc<Semaphore>>,
    /// What discovery learnt by inspecting containers, shared by the
    /// discoveries of one run (its verification asks no container again) and,
    /// in `watch`, by every later cycle (see `list::Memo`).
    pub memo: Arc<crate::exec::list::Memo>,
    /// `--reclaimed`: before the first removal, ask the engine what every
    /// container and volume holds (one `GET /system/df`, under the read
    /// deadline), so that each one removed carries what it gave back. Off:
    /// only an archived volume's figure is known (its tar stream's files).
    pub reclaimed: bool,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            parallelism: DEFAULT_PARALLELISM,
            in_progress_wait: Duration::from_secs(30),
            poll_interval: Duration::from_millis(100),
            budget: None,
            memo: Arc::default(),
            reclaimed: false,
        }
    }
}

/// What to do after an engine error on a removal.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Next {
    /// The step is over, with this outcome.
    Done(Outcome),
    /// Another actor is removing it: done only once the engine no longer knows it.
    WaitUntilGone,
    /// A volume in use by these containers: if each is an archive helper of
    /// the scope (a killed run's, made by the engine after this run listed),
    /// they go and the volume is tried once more; otherwise the step fails.
    HeldBy(Vec<String>),
}

/// The error policy, a pure function: a 404 is "already gone"; an in-progress
/// removal by another actor is waited out (its volumes may go only once it is
/// really gone); a volume in use is tried once more only when every holder
/// proves to be an archive helper of the scope (a killed run's late one);
/// anything else (in use, refused, unreachable, timeout) fails the step,
/// which skips everything downstream of it. Nothing else is retried or forced.
fn next(kind: Kind, err: &EngineError) -> Next {
    match &err.kind {
        ErrorKind::NotFound { .. } => Next::Done(Outcome::AlreadyGone),
        ErrorKind::InProgress { .. } => Next::WaitUntilGone,
        ErrorKind::InUse { holders, .. } if kind == Kind::Volume && !holders.is_empty() => {
            Next::HeldBy(holders.clone())
        }
        _ => Next::Done(Outcome::Failed(err.clone())),
    }
}

/// The outcome of every step, in plan order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub outcomes: Vec<Outcome>,
    /// True if the run stopped starting removals because it was interrupted.
    pub interrupted: bool,
    /// The archives written, with the index of the volume's step (whose
    /// removal they preceded).
    pub archived: Vec<(usize, Archived)>,
    /// What each step's object gave back, in bytes, in plan order: known
    /// only for an object this run removed (`Outcome::Removed`) and
    /// measured before: by the engine (`--reclaimed`) or, for a volume, by
    /// its archive's stream. `None`: not known.
    pub reclaimed: Vec<Option<u64>>,
}

/// What one step did: its outcome, the archives written before its
/// removal (with their volume's step index), and what the object gave back
/// when it was removed and measured.
#[derive(Debug, Clone)]
struct Done {
    outcome: Outcome,
    archived: Vec<(usize, Archived)>,
    reclaimed: Option<u64>,
}

impl Done {
    fn with(outcome: Outcome, archived: Vec<(usize, Archived)>) -> Done {
        Done {
            outcome,
            archived,
            reclaimed: None,
        }
    }
}

/// With `--reclaimed` and something in the plan that holds space: what the
/// engine measured of every container and volume, asked once before the
/// first removal. A failed or late answer leaves every figure unknown; it
/// is told (`Event::Unmeasured`), never a failure of a removal.
async fn measure(
    engine: &dyn Engine,
    plan: &Plan,
    options: &ApplyOptions,
    observer: &dyn Observer,
) -> crate::engine::DiskUsage {
    if !options.reclaimed || !plan.steps.iter().any(|s| s.object.kind.holds_space()) {
        return crate::engine::DiskUsage::default();
    }
    match engine.disk_usage().await {
        Ok(sizes) => sizes,
        Err(error) => {
            observer.on(&Event::Unmeasured {
                engine: engine.name(),
                error: &error,
            });
            crate::engine::DiskUsage::default()
        }
    }
}

/// Carries out `plan`. A step starts once every step it waits for succeeded;
/// when one fails, everything that waits for it (transitively) is skipped.
/// Among ready steps, volumes and networks go first: they cost about a
/// millisecond, and taking one as soon as its last container is gone means an
/// interrupted run leaves nothing behind whose containers are gone. When
/// `cancel` is set, no new removal starts; those in flight finish.
pub async fn apply(
    engine: &dyn Engine,
    plan: &Plan,
    options: &ApplyOptions,
    cancel: &CancellationToken,
    observer: &dyn Observer,
) -> Applied {
    let scope = plan.scope();
    let name = engine.name();
    let sizes = measure(engine, plan, options, observer).await;
    // Volume steps already archived through their container, with what
    // their files hold.
    let read = Mutex::new(BTreeMap::new());
    let walked = walk(
        &plan.dependencies(),
        options.parallelism,
        |i| (plan.steps[i].object.kind == Kind::Container, i),
        |done: &Done| done.outcome.is_success(),
        || cancel.is_cancelled(),
        |i| {
            observer.on(&Event::Started {
                engine: name,
                step: &plan.steps[i],
            })
        },
        |i, w| {
            if let Walked::Ran(Done {
                archived: archives, ..
            }) = w
            {
                for (v, archived) in archives {
                    observer.on(&Event::Archived {
                        engine: name,
                        step: &plan.steps[*v],
                        archived,
                    });
                }
            }
            let (outcome, reclaimed) = as_outcome(w.clone());
            observer.on(&Event::Finished {
                engine: name,
                step: &plan.steps[i],
                outcome: &outcome,
                reclaimed,
            });
        },
        |i| remove(engine, plan, i, &scope, options, &read, &sizes),
    )
    .await;
    let interrupted = walked.iter().any(|w| matches!(w, Walked::Cancelled));
    let mut archived = Vec::new();
    let mut outcomes = Vec::with_capacity(walked.len());
    let mut reclaimed = Vec::with_capacity(walked.len());
    for w in walked {
        if let Walked::Ran(done) = &w {
            archived.extend(done.archived.iter().cloned());
        }
        let (outcome, bytes) = as_outcome(w);
        outcomes.push(outcome);
        reclaimed.push(bytes);
    }
    archived.sort_by_key(|(v, _)| *v);
    Applied {
        outcomes,
        interrupted,
        archived,
        reclaimed,
    }
}

/// A step's outcome, and what it gave back: known only when it was removed.
fn as_outcome(w: Walked<Done>) -> (Outcome, Option<u64>) {
    match w {
        Walked::Ran(done) => {
            let reclaimed = done.reclaimed.filter(|_| done.outcome == Outcome::Removed);
            (done.outcome, reclaimed)
        }
        Walked::Skipped(i) => (Outcome::Skipped(i + 1), None),
        Walked::Cancelled => (Outcome::Interrupted, None),
    }
}

/// Carries out step `i`: its outcome, the archives written before the
/// removal (with their volume's step index), whatever the removal's outcome
/// then, and what the object holds as far as it is known: a volume's
/// archived files, else what `sizes` (measured before the first removal)
/// says. `read` holds the volume steps already archived through their
/// container (with what their files hold): those are removed without a
/// second archive.
async fn remove(
    engine: &dyn Engine,
    plan: &Plan,
    i: usize,
    scope: &Scope,
    options: &ApplyOptions,
    read: &Mutex<BTreeMap<usize, u64>>,
    sizes: &crate::engine::DiskUsage,
) -> Done {
    let step = &plan.steps[i];
    let mut done = remove_step(engine, plan, i, scope, options, read).await;
    let archived_files = done
        .archived
        .iter()
        .find(|(v, _)| *v == i)
        .map(|(_, a)| a.file_bytes)
        .or_else(|| read.lock().unwrap().get(&i).copied());
    done.reclaimed = archived_files.or_else(|| sizes.0.get(&step.object.key()).copied());
    done
}

/// [`remove`] but for the figure.
async fn remove_step(
    engine: &dyn Engine,
    plan: &Plan,
    i: usize,
    scope: &Scope,
    options: &ApplyOptions,
    read: &Mutex<BTreeMap<usize, u64>>,
) -> Done {
    let _permit = match &options.budget {
        Some(budget) => Some(budget.acquire().await.expect("the budget is never closed")),
        None => None,
    };
    let step = &plan.steps[i];
    let key = step.object.key();
    let mut archived = Vec::new();
    if key.kind == Kind::Container && !step.reads.is_empty() {
        if let Err(outcome) =
            read_through(engine, plan, step, scope, options, read, &mut archived).await
        {
            return Done::with(outcome, archived);
        }
    }
    let through_container = read.lock().unwrap().contains_key(&i);
    if key.kind == Kind::Volume {
        // Volumes have no ID, so a name may have been reused since the listing:
        // look again right before removing, and remove only the volume planned.
        let now = match recheck(engine, &key, step, scope).await {
            Ok(now) => now,
            Err(done) => return Done::with(done, archived),
        };
        if let Some(dir) = step.archive.as_ref().filter(|_| !through_container) {
            // No archive, no removal: the volume stays, and what waits for it too.
            match archive_volume(
                engine,
                &now,
                std::path::Path::new(dir),
                &plan.retained.images,
                &plan.scope,
            )
            .await
            {
                Ok(a) => archived.push((i, a)),
                // An archive that stands (its helper could not be removed)
                // is reported as archived; the volume stays either way.
                Err(e) => {
                    archived.extend(e.archived().cloned().map(|a| (i, a)));
                    return Done::with(Outcome::ArchiveFailed(e.to_string()), archived);
                }
            }
        }
    }
    let outcome = match engine.remove(&key).await {
        Ok(()) => Outcome::Removed,
        Err(e) => match next(key.kind, &e) {
            Next::Done(outcome) => outcome,
            Next::WaitUntilGone => wait_until_gone(engine, &key, options).await,
            Next::HeldBy(holders) => {
                if remove_late_helpers(engine, &holders, scope).await {
                    match engine.remove(&key).await {
                        Ok(()) => Outcome::Removed,
                        Err(e) if e.is_not_found() => Outcome::AlreadyGone,
                        Err(e) => Outcome::Failed(e),
                    }
                } else {
                    Outcome::Failed(e)
                }
            }
        },
    };
    Done::with(outcome, archived)
}

/// Removes the containers holding a volume when every one of them is an
/// archive helper of the scope (checked on the client, freshly inspected):
/// a killed run may have asked for one the engine made only after this run
/// listed. True when they are all gone; false (nothing removed) when any is
/// something else or cannot be looked at.
async fn remove_late_helpers(engine: &dyn Engine, holders: &[String], scope: &Scope) -> bool {
    let mut keys = Vec::new();
    for id in holders {
        let key = ObjectKey::new(engine.name(), Kind::Container, id);
        let Ok(o) = engine.inspect(&key).await else {
            return false;
        };
        let helper = o.labels.get(crate::model::ROLE_LABEL).map(String::as_str)
            == Some(crate::model::ARCHIVE_HELPER_ROLE);
        if !scope.manages(&o.labels) || !helper {
            return false;
        }
        keys.push(o.key);
    }
    for key in keys {
        match engine.remove(&key).await {
            Err(e) if !e.is_not_found() => return false,
            _ => {}
        }
    }
    true
}

/// A container step's reads: stops the container, then archives each volume
/// it reads through it (each volume re-checked first, as its own step does).
/// `Err` is the step's outcome when it must end here: the container gone or
/// not stoppable, or an archive failed (the container then stays, stopped,
/// and the volume with it: the next run reads it again).
async fn read_through(
    engine: &dyn Engine,
    plan: &Plan,
    step: &Step,
    scope: &Scope,
    options: &ApplyOptions,
    read: &Mutex<BTreeMap<usize, u64>>,
    archived: &mut Vec<(usize, Archived)>,
) -> Result<(), Outcome> {
    let key = step.object.key();
    if let Err(e) = engine.stop(&key.id).await {
        // Gone already: its volumes are archived through helpers at their steps.
        return Err(match next(key.kind, &e) {
            Next::Done(outcome) => outcome,
            Next::WaitUntilGone => wait_until_gone(engine, &key, options).await,
            Next::HeldBy(_) => Outcome::Failed(e),
        });
    }
    let dir = step.archive.as_deref().unwrap_or_default();
    for r in &step.reads {
        let v = r.step - 1;
        let volume = &plan.steps[v];
        let vkey = volume.object.key();
        // Gone or changed: the volume's own step finds the same and says so.
        let Ok(now) = recheck(engine, &vkey, volume, scope).await else {
            continue;
        };
        match archive_through(engine, &key.id, &r.path, &now, std::path::Path::new(dir)).await {
            Ok(a) => {
                read.lock().unwrap().insert(v, a.file_bytes);
                archived.push((v, a));
            }
            // The engine found no such path in the container (Docker 20.10
            // once said "Could not find the file /v/0" of a stopped box
            // right after the daemon restarted), or the container went: not
            // read, so the volume's own step archives it through a helper,
            // which mounts the volume itself. Nothing goes unarchived.
            Err(ArchiveError::Engine(e)) if e.is_not_found() => continue,
            Err(e) => {
                return Err(Outcome::ArchiveFailed(format!(
                    "volume {} (read at {} of this container): {e}",
                    r.volume, r.path
                )))
            }
        }
    }
    Ok(())
}

/// The volume as it is now, or `Err(outcome)` when it must not be removed
/// (gone, relabelled, recreated).
async fn recheck(
    engine: &dyn Engine,
    key: &ObjectKey,
    step: &Step,
    scope: &Scope,
) -> Result<Object, Outcome> {
    let now = match engine.inspect(key).await {
        Err(e) => {
            return Err(match next(key.kind, &e) {
                Next::Done(outcome) => outcome,
                Next::WaitUntilGone | Next::HeldBy(_) => Outcome::Failed(e),
            })
        }
        Ok(now) => now,
    };
    if !scope.manages(&now.labels) {
        return Err(Outcome::Refused(format!(
            "{} {} no longer carries the scope labels ({scope}); left alone",
            key.kind, key.id
        )));
    }
    let planned = step.object.created;
    if planned.is_some() && now.created != planned {
        return Err(Outcome::Refused(format!(
            "{} {} was recreated since it was listed (created {}, listed {}); left alone",
            key.kind,
            key.id,
            now.created
                .map(crate::plan::rfc3339)
                .unwrap_or_else(|| "?".into()),
            step.object
                .created
                .map(crate::plan::rfc3339)
                .unwrap_or_else(|| "?".into())
        )));
    }
    Ok(now)
}

/// Another actor is removing the object: it is done only when the engine
/// no longer knows it, and only then may what it uses go.
async fn wait_until_gone(engine: &dyn Engine, key: &ObjectKey, options: &ApplyOptions) -> Outcome {
    let deadline = tokio::time::Instant::now() + options.in_progress_wait;
    loop {
        match engine.inspect(key).await {
            Err(e) if e.is_not_found() => return Outcome::AlreadyGone,
            Err(e) => return Outcome::Failed(e),
            Ok(_) if tokio::time::Instant::now() >= deadline => {
                return Outcome::GaveUpWaiting {
                    seconds: options.in_progress_wait.as_secs(),
                }
            }
            Ok(_) => tokio::time::sleep(options.poll_interval).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_policy_is_a_plain_function() {
        let err = |kind| EngineError::new("remove volume v", kind);
        assert_eq!(
            next(
                Kind::Volume,
                &err(ErrorKind::NotFound {
                    message: "no such volume".into()
                })
            ),
            Next::Done(Outcome::AlreadyGone)
        );
        assert_eq!(
            next(
                Kind::Container,
                &err(ErrorKind::InProgress {
                    message: "already in progress".into()
                })
            ),
            Next::WaitUntilGone
        );
        let in_use = err(ErrorKind::InUse {
            holders: vec!["abc".into()],
            message: "in use".into(),
        });
        assert_eq!(
            next(Kind::Volume, &in_use),
            Next::HeldBy(vec!["abc".into()])
        );
        assert_eq!(
            next(Kind::Network, &in_use),
            Next::Done(Outcome::Failed(in_use.clone()))
        );
        let timeout = err(ErrorKind::Timeout { seconds: 3 });
        assert_eq!(
            next(Kind::Network, &timeout),
            Next::Done(Outcome::Failed(timeout.clone()))
        );
    }
}
