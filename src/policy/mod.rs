//! The operator's call rules (`policy.rules`): CEL expressions over the tool, the call's arguments and
//! the request headers the operator lists, compiled once at load, and the first rule that holds
//! decides a call. A subset of CEL written here (lexer, parser, evaluator) rather than a crate: the
//! `cel-interpreter` crate alone measured 490,872 bytes of `.wasm` (wasm-opt -Oz), against a ceiling
//! with about 13 kB left; `docs/policy.md` lists the subset.

pub mod eval;
mod funcs;
mod lex;
pub mod parse;
mod value;

use eval::{EvalError, Val};
use parse::Expr;
use serde_json::Value as Json;

/// The names a rule reads.
pub const VARS: [&str; 3] = ["tool", "args", "headers"];

/// Why an expression does not compile: the byte offset it was found at, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CelError {
    pub pos: usize,
    pub msg: String,
}

impl CelError {
    pub fn at(pos: usize, msg: impl Into<String>) -> CelError {
        CelError { pos, msg: msg.into() }
    }

    /// The error with its 1-based column (in characters) in `src`.
    pub fn describe(&self, src: &str) -> String {
        let col = src.get(..self.pos).map_or(self.pos, |s| s.chars().count()) + 1;
        format!("at column {col}: {}", self.msg)
    }
}

/// A compiled expression, and which of its variables it reads.
#[derive(Debug, Clone)]
pub struct Program {
    expr: Expr,
    reads: Vec<bool>,
    vars: Vec<String>,
    /// The top-level `&&` operands that read nothing but `headers`: one of them false, and the
    /// expression is false for every tool and argument of the request (CEL's `&&` is false when an
    /// operand is, whatever the others, errors included).
    gates: Vec<Expr>,
}

impl Program {
    /// Compiles `src`, which may read the variables `vars`.
    pub fn compile(src: &str, vars: &[&str]) -> Result<Program, CelError> {
        let (expr, reads) = parse::parse(src, vars)?;
        let mut gates = Vec::new();
        header_gates(&expr, &mut gates);
        Ok(Program { expr, reads, vars: vars.iter().map(|v| v.to_string()).collect(), gates })
    }

    /// False for every tool and argument, as `headers` alone tells (a gate is false); `false` when
    /// it cannot tell.
    pub fn false_for(&self, headers: &Json) -> bool {
        let activation = [("tool", &Json::Null), ("args", &Json::Null), ("headers", headers)];
        self.gates.iter().any(|g| matches!(eval::eval(g, &activation, &mut Vec::new()), Ok(Val::Bool(false))))
    }

    /// Whether the expression reads variable `name`.
    pub fn reads(&self, name: &str) -> bool {
        self.vars.iter().zip(&self.reads).any(|(v, r)| *r && v == name)
    }

    /// The header names the expression reads by a constant (`headers["x-role"]`, `headers.role`).
    pub fn headers_read(&self) -> Vec<&str> {
        let mut out = Vec::new();
        walk(&self.expr, &mut |e| match e {
            Expr::Index(t, i) => {
                if let (Expr::Var(v), Expr::Lit(parse::Lit::Str(s))) = (t.as_ref(), i.as_ref()) {
                    out.extend((v == "headers").then_some(s.as_str()));
                }
            }
            Expr::Select(t, f) | Expr::Has(t, f) => {
                out.extend(matches!(t.as_ref(), Expr::Var(v) if v == "headers").then_some(f.as_str()));
            }
            _ => {}
        });
        out
    }

    /// The expression's value over `activation` (a value per variable).
    pub fn eval<'a>(&self, activation: &[(&str, &'a Json)]) -> Result<Val<'a>, EvalError> {
        eval::eval(&self.expr, activation, &mut Vec::new())
    }
}

/// The operands of `e`'s top-level `&&` chain that read no variable but `headers` (a macro's bound
/// name counts as another variable).
fn header_gates(e: &Expr, out: &mut Vec<Expr>) {
    if let Expr::And(a, b) = e {
        header_gates(a, out);
        header_gates(b, out);
        return;
    }
    let mut only_headers = true;
    walk(e, &mut |x| {
        if let Expr::Var(v) = x {
            only_headers &= v == "headers";
        }
    });
    if only_headers {
        out.push(e.clone());
    }
}

