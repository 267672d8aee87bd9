//! The server's end of stdio: newline-delimited JSON-RPC (rmcp's reader and
//! writer), with the tool calls in flight tracked on the way (`Calls`).
//!
//! Owns one thing rmcp does not do: a `notifications/cancelled` for a tool
//! call in flight is kept from rmcp and cancels that call's own run
//! instead, so the call still answers, with its verified report
//! (`interrupted: true`), as a Ctrl-C'd command does; rmcp would drop the
//! answer of a call it saw cancelled. Cancellations of anything else pass
//! through. End of input stops every call (the server then ends). Must not
//! read or change what a message means otherwise.

use rmcp::model::{ClientNotification, ClientRequest, JsonRpcMessage};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use super::calls::Calls;

/// The longest request line read (1 MiB); a longer one is dropped unread.
/// Every tool's arguments fit in far less.
pub(super) const MAX_LINE: usize = 1 << 20;

/// `inner`, with the calls it carries told to `calls`.
pub(super) struct Tracked<T> {
    inner: T,
    calls: Calls,
}

impl<T> Tracked<T> {
    pub(super) fn new(inner: T, calls: Calls) -> Self {
        Tracked { inner, calls }
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Tracked<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let answered = match &item {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => None,
        };
        if let Some(id) = answered {
            self.calls.answered(id);
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let Some(message) = self.inner.receive().await else {
                // End of input: nobody will ask again; every call stops.
                self.calls.stop();
                return None;
            };
            match &message {
                JsonRpcMessage::Request(request)
                    if matches!(request.request, ClientRequest::CallToolRequest(_)) =>
                {
                    self.calls.open(&request.id);
                }
                JsonRpcMessage::Notification(notification) => {
                    if let ClientNotification::CancelledNotification(cancelled) =
                        &notification.notification
                    {
                        let ours = cancelled
                            .params
                            .request_id
                            .as_ref()
                            .is_some_and(|id| self.calls.cancel(id));
                        if ours {
                            continue;
                        }
                    }
                }
                _ => {}
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
