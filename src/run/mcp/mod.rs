//! `mcp`: the Model Context Protocol server on stdio, for agent hosts.
//!
//! Owns the server's life: its engines, scope and state file resolved once
//! when it starts (as every command's are), kept with their connections and
//! the memo of inspections between calls; each tool call checked
//! (`args.rs`), turned into the invocation of its CLI twin with `--format
//! json` (`cli::Args::for_tool`, resolved when the call comes: the clock,
//! the state file's boxes; a call whose engines or scope would differ from
//! the server's is refused) and run through the one run path (`run_tool`:
//! the one merge, `Exit::of`); the answer is the twin's JSON as
//! `structuredContent`, `isError` exactly when the twin would exit
//! non-zero, and a summary in words. Several calls run at once, each with
//! its own cancellation (`calls.rs`, `transport.rs`); a cancelled call
//! starts no new removal, verifies and answers with its report, as a
//! Ctrl-C'd command does. SIGTERM, Ctrl-C and the end of input stop every
//! call in flight the same way and end the server once they are answered.
//! The tools' definitions are `tools.rs`, progress `progress.rs`, every
//! word `render`'s. stdout carries only the protocol; the server's own
//! lines go to stderr (`Sink::err`).
//!
//! Must not decide what a call removes or whether it succeeded: that is
//! the run's, and `Exit::of`'s.

pub(crate) mod args;
mod calls;
mod progress;
mod tools;
mod transport;

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{QuitReason, RequestContext, RoleServer};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio_util::sync::CancellationToken;

use crate::cli::config::{log_time, resolve, Config, Job, Target};
use crate::cli::exit::Exit;
use crate::cli::{Args, Command};
use crate::engine::Engine;
use crate::exec::event::Observer;
use crate::exec::list::Memo;
use crate::exec::report::Verdict;
use crate::render;

use self::args::{ArgError, Call};
use self::calls::Calls;
use self::progress::Progress;
use self::tools::Tool;
use self::transport::{Tracked, MAX_LINE};
use super::context::{failed, Capture, Run, Sink};
use super::signals::Signal;

/// What the server tells an agent host about itself when it connects.
const INSTRUCTIONS: &str = "sandboxctl tears down sandbox boxes: a box is a container, its named volume and its network, labeled ca.sandbox=1 and ca.sandbox.id=<box id>. Call destroy with the IDs of the boxes you are done with, or prune to reclaim every leaked object; plan, inventory and explain change nothing. Only objects labeled ca.sandbox=1 in this server's scope are ever touched, and images are never removed. A result with isError true means something was left behind or could not be listed: its structured content names every such object with its reason. Take a lease on a box you still use, so that prune keeps it.";

/// Serves the protocol on `read` and `write` with `run`'s engines until the
/// end of input or `run`'s stop (SIGTERM, Ctrl-C), then waits for the calls
/// in flight to be verified and answered. `template` is the server's own
/// invocation. Each call's run is a local task, on a `LocalSet` of the
/// server's own.
pub(super) async fn serve<R, W>(
    run: &Run<'_>,
    template: &Args,
    read: R,
    write: W,
    sink: &mut dyn Sink,
) -> Verdict
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    tokio::task::LocalSet::new()
        .run_until(serve_here(run, template, read, write, sink))
        .await
}

/// [`serve`], on the `LocalSet` it runs in.
async fn serve_here<R, W>(
    run: &Run<'_>,
    template: &Args,
    read: R,
    write: W,
    sink: &mut dyn Sink,
) -> Verdict
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let calls = Calls::default();
    let (log, mut lines) = unbounded_channel();
    let offered = match &run.config.job {
        Job::Mcp { tools, .. } => Tool::offered(tools),
        _ => Tool::ALL.to_vec(),
    };
    let server = Server {
        offered,
        base: run.config.clone(),
        template: template.clone(),
        engines: run.engines.to_vec(),
        memo: run.memo.clone(),
        calls: calls.clone(),
        log,
    };
    sink.err(&render::mcp_started(
        &log_time(),
        run.endpoints,
        &run.config.scope.to_string(),
        &server.offered.iter().map(|t| t.name()).collect::<Vec<_>>(),
    ));
    let transport = Tracked::new(
        AsyncRwTransport::new_server(read, write).with_max_line_length(MAX_LINE),
        calls.clone(),
    );
    let service = CancellationToken::new();
    let started = tokio::select! {
        started = server.serve_with_ct(transport, service.clone()) => started,
        () = run.stop.cancel.cancelled() => {
            service.cancel();
            return failed(false);
        }
    };
    let running = match started {
        Ok(running) => running,
        // Closed before it asked anything: nothing to answer.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return failed(false),
        Err(e) => {
            sink.err(&render::error_line(&format!(
                "mcp: the client did not initialize the session: {e}"
            )));
            return failed(true);
        }
    };
    let mut service = Some(running.cancellation_token());
    let mut waiting = std::pin::pin!(running.waiting());
    let mut stopping = false;
    let quit = loop {
        tokio::select! {
            Some(line) = lines.recv() => sink.err(&line),
            () = run.stop.cancel.cancelled(), if !stopping => {
                stopping = true;
                let why = run.stop.by().map_or("SIGTERM", Signal::name);
                sink.err(&render::mcp_stopping(&log_time(), why, calls.counts().0));
                calls.stop();
            }
            // Every call answered: the protocol ends.
            () = calls.until(|open, running| open == 0 && running == 0), if stopping && service.is_some() => {
                if let Some(service) = service.take() {
                    service.cancel();
                }
            }
            quit = &mut waiting => break quit,
        }
    };
    if !stopping {
        // The end of input: the transport stopped every call.
        sink.err(&render::mcp_stopping(
            &log_time(),
            "end of input",
            calls.counts().1,
        ));
    }
    // Runs still going (their answers could not be sent: nobody reads) are
    // verified before the server ends.
    let settled = calls.until(|_, running| running == 0);
    tokio::pin!(settled);
    loop {
        tokio::select! {
            Some(line) = lines.recv() => sink.err(&line),
            () = &mut settled => break,
        }
    }
    while let Ok(line) = lines.try_recv() {
        sink.err(&line);
    }
    failed(matches!(quit, Err(_) | Ok(QuitReason::JoinError(_))))
}

