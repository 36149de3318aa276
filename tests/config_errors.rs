//! Configuration: Higress keys and defaults, and a table of bad configurations → exact messages.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use api_agent::config::{ApiKey, Config, Mode, SummaryForms};
use serde_json::{json, Value};

const SPEC: &str = "openapi: 3.0.0\ninfo: {title: t, version: '1'}\nservers: [{url: 'https://api.example.com'}]\npaths:\n  /weather:\n    get:\n      operationId: getWeather\n      parameters: [{name: city, in: query, required: true, schema: {type: string}}]\n";

fn base() -> Value {
    json!({
        "llm": {"apiKey": "k", "serviceName": "llm-service", "servicePort": 8080, "domain": "llm.example.com", "path": "/v1/chat/completions", "model": "qwen-turbo"},
        "apis": [{"apiProvider": {"serviceName": "api-service", "servicePort": 9090, "domain": "api.example.com"}, "api": SPEC}],
    })
}

fn with(mut cfg: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let slot = cfg.pointer_mut(parent).unwrap().as_object_mut().unwrap();
    if value.is_null() {
        slot.remove(key);
    } else {
        slot.insert(key.to_string(), value);
    }
    cfg
}

fn error(cfg: &Value) -> String {
    Config::from_value(cfg).map(|_| ()).unwrap_err().to_string()
}

#[test]
fn higress_defaults() {
    let c = Config::from_value(&base()).unwrap();
    assert_eq!(c.mode, Mode::React);
    assert_eq!(c.llm.max_iterations, 15);
    assert_eq!(c.llm.upstream.timeout_ms, 50_000);
    assert_eq!(c.llm.max_tokens, 1000);
    assert_eq!(c.llm.max_request_time_ms, 300_000);
    assert_eq!(c.llm.max_observation_bytes, 8192);
    assert_eq!(c.llm.upstream.cluster, "outbound|8080||llm-service");
    assert_eq!(c.apis[0].upstream.cluster, "outbound|9090||api-service");
    assert_eq!(c.apis[0].upstream.timeout_ms, 50_000);
    assert!(!c.template.chinese);
    assert!(c.react_prompt.contains("input question to answer") && c.react_prompt.contains("I know what to respond"));
    assert!(c.json_resp.is_none());
}

#[test]
fn the_summary_forms_default_to_metadata_alone() {
    let c = Config::from_value(&base()).unwrap();
    assert_eq!(c.summary, SummaryForms { metadata: true, filter_state: false });
    let c = Config::from_value(&with(base(), "/summary", json!({"metadata": false}))).unwrap();
    assert_eq!(c.summary, SummaryForms { metadata: false, filter_state: false });
    let c = Config::from_value(&with(base(), "/summary", json!({"filterState": true}))).unwrap();
    assert_eq!(c.summary, SummaryForms { metadata: true, filter_state: true });
}

#[test]
fn accepted_variants() {
    let c = Config::from_value(&with(base(), "/llm/maxIterations", json!(0))).unwrap();
    assert_eq!(c.llm.max_iterations, 15, "0 means the default");
    let c = Config::from_value(&with(base(), "/llm/maxToken", json!(77))).unwrap();
    assert_eq!(c.llm.max_tokens, 77, "Higress's maxToken spelling");
    let c = Config::from_value(&with(base(), "/llm/cluster", json!("my-llm"))).unwrap();
    assert_eq!(c.llm.upstream.cluster, "my-llm");
    let cfg =
        with(base(), "/apis/0/apiProvider/apiKey", json!({"in": "header", "name": "DeepL-Auth-Key", "value": "K"}));
    let c = Config::from_value(&cfg).unwrap();
    assert_eq!(c.apis[0].api_key, Some(ApiKey::Header { name: "DeepL-Auth-Key".into(), value: "K".into() }));
    for none in [json!({"in": "none"}), json!({"in": ""}), json!({"name": "", "value": ""})] {
        let c = Config::from_value(&with(base(), "/apis/0/apiProvider/apiKey", none)).unwrap();
        assert_eq!(c.apis[0].api_key, None, "no key: value is not required");
    }
    let cfg = with(base(), "/promptTemplate", json!({"language": "CH", "chTemplate": {"question": "问题"}}));
    let c = Config::from_value(&cfg).unwrap();
    assert!(c.template.chinese && c.react_prompt.contains("Question: 问题"));
    // Higress adds these at the root; typos at the root are warned about, not fatal.
    let mut cfg = base();
    cfg["_rules_"] = json!([{"_match_route_": ["r"]}]);
    cfg["returnResponseTemplate"] = json!("{}");
    cfg["llmm"] = json!({});
    let c = Config::from_value(&cfg).unwrap();
    assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
    assert!(c.warnings[1].contains("'llmm'"));
}

