//! Tool search over a large catalog: the index (`index`), its words (`text`), and which tools a
//! request is offered within a byte budget (`pick`). Lexical only (BM25F over the operator's own
//! text): no model file, the same in the Wasm VM as on the host.

mod index;
mod text;

pub use index::Index;
pub use text::words;

/// The built-in tool that searches the whole catalog when the offered tools do not fit.
pub const FIND_TOOLS: &str = "find_tools";

/// What a request's tools may take: `bytes` of rendered tool text, `max_tools` tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub bytes: usize,
    pub max_tools: usize,
}

/// The tools offered: the pinned ones first (always, whatever they cost), then the ranked ones, best
/// first, each that still fits the budget. `costs[i]`: tool `i`'s rendered bytes.
pub fn pick(ranked: &[(u32, f32)], pinned: &[u32], costs: &[u32], budget: Budget) -> Vec<u32> {
    let mut out: Vec<u32> = pinned.iter().copied().take(budget.max_tools).collect();
    let mut left = budget.bytes.saturating_sub(out.iter().map(|&i| cost(costs, i)).sum());
    for &(doc, _) in ranked {
        if out.len() >= budget.max_tools || left == 0 {
            break;
        }
        let c = cost(costs, doc);
        if c <= left && !out.contains(&doc) {
            out.push(doc);
            left -= c;
        }
    }
    out
}

fn cost(costs: &[u32], i: u32) -> usize {
    costs.get(i as usize).map_or(0, |&c| c as usize)
}

/// `find_tools`'s description, in the prompt's language, for a catalog of `total` tools.
pub fn find_tools_description(chinese: bool, total: usize) -> String {
    if chinese {
        format!("在本网关的全部 {total} 个工具中搜索能完成所需操作的工具（当上面列出的工具都不合适时）。返回最匹配的工具及其参数；之后按名称调用它们。")
    } else {
        format!(
            "Search all {total} tools of this gateway for the ones that do what you need, when none of the tools listed here fits. Returns the best matches with their parameters; call them by name afterwards."
        )
    }
}

/// `find_tools`'s arguments: one string.
pub fn find_tools_schema(chinese: bool) -> serde_json::Value {
    let what = if chinese { "你想做什么，用几个词描述" } else { "what you want to do, in a few words" };
    serde_json::json!({"type": "object", "properties": {"query": {"type": "string", "description": what}}, "required": ["query"]})
}