/// Calls `f` on `e` and every expression inside it.
fn walk<'e>(e: &'e Expr, f: &mut impl FnMut(&'e Expr)) {
    f(e);
    match e {
        Expr::Lit(_) | Expr::Var(_) => {}
        Expr::Select(x, _) | Expr::Has(x, _) | Expr::Not(x) | Expr::Neg(x) => walk(x, f),
        Expr::Index(a, b) | Expr::Binary(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => {
            walk(a, f);
            walk(b, f);
        }
        Expr::Cond(a, b, c) => [a, b, c].into_iter().for_each(|x| walk(x, f)),
        Expr::Call(_, target, args) => target.iter().map(|t| t.as_ref()).chain(args).for_each(|x| walk(x, f)),
        Expr::List(items) => items.iter().for_each(|x| walk(x, f)),
        Expr::Map(entries) => entries.iter().for_each(|(k, v)| {
            walk(k, f);
            walk(v, f);
        }),
        Expr::Comp { range, body, .. } => {
            walk(range, f);
            walk(body, f);
        }
    }
}

/// What a rule decides of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny,
    Confirm,
    /// The call goes through the data-flow guard (`policy.guard`).
    Sensitive,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::Confirm => "confirm",
            Decision::Sensitive => "sensitive",
        }
    }
}

/// One rule: when `when` holds, `decision`; `reason` is what the model is told of a denial.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub when: Program,
    pub decision: Decision,
    pub reason: String,
}

/// The rule that decided a call (its index), and how; an error evaluating a rule denies the call.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub rule: usize,
    pub decision: Decision,
    pub error: Option<String>,
}

/// The first rule that holds for the call (`tool`, `args`, `headers` as CEL sees them), or none. A
/// rule whose evaluation fails denies (an operator's rule that cannot be read must not let a call by).
pub fn decide(rules: &[Rule], tool: &Json, args: &Json, headers: &Json) -> Option<Verdict> {
    let activation = [("tool", tool), ("args", args), ("headers", headers)];
    rules.iter().enumerate().find_map(|(i, r)| match r.when.eval(&activation) {
        Ok(Val::Bool(true)) => Some(Verdict { rule: i, decision: r.decision, error: None }),
        Ok(Val::Bool(false)) => None,
        Ok(v) => Some(Verdict {
            rule: i,
            decision: Decision::Deny,
            error: Some(format!("a {} is not a bool", v.type_name())),
        }),
        Err(e) => Some(Verdict { rule: i, decision: Decision::Deny, error: Some(e.0) }),
    })
}

/// Whether every call of `tool` is denied whatever its arguments (`Offer::hidden`, for one tool).
pub fn hidden(rules: &[Rule], tool: &Json, headers: &Json) -> bool {
    Offer::new(rules, headers).hidden(tool)
}

/// The rules as one request's offer reads them: the rules its headers already make false (`gates`)
/// are found once, not once per tool of the catalog.
pub struct Offer<'r> {
    rules: &'r [Rule],
    headers: &'r Json,
    /// Per rule: false for this request whatever the tool.
    off: Vec<bool>,
}

impl<'r> Offer<'r> {
    pub fn new(rules: &'r [Rule], headers: &'r Json) -> Offer<'r> {
        Offer { rules, headers, off: rules.iter().map(|r| r.when.false_for(headers)).collect() }
    }

    /// No rule can hold for this request: nothing is hidden.
    pub fn hides_nothing(&self) -> bool {
        self.off.iter().all(|o| *o)
    }

    /// Whether every call of `tool` is denied whatever its arguments, as far as the rules that do not
    /// read `args` tell: such a tool is not offered. A rule that reads `args` and could decide
    /// otherwise (not a denial) stops the walk: the tool may be allowed.
    pub fn hidden(&self, tool: &Json) -> bool {
        let activation = [("tool", tool), ("args", &Json::Null), ("headers", self.headers)];
        for (r, off) in self.rules.iter().zip(&self.off) {
            if *off {
                continue;
            }
            if r.when.reads("args") {
                if r.decision == Decision::Deny {
                    continue;
                }
                return false;
            }
            match r.when.eval(&activation) {
                Ok(Val::Bool(false)) => {}
                Ok(Val::Bool(true)) => return r.decision == Decision::Deny,
                // As `decide`: an error denies.
                _ => return true,
            }
        }
        false
    }
}
