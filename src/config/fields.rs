//! A reader over one JSON object of the configuration that knows its own path, so that every error
//! names the field (`apis[1].apiProvider.servicePort: required`), and that rejects unknown keys with a
//! hint once all known keys were read.

use super::ConfigError;
use crate::doc::type_name;
use serde_json::{Map, Value};

pub struct Fields<'a> {
    path: String,
    map: &'a Map<String, Value>,
    seen: Vec<&'static str>,
}

impl<'a> Fields<'a> {
    pub fn new(path: impl Into<String>, value: &'a Value) -> Result<Self, ConfigError> {
        let path = path.into();
        match value {
            Value::Object(map) => Ok(Fields { path, map, seen: Vec::new() }),
            other => Err(ConfigError::new(&path, format!("must be an object, found {}", type_name(other)))),
        }
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn child_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    pub fn err(&self, key: &str, msg: impl Into<String>) -> ConfigError {
        ConfigError::new(&self.child_path(key), msg)
    }

    /// The value of `key`, if present and not null; marks the key as known.
    pub fn get(&mut self, key: &'static str) -> Option<&'a Value> {
        self.seen.push(key);
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub fn required(&mut self, key: &'static str) -> Result<&'a Value, ConfigError> {
        self.get(key).ok_or_else(|| self.err(key, "required"))
    }

    pub fn opt_str(&mut self, key: &'static str) -> Result<Option<String>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.err(key, format!("must be a string, found {}", type_name(other)))),
        }
    }

    /// A string that must be present and not blank.
    pub fn req_str(&mut self, key: &'static str) -> Result<String, ConfigError> {
        match self.opt_str(key)? {
            Some(s) if !s.trim().is_empty() => Ok(s),
            Some(_) => Err(self.err(key, "must not be empty")),
            None => Err(self.err(key, "required")),
        }
    }

    /// A non-blank string, or None when absent or empty (Higress writes `""` for "not set").
    pub fn opt_nonempty(&mut self, key: &'static str) -> Result<Option<String>, ConfigError> {
        Ok(self.opt_str(key)?.filter(|s| !s.trim().is_empty()))
    }

    pub fn opt_bool(&mut self, key: &'static str) -> Result<Option<bool>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(self.err(key, format!("must be true or false, found {}", type_name(other)))),
        }
    }

    /// A whole number in `min..=max`.
    pub fn opt_uint(&mut self, key: &'static str, min: u64, max: u64) -> Result<Option<u64>, ConfigError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        match v.as_u64() {
            Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
            Some(n) => Err(self.err(key, format!("must be between {min} and {max}, found {n}"))),
            None => Err(self.err(key, format!("must be a whole number, found {v}"))),
        }
    }

    pub fn opt_object(&mut self, key: &'static str) -> Result<Option<Fields<'a>>, ConfigError> {
        let path = self.child_path(key);
        self.get(key).map(|v| Fields::new(path, v)).transpose()
    }

    /// Fails on any key that no getter asked for, naming the closest known key.
    pub fn deny_unknown(self) -> Result<(), ConfigError> {
        for key in self.map.keys() {
            if !self.seen.contains(&key.as_str()) {
                let hint = closest(key, &self.seen)
                    .map(|k| format!(" (did you mean '{k}'?)"))
                    .unwrap_or_else(|| format!(" (known keys: {})", self.seen.join(", ")));
                return Err(self.err(key, format!("unknown key{hint}")));
            }
        }
        Ok(())
    }

    /// Keys that no getter asked for; for the root, where unknown keys are tolerated.
    pub fn unknown_keys(&self) -> Vec<String> {
        self.map.keys().filter(|k| !self.seen.contains(&k.as_str())).cloned().collect()
    }
}

fn closest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let lower = key.to_ascii_lowercase();
    known
        .iter()
        .map(|k| (edit_distance(&lower, &k.to_ascii_lowercase()), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance() {
        assert_eq!(edit_distance("servicport", "serviceport"), 1);
        assert_eq!(closest("servicport", &["serviceName", "servicePort"]), Some("servicePort"));
        assert_eq!(closest("zzz", &["serviceName"]), None);
    }
}
