//! Every document of `../shared/openapi-corpus` loads, or fails with its documented, named reason; the
//! whole translation of each is kept as a golden file. Plus the awkward features the corpus exercises.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use api_agent::config::{Api, ApiKey, Upstream};
use api_agent::openapi::{call, load, ErrorKind};
use serde_json::json;
use std::path::Path;

/// (file, tools it must give, named failure)
const CORPUS: [(&str, usize, Option<ErrorKind>); 20] = [
    ("deepl-full.yaml", 47, None),
    ("higress-amap-cn.yaml", 2, None),
    ("higress-deepl-translate.yaml", 1, None),
    ("higress-seniverse-weather-cn.yaml", 1, None),
    ("higress-seniverse-weather-en.yaml", 1, None),
    ("nytimes-top-stories.yaml", 1, None),
    ("oai-link-example.yaml", 6, None),
    ("oai-petstore-expanded.yaml", 4, None),
    ("oai-petstore.yaml", 3, None),
    ("oai-tictactoe.yaml", 3, None),
    ("oai-uspto.yaml", 3, None),
    ("oai-webhook-example.yaml", 0, Some(ErrorKind::NoOperations)),
    ("open-meteo-classic.yml", 1, None),
    ("open-meteo-flood.yml", 1, None),
    ("readme-parameters-common.yaml", 5, None),
    ("readme-polymorphism.yaml", 13, None),
    ("readme-security.yaml", 15, None),
    ("readme-server-variables.yaml", 4, None),
    ("redocly-museum.yaml", 8, None),
    ("swagger-petstore-v3.yaml", 18, None),
];

fn corpus(name: &str) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/openapi-corpus");
    std::fs::read_to_string(dir.join(name))
        .unwrap_or_else(|e| panic!("{name}: {e} (the corpus lives in ../shared beside the checkout)"))
}

#[test]
fn every_corpus_document_loads_or_fails_with_a_named_reason() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/openapi-corpus");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .expect("../shared/openapi-corpus")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with(".yaml") || n.ends_with(".yml"))
        .collect();
    on_disk.sort();
    let listed: Vec<&str> = CORPUS.iter().map(|c| c.0).collect();
    assert_eq!(on_disk, listed, "a corpus document is not covered by this table");
    for (name, tools, failure) in CORPUS {
        match (load(&corpus(name), 0), failure) {
            (Ok(loaded), None) => {
                assert_eq!(loaded.tools.len(), tools, "{name}");
                let mut text = String::new();
                for t in &loaded.tools {
                    text.push_str(&format!(
                        "{} {} {}{}{}\n  {}\n  {}\n",
                        t.name,
                        t.method,
                        t.server.host.as_deref().unwrap_or(""),
                        t.server.base_path,
                        t.path,
                        t.description,
                        t.schema
                    ));
                }
                for w in &loaded.warnings {
                    text.push_str(&format!("warning: {w}\n"));
                }
                common::golden(&format!("corpus/{name}.txt"), &text);
            }
            (Err(e), Some(kind)) => assert_eq!(e.kind, kind, "{name}: {e}"),
            (other, _) => panic!("{name}: {other:?}"),
        }
    }
}

fn api() -> Api {
    Api {
        upstream: Upstream { cluster: "c".into(), authority: None, service: None, timeout_ms: 1 },
        api_key: None,
        headers: vec![],
        max_retries: 0,
        identity: Default::default(),
    }
}

#[test]
fn two_parameters_in_one_segment() {
    let loaded = load(&corpus("nytimes-top-stories.yaml"), 0).unwrap();
    let r = call::build(&loaded.tools[0], &api(), &json!({"section": "arts", "format": "json"})).unwrap();
    assert_eq!(r.path, "/svc/topstories/v2/arts.json");
}

#[test]
fn form_body_and_server_variables() {
    let loaded = load(&corpus("oai-uspto.yaml"), 0).unwrap();
    let search = loaded.tools.iter().find(|t| t.name == "perform-search").unwrap();
    let r = call::build(
        search,
        &api(),
        &json!({"dataset": "oa_citations", "version": "v1", "criteria": "*:*", "start": 0}),
    )
    .unwrap();
    assert_eq!(r.path, "/ds-api/oa_citations/v1/records");
    assert_eq!(r.authority, "developer.uspto.gov");
    assert_eq!(r.body.as_deref(), Some(b"criteria=%2A%3A%2A&start=0".as_slice()));
    assert!(r.headers.contains(&("content-type".into(), "application/x-www-form-urlencoded".into())));
}

#[test]
fn path_and_operation_servers_win() {
    let loaded = load(&corpus("readme-server-variables.yaml"), 0).unwrap();
    let hosts: Vec<String> = loaded
        .tools
        .iter()
        .map(|t| format!("{}{}", t.server.host.as_deref().unwrap_or(""), t.server.base_path))
        .collect();
    assert_eq!(
        hosts,
        [
            "demo.example.com:443/v2",
            "httpbin.com/anything/demo",
            "httpbin.com/anything/common/demo",
            "httpbin.com/anything/demo"
        ]
    );
}