#[test]
fn yaml_configuration_text() {
    let yaml = format!(
        "llm:\n  serviceName: llm\n  servicePort: 80\n  path: /v1/chat/completions\napis:\n- apiProvider: {{serviceName: api, servicePort: 80}}\n  api: |\n{}",
        SPEC.lines().map(|l| format!("    {l}\n")).collect::<String>()
    );
    let c = Config::from_slice(yaml.as_bytes()).unwrap();
    assert_eq!(c.tools.len(), 1);
    assert_eq!(c.llm.upstream.authority_or_service(), "llm");
}

#[test]
fn bad_configurations_name_the_field() {
    let cases: Vec<(Value, &str)> = vec![
        (with(base(), "/llm", Value::Null), "llm: required"),
        (with(base(), "/reasoning", json!({"templateOpens": 1})), "reasoning.templateOpens: must be true or false, found integer"),
        (with(base(), "/tracing", json!({"agentName": ""})), "tracing.agentName: must be 1-64 printable ASCII characters"),
        (with(base(), "/tracing", json!({"agentName": "a\nb"})), "tracing.agentName: must be 1-64 printable ASCII characters"),
        (with(base(), "/tracing", json!({"content": "yes"})), "tracing.content: must be true or false, found string"),
        (with(base(), "/tracing", json!({"contents": true})), "tracing.contents: unknown key (did you mean 'content'?)"),
        (with(base(), "/summary", json!({"filterState": "yes"})), "summary.filterState: must be true or false, found string"),
        (with(base(), "/summary", json!({"filterstate": true})), "summary.filterstate: unknown key (did you mean 'filterState'?)"),
        (with(base(), "/summary", json!({"metadata": 0})), "summary.metadata: must be true or false, found integer"),
        (with(base(), "/summary", json!({"metaData": false})), "summary.metaData: unknown key (did you mean 'metadata'?)"),
        (with(base(), "/summary", json!(true)), "summary: must be an object, found boolean"),
        (with(base(), "/apis", Value::Null), "apis: required"),
        (with(base(), "/apis", json!([])), "apis: must list at least one API"),
        (with(base(), "/apis", json!({})), "apis: must be a list, found object"),
        (with(base(), "/apis/0/apiProvider", Value::Null), "apis[0].apiProvider: required"),
        (
            with(base(), "/apis/0/apiProvider/servicePort", Value::Null),
            "apis[0].apiProvider.servicePort: required (or name the Envoy cluster in 'cluster')",
        ),
        (
            with(base(), "/apis/0/apiProvider/serviceName", Value::Null),
            "apis[0].apiProvider.serviceName: required (or name the Envoy cluster in 'cluster')",
        ),
        (
            with(base(), "/apis/0/apiProvider/servicePort", json!(70000)),
            "apis[0].apiProvider.servicePort: must be between 1 and 65535, found 70000",
        ),
        (
            with(base(), "/apis/0/apiProvider/servicePort", json!("80")),
            "apis[0].apiProvider.servicePort: must be a whole number, found \"80\"",
        ),
        (
            with(base(), "/apis/0/apiProvider/servicport", json!(1)),
            "apis[0].apiProvider.servicport: unknown key (did you mean 'servicePort'?)",
        ),
        (
            with(base(), "/apis/0/apiProvider/apiKey", json!({"in": "cookie", "name": "a"})),
            "apis[0].apiProvider.apiKey.in: must be 'header', 'query' or 'none', found 'cookie'",
        ),
        (
            with(base(), "/apis/0/apiProvider/apiKey", json!({"in": "query"})),
            "apis[0].apiProvider.apiKey.name: required",
        ),
        (
            with(base(), "/apis/0/apiProvider/apiKey", json!({"in": "header", "name": "X-Key"})),
            "apis[0].apiProvider.apiKey.value: required",
        ),
        (
            with(base(), "/apis/0/apiProvider/apiKey", json!({"in": "query", "name": "key", "value": ""})),
            "apis[0].apiProvider.apiKey.value: must not be empty",
        ),
        (
            with(base(), "/apis/0/apiProvider/apiKey", json!({"in": "query", "name": "key", "value": " "})),
            "apis[0].apiProvider.apiKey.value: must not be empty",
        ),
        (
            with(base(), "/apis/0/apiProvider/apiKey", json!({"in": "query", "name": "key", "value": 7})),
            "apis[0].apiProvider.apiKey.value: must be a string, found integer",
        ),
        (
            with(base(), "/apis/0/apiProvider/apiKey", json!({"in": "header", "name": ":path", "value": "x"})),
            "apis[0].apiProvider.apiKey.name: ':path' is not a valid header name",
        ),
        (with(base(), "/llm/apiKey", json!("sk-1\r\nx-evil: 1")), "llm.apiKey: must not contain CR, LF or NUL"),
        (
            with(base(), "/apis/0/apiProvider/headers", json!({"X-A": "a\r\nb"})),
            "apis[0].apiProvider.headers.X-A: header value must not contain CR, LF or NUL",
        ),
        (
            with(base(), "/apis/0/apiProvider/headers", json!({"bad name": "a"})),
            "apis[0].apiProvider.headers.bad name: not a valid header name",
        ),
        (with(base(), "/apis/0/api", Value::Null), "apis[0].api: required"),
        (with(base(), "/apis/0/api", json!("")), "apis[0].api: must not be empty"),
        (
            with(base(), "/apis/0/api", json!("openapi: [")),
            "apis[0].api: OpenAPI not-a-document: not valid JSON or YAML",
        ),
        (
            with(base(), "/apis/0/api", json!("swagger: '2.0'\npaths: {}")),
            "apis[0].api: OpenAPI unsupported-version: Swagger 2.0",
        ),
        (with(base(), "/llm/path", Value::Null), "llm.path: required"),
        (with(base(), "/llm/path", json!("v1/chat")), "llm.path: must start with '/', found 'v1/chat'"),
        (with(base(), "/llm/maxIterations", json!(-1)), "llm.maxIterations: must be a whole number, found -1"),
        (with(base(), "/llm/temperature", json!(1)), "llm.temperature: unknown key (known keys:"),
        (
            with(base(), "/llm/domain", json!("http://x/")),
            "llm.domain: must be a host name (with an optional port), found 'http://x/'",
        ),
        (with(base(), "/mode", json!("agent")), "mode: must be 'react' or 'native', found 'agent'"),
        (with(base(), "/passthrough", json!("drop")), "passthrough: must be 'forward' or 'refuse', found 'drop'"),
        (
            with(base(), "/promptTemplate", json!({"enTemplate": {"thought3": "x"}})),
            "promptTemplate.enTemplate.thought3: unknown key (did you mean 'thought1'?)",
        ),
        (with(base(), "/jsonResp", json!({"enable": "yes"})), "jsonResp.enable: must be true or false, found string"),
        (json!([1]), "must be an object, found array"),
        (
            with(base(), "/apis/0/api", json!(format!("openapi: 3.0.0\npaths: {}", "{a: ".repeat(100_000)))),
            "apis[0].api: OpenAPI too-deep: nested deeper than 100 levels at line 2 column 404",
        ),
        (
            with(base(), "/jsonResp", json!({"enable": true, "jsonSchema": "[".repeat(100_000)})),
            "jsonResp.jsonSchema: the schema text is nested deeper than 100 levels at line 1 column 101",
        ),
        (
            with(base(), "/apis/0/api", json!("{\"openapi\": \"3.0.0\", \"paths\": {\"/a\": {}, \"/a\": {}}}")),
            "apis[0].api: OpenAPI not-a-document: not valid JSON: duplicate key '/a' in paths at line 1 column 45",
        ),
        (
            with(base(), "/jsonResp", json!({"enable": true, "jsonSchema": "{\"type\": \"object\", \"type\": 1}"})),
            "jsonResp.jsonSchema: the schema text is not valid JSON: duplicate key 'type' at line 1 column 25",
        ),
        (
            with(
                base(),
                "/apis/0/api",
                json!(SPEC.replace("schema: {type: string}", "schema: {$ref: '#/components/schemas/A'}")
                    + "components:\n  schemas:\n    A: {$ref: '#/components/schemas/B'}\n    B: {$ref: '#/components/schemas/A'}\n"),
            ),
            "apis[0].api: OpenAPI ref-cycle: GET /weather: '#/components/schemas/A' leads back to itself through $refs alone: a schema without instances",
        ),
        (
            with(base(), "/apis/0/api", json!(SPEC.replace("api.example.com", "api.example.com:99999"))),
            "apis[0].api: OpenAPI bad-server: GET /weather: server URL 'https://api.example.com:99999' has port '99999', not a number from 1 to 65535",
        ),
    ];
    for (cfg, expected) in cases {
        let got = error(&cfg);
        assert!(got.starts_with(expected), "expected '{expected}', got '{got}'");
    }
}

