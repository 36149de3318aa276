//! A turn's tool work: what each call the model asked for becomes (a request to send, a refusal, a
//! call that needs the client's approval), and what its reply tells the model; and the turn's
//! `Batch`: its calls sent at most `limit` at a time, answered in any order, their observations
//! returned in the order of the calls. A call whose API allows retries is kept until it is answered,
//! so that it can be sent again after a backoff.

use crate::agent::mcp::Handshake;
use crate::agent::protocol::{Call, CallId, Event};
use crate::config::Config;
use crate::doc::truncate;
use crate::tools::{self, Binding, Tool};
use crate::vec_map::VecMap;
use serde_json::{Map, Value};
use std::collections::VecDeque;

/// One tool call of a turn: a request to send, or an observation known already (bad arguments,
/// unknown tool, malformed output).
#[derive(Debug)]
pub enum Work {
    /// `retries`: how often the call may be sent again after a retryable failure; `note`: said to the
    /// model before the reply (e.g. arguments that were dropped).
    Call { name: String, call: ToolCall, retries: u32, note: Option<String>, args: String },
    /// Malformed output: what the model is told instead.
    Known(String),
    /// A call of `name` refused before sending (unknown tool, arguments its schema refuses): what the
    /// model is told, and why in a few words.
    Refused { name: String, observation: String, why: String },
    /// A call of a `policy.confirm` tool: it goes back to the client for approval (the arguments, as
    /// JSON text, were checked).
    Confirm { name: String, args: String },
    /// A `find_tools` call of a large catalog (`offer`): the tools found for `query`, described.
    Found { query: String, observation: String },
}

/// A tool request before it has a call id.
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// The `apis[]` entry of the tool.
    pub api: usize,
    pub cluster: String,
    pub request: tools::Request,
    pub timeout_ms: u64,
    /// An MCP tool's call: where it is in its session handshake (`agent::mcp`).
    pub mcp: Option<Box<Handshake>>,
}

impl ToolCall {
    /// The call as it goes out under `id`, with the client's identity (`identity`) added.
    pub fn into_call(self, id: CallId, timeout_ms: u64, identity: Vec<(String, String)>) -> Call {
        let mut r = self.request;
        r.headers.extend(identity);
        if !r.headers.iter().any(|(k, _)| k == "accept-encoding") {
            // A compressed body could not be read as an observation.
            r.headers.push(("accept-encoding".into(), "identity".into()));
        }
        Call {
            id,
            cluster: self.cluster,
            method: r.method,
            path: r.path,
            authority: r.authority,
            headers: r.headers,
            body: r.body.map(Into::into),
            timeout_ms,
            stream: false,
        }
    }
}

/// The request for `name` called with `input`, or what to tell the model instead.
pub fn tool_work(cfg: &Config, name: &str, input: Value) -> Work {
    let work = call_work(cfg, name, input);
    match work {
        Work::Call { name, args, .. } if cfg.confirm.contains(&name) => Work::Confirm { name, args },
        other => other,
    }
}

/// The request for a call the client approved.
pub fn approved_work(cfg: &Config, name: &str, input: Value) -> Work {
    call_work(cfg, name, input)
}

fn call_work(cfg: &Config, name: &str, input: Value) -> Work {
    let Some(tool) = cfg.tools.get(name) else {
        let observation = unknown_tool(cfg, name);
        return Work::Refused { name: name.to_string(), why: observation.clone(), observation };
    };
    let api = &cfg.apis[tool.api];
    let (args, note) = match arguments(tool, input) {
        Ok(args) => drop_unknown(tool, args),
        Err(why) => return refused(tool, why),
    };
    match tool.request(api, &args) {
        Ok(request) => Work::Call {
            name: tool.name.clone(),
            retries: tool.retries(api),
            call: ToolCall {
                api: tool.api,
                cluster: api.upstream.cluster.clone(),
                request,
                timeout_ms: api.upstream.timeout_ms,
                mcp: match &tool.binding {
                    Binding::Mcp(t) => Some(Handshake::new(tool.api, t)),
                    Binding::OpenApi(_) => None,
                },
            },
            note,
            args: args.to_string(),
        },
        Err(why) => refused(tool, note.map_or_else(|| why.clone(), |n| format!("{why} ({n})"))),
    }
}