/// The server: what every call shares.
struct Server {
    /// The tools it offers (`--read-only`, `--tools`), fixed when it starts:
    /// the only ones listed, the only ones a call may name.
    offered: Vec<Tool>,
    /// The server's own config, resolved when it started: its engines and
    /// scope are every call's.
    base: Config,
    template: Args,
    engines: Vec<Arc<dyn Engine>>,
    memo: Arc<Memo>,
    calls: Calls,
    /// The server's lines, said on stderr by `serve`.
    log: UnboundedSender<String>,
}

impl Server {
    /// The invocation `call` stands for, resolved now; refused when its
    /// engines or scope are not the server's (the state file changed them).
    fn config_of(&self, call: &Call) -> Result<Config, String> {
        let mut removal = self.template.removal();
        let command = match call.clone() {
            Call::Plan => Command::Plan {
                detailed_exitcode: false,
                out: None,
            },
            Call::Destroy {
                ids,
                keep_volume,
                missing_ok,
                reclaimed,
            } => {
                // `reclaimed: true` measures as `--reclaimed` does (the
                // server's own `--reclaimed` measures every call).
                removal.reclaimed |= reclaimed;
                Command::Destroy {
                    ids,
                    keep_volume,
                    prune: false,
                    missing_ok,
                    yes: false,
                    verbose: false,
                    removal,
                }
            }
            // The server's prune never asks (its tool call is not a
            // terminal: `for_tool` says so).
            Call::Prune { reclaimed } => {
                removal.reclaimed |= reclaimed;
                Command::Prune {
                    yes: false,
                    verbose: false,
                    removal,
                }
            }
            Call::Inventory => Command::Inventory,
            Call::Explain { object } => Command::Explain { object },
            Call::Lease { ids, ttl } => Command::Lease {
                boxes: ids,
                ttl,
                release: false,
            },
            Call::Release { ids } => Command::Lease {
                boxes: ids,
                ttl: std::time::Duration::ZERO,
                release: true,
            },
        };
        let mut config = resolve(self.template.for_tool(command)).map_err(|e| format!("{e:#}"))?;
        // A call maps onto its own target and never onto a wider one:
        // `destroy` names boxes (its arguments were refused otherwise).
        if let (Call::Destroy { .. }, Job::Converge { target, .. }) = (call, &config.job) {
            if !matches!(target, Target::Boxes { .. }) {
                return Err(
                    "destroy names no box; call prune to reclaim every leaked object".into(),
                );
            }
        }
        let base = &self.base;
        if config.scope != base.scope {
            return Err(format!(
                "the state file now gives the scope {}, but this server serves {}; restart the server to serve another scope",
                config.scope, base.scope
            ));
        }
        let (now, then) = (super::endpoints(&config), super::endpoints(base));
        if !now.iter().all(|t| then.contains(t)) {
            return Err(
                "the state file now names other engines than this server's; restart the server to serve them".into(),
            );
        }
        config.memo_file.clone_from(&base.memo_file);
        Ok(config)
    }

