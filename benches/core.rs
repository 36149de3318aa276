//! Microbenchmarks of the core: where the time of a request goes before anything else is optimised.
//! `cargo bench` (or `cargo bench -- FILTER`). A small harness of its own: warm up, then time batches
//! and report the median and the spread per operation.

use api_agent::agent::{Agent, Command, Event, RequestMeta};
use api_agent::config::Config;
use api_agent::openapi::call;
use api_agent::prompt::react::parse;
use serde_json::{json, Value};
use std::hint::black_box;
use std::rc::Rc;
use std::time::{Duration, Instant};

fn bench(name: &str, filter: &Option<String>, mut f: impl FnMut()) {
    if filter.as_ref().is_some_and(|p| !name.contains(p.as_str())) {
        return;
    }
    // BENCH_ITERS=N: run N times untimed, for instruction counts under `valgrind --tool=callgrind`.
    if let Some(n) = std::env::var("BENCH_ITERS").ok().and_then(|v| v.parse::<u64>().ok()) {
        (0..n).for_each(|_| f());
        println!("{name}: {n} iterations");
        return;
    }
    let warm = Instant::now();
    let mut per_batch = 0u64;
    while warm.elapsed() < Duration::from_millis(300) {
        f();
        per_batch += 1;
    }
    let per_batch = (per_batch / 10).max(1);
    let mut samples: Vec<f64> = (0..30)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..per_batch {
                f();
            }
            t.elapsed().as_nanos() as f64 / per_batch as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    let (p10, p50, p90) = (samples[3], samples[15], samples[27]);
    println!("{name:<44} {:>12}  (p10 {}, p90 {})", human(p50), human(p10), human(p90));
}

fn human(ns: f64) -> String {
    match ns {
        n if n >= 1e6 => format!("{:.2} ms", n / 1e6),
        n if n >= 1e3 => format!("{:.2} µs", n / 1e3),
        n => format!("{n:.0} ns"),
    }
}

/// A spec with `n` GET operations, each with two query parameters.
fn spec(n: usize) -> String {
    let mut paths = String::new();
    for i in 0..n {
        paths.push_str(&format!(
            "  /items{i}/{{id}}:\n    get:\n      operationId: getItem{i}\n      summary: Get item kind {i} by id\n      parameters:\n        - {{name: id, in: path, required: true, schema: {{type: string}}}}\n        - {{name: limit, in: query, schema: {{type: integer, maximum: 100}}}}\n"
        ));
    }
    format!("openapi: 3.0.0\ninfo: {{title: bench, version: '1'}}\nservers: [{{url: 'https://api.example.com/v1'}}]\npaths:\n{paths}")
}

fn config(spec: &str, mode: &str) -> Value {
    json!({"mode": mode,
           "llm": {"serviceName": "llm", "servicePort": 80, "path": "/v1/chat/completions", "model": "m", "apiKey": "k"},
           "apis": [{"apiProvider": {"serviceName": "api", "servicePort": 80, "apiKey": {"in": "query", "name": "key", "value": "K"}}, "api": spec}]})
}

