//! The `api-agent` command-line tool, run as a built binary: `validate` on plain, Envoy, Higress and
//! Istio configurations; `tools` as text and JSON; `prompt` against the core's own first request; `run`
//! against mock LLM and API servers on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use api_agent::agent::{Agent, Command as AgentCommand, Event, RequestMeta};
use api_agent::config::{Config, Mode};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::rc::Rc;
use std::sync::{Arc, Mutex};

const DEMO: &str = "envoy/demo.yaml";
const LLM: &str = "outbound|18001||llm.dns";
const WEATHER: &str = "outbound|18002||weather.dns";
const TRANSLATE: &str = "outbound|18003||translate.dns";
const SECRETS: [&str; 3] = ["sk-demo-llm", "demo-weather-key", "demo-translate-key"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the tool in the repository root, with `stdin` as its standard input.
fn cli_with(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_api-agent"))
        .args(args)
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start api-agent");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn cli(args: &[&str]) -> Output {
    cli_with(args, "")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

fn status(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// A file in a directory of this test process's own, removed (with the directory, once empty) on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("api-agent-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

fn spec(name: &str) -> String {
    std::fs::read_to_string(root().join("openapi-examples").join(name)).unwrap()
}

fn plugin_config(llm: Value) -> String {
    json!({"llm": llm, "apis": [{"apiProvider": {"serviceName": "weather.dns", "servicePort": 80,
        "apiKey": {"in": "query", "name": "key", "value": "k-123"}}, "api": spec("weather.yaml")}]})
    .to_string()
}

fn good_llm() -> Value {
    json!({"serviceName": "llm.dns", "servicePort": 443, "path": "/v1/chat/completions", "apiKey": "sk-x"})
}

/// The demo's plugin configuration, as Envoy hands it to the filter.
fn demo_config() -> Config {
    let text = std::fs::read_to_string(root().join(DEMO)).unwrap();
    let bootstrap = api_agent::doc::parse(&text).unwrap();
    let filters = &bootstrap["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0];
    let wasm = &filters["typed_config"]["http_filters"][0]["typed_config"]["config"]["configuration"]["value"];
    Config::from_slice(wasm.as_str().unwrap().as_bytes()).unwrap()
}

#[test]
fn validate_accepts_a_good_configuration_and_names_its_tools() {
    let file = TempFile::new("good.json", &plugin_config(good_llm()));
    let p = file.path();
    let o = cli(&["validate", p]);
    let tools = Config::from_slice(plugin_config(good_llm()).as_bytes()).unwrap().tools.len();
    assert_eq!(stdout(&o), format!("ok: {p} ({tools} tools, mode react, loop response)\n"));
    assert_eq!(status(&o), 0);
    let mut config: Value = serde_json::from_str(&plugin_config(good_llm())).unwrap();
    config["mode"] = json!("native");
    config["colour"] = json!("blue");
    let file = TempFile::new("warned.json", &config.to_string());
    let p = file.path();
    let o = cli(&["validate", p]);
    assert_eq!(
        stdout(&o),
        format!(
            "ok: {p} ({tools} tools, mode native, loop response)\nwarning: {p}: unknown top-level key 'colour' ignored\n"
        )
    );
    assert_eq!(status(&o), 0);
}

#[test]
fn validate_rejects_a_bad_configuration_with_the_filters_message() {
    let llm = json!({"serviceName": "llm.dns", "servicePort": 443});
    let file = TempFile::new("bad.json", &plugin_config(llm));
    let p = file.path();
    let o = cli(&["validate", p]);
    assert_eq!(stdout(&o), format!("error: {p}: api-agent configuration rejected: llm.path: required\n"));
    assert_eq!(status(&o), 1);
    let file = TempFile::new("broken.yaml", "llm: [1, 2\n");
    let o = cli(&["validate", file.path()]);
    assert!(stdout(&o).contains("api-agent configuration rejected: configuration not valid JSON or YAML"), "{o:?}");
    assert_eq!(status(&o), 1);
}

#[test]
fn validate_reads_standard_input_and_refuses_bad_usage() {
    let o = cli_with(&["validate", "-"], &plugin_config(good_llm()));
    assert!(stdout(&o).starts_with("ok: <stdin> ("), "{o:?}");
    assert_eq!(status(&o), 0);
    assert_eq!(status(&cli(&["validate"])), 2);
    let o = cli(&["validate", "/nonexistent/api-agent.yaml"]);
    assert!(stderr(&o).contains("cannot read /nonexistent/api-agent.yaml"), "{o:?}");
    assert_eq!(status(&o), 2);
}

#[test]
fn validate_finds_the_wasm_filter_of_the_envoy_demo() {
    let o = cli(&["validate", DEMO]);
    assert_eq!(
        stdout(&o),
        "ok: envoy/demo.yaml: listener agent, http_filters[0] (api-agent) (3 tools, mode react, loop response)\n"
    );
    assert_eq!(status(&o), 0);
}

/// A Higress WasmPlugin: no default configuration, a good rule, a disabled one and a bad one.
fn higress(bad_rule: &str) -> String {
    let api = [
        "openapi: 3.0.3",
        "info: {title: t, version: '1'}",
        "servers: [{url: 'https://restapi.amap.com/v3'}]",
        "paths:",
        "  /weather/weatherInfo:",
        "    get:",
        "      operationId: get_weather",
        "      parameters: [{name: city, in: query, required: true, schema: {type: string}}]",
        "      responses: {'200': {description: ok}}",
    ]
    .join("\n          ");
    format!(
        "apiVersion: extensions.higress.io/v1alpha1
kind: WasmPlugin
metadata: {{name: api-agent, namespace: higress-system}}
spec:
  defaultConfigDisable: true
  matchRules:
  - ingress: [llm-route]
    config:
      llm: {{apiKey: sk-rule, serviceName: dashscope.dns, servicePort: 443, path: /v1/chat/completions}}
      apis:
      - apiProvider: {{serviceName: geo.dns, servicePort: 80, apiKey: {{in: query, name: key, value: amap-key}}}}
        api: |
          {api}
  - domain: [disabled.example.com]
    configDisable: true
    config: {{llm: {{}}}}
  - service: [chat.dns:8080]
    config:
      llm: {{serviceName: other.dns, servicePort: 443{bad_rule}}}
      apis:
      - apiProvider: {{serviceName: geo.dns, servicePort: 80}}
        api: |
          {api}
"
    )
}

#[test]
fn validate_builds_higress_rules_as_the_controller_does() {
    let file = TempFile::new("higress-bad.yaml", &higress(""));
    let p = file.path();
    let o = cli(&["validate", p]);
    assert_eq!(
        stdout(&o),
        format!(
            "error: {p}: WasmPlugin higress-system/api-agent: api-agent configuration rejected: \
             _rules_[1].llm.path: required (from matchRules[2])\n"
        )
    );
    assert_eq!(status(&o), 1);
    let file = TempFile::new("higress-good.yaml", &higress(", path: /v1/chat/completions"));
    let p = file.path();
    let o = cli(&["validate", p]);
    let place = format!("{p}: WasmPlugin higress-system/api-agent");
    assert_eq!(
        stdout(&o),
        format!(
            "ok: {place}, _rules_[0] matching _match_route_ [llm-route] (1 tool, mode react, loop response)\n\
             ok: {place}, _rules_[1] matching _match_service_ [chat.dns:8080] (1 tool, mode react, loop response)\n\
             note: {place}: no global configuration; requests that no rule matches pass through\n"
        )
    );
    assert_eq!(status(&o), 0);
}

fn istio() -> String {
    let config = plugin_config(good_llm());
    format!(
        "apiVersion: extensions.istio.io/v1alpha1\nkind: WasmPlugin\nmetadata: {{name: agent}}\nspec:\n  url: oci://r/a:1\n  pluginConfig: {config}\n"
    )
}

#[test]
fn validate_reads_istio_plugin_config_and_multi_document_files() {
    let file = TempFile::new("istio.yaml", &istio());
    let p = file.path();
    let o = cli(&["validate", p]);
    assert!(stdout(&o).starts_with(&format!("ok: {p}: WasmPlugin agent (")), "{o:?}");
    assert_eq!(status(&o), 0);
    let all = format!(
        "{}---\napiVersion: v1\nkind: Service\nmetadata: {{name: llm}}\n---\n{}",
        istio(),
        higress(", path: /v1")
    );
    let file = TempFile::new("all.yaml", &all);
    let p = file.path();
    let o = cli(&["validate", p]);
    let lines: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
    assert!(lines[0].starts_with(&format!("ok: {p}#1: WasmPlugin agent (")), "{lines:?}");
    assert_eq!(lines[1], format!("skipped: {p}#2: Service llm: v1 Service is not a WasmPlugin"));
    assert!(lines[2].starts_with(&format!("ok: {p}#3: WasmPlugin higress-system/api-agent, _rules_[0]")), "{lines:?}");
    assert_eq!(status(&o), 0);
}

#[test]
fn tools_lists_the_demo_tools_with_credentials_masked() {
    let o = cli(&["tools", DEMO]);
    let text = stdout(&o);
    assert_eq!(status(&o), 0);
    for expected in [
        "envoy/demo.yaml: listener agent, http_filters[0] (api-agent)",
        "  LLM: POST /v1/chat/completions on cluster outbound|18001||llm.dns, :authority llm.local, timeout 30000 ms",
        "    credentials: header authorization: Bearer ****",
        "  get_weather_now: Current weather. Get the current weather (temperature and conditions) for a city.",
        "    GET /v3/weather/now on cluster outbound|18002||weather.dns, :authority api.weather.example, timeout 5000 ms",
        "    credentials: query key=****",
        "    GET /v3/stations/{station_id} on cluster outbound|18002||weather.dns",
        "    POST /v2/translate on cluster outbound|18003||translate.dns, :authority api.translate.example",
        "    credentials: header X-Api-Key: ****",
        "    arguments: {\"type\":\"object\",\"properties\":{\"station_id\"",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    SECRETS.iter().for_each(|s| assert!(!text.contains(s), "{s} printed"));
}

#[test]
fn tools_json_is_one_group_per_configuration() {
    let o = cli(&["tools", DEMO, "--json"]);
    assert_eq!(status(&o), 0);
    SECRETS.iter().for_each(|s| assert!(!stdout(&o).contains(s), "{s} printed"));
    let groups: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let g = &groups[0];
    assert_eq!(groups.as_array().unwrap().len(), 1);
    assert_eq!(
        (g["scope"].as_str(), g["mode"].as_str(), g["loop"].as_str()),
        (Some("global"), Some("react"), Some("response"))
    );
    assert_eq!(g["llm"]["cluster"], LLM);
    let names: Vec<&str> = g["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["get_weather_now", "get_station", "translate_text"]);
    let station = &g["tools"][1];
    assert_eq!(station["url"], "/v3/stations/{station_id}");
    assert_eq!(station["authority"], "api.weather.example");
    assert_eq!(station["credentials"], json!(["query key=****"]));
    assert_eq!(station["arguments"]["required"], json!(["station_id"]));
    assert_eq!(g["tools"][2]["method"], "POST");
    assert_eq!(g["tools"][2]["credentials"], json!(["header Authorization: X-Api-Key ****", "header X-Api-Key: ****"]));
}

/// The first LLM request as the core writes it for the demo configuration in `mode`.
fn core_first_request(mode: Mode, question: &str, stream: bool) -> Vec<u8> {
    let mut cfg = demo_config();
    cfg.mode = mode;
    let meta = RequestMeta {
        id: "t".into(),
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
    let mut agent = Agent::new(Rc::new(cfg), meta);
    let mut body = json!({"messages": [{"role": "user", "content": question}], "model": "demo-react-model"});
    if stream {
        body["stream"] = json!(true);
    }
    match agent.handle(Event::ClientRequest { body: body.to_string().as_bytes() }, 0).remove(0) {
        AgentCommand::Forward { body } => body,
        other => panic!("{other:?}"),
    }
}

#[test]
fn prompt_prints_the_first_request_exactly_in_both_modes() {
    let q = "What is the weather in Jinan?";
    let o = cli(&["prompt", DEMO, "--question", q]);
    assert_eq!(status(&o), 0, "{o:?}");
    let mut expected = core_first_request(Mode::React, q, false);
    expected.push(b'\n');
    assert_eq!(o.stdout, expected);
    let react: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(react["stop"], json!(["Observation:", "\nQuestion:"]));
    assert!(react["messages"][0]["content"].as_str().unwrap().contains("get_weather_now"));

    let o = cli(&["prompt", DEMO, "--question", q, "--mode", "native", "--stream"]);
    assert_eq!(status(&o), 0, "{o:?}");
    let mut expected = core_first_request(Mode::Native, q, true);
    expected.push(b'\n');
    assert_eq!(o.stdout, expected);
    let native: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(native["tools"].as_array().unwrap().len(), 3);
    assert_eq!(native["stream"], json!(false));
}

/// A request as a mock server received it.
#[derive(Debug, Clone)]
struct Received {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

type Script = dyn Fn(usize, &Received) -> (u16, String) + Send + Sync;

/// An HTTP/1.1 server on 127.0.0.1 that answers request `n` with `script(n, request)` and records it.
struct Mock {
    url: String,
    received: Arc<Mutex<Vec<Received>>>,
}

fn mock(script: impl Fn(usize, &Received) -> (u16, String) + Send + Sync + 'static) -> Mock {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let received = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&received);
    let script: Arc<Script> = Arc::new(script);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (log, script) = (Arc::clone(&log), Arc::clone(&script));
            std::thread::spawn(move || serve(stream, &log, &*script));
        }
    });
    Mock { url, received }
}

fn serve(mut stream: TcpStream, log: &Mutex<Vec<Received>>, script: &Script) {
    let Some(request) = read_request(&stream) else { return };
    let n = {
        let mut log = log.lock().unwrap();
        log.push(request.clone());
        log.len() - 1
    };
    let (status, body) = script(n, &request);
    let head = format!(
        "HTTP/1.1 {status} Mock\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
}

fn read_request(stream: &TcpStream) -> Option<Received> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let Some((k, v)) = h.trim_end().split_once(':') else { break };
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let len = headers.iter().find(|(k, _)| k == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body).ok()?;
    Some(Received { method, path, headers, body: String::from_utf8_lossy(&body).into_owned() })
}

fn completion(message: Value) -> String {
    json!({"id": "c", "object": "chat.completion", "model": "mock",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
    .to_string()
}

fn text(content: &str) -> String {
    completion(json!({"role": "assistant", "content": content}))
}

/// A scripted ReAct LLM: an action on the weather tool, then the final answer.
fn react_llm() -> Mock {
    mock(|n, _| match n {
        0 => (
            200,
            text("Thought: I need the weather.\nAction: get_weather_now\nAction Input: {\"location\": \"Jinan\"}"),
        ),
        _ => (200, text("Thought: I now know the final answer.\nFinal Answer: It is 21 °C and sunny in Jinan.")),
    })
}

fn weather_api() -> Mock {
    mock(|_, r| {
        let body = if r.path.starts_with("/v3/stations/") {
            json!({"id": "JN-001", "name": "Jinan Central"})
        } else {
            json!({"location": "Jinan", "temperature": 21, "unit": "c", "condition": "sunny"})
        };
        (200, body.to_string())
    })
}

fn endpoints<'a>(llm: &'a Mock, weather: &'a Mock, translate: &'a Mock) -> Vec<String> {
    vec![format!("{LLM}={}", llm.url), format!("{WEATHER}={}", weather.url), format!("{TRANSLATE}={}", translate.url)]
}

fn run_args<'a>(extra: &'a [&'a str], endpoints: &'a [String]) -> Vec<&'a str> {
    let mut args = vec!["run", DEMO, "--question", "What is the weather in Jinan?"];
    args.extend_from_slice(extra);
    for e in endpoints {
        args.extend(["--endpoint", e.as_str()]);
    }
    args
}

#[test]
fn run_drives_the_react_loop_against_live_endpoints() {
    let (llm, weather, translate) = (react_llm(), weather_api(), mock(|_, _| (500, String::new())));
    let eps = endpoints(&llm, &weather, &translate);
    let o = cli(&run_args(&[], &eps));
    let out = stdout(&o);
    assert_eq!(status(&o), 0, "{o:?}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with(&format!("LLM turn 1: POST {}/v1/chat/completions -> 200 in ", llm.url)), "{out}");
    assert!(lines[0].ends_with("ms, tokens 10 in / 5 out"), "{out}");
    assert!(out.contains("    Action: get_weather_now\n"), "{out}");
    let tool =
        format!("tool get_weather_now: GET {}/v3/weather/now?location=Jinan&key=[redacted] -> 200 in ", weather.url);
    assert!(out.contains(&tool), "{out}");
    assert!(
        out.contains("    {\"location\":\"Jinan\",\"temperature\":21,\"unit\":\"c\",\"condition\":\"sunny\"}\n"),
        "{out}"
    );
    assert!(out.contains("LLM turn 2: POST "), "{out}");
    let last = lines.last().unwrap();
    assert!(last.starts_with("answer (HTTP 200, "), "{out}");
    assert!(last.ends_with("tokens 20 in / 10 out): It is 21 °C and sunny in Jinan."), "{out}");
    SECRETS.iter().for_each(|s| assert!(!out.contains(s), "{s} printed"));

    let tool_requests = weather.received.lock().unwrap().clone();
    assert_eq!(tool_requests.len(), 1);
    let r = &tool_requests[0];
    assert_eq!((r.method.as_str(), r.path.as_str()), ("GET", "/v3/weather/now?location=Jinan&key=demo-weather-key"));
    assert_eq!(r.header("host"), Some("api.weather.example"));
    let llm_requests = llm.received.lock().unwrap().clone();
    assert_eq!(llm_requests.len(), 2);
    for r in &llm_requests {
        assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/v1/chat/completions"));
        assert_eq!(r.header("authorization"), Some("Bearer sk-demo-llm"));
        assert_eq!(r.header("host"), Some("llm.local"));
    }
    let second: Value = serde_json::from_str(&llm_requests[1].body).unwrap();
    let observation = second["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_string();
    assert!(observation.starts_with("Observation: {\"location\":\"Jinan\""), "{observation}");
    assert!(translate.received.lock().unwrap().is_empty());
}

#[test]
fn run_json_prints_the_whole_transcript() {
    let (llm, weather, translate) = (react_llm(), weather_api(), mock(|_, _| (500, String::new())));
    let eps = endpoints(&llm, &weather, &translate);
    let o = cli(&run_args(&["--json"], &eps));
    assert_eq!(status(&o), 0, "{o:?}");
    SECRETS.iter().for_each(|s| assert!(!stdout(&o).contains(s), "{s} printed"));
    let t: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let kinds: Vec<&str> = t["steps"].as_array().unwrap().iter().map(|s| s["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["llm", "tool", "llm"]);
    let tool = &t["steps"][1];
    assert_eq!(tool["tool"], "get_weather_now");
    assert_eq!(tool["url"], format!("{}/v3/weather/now?location=Jinan&key=[redacted]", weather.url));
    assert_eq!(tool["status"], 200);
    assert_eq!(t["steps"][0]["tokens"], json!({"prompt": 10, "completion": 5}));
    assert_eq!(t["reply"]["status"], 200);
    assert_eq!(t["reply"]["body"]["choices"][0]["message"]["content"], "It is 21 °C and sunny in Jinan.");
    assert_eq!(t["answer"], "It is 21 °C and sunny in Jinan.");
    assert_eq!((t["mode"].as_str(), t["loop"].as_str()), (Some("react"), Some("response")));
}

#[test]
fn run_native_sends_a_turns_calls_and_streams_the_answer() {
    let llm = mock(|n, _| match n {
        0 => {
            let calls = json!([
                {"id": "a", "type": "function", "function": {"name": "get_weather_now", "arguments": "{\"location\":\"Jinan\"}"}},
                {"id": "b", "type": "function", "function": {"name": "get_station", "arguments": "{\"station_id\":\"JN-001\"}"}},
            ]);
            (200, completion(json!({"role": "assistant", "content": null, "tool_calls": calls})))
        }
        _ => (200, text("Jinan Central reports 21 °C.")),
    });
    let (weather, translate) = (weather_api(), mock(|_, _| (500, String::new())));
    let eps = endpoints(&llm, &weather, &translate);
    let o = cli(&run_args(&["--mode", "native", "--stream"], &eps));
    let out = stdout(&o);
    assert_eq!(status(&o), 0, "{o:?}");
    assert!(out.contains("    tool call get_weather_now({\"location\":\"Jinan\"})\n"), "{out}");
    assert!(out.contains("tool get_station: GET "), "{out}");
    assert!(out.contains("answer (HTTP 200, text/event-stream, "), "{out}");
    assert!(out.contains("): Jinan Central reports 21 °C.\n"), "{out}");
    assert!(out.contains("    data: [DONE]"), "{out}");
    let mut paths: Vec<String> = weather.received.lock().unwrap().iter().map(|r| r.path.clone()).collect();
    paths.sort();
    assert_eq!(
        paths,
        ["/v3/stations/JN-001?key=demo-weather-key", "/v3/weather/now?location=Jinan&key=demo-weather-key"]
    );
    let second: Value = serde_json::from_str(&llm.received.lock().unwrap()[1].body).unwrap();
    let roles: Vec<&str> = second["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "tool"]);
}

#[test]
fn run_retries_a_failed_llm_turn_after_the_agents_backoff() {
    let llm = mock(|n, _| match n {
        0 => (
            200,
            text("Thought: I need the weather.\nAction: get_weather_now\nAction Input: {\"location\": \"Jinan\"}"),
        ),
        1 => (503, "{\"error\": {\"message\": \"overloaded\"}}".to_string()),
        _ => (200, text("Final Answer: It is 21 °C.")),
    });
    let (weather, translate) = (weather_api(), weather_api());
    let eps = endpoints(&llm, &weather, &translate);
    let o = cli(&run_args(&[], &eps));
    let out = stdout(&o);
    assert_eq!(status(&o), 0, "{o:?}");
    assert!(out.contains("LLM turn 2: POST ") && out.contains(" -> 503 in "), "{out}");
    assert!(out.contains("LLM turn 3: POST "), "{out}");
    assert!(out.lines().last().unwrap().ends_with("): It is 21 °C."), "{out}");
    assert_eq!(llm.received.lock().unwrap().len(), 3);
}

#[test]
fn run_reports_a_failed_answer_and_missing_endpoints() {
    let llm = mock(|_, _| {
        (429, json!({"error": {"message": "slow down", "type": "rate_limit", "code": "rate"}}).to_string())
    });
    let (weather, translate) = (weather_api(), weather_api());
    let eps = endpoints(&llm, &weather, &translate);
    let o = cli(&run_args(&[], &eps));
    assert_eq!(status(&o), 1, "{o:?}");
    assert!(stdout(&o).lines().last().unwrap().starts_with("failed (HTTP 429, "), "{o:?}");
    assert!(stdout(&o).ends_with("rate: slow down\n"), "{o:?}");

    let o = cli(&run_args(&[], &eps[..1]));
    assert_eq!(status(&o), 2);
    assert!(
        stderr(&o).contains(&format!(
            "no --endpoint for cluster(s) {WEATHER}, {TRANSLATE}; this configuration needs --endpoint '{LLM}=URL'"
        )),
        "{o:?}"
    );
}

#[test]
fn run_header_is_the_clients_identity_on_the_apis_that_forward_it() {
    // A plugin configuration whose weather API forwards the client's `x-user-token`.
    let config = json!({
        "llm": {"serviceName": "llm.dns", "servicePort": 18001, "path": "/v1/chat/completions", "apiKey": "sk-x",
                "domain": "llm.local"},
        "apis": [{"apiProvider": {"serviceName": "weather.dns", "servicePort": 18002, "domain": "api.weather.example",
                                  "forwardHeaders": ["x-user-token"]}, "api": spec("weather.yaml")}],
    });
    let file = TempFile::new("forwarding.json", &config.to_string());
    let (llm, weather) = (react_llm(), weather_api());
    let eps = [format!("{LLM}={}", llm.url), format!("{WEATHER}={}", weather.url)];
    let mut args = vec!["run", file.path(), "--question", "What is the weather in Jinan?"];
    args.extend(["--header", "X-User-Token: tok-of-alice-123", "--header", "x-unused: 1"]);
    for e in &eps {
        args.extend(["--endpoint", e.as_str()]);
    }
    let o = cli(&args);
    assert_eq!(status(&o), 0, "{o:?}");
    let tools = weather.received.lock().unwrap().clone();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].header("x-user-token"), Some("tok-of-alice-123"), "forwarded to the API");
    for r in llm.received.lock().unwrap().iter() {
        assert_eq!(r.header("x-user-token"), None, "never to the LLM");
        assert!(!r.body.contains("tok-of-alice-123"));
    }
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(!out.contains("tok-of-alice-123") && !err.contains("tok-of-alice-123"), "printed: {out}{err}");
    assert!(err.contains("--header x-unused: neither forwarded by an API nor read by policy.rules"), "{err}");
    // A malformed header is a usage error that never echoes its value.
    let mut args = vec!["run", file.path(), "--question", "q", "--header", "no-colon-secret-value"];
    for e in &eps {
        args.extend(["--endpoint", e.as_str()]);
    }
    let o = cli(&args);
    assert_ne!(status(&o), 0);
    assert!(stderr(&o).contains("expected NAME:VALUE"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("secret-value"), "{}", stderr(&o));
}

#[test]
fn tools_for_a_question_shows_the_selection_with_ranks_and_scores() {
    // The demo's three tools are offered whole: the ranks say which the question's words name.
    let o = cli(&["tools", "--for", "weather now in Jinan", DEMO]);
    assert_eq!(status(&o), 0, "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("all 3 tools are offered") && text.contains("   1. get_weather_now (score "), "{text}");
    // 300 operations: a selection within the budget, with find_tools, pinned tools first.
    let mut paths = serde_json::Map::new();
    for i in 0..300 {
        let op = json!({"get": {"operationId": format!("op{i}"), "summary": format!("Thing number {i}"),
                                "responses": {"200": {"description": "ok"}}}});
        paths.insert(format!("/t{i}"), op);
    }
    paths.insert(
        "/w".into(),
        json!({"get": {"operationId": "getWeather", "summary": "Current weather",
                                             "responses": {"200": {"description": "ok"}}}}),
    );
    let spec = json!({"openapi": "3.0.0", "info": {"title": "t", "version": "1"},
                      "servers": [{"url": "http://x.example"}], "paths": paths});
    let cfg = json!({"llm": {"serviceName": "l", "servicePort": 1, "path": "/v1/chat/completions"},
                     "apis": [{"apiProvider": {"serviceName": "s", "servicePort": 1}, "api": spec.to_string()}],
                     "tools": {"pinned": ["op7"]}});
    let file = TempFile::new("large.json", &cfg.to_string());
    let o = cli(&["tools", "--json", "--for", "the weather, please", file.path()]);
    assert_eq!(status(&o), 0, "{}", stderr(&o));
    let groups: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let s = &groups[0]["selection"];
    assert_eq!((s["tools"].as_u64(), s["plus"].as_str()), (Some(301), Some("find_tools")));
    let offered: Vec<(&str, Value)> =
        s["offered"].as_array().unwrap().iter().map(|r| (r["name"].as_str().unwrap(), r["rank"].clone())).collect();
    assert_eq!(offered, [("op7", Value::Null), ("getWeather", json!(1))]);
    let o = cli(&["tools", "--for", "the weather, please", file.path()]);
    let text = stdout(&o);
    assert!(
        text.contains("2 of 301 tools offered (") && text.contains("   -. op7 (score 0.0, 97 bytes, pinned)"),
        "{text}"
    );
}
