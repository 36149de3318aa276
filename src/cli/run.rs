//! `api-agent run`: the agent core driven against live HTTP endpoints, Envoy's part played here. Each
//! Envoy cluster of the configuration is mapped to a base URL; the forwarded first turn and every
//! callout are sent there on their own threads (so a turn's calls run concurrently), replies are fed
//! back as events, and `WakeAt` is honoured by waiting.

use super::http::{self, Response};
use super::plugin;
use super::select::{self, Request};
use super::transcript::{self, Kind, Step};
use super::{out, CliError, FAILED};
use crate::agent::{Agent, Call, CallId, ClientHeaders, Command, Event, Failure, Reply};
use crate::config::Config;
use crate::redact::redact;
use crate::tools::Binding;
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

pub fn run(req: &Request, endpoint_args: &[String], header_args: &[String], as_json: bool) -> Result<u8, CliError> {
    let chosen = req.choose()?;
    let cfg = chosen.config;
    let endpoints = Endpoints::parse(endpoint_args, &cfg)?;
    let client = client_headers(header_args, &cfg)?;
    let mut driver = Driver::new(Rc::clone(&cfg), endpoints, !as_json);
    // The client's headers are credentials: masked wherever the transcript could show them.
    driver.secrets.extend(client.0.iter().flat_map(|(_, v)| [v.clone(), v.trim_start_matches("Bearer ").to_string()]));
    driver.client_headers = client;
    let reply = driver.drive(&req.client_body(&cfg))?;
    let ms = driver.now();
    let body = driver.redact(&String::from_utf8_lossy(&reply.body));
    let answer = transcript::answer(reply.content_type, &body);
    if as_json {
        let steps: Vec<_> = driver.steps.iter().map(Step::json).collect();
        let transcript = json!({
            "configuration": chosen.label,
            "mode": plugin::mode_name(cfg.mode),
            "loop": plugin::loop_name(cfg.loop_phase),
            "question": driver.redact(&req.question),
            "steps": steps,
            "policy": driver.policy,
            "reply": transcript::reply_json(&reply, &body),
            "answer": answer.as_ref().ok(),
            "error": answer.as_ref().err(),
            "ms": ms,
        });
        out::line(&transcript.to_string());
    } else {
        driver.policy.iter().for_each(|p| out::line(&format!("policy rule {p}")));
        final_lines(&reply, &body, &answer, ms, driver.tokens()).iter().for_each(|l| out::line(l));
    }
    Ok(if reply.status == 200 { 0 } else { FAILED })
}

fn final_lines(reply: &Reply, body: &str, answer: &Result<String, String>, ms: u64, tokens: (u64, u64)) -> Vec<String> {
    let stream = reply.content_type.starts_with("text/event-stream");
    let what = format!(
        "HTTP {}{}, {ms} ms, tokens {} in / {} out",
        reply.status,
        if stream { ", text/event-stream" } else { "" },
        tokens.0,
        tokens.1
    );
    let mut lines = vec![match answer {
        Ok(text) if reply.status == 200 => format!("answer ({what}): {text}"),
        Ok(text) => format!("failed ({what}): {text}"),
        Err(e) => format!("failed ({what}): {e}"),
    }];
    if stream {
        lines.extend(body.lines().filter(|l| !l.is_empty()).map(|l| format!("    {l}")));
    }
    lines
}

/// Envoy cluster → base URL, for every cluster the configuration calls.
struct Endpoints(BTreeMap<String, String>);

impl Endpoints {
    fn parse(args: &[String], cfg: &Config) -> Result<Self, CliError> {
        let mut map = BTreeMap::new();
        for arg in args {
            let (cluster, url) = arg
                .split_once('=')
                .ok_or_else(|| CliError::usage(format!("--endpoint '{arg}': expected CLUSTER=URL")))?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(CliError::usage(format!(
                    "--endpoint '{arg}': the URL must start with http:// or https://"
                )));
            }
            map.insert(cluster.to_string(), url.trim_end_matches('/').to_string());
        }
        let needed = needed(cfg);
        let missing: Vec<&str> = needed.iter().filter(|c| !map.contains_key(*c)).map(String::as_str).collect();
        if !missing.is_empty() {
            let all: Vec<String> = needed.iter().map(|c| format!("--endpoint '{c}=URL'")).collect();
            return Err(CliError::usage(format!(
                "no --endpoint for cluster(s) {}; this configuration needs {}",
                missing.join(", "),
                all.join(" ")
            )));
        }
        for cluster in map.keys().filter(|c| !needed.contains(c)) {
            out::error_line(&format!("api-agent: --endpoint {cluster}: this configuration does not call that cluster"));
        }
        Ok(Endpoints(map))
    }

    fn url(&self, cluster: &str, path: &str) -> Option<String> {
        self.0.get(cluster).map(|base| format!("{base}{path}"))
    }
}

