//! `api-agent tools --for QUESTION CONFIG`: what a question is offered of each configuration's catalog
//! (the selection of `tools`), with each tool's rank, score and bytes, and the best ranked that did
//! not fit; a catalog offered whole says so, with the ranks it would have.

use crate::config::{Config, Mode, MAX_NATIVE_TOOLS};
use crate::tools::search::{pick, Budget, Index, FIND_TOOLS};
use serde_json::{json, Value};

/// How many of the ranked tools that were not offered are shown.
const NOT_OFFERED: usize = 5;

/// The selection for `question` in configuration `c`, as JSON.
pub fn selection(c: &Config, question: &str) -> Value {
    let Some(o) = &c.offer else {
        // Offered whole: the ranks only say which tools the question's words name.
        let ranked = Index::build(&c.tools).rank(question);
        let ranks: Vec<Value> =
            ranked.iter().enumerate().take(10).map(|(i, r)| row(c, Some(i), *r, None, false)).collect();
        return json!({"question": question, "offered": "all", "tools": c.tools.len(), "ranked": ranks});
    };
    let ranked = o.index.rank(question);
    let max_tools = if c.mode == Mode::Native { MAX_NATIVE_TOOLS - 1 } else { usize::MAX };
    let chosen = pick(&ranked, &o.pinned, &o.costs, Budget { bytes: o.max_prompt_bytes, max_tools });
    let rank_of = |doc: u32| ranked.iter().position(|(d, _)| *d == doc);
    let offered: Vec<Value> = chosen
        .iter()
        .map(|&doc| {
            let score = ranked.iter().find(|(d, _)| *d == doc).map_or(0.0, |r| r.1);
            row(c, rank_of(doc), (doc, score), Some(o.costs[doc as usize]), o.pinned.contains(&doc))
        })
        .collect();
    let left: Vec<Value> = ranked
        .iter()
        .enumerate()
        .filter(|(_, (d, _))| !chosen.contains(d))
        .take(NOT_OFFERED)
        .map(|(i, r)| row(c, Some(i), *r, Some(o.costs[r.0 as usize]), false))
        .collect();
    let bytes: u64 = chosen.iter().map(|&d| u64::from(o.costs[d as usize])).sum();
    json!({"question": question, "offered": offered, "tools": c.tools.len(), "bytes": bytes,
           "maxPromptBytes": o.max_prompt_bytes, "plus": FIND_TOOLS, "not_offered": left})
}

/// One tool: its rank (from 0; none for a pinned tool no word of the question names), name, score.
fn row(c: &Config, rank: Option<usize>, (doc, score): (u32, f32), bytes: Option<u32>, pinned: bool) -> Value {
    let name = c.tools.at(doc as usize).map_or("", |t| t.name.as_str());
    let score = (f64::from(score) * 1000.0).round() / 1000.0;
    let mut v = json!({"rank": rank.map(|r| r + 1), "name": name, "score": score});
    if let Some(b) = bytes {
        v["bytes"] = b.into();
    }
    if pinned {
        v["pinned"] = true.into();
    }
    v
}

/// The selection as text lines.
pub fn text(s: &Value) -> String {
    let line = |r: &Value| {
        let pinned = if r["pinned"] == true { ", pinned" } else { "" };
        let bytes = r["bytes"].as_u64().map(|b| format!(", {b} bytes")).unwrap_or_default();
        let rank = r["rank"].as_u64().map_or_else(|| "-".to_string(), |n| n.to_string());
        format!("    {rank:>4}. {} (score {}{bytes}{pinned})\n", r["name"].as_str().unwrap_or(""), r["score"])
    };
    let q = s["question"].as_str().unwrap_or("");
    let mut out = String::new();
    if s["offered"] == "all" {
        out.push_str(&format!(
            "  for \"{q}\": all {} tools are offered (a small catalog, or tools.select 'all')\n",
            s["tools"]
        ));
        out.push_str("  ranked:\n");
        s["ranked"].as_array().into_iter().flatten().for_each(|r| out.push_str(&line(r)));
        return out;
    }
    let offered = s["offered"].as_array().map_or(0, Vec::len);
    out.push_str(&format!(
        "  for \"{q}\": {offered} of {} tools offered ({} of {} bytes), and {}\n",
        s["tools"], s["bytes"], s["maxPromptBytes"], FIND_TOOLS
    ));
    s["offered"].as_array().into_iter().flatten().for_each(|r| out.push_str(&line(r)));
    if let Some(left) = s["not_offered"].as_array().filter(|l| !l.is_empty()) {
        out.push_str("  ranked, not offered (over the budget):\n");
        left.iter().for_each(|r| out.push_str(&line(r)));
    }
    out
}
