//! The CEL subset of `policy.rules`: parsing (with the positions of its errors) and evaluation, with
//! CEL's semantics for errors in `&&`/`||`, equality across types and checked arithmetic.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

use api_agent::policy::eval::Val;
use api_agent::policy::{decide, hidden, Decision, Offer, Program, Rule, VARS};
use serde_json::{json, Value};

fn run(src: &str) -> Result<String, String> {
    let p = Program::compile(src, &VARS).map_err(|e| e.describe(src))?;
    let args = json!({"amount": 250, "account": "acc-7", "items": [1, 2, 3], "nested": {"to": "x"}, "price": 2.5});
    let tool = json!({"name": "refund", "method": "POST", "tags": ["payments"]});
    let headers = json!({"x-role": "viewer"});
    match p.eval(&[("tool", &tool), ("args", &args), ("headers", &headers)]) {
        Ok(v) => Ok(show(&v)),
        Err(e) => Err(e.0),
    }
}

fn show(v: &Val<'_>) -> String {
    match v {
        Val::Null => "null".into(),
        Val::Bool(b) => b.to_string(),
        Val::Int(i) => i.to_string(),
        Val::Uint(u) => format!("{u}u"),
        Val::Double(d) => format!("{d:?}"),
        Val::Str(s) => format!("{s:?}"),
        Val::List(_) | Val::Map(_) | Val::Json(_) => v.type_name().into(),
    }
}

