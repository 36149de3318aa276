//! A configuration with one MCP server's tools replaced by a new `tools/list` result, the catalog
//! rebuilt in configuration order and the prompt and native `tools` rendered again: what the host
//! swaps in, in one step, when it has listed a server's tools.

use super::policy::Policy;
use super::{Config, ConfigError};
use crate::tools::{mcp, Catalog, Tool};
use serde_json::Value;

/// What it takes to turn a server's `tools/list` result into its tools again.
#[derive(Debug, Clone)]
pub struct McpSource {
    /// Its `apis[]` index.
    pub api: usize,
    /// The endpoint (`mcpServer.path`).
    pub path: String,
    /// `mcpServer.tools`.
    pub allow: Vec<String>,
    pub policy: Option<Policy>,
    /// The field a list stands for, for errors (`apis[1].mcpServer.toolsList`).
    pub field: String,
    /// The operator pinned the list (`toolsList`): the host does not list the server.
    pub pinned: bool,
}

impl Config {
    /// The MCP servers the host lists (no pinned `toolsList`).
    pub fn listed_servers(&self) -> impl Iterator<Item = &McpSource> {
        self.mcp.iter().filter(|s| !s.pinned)
    }

    /// This configuration with the tools of the MCP server `apis[api]` taken from `list` (a
    /// `tools/list` result). `Err` (a name clash, a policy name the list lacks, too many tools for
    /// native mode): the caller keeps the configuration it has.
    pub fn with_mcp_tools(&self, api: usize, list: &Value) -> Result<Config, ConfigError> {
        let Some(src) = self.mcp.iter().find(|s| s.api == api) else {
            return Err(ConfigError::new(&format!("apis[{api}]"), "not an MCP server"));
        };
        let loaded = mcp::load(list, &src.allow, &src.path, api, &src.field)?;
        let (tools, confirm) = match &src.policy {
            Some(p) => p.apply(loaded.tools)?,
            None => (loaded.tools, Vec::new()),
        };
        let mut catalog = Catalog::default();
        for i in 0..self.apis.len() {
            let of_i: Vec<Tool> = match i == api {
                true => tools.clone(),
                false => self.tools.iter().filter(|t| t.api == i).cloned().collect(),
            };
            // The entry whose tool clashes, naming the one that has the name already.
            let at = if i == api { src.field.clone() } else { format!("apis[{i}]") };
            catalog.extend(of_i).map_err(|e| ConfigError::new(&at, e))?;
        }
        let mut cfg = self.clone();
        let old: Vec<&str> = self.tools.iter().filter(|t| t.api == api).map(|t| t.name.as_str()).collect();
        cfg.confirm.retain(|n| !old.contains(&n.as_str()));
        cfg.confirm.extend(confirm);
        cfg.tools = catalog;
        // Too many tools for native mode with `select: all`, a tool named `find_tools`: refused.
        cfg.render_tools(&src.field)?;
        Ok(cfg)
    }
}
