//! MCP sessions: a call to a server the agent knows no session of runs the handshake first
//! (`initialize`, then `notifications/initialized`) as callouts of its own, and the session id the
//! server gives is kept for later calls. A 404 to a call sent in a session (or a 400 that says so)
//! means the session is gone: the call opens a new one, once. The host seeds the known sessions (`Agent::set_mcp_sessions`) and
//! keeps what the request leaves (`Agent::mcp_sessions`), one map per VM and configuration, so that
//! requests share a session; the agent itself reads no shared state. JSON-RPC ids are
//! `<request id>-<call id>`: unique within the VM, so within any session requests share.

use super::batch::Batch;
use super::work::ToolCall;
use super::{Agent, CallId};
use crate::tools::{mcp, Binding, Tool};

/// Where an MCP call is in its session's handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Not sent yet: the call itself if the request has a session with the server, else `initialize`.
    Start,
    Initialize,
    Initialized,
    Call,
}

#[derive(Debug, Clone)]
pub struct Handshake {
    api: usize,
    path: String,
    step: Step,
    session: Option<String>,
    /// A new session was opened after the server lost the first one.
    reopened: bool,
    /// When the first step was sent, so that the call's time covers the handshake.
    started: Option<u64>,
}

impl Handshake {
    pub fn for_tool(tool: &Tool) -> Option<Box<Handshake>> {
        match &tool.binding {
            Binding::Mcp(t) => Some(Box::new(Handshake {
                api: tool.api,
                path: t.path.clone(),
                step: Step::Start,
                session: None,
                reopened: false,
                started: None,
            })),
            Binding::OpenApi(_) => None,
        }
    }
}

/// What a reply to an MCP step leads to.
pub enum Reply {
    /// The next step is queued.
    Next,
    /// The handshake failed: what the model is told.
    Failed(String),
    /// The reply is the tool's: read it as its observation.
    Observe,
}

impl Agent {
    /// The request to send now for `call` under `id` (the next step of an MCP call, or the call as it
    /// is), and when the call was first sent.
    pub(super) fn mcp_step(&mut self, id: CallId, mut call: ToolCall) -> (ToolCall, Option<u64>) {
        let Some(h) = call.mcp.as_mut() else {
            return (call, None);
        };
        let Some(api) = self.cfg.apis.get(h.api) else {
            return (call, None);
        };
        if h.step == Step::Start {
            match self.mcp_sessions.get(&h.api) {
                Some(session) => (h.step, h.session) = (Step::Call, session.clone()),
                None => h.step = Step::Initialize,
            }
        }
        let rpc_id = format!("{}-{}", self.meta.id, id.0);
        let request = match h.step {
            Step::Start | Step::Call => mcp::with_id(call.request.clone(), &rpc_id),
            Step::Initialize => mcp::with_id(mcp::initialize(api, &h.path), &rpc_id),
            Step::Initialized => mcp::initialized(api, &h.path),
        };
        let request = mcp::in_session(request, h.session.as_deref());
        let started = h.started;
        let send = ToolCall { cluster: call.cluster.clone(), request, timeout_ms: call.timeout_ms, mcp: None };
        self.mcp_calls.insert(id, call);
        (send, started)
    }

    /// Reads the reply to an MCP step: the next step is queued in `b`, or the handshake failed, or the
    /// reply is the tool's own.
    pub(super) fn mcp_reply(
        &mut self,
        b: &mut Batch,
        id: CallId,
        status: u16,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Reply {
        let Some(mut call) = self.mcp_calls.remove(&id) else {
            return Reply::Observe;
        };
        let Some(h) = call.mcp.as_mut() else {
            return Reply::Observe;
        };
        let name = b.name_of(id).unwrap_or_default().to_string();
        match h.step {
            Step::Initialize | Step::Initialized => {
                if let Some(why) = mcp::handshake_error(status, body) {
                    log::warn!("#{} MCP session for '{name}' (apis[{}]) failed: {why}", self.meta.id, h.api);
                    return Reply::Failed(format!(
                        "The call to '{name}' failed: no MCP session with its server ({why})."
                    ));
                }
                if h.step == Step::Initialize {
                    h.session = mcp::session_of(headers);
                    self.mcp_sessions.insert(h.api, h.session.clone());
                    h.step = Step::Initialized;
                } else {
                    h.step = Step::Call;
                }
            }
            Step::Call if h.session.is_some() && !h.reopened && mcp::session_lost(status, body) => {
                log::info!(
                    "#{} MCP session of apis[{}] is gone (HTTP {status}); opening a new one",
                    self.meta.id,
                    h.api
                );
                self.mcp_sessions.remove(&h.api);
                (h.step, h.session, h.reopened) = (Step::Start, None, true);
            }
            Step::Start | Step::Call => return Reply::Observe,
        }
        let sent = self.sent.remove(&id);
        h.started = h.started.or(sent);
        b.resume(id, call);
        Reply::Next
    }
}
