//! Holding a box while a command runs (`hold BOX -- COMMAND`): the
//! supervisor of the child process. Takes a first lease (or says why not,
//! without running the command), runs the command with inherited stdio,
//! renews the lease while it runs (a failed renewal is told and tried again
//! at the next tick; the command is never stopped), passes every signal it
//! is given on to it, and when it has ended removes every lease the hold made.
//!
//! Owns the child process and how it ended (`CommandEnd`); the engine calls
//! are the lease protocol's (`exec::lease`: `create`, `renew`, `remove`).
//! Returns typed results and never prints: a hold tells what happens as it
//! happens through `HoldEvent`s, and its end as `Held`. Never picks an exit
//! status (`cli::exit` does, from `CommandEnd`). Must not kill the command it
//! holds a box for: it only passes on the signals it is given.

use std::ffi::OsString;
use std::time::Duration;

use crate::engine::Engine;
use crate::exec::lease::{create, remove, renew, Lease, LeaseError, LeaseRequest, Renewal};

/// How the held command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandEnd {
    /// It exited with this status.
    Exited(i32),
    /// A signal (this number) ended it.
    Signaled(i32),
    /// It was not found (never ran).
    NotFound,
    /// It was found but could not be run (never ran).
    NotRun,
}

/// What happens during a hold, told as it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldEvent<'a> {
    /// The first lease was taken; the command starts next.
    Taken { lease: &'a Lease, every: Duration },
    /// The command (`program`) could not be started (`error`: why, as the
    /// system said).
    NotStarted {
        program: &'a std::ffi::OsStr,
        error: &'a str,
    },
    /// A renewal took `lease` and removed `previous`.
    Renewed {
        lease: &'a Lease,
        previous: &'a Lease,
    },
    /// A renewal took `lease` but could not remove `previous` (tried again at the end).
    PreviousLeft {
        lease: &'a Lease,
        previous: &'a Lease,
        error: &'a LeaseError,
    },
    /// A renewal failed: `current` still holds until it runs out; the next
    /// try is `every` later.
    RenewFailed {
        error: &'a LeaseError,
        current: &'a Lease,
        every: Duration,
    },
    /// This signal was passed on to the command (`delivered`: whether it
    /// was still there to get it).
    Forwarded { signal: i32, delivered: bool },
}

/// How a hold ended (once its first lease was taken).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub end: CommandEnd,
    /// The lease volumes the hold made and removed at the end.
    pub released: Vec<String>,
    /// The lease volumes the hold made that could not be removed: each
    /// runs out at its `until` (harmless: it then holds nothing).
    pub left: Vec<(Lease, LeaseError)>,
}

/// Passes `signal` to the process `pid`; false when it is gone.
fn forward(pid: Option<u32>, signal: i32) -> bool {
    let Some(pid) = pid.and_then(|p| libc::pid_t::try_from(p).ok()) else {
        return false;
    };
    // SAFETY: kill(2) on the pid of our own child, not yet reaped (tokio's
    // `Child::id` is `None` once it is), so it cannot name another process;
    // no memory is involved.
    unsafe { libc::kill(pid, signal) == 0 }
}

