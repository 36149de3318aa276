//! Measures the selection of large catalogs (issue 31; BENCHMARKS.md, "Large catalogs"), through the
//! agent core itself (`Agent::handle`, as both hosts drive it):
//!
//! - `recall DATA_DIR`: the Berkeley Function Calling Leaderboard's questions (the `bfcl-eval` wheel's
//!   `bfcl_eval/data`, fetched by scripts/catalog_recall.sh): every function of the simple, multiple,
//!   parallel and parallel-multiple categories pooled into one catalog (an MCP server's pinned
//!   `toolsList`, deduplicated by name); per question, whether the first turn offers every function of
//!   its ground truth, against plain BM25's top 10 over the same pool; and whether a `find_tools` call
//!   with the words of a needed function's name (or of its description) offers it on the next turn.
//! - `bytes`: the first turn's bytes for 1, 200 and 2,400 generated operations, in both modes, with the
//!   selection and with `tools.select: all`.
//! - `build`: the index's build time and size for 10,000 generated operations.
//!
//! `cargo run --release --example catalog_bench -- recall|bytes|build [DATA_DIR]`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use api_agent::agent::{Agent, Command, Event, RequestMeta};
use api_agent::config::Config;
use api_agent::openapi::sanitized_name;
use api_agent::tools::search::Index;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Instant;

#[path = "../tests/common/big_spec.rs"]
mod big_spec;
use big_spec::big_spec;

const CATEGORIES: [&str; 8] = [
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("recall") => recall(args.get(1).expect("recall DATA_DIR")),
        Some("bytes") => bytes(),
        Some("build") => build(args.get(1)),
        _ => eprintln!("usage: catalog_bench recall DATA_DIR | bytes | build"),
    }
}

fn meta() -> RequestMeta {
    RequestMeta { id: "bench".into(), now_ms: 1_000_000, unix_s: 1_700_000_000, seed: 1, ..Default::default() }
}

/// The first turn's body for `messages`, and the agent that sent it.
fn first_turn(cfg: &Rc<Config>, messages: &Value) -> (Agent, Vec<u8>) {
    let mut agent = Agent::new(Rc::clone(cfg), meta());
    let body = json!({"model": "m", "messages": messages}).to_string();
    for c in agent.handle(Event::ClientRequest { body: body.as_bytes() }, 1_000_000) {
        if let Command::Forward { body } = c {
            return (agent, body);
        }
    }
    panic!("no first turn");
}

