//! Reasoning models' thinking, told apart from their reply. Servers send it in one of three places:
//! a field of the message (`reasoning_content`: DeepSeek, Qwen3 on vLLM/SGLang, Kimi; `reasoning`:
//! gpt-oss, OpenRouter, Ollama, as text or `{content|text}`), or inside `content` as a leading
//! `<think>…</think>` block (servers without a reasoning parser). A template that opens the block
//! itself sends only the closing `</think>` (DeepSeek-R1, QwQ), on a line of its own: everything before
//! it is thinking; a `</think>` inside a line is the reply's own text (an answer that mentions the
//! tag). A turn cut by the token limit may end inside an unterminated `<think>`.

use serde_json::Value;

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

/// Where the server put the reasoning: the field a later turn must carry it back in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// `reasoning_content`.
    ReasoningContent,
    /// `reasoning`.
    Reasoning,
    /// A `<think>` block in `content` (the content goes back as it came).
    Think,
}

impl Field {
    /// The message field's name; `None` for a think block.
    pub fn name(self) -> Option<&'static str> {
        match self {
            Field::ReasoningContent => Some("reasoning_content"),
            Field::Reasoning => Some("reasoning"),
            Field::Think => None,
        }
    }
}

/// A turn's thinking and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reasoning {
    pub text: String,
    pub field: Field,
}

/// The reasoning a message's own fields carry (`reasoning_content` first), if any text.
pub fn of_fields(reasoning_content: Option<&Value>, reasoning: Option<&Value>) -> Option<Reasoning> {
    if let Some(text) = reasoning_content.and_then(Value::as_str).filter(|t| !t.trim().is_empty()) {
        return Some(Reasoning { text: text.to_string(), field: Field::ReasoningContent });
    }
    let text = match reasoning {
        Some(Value::String(s)) => s.as_str(),
        Some(Value::Object(o)) => o.get("content").or_else(|| o.get("text")).and_then(Value::as_str).unwrap_or(""),
        _ => "",
    };
    (!text.trim().is_empty()).then(|| Reasoning { text: text.to_string(), field: Field::Reasoning })
}

/// Content with a leading think block taken out: (the thinking, the reply). A block that is closed
/// nowhere is all thinking (the turn was cut while thinking); a lone `</think>` (`template_close`)
/// closes a block the chat template opened. Text with no think block is returned as it is.
pub fn split_think(content: &str) -> (Option<String>, &str) {
    let start = content.trim_start();
    if let Some(inner) = start.strip_prefix(OPEN) {
        return match inner.find(CLOSE) {
            Some(end) => (Some(inner[..end].trim().to_string()), inner[end + CLOSE.len()..].trim_start()),
            None => (Some(inner.trim().to_string()), ""),
        };
    }
    match template_close(content) {
        Some(end) => (Some(content[..end].trim().to_string()), content[end + CLOSE.len()..].trim_start()),
        None => (None, content),
    }
}

/// Where a block the chat template opened closes: the first `</think>` that starts a line (only
/// spaces or tabs before it on its line), with no `<think>` before it. A `</think>` inside a line
/// is text that mentions the tag, not the end of a block.
pub fn template_close(content: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = crate::doc::find_str(&content[from..], CLOSE) {
        let at = from + i;
        let line = content[..at].rsplit('\n').next().unwrap_or("");
        if content[..at].contains(OPEN) {
            return None;
        }
        if line.chars().all(|c| c == ' ' || c == '\t') {
            return Some(at);
        }
        from = at + CLOSE.len();
    }
    None
}

/// What is left of streamed content that may still be inside a think block: how many leading bytes
/// are thinking (`Thinking`), or that the reply has begun after that many bytes (`Reply`), or that it
/// cannot be told yet (`Undecided`: the text so far could still open or close a block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Undecided,
    /// Inside a block; the reply has not begun.
    Thinking,
    /// The reply starts at this byte offset.
    Reply(usize),
}

/// Where streamed content stands so far (see `Stream`). `template_opens`: this server's chat template
/// opens the block itself (a lone `</think>` was seen before), so text is thinking until it closes.
pub fn stream_state(content: &str, template_opens: bool) -> Stream {
    let start = content.trim_start();
    let lead = content.len() - start.len();
    if start.is_empty() || (OPEN.starts_with(start) && start.len() < OPEN.len()) {
        return Stream::Undecided;
    }
    if template_opens && !start.starts_with(OPEN) {
        return match template_close(content) {
            Some(end) => Stream::Reply(end + CLOSE.len()),
            None => Stream::Thinking,
        };
    }
    if let Some(inner) = start.strip_prefix(OPEN) {
        return match inner.find(CLOSE) {
            Some(end) => Stream::Reply(lead + OPEN.len() + end + CLOSE.len()),
            None => Stream::Thinking,
        };
    }
    Stream::Reply(0)
}

