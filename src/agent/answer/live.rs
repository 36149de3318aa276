//! Live streaming, on hosts that declare it (`RequestMeta::live`: the dynamic module) and for clients
//! that asked for a stream: every LLM turn is a streamed callout, and the final answer's text is
//! relayed as the model produces it. The client's SSE response starts (status 200, the role chunk)
//! when the loop first goes on to tools or when the first answer text comes, not before: a first turn
//! that fails still gets its real status. Keep-alive comments go out while tools run. In ReAct mode that is the
//! text after `Final Answer:`; in native mode, the content of the turn (content a turn sends before
//! it calls tools stays with the client, and what follows starts on a new paragraph). The model's
//! reasoning deltas go out as `reasoning_content` chunks as they come (with `reasoning.return`), and a
//! think block leading a turn's content is never relayed as its text.

use super::Wire;
use crate::agent::protocol::CallId;
use crate::config::Mode;
use crate::openai::reasoning::{opened_by_template, stream_state, Stream};
use crate::openai::sse::ChunkStream;

/// How long the client's stream may stay silent while the agent waits.
pub const KEEP_ALIVE_MS: u64 = 15_000;
const FINAL_MARKER: &str = "Final Answer:";
const QUESTION: &str = "\nQuestion:";
/// Set between the text of two turns that both went to the client.
const SEPARATOR: &str = "\n\n";
/// Room kept under maxResponseBytes for the stream's end (an error event, the finish chunks).
pub const END_RESERVE: usize = 1024;
/// How far back a marker split across two pieces can start.
const MARKER_SPAN: usize = 16;

#[derive(Debug)]
pub struct Live {
    mode: Mode,
    /// False in JSON mode: the answer is rewritten before the client sees it.
    relay: bool,
    /// How the events are written; the model they name is fixed when the stream opens.
    wire: Wire,
    opened_at: Option<u64>,
    /// The last time bytes went out.
    last_sent: u64,
    /// Bytes sent so far, to keep the whole response under maxResponseBytes (`limit`).
    pub sent_bytes: usize,
    limit: usize,
    turn: Option<Turn>,
    /// The answer text the last ended turn relayed (the final turn's is compared with its answer).
    last_relayed: String,
    /// Text of an earlier turn went to the client: the next turn's text starts a new paragraph.
    earlier: bool,
    /// Reasoning deltas are relayed (`reasoning.return`, and not in JSON mode).
    pub reasoning: bool,
    /// The server's chat template opens a think block itself (`reasoning.templateOpens`, or a lone
    /// `</think>` seen): a turn's text is thinking until its `</think>`, never relayed as the answer.
    pub template_opens: bool,
    /// Reasoning went to the client: the answer does not repeat it.
    reasoning_sent: bool,
}

#[derive(Debug)]
struct Turn {
    id: CallId,
    /// The reply is an SSE stream (else it is read whole at the end).
    sse: Option<ChunkStream>,
    /// The answer text sent to the client from this turn, and where it ends in the turn's content.
    relayed: String,
    relayed_end: usize,
    scan: Scan,
    /// The turn called tools, or its text cannot be relayed safely: nothing more goes out.
    stopped: bool,
    /// Where the turn's reply starts in its content, past a leading think block, once known.
    reply_from: Option<usize>,
}

impl Live {
    pub fn new(mode: Mode, relay: bool, wire: Wire, limit: usize) -> Live {
        Live {
            limit,
            mode,
            relay,
            wire,
            opened_at: None,
            last_sent: 0,
            sent_bytes: 0,
            turn: None,
            last_relayed: String::new(),
            earlier: false,
            reasoning: false,
            template_opens: false,
            reasoning_sent: false,
        }
    }

    pub fn is_open(&self) -> bool {
        self.opened_at.is_some()
    }

    /// How the stream's events are written (its end, by `Response::answer`).
    pub fn wire(&mut self) -> &mut Wire {
        &mut self.wire
    }

    pub fn wire_ref(&self) -> &Wire {
        &self.wire
    }

