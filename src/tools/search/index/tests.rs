use super::*;
use crate::tools::search::{pick, Budget};
use crate::tools::Tool;

/// A catalog of OpenAPI operations: (operationId, summary, tag, path, parameter name and description).
fn catalog(ops: &[(&str, &str, &str, &str, &str, &str)]) -> Catalog {
    let mut paths = serde_json::Map::new();
    for (id, summary, tag, path, param, param_doc) in ops {
        let op = serde_json::json!({"get": {"operationId": id, "summary": summary, "tags": [tag],
            "parameters": [{"name": param, "in": "query", "description": param_doc, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok"}}}});
        paths.insert(path.to_string(), op);
    }
    let spec = serde_json::json!({"openapi": "3.0.0", "info": {"title": "t", "version": "1"},
        "servers": [{"url": "http://api.example"}], "paths": paths});
    let loaded = crate::openapi::load(&spec.to_string(), 0).unwrap();
    let mut c = Catalog::default();
    c.extend(loaded.tools.into_iter().map(Tool::from_openapi).collect()).unwrap();
    c
}

fn names(c: &Catalog, ranked: &[(u32, f32)]) -> Vec<String> {
    ranked.iter().map(|(d, _)| c.iter().nth(*d as usize).unwrap().name.clone()).collect()
}

fn sample() -> Catalog {
    catalog(&[
        ("getWeatherNow", "Current weather", "weather", "/weather/now", "location", "city name"),
        ("getForecast", "Daily weather forecast", "weather", "/weather/forecast", "days", "how many days"),
        ("createUser", "Create a user account", "users", "/users", "email", "the user's email address"),
        ("listOrders", "List the orders of a customer", "orders", "/orders", "customer", "customer id"),
        ("deleteOrder", "Delete an order", "orders", "/orders/delete", "order", "the order to remove"),
        ("getExchangeRate", "Currency exchange rate", "finance", "/fx", "currency", "ISO code, e.g. USD"),
    ])
}

#[test]
fn the_tool_whose_words_the_question_uses_ranks_first() {
    let c = sample();
    let index = Index::build(&c);
    assert_eq!(names(&c, &index.rank("What is the weather now in Jinan?"))[0], "getWeatherNow");
    assert_eq!(names(&c, &index.rank("forecast for the next 3 days"))[0], "getForecast");
    assert_eq!(names(&c, &index.rank("how much is one USD in EUR (exchange rate)"))[0], "getExchangeRate");
    // Stems meet: "creating", "users" find createUser; "deleting orders" deleteOrder before listOrders.
    assert_eq!(names(&c, &index.rank("creating new users"))[0], "createUser");
    assert_eq!(names(&c, &index.rank("deleting orders"))[..2], ["deleteOrder", "listOrders"]);
}

#[test]
fn a_word_of_the_name_outweighs_the_same_word_in_a_parameter() {
    let c = catalog(&[
        ("sendInvoice", "Send a document", "billing", "/a", "mode", "invoice or receipt"),
        ("getInvoice", "Read one", "billing", "/b", "id", "the identifier"),
    ]);
    let index = Index::build(&c);
    let ranked = index.rank("invoice");
    assert_eq!(ranked.len(), 2);
    // Both names have it; the one that also has it in a parameter's description ranks first.
    assert_eq!(names(&c, &ranked)[0], "sendInvoice");
    let c = catalog(&[
        ("archive", "Store things", "misc", "/a", "kind", "weather or anything"),
        ("weatherNow", "Read one", "misc", "/b", "id", "identifier"),
    ]);
    let index = Index::build(&c);
    assert_eq!(names(&c, &index.rank("weather")), ["weatherNow", "archive"]);
}

#[test]
fn words_no_tool_has_rank_nothing() {
    let c = sample();
    let index = Index::build(&c);
    assert!(index.rank("zebra xylophone").is_empty());
    assert!(index.rank("").is_empty());
    assert!(index.rank("the of and").is_empty());
    assert!(Index::build(&Catalog::default()).rank("weather").is_empty());
}

#[test]
fn postings_keep_every_document_of_a_common_term_across_varint_gaps() {
    // 300 operations that all have "item", one in 150 has "rare": gaps above 127 take two bytes.
    let ops: Vec<(String, String)> = (0..300)
        .map(|i| (format!("getItem{i}"), if i % 150 == 7 { "rare item".into() } else { "item".into() }))
        .collect();
    let rows: Vec<(&str, &str, &str, &str, &str, &str)> = ops
        .iter()
        .enumerate()
        .map(|(i, (id, s))| {
            (id.as_str(), s.as_str(), "t", Box::leak(format!("/i/{i}").into_boxed_str()) as &str, "q", "x")
        })
        .collect();
    let c = catalog(&rows);
    let index = Index::build(&c);
    assert_eq!(index.rank("item").len(), 300);
    assert_eq!(names(&c, &index.rank("rare")), ["getItem7", "getItem157"]);
    // Compact: well under 100 bytes per operation for this vocabulary.
    assert!(index.bytes() < 300 * 100, "{} bytes", index.bytes());
}

#[test]
fn the_pick_takes_pinned_tools_then_the_best_that_fit() {
    let ranked = [(3, 9.0), (1, 5.0), (4, 4.0), (0, 1.0)];
    let costs = [100, 400, 50, 300, 200];
    let all = Budget { bytes: 10_000, max_tools: 10 };
    assert_eq!(pick(&ranked, &[], &costs, all), [3, 1, 4, 0]);
    // 600 bytes: 3 (300) fits, 1 (400) does not, 4 (200) fits, 0 (100) fits.
    assert_eq!(pick(&ranked, &[], &costs, Budget { bytes: 600, max_tools: 10 }), [3, 4, 0]);
    // A pinned tool comes first and counts against the budget, once.
    assert_eq!(pick(&ranked, &[2, 4], &costs, Budget { bytes: 600, max_tools: 10 }), [2, 4, 3]);
    assert_eq!(pick(&ranked, &[], &costs, Budget { bytes: 10_000, max_tools: 2 }), [3, 1]);
    assert!(pick(&[], &[], &costs, all).is_empty());
}
