use super::*;
use crate::openapi::load;
use crate::upstream::Upstream;
use serde_json::json;

const SPEC: &str = r#"
openapi: 3.0.3
info: {title: t, version: "1"}
servers: [{url: "https://api.example.com/v2/"}]
paths:
  /files/{name}:
    get:
      operationId: getFile
      parameters:
        - {name: name, in: path, required: true, schema: {type: string}}
        - {name: tags, in: query, schema: {type: array, items: {type: string}}}
        - {name: ids, in: query, explode: false, schema: {type: array, items: {type: integer}}}
        - {name: limit, in: query, schema: {type: integer}}
        - {name: mode, in: query, schema: {type: string, enum: [fast, slow]}}
        - {name: X-Trace, in: header, schema: {type: string}}
  /orders:
    post:
      operationId: placeOrder
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [petId]
              properties:
                petId: {type: integer}
                note: {type: string}
  /search:
    post:
      operationId: search
      requestBody:
        content:
          application/x-www-form-urlencoded:
            schema: {type: object, properties: {q: {type: string}, page: {type: integer}}}
"#;

fn api(key: Option<ApiKey>) -> Api {
    Api {
        upstream: Upstream { cluster: "c".into(), authority: None, service: None, timeout_ms: 1000 },
        api_key: key,
        headers: vec![("authorization".into(), "Bearer t".into())],
        max_retries: 0,
        identity: Default::default(),
    }
}

fn call(name: &str, args: Value) -> Result<ToolRequest, String> {
    let loaded = load(SPEC, 0).unwrap();
    let tool = loaded.tools.iter().find(|t| t.name == name).unwrap();
    build(tool, &api(Some(ApiKey::Query { name: "key".into(), value: "k&1".into() })), &args)
}

#[test]
fn path_values_stay_in_their_segment() {
    for (value, expected) in [
        ("../admin", "/v2/files/..%2Fadmin"),
        ("a/b?c#d", "/v2/files/a%2Fb%3Fc%23d"),
        ("..", "/v2/files/%2E%2E"),
        (".", "/v2/files/%2E"),
        ("北京", "/v2/files/%E5%8C%97%E4%BA%AC"),
        ("a b", "/v2/files/a%20b"),
    ] {
        let r = call("getFile", json!({"name": value})).unwrap();
        assert_eq!(r.path, format!("{expected}?key=k%261"), "{value}");
    }
}

#[test]
fn query_styles_and_auth() {
    let r = call(
        "getFile",
        json!({"name": "x", "tags": ["a b", "c"], "ids": [1, 2], "limit": "3", "mode": "fast", "X-Trace": "t1"}),
    )
    .unwrap();
    assert_eq!(r.path, "/v2/files/x?tags=a%20b&tags=c&ids=1,2&limit=3&mode=fast&key=k%261");
    assert_eq!(r.authority, "api.example.com");
    assert_eq!(r.method, "GET");
    assert!(r.headers.contains(&("x-trace".into(), "t1".into())));
    assert!(r.headers.contains(&("authorization".into(), "Bearer t".into())));
    assert_eq!(r.body, None);
}

#[test]
fn bad_arguments_are_explained() {
    assert_eq!(call("getFile", json!({})).unwrap_err(), "missing required argument(s) 'name'");
    assert!(call("getFile", json!({"name": "x", "limit": "many"}))
        .unwrap_err()
        .contains("'limit' must be of type integer"));
    assert!(call("getFile", json!({"name": "x", "mode": "medium"})).unwrap_err().contains("one of \"fast\", \"slow\""));
    assert!(call("getFile", json!({"name": "x", "colour": 1})).unwrap_err().contains("unknown argument(s) 'colour'"));
    assert!(call("getFile", json!({"name": "x", "X-Trace": "a\r\nb: c"})).unwrap_err().contains("line breaks"));
    assert!(call("getFile", json!({"name": ""})).unwrap_err().contains("must not be empty"));
    assert!(call("getFile", json!("x")).unwrap_err().contains("JSON object"));
    assert!(call("placeOrder", json!({"petId": "12"})).unwrap_err().contains("'petId' must be of type integer"));
}

