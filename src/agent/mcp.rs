//! MCP sessions: a call to a server the agent knows no session of runs the handshake first
//! (`initialize`, then `notifications/initialized`) as callouts of its own, and the session id the
//! server gives is kept for later calls. A 404 to a call sent in a session (or a 400 that says so)
//! means the session is gone: the call opens a new one, once. The known sessions come with the
//! request (`RequestMeta::memory`) and what changes goes back to the host (`learn.rs`), one map per VM
//! and configuration, so that requests share a session; the agent itself reads no shared state. JSON-RPC ids are
//! `<request id>-<call id>`: unique within the VM, so within any session requests share.

use crate::config::Api;
use crate::tools::{mcp, Binding, Request, Tool};
use crate::vec_map::VecMap;

/// `apis[]` index → session id (`None`: the server has none).
pub type Sessions = VecMap<usize, Option<String>>;

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
#[derive(Debug)]
pub enum Reply {
    /// The next step is queued.
    Next,
    /// The handshake failed: what the model is told.
    Failed(String),
    /// The reply is the tool's: read it as its observation.
    Observe,
}

impl Handshake {
    /// The request to send now for the call whose own request is `call` (`rpc_id`: its JSON-RPC id):
    /// the call itself if the request has a session with the server, else the next handshake step.
    /// `None`: the call's API is not configured (the call goes as it is).
    pub fn request(&mut self, apis: &[Api], sessions: &Sessions, call: &Request, rpc_id: &str) -> Option<Request> {
        let api = apis.get(self.api)?;
        if self.step == Step::Start {
            match sessions.get(&self.api) {
                Some(session) => (self.step, self.session) = (Step::Call, session.clone()),
                None => self.step = Step::Initialize,
            }
        }
        let request = match self.step {
            Step::Start | Step::Call => mcp::with_id(call.clone(), rpc_id),
            Step::Initialize => mcp::with_id(mcp::initialize(api, &self.path), rpc_id),
            Step::Initialized => mcp::initialized(api, &self.path),
        };
        Some(mcp::in_session(request, self.session.as_deref()))
    }

    /// When the call's first step was sent, so that its time covers the handshake.
    pub fn started(&self) -> Option<u64> {
        self.started
    }

    /// The step sent at `sent` was answered and the call goes on: the call's time starts there, if
    /// it has not yet.
    pub fn went_on(&mut self, sent: Option<u64>) {
        self.started = self.started.or(sent);
    }

    /// Reads the reply to the step sent for a call of `name` (request `#request`): the next step is
    /// due, or the handshake failed, or the reply is the tool's own. `sessions` learns what the
    /// server said of its session.
    pub fn on_reply(
        &mut self,
        sessions: &mut Sessions,
        request: &str,
        name: &str,
        status: u16,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Reply {
        match self.step {
            Step::Initialize | Step::Initialized => {
                if let Some(why) = mcp::handshake_error(status, body) {
                    log::warn!("#{request} MCP session for '{name}' (apis[{}]) failed: {why}", self.api);
                    return Reply::Failed(format!(
                        "The call to '{name}' failed: no MCP session with its server ({why})."
                    ));
                }
                if self.step == Step::Initialize {
                    self.session = mcp::session_of(headers);
                    sessions.insert(self.api, self.session.clone());
                    self.step = Step::Initialized;
                } else {
                    self.step = Step::Call;
                }
            }
            Step::Call if self.session.is_some() && !self.reopened && mcp::session_lost(status, body) => {
                log::info!("#{request} MCP session of apis[{}] is gone (HTTP {status}); opening a new one", self.api);
                sessions.remove(&self.api);
                (self.step, self.session, self.reopened) = (Step::Start, None, true);
            }
            Step::Start | Step::Call => return Reply::Observe,
        }
        Reply::Next
    }
}