/// The LLM's cluster, then every API's and token service's, each once.
fn needed(cfg: &Config) -> Vec<String> {
    let mut out = vec![cfg.llm.upstream.cluster.clone()];
    for api in &cfg.apis {
        let exchange = api.identity.token_exchange.as_ref().map(|x| &x.upstream.cluster);
        for cluster in std::iter::once(&api.upstream.cluster).chain(exchange) {
            if !out.contains(cluster) {
                out.push(cluster.clone());
            }
        }
    }
    out
}

/// `--header NAME:VALUE`: the client's headers the configuration forwards or exchanges (others are
/// ignored, with a warning).
fn client_headers(args: &[String], cfg: &Config) -> Result<ClientHeaders, CliError> {
    let policy = cfg.call_policy.iter().flat_map(|p| &p.headers);
    let used: Vec<String> = cfg.identity_headers.iter().chain(policy).cloned().collect();
    let mut out = Vec::new();
    for arg in args {
        // Without a colon there is no telling name from value: nothing of it is shown.
        let (name, value) = arg.split_once(':').ok_or_else(|| {
            CliError::usage("--header: expected NAME:VALUE (the argument is not shown: it may hold a credential)")
        })?;
        let name = name.trim().to_ascii_lowercase();
        if name.is_empty() || !name.bytes().all(crate::config::is_token_byte) {
            return Err(CliError::usage(format!("--header '{name}': not a valid header name")));
        }
        if value.contains(['\r', '\n', '\0']) {
            return Err(CliError::usage(format!("--header {name}: the value must not contain CR, LF or NUL")));
        }
        if !used.contains(&name) {
            out::error_line(&format!(
                "api-agent: --header {name}: neither forwarded by an API nor read by policy.rules"
            ));
            continue;
        }
        out.push((name, value.trim().to_string()));
    }
    Ok(ClientHeaders(out))
}

/// An HTTP exchange in flight: the forwarded first turn, or a callout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Job {
    Forward,
    Call(CallId),
}

struct Pending {
    kind: Kind,
    method: String,
    url: String,
}

struct Done {
    job: Job,
    result: Result<Response, Failure>,
    ms: u64,
}

struct Driver {
    cfg: Rc<Config>,
    endpoints: Endpoints,
    client: ureq::Agent,
    secrets: Vec<String>,
    /// The client's headers (`--header`).
    client_headers: ClientHeaders,
    /// Which call rule decided what (`rule: decision`), in order.
    policy: Vec<String>,
    start: Instant,
    tx: Sender<Done>,
    rx: Receiver<Done>,
    pending: HashMap<Job, Pending>,
    steps: Vec<Step>,
    llm_calls: u32,
    /// Print each step as it completes.
    live: bool,
}

