//! Evaluates a parsed expression over an activation of JSON values, with CEL's semantics for the
//! subset: errors are values that `&&`, `||` and `?:` absorb where CEL says so; equality across types
//! is false, numbers compare across int, uint and double; int and uint arithmetic is checked.

use super::parse::{Expr, Lit, Macro};
pub use super::value::{equal, EvalError, Val};
use serde_json::Value as Json;
use std::borrow::Cow;

type R<'a> = Result<Val<'a>, EvalError>;

fn err<T>(msg: impl Into<String>) -> Result<T, EvalError> {
    Err(EvalError(msg.into()))
}

fn no_overload<T>(op: &str, a: &Val<'_>, b: Option<&Val<'_>>) -> Result<T, EvalError> {
    let types = b.map_or_else(|| a.type_name().to_string(), |b| format!("{}, {}", a.type_name(), b.type_name()));
    err(format!("no such overload: {op}({types})"))
}

/// Evaluates `e`; `vars` names the activation's values, `locals` the macros' bound values.
pub fn eval<'a>(e: &Expr, vars: &[(&str, &'a Json)], locals: &mut Vec<(String, Val<'a>)>) -> R<'a> {
    match e {
        Expr::Lit(l) => Ok(literal(l)),
        Expr::Var(name) => {
            if let Some((_, v)) = locals.iter().rev().find(|(n, _)| n == name) {
                return Ok(v.clone());
            }
            match vars.iter().find(|(n, _)| n == name) {
                Some((_, j)) => Ok(Val::of(j)),
                None => err(format!("no value for '{name}'")),
            }
        }
        Expr::Select(target, field) => {
            let t = eval(target, vars, locals)?;
            field_of(&t, field)?.map_or_else(|| err(format!("no such key: '{field}'")), Ok)
        }
        Expr::Has(target, field) => Ok(Val::Bool(field_of(&eval(target, vars, locals)?, field)?.is_some())),
        Expr::Index(target, index) => {
            let (t, i) = (eval(target, vars, locals)?, eval(index, vars, locals)?);
            index_of(&t, &i)
        }
        Expr::Call(name, target, args) => {
            let mut vals = Vec::with_capacity(args.len() + 1);
            if let Some(t) = target {
                vals.push(eval(t, vars, locals)?);
            }
            for a in args {
                vals.push(eval(a, vars, locals)?);
            }
            super::funcs::call(name, vals)
        }
        Expr::Not(x) => match eval(x, vars, locals)? {
            Val::Bool(b) => Ok(Val::Bool(!b)),
            v => no_overload("!_", &v, None),
        },
        Expr::Neg(x) => match eval(x, vars, locals)? {
            Val::Int(i) => i.checked_neg().map(Val::Int).ok_or_else(|| EvalError("int overflow".into())),
            Val::Double(d) => Ok(Val::Double(-d)),
            v => no_overload("-_", &v, None),
        },
        Expr::And(a, b) => logic(false, eval(a, vars, locals), || eval(b, vars, locals)),
        Expr::Or(a, b) => logic(true, eval(a, vars, locals), || eval(b, vars, locals)),
        Expr::Cond(c, yes, no) => match eval(c, vars, locals)? {
            Val::Bool(true) => eval(yes, vars, locals),
            Val::Bool(false) => eval(no, vars, locals),
            v => no_overload("_?_:_", &v, None),
        },
        Expr::Binary(op, a, b) => {
            let (a, b) = (eval(a, vars, locals)?, eval(b, vars, locals)?);
            super::funcs::binary(op, &a, &b)
        }
        Expr::List(items) => Ok(Val::List(items.iter().map(|i| eval(i, vars, locals)).collect::<Result<_, _>>()?)),
        Expr::Map(entries) => map_literal(entries, vars, locals),
        Expr::Comp { kind, range, var, body } => {
            let range = eval(range, vars, locals)?;
            comprehension(*kind, &range, var, body, vars, locals)
        }
    }
}

fn literal<'a>(l: &Lit) -> Val<'a> {
    match l {
        Lit::Null => Val::Null,
        Lit::Bool(b) => Val::Bool(*b),
        Lit::Int(i) => Val::Int(*i),
        Lit::Uint(u) => Val::Uint(*u),
        Lit::Double(d) => Val::Double(*d),
        Lit::Str(s) => Val::Str(Cow::Owned(s.clone())),
    }
}

/// `&&` (`absorbing` false) and `||` (true): the absorbing value wins over an error on either side.
fn logic<'a>(absorbing: bool, a: R<'a>, b: impl FnOnce() -> R<'a>) -> R<'a> {
    let a = match a {
        Ok(Val::Bool(x)) if x == absorbing => return Ok(Val::Bool(x)),
        Ok(Val::Bool(_)) => Ok(()),
        Ok(v) => no_overload(if absorbing { "_||_" } else { "_&&_" }, &v, None),
        Err(e) => Err(e),
    };
    match (a, b()) {
        (_, Ok(Val::Bool(y))) if y == absorbing => Ok(Val::Bool(y)),
        (Err(e), _) => Err(e),
        (Ok(()), Ok(Val::Bool(y))) => Ok(Val::Bool(y)),
        (Ok(()), Ok(v)) => no_overload(if absorbing { "_||_" } else { "_&&_" }, &v, None),
        (Ok(()), Err(e)) => Err(e),
    }
}

/// A map's field: `None` when the map lacks it; an error when `t` is not a map.
fn field_of<'a>(t: &Val<'a>, field: &str) -> Result<Option<Val<'a>>, EvalError> {
    match t {
        Val::Json(Json::Object(o)) => Ok(o.get(field).map(Val::of)),
        Val::Map(m) => Ok(m.iter().find(|(k, _)| matches!(k, Val::Str(s) if s == field)).map(|(_, v)| v.clone())),
        v => err(format!("no such field '{field}' on {}", v.type_name())),
    }
}

