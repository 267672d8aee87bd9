//! Signals: what SIGINT and SIGTERM do to a run, told to the run as a value.
//!
//! Owns the handlers. A first Ctrl-C (any command) or SIGTERM (`watch`, `mcp`)
//! records which signal came in the run's `Stop` and cancels it: a
//! converging run starts no new removal, finishes those in flight, verifies
//! and reports; a watch stops after its cycle in flight. A second Ctrl-C
//! after that resolves `Signals::quit`, which the run races against its
//! work (`run::run`) and ends as `Ended::Quit`. `hold` passes SIGINT and
//! SIGTERM on to its command instead. Must not decide an exit status or end
//! the process: how the run ended is `cli::exit`'s to decide, and only
//! `main` exits.

use std::sync::{Arc, OnceLock};

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::render::{self, Format};

/// The signal that stopped a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Signal {
    /// SIGINT: Ctrl-C.
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl Signal {
    /// Its name, as a log line says it.
    pub(super) fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
        }
    }
}

/// A run's stop: its cancellation, and the signal that cancelled it (none
/// when it was cancelled otherwise, as `run_on`'s caller can, or not at all).
#[derive(Clone)]
pub(super) struct Stop {
    pub(super) cancel: CancellationToken,
    by: Arc<OnceLock<Signal>>,
}

impl Stop {
    pub(super) fn new(cancel: CancellationToken) -> Stop {
        Stop {
            cancel,
            by: Arc::new(OnceLock::new()),
        }
    }

    /// Records `signal` (the first one only) and cancels the run.
    fn signalled(&self, signal: Signal) {
        let _ = self.by.set(signal);
        self.cancel.cancel();
    }

    /// The signal that stopped the run, if one did.
    pub(super) fn by(&self) -> Option<Signal> {
        self.by.get().copied()
    }
}

/// Who says that a signal stopped the run, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Notice {
    /// A command: a Ctrl-C notice (SIGTERM ends the process).
    Run,
    /// A watch: a log line in its format.
    Watch(Format),
    /// The MCP server: it says so itself.
    Server,
}

/// The handlers of one run.
pub(super) struct Signals {
    task: Option<JoinHandle<()>>,
    quit: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl Signals {
    /// A converging or read-only command (`watch`: false) or a watch (`watch`:
    /// true, its lines in `format`): the first signal stops `stop`, a second
    /// Ctrl-C quits. The handlers are in place when this returns.
    pub(super) fn stop(stop: &Stop, watch: bool, format: Format) -> Signals {
        Signals::handle(
            stop,
            if watch {
                Notice::Watch(format)
            } else {
                Notice::Run
            },
        )
    }

    /// The MCP server: SIGTERM or a first Ctrl-C stops `stop` (the server
    /// says so itself, with the calls in flight), a second Ctrl-C quits.
    pub(super) fn serve(stop: &Stop) -> Signals {
        Signals::handle(stop, Notice::Server)
    }

    fn handle(stop: &Stop, notice: Notice) -> Signals {
        let none = || Signals {
            task: None,
            quit: None,
        };
        let Ok(mut int) = signal(SignalKind::interrupt()) else {
            return none();
        };
        // SIGTERM keeps its default (the process ends) for every command
        // but watch and mcp: a handler, once set, stays for the process's life.
        let mut term = if notice != Notice::Run {
            match signal(SignalKind::terminate()) {
                Ok(term) => Some(term),
                Err(_) => return none(),
            }
        } else {
            None
        };
        let (quit_tx, quit) = tokio::sync::oneshot::channel();
        let stop = stop.clone();
        let task = tokio::spawn(async move {
            if let Some(term) = term.as_mut() {
                let signal = tokio::select! {
                    _ = term.recv() => Signal::Terminate,
                    _ = int.recv() => Signal::Interrupt,
                };
                stop.signalled(signal);
                if let Notice::Watch(format) = notice {
                    let time = crate::cli::config::log_time();
                    render::stderr(&render::watch_stopping(format, &time, signal.name()));
                }
            } else {
                if int.recv().await.is_none() {
                    return;
                }
                stop.signalled(Signal::Interrupt);
                render::stderr(&render::interrupt_notice());
            }
            if int.recv().await.is_some() {
                let _ = quit_tx.send(());
            }
        });
        Signals {
            task: Some(task),
            quit: Some(quit),
        }
    }

    /// `hold`: every SIGINT and SIGTERM this process gets, sent to `passed`
    /// (hold passes it on to its command). The handlers are in place when
    /// this returns (before the lease is taken): from then on neither signal
    /// ends this process.
    pub(super) fn pass(passed: UnboundedSender<i32>) -> Signals {
        let handlers = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        );
        let task = tokio::spawn(async move {
            let (Ok(mut term), Ok(mut int)) = handlers else {
                return;
            };
            loop {
                let number = tokio::select! {
                    _ = term.recv() => libc::SIGTERM,
                    _ = int.recv() => libc::SIGINT,
                };
                if passed.send(number).is_err() {
                    return;
                }
            }
        });
        Signals {
            task: Some(task),
            quit: None,
        }
    }

    /// Resolves on a second Ctrl-C (never, for `hold` or when no handler
    /// could be set).
    pub(super) async fn quit(&mut self) {
        if let Some(quit) = self.quit.as_mut() {
            if quit.await.is_ok() {
                return;
            }
        }
        std::future::pending().await
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// The signal numbers `hold` passes on to its command when it runs without
/// handlers of its own (`run_on`): SIGTERM once `stop` is cancelled.
pub(super) fn terminate_on_cancel(stop: &Stop) -> (UnboundedReceiver<i32>, JoinHandle<()>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let cancelled = stop.cancel.clone();
    let task = tokio::spawn(async move {
        cancelled.cancelled().await;
        let _ = tx.send(libc::SIGTERM);
    });
    (rx, task)
}
