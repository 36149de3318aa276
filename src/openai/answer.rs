//! What the client receives: a `chat.completion`, the same answer as a `chat.completion.chunk` SSE
//! stream, or an OpenAI error object (as JSON, or as an SSE error event for streaming clients).

use super::message::CallKind;
use super::Usage;
use serde::Serialize;
use serde_json::Value;

pub const JSON: &str = "application/json";
pub const SSE: &str = "text/event-stream";

/// Why the answer ends, as the client reads it (its serde names and `as_str` agree: a test checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    Stop,
    /// The loop ran out of turns (or the model kept repeating an invalid action).
    Length,
    /// The client's own tool calls (or calls that need its approval) are returned to it.
    ToolCalls,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
        }
    }
}

/// A final answer, rendered the same way for every path that ends the loop.
#[derive(Debug, Clone)]
pub struct Answer<'a> {
    pub id: &'a str,
    pub created: u64,
    pub model: &'a str,
    pub content: &'a str,
    pub finish_reason: FinishReason,
    pub usage: Usage,
    /// The client's own tool calls, returned for it to run (native mode).
    pub tool_calls: Option<&'a Value>,
    /// The agent's steps, when the client asked for them (`api_agent_steps`).
    pub steps: Option<Value>,
    /// The final turn's reasoning, as `reasoning_content` (what DeepSeek's API and reasoning-aware
    /// clients use).
    pub reasoning: Option<&'a str>,
}

/// The chat usage object (reasoning tokens are the Responses API's to report).
#[derive(Serialize)]
struct ChatUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
}

impl From<Usage> for ChatUsage {
    fn from(u: Usage) -> ChatUsage {
        ChatUsage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u.total_tokens,
        }
    }
}

#[derive(Serialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Role {
    Assistant,
}

/// The `chat.completion` object.
#[derive(Serialize)]
struct Completion<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [Choice<'a>; 1],
    usage: ChatUsage,
    #[serde(skip_serializing_if = "Option::is_none")]
    api_agent_steps: Option<&'a Value>,
}

#[derive(Serialize)]
struct Choice<'a> {
    index: u8,
    message: AnswerMessage<'a>,
    logprobs: Option<()>,
    finish_reason: FinishReason,
}

/// The answer's message: text (with the reasoning before `refusal`), or the client's tool calls
/// (whose turn a client sends back, the reasoning with it).
#[derive(Serialize)]
#[serde(untagged)]
enum AnswerMessage<'a> {
    Text {
        role: Role,
        content: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<&'a str>,
        refusal: Option<()>,
    },
    Calls {
        role: Role,
        content: Option<&'a str>,
        refusal: Option<()>,
        tool_calls: &'a Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<&'a str>,
    },
}

pub fn completion(a: &Answer<'_>) -> Vec<u8> {
    let message = match a.tool_calls {
        Some(tool_calls) => AnswerMessage::Calls {
            role: Role::Assistant,
            content: Some(a.content).filter(|c| !c.is_empty()),
            refusal: None,
            tool_calls,
            reasoning_content: a.reasoning,
        },
        None => AnswerMessage::Text {
            role: Role::Assistant,
            content: a.content,
            reasoning_content: a.reasoning,
            refusal: None,
        },
    };
    let c = Completion {
        id: a.id,
        object: "chat.completion",
        created: a.created,
        model: a.model,
        choices: [Choice { index: 0, message, logprobs: None, finish_reason: a.finish_reason }],
        usage: a.usage.into(),
        api_agent_steps: a.steps.as_ref(),
    };
    // Sized once, as the hand-written writer was: the answer is on every request's path.
    let mut out = Vec::with_capacity(a.content.len() + 320);
    // Typed values into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, &c);
    out
}

/// A `chat.completion.chunk`: one choice's delta, or (`choices` empty) the usage at the end.
#[derive(Serialize)]
struct Chunk<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: Vec<ChunkChoice<'a>>,
    /// `null` on every chunk when the client asked for usage, the counts on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Option<ChatUsage>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    api_agent_steps: Option<&'a Value>,
}

#[derive(Serialize)]
struct ChunkChoice<'a> {
    index: u8,
    delta: Delta<'a>,
    logprobs: Option<()>,
    finish_reason: Option<FinishReason>,
}

#[derive(Serialize, Default)]
struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<Role>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<[CallDelta<'a>; 1]>,
}

/// A tool call whole in one delta, by its index.
#[derive(Serialize)]
struct CallDelta<'a> {
    index: usize,
    id: Option<&'a Value>,
    #[serde(rename = "type")]
    kind: CallKind,
    function: FunctionDelta<'a>,
}

#[derive(Serialize)]
struct FunctionDelta<'a> {
    name: Option<&'a Value>,
    arguments: Option<&'a Value>,
}

/// Each tool call as one `delta.tool_calls` entry, by index, as OpenAI streams them.
fn tool_call_deltas(calls: Option<&Value>) -> impl Iterator<Item = Delta<'_>> {
    calls.and_then(Value::as_array).into_iter().flatten().enumerate().map(|(index, c)| Delta {
        tool_calls: Some([CallDelta {
            index,
            id: c.get("id"),
            kind: CallKind::Function,
            function: FunctionDelta { name: c.pointer("/function/name"), arguments: c.pointer("/function/arguments") },
        }]),
        ..Delta::default()
    })
}