/// The content shows a block the chat template opened: a lone `</think>` (`template_close`).
pub fn opened_by_template(content: &str) -> bool {
    template_close(content).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_closed_block_is_thinking_and_the_rest_is_the_reply() {
        let (r, c) = split_think("<think>\nMaybe Action: x?\n</think>\n\nFinal Answer: 5");
        assert_eq!(r.as_deref(), Some("Maybe Action: x?"));
        assert_eq!(c, "Final Answer: 5");
        let (r, c) = split_think("  <think>a</think>b");
        assert_eq!((r.as_deref(), c), (Some("a"), "b"));
    }

    #[test]
    fn a_template_opened_block_is_told_by_its_lone_close() {
        assert!(opened_by_template("I think so.\n</think>\nYes."));
        assert!(!opened_by_template("<think>a</think>b"));
        assert!(!opened_by_template("plain text"));
    }

    #[test]
    fn a_close_inside_a_line_is_text_that_mentions_the_tag() {
        let answer = "Close the block with </think> and then write the reply.";
        assert_eq!(split_think(answer), (None, answer));
        assert!(!opened_by_template(answer));
        let two_lines = "To end thinking, models write `</think>`.\nThen the reply follows.";
        assert_eq!(split_think(two_lines), (None, two_lines));
        // A lone one after a mention inside the thinking still closes it.
        let (r, c) = split_think("I recall the tag </think> here.\n  </think>\nYes.");
        assert_eq!((r.as_deref(), c), (Some("I recall the tag </think> here."), "Yes."));
        assert_eq!(split_think("</think>\n\nHi"), (Some(String::new()), "Hi"));
        assert_eq!(stream_state("Hmm, the tag </think> is", true), Stream::Thinking);
    }

    #[test]
    fn a_lone_close_ends_a_block_the_template_opened() {
        let (r, c) = split_think("I should call the tool.\n</think>\nAction: get_weather");
        assert_eq!(r.as_deref(), Some("I should call the tool."));
        assert_eq!(c, "Action: get_weather");
    }

    #[test]
    fn an_unterminated_block_is_all_thinking() {
        let (r, c) = split_think("<think>Let me think about Final Answer: 3");
        assert_eq!(r.as_deref(), Some("Let me think about Final Answer: 3"));
        assert_eq!(c, "");
    }

    #[test]
    fn text_without_a_block_is_untouched() {
        assert_eq!(split_think("Final Answer: ok"), (None, "Final Answer: ok"));
        // A later block is the reply's own text (quoted, or an example), not reasoning.
        let t = "Use <think>tags</think> like this";
        assert_eq!(split_think(t), (None, t));
    }

    fn of_fields(m: &Value) -> Option<Reasoning> {
        super::of_fields(m.get("reasoning_content"), m.get("reasoning"))
    }

    #[test]
    fn fields_in_order_of_preference() {
        let m = json!({"reasoning_content": "rc", "reasoning": "r"});
        assert_eq!(of_fields(&m), Some(Reasoning { text: "rc".into(), field: Field::ReasoningContent }));
        let m = json!({"reasoning": {"content": "c"}});
        assert_eq!(of_fields(&m).map(|r| r.text), Some("c".to_string()));
        let m = json!({"reasoning": {"text": "t"}});
        assert_eq!(of_fields(&m).map(|r| (r.text, r.field)), Some(("t".to_string(), Field::Reasoning)));
        assert_eq!(of_fields(&json!({"reasoning_content": "  ", "content": "x"})), None);
        assert_eq!(of_fields(&json!({"reasoning": null})), None);
    }

    #[test]
    fn streamed_content_is_told_apart_once_it_can_be() {
        assert_eq!(stream_state("", false), Stream::Undecided);
        assert_eq!(stream_state("<thi", false), Stream::Undecided);
        assert_eq!(stream_state("<think>hmm", false), Stream::Thinking);
        assert_eq!(stream_state("<think>hmm</think>Hi", false), Stream::Reply(18));
        assert_eq!(stream_state("Hello", false), Stream::Reply(0));
        assert_eq!(stream_state("Hmm, so", true), Stream::Thinking);
        assert_eq!(stream_state("Hmm\n</think>Hi", true), Stream::Reply(12));
        assert_eq!(stream_state("<think>a</think>Hi", true), Stream::Reply(16));
    }
}