    /// A streamed LLM turn went out under `id`.
    pub fn start_turn(&mut self, id: CallId) {
        if !self.last_relayed.is_empty() {
            self.earlier = true;
            self.last_relayed.clear();
        }
        self.turn = Some(Turn {
            id,
            sse: None,
            relayed: String::new(),
            relayed_end: 0,
            scan: Scan::default(),
            stopped: false,
            reply_from: None,
        });
    }

    /// The turn's head: a 2xx SSE reply is read as it comes.
    pub fn head_of(&mut self, id: CallId, status: u16, event_stream: bool) {
        if let Some(turn) = self.turn.as_mut().filter(|t| t.id == id) {
            if (200..300).contains(&status) && event_stream {
                turn.sse = Some(ChunkStream::new());
            }
        }
    }

    /// Starts the client's stream (once): the bytes to send with the headers.
    pub fn open(&mut self, model: &str, now: u64) -> Option<Vec<u8>> {
        if self.is_open() {
            return None;
        }
        self.opened_at = Some(now);
        self.wire.set_model(model);
        let role = self.wire.open();
        Some(self.note_sent(role, now))
    }

    /// The next bytes of the turn's reply: the answer text to send as a chunk, if any, and whether
    /// it starts the client's stream (the role chunk comes first then). `model`: the client's, for a
    /// stream that has none yet. Each byte of the turn is looked at a bounded number of times.
    pub fn data(&mut self, id: CallId, data: &[u8], model: &str, now: u64) -> Option<(bool, Vec<u8>)> {
        let (mode, relay, earlier, reasoning) = (self.mode, self.relay, self.earlier, self.reasoning);
        let (template_opens, opening) = (self.template_opens, !self.is_open());
        let turn = self.turn.as_mut().filter(|t| t.id == id)?;
        let sse = turn.sse.as_mut()?;
        let fed = sse.feed(data);
        // The model the stream names, needed only to open it (not per chunk).
        let model = opening.then(|| sse.model().unwrap_or(model).to_string());
        let thinking = (reasoning && !turn.stopped && !fed.reasoning.is_empty()).then_some(fed.reasoning);
        let piece = if turn.stopped || !relay || fed.content.is_empty() || fed.tool_call {
            turn.stopped |= fed.tool_call;
            None
        } else {
            Self::answer_text(turn, mode, earlier, template_opens)
        };
        if thinking.is_none() && piece.is_none() {
            return None;
        }
        let mut out = Vec::new();
        if let Some(model) = &model {
            self.wire.set_model(model);
            out = self.wire.open();
        }
        if let Some(t) = &thinking {
            out.extend(self.wire.reasoning(t));
        }
        let (piece, new_len, to) = piece.unwrap_or_default();
        if !piece.is_empty() {
            out.extend(self.wire.content(&piece));
        }
        let turn = self.turn.as_mut()?;
        if self.sent_bytes + out.len() + END_RESERVE > self.limit {
            // The answer is over maxResponseBytes: the end says so (`Response::answer`).
            turn.stopped = true;
            return None;
        }
        if !piece.is_empty() {
            turn.relayed.push_str(&piece[piece.len() - new_len..]);
            turn.relayed_end = to;
        }
        self.reasoning_sent |= thinking.is_some();
        if opening {
            self.opened_at = Some(now);
        }
        Some((opening, self.note_sent(out, now)))
    }

    /// The answer text of the turn not relayed yet, and where it ends in the turn's content: past a
    /// leading think block, after `Final Answer:` in ReAct mode.
    fn answer_text(turn: &mut Turn, mode: Mode, earlier: bool, opens: bool) -> Option<(String, usize, usize)> {
        let text = turn.sse.as_ref()?.content();
        let base = match turn.reply_from {
            Some(at) => at,
            None => match stream_state(text, opens) {
                // After a think block, the reply starts at its first non-blank (as `split_think` reads it).
                Stream::Reply(at) if at > 0 => {
                    let rest = &text[at..];
                    let blank = rest.len() - rest.trim_start().len();
                    if blank == rest.len() {
                        return None;
                    }
                    *turn.reply_from.insert(at + blank)
                }
                Stream::Reply(at) => *turn.reply_from.insert(at),
                Stream::Undecided | Stream::Thinking => return None,
            },
        };
        let reply = &text[base..];
        let (from, to) = match mode {
            Mode::Native => {
                turn.scan.text |= !reply.trim().is_empty();
                (0, if turn.scan.text { reply.len() } else { 0 })
            }
            Mode::React => match turn.scan.react(reply) {
                Some(range) => range,
                None => {
                    turn.stopped = true;
                    return None;
                }
            },
        };
        let (from, to) = ((base + from).max(turn.relayed_end), base + to);
        let new = text.get(from..to).filter(|n| !n.is_empty())?;
        let piece = if turn.relayed.is_empty() && earlier { format!("{SEPARATOR}{new}") } else { new.to_string() };
        Some((piece, new.len(), to))
    }