    /// One call, answered.
    async fn call(
        &self,
        tool: Tool,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        if self.calls.stopping() {
            return refused(
                "the server is stopping (SIGTERM, Ctrl-C or the end of input); nothing was done",
            );
        }
        let call = match args::parse(tool, request.arguments.as_ref()) {
            Ok(call) => call,
            Err(e) => return refused(&bad_arguments(&e)),
        };
        let config = match self.config_of(&call) {
            Ok(config) => config,
            Err(e) => return refused(&format!("{}: {e}; nothing was done", tool.name())),
        };
        let removes = matches!(call, Call::Destroy { .. } | Call::Prune { .. });
        let progress = context
            .meta
            .get_progress_token()
            .filter(|_| removes)
            .map(|token| Progress::new(token, context.peer.clone()));
        let cancel = self.calls.token(&context.id);
        let mut capture = Capture::default();
        let exit = super::run_tool(
            &config,
            self.engines.clone(),
            cancel,
            self.memo.clone(),
            progress.as_ref().map(|p| p as &dyn Observer),
            &mut capture,
        )
        .await;
        if let Some(progress) = progress {
            progress.finish().await;
        }
        answer(tool, exit, &capture)
    }
}

/// The text of refused arguments.
fn bad_arguments(e: &ArgError) -> String {
    format!("{e}; nothing was done")
}

/// A call refused before any engine call.
fn refused(text: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!("{text}\n"))])
}

/// The answer of a call that ran: the CLI twin's JSON document as the
/// structured content, an error exactly when the twin would exit
/// non-zero, and the summary. A run refused before any engine work (the
/// audit log cannot be opened) is answered as a refused call, in words:
/// its error document is not the tool's result.
fn answer(tool: Tool, exit: Exit, capture: &Capture) -> CallToolResult {
    let failed = exit != Exit::Success;
    let doc = serde_json::from_str::<Value>(capture.out.trim())
        .ok()
        .filter(Value::is_object)
        .filter(|doc| !doc.get("error").is_some_and(Value::is_object));
    let text = render::tool_text(tool.name(), doc.as_ref(), failed, &capture.err);
    // The words first; then, for hosts that show a model only the text,
    // the structured content itself as JSON (the protocol's advice).
    let mut content = vec![ContentBlock::text(text)];
    content.extend(
        doc.as_ref()
            .map(|doc| ContentBlock::text(render::tool_json(doc))),
    );
    let mut result = if failed {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = doc;
    result
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info = Implementation::new("sandboxctl", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(INSTRUCTIONS.into());
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(
            self.offered.iter().map(|t| t.listed()).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // A tool this server does not offer is unknown to it, as the
        // protocol says (-32602): nothing is run.
        let offered = Tool::named(&request.name).filter(|t| self.offered.contains(t));
        let Some(tool) = offered else {
            let names: Vec<&str> = self.offered.iter().map(|t| t.name()).collect();
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool {:?}; this server's tools are {}",
                    crate::text::clip(&request.name, 80),
                    names.join(", ")
                ),
                None,
            ));
        };
        let running = self.calls.running();
        let started = Instant::now();
        let result = self.call(tool, &request, &context).await;
        let failed = result.is_error == Some(true);
        let first = result
            .content
            .first()
            .and_then(|c| c.as_text())
            .and_then(|t| t.text.lines().next().map(str::to_string));
        let _ = self.log.send(render::mcp_call(
            &log_time(),
            tool.name(),
            failed,
            started.elapsed().as_millis(),
            first.as_deref().filter(|_| failed),
        ));
        drop(running);
        Ok(result.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(out: &str, err: &str) -> Capture {
        Capture {
            out: out.into(),
            err: err.into(),
        }
    }

    #[test]
    fn a_call_is_an_error_exactly_when_its_twin_exits_non_zero() {
        let report = r#"{"converged": true, "removed": {}, "kept": {}, "retained": {"images": []}, "failures": [], "interrupted": false}"#;
        for (exit, error) in [
            (Exit::Success, false),
            (Exit::Failure, true),
            (Exit::Interrupted, true),
            (Exit::Pending, true),
            (Exit::Passed(3), true),
        ] {
            let result = answer(Tool::Destroy, exit, &captured(report, ""));
            assert_eq!(result.is_error, Some(error), "{exit:?}");
            assert_eq!(
                result.structured_content.as_ref().unwrap()["converged"],
                true,
                "the document is passed as it is"
            );
            let text = result.content[0].as_text().unwrap().text.clone();
            assert_eq!(text.contains("Converged:"), !error, "{exit:?}: {text}");
            // The second block is the structured content, as JSON.
            assert_eq!(result.content.len(), 2);
            let json: Value =
                serde_json::from_str(&result.content[1].as_text().unwrap().text).unwrap();
            assert_eq!(Some(&json), result.structured_content.as_ref());
        }
    }

    #[test]
    fn a_run_without_a_document_is_an_error_with_its_words() {
        let result = answer(
            Tool::Plan,
            Exit::Failure,
            &captured("", "error: no state file\n"),
        );
        assert_eq!(result.is_error, Some(true));
        assert!(result.structured_content.is_none());
        let text = &result.content[0].as_text().unwrap().text;
        assert!(text.contains("error: no state file"), "{text}");
        assert_eq!(result.content.len(), 1, "no document, no JSON block");
        // Not an object (no tool prints one): not structured content.
        let result = answer(Tool::Explain, Exit::Success, &captured("[1]", ""));
        assert!(result.structured_content.is_none());
    }
}