#[test]
fn operation_parameters_override_path_item_parameters() {
    let loaded = load(&corpus("readme-parameters-common.yaml"), 0).unwrap();
    let t = loaded.tools.iter().find(|t| t.name == "get_anything_id_override").unwrap();
    let ids: Vec<_> = t.params.iter().filter(|p| p.name == "id").collect();
    assert_eq!(ids.len(), 1);
    let r = call::build(t, &api(), &json!({"id": 5})).unwrap();
    assert_eq!(r.path, "/anything/5/override");
}

#[test]
fn polymorphic_bodies_keep_their_json_schema() {
    let loaded = load(&corpus("readme-polymorphism.yaml"), 0).unwrap();
    let text: String = loaded.tools.iter().map(|t| t.schema.to_string()).collect();
    assert!(text.contains("\"oneOf\"") && text.contains("\"anyOf\"") && text.contains("\"allOf\""));
    assert!(!text.contains("$ref"), "every $ref is resolved");
}

#[test]
fn header_api_key_from_the_operator_not_the_model() {
    let loaded = load(&corpus("oai-tictactoe.yaml"), 0).unwrap();
    let mut a = api();
    a.api_key = Some(ApiKey::Header { name: "api-key".into(), value: "K".into() });
    a.upstream.service = Some("ttt.svc".into());
    let t = loaded.tools.iter().find(|t| t.name == "put-square").unwrap();
    let r = call::build(t, &a, &json!({"row": 1, "column": 2, "body": "X"})).unwrap();
    assert_eq!((r.method, r.path.as_str(), r.authority.as_str()), ("PUT", "/board/1/2", "ttt.svc"));
    assert_eq!(r.body.as_deref(), Some(b"\"X\"".as_slice()));
    assert!(r.headers.contains(&("api-key".into(), "K".into())));
    let bad = call::build(t, &a, &json!({"row": 4, "column": 2, "body": "X"}));
    assert!(bad.is_ok(), "range checks are the API's business; types and enums are ours");
    assert!(call::build(t, &a, &json!({"row": 1, "column": 2, "body": "Z"})).unwrap_err().contains("must be one of"));
}

#[test]
fn exponential_ref_expansion_is_bounded() {
    // S0 uses S1 four times, S1 uses S2 four times, ...: 4^12 nodes if inlined without a bound.
    let mut schemas = String::new();
    for i in 0..12 {
        let r = format!("{{$ref: '#/components/schemas/S{}'}}", i + 1);
        schemas.push_str(&format!("    S{i}: {{type: object, properties: {{a: {r}, b: {r}, c: {r}, d: {r}}}}}\n"));
    }
    schemas.push_str("    S12: {type: string}\n");
    let doc = format!("openapi: 3.0.0\npaths:\n  /a:\n    post:\n      operationId: a\n      requestBody:\n        content:\n          application/json:\n            schema: {{$ref: '#/components/schemas/S0'}}\ncomponents:\n  schemas:\n{schemas}");
    let e = load(&doc, 0).unwrap_err();
    assert_eq!(e.kind, ErrorKind::TooDeep, "{e}");
    assert!(e.detail.contains("nodes once $refs are inlined"));
}

#[test]
fn swagger_2_is_named() {
    let e = load("swagger: '2.0'\ninfo: {title: t, version: '1'}\npaths: {}\n", 0).unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnsupportedVersion);
    assert!(e.to_string().contains("unsupported-version"));
}

#[test]
fn broken_documents_are_named() {
    let cases = [
        ("not: [valid", ErrorKind::NotADocument),
        (
            "openapi: 3.0.0\npaths:\n  /a:\n    get:\n      parameters: [{$ref: '#/components/parameters/missing'}]\n",
            ErrorKind::BrokenRef,
        ),
        (
            "openapi: 3.0.0\npaths:\n  /a:\n    get:\n      parameters: [{$ref: 'common.yaml#/p'}]\n",
            ErrorKind::ExternalRef,
        ),
        ("openapi: 3.0.0\npaths:\n  /a/{id}:\n    get: {operationId: x}\n", ErrorKind::BadParameter),
        (
            "openapi: 3.0.0\npaths:\n  /a:\n    get: {operationId: x}\n  /b:\n    get: {operationId: x}\n",
            ErrorKind::DuplicateName,
        ),
        (
            "openapi: 3.0.0\nservers: [{url: 'https://{region}.x.com'}]\npaths:\n  /a:\n    get: {operationId: x}\n",
            ErrorKind::BadServer,
        ),
    ];
    for (text, kind) in cases {
        assert_eq!(load(text, 0).unwrap_err().kind, kind, "{text}");
    }
}
