//! CEL's grammar (cel-spec's langdef), for the subset `docs/policy.md` lists: a precedence-climbing
//! parser into `Expr`, which checks at load what can be checked without types: every name is a
//! variable the rule may read (or a macro's), every function exists with its number of arguments.

use super::lex::{lex, Tok};
use super::CelError;

/// A literal value.
#[derive(Debug, Clone, PartialEq)]
pub enum Lit {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    Str(String),
}

/// The list macros: `range.all(x, p)`, `exists`, `exists_one`, `map(x, e)`, `filter(x, p)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Macro {
    All,
    Exists,
    ExistsOne,
    Map,
    Filter,
}

/// An expression; `usize` fields are byte offsets in the source, for runtime errors.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Lit(Lit),
    /// A variable: the activation's (`vars[i]`), or a macro's bound name.
    Var(String),
    Select(Box<Expr>, String),
    /// `has(e.f)`.
    Has(Box<Expr>, String),
    Index(Box<Expr>, Box<Expr>),
    /// A function: `name`, its receiver (`x.f(...)`), its arguments.
    Call(&'static str, Option<Box<Expr>>, Vec<Expr>),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    /// An arithmetic, comparison or `in` operator, as written.
    Binary(&'static str, Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    List(Vec<Expr>),
    Map(Vec<(Expr, Expr)>),
    Comp {
        kind: Macro,
        range: Box<Expr>,
        var: String,
        body: Box<Expr>,
    },
}

/// Functions: (name, arguments when called as `f(x…)`, arguments when called as `x.f(…)`).
const FUNCTIONS: [(&str, Option<usize>, Option<usize>); 9] = [
    ("size", Some(1), Some(0)),
    ("startsWith", None, Some(1)),
    ("endsWith", None, Some(1)),
    ("contains", None, Some(1)),
    ("int", Some(1), None),
    ("uint", Some(1), None),
    ("double", Some(1), None),
    ("string", Some(1), None),
    ("bool", Some(1), None),
];

const RESERVED: [&str; 16] = [
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
];

/// Macro nesting deeper than this is refused (a hostile or mistaken rule cannot exhaust the stack).
const MAX_DEPTH: usize = 48;

/// A parsed expression and which of `vars` it reads.
pub fn parse(src: &str, vars: &[&str]) -> Result<(Expr, Vec<bool>), CelError> {
    let mut p = Parser { toks: lex(src)?, at: 0, vars, reads: vec![false; vars.len()], bound: Vec::new(), depth: 0 };
    let e = p.expr()?;
    match p.peek() {
        Tok::End => Ok((e, p.reads)),
        t => Err(CelError::at(p.pos(), format!("unexpected {}", describe(t)))),
    }
}

struct Parser<'v> {
    toks: Vec<(Tok, usize)>,
    at: usize,
    vars: &'v [&'v str],
    reads: Vec<bool>,
    /// Names bound by the macros around the current position.
    bound: Vec<String>,
    depth: usize,
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::End => "end of expression".into(),
        Tok::Op(o) => format!("'{o}'"),
        Tok::Ident(s) => format!("'{s}'"),
        _ => "literal".into(),
    }
}