#[test]
fn duplicate_tools_across_apis_and_missing_hosts() {
    let mut cfg = base();
    let api = cfg["apis"][0].clone();
    cfg["apis"].as_array_mut().unwrap().push(api);
    assert_eq!(
        error(&cfg),
        "apis[1].api: OpenAPI duplicate-tool-name: tool 'getWeather' is already defined by apis[0]"
    );
    let cfg = json!({
        "llm": {"serviceName": "l", "servicePort": 1, "path": "/p"},
        "apis": [{"apiProvider": {"cluster": "tools"}, "api": "openapi: 3.1.0\npaths:\n  /a:\n    get: {operationId: a}\n"}],
    });
    assert_eq!(error(&cfg), "apis[0].apiProvider.domain: required: the server URL of tool 'a' has no host");
}

#[test]
fn configuration_text_that_nests_too_deeply() {
    let text = format!("{{\"llm\": {}", "[".repeat(100_000));
    assert_eq!(
        Config::from_slice(text.as_bytes()).unwrap_err().to_string(),
        "configuration nested deeper than 100 levels at line 1 column 108"
    );
    let yaml = format!("llm:\n  x: {}", "{a: ".repeat(100_000));
    assert_eq!(
        Config::from_slice(yaml.as_bytes()).unwrap_err().to_string(),
        "configuration nested deeper than 100 levels at line 2 column 398"
    );
}

