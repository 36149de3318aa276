//! The top-level `policy`: rules in CEL on every tool call the agent makes (`policy.rules`), the request
//! headers they may read (`policy.headers`), and the data-flow guard (`policy.guard`). Each rule is
//! compiled here, once; an error names the rule's field and the column in its expression.

use super::fields::Fields;
use super::ConfigError;
use crate::doc::type_name;
use crate::policy::{Decision, Program, Rule, VARS};
use serde_json::Value;

/// `policy`: the rules, in order (the first that holds decides), and the headers they read.
#[derive(Debug, Clone, Default)]
pub struct CallPolicy {
    pub rules: Vec<Rule>,
    /// Lower-case request header names, read into `headers` for the rules.
    pub headers: Vec<String>,
    pub guard: Option<Guard>,
}

/// `policy.guard`: which calls are sensitive, when an argument is tool-derived, and what then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    /// Operations with one of these tags are sensitive.
    pub tags: Vec<String>,
    /// Every call whose method is not GET or HEAD is sensitive.
    pub non_get: bool,
    /// A tool-derived call is refused (`deny`) or goes to the client for approval (`confirm`).
    pub deny: bool,
    /// Strings shorter than this are not compared (too common to tell where they came from).
    pub min_string: usize,
    /// Numbers with fewer digits than this are not compared.
    pub min_digits: usize,
}

impl CallPolicy {
    /// Whether anything is configured: with nothing, the agent's hot path reads no header and
    /// evaluates nothing.
    pub fn is_on(&self) -> bool {
        !self.rules.is_empty() || self.guard.is_some()
    }

    /// Whether some rule can send a call to approval.
    pub fn may_confirm(&self) -> bool {
        self.rules.iter().any(|r| r.decision == Decision::Confirm) || self.guard.as_ref().is_some_and(|g| !g.deny)
    }
}

/// `None`: no `policy`, or one with no rules, guard or headers (nothing to evaluate or read).
pub fn parse(root: &mut Fields<'_>) -> Result<Option<CallPolicy>, ConfigError> {
    let Some(mut f) = root.opt_object("policy")? else {
        return Ok(None);
    };
    let headers = header_names(&mut f)?;
    let mut rules: Vec<Rule> = Vec::new();
    if let Some(v) = f.get("rules") {
        let Value::Array(items) = v else {
            return Err(f.err("rules", format!("must be a list of rules, found {}", type_name(v))));
        };
        for (i, item) in items.iter().enumerate() {
            let rule = parse_rule(Fields::new(f.child_path(&format!("rules[{i}]")), item)?, &headers)?;
            if rules.iter().any(|r| r.name == rule.name) {
                return Err(f.err(&format!("rules[{i}].name"), format!("'{}' names an earlier rule too", rule.name)));
            }
            rules.push(rule);
        }
    }
    let guard = f.opt_object("guard")?.map(parse_guard).transpose()?;
    f.deny_unknown()?;
    let p = CallPolicy { rules, headers, guard };
    Ok(Some(p).filter(|p| p.is_on() || !p.headers.is_empty()))
}

fn header_names(f: &mut Fields<'_>) -> Result<Vec<String>, ConfigError> {
    let Some(v) = f.get("headers") else {
        return Ok(Vec::new());
    };
    let Value::Array(items) = v else {
        return Err(f.err("headers", format!("must be a list of header names, found {}", type_name(v))));
    };
    let mut out: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let name = item.as_str().map(str::trim).unwrap_or_default().to_ascii_lowercase();
        let token = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !token || out.contains(&name) {
            let why = if token { "is listed twice" } else { "must be a header name (letters, digits, '-', '_', '.')" };
            return Err(f.err(&format!("headers[{i}]"), why));
        }
        out.push(name);
    }
    Ok(out)
}

fn parse_rule(mut f: Fields<'_>, headers: &[String]) -> Result<Rule, ConfigError> {
    let name = f.req_str("name")?.trim().to_string();
    let src = f.req_str("when")?;
    let when = Program::compile(&src, &VARS).map_err(|e| f.err("when", e.describe(&src)))?;
    if let Some(h) = when.headers_read().into_iter().find(|h| !headers.iter().any(|n| n == h)) {
        let listed = if headers.is_empty() { "none".to_string() } else { headers.join(", ") };
        return Err(
            f.err("when", format!("reads header '{h}', which policy.headers does not list (it lists {listed})"))
        );
    }
    let decision = match f.req_str("decision")?.as_str() {
        "allow" => Decision::Allow,
        "deny" => Decision::Deny,
        "confirm" => Decision::Confirm,
        "sensitive" => Decision::Sensitive,
        other => {
            let why = format!("must be 'allow', 'deny', 'confirm' or 'sensitive', found '{other}'");
            return Err(f.err("decision", why));
        }
    };
    let reason = f.opt_nonempty("reason")?.unwrap_or_default();
    if decision == Decision::Deny && reason.is_empty() {
        return Err(f.err("reason", "required for 'deny': the model is told it"));
    }
    f.deny_unknown()?;
    Ok(Rule { name, when, decision, reason })
}

fn parse_guard(mut f: Fields<'_>) -> Result<Guard, ConfigError> {
    let tags = match f.get("tags") {
        None => Vec::new(),
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        Some(v) => return Err(f.err("tags", format!("must be a list of tags, found {}", type_name(v)))),
    };
    let non_get = f.opt_bool("nonGet")?.unwrap_or(false);
    let deny = match f.opt_str("action")?.as_deref() {
        None | Some("confirm") => false,
        Some("deny") => true,
        Some(other) => return Err(f.err("action", format!("must be 'confirm' or 'deny', found '{other}'"))),
    };
    let min_string = f.opt_uint("minStringLength", 4, 1024)?.unwrap_or(8) as usize;
    let min_digits = f.opt_uint("minDigits", 3, 20)?.unwrap_or(6) as usize;
    f.deny_unknown()?;
    Ok(Guard { tags, non_get, deny, min_string, min_digits })
}