/// The second turn's body after the model called `find_tools` with `query`, and whether it keeps the
/// first turn as a prefix (the messages; the system prompt; native: `tools` extended at its end only).
fn after_find(cfg: &Rc<Config>, messages: &Value, query: &str) -> (Vec<u8>, bool) {
    let (mut agent, first) = first_turn(cfg, messages);
    let message = if cfg.mode == api_agent::config::Mode::Native {
        let args = json!({"query": query}).to_string();
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
               "function": {"name": "find_tools", "arguments": args}}]})
    } else {
        let blob = json!({"action": "find_tools", "action_input": {"query": query}});
        json!({"role": "assistant", "content": format!("Thought: search\nAction:\n```json\n{blob}\n```")})
    };
    let reply = json!({"id": "x", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
    .to_string();
    let event = Event::UpstreamReply { status: 200, body: reply.as_bytes(), headers_sent: false };
    for c in agent.handle(event, 1_000_010) {
        if let Command::Dispatch(call) = c {
            let second = call.body.map(|b| b.to_vec()).unwrap_or_default();
            let (a, b): (Value, Value) =
                (serde_json::from_slice(&first).unwrap(), serde_json::from_slice(&second).unwrap());
            let prior = a["messages"].as_array().unwrap();
            let mut kept = b["messages"].as_array().unwrap().get(..prior.len()) == Some(&prior[..]);
            if let (Some(t1), Some(t2)) = (a["tools"].as_array(), b["tools"].as_array()) {
                kept &= t2.get(..t1.len()) == Some(&t1[..]);
            }
            return (second, kept);
        }
    }
    panic!("no second turn");
}

/// The tool names a request body offers: native `tools`, or the ReAct prompt's valid actions.
fn offered(body: &[u8]) -> BTreeSet<String> {
    let v: Value = serde_json::from_slice(body).unwrap();
    if let Some(tools) = v["tools"].as_array() {
        return tools.iter().map(|t| t["function"]["name"].as_str().unwrap().to_string()).collect();
    }
    let prompt = v["messages"][0]["content"].as_str().unwrap_or("");
    let line = prompt.lines().find(|l| l.starts_with("Valid \"action\" values:")).unwrap_or("");
    line.split('"').skip(3).step_by(2).map(str::to_string).collect()
}

/// The tools a `find_tools` observation describes (the last message of the second turn).
fn described(body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).unwrap();
    v["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap_or("").to_string()
}

struct Question {
    messages: Value,
    needed: BTreeSet<String>,
}

fn read_lines(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The pooled functions (by sanitized name) and the questions of the corpus.
fn corpus(dir: &str) -> (BTreeMap<String, Value>, Vec<Question>) {
    let mut pool: BTreeMap<String, Value> = BTreeMap::new();
    let mut questions = Vec::new();
    for cat in CATEGORIES {
        let answers = read_lines(&format!("{dir}/possible_answer/BFCL_v4_{cat}.json"));
        let truth: BTreeMap<String, &Value> =
            answers.iter().map(|a| (a["id"].as_str().unwrap().to_string(), a)).collect();
        for q in read_lines(&format!("{dir}/BFCL_v4_{cat}.json")) {
            for f in q["function"].as_array().unwrap() {
                let name = sanitized_name(f["name"].as_str().unwrap());
                pool.entry(name).or_insert_with(|| f.clone());
            }
            let gt = truth[q["id"].as_str().unwrap()]["ground_truth"].as_array().unwrap();
            let needed = gt.iter().flat_map(|c| c.as_object().unwrap().keys().map(|k| sanitized_name(k))).collect();
            questions.push(Question { messages: q["question"][0].clone(), needed });
        }
    }
    (pool, questions)
}

fn mcp_list(pool: &BTreeMap<String, Value>) -> Vec<Value> {
    pool.values()
        .map(|f| json!({"name": f["name"], "description": f["description"], "inputSchema": json_schema(&f["parameters"])}))
        .collect()
}

fn recall(dir: &str) {
    let (pool, questions) = corpus(dir);
    let tools = mcp_list(&pool);
    println!(
        "corpus: bfcl-eval, categories {CATEGORIES:?}: {} questions, {} functions pooled",
        questions.len(),
        tools.len()
    );
    let list = json!({ "tools": tools });
    plain_bm25(&pool, &questions);
    for mode in ["react", "native"] {
        let cfg = Rc::new(config_with(
            mode,
            json!([{"mcpServer": {"serviceName": "m", "servicePort": 1, "path": "/mcp", "toolsList": list}}]),
        ));
        let index = &cfg.offer.as_ref().expect("a selection").index;
        let (mut all_in, mut top10, mut bytes) = (0, 0, Vec::new());
        for q in &questions {
            let (_, body) = first_turn(&cfg, &q.messages);
            bytes.push(body.len());
            let names = offered(&body);
            all_in += usize::from(q.needed.iter().all(|n| names.contains(n)));
            let text: Vec<&str> = user_texts(&q.messages);
            let ranked: BTreeSet<String> = index
                .rank(&text.join("\n"))
                .iter()
                .take(10)
                .map(|(d, _)| cfg.tools.at(*d as usize).unwrap().name.clone())
                .collect();
            top10 += usize::from(q.needed.iter().all(|n| ranked.contains(n)));
        }
        bytes.sort_unstable();
        let n = questions.len() as f64;
        println!(
            "{mode}: first turn offers every ground-truth function: {:.1}% ({all_in}/{}); the index's own top 10: {:.1}%; first-turn bytes median {}, max {}",
            100.0 * all_in as f64 / n, questions.len(), 100.0 * top10 as f64 / n, bytes[bytes.len() / 2], bytes[bytes.len() - 1]
        );
        find_recall(&cfg, &pool, &questions, mode);
    }
}

/// BFCL's Python-flavoured types as JSON Schema's (`dict`, `float`, `tuple`, `any`).
fn json_schema(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, t)| !(k.as_str() == "type" && t.as_str() == Some("any")))
                .map(|(k, t)| {
                    let t = match (k.as_str(), t.as_str()) {
                        ("type", Some("dict")) => json!("object"),
                        ("type", Some("float")) => json!("number"),
                        ("type", Some("tuple" | "list")) => json!("array"),
                        ("type", Some("str")) => json!("string"),
                        ("type", Some("int")) => json!("integer"),
                        ("type", Some("bool")) => json!("boolean"),
                        _ => json_schema(t),
                    };
                    (k.clone(), t)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(json_schema).collect()),
        other => other.clone(),
    }
}