/// What the model is told of a name no tool has: the tools' names, or, for a catalog too large to
/// list, where to search it.
fn unknown_tool(cfg: &Config, name: &str) -> String {
    let name = truncate(name, 100);
    if cfg.offer.is_some() {
        let find = crate::tools::search::FIND_TOOLS;
        return format!("Unknown tool '{name}'. Call '{find}' with what you want to do to find the right tool.");
    }
    let names: Vec<&str> = cfg.tools.iter().map(|t| t.name.as_str()).collect();
    format!("Unknown tool '{name}'. The tools are: {}.", names.join(", "))
}

fn refused(tool: &Tool, why: String) -> Work {
    Work::Refused {
        name: tool.name.clone(),
        observation: format!("Invalid arguments for '{}': {why}. Its parameters: {}", tool.name, tool.schema),
        why: format!("invalid arguments for '{}': {why}", tool.name),
    }
}

/// Keys the tool does not take are dropped, never sent (small models copy extra keys from examples);
/// the note tells the model which. Credentials are added after this, so no key can shadow one.
fn drop_unknown(tool: &Tool, mut args: Value) -> (Value, Option<String>) {
    let Some(props) = tool.schema.get("properties").and_then(Value::as_object) else {
        return (args, None);
    };
    let Value::Object(map) = &mut args else {
        return (args, None);
    };
    let unknown: Vec<String> = map.keys().filter(|k| !props.contains_key(*k)).cloned().collect();
    if unknown.is_empty() {
        return (args, None);
    }
    for k in &unknown {
        map.remove(k);
    }
    let names: Vec<String> = unknown.iter().map(|k| format!("'{}'", truncate(k, 60))).collect();
    let note = format!("{} not parameters of '{}' and were not sent", names.join(", "), tool.name);
    (args, Some(note))
}

/// The model's input as an arguments object. A plain string is accepted for a tool with a single
/// parameter, as ReAct models often write `"action_input": "Beijing"`.
fn arguments(tool: &Tool, input: Value) -> Result<Value, String> {
    match input {
        Value::Object(_) => Ok(input),
        Value::Null => Ok(Value::Object(Map::new())),
        Value::String(s) => {
            let props = tool.schema.get("properties").and_then(Value::as_object);
            match props.map(|p| p.keys().collect::<Vec<_>>()).as_deref() {
                Some([only]) => Ok(serde_json::json!({ only.as_str(): s })),
                Some([]) | None if s.trim().is_empty() => Ok(Value::Object(Map::new())),
                _ => Err("the input must be a JSON object of the tool's arguments".into()),
            }
        }
        other => Err(format!("the input must be a JSON object, not {}", crate::doc::type_name(&other))),
    }
}

/// The observation for a tool's reply, as the tool's binding reads it (a name no tool has, which
/// cannot happen for a call that was sent, is read as plain HTTP).
pub fn tool_observation(cfg: &Config, tool: &str, status: u16, headers: &[(String, String)], body: &[u8]) -> String {
    let max = cfg.llm.max_observation_bytes;
    match cfg.tools.get(tool) {
        Some(t) => t.observation(max, status, headers, body),
        None => tools::http_observation(tool, max, status, headers, body),
    }
}

#[derive(Debug)]
pub struct Batch {
    names: Vec<String>,
    results: Vec<Option<String>>,
    queue: VecDeque<(usize, ToolCall)>,
    in_flight: VecMap<CallId, usize>,
    /// MCP calls in flight, as they were before the step sent under each id (`agent::mcp`).
    mcp: VecMap<CallId, ToolCall>,
    /// Per call: retries allowed, retries sent, and the request kept for them.
    retries: Vec<(u32, u32, Option<ToolCall>)>,
    /// Per call: what the model is told before the reply (e.g. arguments that were dropped).
    notes: Vec<Option<String>>,
    /// Per call: the result came from the tool (not from the filter).
    real: Vec<bool>,
    /// Per call: the arguments sent, as JSON text (for the client's transcript).
    args: Vec<String>,
    /// Calls waiting for their backoff to end: (due, call index).
    delayed: Vec<(u64, usize)>,
    /// Token exchanges and the calls waiting for them (`agent::identity`).
    pub identity: Pending,
    limit: usize,
}

