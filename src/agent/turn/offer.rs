//! A large catalog's tools per request (`Config::offer`): the first turn offers the tools the
//! catalog index ranks best for the conversation, within `tools.maxPromptBytes`, with the pinned ones
//! and `find_tools`; `find_tools` searches the whole catalog. Every turn keeps the first turn's
//! prompt as an exact prefix: in ReAct mode the tools found are described in the observation; in
//! native mode they are also appended to `tools` for the next turn (never more than 128).

use super::convo::Convo;
use super::offered::{escaped, native_json, Offered};
use super::rules;
use crate::agent::tools::work::{tool_work, Work};
use crate::config::{Config, Mode, Offer, MAX_NATIVE_TOOLS};
use crate::doc::truncate;
use crate::openai::{ChatRequest, Role};
use crate::prompt::react::Entry;
use crate::tools::search::{pick, Budget, FIND_TOOLS};
use serde_json::Value;

/// How many tools one `find_tools` call describes, and in how many bytes at most.
const FOUND_TOOLS: usize = 5;
const FOUND_BYTES: usize = 8 * 1024;
/// The user messages (latest last) whose words rank the first turn's tools.
const QUERY_MESSAGES: usize = 4;

/// Chooses the first turn's tools for the conversation, when the catalog is too large to offer whole.
pub fn offer(c: &mut Convo, cfg: &Config, req: &ChatRequest) {
    let Some(o) = &cfg.offer else {
        return;
    };
    let users: Vec<&str> = req.messages.iter().filter(|m| m.role == Role::User).map(|m| m.text.as_str()).collect();
    let query = users[users.len().saturating_sub(QUERY_MESSAGES)..].join("\n");
    // Native: room for `find_tools` and the client's own tools within OpenAI's 128.
    let max_native = MAX_NATIVE_TOOLS.saturating_sub(1 + c.client_tool_specs.len());
    let max_tools = if c.mode == Mode::Native { max_native } else { usize::MAX };
    let mut ranked = o.index.rank(&query);
    if let Some(r) = c.rules.as_deref() {
        // Tools the rules refuse whatever the arguments are not offered.
        ranked.retain(|hit| !r.hides(hit.0));
    }
    let pinned: Vec<u32> =
        o.pinned.iter().copied().filter(|&i| !c.rules.as_deref().is_some_and(|r| r.hides(i))).collect();
    let chosen = pick(&ranked, &pinned, &o.costs, Budget { bytes: o.max_prompt_bytes, max_tools });
    let first = chosen.len();
    let mut offered =
        Offered { prompt_json: String::new(), tools_json: String::new(), native: chosen, first, max_native };
    match c.mode {
        Mode::React => {
            let tools: Vec<_> = offered.native.iter().filter_map(|&i| cfg.tools.at(i as usize)).collect();
            offered.prompt_json = escaped(&cfg.prompt_with(&tools));
            offered.native.clear();
        }
        Mode::Native => offered.tools_json = native_json(cfg, &offered.native, first),
    }
    c.offered = Some(Box::new(offered));
}

/// The work for a call of `name`: `find_tools` is answered here, any other tool as usual. A call of a
/// catalog tool that was neither offered nor found is run too: the model may know it from an earlier
/// request's `find_tools`, and the operator allowed every tool of the catalog.
pub fn work(c: &mut Convo, cfg: &Config, name: &str, input: Value) -> Work {
    match &cfg.offer {
        Some(o) if name == FIND_TOOLS => find(c, cfg, o, input),
        _ if c.rules.is_some() => rules::check(c, cfg, tool_work(cfg, name, input)),
        _ => tool_work(cfg, name, input),
    }
}

/// `find_tools`: the best matches of the whole catalog, described as the prompt lists tools.
fn find(c: &mut Convo, cfg: &Config, o: &Offer, input: Value) -> Work {
    let query = match &input {
        Value::String(s) => s.trim().to_string(),
        Value::Object(m) => m.get("query").and_then(Value::as_str).map(str::trim).unwrap_or_default().to_string(),
        _ => String::new(),
    };
    if query.is_empty() {
        let why = format!("'{FIND_TOOLS}' needs a 'query': what you want to do, in a few words");
        return Work::Refused { name: FIND_TOOLS.into(), observation: format!("Invalid arguments for {why}."), why };
    }
    let mut ranked = o.index.rank(&query);
    if let Some(r) = c.rules.as_deref() {
        ranked.retain(|hit| !r.hides(hit.0));
    }
    let found = pick(&ranked, &[], &o.costs, Budget { bytes: FOUND_BYTES, max_tools: FOUND_TOOLS });
    let chinese = cfg.template.chinese;
    let quoted = truncate(&query, 200);
    let observation = if found.is_empty() {
        if chinese {
            format!("没有工具匹配“{quoted}”。请换个说法：你想做什么，或者它处理的是什么。")
        } else {
            format!(
                "No tool matches \"{quoted}\". Try other words: what you want to do, or the kind of thing it works on."
            )
        }
    } else {
        let mut text = if chinese {
            format!("与“{quoted}”匹配的工具（按名称调用，参数须符合其参数定义）：\n\n")
        } else {
            format!(
                "Tools found for \"{quoted}\" (call one by its name, with arguments that match its parameters):\n\n"
            )
        };
        for t in found.iter().filter_map(|&i| cfg.tools.at(i as usize)) {
            text.push_str(&cfg.template.entry(&Entry::of(t)));
        }
        text.trim_end().to_string()
    };
    if let Some(offered) = c.offered.as_deref_mut().filter(|_| c.mode == Mode::Native) {
        offered.add(cfg, &found);
    }
    Work::Found { query, observation }
}