fn user_texts(messages: &Value) -> Vec<&str> {
    messages.as_array().unwrap().iter().filter(|m| m["role"] == "user").filter_map(|m| m["content"].as_str()).collect()
}

/// `find_tools` with the words of the needed function's name, then of its description.
fn find_recall(cfg: &Rc<Config>, pool: &BTreeMap<String, Value>, questions: &[Question], mode: &str) {
    for (label, words) in [("name", true), ("description", false)] {
        let (mut found, mut total, mut kept) = (0, 0, 0);
        for q in questions {
            for name in &q.needed {
                let Some(f) = pool.get(name) else { continue };
                let query = if words {
                    f["name"].as_str().unwrap().replace(['.', '_', '-'], " ")
                } else {
                    f["description"].as_str().unwrap_or("").to_string()
                };
                let (body, prefix) = after_find(cfg, &q.messages, &query);
                total += 1;
                kept += usize::from(prefix);
                let hit = if mode == "native" {
                    offered(&body).contains(name)
                } else {
                    described(&body).contains(&format!("\n\n{name}: "))
                        || described(&body).contains(&format!(":\n\n{name}: "))
                };
                found += usize::from(hit);
            }
        }
        println!("{mode}: find_tools with the words of the needed function's {label} offers it on the next turn: {:.1}% ({found}/{total}); the next turn keeps the first as a prefix: {kept}/{total}", 100.0 * found as f64 / total as f64);
    }
}

/// Plain BM25 (one field: name, description and parameter names; lower-cased words, no stemming, no
/// stopwords, k1 1.2, b 0.75), top 10.
fn plain_bm25(pool: &BTreeMap<String, Value>, questions: &[Question]) {
    let words = |s: &str| -> Vec<String> {
        s.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
    };
    let docs: Vec<(String, Vec<String>)> = pool
        .iter()
        .map(|(name, f)| {
            let params = f["parameters"]["properties"]
                .as_object()
                .map(|p| p.keys().cloned().collect::<Vec<_>>().join(" "))
                .unwrap_or_default();
            (
                name.clone(),
                words(&format!("{} {} {params}", f["name"].as_str().unwrap(), f["description"].as_str().unwrap_or(""))),
            )
        })
        .collect();
    let n = docs.len() as f64;
    let avg = docs.iter().map(|d| d.1.len()).sum::<usize>() as f64 / n;
    let mut df: BTreeMap<&str, f64> = BTreeMap::new();
    for (_, d) in &docs {
        for w in d.iter().collect::<BTreeSet<_>>() {
            *df.entry(w).or_default() += 1.0;
        }
    }
    let mut hits = 0;
    for q in questions {
        let terms: BTreeSet<String> = user_texts(&q.messages).iter().flat_map(|t| words(t)).collect();
        let mut scored: Vec<(f64, &str)> = docs
            .iter()
            .map(|(name, d)| {
                let s = terms.iter().map(|t| {
                    let tf = d.iter().filter(|w| *w == t).count() as f64;
                    let Some(&df) = df.get(t.as_str()) else { return 0.0 };
                    let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                    idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * d.len() as f64 / avg))
                });
                (s.sum(), name.as_str())
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        let top: BTreeSet<&str> = scored.iter().take(10).map(|s| s.1).collect();
        hits += usize::from(q.needed.iter().all(|n| top.contains(n.as_str())));
    }
    println!(
        "plain BM25 top 10 over the same pool: {:.1}% ({hits}/{})",
        100.0 * hits as f64 / questions.len() as f64,
        questions.len()
    );
}