    /// Reasoning went to the client live.
    pub fn relayed_reasoning(&self) -> bool {
        self.reasoning_sent
    }

    /// The turn is over: its reply as one chat.completion body when it came as SSE (`None`: read
    /// the body as it is).
    pub fn end_turn(&mut self, id: CallId) -> Option<Result<Vec<u8>, String>> {
        let turn = self.turn.take_if(|t| t.id == id)?;
        if turn.sse.as_ref().is_some_and(|s| opened_by_template(s.content())) && !self.template_opens {
            // Later turns are read as this one should have been (what this one relayed stays relayed).
            log::info!("the LLM's chat template opens think blocks: later turns' text is thinking until </think>");
            self.template_opens = true;
        }
        if turn.stopped && !turn.relayed.is_empty() {
            // Text went out and the turn called tools: it stays with the client.
            self.earlier = true;
        } else {
            self.last_relayed = turn.relayed;
        }
        turn.sse.map(ChunkStream::completion)
    }

    /// The turn in flight has sent answer text: it cannot be sent again.
    pub fn relayed_in(&self, id: CallId) -> bool {
        self.turn.as_ref().is_some_and(|t| t.id == id && !t.relayed.is_empty())
    }

    /// What of the final answer `content` the client does not have yet.
    pub fn rest_of(&self, content: &str) -> String {
        let sent = &self.last_relayed;
        match content.strip_prefix(sent.as_str()) {
            Some(rest) if sent.is_empty() && self.earlier && !rest.is_empty() => format!("{SEPARATOR}{rest}"),
            Some(rest) => rest.to_string(),
            None => {
                log::warn!("the answer differs from the text streamed live; the client has the streamed text");
                String::new()
            }
        }
    }

    /// A keep-alive comment, when the stream has been silent for a while.
    pub fn keep_alive(&mut self, now: u64) -> Option<Vec<u8>> {
        (self.is_open() && now >= self.last_sent + KEEP_ALIVE_MS).then(|| self.note_sent(self.wire.keep_alive(), now))
    }

    /// When to wake for the next keep-alive: on a fixed grid from the opening, so that a host that
    /// needs a timer per wake-up time does not get a new one for every chunk sent.
    pub fn next_keep_alive(&self) -> Option<u64> {
        let opened = self.opened_at?;
        let due = self.last_sent + KEEP_ALIVE_MS;
        let ticks = due.saturating_sub(opened).div_ceil(KEEP_ALIVE_MS);
        Some(opened + ticks * KEEP_ALIVE_MS)
    }

    fn note_sent(&mut self, bytes: Vec<u8>, now: u64) -> Vec<u8> {
        self.last_sent = now;
        self.sent_bytes += bytes.len();
        bytes
    }
}

/// What is known of a turn's text so far, so that each new piece is read once.
#[derive(Debug, Default)]
struct Scan {
    /// Native: the turn has non-blank text.
    text: bool,
    /// ReAct: bytes of the text searched for markers.
    searched: usize,
    /// ReAct: the end of `Final Answer:`, once found before any action.
    marker_end: Option<usize>,
    /// ReAct: where the answer's text starts (past `*` and blanks).
    start: Option<usize>,
    /// ReAct: where an invented `Question:` line cuts the answer.
    cut: Option<usize>,
}