/// `hold BOX -- COMMAND`: takes a lease (or returns why not, without running
/// the command), runs `command` (inherited stdio), renews every `every`
/// while it runs (a failed renewal is told and tried again at the next tick;
/// the command is never stopped), passes every signal number received on
/// `signals` to it, and when it has ended (and any renewal in flight has
/// finished) removes every lease the hold made.
pub async fn hold(
    engine: &dyn Engine,
    req: LeaseRequest<'_>,
    command: &[OsString],
    every: Duration,
    signals: &mut tokio::sync::mpsc::UnboundedReceiver<i32>,
    on: &mut dyn FnMut(HoldEvent<'_>),
) -> Result<Held, LeaseError> {
    let first = create(engine, req).await?;
    on(HoldEvent::Taken {
        lease: &first,
        every,
    });
    let mut current = first;
    let mut made_left: Vec<Lease> = Vec::new();
    let end = match command.split_first() {
        None => {
            on(HoldEvent::NotStarted {
                program: std::ffi::OsStr::new(""),
                error: "no command given",
            });
            CommandEnd::NotRun
        }
        Some((program, args)) => match tokio::process::Command::new(program).args(args).spawn() {
            Err(e) => {
                on(HoldEvent::NotStarted {
                    program,
                    error: &e.to_string(),
                });
                if e.kind() == std::io::ErrorKind::NotFound {
                    CommandEnd::NotFound
                } else {
                    CommandEnd::NotRun
                }
            }
            Ok(mut child) => {
                let every = every.max(Duration::from_millis(1));
                let mut ticks =
                    tokio::time::interval_at(tokio::time::Instant::now() + every, every);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                let mut renewal: Option<
                    std::pin::Pin<Box<dyn std::future::Future<Output = Renewal> + '_>>,
                > = None;
                let mut signals_open = true;
                let status = loop {
                    tokio::select! {
                        status = child.wait() => break status,
                        signal = signals.recv(), if signals_open => match signal {
                            Some(signal) => {
                                let delivered = forward(child.id(), signal);
                                on(HoldEvent::Forwarded { signal, delivered });
                            }
                            None => signals_open = false,
                        },
                        _ = ticks.tick(), if renewal.is_none() => {
                            let previous = current.clone();
                            renewal = Some(Box::pin(async move {
                                renew(engine, req, &previous).await
                            }));
                        }
                        done = async { renewal.as_mut().expect("guarded").await }, if renewal.is_some() => {
                            renewal = None;
                            renewed(done, &mut current, &mut made_left, every, on);
                        }
                    }
                };
                // A renewal in flight may have made a lease: finish it, so
                // that lease is released too.
                if let Some(pending) = renewal.take() {
                    renewed(pending.await, &mut current, &mut made_left, every, on);
                }
                match status {
                    Ok(status) => {
                        use std::os::unix::process::ExitStatusExt;
                        match (status.code(), status.signal()) {
                            (Some(code), _) => CommandEnd::Exited(code),
                            (None, Some(signal)) => CommandEnd::Signaled(signal),
                            (None, None) => CommandEnd::NotRun,
                        }
                    }
                    Err(e) => {
                        // Waiting failed: what became of the command is unknown.
                        on(HoldEvent::NotStarted {
                            program,
                            error: &e.to_string(),
                        });
                        CommandEnd::NotRun
                    }
                }
            }
        },
    };
    let mut held = Held {
        end,
        released: Vec::new(),
        left: Vec::new(),
    };
    made_left.push(current);
    for lease in made_left {
        match remove(engine, &lease.volume).await {
            Ok(()) => held.released.push(lease.volume),
            Err(e) => held.left.push((lease, e)),
        }
    }
    Ok(held)
}

/// Takes in one renewal's result: the new lease becomes the current one; a
/// previous lease that could not be removed is kept for the end.
fn renewed(
    done: Renewal,
    current: &mut Lease,
    made_left: &mut Vec<Lease>,
    every: Duration,
    on: &mut dyn FnMut(HoldEvent<'_>),
) {
    match done {
        Renewal::Failed(error) => on(HoldEvent::RenewFailed {
            error: &error,
            current,
            every,
        }),
        Renewal::Renewed {
            lease,
            previous_left,
        } => {
            let previous = std::mem::replace(current, lease);
            match previous_left {
                None => on(HoldEvent::Renewed {
                    lease: current,
                    previous: &previous,
                }),
                Some(error) => {
                    on(HoldEvent::PreviousLeft {
                        lease: current,
                        previous: &previous,
                        error: &error,
                    });
                    made_left.push(previous);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::memory::{FaultAction, MemoryEngine, Op, World};
    use crate::exec::lease::tests::{fail_once, names, outside, req, scope, world};
    use crate::model::Kind;

    /// The events of a hold, as owned text.
    fn record(events: &mut Vec<String>) -> impl FnMut(HoldEvent<'_>) + '_ {
        move |e| {
            events.push(match e {
                HoldEvent::Taken { lease, .. } => format!("taken {}", lease.volume),
                HoldEvent::NotStarted { error, .. } => format!("not started: {error}"),
                HoldEvent::Renewed { lease, previous } => {
                    format!("renewed {} over {}", lease.volume, previous.volume)
                }
                HoldEvent::PreviousLeft { previous, .. } => format!("left {}", previous.volume),
                HoldEvent::RenewFailed { error, current, .. } => {
                    format!("renew failed ({error}); {} holds", current.volume)
                }
                HoldEvent::Forwarded { signal, delivered } => {
                    format!("signal {signal} delivered {delivered}")
                }
            })
        }
    }

    fn sh(script: &str) -> Vec<OsString> {
        ["sh", "-c", script].iter().map(OsString::from).collect()
    }

    /// Holds box `b` while `command` runs, with no signal ever sent: a
    /// `ttl`-second lease, renewed `every`. How it ended, and its events.
    async fn hold_b_renewing(
        engine: &MemoryEngine,
        ttl: u64,
        every: Duration,
        command: &[OsString],
    ) -> (Result<Held, LeaseError>, Vec<String>) {
        let scope = scope();
        let (_tx, mut signals) = tokio::sync::mpsc::unbounded_channel();
        let mut events = Vec::new();
        let held = hold(
            engine,
            req(&scope, "b", ttl),
            command,
            every,
            &mut signals,
            &mut record(&mut events),
        )
        .await;
        (held, events)
    }

    /// [`hold_b_renewing`] with a 30-second lease renewed every 10 seconds.
    async fn hold_b(
        engine: &MemoryEngine,
        command: &[OsString],
    ) -> (Result<Held, LeaseError>, Vec<String>) {
        hold_b_renewing(engine, 30, Duration::from_secs(10), command).await
    }

    #[tokio::test]
    async fn hold_passes_the_exit_status_through_and_releases_its_lease() {
        let engine = MemoryEngine::new(world());
        let (held, events) = hold_b(&engine, &sh("exit 3")).await;
        let held = held.unwrap();
        assert_eq!(held.end, CommandEnd::Exited(3));
        assert!(held.left.is_empty());
        assert_eq!(held.released.len(), 1);
        assert_eq!(events, [format!("taken {}", held.released[0])]);
        let mut left = outside();
        left.push("ca-sbx-lease-b-old");
        left.sort();
        assert_eq!(names(&engine), left, "only its own lease went");
    }

    #[tokio::test]
    async fn hold_renews_reports_a_failed_renewal_and_tries_again() {
        let engine = MemoryEngine::new(World::default());
        // The first create (the lease) passes, the second (the first
        // renewal) fails, the third passes.
        engine.inject(Op::Create(Kind::Volume), None, FaultAction::Pass, 1);
        fail_once(&engine, Op::Create(Kind::Volume), "create volume");
        let (held, events) =
            hold_b_renewing(&engine, 3, Duration::from_millis(300), &sh("sleep 1")).await;
        let held = held.unwrap();
        assert_eq!(held.end, CommandEnd::Exited(0));
        assert!(events[0].starts_with("taken "), "{events:?}");
        assert!(
            events[1].starts_with("renew failed (could not create lease volume")
                && events[1].ends_with(&format!("{} holds", &events[0][6..])),
            "{events:?}"
        );
        assert!(
            events[2].starts_with("renewed ")
                && events[2].ends_with(&format!("over {}", &events[0][6..])),
            "{events:?}"
        );
        assert!(held.left.is_empty(), "{held:?}");
        assert!(engine.world().volumes.is_empty(), "every lease released");
        // Each renewal: one create, then the previous removed by name.
        let calls = engine.calls();
        assert!(calls.iter().all(|c| !c.starts_with("List")), "{calls:?}");
    }

    #[tokio::test]
    async fn hold_passes_signals_on_and_a_signal_death_is_reported() {
        let engine = MemoryEngine::new(World::default());
        let scope = scope();
        let (tx, mut signals) = tokio::sync::mpsc::unbounded_channel();
        let mut events = Vec::new();
        let mut on = record(&mut events);
        let argv = sh("exec sleep 5");
        let command = hold(
            &engine,
            req(&scope, "b", 30),
            &argv,
            Duration::from_secs(10),
            &mut signals,
            &mut on,
        );
        let send = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            tx.send(libc::SIGTERM).unwrap();
        };
        let (held, ()) = tokio::join!(command, send);
        drop(on);
        let held = held.unwrap();
        assert_eq!(held.end, CommandEnd::Signaled(libc::SIGTERM));
        assert_eq!(
            events[1],
            format!("signal {} delivered true", libc::SIGTERM)
        );
        assert!(engine.world().volumes.is_empty());
    }

    #[tokio::test]
    async fn hold_without_a_first_lease_runs_nothing() {
        let engine = MemoryEngine::new(World::default());
        fail_once(&engine, Op::Create(Kind::Volume), "create volume");
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let (held, _) = hold_b(&engine, &sh(&format!("touch {}", marker.display()))).await;
        let e = held.unwrap_err();
        assert!(matches!(e, LeaseError::Create { .. }));
        assert!(!marker.exists(), "the command ran");
    }

    #[tokio::test]
    async fn a_release_that_fails_at_the_end_names_the_lease_left() {
        let engine = MemoryEngine::new(World::default());
        fail_once(&engine, Op::Remove(Kind::Volume), "remove volume");
        let (held, _) = hold_b(&engine, &sh("true")).await;
        let held = held.unwrap();
        assert_eq!(held.end, CommandEnd::Exited(0));
        assert!(held.released.is_empty());
        assert_eq!(held.left.len(), 1);
        assert_eq!(engine.world().volumes.len(), 1, "it stays, and runs out");
    }

    #[tokio::test]
    async fn a_command_that_does_not_exist_is_not_found_and_the_lease_released() {
        let engine = MemoryEngine::new(World::default());
        let missing = [OsString::from("/nonexistent/sandboxctl-test-command")];
        let (held, events) = hold_b(&engine, &missing).await;
        let held = held.unwrap();
        assert_eq!(held.end, CommandEnd::NotFound);
        assert!(events[1].starts_with("not started"), "{events:?}");
        assert!(engine.world().volumes.is_empty());
    }
}
