//! What CONFIG holds, one plugin configuration at a time: its bytes as the filter would receive them, or
//! why there are none. Envoy configurations (`envoy`) and Kubernetes resources (`k8s`) are read into it,
//! and `source` collects them from the file.

use serde_json::Value;

/// One plugin configuration found in CONFIG.
#[derive(Debug)]
pub struct Found {
    /// Where it is: the file (and document), then the filter or resource inside it.
    pub label: String,
    pub what: What,
    /// Higress: `_rules_[i]` was built from `matchRules[origins[i]]` (disabled rules are left out).
    pub origins: Vec<usize>,
}

#[derive(Debug)]
pub enum What {
    /// The bytes of the filter's configuration.
    Config(Vec<u8>),
    /// Something that stops the configuration before the filter sees it (a controller would refuse it).
    Unusable(String),
    /// Not a plugin configuration (another Kubernetes resource, a disabled plugin).
    Skipped(String),
}

impl Found {
    pub fn config(label: String, bytes: Vec<u8>) -> Self {
        Found { label, what: What::Config(bytes), origins: Vec::new() }
    }

    pub fn unusable(label: String, why: impl Into<String>) -> Self {
        Found { label, what: What::Unusable(why.into()), origins: Vec::new() }
    }

    pub fn skipped(label: String, why: impl Into<String>) -> Self {
        Found { label, what: What::Skipped(why.into()), origins: Vec::new() }
    }

    /// A configuration built as a JSON value (what a controller serializes for Envoy).
    pub fn value(label: String, value: &Value) -> Self {
        Found::config(label, value.to_string().into_bytes())
    }
}