#[test]
fn literals_operators_and_functions() {
    let cases = [
        ("1 + 2 * 3 - 4 / 2 % 3", "5"),
        ("-9223372036854775808", "-9223372036854775808"),
        ("0x10 + 1", "17"),
        ("3u * 2u", "6u"),
        ("1.5 + .5", "2.0"),
        ("1e3", "1000.0"),
        (r##""a\tb" + 'c' + r'\n' + """d""""##, r#""a\tbc\\nd""#),
        ("'\\u00e9' == 'é' && size('héllo') == 5", "true"),
        ("1 == 1.0 && 1u == 1 && 2 > 1.5 && 1u < 2", "true"),
        ("1 == 'a'", "false"),
        ("[1, 2] == [1, 2.0] && {'a': 1} == {'a': 1}", "true"),
        ("2 in [1, 2] && 'a' in {'a': 1} && !('b' in {'a': 1})", "true"),
        ("true ? 'y' : 'n'", "\"y\""),
        ("'abc'.startsWith('ab') && 'abc'.endsWith('bc') && 'abc'.contains('b')", "true"),
        ("int('12') + int(2.9) + int(3u)", "17"),
        ("uint(5) + uint('6')", "11u"),
        ("double(1) + double('0.5')", "1.5"),
        ("string(12) + string(true)", "\"12true\""),
        ("size([1, 2]) + [1, 2, 3].size() + size({'a': 1})", "6"),
        ("[1, 2, 3].all(x, x > 0) && [1, 2].exists(x, x == 2) && [1, 2].exists_one(x, x > 1)", "true"),
        ("size([1, 2, 3].filter(x, x > 1)) == 2 && [1, 2].map(x, x * 2) == [2, 4]", "true"),
        ("null == null && [] == []", "true"),
    ];
    for (src, want) in cases {
        assert_eq!(run(src), Ok(want.to_string()), "{src}");
    }
}

#[test]
fn variables_fields_and_has() {
    let cases = [
        ("args.amount > 100 && tool.method != 'GET'", "true"),
        ("args.account == 'acc-7' && args['account'] == 'acc-7'", "true"),
        ("args.items[1] == 2 && args.nested.to == 'x'", "true"),
        ("has(args.amount) && !has(args.missing) && !has(headers.role)", "true"),
        ("'payments' in tool.tags", "true"),
        ("headers['x-role'] == 'viewer'", "true"),
        ("args.price * 2.0", "5.0"),
        ("args.items.exists(i, i == args.items[2])", "true"),
    ];
    for (src, want) in cases {
        assert_eq!(run(src).map_err(|e| format!("{src}: {e}")), Ok(want.to_string()), "{src}");
    }
}

#[test]
fn errors_are_absorbed_where_cel_says_and_raised_elsewhere() {
    // `&&` and `||` are commutative over errors: the deciding side wins whichever it is.
    assert_eq!(run("args.missing == 1 && false"), Ok("false".into()));
    assert_eq!(run("false && args.missing == 1"), Ok("false".into()));
    assert_eq!(run("args.missing == 1 || true"), Ok("true".into()));
    assert_eq!(run("true || 1 / 0 == 1"), Ok("true".into()));
    assert_eq!(run("args.missing == 1 || false"), Err("no such key: 'missing'".into()));
    assert_eq!(run("1 / 0"), Err("division by zero".into()));
    assert_eq!(run("5 % 0"), Err("modulus by zero".into()));
    assert_eq!(run("9223372036854775807 + 1"), Err("int overflow".into()));
    assert_eq!(run("0u - 1u"), Err("uint overflow".into()));
    assert_eq!(run("1 + 1.0"), Err("no such overload: +(int, double)".into()));
    assert_eq!(run("'a' < 1"), Err("no such overload: <(string, int)".into()));
    assert_eq!(run("[1][3]"), Err("index out of range".into()));
    assert_eq!(run("{'a': 1}['b']"), Err("no such key".into()));
    assert_eq!(run("int('x')"), Err("cannot convert the string to int".into()));
    assert_eq!(run("int(1e30)"), Err("range error".into()));
    assert_eq!(run("{'a': 1, 'a': 2}"), Err("Failed with repeated key".into()));
    assert_eq!(run("!1"), Err("no such overload: !_(int)".into()));
}

#[test]
fn parse_errors_say_where() {
    let cases = [
        ("1 +", "at column 4: unexpected end of expression"),
        ("(1 + 2", "at column 7: expected ')', found end of expression"),
        ("a.b", "at column 1: unknown name 'a' (a rule reads tool, args, headers)"),
        ("size(1, 2)", "at column 1: 'size' takes 1 argument(s), found 2"),
        ("'abc", "at column 1: unterminated string"),
        ("1 # 2", "at column 3: unexpected character '#'"),
        ("'é' == x", "at column 8: unknown name 'x' (a rule reads tool, args, headers)"),
        ("99999999999999999999", "at column 1: number out of range"),
        ("9223372036854775808", "at column 1: int literal out of range"),
        ("has(args)", "at column 1: has() takes a field selection, as in has(args.name)"),
        ("b'x'", "at column 1: bytes literals are not supported"),
        ("[1].map(x, 1, x)", "at column 5: three-argument map() is not supported"),
        ("if", "at column 1: 'if' is a reserved word"),
        ("'a'.int()", "at column 5: 'int' is not called as x.int(...)"),
        ("startsWith('a')", "at column 1: 'startsWith' is called as x.startsWith(...)"),
        ("1 2", "at column 3: unexpected literal"),
    ];
    for (src, want) in cases {
        assert_eq!(run(src), Err(want.to_string()), "{src}");
    }
    let deep = format!("{}1{}", "(".repeat(100), ")".repeat(100));
    assert!(run(&deep).unwrap_err().contains("nested too deeply"));
}

fn rule(name: &str, when: &str, decision: Decision) -> Rule {
    Rule { name: name.into(), when: Program::compile(when, &VARS).unwrap(), decision, reason: "no".into() }
}

#[test]
fn the_first_rule_that_holds_decides_and_identity_rules_hide_tools() {
    let rules = [
        rule("allow-admins", "headers.role == 'admin'", Decision::Allow),
        rule("big", "args.amount > 100", Decision::Confirm),
        rule("viewers", "headers.role == 'viewer' && tool.method != 'GET'", Decision::Deny),
    ];
    let tool = json!({"name": "refund", "method": "POST"});
    let admin = json!({"role": "admin"});
    let viewer = json!({"role": "viewer"});
    let at = |args: Value, h: &Value| decide(&rules, &tool, &args, h).map(|v| (v.rule, v.decision));
    assert_eq!(at(json!({"amount": 500}), &admin), Some((0, Decision::Allow)));
    assert_eq!(at(json!({"amount": 500}), &viewer), Some((1, Decision::Confirm)));
    assert_eq!(at(json!({"amount": 5}), &viewer), Some((2, Decision::Deny)));
    assert_eq!(at(json!({"amount": 5}), &json!({"role": "editor"})), None);
    // `args.amount` is missing: the rule's error denies.
    let v = decide(&rules, &tool, &json!({}), &viewer).unwrap();
    assert_eq!((v.rule, v.decision, v.error.as_deref()), (1, Decision::Deny, Some("no such key: 'amount'")));
    // The rule on args could confirm before the viewers' denial: the tool stays offered.
    assert!(!hidden(&rules, &tool, &viewer));
    let strict = [rule("viewers", "headers.role == 'viewer' && tool.method != 'GET'", Decision::Deny)];
    assert!(hidden(&strict, &tool, &viewer));
    assert!(!hidden(&strict, &json!({"name": "list", "method": "GET"}), &viewer));
    let deny_on_args = [rule("big", "args.amount > 100", Decision::Deny), strict[0].clone()];
    assert!(hidden(&deny_on_args, &tool, &viewer), "a denial on args cannot let the call by");
}

#[test]
fn rules_the_headers_make_false_are_read_once_per_request_and_let_nothing_by() {
    // A rule on arguments for admins only: for a viewer it cannot hold, so it no longer stops the
    // viewers' denial from hiding the tool (before, any non-denial rule reading args did).
    let rules = [
        rule("admins-big", "headers.role == 'admin' && args.amount > 100", Decision::Confirm),
        rule("viewers", "headers['role'] == 'viewer' && tool.method != 'GET'", Decision::Deny),
    ];
    let (post, get) = (json!({"name": "refund", "method": "POST"}), json!({"name": "list", "method": "GET"}));
    let (viewer, admin, editor) = (json!({"role": "viewer"}), json!({"role": "admin"}), json!({"role": "editor"}));
    let offer = Offer::new(&rules, &viewer);
    assert!(offer.hidden(&post) && !offer.hidden(&get));
    assert!(!offer.hides_nothing());
    assert!(!Offer::new(&rules, &admin).hidden(&post), "the admins' rule may confirm: offered");
    assert!(Offer::new(&rules, &editor).hides_nothing(), "no rule can hold for an editor");
    // A gate that cannot be evaluated (a missing header) tells nothing: the rule is evaluated per tool,
    // and its error denies, as `decide` does.
    let missing = [rule("viewers", "headers.role == 'viewer' && tool.method != 'GET'", Decision::Deny)];
    let nobody = json!({});
    assert!(!Offer::new(&missing, &nobody).hides_nothing());
    assert!(Offer::new(&missing, &nobody).hidden(&post));
    assert_eq!(decide(&missing, &post, &json!({}), &nobody).map(|v| v.decision), Some(Decision::Deny));
    // Operands inside `||`, or reading a macro's bound name, are not gates.
    let or = [rule("either", "headers.role == 'x' || tool.method != 'GET'", Decision::Deny)];
    assert!(!Offer::new(&or, &viewer).hides_nothing() && Offer::new(&or, &viewer).hidden(&post));
    let bound =
        [rule("b", "headers.role == 'viewer' && ['a'].exists(h, h == 'b') && tool.method != 'GET'", Decision::Deny)];
    assert!(Offer::new(&bound, &editor).hides_nothing(), "the headers' operand is still a gate");
    assert!(!Offer::new(&bound, &viewer).hidden(&post), "['a'].exists(h, h == 'b') is false");
}
