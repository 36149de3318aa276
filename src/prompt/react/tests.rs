use super::*;
use proptest::prelude::*;
use serde_json::json;

fn action(name: &str, input: Value) -> Step {
    Step::Action { name: name.into(), input }
}

fn fin(s: &str) -> Step {
    Step::Final { answer: s.into() }
}

#[test]
fn json_blob_fenced_with_and_without_tag() {
    let a = "Thought: x\nAction:\n```json\n{\"action\": \"listPets\", \"action_input\": {\"limit\": 3}}\n```";
    assert_eq!(parse(a), action("listPets", json!({"limit": 3})));
    let b = "Action:\n```\n{\"action\": \"listPets\", \"action_input\": {}}\n```\nObservation:";
    assert_eq!(parse(b), action("listPets", json!({})));
    let c = "Action: ```{\"action\": \"listPets\", \"action_input\": {}}```";
    assert_eq!(parse(c), action("listPets", json!({})));
}

#[test]
fn json_blob_unfenced_and_bare() {
    let a = "Action: {\"action\": \"getWeather\", \"action_input\": {\"city\": \"北京\"}}";
    assert_eq!(parse(a), action("getWeather", json!({"city": "北京"})));
    // Higress's unit tests: a bare blob whose input is a JSON string.
    let b = r#"{"action": "getWeather", "action_input": "{\"city\": \"北京\"}"}"#;
    assert_eq!(parse(b), action("getWeather", json!({"city": "北京"})));
}

#[test]
fn string_input_that_is_not_json_stays_a_string() {
    let a = r#"{"action": "search", "action_input": "coffee near me"}"#;
    assert_eq!(parse(a), action("search", json!("coffee near me")));
}

#[test]
fn classic_lines() {
    let a = "Thought: look it up\nAction: get_weather_now\nAction Input: {\"location\": \"Oslo\"}";
    assert_eq!(parse(a), action("get_weather_now", json!({"location": "Oslo"})));
    let b = "Action: search\nAction Input: coffee\nObservation: ignored";
    assert_eq!(parse(b), action("search", json!("coffee")));
    let c = "Action: `listPets`\nAction Input:\n```json\n{\"limit\": 1}\n```";
    assert_eq!(parse(c), action("listPets", json!({"limit": 1})));
}

#[test]
fn final_answers() {
    assert_eq!(parse("Thought: done\nFinal Answer: It is 25 °C."), fin("It is 25 °C."));
    assert_eq!(parse("Final Answer: 第一行\n第二行"), fin("第一行\n第二行"));
    let blob = "Action:\n```json\n{\"action\": \"Final Answer\", \"action_input\": \"Done: \\\"ok\\\"\"}\n```";
    assert_eq!(parse(blob), fin("Done: \"ok\""));
    let obj = r#"{"action": "Final Answer", "action_input": {"a": 1}}"#;
    assert_eq!(parse(obj), fin(r#"{"a":1}"#));
    assert_eq!(parse("Just a direct answer."), fin("Just a direct answer."));
}

#[test]
fn first_action_wins() {
    let two = "Action: {\"action\": \"a\", \"action_input\": {}}\nAction: {\"action\": \"b\", \"action_input\": {}}";
    assert_eq!(parse(two), action("a", json!({})));
    let action_then_final = "Action: a\nAction Input: {}\nObservation: x\nFinal Answer: y";
    assert_eq!(parse(action_then_final), action("a", json!({})));
    let final_then_action = "Final Answer: y\nAction: a";
    // A turn sent without `stop` (the server refused it) is cut at its first `Observation:` line by
    // the parser itself: what follows is the model's invention.
    let invented = "Thought: I know.\nObservation: x\nFinal Answer: y";
    assert!(matches!(parse(invented), Step::Malformed { .. }), "{:?}", parse(invented));
    assert_eq!(parse("Observation: x\nFinal Answer: y"), Step::Malformed { why: "the reply is empty".into() });
    assert_eq!(parse(final_then_action), fin("y\nAction: a"));
}

#[test]
fn malformed_replies_say_why() {
    for (text, why) in [
        ("", "empty"),
        ("Action: getOrderById\nAction Input: {'orderId': 3}", "not valid JSON"),
        ("Action:\n```json\n{\"action\": \"getOrderById\", \"action_input\": {'orderId': 3}}\n```", "not valid JSON"),
        ("Thought: I should call something", "neither"),
        (r#"{"action": "getWeather", "action_input": "{invalid json"#, "neither"),
        (r#"{"action": "", "action_input": {}}"#, "empty"),
    ] {
        match parse(text) {
            Step::Malformed { why: w } => assert!(w.contains(why), "{text:?}: {w}"),
            other => panic!("{text:?} gave {other:?}"),
        }
    }
}

#[test]
fn markers_inside_words_do_not_count() {
    assert_eq!(parse("The TransAction: was fine."), fin("The TransAction: was fine."));
}

#[test]
fn many_braces_are_bounded() {
    let text = "{\"a".repeat(100_000);
    assert!(matches!(parse(&text), Step::Final { .. } | Step::Malformed { .. }));
}

proptest! {
    #[test]
    fn never_panics(s in "\\PC*") {
        let _ = parse(&s);
    }

    #[test]
    fn never_panics_near_markers(a in "\\PC{0,20}", b in "[{}\"`:\\n ]{0,20}", c in "\\PC{0,20}") {
        for m in ["Action:", "Final Answer:", "Action Input:", "```json\n{\"action\":"] {
            let _ = parse(&format!("{a}{m}{b}{c}"));
            let _ = parse(&format!("{m}{a}{b}{m}{c}"));
        }
    }
}

#[test]
fn flattened_blob_arguments_are_the_input() {
    let step = parse(r#"{"action": "get_weather_now", "location": "Oslo", "unit": "c"}"#);
    assert_eq!(step, Step::Action { name: "get_weather_now".into(), input: json!({"location": "Oslo", "unit": "c"}) });
    let step = parse(r#"{"action": "list_all", "thought": "no input needed"}"#);
    assert_eq!(step, Step::Action { name: "list_all".into(), input: Value::Null });
}

#[test]
fn an_invented_next_question_is_cut() {
    assert_eq!(
        parse("It is cold in Oslo.\nQuestion: And in Bergen?\nThought: ..."),
        Step::Final { answer: "It is cold in Oslo.".into() }
    );
    assert_eq!(parse("Thought: done\nFinal Answer: Cold.\nQuestion: next?"), Step::Final { answer: "Cold.".into() });
}