fn index_of<'a>(t: &Val<'a>, i: &Val<'a>) -> R<'a> {
    if let Some(items) = t.items() {
        let n = match i {
            Val::Int(n) => Some(*n),
            Val::Uint(n) => i64::try_from(*n).ok(),
            Val::Double(d) if d.fract() == 0.0 => Some(*d as i64),
            v => return no_overload("_[_]", t, Some(v)),
        };
        return match n.and_then(|n| usize::try_from(n).ok()).and_then(|n| items.get(n)) {
            Some(v) => Ok(v.clone()),
            None => err("index out of range"),
        };
    }
    if let Some(entries) = t.entries() {
        return match entries.into_iter().find(|(k, _)| equal(k, i)) {
            Some((_, v)) => Ok(v),
            None => err("no such key"),
        };
    }
    no_overload("_[_]", t, Some(i))
}

fn map_literal<'a>(entries: &[(Expr, Expr)], vars: &[(&str, &'a Json)], locals: &mut Vec<(String, Val<'a>)>) -> R<'a> {
    let mut out: Vec<(Val<'a>, Val<'a>)> = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        let k = eval(k, vars, locals)?;
        if !matches!(k, Val::Bool(_) | Val::Int(_) | Val::Uint(_) | Val::Str(_)) {
            return err(format!("unsupported key type: {}", k.type_name()));
        }
        if out.iter().any(|(k2, _)| equal(&k, k2)) {
            return err("Failed with repeated key");
        }
        out.push((k, eval(v, vars, locals)?));
    }
    Ok(Val::Map(out))
}

/// A list macro over `range` (a list, or a map's keys), binding each element to `var`.
fn comprehension<'a>(
    kind: Macro,
    range: &Val<'a>,
    var: &str,
    body: &Expr,
    vars: &[(&str, &'a Json)],
    locals: &mut Vec<(String, Val<'a>)>,
) -> R<'a> {
    let items = match (range.items(), range.entries()) {
        (Some(items), _) => items,
        (None, Some(entries)) => entries.into_iter().map(|(k, _)| k).collect(),
        _ => return no_overload("comprehension", range, None),
    };
    let mut out = Vec::new();
    let (mut found, mut first_err) = (0usize, None);
    for item in items {
        locals.push((var.to_string(), item.clone()));
        let r = eval(body, vars, locals);
        locals.pop();
        match (kind, r) {
            (Macro::Map, r) => out.push(r?),
            (Macro::Filter, Ok(Val::Bool(keep))) => out.extend(keep.then_some(item)),
            (Macro::All, Ok(Val::Bool(false))) => return Ok(Val::Bool(false)),
            (Macro::Exists, Ok(Val::Bool(true))) => return Ok(Val::Bool(true)),
            (Macro::ExistsOne, Ok(Val::Bool(b))) => found += usize::from(b),
            (_, Ok(Val::Bool(_))) => {}
            (Macro::Filter | Macro::ExistsOne, Err(e)) => return Err(e),
            (_, Ok(v)) => return no_overload("comprehension", &v, None),
            (_, Err(e)) => first_err = first_err.or(Some(e)),
        }
    }
    match kind {
        Macro::Map | Macro::Filter => Ok(Val::List(out)),
        Macro::ExistsOne => Ok(Val::Bool(found == 1)),
        _ if first_err.is_some() => Err(first_err.unwrap_or(EvalError(String::new()))),
        Macro::All => Ok(Val::Bool(true)),
        Macro::Exists => Ok(Val::Bool(false)),
    }
}
