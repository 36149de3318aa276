//! CEL's values over JSON: the activation's JSON is borrowed, not copied; equality and order as CEL
//! defines them across types.

use serde_json::Value as Json;
use std::borrow::Cow;
use std::cmp::Ordering;

/// A CEL value; JSON from the activation is borrowed, not copied.
#[derive(Debug, Clone)]
pub enum Val<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    Str(Cow<'a, str>),
    List(Vec<Val<'a>>),
    Map(Vec<(Val<'a>, Val<'a>)>),
    /// An array or object of the activation, read in place.
    Json(&'a Json),
}

/// Why an evaluation failed (CEL's error value).
#[derive(Debug, Clone, PartialEq)]
pub struct EvalError(pub String);

impl<'a> Val<'a> {
    /// A JSON value: scalars become CEL scalars (integral numbers ints, or uints above `i64::MAX`).
    pub fn of(j: &'a Json) -> Val<'a> {
        match j {
            Json::Null => Val::Null,
            Json::Bool(b) => Val::Bool(*b),
            Json::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Val::Int(i),
                (None, Some(u)) => Val::Uint(u),
                _ => Val::Double(n.as_f64().unwrap_or(f64::NAN)),
            },
            Json::String(s) => Val::Str(Cow::Borrowed(s)),
            _ => Val::Json(j),
        }
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Val::Null => "null_type",
            Val::Bool(_) => "bool",
            Val::Int(_) => "int",
            Val::Uint(_) => "uint",
            Val::Double(_) => "double",
            Val::Str(_) => "string",
            Val::List(_) | Val::Json(Json::Array(_)) => "list",
            Val::Map(_) | Val::Json(_) => "map",
        }
    }

    /// The elements of a list.
    pub fn items(&self) -> Option<Vec<Val<'a>>> {
        match self {
            Val::List(l) => Some(l.clone()),
            Val::Json(Json::Array(a)) => Some(a.iter().map(Val::of).collect()),
            _ => None,
        }
    }

    /// The entries of a map.
    pub fn entries(&self) -> Option<Vec<(Val<'a>, Val<'a>)>> {
        match self {
            Val::Map(m) => Some(m.clone()),
            Val::Json(Json::Object(o)) => {
                Some(o.iter().map(|(k, v)| (Val::Str(Cow::Borrowed(k.as_str())), Val::of(v))).collect())
            }
            _ => None,
        }
    }

    pub fn is_map(&self) -> bool {
        matches!(self, Val::Map(_) | Val::Json(Json::Object(_)))
    }
}

/// CEL equality: false across types, numeric across int, uint and double, deep on lists and maps.
pub fn equal(a: &Val<'_>, b: &Val<'_>) -> bool {
    if let (Some(x), Some(y)) = (a.items(), b.items()) {
        return x.len() == y.len() && x.iter().zip(&y).all(|(x, y)| equal(x, y));
    }
    if let (Some(x), Some(y)) = (a.entries(), b.entries()) {
        return x.len() == y.len() && x.iter().all(|(k, v)| y.iter().any(|(k2, v2)| equal(k, k2) && equal(v, v2)));
    }
    match (a, b) {
        (Val::Null, Val::Null) => true,
        (Val::Bool(x), Val::Bool(y)) => x == y,
        (Val::Str(x), Val::Str(y)) => x == y,
        _ => numeric_cmp(a, b) == Some(Ordering::Equal),
    }
}

/// The order of two numbers of any numeric types (`None`: not both numbers, or NaN).
fn numeric_cmp(a: &Val<'_>, b: &Val<'_>) -> Option<Ordering> {
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => Some(x.cmp(y)),
        (Val::Uint(x), Val::Uint(y)) => Some(x.cmp(y)),
        (Val::Int(x), Val::Uint(y)) => Some(if *x < 0 { Ordering::Less } else { (*x as u64).cmp(y) }),
        (Val::Uint(_), Val::Int(_)) => numeric_cmp(b, a).map(Ordering::reverse),
        (Val::Double(x), Val::Double(y)) => x.partial_cmp(y),
        (Val::Double(x), Val::Int(y)) => double_int_cmp(*x, *y as f64, *y as i128),
        (Val::Double(x), Val::Uint(y)) => double_int_cmp(*x, *y as f64, *y as i128),
        (Val::Int(_) | Val::Uint(_), Val::Double(_)) => numeric_cmp(b, a).map(Ordering::reverse),
        _ => None,
    }
}

/// A double against an integer, exactly where the double is integral.
fn double_int_cmp(x: f64, y_f: f64, y: i128) -> Option<Ordering> {
    if x.is_nan() {
        return None;
    }
    if x.fract() == 0.0 && x.abs() < 1.7e38 {
        return Some((x as i128).cmp(&y));
    }
    x.partial_cmp(&y_f)
}

/// A double's text, read by serde_json's parser (already in the module: core's float parser would
/// add its own tables to the `.wasm`). `.5` is read as `0.5`.
pub fn parse_double(text: &str) -> Option<f64> {
    let t = text.trim();
    let (sign, digits) = t.strip_prefix('-').map_or(("", t), |d| ("-", d));
    let lead = if digits.starts_with('.') { "0" } else { "" };
    serde_json::from_str::<f64>(&format!("{sign}{lead}{digits}")).ok()
}

/// A double's text, written by serde_json's writer (for the same reason).
pub fn show_double(d: f64) -> String {
    match serde_json::Number::from_f64(d) {
        Some(n) => n.to_string(),
        None if d.is_nan() => "NaN".into(),
        None => (if d > 0.0 { "+Inf" } else { "-Inf" }).into(),
    }
}

/// The order of two strings, bools or numbers (`None`: not comparable).
pub fn cmp(a: &Val<'_>, b: &Val<'_>) -> Option<Ordering> {
    match (a, b) {
        (Val::Str(x), Val::Str(y)) => Some(x.cmp(y)),
        (Val::Bool(x), Val::Bool(y)) => Some(x.cmp(y)),
        _ => numeric_cmp(a, b),
    }
}