impl Parser<'_> {
    fn peek(&self) -> &Tok {
        &self.toks[self.at.min(self.toks.len() - 1)].0
    }

    fn pos(&self) -> usize {
        self.toks[self.at.min(self.toks.len() - 1)].1
    }

    fn next(&mut self) -> Tok {
        let t = self.peek().clone();
        self.at = (self.at + 1).min(self.toks.len() - 1);
        t
    }

    fn eat(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Tok::Op(o) if *o == op) {
            self.at += 1;
            return true;
        }
        false
    }

    fn expect(&mut self, op: &str) -> Result<(), CelError> {
        if self.eat(op) {
            return Ok(());
        }
        Err(CelError::at(self.pos(), format!("expected '{op}', found {}", describe(self.peek()))))
    }

    fn expr(&mut self) -> Result<Expr, CelError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(CelError::at(self.pos(), "expression nested too deeply"));
        }
        let cond = self.or()?;
        let e = if self.eat("?") {
            let yes = self.or()?;
            self.expect(":")?;
            let no = self.expr()?;
            Expr::Cond(Box::new(cond), Box::new(yes), Box::new(no))
        } else {
            cond
        };
        self.depth -= 1;
        Ok(e)
    }

    fn or(&mut self) -> Result<Expr, CelError> {
        let mut e = self.and()?;
        while self.eat("||") {
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, CelError> {
        let mut e = self.relation()?;
        while self.eat("&&") {
            e = Expr::And(Box::new(e), Box::new(self.relation()?));
        }
        Ok(e)
    }

    fn relation(&mut self) -> Result<Expr, CelError> {
        let mut e = self.binary(&["+", "-"], &["*", "/", "%"])?;
        loop {
            let op = match self.peek() {
                Tok::Op(o @ ("<" | "<=" | ">" | ">=" | "==" | "!=")) => *o,
                Tok::Ident(s) if s == "in" => "in",
                _ => return Ok(e),
            };
            self.at += 1;
            let rhs = self.binary(&["+", "-"], &["*", "/", "%"])?;
            e = Expr::Binary(op, Box::new(e), Box::new(rhs));
        }
    }

    /// Addition (`ops`) over multiplication (`inner`, then unary).
    fn binary(&mut self, ops: &[&'static str], inner: &[&'static str]) -> Result<Expr, CelError> {
        let operand = |p: &mut Self| if inner.is_empty() { p.unary() } else { p.binary(inner, &[]) };
        let mut e = operand(self)?;
        while let Tok::Op(o) = self.peek() {
            let Some(op) = ops.iter().find(|x| **x == *o).copied() else { break };
            self.at += 1;
            e = Expr::Binary(op, Box::new(e), Box::new(operand(self)?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, CelError> {
        if self.eat("!") {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        if self.eat("-") {
            // The lowest int is written as the negation of a magnitude no positive int has.
            if let Tok::Int(n) = *self.peek() {
                if n == 1 << 63 {
                    self.at += 1;
                    return self.member(Expr::Lit(Lit::Int(i64::MIN)));
                }
            }
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        let p = self.primary()?;
        self.member(p)
    }

    fn member(&mut self, mut e: Expr) -> Result<Expr, CelError> {
        loop {
            if self.eat(".") {
                let at = self.pos();
                let Tok::Ident(name) = self.next() else {
                    return Err(CelError::at(at, "expected a field name after '.'"));
                };
                if self.eat("(") {
                    e = self.call(&name, Some(e), at)?;
                } else {
                    e = Expr::Select(Box::new(e), name);
                }
            } else if self.eat("[") {
                let index = self.expr()?;
                self.expect("]")?;
                e = Expr::Index(Box::new(e), Box::new(index));
            } else {
                return Ok(e);
            }
        }
    }

    fn primary(&mut self) -> Result<Expr, CelError> {
        let at = self.pos();
        let lit = match self.next() {
            Tok::Int(n) => Lit::Int(i64::try_from(n).map_err(|_| CelError::at(at, "int literal out of range"))?),
            Tok::Uint(n) => Lit::Uint(n),
            Tok::Double(f) => Lit::Double(f),
            Tok::Str(s) => Lit::Str(s),
            Tok::Ident(name) => return self.name(name, at),
            Tok::Op("(") => {
                let e = self.expr()?;
                self.expect(")")?;
                return Ok(e);
            }
            Tok::Op("[") => return Ok(Expr::List(self.list("]")?)),
            Tok::Op("{") => return self.map(),
            t => return Err(CelError::at(at, format!("unexpected {}", describe(&t)))),
        };
        Ok(Expr::Lit(lit))
    }

    fn name(&mut self, name: String, at: usize) -> Result<Expr, CelError> {
        match name.as_str() {
            "true" => return Ok(Expr::Lit(Lit::Bool(true))),
            "false" => return Ok(Expr::Lit(Lit::Bool(false))),
            "null" => return Ok(Expr::Lit(Lit::Null)),
            "in" => return Err(CelError::at(at, "unexpected 'in'")),
            n if RESERVED.contains(&n) => return Err(CelError::at(at, format!("'{n}' is a reserved word"))),
            _ => {}
        }
        if self.eat("(") {
            return self.call(&name, None, at);
        }
        if self.bound.contains(&name) {
            return Ok(Expr::Var(name));
        }
        match self.vars.iter().position(|v| *v == name) {
            Some(i) => {
                self.reads[i] = true;
                Ok(Expr::Var(name))
            }
            None => {
                let known = self.vars.join(", ");
                Err(CelError::at(at, format!("unknown name '{name}' (a rule reads {known})")))
            }
        }
    }

    /// A call of `name` whose '(' was read: a macro, or a function of the table.
    fn call(&mut self, name: &str, target: Option<Expr>, at: usize) -> Result<Expr, CelError> {
        let kind = match name {
            "all" => Some(Macro::All),
            "exists" => Some(Macro::Exists),
            "exists_one" => Some(Macro::ExistsOne),
            "map" => Some(Macro::Map),
            "filter" => Some(Macro::Filter),
            _ => None,
        };
        if let (Some(kind), Some(range)) = (kind, &target) {
            return self.comprehension(kind, range.clone(), at);
        }
        let args = self.list(")")?;
        if name == "has" && target.is_none() {
            return match args.as_slice() {
                [Expr::Select(e, f)] => Ok(Expr::Has(e.clone(), f.clone())),
                _ => Err(CelError::at(at, "has() takes a field selection, as in has(args.name)")),
            };
        }
        let Some((fname, global, member)) = FUNCTIONS.iter().find(|f| f.0 == name) else {
            let why = if name == "matches" { " (regular expressions are not supported)" } else { "" };
            return Err(CelError::at(at, format!("unknown function '{name}'{why}")));
        };
        let arity = if target.is_some() { member } else { global };
        match arity {
            Some(n) if *n == args.len() => Ok(Expr::Call(fname, target.map(Box::new), args)),
            Some(n) => Err(CelError::at(at, format!("'{name}' takes {n} argument(s), found {}", args.len()))),
            None if target.is_some() => Err(CelError::at(at, format!("'{name}' is not called as x.{name}(...)"))),
            None => Err(CelError::at(at, format!("'{name}' is called as x.{name}(...)"))),
        }
    }

    fn comprehension(&mut self, kind: Macro, range: Expr, at: usize) -> Result<Expr, CelError> {
        let var_at = self.pos();
        let Tok::Ident(var) = self.next() else {
            return Err(CelError::at(var_at, "a macro's first argument is a variable name"));
        };
        self.expect(",")?;
        self.bound.push(var.clone());
        let body = self.expr();
        self.bound.pop();
        let body = body?;
        if !self.eat(")") {
            let why = if self.eat(",") { "three-argument map() is not supported" } else { "expected ')'" };
            return Err(CelError::at(if why.starts_with('e') { self.pos() } else { at }, why));
        }
        Ok(Expr::Comp { kind, range: Box::new(range), var, body: Box::new(body) })
    }

    /// Comma-separated expressions up to `close` (a trailing comma allowed).
    fn list(&mut self, close: &str) -> Result<Vec<Expr>, CelError> {
        let mut items = Vec::new();
        while !self.eat(close) {
            items.push(self.expr()?);
            if !self.eat(",") {
                self.expect(close)?;
                break;
            }
        }
        Ok(items)
    }

    fn map(&mut self) -> Result<Expr, CelError> {
        let mut entries = Vec::new();
        while !self.eat("}") {
            let key = self.expr()?;
            self.expect(":")?;
            entries.push((key, self.expr()?));
            if !self.eat(",") {
                self.expect("}")?;
                break;
            }
        }
        Ok(Expr::Map(entries))
    }
}
