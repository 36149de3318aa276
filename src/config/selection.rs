//! `tools`: which of a large catalog's tools each request is offered. Below the threshold (count and
//! bytes) every tool is offered, as before; above it (`select: auto`), the catalog index ranks the
//! tools for the conversation and the first turn offers the best that fit `maxPromptBytes`, the
//! `pinned` ones and `find_tools`. `select: all` offers every tool whatever the size.

use super::fields::Fields;
use super::{Config, ConfigError, Mode, MAX_DESCRIPTION_CHARS, MAX_NATIVE_TOOLS};
use crate::doc::{self, json_string_contents};
use crate::openai::message::{to_value, ChatTool};
use crate::prompt::react::Entry;
use crate::tools::search::{find_tools_description, find_tools_schema, Index, FIND_TOOLS};
use crate::tools::{Catalog, Tool};
use serde_json::Value;
use std::borrow::Cow;

/// Catalogs of more tools than this get a selection (`tools.threshold`).
pub const DEFAULT_THRESHOLD: usize = 24;
/// The offered tools' text per request, in bytes as sent (`tools.maxPromptBytes`): with the
/// instructions and `find_tools`, a first turn of about 13 KB whatever the catalog's size.
pub const DEFAULT_MAX_PROMPT_BYTES: usize = 10_240;

/// `tools`, as the operator wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// `select: all`: every tool on every request (the behaviour before selection existed).
    pub all: bool,
    pub pinned: Vec<String>,
    pub max_prompt_bytes: usize,
    pub threshold: usize,
}

impl Default for Selection {
    fn default() -> Self {
        Selection {
            all: false,
            pinned: Vec::new(),
            max_prompt_bytes: DEFAULT_MAX_PROMPT_BYTES,
            threshold: DEFAULT_THRESHOLD,
        }
    }
}

/// A catalog too large to offer whole: its index, each tool's cost, the pinned tools.
#[derive(Debug, Clone)]
pub struct Offer {
    pub index: Index,
    /// Each tool's bytes in the request as the mode renders it (ReAct: its prompt entry, escaped, and
    /// its name in the list of valid actions; native: its `tools` element).
    pub costs: Vec<u32>,
    /// Catalog positions of the pinned tools.
    pub pinned: Vec<u32>,
    pub max_prompt_bytes: usize,
    /// `find_tools`'s description and arguments, in the prompt's language (made once, not per request).
    pub find_description: String,
    pub find_schema: Value,
}

pub fn parse_selection(root: &mut Fields<'_>) -> Result<Selection, ConfigError> {
    let Some(mut f) = root.opt_object("tools")? else {
        return Ok(Selection::default());
    };
    let all = match f.opt_str("select")?.as_deref() {
        None | Some("auto") => false,
        Some("all") => true,
        Some(other) => return Err(f.err("select", format!("must be 'auto' or 'all', found '{other}'"))),
    };
    let mut s = Selection { all, ..Selection::default() };
    if let Some(v) = f.get("pinned") {
        let Value::Array(items) = v else {
            return Err(f.err("pinned", format!("must be a list of tool names, found {}", doc::type_name(v))));
        };
        for (i, item) in items.iter().enumerate() {
            match item.as_str().map(str::trim) {
                Some(name) if !name.is_empty() => s.pinned.push(name.to_string()),
                _ => return Err(f.err(&format!("pinned[{i}]"), "must be a non-empty tool name")),
            }
        }
    }
    s.max_prompt_bytes = f.opt_uint("maxPromptBytes", 1024, 1 << 24)?.map_or(s.max_prompt_bytes, |n| n as usize);
    s.threshold = f.opt_uint("threshold", 0, 100_000)?.map_or(s.threshold, |n| n as usize);
    f.deny_unknown()?;
    Ok(s)
}

impl Config {
    /// Renders what requests carry of the catalog: every tool (a small catalog, or `select: all`), or,
    /// for a large one, the index and what every request carries whatever its question (the pinned
    /// tools and `find_tools`). At load and after every MCP listing. `at`: the field a catalog error
    /// names.
    pub(super) fn render_tools(&mut self, at: &str) -> Result<(), ConfigError> {
        self.offer = self.offer_for(at)?;
        let (prompt, native) = match &self.offer {
            None => (self.template.render(&self.tools), native_tools(&self.tools)),
            Some(o) => {
                let pinned: Vec<&Tool> = o.pinned.iter().filter_map(|&i| self.tools.at(i as usize)).collect();
                (self.prompt_with(&pinned), self.native_with(&pinned))
            }
        };
        self.react_prompt_json = json_string_contents(&prompt);
        self.react_prompt = prompt;
        self.native_tools_json = Value::Array(native.clone()).to_string();
        self.native_tools = native;
        Ok(())
    }