fn config_with(mode: &str, apis: Value) -> Config {
    let mut c = json!({"mode": mode, "llm": {"serviceName": "l", "servicePort": 1, "path": "/v1/chat/completions"}, "apis": apis});
    if mode == "all" {
        c["mode"] = json!("react");
        c["tools"] = json!({"select": "all"});
    }
    Config::from_value(&c).unwrap_or_else(|e| panic!("{e}"))
}

fn bytes() {
    let messages = json!([{"role": "user", "content": "Archive the invoice records of region 3"}]);
    for ops in [1, 200, 2_400] {
        let apis = json!([{"apiProvider": {"serviceName": "s", "servicePort": 1}, "api": big_spec(ops)}]);
        for mode in ["react", "native", "all"] {
            let cfg = match Config::from_value(&json!({"mode": if mode == "native" { "native" } else { "react" },
                "llm": {"serviceName": "l", "servicePort": 1, "path": "/v1/chat/completions"}, "apis": apis,
                "tools": {"select": if mode == "all" { "all" } else { "auto" }}}))
            {
                Ok(c) => Rc::new(c),
                Err(e) => {
                    println!("{ops} operations, {mode}: {e}");
                    continue;
                }
            };
            let (_, body) = first_turn(&cfg, &messages);
            let label = if mode == "all" { "react, tools.select all" } else { mode };
            println!("{ops} operations, {label}: first turn {} bytes (~{} tokens)", body.len(), body.len() / 4);
        }
    }
}

/// 10,000 operations: generated, or the corpus's functions repeated (renamed) to 10,000, whose
/// vocabulary is a real one.
fn build(dir: Option<&String>) {
    let apis = match dir {
        None => json!([{"apiProvider": {"serviceName": "s", "servicePort": 1}, "api": big_spec(10_000)}]),
        Some(dir) => {
            // Names that stay unique with a prefix within the 64 characters a name may have.
            let tools: Vec<Value> =
                mcp_list(&corpus(dir).0).into_iter().filter(|t| t["name"].as_str().unwrap().len() <= 56).collect();
            let many: Vec<Value> = (0..10_000)
                .map(|i| {
                    let mut t = tools[i % tools.len()].clone();
                    t["name"] = json!(format!("c{}_{}", i / tools.len(), t["name"].as_str().unwrap()));
                    t
                })
                .collect();
            json!([{"mcpServer": {"serviceName": "m", "servicePort": 1, "path": "/mcp", "toolsList": {"tools": many}}}])
        }
    };
    let cfg = config_with("all", apis);
    let mut best = f64::MAX;
    let mut index = Index::default();
    for _ in 0..5 {
        let t = Instant::now();
        index = Index::build(&cfg.tools);
        best = best.min(t.elapsed().as_secs_f64());
    }
    let t = Instant::now();
    let n = 1_000;
    for i in 0..n {
        std::hint::black_box(index.rank(&format!("archive the invoice records of region {}", i % 40)));
    }
    let rank_us = t.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    println!(
        "10,000 operations: index built in {:.1} ms (best of 5), {} bytes ({} per operation, {} terms); a ranking takes {rank_us:.0} µs",
        best * 1000.0,
        index.bytes(),
        index.bytes() / 10_000,
        index.terms()
    );
}
