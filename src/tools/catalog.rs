//! All configured tools, in configuration then source order, looked up by name.

use super::{Binding, Tool};
use crate::vec_map::VecMap;

#[derive(Debug, Clone, Default)]
pub struct Catalog {
    tools: Vec<Tool>,
    index: VecMap<String, usize>,
}

impl Catalog {
    /// Adds tools; a name already taken is refused, naming the `apis[]` entry that has it.
    pub fn extend(&mut self, tools: Vec<Tool>) -> Result<(), String> {
        for tool in tools {
            if let Some(&i) = self.index.get(&tool.name) {
                // Both entries are named: the operator renames or filters one of them.
                return Err(match tool.binding {
                    Binding::OpenApi(_) => format!(
                        "OpenAPI duplicate-tool-name: tool '{}' is already defined by apis[{}]",
                        tool.name, self.tools[i].api
                    ),
                    Binding::Mcp(_) => format!(
                        "duplicate-tool-name: MCP tool '{}' of apis[{}] is already defined by apis[{}]",
                        tool.name, tool.api, self.tools[i].api
                    ),
                });
            }
            self.index.insert(tool.name.clone(), self.tools.len());
            self.tools.push(tool);
        }
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.index.get(name).map(|&i| &self.tools[i])
    }

    /// The tool at catalog position `i` (the catalog index's documents).
    pub fn at(&self, i: usize) -> Option<&Tool> {
        self.tools.get(i)
    }

    /// The catalog position of the tool named `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Tool> {
        self.tools.iter()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}
