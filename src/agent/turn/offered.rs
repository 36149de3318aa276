//! What one request offers of a large catalog (`offer`): the rendered prompt or `tools`, and in
//! native mode the tools it holds, to which `find_tools` appends.

use crate::config::Config;

/// What this request offers of a large catalog.
#[derive(Debug)]
pub struct Offered {
    /// ReAct: the system prompt with the offered tools, as JSON string contents.
    pub prompt_json: String,
    /// Native: the gateway's `tools` as JSON text: the offered tools, `find_tools`, then those found.
    pub tools_json: String,
    /// Native: catalog positions of the tools in `tools_json`, in order.
    pub(super) native: Vec<u32>,
    /// Native: how many of them the first turn offered (`find_tools` follows them).
    pub(super) first: usize,
    /// Native: how many of the gateway's tools `tools` may hold (with the client's, 128).
    pub(super) max_native: usize,
}

impl Offered {
    /// Native: the tools found go at the end of `tools`, for the next turn, within the limit.
    pub(super) fn add(&mut self, cfg: &Config, found: &[u32]) {
        let before = self.native.len();
        for &i in found {
            if self.native.len() < self.max_native && !self.native.contains(&i) {
                self.native.push(i);
            }
        }
        if self.native.len() > before {
            self.tools_json = native_json(cfg, &self.native, self.first);
        }
    }
}

/// `text` as JSON string contents, written into one allocation of about the right size.
pub(super) fn escaped(text: &str) -> String {
    let mut out = Vec::with_capacity(text.len() + text.len() / 8 + 2);
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, text);
    let inner = out.get(1..out.len().saturating_sub(1)).unwrap_or_default();
    std::str::from_utf8(inner).map(str::to_string).unwrap_or_default()
}

/// `tools` as JSON: the chosen tools, `find_tools` after those first offered, then those found.
pub(super) fn native_json(cfg: &Config, chosen: &[u32], first: usize) -> String {
    let tools: Vec<_> = chosen.iter().filter_map(|&i| cfg.tools.at(i as usize)).collect();
    let (offered, found) = tools.split_at(first.min(tools.len()));
    cfg.native_json_with(offered, found)
}
