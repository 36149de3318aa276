//! The configuration's error: the path of the field at fault (`apis[1].apiProvider.servicePort`) and
//! what is wrong with it.

use crate::tools::mcp::ListError;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(path: &str, message: impl Into<String>) -> Self {
        ConfigError { path: path.to_string(), message: message.into() }
    }

    /// The same error inside the object at `prefix` (`_rules_[1]` + `llm.path`).
    pub fn under(self, prefix: &str) -> Self {
        let path = if self.path.is_empty() { prefix.to_string() } else { format!("{prefix}.{}", self.path) };
        ConfigError { path, message: self.message }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

impl From<ListError> for ConfigError {
    fn from(e: ListError) -> Self {
        ConfigError { path: e.path, message: e.message }
    }
}