#[test]
fn duplicate_keys_in_json_text() {
    let text = br#"{"llm": {"path": "/a", "path": "/b"}}"#;
    assert_eq!(
        Config::from_slice(text).unwrap_err().to_string(),
        "configuration not valid JSON: duplicate key 'path' in llm at line 1 column 29"
    );
}

#[test]
fn empty_and_non_utf8_text() {
    assert_eq!(Config::from_slice(b"  ").unwrap_err().to_string(), "configuration is empty");
    assert!(Config::from_slice(&[0xff, 0xfe]).unwrap_err().to_string().starts_with("configuration is not UTF-8"));
}

/// The test API with a header parameter `name` beside its query parameter.
fn with_header_param(name: &str, provider: Value) -> Value {
    let spec = SPEC.replace(
        "schema: {type: string}}]",
        &format!("schema: {{type: string}}}}, {{name: '{name}', in: header, schema: {{type: string}}}}]"),
    );
    let mut cfg = with(base(), "/apis/0/api", json!(spec));
    if let (Some(p), Value::Object(extra)) =
        (cfg.pointer_mut("/apis/0/apiProvider").and_then(Value::as_object_mut), provider)
    {
        p.extend(extra);
    }
    cfg
}

/// A header parameter is sent as the spec names it: a name that is no HTTP token is refused at load
/// (it would fail every call), naming the API, the operation and the parameter.
#[test]
fn a_header_parameter_that_is_no_header_name_is_refused() {
    for name in ["x-user ", " x-user", "x user", "x:user", "x-üser", "x(user)", "x\\user"] {
        let got = error(&with_header_param(name, json!({})));
        assert!(
            got.starts_with(&format!(
                "apis[0].api: OpenAPI bad-parameter: GET /weather: parameter '{name}': not an HTTP header name"
            )),
            "{name:?}: {got}"
        );
    }
}

/// A header parameter the call sets itself (trace context, the client's forwarded identity, the
/// operator's credentials) is dropped with a warning: the model never sees it, nothing goes out
/// beside the real header. One that differs from a forwarded header only by '_' / '-' is refused:
/// servers that read '_' as '-' would take it for the client's identity.
#[test]
fn header_parameters_that_the_call_sets_itself() {
    let forward = json!({"forwardHeaders": ["x-user"], "headers": {"x-tenant": "t1"}});
    for name in [
        "X-Request-Id",
        "traceparent",
        "TraceState",
        "b3",
        "X-B3-TraceId",
        "x-user",
        "X-User",
        "x-tenant",
        "Authorization",
    ] {
        let c = Config::from_value(&with_header_param(name, forward.clone())).unwrap_or_else(|e| panic!("{name}: {e}"));
        let tool = c.tools.get("getWeather").unwrap();
        assert!(tool.schema["properties"].get(name).is_none(), "{name}: {}", tool.schema);
        assert!(tool.schema["properties"].get("city").is_some(), "{name}: {}", tool.schema);
        let warned: Vec<&String> = c.warnings.iter().filter(|w| w.contains(&format!("'{name}'"))).collect();
        assert_eq!(warned.len(), 1, "{name}: {:?}", c.warnings);
        assert!(warned[0].starts_with("apis[0].api: GET /weather: header parameter"), "{}", warned[0]);
    }
    for name in ["x_user", "X_User"] {
        let got = error(&with_header_param(name, forward.clone()));
        assert!(
            got.starts_with(&format!(
                "apis[0].api: GET /weather: header parameter '{name}' is 'x-user' to servers that read '_' as '-'"
            )),
            "{name}: {got}"
        );
        assert!(got.contains("apis[0].apiProvider.forwardHeaders[0]"), "{got}");
    }
    // Without forwardHeaders, x-user is an ordinary parameter.
    let c = Config::from_value(&with_header_param("x_user", json!({}))).unwrap();
    assert!(c.tools.get("getWeather").unwrap().schema["properties"].get("x_user").is_some());
}