impl Batch {
    pub fn new(work: Vec<Work>, limit: usize) -> Batch {
        let mut b = Batch {
            names: Vec::new(),
            results: Vec::new(),
            queue: VecDeque::new(),
            in_flight: VecMap::new(),
            mcp: VecMap::new(),
            retries: Vec::new(),
            notes: Vec::new(),
            real: Vec::new(),
            args: Vec::new(),
            delayed: Vec::new(),
            identity: Pending::default(),
            limit: limit.max(1),
        };
        for (i, w) in work.into_iter().enumerate() {
            match w {
                Work::Confirm { name, .. } => {
                    // Not run here: the agent returns such calls to the client first.
                    b.names.push(name);
                    b.results.push(Some(String::new()));
                    b.retries.push((0, 0, None));
                    b.notes.push(None);
                    b.real.push(false);
                    b.args.push(String::new());
                }
                Work::Known(observation) | Work::Refused { observation, .. } | Work::Found { observation, .. } => {
                    b.names.push(String::new());
                    b.results.push(Some(observation));
                    b.retries.push((0, 0, None));
                    b.notes.push(None);
                    b.real.push(false);
                    b.args.push(String::new());
                }
                Work::Call { name, call, retries, note, args } => {
                    b.names.push(name);
                    b.results.push(None);
                    b.notes.push(note);
                    b.real.push(true);
                    b.args.push(args);
                    b.retries.push((retries, 0, (retries > 0).then(|| call.clone())));
                    b.queue.push_back((i, call));
                }
            }
        }
        b
    }

    /// The next call to send, if the concurrency limit allows one, under the id `mint` gives it.
    pub fn take(&mut self, mint: impl FnOnce() -> CallId) -> Option<(CallId, ToolCall)> {
        if self.in_flight.len() >= self.limit {
            return None;
        }
        let (i, call) = self.queue.pop_front()?;
        let id = mint();
        self.in_flight.insert(id, i);
        Some((id, call))
    }

    /// Keeps the MCP call whose step went out under `id`, to go on from once it is answered.
    pub fn hold(&mut self, id: CallId, call: ToolCall) {
        self.mcp.insert(id, call);
    }

    /// The MCP call whose step went out under `id`, once that step is answered.
    pub fn release(&mut self, id: CallId) -> Option<ToolCall> {
        self.mcp.remove(&id)
    }

    /// The tool of call `id`, while it is in flight.
    pub fn name_of(&self, id: CallId) -> Option<&str> {
        self.in_flight.get(&id).map(|i| self.names[*i].as_str())
    }

    /// The place of call `id` in its turn, while it is in flight.
    pub fn index_of(&self, id: CallId) -> Option<usize> {
        self.in_flight.get(&id).copied()
    }

    pub fn args_of(&self, id: CallId) -> Option<&str> {
        self.in_flight.get(&id).map(|i| self.args[*i].as_str())
    }

    pub fn waits_for(&self, id: CallId) -> bool {
        self.in_flight.contains_key(&id)
    }

    /// The event is for this batch: an answer to one of its calls, or a wake-up for its retries.
    pub fn takes(&self, event: &Event<'_>) -> bool {
        match event {
            Event::CallReply { id, .. } | Event::CallFailed { id, .. } => {
                self.waits_for(*id) || self.identity.calls.contains_key(id)
            }
            Event::Wake => true,
            _ => false,
        }
    }

    /// Stores the observation for call `id`, made from its tool's name.
    pub fn reply(&mut self, id: CallId, observation: impl FnOnce(&str) -> String) {
        if let Some(i) = self.in_flight.remove(&id) {
            let text = observation(&self.names[i]);
            self.results[i] = Some(match &self.notes[i] {
                Some(note) => format!("(Note: {note}.)\n{text}"),
                None => text,
            });
        }
    }

