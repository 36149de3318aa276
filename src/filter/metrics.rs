//! The plugin's metrics in Envoy's stats. Envoy prefixes Wasm metrics with `wasmcustom.`; the tags
//! are segments `.<tag>.<value>` of the name, which `stats_config.stats_tags` extracts (README), so
//! that `/stats/prometheus` shows `api_agent_requests{mode="react",outcome="answered"}`. Tool names
//! come from the configuration only (the model's names are counted as `_unknown_`), so cardinality
//! stays bounded.

use super::abi::{self, Metric};
use crate::agent::{mode_name, Report};
use std::cell::RefCell;
use std::collections::BTreeMap;

thread_local! {
    /// Metric ids by name, defined on first use.
    static IDS: RefCell<BTreeMap<String, u32>> = const { RefCell::new(BTreeMap::new()) };
}

fn id(kind: Metric, name: String) -> Option<u32> {
    if let Some(id) = IDS.with(|ids| ids.borrow().get(&name).copied()) {
        return Some(id);
    }
    match abi::define_metric(kind, &name) {
        Ok(id) => {
            IDS.with(|ids| ids.borrow_mut().insert(name, id));
            Some(id)
        }
        Err(s) => {
            log::warn!("defining metric {name} failed: {s:?}");
            None
        }
    }
}

fn count(name: String, by: u64) {
    if by == 0 {
        return;
    }
    if let Some(id) = id(Metric::Counter, name) {
        let _ = abi::increment_metric(id, i64::try_from(by).unwrap_or(i64::MAX));
    }
}

fn record(name: String, value: u64) {
    if let Some(id) = id(Metric::Histogram, name) {
        let _ = abi::record_metric(id, value);
    }
}

/// Every metric of one finished request.
pub fn emit(r: &Report) {
    let mode = mode_name(r.mode);
    count(format!("api_agent.requests.mode.{mode}.outcome.{}", r.outcome.as_str()), 1);
    count(format!("api_agent.llm_turns.mode.{mode}"), r.llm_turns.into());
    count(format!("api_agent.llm_retries.mode.{mode}"), r.llm_retries.into());
    count(format!("api_agent.malformed_outputs.mode.{mode}"), r.malformed.into());
    count(format!("api_agent.json_retries.mode.{mode}"), r.json_retries.into());
    record(format!("api_agent.turns_per_request.mode.{mode}"), r.llm_turns.into());
    record(format!("api_agent.request_duration_ms.mode.{mode}"), r.total_ms());
    for ms in &r.llm_ms {
        record(format!("api_agent.llm_call_duration_ms.mode.{mode}"), *ms);
    }
    for t in &r.tools {
        count(format!("api_agent.tool_calls.tool.{}.class.{}", t.name, t.class.as_str()), 1);
        if t.status.is_some() || t.ms > 0 {
            record(format!("api_agent.tool_call_duration_ms.tool.{}", t.name), t.ms);
        }
    }
}

/// One MCP `tools/list` run of the server `apis[api]`: `listed`, `failed` (kept its last tools) or
/// `refused` (the list did not load).
pub fn mcp_listing(api: usize, outcome: &str) {
    count(format!("api_agent.mcp_listings.api.{api}.outcome.{outcome}"), 1);
}