    fn offer_for(&self, at: &str) -> Result<Option<Offer>, ConfigError> {
        let s = &self.selection;
        let mut pinned = Vec::new();
        for (i, name) in s.pinned.iter().enumerate() {
            match self.tools.position(name) {
                Some(p) => pinned.push(p as u32),
                // A server the host lists may bring it later.
                None if self.listed_servers().next().is_some() => {
                    log::warn!("tools.pinned[{i}]: no tool is named '{name}' (yet: an MCP listing may bring it)");
                }
                None => {
                    return Err(ConfigError::new(&format!("tools.pinned[{i}]"), format!("no tool is named '{name}'")))
                }
            }
        }
        let native = self.mode == Mode::Native;
        if s.all {
            if native && self.tools.len() > MAX_NATIVE_TOOLS {
                let why = format!(
                    "mode 'native' allows at most {MAX_NATIVE_TOOLS} tools (OpenAI's limit) with tools.select 'all'; these APIs define {} (tools.select 'auto' offers each request a selection)",
                    self.tools.len()
                );
                return Err(ConfigError::new(at, why));
            }
            return Ok(None);
        }
        let costs: Vec<u32> = self.tools.iter().map(|t| self.cost(t) as u32).collect();
        let total: usize = costs.iter().map(|&c| c as usize).sum();
        if self.tools.len() <= s.threshold && total <= s.max_prompt_bytes {
            return Ok(None);
        }
        if self.tools.get(FIND_TOOLS).is_some() {
            let why = format!("a tool is named '{FIND_TOOLS}', the name of the built-in search of large catalogs; rename it, or set tools.select 'all'");
            return Err(ConfigError::new(at, why));
        }
        // Made anew, not taken from an earlier offer: the description counts this catalog's tools.
        let chinese = self.template.chinese;
        let (find_description, find_schema) =
            (find_tools_description(chinese, self.tools.len()), find_tools_schema(chinese));
        let index = Index::build(&self.tools);
        Ok(Some(Offer { index, costs, pinned, max_prompt_bytes: s.max_prompt_bytes, find_description, find_schema }))
    }

    /// A tool's bytes as this configuration's mode sends it.
    fn cost(&self, t: &Tool) -> usize {
        match self.mode {
            Mode::React => json_string_contents(&self.template.entry(&Entry::of(t))).len() + t.name.len() + 4,
            Mode::Native => {
                let mut out = Vec::new();
                write_native_tool(&mut out, &t.name, &t.description, &t.schema);
                out.len() + 1
            }
        }
    }

    /// The ReAct prompt with `tools`, then `find_tools`.
    pub fn prompt_with(&self, tools: &[&Tool]) -> String {
        let (description, schema) = self.find_tools();
        let mut entries: Vec<Entry<'_>> = tools.iter().map(|t| Entry::of(t)).collect();
        entries.push(Entry { name: FIND_TOOLS, description: &description, schema: &schema });
        self.template.render_entries(&entries)
    }

    /// Native `tools` with `tools`, then `find_tools`.
    pub fn native_with(&self, tools: &[&Tool]) -> Vec<Value> {
        let (description, schema) = self.find_tools();
        let mut out: Vec<Value> = tools.iter().map(|t| native_tool(t)).collect();
        let description = Value::String(description.into_owned());
        out.push(to_value(&ChatTool::function(FIND_TOOLS, Some(&description), Some(&schema))));
        out
    }

    /// The same as JSON text, with `found` after `find_tools`: written directly, without copying each
    /// schema into a tree first (a selection is written per request).
    pub fn native_json_with(&self, offered: &[&Tool], found: &[&Tool]) -> String {
        let (description, schema) = self.find_tools();
        let mut out = Vec::with_capacity(4096);
        out.push(b'[');
        for t in offered {
            write_native_tool(&mut out, &t.name, &t.description, &t.schema);
            out.push(b',');
        }
        write_native_tool(&mut out, FIND_TOOLS, &description, &schema);
        for t in found {
            out.push(b',');
            write_native_tool(&mut out, &t.name, &t.description, &t.schema);
        }
        out.push(b']');
        String::from_utf8(out).unwrap_or_default()
    }

    /// `find_tools`'s description and schema: the selection's own, made once at load, else made now
    /// (`prompt_with` for the CLI and tests of a catalog that is offered whole).
    fn find_tools(&self) -> (Cow<'_, str>, Cow<'_, Value>) {
        if let Some(o) = &self.offer {
            return (Cow::Borrowed(o.find_description.as_str()), Cow::Borrowed(&o.find_schema));
        }
        let chinese = self.template.chinese;
        (Cow::Owned(find_tools_description(chinese, self.tools.len())), Cow::Owned(find_tools_schema(chinese)))
    }
}

/// One tool of native `tools` as JSON, the same text as `native_tool`'s (written by hand: a derived
/// serializer costs the module more).
fn write_native_tool(out: &mut Vec<u8>, name: &str, description: &str, parameters: &Value) {
    // Writing into a Vec cannot fail.
    out.extend_from_slice(br#"{"type":"function","function":{"name":"#);
    let _ = serde_json::to_writer(&mut *out, name);
    out.extend_from_slice(br#","description":"#);
    let _ = serde_json::to_writer(&mut *out, &*cut(description));
    out.extend_from_slice(br#","parameters":"#);
    let _ = serde_json::to_writer(&mut *out, parameters);
    out.extend_from_slice(b"}}");
}

/// Descriptions longer than OpenAI accepts are cut.
fn cut(description: &str) -> std::borrow::Cow<'_, str> {
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        description.chars().take(MAX_DESCRIPTION_CHARS - 1).chain(std::iter::once('…')).collect()
    } else {
        std::borrow::Cow::Borrowed(description)
    }
}

/// `{"type": "function", "function": {name, description, parameters}}` per tool.
pub fn native_tools(tools: &Catalog) -> Vec<Value> {
    tools.iter().map(native_tool).collect()
}

/// One tool as native `tools` lists it; descriptions longer than OpenAI accepts are cut (names
/// already fit: see `openapi::tool_name`).
pub fn native_tool(t: &Tool) -> Value {
    let description = Value::String(cut(&t.description).into());
    to_value(&ChatTool::function(&t.name, Some(&description), Some(&t.schema)))
}
