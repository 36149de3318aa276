//! yaa's tool safety, per API: `policy: {allow, deny, methods, confirm}`. Denied tools never reach the
//! model (the prompt, native `tools`), so a call to one is an unknown tool; `confirm` tools run only
//! after the client approves the call. Names are operation names or tool names.

use super::fields::Fields;
use super::ConfigError;
use crate::openapi::sanitized_name;
use crate::tools::Tool;
use serde_json::Value;

#[derive(Debug, Clone, Default)]
pub struct Policy {
    path: String,
    allow: Vec<String>,
    deny: Vec<String>,
    methods: Vec<String>,
    confirm: Vec<String>,
}

const METHODS: [&str; 6] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];

impl Policy {
    pub fn parse(mut f: Fields<'_>) -> Result<Policy, ConfigError> {
        let mut p = Policy { path: f.path().to_string(), ..Policy::default() };
        p.allow = names(&mut f, "allow")?;
        p.deny = names(&mut f, "deny")?;
        p.confirm = names(&mut f, "confirm")?;
        p.methods = names(&mut f, "methods")?.into_iter().map(|m| m.to_ascii_uppercase()).collect();
        if let Some((i, m)) = p.methods.iter().enumerate().find(|(_, m)| !METHODS.contains(&m.as_str())) {
            return Err(f.err(&format!("methods[{i}]"), format!("'{m}' is not one of {}", METHODS.join(", "))));
        }
        f.deny_unknown()?;
        Ok(p)
    }

    /// The tools the policy keeps, and the names of those that need the client's approval. A name that
    /// matches no operation of the document is an error (a typo would silently allow or deny nothing).
    pub fn apply(&self, tools: Vec<Tool>) -> Result<(Vec<Tool>, Vec<String>), ConfigError> {
        for (key, list) in [("allow", &self.allow), ("deny", &self.deny), ("confirm", &self.confirm)] {
            if let Some((i, n)) = list.iter().enumerate().find(|(_, n)| !tools.iter().any(|t| matches(n, t))) {
                return Err(ConfigError::new(
                    &format!("{}.{key}[{i}]", self.path),
                    format!("no operation '{n}' in this API"),
                ));
            }
        }
        let kept: Vec<Tool> = tools
            .into_iter()
            .filter(|t| self.allow.is_empty() || self.allow.iter().any(|n| matches(n, t)))
            .filter(|t| !self.deny.iter().any(|n| matches(n, t)))
            .filter(|t| self.methods.is_empty() || self.methods.iter().any(|m| m == t.method()))
            .collect();
        if kept.is_empty() {
            return Err(ConfigError::new(&self.path, "leaves no tool of this API"));
        }
        let mut confirm = Vec::new();
        for (i, n) in self.confirm.iter().enumerate() {
            match kept.iter().find(|t| matches(n, t)) {
                Some(t) => confirm.push(t.name.clone()),
                None => {
                    return Err(ConfigError::new(
                        &format!("{}.confirm[{i}]", self.path),
                        format!("'{n}' is not allowed by the policy"),
                    ))
                }
            }
        }
        Ok((kept, confirm))
    }
}

fn matches(name: &str, tool: &Tool) -> bool {
    name == tool.name || sanitized_name(name) == tool.name
}

fn names(f: &mut Fields<'_>, key: &'static str) -> Result<Vec<String>, ConfigError> {
    let Some(v) = f.get(key) else {
        return Ok(Vec::new());
    };
    let Value::Array(items) = v else {
        return Err(f.err(key, format!("must be a list of names, found {}", crate::doc::type_name(v))));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item.as_str().map(str::trim) {
            Some(s) if !s.is_empty() => Ok(s.to_string()),
            _ => Err(f.err(&format!("{key}[{i}]"), "must be a non-empty string")),
        })
        .collect()
}