fn completion(content: &str) -> Vec<u8> {
    json!({"id": "x", "object": "chat.completion", "created": 1, "model": "m",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
    .to_string()
    .into_bytes()
}

/// One whole request through the agent: `calls` tool calls, then the final answer.
fn full_loop(cfg: &Rc<Config>, request: &[u8], turns: &[Vec<u8>], tool_reply: &[u8]) -> usize {
    let meta = RequestMeta {
        id: "b".into(),
        now_ms: 0,
        unix_s: 0,
        seed: 1,
        steps: false,
        context_headers: Vec::new(),
        policy_headers: Vec::new(),
        client_headers: Default::default(),
        live: false,
        trace: Vec::new(),
        api: Default::default(),
        memory: Default::default(),
    };
    let mut agent = Agent::new(Rc::clone(cfg), meta);
    let mut turn = turns.iter();
    let mut cmds = agent.handle(Event::ClientRequest { body: request }, 1);
    loop {
        let Some(cmd) = cmds.pop() else { return 0 };
        cmds = match cmd {
            Command::Reply(r) => return r.body.len(),
            Command::Forward { .. } => agent.handle(
                Event::UpstreamReply {
                    status: 200,
                    body: turn.next().map_or(&[][..], Vec::as_slice),
                    headers_sent: true,
                },
                2,
            ),
            Command::Dispatch(c) if c.cluster.contains("||llm") => agent.handle(
                Event::CallReply {
                    id: c.id,
                    status: 200,
                    headers: &[],
                    body: turn.next().map_or(&[][..], Vec::as_slice),
                },
                3,
            ),
            Command::Dispatch(c) => {
                agent.handle(Event::CallReply { id: c.id, status: 200, headers: &[], body: tool_reply }, 3)
            }
            Command::WakeAt(_) => agent.handle(Event::Wake, 4),
            // Only for live hosts; this one is not.
            Command::Open(_) | Command::Send(_) | Command::Learn(_) => Vec::new(),
        };
    }
}

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/openapi-corpus/deepl-full.yaml");
    if let Ok(deepl) = std::fs::read_to_string(&corpus) {
        let cfg = config(&deepl, "react");
        bench("config: deepl-full.yaml (271 KB, 48 ops)", &filter, || {
            black_box(Config::from_value(&cfg).map(|c| c.tools.len()).unwrap_or(0));
        });
    }
    for n in [1, 200] {
        let cfg = config(&spec(n), "react");
        bench(&format!("config: {n} operation(s)"), &filter, || {
            black_box(Config::from_value(&cfg).map(|c| c.tools.len()).unwrap_or(0));
        });
        let Ok(c) = Config::from_value(&cfg) else {
            return;
        };
        bench(&format!("render ReAct catalog: {n} operation(s)"), &filter, || {
            black_box(c.template.render(&c.tools).len());
        });
    }
    policy_benches(&filter);
    let typical = "Thought: I need the weather.\nAction:\n```json\n{\"action\": \"get_weather_now\", \"action_input\": {\"location\": \"Jinan\", \"unit\": \"c\"}}\n```";
    bench("parse: typical json blob", &filter, || {
        black_box(parse(black_box(typical)));
    });
    let classic = "Thought: look it up\nAction: get_weather_now\nAction Input: {\"location\": \"Jinan\"}";
    bench("parse: typical classic", &filter, || {
        black_box(parse(black_box(classic)));
    });
    let braces = "{\"a".repeat(20_000);
    bench("parse: adversarial 60 KB of {\"a", &filter, || {
        black_box(parse(black_box(&braces)));
    });
    let long_answer = format!("Thought: done\nFinal Answer: {}", "word ".repeat(20_000));
    bench("parse: 100 KB final answer", &filter, || {
        black_box(parse(black_box(&long_answer)));
    });
    let Ok(one) = Config::from_value(&config(&spec(1), "react")) else {
        return;
    };
    let tool = one.tools.iter().next().and_then(|t| t.openapi()).cloned();
    if let Some(tool) = tool {
        let args = json!({"id": "a/b c", "limit": 5});
        bench("build tool request", &filter, || {
            black_box(call::build(&tool, &one.apis[0], black_box(&args)).map(|r| r.path.len()).unwrap_or(0));
        });
    }
    let request =
        json!({"model": "m", "messages": [{"role": "user", "content": "Get item 7 please."}]}).to_string().into_bytes();
    let tool_reply = br#"{"id": "7", "name": "seven", "tags": ["a", "b"], "price": 12.5}"#;
    for mode in ["react", "native"] {
        for (n, ops) in [(1, 1), (5, 1), (1, 200)] {
            let Ok(cfg) = Config::from_value(&config(&spec(ops), mode)) else {
                return;
            };
            let cfg = Rc::new(cfg);
            let call = |i: usize| -> Vec<u8> {
                if mode == "native" {
                    let msg = json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{i}"), "type": "function", "function": {"name": "getItem0", "arguments": "{\"id\": \"7\"}"}}]});
                    json!({"id": "x", "model": "m", "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls"}]}).to_string().into_bytes()
                } else {
                    completion("Thought: get it\nAction: getItem0\nAction Input: {\"id\": \"7\"}")
                }
            };
            let mut turns: Vec<Vec<u8>> = (0..n).map(call).collect();
            turns.push(completion("Thought: done\nFinal Answer: Item 7 is called seven."));
            bench(&format!("full loop {mode}: {n} tool call(s), {ops} op(s)"), &filter, || {
                black_box(full_loop(&cfg, &request, &turns, tool_reply));
            });
        }
    }
}

/// Issue 33's call rules: 20 rules that do not hold (each evaluated), for one call and for the offer
/// of a 200-tool catalog (every tool against the identity-only rules).
fn policy_benches(filter: &Option<String>) {
    use api_agent::policy::{decide, Decision, Offer, Program, Rule, VARS};
    let rule = |i: usize, src: &str| {
        let when = Program::compile(src, &VARS).ok()?;
        Some(Rule { name: format!("r{i}"), when, decision: Decision::Deny, reason: "no".into() })
    };
    let rules: Vec<Rule> = (0..20)
        .filter_map(|i| {
            let src = format!(
                "headers['x-role'] == 'role{i}' && tool.method != 'GET' || has(args.amount) && args.amount > {}",
                1000 + i
            );
            rule(i, &src)
        })
        .collect();
    let identity: Vec<Rule> =
        (0..20).filter_map(|i| rule(i, "headers['x-role'] == 'x' && tool.method != 'GET'")).collect();
    let tool = json!({"name": "refund", "api": "payments", "method": "POST", "path": "/refunds", "tags": ["payments"], "server": ""});
    let args = json!({"account": "acc-7", "amount": 5});
    let headers = json!({"x-role": "viewer", "x-account": "acc-7"});
    bench("policy: 20 rules decide one call", filter, || {
        black_box(decide(black_box(&rules), &tool, &args, &headers));
    });
    // The offer reads each request's headers once (`Offer::new`), then each tool.
    bench("policy: 20 identity rules over 200 tools (offer)", filter, || {
        let offer = Offer::new(black_box(&identity), &headers);
        black_box((0..200).filter(|_| offer.hidden(&tool)).count());
    });
    let holding: Vec<Rule> =
        (0..20).filter_map(|i| rule(i, "headers['x-role'] == 'viewer' && tool.name == 'n{i}'")).collect();
    bench("policy: 20 identity rules that the headers let through, over 200 tools (offer)", filter, || {
        let offer = Offer::new(black_box(&holding), &headers);
        black_box((0..200).filter(|_| offer.hidden(&tool)).count());
    });
}
