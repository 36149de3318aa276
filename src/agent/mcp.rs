//! MCP calls in the revision the server speaks (`tools::mcp::Revision`, negotiated, not configured).
//! A call to a server the request knows nothing of goes out in 2026-07-28 (no session); a server that
//! answers as a 2025 server does (`Refusal`) gets the handshake (`initialize`, then
//! `notifications/initialized`) as callouts of the call's own, and the call again in the session the
//! server gives. A 404 to a call sent in a session (or a 400 that says so) means the session is gone:
//! the call opens a new one, once; a session server that now speaks only 2026-07-28 gets the call in
//! it, once. What the request learns of each server (`Peer`) comes with the request
//! (`RequestMeta::memory`) and what changes goes back to the host (`learn.rs`), one map per VM and
//! configuration, so that requests share it; the agent itself reads no shared state. JSON-RPC ids are
//! `<request id>-<call id>`: unique within the VM, so within any session requests share.

use crate::config::Api;
use crate::tools::mcp::{self, Revision};
use crate::tools::Request;
use crate::vec_map::VecMap;

/// What requests know of an MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// It speaks 2026-07-28: calls go without a session.
    Modern,
    /// It needs the handshake, which this request has yet to run (a session is not shared).
    Legacy,
    /// A session in handshake revision `version` (`id` `None`: the server gave no session id).
    Session { version: &'static str, id: Option<String> },
}

/// `apis[]` index → what requests know of the server.
pub type Sessions = VecMap<usize, Peer>;

/// Where an MCP call is in its session's handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Not sent yet: the call itself unless the server needs a handshake the request has not run.
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
    /// The revision of the step to send.
    speaking: Revision,
    session: Option<String>,
    /// The call changed revision once (a refusal); it does not again.
    switched: bool,
    /// A new session was opened after the server lost the first one.
    reopened: bool,
    /// When the first step was sent, so that the call's time covers the handshake.
    started: Option<u64>,
}

impl Handshake {
    /// The handshake a call of MCP tool `tool` (of API `api`) starts with. The caller matches the
    /// tool's binding: an OpenAPI call never enters this file.
    pub fn new(api: usize, tool: &mcp::McpTool) -> Box<Handshake> {
        Box::new(Handshake {
            api,
            path: tool.path.clone(),
            step: Step::Start,
            speaking: Revision::Modern,
            session: None,
            switched: false,
            reopened: false,
            started: None,
        })
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
    /// the call itself in the revision the server speaks, or the next handshake step.
    /// `None`: the call's API is not configured (the call goes as it is).
    pub fn request(&mut self, apis: &[Api], sessions: &Sessions, call: &Request, rpc_id: &str) -> Option<Request> {
        let api = apis.get(self.api)?;
        if self.step == Step::Start {
            (self.step, self.speaking, self.session) = match sessions.get(&self.api) {
                None | Some(Peer::Modern) => (Step::Call, Revision::Modern, None),
                Some(Peer::Legacy) => (Step::Initialize, Revision::Legacy(mcp::PROTOCOL_VERSION), None),
                Some(Peer::Session { version, id }) => (Step::Call, Revision::Legacy(version), id.clone()),
            };
        }
        let request = match self.step {
            Step::Start | Step::Call => call.clone(),
            Step::Initialize => mcp::initialize(api, &self.path),
            Step::Initialized => mcp::initialized(api, &self.path),
        };
        let request = mcp::speaking(request, self.speaking, rpc_id);
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
    /// server said of its revision and session.
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
                let agreed = match self.step {
                    Step::Initialize => mcp::handshake_error(status, body).map_or_else(|| mcp::agreed(body), Err),
                    _ => mcp::handshake_error(status, body).map_or(Ok(self.speaking), Err),
                };
                let revision = match agreed {
                    Ok(revision) => revision,
                    Err(why) => {
                        log::warn!("#{request} MCP session for '{name}' (apis[{}]) failed: {why}", self.api);
                        sessions.remove(&self.api);
                        return Reply::Failed(format!(
                            "The call to '{name}' failed: no MCP session with its server ({why})."
                        ));
                    }
                };
                if self.step == Step::Initialize {
                    self.session = mcp::session_of(headers);
                    let peer = Peer::Session { version: revision.version(), id: self.session.clone() };
                    sessions.insert(self.api, peer);
                    (self.step, self.speaking) = (Step::Initialized, revision);
                } else {
                    self.step = Step::Call;
                }
            }
            Step::Call if self.session.is_some() && !self.reopened && mcp::session_lost(status, body) => {
                log::info!("#{request} MCP session of apis[{}] is gone (HTTP {status}); opening a new one", self.api);
                sessions.insert(self.api, Peer::Legacy);
                (self.step, self.session, self.reopened) = (Step::Initialize, None, true);
            }
            Step::Start | Step::Call => return self.on_call_reply(sessions, request, status, body),
        }
        Reply::Next
    }

    /// The call's own reply: the tool's, unless it says the server speaks another revision.
    fn on_call_reply(&mut self, sessions: &mut Sessions, request: &str, status: u16, body: &[u8]) -> Reply {
        let next = match mcp::refusal(status, body) {
            Some(refused) if !self.switched => refused.next(self.speaking).ok(),
            _ => None,
        };
        match next {
            Some(Revision::Modern) => {
                log::info!("#{request} MCP server of apis[{}] now speaks {}", self.api, mcp::MODERN);
                sessions.insert(self.api, Peer::Modern);
                (self.step, self.speaking, self.session) = (Step::Call, Revision::Modern, None);
            }
            Some(legacy) => {
                log::info!(
                    "#{request} MCP server of apis[{}] does not speak {}: opening a session",
                    self.api,
                    mcp::MODERN
                );
                sessions.insert(self.api, Peer::Legacy);
                (self.step, self.speaking) = (Step::Initialize, legacy);
            }
            None => {
                let worked = (200..300).contains(&status);
                if worked && self.speaking == Revision::Modern && sessions.get(&self.api) != Some(&Peer::Modern) {
                    sessions.insert(self.api, Peer::Modern);
                }
                return Reply::Observe;
            }
        }
        self.switched = true;
        Reply::Next
    }
}
