//! Progress of a call that removes: an observer of the run's events that
//! counts the steps planned and finished, sent to the client as
//! `notifications/progress` (done/total) when its request carried a
//! `progressToken`.
//!
//! Owns the counting and the sending, in order, each count once. The
//! observer is called inside the run and must not wait: it hands the count
//! to a task that sends it. Must not decide anything.

use std::cell::Cell;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio::task::JoinHandle;

use crate::exec::event::{Event, Observer};

/// Counts steps and hands each new count to the sender.
pub(super) struct Progress {
    planned: Cell<usize>,
    finished: Cell<usize>,
    /// The progress last sent: each one sent is more than the one before.
    sent: Cell<Option<usize>>,
    counts: Option<UnboundedSender<(usize, usize)>>,
    sender: JoinHandle<()>,
}

impl Progress {
    /// Progress of the request with `token`, told to `peer`.
    pub(super) fn new(token: ProgressToken, peer: Peer<RoleServer>) -> Progress {
        let (counts, mut rx) = unbounded_channel::<(usize, usize)>();
        let sender = tokio::task::spawn_local(async move {
            while let Some((done, total)) = rx.recv().await {
                let param = ProgressNotificationParam::new(token.clone(), done as f64)
                    .with_total(total as f64);
                // A client gone away is the server's to notice, not progress's.
                if peer.notify_progress(param).await.is_err() {
                    return;
                }
            }
        });
        Progress {
            planned: Cell::new(0),
            finished: Cell::new(0),
            sent: Cell::new(None),
            counts: Some(counts),
            sender,
        }
    }

    /// Sends the counts, unless the progress is what was sent last (a
    /// second engine planned before anything finished: the total grows
    /// with the next step).
    fn tell(&self) {
        let done = self.finished.get();
        if self.sent.get().is_some_and(|sent| sent >= done) {
            return;
        }
        self.sent.set(Some(done));
        if let Some(counts) = &self.counts {
            let _ = counts.send((done, self.planned.get()));
        }
    }

    /// Every count told so far has been sent (before the call's answer).
    pub(super) async fn finish(mut self) {
        self.counts = None;
        let _ = (&mut self.sender).await;
    }
}

impl Observer for Progress {
    fn on(&self, event: &Event<'_>) {
        match event {
            Event::Planned { plan, .. } => {
                self.planned.set(self.planned.get() + plan.steps.len());
                self.tell();
            }
            Event::Finished { .. } => {
                self.finished.set(self.finished.get() + 1);
                self.tell();
            }
            _ => {}
        }
    }
}