impl Driver {
    fn new(cfg: Rc<Config>, endpoints: Endpoints, live: bool) -> Self {
        let (tx, rx) = mpsc::channel();
        let secrets = cfg.secrets().to_vec();
        Driver {
            cfg,
            endpoints,
            client: http::client(),
            secrets,
            client_headers: ClientHeaders::default(),
            start: Instant::now(),
            tx,
            rx,
            pending: HashMap::new(),
            steps: Vec::new(),
            policy: Vec::new(),
            llm_calls: 0,
            live,
        }
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn redact(&self, text: &str) -> String {
        redact(text, &self.secrets).into_owned()
    }

    fn tokens(&self) -> (u64, u64) {
        self.steps.iter().filter_map(|s| s.tokens).fold((0, 0), |(a, b), (i, o)| (a + i, b + o))
    }

    /// Runs one request to the agent's reply.
    fn drive(&mut self, body: &[u8]) -> Result<Reply, CliError> {
        let mut meta = select::meta(self.now());
        let (policy, identity): (Vec<_>, Vec<_>) = self
            .client_headers
            .0
            .iter()
            .cloned()
            .partition(|(n, _)| self.cfg.call_policy.iter().any(|p| p.headers.contains(n)));
        meta.policy_headers = policy;
        meta.client_headers = ClientHeaders(identity);
        let mut agent = Agent::new(Rc::clone(&self.cfg), meta);
        let mut commands = agent.handle(Event::ClientRequest { body }, self.now());
        loop {
            let mut wake = None;
            for cmd in commands {
                match cmd {
                    Command::Reply(r) => {
                        self.policy = agent.report().policy.iter().map(|(r, d)| format!("{r}: {d}")).collect();
                        return Ok(r);
                    }
                    Command::WakeAt(at) => wake = Some(at),
                    Command::Forward { body } => self.forward(body),
                    Command::Dispatch(call) => self.dispatch(call),
                    // Come only to live hosts (select::meta is not one).
                    Command::Open(_) | Command::Send(_) => {}
                    // What the request learns is for later requests; the CLI runs one.
                    Command::Learn(_) => {}
                }
            }
            commands = self.next(&mut agent, wake)?;
        }
    }

    /// Waits for the next reply, or for the agent's wake-up time, and feeds it to the agent.
    fn next(&mut self, agent: &mut Agent, wake: Option<u64>) -> Result<Vec<Command>, CliError> {
        let stuck = || CliError::failed("the agent stopped without an answer");
        let done = match wake {
            Some(at) => match self.rx.recv_timeout(Duration::from_millis(at.saturating_sub(self.now()))) {
                Ok(done) => done,
                Err(RecvTimeoutError::Timeout) => {
                    // Never early: a wake-up before the time asked for would find nothing due.
                    while self.now() < at {
                        std::thread::sleep(Duration::from_millis(at - self.now()));
                    }
                    return Ok(agent.handle(Event::Wake, self.now()));
                }
                Err(RecvTimeoutError::Disconnected) => return Err(stuck()),
            },
            None if self.pending.is_empty() => return Err(stuck()),
            None => self.rx.recv().map_err(|_| stuck())?,
        };
        Ok(self.feed(agent, done))
    }

    /// The first turn goes where the route would send it: the LLM's endpoint, with its credentials.
    fn forward(&mut self, body: Vec<u8>) {
        let llm = &self.cfg.llm;
        let mut headers = vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("accept-encoding".to_string(), "identity".to_string()),
            ("host".to_string(), llm.upstream.authority_or_service()),
        ];
        if let Some(key) = &llm.api_key {
            headers.push(("authorization".into(), format!("Bearer {key}")));
        }
        let timeout_ms = llm.upstream.timeout_ms.min(llm.max_request_time_ms);
        let (cluster, path) = (llm.upstream.cluster.clone(), llm.path.clone());
        self.start_job(
            Job::Forward,
            &cluster,
            http::Request { method: "POST".into(), url: path, headers, body: Some(body), timeout_ms },
        );
    }

    fn dispatch(&mut self, call: Call) {
        let mut headers = call.headers;
        headers.retain(|(k, _)| k != "host");
        headers.push(("host".into(), call.authority));
        let request = http::Request {
            method: call.method.into(),
            url: call.path,
            headers,
            body: call.body.as_deref().map(<[u8]>::to_vec),
            timeout_ms: call.timeout_ms,
        };
        self.start_job(Job::Call(call.id), &call.cluster, request);
    }

    /// Sends `request` (its `url` still the path) to `cluster`'s endpoint on a thread of its own.
    fn start_job(&mut self, job: Job, cluster: &str, mut request: http::Request) {
        let kind = if cluster == self.cfg.llm.upstream.cluster {
            self.llm_calls += 1;
            Kind::Llm { turn: self.llm_calls }
        } else if is_exchange(&self.cfg, cluster, &request.url) {
            Kind::Tool { name: EXCHANGE.to_string() }
        } else {
            let rpc = request.body.as_deref().and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok());
            Kind::Tool { name: tool_name(&self.cfg, cluster, &request.method, &request.url, rpc.as_ref()) }
        };
        let url = self.endpoints.url(cluster, &request.url);
        let shown = self.redact(url.as_deref().unwrap_or(&request.url));
        self.pending.insert(job, Pending { kind, method: request.method.clone(), url: shown });
        let tx = self.tx.clone();
        let Some(url) = url else {
            let failure = Failure::NotSent(format!("unknown cluster {cluster}"));
            let _ = tx.send(Done { job, result: Err(failure), ms: 0 });
            return;
        };
        request.url = url;
        let client = self.client.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            let result = http::send(&client, &request);
            let _ = tx.send(Done { job, result, ms: started.elapsed().as_millis() as u64 });
        });
    }

    /// Records the step and hands the reply (or the failure) to the agent as Envoy would.
    fn feed(&mut self, agent: &mut Agent, done: Done) -> Vec<Command> {
        let Some(pending) = self.pending.remove(&done.job) else {
            return Vec::new();
        };
        self.record(pending, &done);
        let now = self.now();
        match (done.job, done.result) {
            (Job::Forward, Ok(r)) => {
                // As in the filter: a reply with a body arrives after the client got the headers.
                let headers_sent = !r.body.is_empty();
                agent.handle(Event::UpstreamReply { status: r.status, body: &r.body, headers_sent }, now)
            }
            (Job::Forward, Err(f)) => {
                let (status, body) = envoy_local_reply(&f);
                agent.handle(Event::UpstreamReply { status, body: body.as_bytes(), headers_sent: true }, now)
            }
            (Job::Call(id), Ok(r)) => {
                agent.handle(Event::CallReply { id, status: r.status, headers: &r.headers, body: &r.body }, now)
            }
            (Job::Call(id), Err(f)) => agent.handle(Event::CallFailed { id, failure: &f }, now),
        }
    }

    fn record(&mut self, p: Pending, done: &Done) {
        let (status, failure, text, tokens) = match (&done.result, &p.kind) {
            (Ok(r), Kind::Llm { .. }) => {
                let (text, tokens) = transcript::model_output(r.status, &r.body);
                (Some(r.status), None, text, tokens)
            }
            // The token service's reply is a credential: only its status is shown.
            (Ok(r), Kind::Tool { name }) if name == EXCHANGE => (Some(r.status), None, String::new(), None),
            (Ok(r), Kind::Tool { .. }) => (Some(r.status), None, transcript::observation(r.status, &r.body), None),
            (Err(f), _) => (None, Some(self.redact(&f.to_string())), String::new(), None),
        };
        let text = self.redact(&text);
        let step = Step { kind: p.kind, method: p.method, url: p.url, status, failure, ms: done.ms, tokens, text };
        if self.live {
            step.lines().iter().for_each(|l| out::line(l));
        }
        self.steps.push(step);
    }
}