/// What every chunk of one answer's stream repeats.
#[derive(Debug, Clone, Copy)]
pub struct ChunkHead<'a> {
    pub id: &'a str,
    pub created: u64,
    pub model: &'a str,
    /// The client asked for a usage chunk (`stream_options.include_usage`); every chunk then has
    /// `"usage": null`.
    pub include_usage: bool,
}

impl<'h> ChunkHead<'h> {
    fn chunk<'a>(&self, delta: Delta<'a>, finish_reason: Option<FinishReason>) -> Chunk<'a>
    where
        'h: 'a,
    {
        Chunk {
            id: self.id,
            object: "chat.completion.chunk",
            created: self.created,
            model: self.model,
            choices: vec![ChunkChoice { index: 0, delta, logprobs: None, finish_reason }],
            usage: self.include_usage.then_some(None),
            api_agent_steps: None,
        }
    }

    /// The first event of a stream: the assistant's role.
    pub fn role_event(&self) -> Vec<u8> {
        event(&self.chunk(Delta { role: Some(Role::Assistant), content: Some(""), ..Delta::default() }, None))
    }

    /// One content delta.
    pub fn content_event(&self, text: &str) -> Vec<u8> {
        event(&self.chunk(Delta { content: Some(text), ..Delta::default() }, None))
    }

    /// One reasoning delta: the model's thinking, before its content.
    pub fn reasoning_event(&self, text: &str) -> Vec<u8> {
        event(&self.chunk(Delta { reasoning_content: Some(text), ..Delta::default() }, None))
    }
}

/// Role chunk, content chunk, tool-call chunks, finish chunk, then a usage chunk when asked for, then
/// `[DONE]`.
pub fn chunks(a: &Answer<'_>, include_usage: bool) -> Vec<u8> {
    let head = ChunkHead { id: a.id, created: a.created, model: a.model, include_usage };
    let mut out = head.role_event();
    if let Some(r) = a.reasoning.filter(|r| !r.is_empty()) {
        out.extend(head.reasoning_event(r));
    }
    out.extend(rest(a, &head, a.content));
    out
}

/// The end of a stream whose role chunk (and part of the content) already went out: `content` is
/// what is left of the answer's text.
pub fn rest(a: &Answer<'_>, head: &ChunkHead<'_>, content: &str) -> Vec<u8> {
    let mut events = Vec::new();
    if !content.is_empty() || (a.tool_calls.is_none() && a.content.is_empty()) {
        events.push(head.chunk(Delta { content: Some(content), ..Delta::default() }, None));
    }
    events.extend(tool_call_deltas(a.tool_calls).map(|d| head.chunk(d, None)));
    events.push(head.chunk(Delta::default(), Some(a.finish_reason)));
    if head.include_usage {
        let mut last = head.chunk(Delta::default(), None);
        last.choices.clear();
        last.usage = Some(Some(a.usage.into()));
        events.push(last);
    }
    if let Some(last) = events.last_mut() {
        // On the last chunk before [DONE]: clients ignore unknown fields.
        last.api_agent_steps = a.steps.as_ref();
    }
    let mut out = Vec::with_capacity(content.len() * 2 + 512);
    for e in &events {
        push_event(&mut out, &serde_json::to_vec(e).unwrap_or_default());
    }
    push_event(&mut out, b"[DONE]");
    out
}

fn event(chunk: &Chunk<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    push_event(&mut out, &serde_json::to_vec(chunk).unwrap_or_default());
    out
}

/// An SSE comment: keeps the connection busy while tools run; clients skip it.
pub const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// `{"error": {"message", "type", "param", "code"}}`.
pub fn error(message: &str, kind: &str, code: &str) -> Value {
    error_at(message, kind, code, None)
}

/// An error about the request field `param`.
pub fn error_at(message: &str, kind: &str, code: &str, param: Option<&str>) -> Value {
    super::message::to_value(&ErrorObject { error: ErrorBody { message, kind, param, code } })
}

#[derive(Serialize)]
struct ErrorObject<'a> {
    error: ErrorBody<'a>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    param: Option<&'a str>,
    code: &'a str,
}

/// An error in the body of a response whose status 200 is already out: the error object with
/// `"choices": []`. Measured with the official clients: LangChain (`invoke` and structured output) and
/// litellm's async client then raise with the message, and the OpenAI SDKs fail on `choices[0]`
/// rather than on `None`; no 200 body makes the OpenAI SDKs themselves raise.
pub fn late_error(mut err: Value) -> Vec<u8> {
    if let Value::Object(m) = &mut err {
        m.insert("choices".into(), Value::Array(Vec::new()));
    }
    err.to_string().into_bytes()
}

pub fn error_sse(err: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    push_event(&mut out, err.to_string().as_bytes());
    push_event(&mut out, b"[DONE]");
    out
}

fn push_event(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
}
