//! The tool calls in flight: each one's own cancellation, how many are still
//! running, and whether the server is stopping.
//!
//! Owns the bookkeeping that the transport (`transport.rs`: a call starts
//! when its request comes in, ends when its answer goes out, and a
//! `notifications/cancelled` for it cancels it here) and the server
//! (`mod.rs`: a call's run holds a `Running` guard; SIGTERM and EOF stop
//! every call) share. Must not decide what a call does: a cancelled call's
//! run stops starting removals, verifies and answers, as a Ctrl-C does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rmcp::model::RequestId;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The calls in flight, shared by the transport and the server.
#[derive(Clone, Default)]
pub(super) struct Calls(Arc<Shared>);

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Woken on every change (a call started, ran out, was answered).
    changed: Notify,
}

#[derive(Default)]
struct State {
    /// Calls whose answer has not gone out yet, each with its cancellation.
    open: HashMap<RequestId, CancellationToken>,
    /// Calls whose run has not ended yet.
    running: usize,
    /// SIGTERM, Ctrl-C or EOF: every open call is cancelled and new ones are refused.
    stopping: bool,
}

impl Calls {
    fn state(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn changed(&self) {
        self.0.changed.notify_waiters();
    }

    /// A `tools/call` came in as `id`: its cancellation, cancelled at once
    /// when the server is stopping.
    pub(super) fn open(&self, id: &RequestId) {
        let token = CancellationToken::new();
        let mut state = self.state();
        if state.stopping {
            token.cancel();
        }
        state.open.insert(id.clone(), token);
        drop(state);
        self.changed();
    }

    /// The answer to `id` goes out: the call is no longer open.
    pub(super) fn answered(&self, id: &RequestId) {
        let removed = self.state().open.remove(id).is_some();
        if removed {
            self.changed();
        }
    }

    /// `notifications/cancelled` for `id`: cancels it if it is an open call
    /// (true: the notification is for this server's calls, not the protocol
    /// layer's).
    pub(super) fn cancel(&self, id: &RequestId) -> bool {
        match self.state().open.get(id) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// The cancellation of call `id` (a token never cancelled when `id` is
    /// not open: the transport opens every call before the server sees it).
    pub(super) fn token(&self, id: &RequestId) -> CancellationToken {
        self.state().open.get(id).cloned().unwrap_or_default()
    }

    /// The server is stopping: every open call is cancelled, and the calls
    /// that come after are refused.
    pub(super) fn stop(&self) {
        let mut state = self.state();
        state.stopping = true;
        for token in state.open.values() {
            token.cancel();
        }
        drop(state);
        self.changed();
    }

    pub(super) fn stopping(&self) -> bool {
        self.state().stopping
    }

    /// A run starts: it counts as running until the guard is dropped.
    pub(super) fn running(&self) -> Running {
        self.state().running += 1;
        self.changed();
        Running(self.clone())
    }

    /// Open calls and running runs.
    pub(super) fn counts(&self) -> (usize, usize) {
        let state = self.state();
        (state.open.len(), state.running)
    }

    /// Resolves once `done` holds of the counts (open calls, running runs).
    pub(super) async fn until(&self, done: impl Fn(usize, usize) -> bool) {
        loop {
            let changed = self.0.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let (open, running) = self.counts();
            if done(open, running) {
                return;
            }
            changed.await;
        }
    }
}

/// A run in progress; dropping it ends it.
pub(super) struct Running(Calls);

impl Drop for Running {
    fn drop(&mut self) {
        let calls = &self.0;
        {
            let mut state = calls.state();
            state.running = state.running.saturating_sub(1);
        }
        calls.changed();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: i64) -> RequestId {
        RequestId::Number(n)
    }

    #[test]
    fn a_cancellation_reaches_only_the_open_call_it_names() {
        let calls = Calls::default();
        calls.open(&id(1));
        calls.open(&id(2));
        assert!(calls.cancel(&id(2)));
        assert!(
            !calls.cancel(&RequestId::String("2".into())),
            "a string ID is another ID"
        );
        assert!(!calls.cancel(&id(3)));
        assert!(!calls.token(&id(1)).is_cancelled());
        assert!(calls.token(&id(2)).is_cancelled());
        calls.answered(&id(2));
        assert!(!calls.cancel(&id(2)), "answered: no longer open");
        assert_eq!(calls.counts(), (1, 0));
    }

    #[test]
    fn stopping_cancels_every_open_call_and_every_later_one() {
        let calls = Calls::default();
        calls.open(&id(1));
        calls.stop();
        assert!(calls.token(&id(1)).is_cancelled());
        calls.open(&id(2));
        assert!(calls.token(&id(2)).is_cancelled());
        assert!(calls.stopping());
    }

    #[tokio::test]
    async fn until_waits_for_the_runs_to_end() {
        let calls = Calls::default();
        let run = calls.running();
        assert_eq!(calls.counts(), (0, 1));
        let waiter = {
            let calls = calls.clone();
            tokio::spawn(async move { calls.until(|_, running| running == 0).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(run);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("the waiter wakes")
            .unwrap();
    }
}