/// How the transcript names a token exchange (`tokenExchange`).
const EXCHANGE: &str = "(token exchange)";

/// A call to a token service of the configuration.
fn is_exchange(cfg: &Config, cluster: &str, path: &str) -> bool {
    let exchanges = cfg.apis.iter().filter_map(|a| a.identity.token_exchange.as_ref());
    exchanges.into_iter().any(|x| x.upstream.cluster == cluster && x.path == path)
}

/// What Envoy answers itself when the route's upstream fails: the agent reads it as the LLM's reply.
fn envoy_local_reply(f: &Failure) -> (u16, String) {
    match f {
        Failure::Timeout => (504, "upstream request timeout".into()),
        Failure::Broken(why) | Failure::NotSent(why) => {
            (503, format!("upstream connect error or disconnect/reset before headers. reset reason: {why}"))
        }
    }
}

/// The tool a call is for: the operation of that cluster and method whose URL template the path fits,
/// or the MCP tool its JSON-RPC body names (a handshake step is named by its method).
fn tool_name(cfg: &Config, cluster: &str, method: &str, path: &str, rpc: Option<&serde_json::Value>) -> String {
    let rpc_method = rpc.and_then(|m| m["method"].as_str()).unwrap_or("");
    let called = rpc.and_then(|m| m["params"]["name"].as_str()).unwrap_or("");
    let path = path.split('?').next().unwrap_or("");
    cfg.tools
        .iter()
        .filter(|t| t.method() == method && cfg.apis[t.api].upstream.cluster == cluster)
        .find(|t| match &t.binding {
            Binding::OpenApi(op) => template_matches(&format!("{}{}", op.server.base_path, op.path), path),
            Binding::Mcp(m) => m.path == path && (rpc_method != "tools/call" || m.remote == called),
        })
        .map_or_else(
            || "(unknown tool)".to_string(),
            |t| match &t.binding {
                Binding::Mcp(_) if rpc_method != "tools/call" => format!("MCP {rpc_method}"),
                _ => t.name.clone(),
            },
        )
}

/// `/v3/stations/{id}` fits `/v3/stations/JN-001`: the same segments, a `{…}` segment fitting any.
fn template_matches(template: &str, path: &str) -> bool {
    let template = template.trim_start_matches('/');
    let path = path.trim_start_matches('/');
    let (t, p): (Vec<&str>, Vec<&str>) = (template.split('/').collect(), path.split('/').collect());
    t.len() == p.len() && t.iter().zip(&p).all(|(t, p)| if t.contains('{') { !p.is_empty() } else { t == p })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_fit_their_templates() {
        assert!(template_matches("/v3/stations/{station_id}", "/v3/stations/JN-001"));
        assert!(template_matches("/v3/weather/now", "/v3/weather/now"));
        assert!(!template_matches("/v3/stations/{station_id}", "/v3/stations/"));
        assert!(!template_matches("/v3/weather/now", "/v3/weather/now/x"));
    }

    #[test]
    fn failed_first_turns_read_as_envoys_own_replies() {
        assert_eq!(envoy_local_reply(&Failure::Timeout), (504, "upstream request timeout".into()));
        assert_eq!(envoy_local_reply(&Failure::Broken("refused".into())).0, 503);
    }
}