#[test]
fn json_body_holds_only_its_properties() {
    let r = call("placeOrder", json!({"note": "hi", "petId": 12})).unwrap();
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v2/orders?key=k%261");
    assert_eq!(r.body.as_deref(), Some(br#"{"petId":12,"note":"hi"}"#.as_slice()));
    assert!(r.headers.contains(&("content-type".into(), "application/json".into())));
}

#[test]
fn form_body() {
    let r = call("search", json!({"q": "a&b=c", "page": 2})).unwrap();
    assert_eq!(r.body.as_deref(), Some(b"q=a%26b%3Dc&page=2".as_slice()));
    assert!(r.headers.contains(&("content-type".into(), "application/x-www-form-urlencoded".into())));
    let r = call("search", json!({})).unwrap();
    assert_eq!(r.body, None);
}

#[test]
fn header_api_key_and_domain_override() {
    let loaded = load(SPEC, 0).unwrap();
    let mut a = api(Some(ApiKey::Header { name: "X-Api-Key".into(), value: "s3".into() }));
    a.upstream.authority = Some("internal.svc:8080".into());
    let r = build(&loaded.tools[0], &a, &json!({"name": "n"})).unwrap();
    assert!(r.headers.contains(&("x-api-key".into(), "s3".into())));
    assert_eq!(r.authority, "internal.svc:8080");
    assert_eq!(r.path, "/v2/files/n");
}

const KEYED: &str = r#"
openapi: 3.0.3
info: {title: t, version: "1"}
servers: [{url: "https://api.example.com"}]
paths:
  /items/{ids}:
    get:
      operationId: getItems
      parameters:
        - {name: ids, in: path, required: true, schema: {type: array, items: {type: string}}}
        - {name: appid, in: query, schema: {type: string}}
        - {name: filter, in: query, schema: {type: object}}
        - {name: sort, in: query, schema: {type: object, properties: {by: {type: string}}}}
        - {name: X-Key, in: header, schema: {type: string}}
        - {name: session, in: cookie, schema: {type: string}}
"#;

fn keyed(key: ApiKey, args: Value) -> Result<ToolRequest, String> {
    let loaded = load(KEYED, 0).unwrap();
    build(&loaded.tools[0], &api(Some(key)), &args)
}

#[test]
fn the_operators_key_replaces_what_the_model_sets() {
    let q = ApiKey::Query { name: "appid".into(), value: "GATEWAY".into() };
    let r = keyed(q, json!({"ids": ["a"], "appid": "MODEL"})).unwrap();
    assert_eq!(r.path, "/items/a?appid=GATEWAY");
    let h = ApiKey::Header { name: "X-Key".into(), value: "GATEWAY".into() };
    let r = keyed(h, json!({"ids": ["a"], "X-Key": "MODEL"})).unwrap();
    let keys: Vec<&(String, String)> = r.headers.iter().filter(|(n, _)| n == "x-key").collect();
    assert_eq!(keys, [&("x-key".to_string(), "GATEWAY".to_string())]);
}

#[test]
fn exploded_objects_cannot_invent_parameters() {
    let q = || ApiKey::Query { name: "k".into(), value: "K".into() };
    assert!(keyed(q(), json!({"ids": ["a"], "filter": {"appid": "x"}})).unwrap_err().contains("'appid'"));
    assert!(keyed(q(), json!({"ids": ["a"], "sort": {"admin": "true"}})).unwrap_err().contains("'admin'"));
    let r = keyed(q(), json!({"ids": ["a"], "filter": {"color": "red"}, "sort": {"by": "name"}})).unwrap();
    assert_eq!(r.path, "/items/a?color=red&by=name&k=K");
}

#[test]
fn no_empty_path_items() {
    let q = || ApiKey::Query { name: "k".into(), value: "K".into() };
    for ids in [json!([]), json!([""]), json!(["a", ""])] {
        assert!(keyed(q(), json!({"ids": ids})).unwrap_err().contains("must not be empty"), "{ids}");
    }
    assert_eq!(keyed(q(), json!({"ids": ["a", "b/c"]})).unwrap().path, "/items/a,b%2Fc?k=K");
}

#[test]
fn header_values_are_printable_ascii_of_bounded_size() {
    let k = || ApiKey::Query { name: "k".into(), value: "K".into() };
    let header = |value: &str| keyed(k(), json!({"ids": ["a"], "X-Key": value}));
    let most = "a".repeat(MAX_HEADER_VALUE_BYTES);
    assert!(header(&most).unwrap().headers.contains(&("x-key".into(), most.clone())));
    assert!(header("tab\tand ~ symbols!").is_ok());
    let e = header(&"a".repeat(70_000)).unwrap_err();
    assert_eq!(e, "argument 'X-Key' is a header and too long: 70000 bytes, at most 8192 can be sent");
    assert!(header(&format!("{most}a")).unwrap_err().contains("8193 bytes"));
    assert_eq!(header("café").unwrap_err(), "argument 'X-Key' is a header and can only hold printable ASCII, not 'é'");
    assert!(header("a\u{1}b").unwrap_err().ends_with("not '\\u{1}'"));
    assert!(header("a\u{7f}").unwrap_err().contains("printable ASCII"));
    assert!(header("a\nb").unwrap_err().contains("line breaks"));
}

#[test]
fn cookie_values_are_encoded_and_bounded() {
    let k = || ApiKey::Query { name: "k".into(), value: "K".into() };
    let cookie = |value: &str| keyed(k(), json!({"ids": ["a"], "session": value}));
    let r = cookie("a b;é").unwrap();
    assert!(r.headers.contains(&("cookie".into(), "session=a%20b%3B%C3%A9".into())));
    let e = cookie("a\u{1}").unwrap_err();
    assert_eq!(e, "argument 'session' is a cookie and must not contain control characters, found '\\u{1}'");
    let e = cookie(&"é".repeat(2000)).unwrap_err();
    assert_eq!(e, "argument 'session' is a cookie and too long: 12000 bytes, at most 8192 can be sent");
}

#[test]
fn a_header_key_is_sent_as_higress_sends_it_and_as_its_own_header() {
    let loaded = load(SPEC, 0).unwrap();
    let mut a = api(Some(ApiKey::Header { name: "DeepL-Auth-Key".into(), value: "dk-1".into() }));
    a.headers.clear();
    let r = build(&loaded.tools[0], &a, &json!({"name": "n"})).unwrap();
    assert!(r.headers.contains(&("authorization".into(), "DeepL-Auth-Key dk-1".into())), "{:?}", r.headers);
    assert!(r.headers.contains(&("deepl-auth-key".into(), "dk-1".into())));
    // Named `Authorization`: the value as it is, once.
    let mut a = api(Some(ApiKey::Header { name: "Authorization".into(), value: "Bearer z".into() }));
    a.headers.clear();
    let r = build(&loaded.tools[0], &a, &json!({"name": "n"})).unwrap();
    let auth: Vec<_> = r.headers.iter().filter(|(k, _)| k == "authorization").collect();
    assert_eq!(auth, [&("authorization".to_string(), "Bearer z".to_string())]);
    // Static headers still win.
    let a = api(Some(ApiKey::Header { name: "X-Api-Key".into(), value: "s3".into() }));
    let r = build(&loaded.tools[0], &a, &json!({"name": "n"})).unwrap();
    assert!(r.headers.contains(&("authorization".into(), "Bearer t".into())));
}