impl Scan {
    /// ReAct: the range of `text` that is surely final-answer text, as the parser will read it: after
    /// a `Final Answer:` that comes before any action (`Action:`, a json blob, an invented
    /// `Question:`), without trailing blanks or what may be the start of a `Question:` line. `None`:
    /// nothing of this turn can be relayed.
    fn react(&mut self, text: &str) -> Option<(usize, usize)> {
        let Some(marker_end) = self.marker_end else {
            let from = floor_boundary(text, self.searched.saturating_sub(MARKER_SPAN));
            self.searched = text.len();
            let fin = marker_from(text, FINAL_MARKER, from);
            let blocked = [
                text[from..].find('{').map(|i| from + i),
                marker_from(text, "Action:", from),
                text[from..].find(QUESTION).map(|i| from + i),
            ]
            .into_iter()
            .flatten()
            .min();
            return match (fin, blocked) {
                (_, Some(b)) if fin.is_none_or(|f| b < f) => None,
                (Some(f), _) => {
                    self.marker_end = Some(f + FINAL_MARKER.len());
                    self.react(text)
                }
                (None, _) => Some((0, 0)),
            };
        };
        let start = match self.start {
            Some(start) => start,
            None => {
                let rest = &text[marker_end..];
                let answer = rest.trim_start_matches('*').trim_start();
                if answer.is_empty() {
                    return Some((0, 0));
                }
                if answer.starts_with('`') {
                    // A fenced answer is unwrapped by the parser: it goes out whole at the end.
                    return None;
                }
                *self.start.insert(marker_end + rest.len() - answer.len())
            }
        };
        if self.cut.is_none() {
            let from = floor_boundary(text, self.searched.saturating_sub(MARKER_SPAN).max(start));
            self.cut = text[from..].find(QUESTION).map(|i| from + i);
            self.searched = text.len();
        }
        let end = self.cut.unwrap_or(text.len());
        // Hold back a line that may be becoming `Question:`, and trailing blanks (the parser trims).
        let tail_from = floor_boundary(text, end.saturating_sub(MARKER_SPAN).max(start));
        let end = match text[tail_from..end].rfind('\n') {
            Some(nl) if QUESTION[1..].starts_with(&text[tail_from + nl + 1..end]) => tail_from + nl,
            _ => end,
        };
        let tail_from = floor_boundary(text, end.saturating_sub(256).max(start));
        let end = tail_from + text[tail_from..end].trim_end().len();
        Some((start, end.max(start)))
    }
}

