use super::*;
use proptest::prelude::*;
use std::mem::MaybeUninit;

/// The deepest flow and block nesting the pre-scan sees.
fn ours(text: &str) -> (usize, usize) {
    let mut s = Scanner::new(text.as_bytes());
    let (mut flow, mut block) = (0, 0);
    while s.next_token().is_some() {
        flow = flow.max(s.flow);
        block = block.max(s.indents.len());
    }
    (flow, block)
}

/// The same from libyaml's own token stream, and whether libyaml read the text to its end.
fn libyaml(text: &str) -> (usize, usize, bool) {
    use libyaml_rs::*;
    let (mut flow, mut block, mut max_flow, mut max_block) = (0usize, 0usize, 0, 0);
    // SAFETY: the parser is initialized before use and deleted once; every token is deleted after its
    // type is read; the input outlives the parser.
    let complete = unsafe {
        let mut parser = MaybeUninit::<yaml_parser_t>::uninit();
        assert!(yaml_parser_initialize(parser.as_mut_ptr()).ok);
        let parser = parser.as_mut_ptr();
        yaml_parser_set_input_string(parser, text.as_ptr(), text.len() as u64);
        let complete = loop {
            let mut token = MaybeUninit::<yaml_token_t>::uninit();
            if yaml_parser_scan(parser, token.as_mut_ptr()).fail {
                break false;
            }
            let kind = (*token.as_ptr()).type_;
            yaml_token_delete(token.as_mut_ptr());
            match kind {
                YAML_FLOW_SEQUENCE_START_TOKEN | YAML_FLOW_MAPPING_START_TOKEN => flow += 1,
                YAML_FLOW_SEQUENCE_END_TOKEN | YAML_FLOW_MAPPING_END_TOKEN => flow = flow.saturating_sub(1),
                YAML_BLOCK_SEQUENCE_START_TOKEN | YAML_BLOCK_MAPPING_START_TOKEN => block += 1,
                YAML_BLOCK_END_TOKEN => block = block.saturating_sub(1),
                YAML_STREAM_END_TOKEN => break true,
                _ => {}
            }
            max_flow = max_flow.max(flow);
            max_block = max_block.max(block);
        };
        yaml_parser_delete(parser);
        complete
    };
    (max_flow, max_block, complete)
}

fn agrees(text: &str) -> Result<(), String> {
    let (flow, block) = ours(text);
    let (lib_flow, lib_block, complete) = libyaml(text);
    let ok = if complete { (flow, block) == (lib_flow, lib_block) } else { flow >= lib_flow && block >= lib_block };
    if ok {
        Ok(())
    } else {
        Err(format!("{text:?}: pre-scan flow {flow} block {block}, libyaml flow {lib_flow} block {lib_block}"))
    }
}

#[test]
fn brackets_outside_the_structure_do_not_count() {
    for text in [
        "a: 'it''s [[[['\nb: \"[[[\\\" {{{\"\n",
        "a: see [the docs\nb: x # [[[[\n# {{{{\n",
        "a: |\n  [[[[\n  {{{{\nb: >-\n    [[[\n\n    ]\n",
        "- a: x\n   [[[ continues the plain scalar\n  b: 1\n",
        "a: x\n  'not a quote\nb: [1]\n",
        "a: !t [1]\nb: &x [2]\nc: *x\n",
    ] {
        assert_eq!(ours(text).0, libyaml(text).0, "{text:?}");
        assert!(ours(text).0 <= 1, "{text:?}");
    }
}

#[test]
fn agrees_with_libyaml_on_tricky_texts() {
    for text in [
        "[a, {b: [c]}]",
        "- - - [x]\n",
        "a:\n  b:\n    - c: [1, {d: 2}]\n",
        "? [a]\n: {b: c}\n",
        "[a]: b\n{c: d}: e\n",
        "a: \"x\\\n  [y\"\nb: [z]\n",
        "--- [a\n, b]\n... \n--- {c: [d]}\n",
        "%YAML 1.2\n--- [x]\n",
        "a: |2\n   [x\nb: [y]\n",
        "k: >\n\n   text\n  more [\nz: [1]\n",
        "\u{feff}a: [1]\r\nb: {c: [2]}\u{2028}d: [3]",
        "a:\n- b\n- [c, [d]]\n",
        "[a, 'b'', [c', \"d\\\", [e\"]",
        "[a #c\n, [b]]",
        "&a [*a, !t [x], !<tag:x,y[]> [z]]",
    ] {
        agrees(text).unwrap();
    }
}

const PIECES: &[&str] = &[
    "[", "]", "{", "}", ",", ":", ": ", "- ", "-", "? ", "?", "'", "\"", "''", "\\", "\\\"", "#", " #", "|", ">", "|-",
    ">2", "&a ", "*a", "!t ", "!<x>", "a", "b c", "\n", "\n  ", "\n    ", "\r\n", "\t", "---\n", "...", "%Y\n",
    "\u{85}", "\u{2028}", "\u{2029}", "\u{a0}", "\u{2026}", "名", " ", "  ", "x: ", "- a: ", "0",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(3000)))]

    /// For any text, the pre-scan's depths are libyaml's (at least libyaml's where libyaml gives up).
    #[test]
    fn pre_scan_matches_libyaml(pieces in prop::collection::vec(prop::sample::select(PIECES), 0..48)) {
        let text = pieces.concat();
        prop_assert!(agrees(&text).is_ok(), "{}", agrees(&text).unwrap_err());
    }
}