    /// The last result that came from a tool, once complete.
    pub fn last_real(&self) -> Option<&str> {
        self.results.iter().zip(&self.real).rev().find(|(_, real)| **real).and_then(|(r, _)| r.as_deref())
    }

    /// (retries sent, retries left) for call `id`, if it may be retried at all.
    pub fn attempts_left(&self, id: CallId) -> Option<(u32, u32)> {
        let i = *self.in_flight.get(&id)?;
        let (max, done, kept) = &self.retries[i];
        (kept.is_some() && done < max).then_some((*done, max - done))
    }

    /// Takes call `id` out of flight and queues it again once `due` has passed.
    pub fn retry_later(&mut self, id: CallId, due: u64) -> bool {
        if self.attempts_left(id).is_none() {
            return false;
        }
        let Some(i) = self.in_flight.remove(&id) else {
            return false;
        };
        self.retries[i].1 += 1;
        self.delayed.push((due, i));
        true
    }

    /// The earliest time a delayed call is due.
    pub fn next_due(&self) -> Option<u64> {
        self.delayed.iter().map(|(due, _)| *due).min().into_iter().chain(self.identity.next_due()).min()
    }

    /// Queues every delayed call that is due at `now_ms`.
    pub fn wake(&mut self, now_ms: u64) {
        let (due, later): (Vec<_>, Vec<_>) = self.delayed.drain(..).partition(|(d, _)| *d <= now_ms);
        self.delayed = later;
        for (_, i) in due {
            if let Some(call) = self.retries[i].2.clone() {
                self.queue.push_back((i, call));
            }
        }
    }

    /// Call `id` goes on as `call` (its next step), first in the queue, under a new id.
    pub fn resume(&mut self, id: CallId, call: ToolCall) {
        if let Some(i) = self.in_flight.remove(&id) {
            self.queue.push_front((i, call));
        }
    }

    /// Every call of the turn is answered.
    pub fn is_complete(&self) -> bool {
        self.results.iter().all(Option::is_some)
    }

    /// Every observation, in call order (once complete).
    pub fn into_observations(self) -> Vec<String> {
        self.results.into_iter().flatten().collect()
    }
}

/// Tool calls waiting for their API's token, and the exchanges of one batch.
#[derive(Debug, Default)]
pub struct Pending {
    /// Exchanges in flight: call id → (`apis[]` index, retries sent).
    pub calls: VecMap<CallId, (usize, u32)>,
    /// Exchanges waiting for their backoff: (due, `apis[]` index, retries sent).
    pub delayed: Vec<(u64, usize, u32)>,
    /// Tool calls waiting: (`apis[]` index, call id, call).
    pub parked: Vec<(usize, CallId, ToolCall)>,
}

impl Pending {
    /// An exchange for API `api` is in flight or waits for its retry.
    pub fn exchanging(&self, api: usize) -> bool {
        self.calls.values().any(|(a, _)| *a == api) || self.delayed.iter().any(|(_, a, _)| *a == api)
    }

    /// The parked calls of API `api`, taken out.
    pub fn unpark(&mut self, api: usize) -> Vec<(CallId, ToolCall)> {
        let (mine, rest): (Vec<_>, Vec<_>) = self.parked.drain(..).partition(|(a, _, _)| *a == api);
        self.parked = rest;
        mine.into_iter().map(|(_, id, call)| (id, call)).collect()
    }

    /// The delayed exchanges due at `now_ms`, taken out: (`apis[]` index, retries sent).
    pub fn due(&mut self, now_ms: u64) -> Vec<(usize, u32)> {
        let (due, later): (Vec<_>, Vec<_>) = self.delayed.drain(..).partition(|(d, _, _)| *d <= now_ms);
        self.delayed = later;
        due.into_iter().map(|(_, api, n)| (api, n)).collect()
    }

    pub fn next_due(&self) -> Option<u64> {
        self.delayed.iter().map(|(d, _, _)| *d).min()
    }
}