/// The largest char boundary of `text` at or before `at`.
fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Where `m` first starts in `text` at or after `from`, not inside a word (as the ReAct parser
/// finds its markers).
fn marker_from(text: &str, m: &str, from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(i) = text[at..].find(m) {
        let pos = at + i;
        if text[..pos].chars().next_back().is_none_or(|c| !c.is_alphanumeric()) {
            return Some(pos);
        }
        at = pos + m.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::answer::Front;

    /// The relayable text after feeding `text` whole, and after feeding it a byte at a time.
    fn react_ready(text: &str) -> Option<&str> {
        let whole = Scan::default().react(text).map(|(a, b)| &text[a..b]);
        let mut scan = Scan::default();
        let mut piecewise = Some((0, 0));
        for end in (1..=text.len()).filter(|&e| text.is_char_boundary(e)) {
            piecewise = scan.react(&text[..end]);
            if piecewise.is_none() {
                break;
            }
        }
        assert_eq!(whole, piecewise.map(|(a, b)| &text[a..b]), "{text:?} fed piece by piece");
        whole.filter(|s| !s.is_empty())
    }

    #[test]
    fn react_text_is_ready_after_the_final_answer_marker_only() {
        assert_eq!(react_ready("Thought: I know.\nFinal Answer: It is"), Some("It is"));
        assert_eq!(react_ready("Thought: I know.\n**Final Answer:** It is cold.  "), Some("It is cold."));
        assert_eq!(react_ready("Thought: hm\nAction: get_weather\nFinal Answer: x"), None);
        assert_eq!(react_ready("Thought: {\"action\": 1}\nFinal Answer: x"), None);
        assert_eq!(react_ready("Final Answer: ```json\n{}"), None);
        assert_eq!(react_ready("Thought: ok\nFinal"), None);
        assert_eq!(react_ready("Final Answer: 天气晴\n  "), Some("天气晴"));
        assert_eq!(react_ready("Final Answer: cold\nQue"), Some("cold"));
        assert_eq!(react_ready("Final Answer: cold\nQuestion: next?"), Some("cold"));
        assert_eq!(react_ready("Final Answer: cold\nQuiet wind"), Some("cold\nQuiet wind"));
        assert_eq!(react_ready("MyFinal Answer: x"), None);
    }

    fn chunk(content: &str) -> Vec<u8> {
        format!("data: {}\n\n", serde_json::json!({"choices": [{"delta": {"content": content}}]})).into_bytes()
    }

    #[test]
    fn native_content_is_relayed_until_a_tool_call_and_the_rest_follows_the_relayed_text() {
        let mut l = Live::new(Mode::Native, true, Wire::new("1", 7, false, &Front::Chat), 1 << 20);
        l.start_turn(CallId(1));
        l.head_of(CallId(1), 200, true);
        assert!(!l.is_open(), "a head alone does not open the stream");
        assert!(l.data(CallId(1), &chunk("  "), "m", 11).is_none(), "whitespace alone waits");
        let (opening, sent) = l.data(CallId(1), &chunk("Cold"), "m", 12).unwrap();
        let sent = String::from_utf8(sent).unwrap();
        assert!(opening && sent.starts_with("data: {") && sent.contains(r#""role":"assistant""#), "{sent}");
        assert!(sent.contains(r#""content":"  Cold""#), "{sent}");
        assert!(l.data(CallId(1), &chunk(" today"), "m", 13).is_some_and(|(o, _)| !o));
        assert!(l.relayed_in(CallId(1)));
        assert!(l.end_turn(CallId(1)).unwrap().is_ok());
        assert_eq!(l.rest_of("  Cold today."), ".");
        assert_eq!(l.rest_of("Warm"), "", "a different answer adds nothing");
    }

    #[test]
    fn text_of_a_turn_that_then_calls_tools_stays_and_the_next_turn_starts_a_paragraph() {
        let mut l = Live::new(Mode::Native, true, Wire::new("c", 7, false, &Front::Chat), 1 << 20);
        l.start_turn(CallId(1));
        l.head_of(CallId(1), 200, true);
        assert!(l.data(CallId(1), &chunk("Let me look."), "m", 1).is_some());
        let call = br#"data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}

"#;
        assert!(l.data(CallId(1), call, "m", 2).is_none());
        assert!(l.data(CallId(1), &chunk(" more"), "m", 3).is_none(), "nothing after a tool call");
        l.end_turn(CallId(1));
        assert!(l.open("m", 4).is_none(), "opened once");
        l.start_turn(CallId(2));
        l.head_of(CallId(2), 200, true);
        let sent = String::from_utf8(l.data(CallId(2), &chunk("Cold."), "m", 5).unwrap().1).unwrap();
        assert!(sent.contains(r#""content":"\n\nCold.""#), "{sent}");
    }

    #[test]
    fn no_relay_in_json_mode_or_before_a_2xx_and_keep_alives_follow_a_fixed_grid() {
        let mut l = Live::new(Mode::Native, false, Wire::new("c", 7, false, &Front::Chat), 1 << 20);
        l.start_turn(CallId(1));
        l.head_of(CallId(1), 429, false);
        assert!(l.data(CallId(1), &chunk("x"), "m", 0).is_none());
        assert_eq!(l.next_keep_alive(), None);
        l.end_turn(CallId(1));
        l.start_turn(CallId(2));
        l.head_of(CallId(2), 200, true);
        assert!(l.data(CallId(2), &chunk("{\"a\":1}"), "m", 999).is_none());
        assert!(l.open("m", 1000).is_some());
        assert_eq!(l.next_keep_alive(), Some(1000 + KEEP_ALIVE_MS));
        assert!(l.keep_alive(1000 + KEEP_ALIVE_MS - 1).is_none());
        assert_eq!(l.keep_alive(1000 + KEEP_ALIVE_MS).unwrap(), b": keep-alive\n\n");
        assert_eq!(l.next_keep_alive(), Some(1000 + 2 * KEEP_ALIVE_MS));
    }
}
