//! The plugin's metrics as Envoy stats with real labels (the Wasm build encodes them in the name).
//! Envoy defines metrics per filter configuration, on the main thread: all of them are defined when the
//! configuration loads, and a stream records into its configuration's.

use super::ffi::{Envoy, EnvoyConfig};
use crate::agent::{mode_name, Report};

/// Envoy's ids of the metrics of one configuration; `None`: Envoy refused to define it.
#[derive(Debug, Default)]
pub struct Ids {
    requests: Option<usize>,
    llm_turns: Option<usize>,
    llm_retries: Option<usize>,
    malformed_outputs: Option<usize>,
    json_retries: Option<usize>,
    turns_per_request: Option<usize>,
    request_duration_ms: Option<usize>,
    llm_call_duration_ms: Option<usize>,
    tool_calls: Option<usize>,
    tool_call_duration_ms: Option<usize>,
}

const COUNTER: bool = false;
const HISTOGRAM: bool = true;

impl Ids {
    pub fn define(cfg: EnvoyConfig) -> Ids {
        let def = |histogram: bool, name: &str, labels: &[&str]| {
            let id = cfg.define(histogram, name, labels);
            if id.is_none() {
                log::warn!("defining metric {name} failed");
            }
            id
        };
        Ids {
            requests: def(COUNTER, "api_agent_requests", &["mode", "outcome"]),
            llm_turns: def(COUNTER, "api_agent_llm_turns", &["mode"]),
            llm_retries: def(COUNTER, "api_agent_llm_retries", &["mode"]),
            malformed_outputs: def(COUNTER, "api_agent_malformed_outputs", &["mode"]),
            json_retries: def(COUNTER, "api_agent_json_retries", &["mode"]),
            turns_per_request: def(HISTOGRAM, "api_agent_turns_per_request", &["mode"]),
            request_duration_ms: def(HISTOGRAM, "api_agent_request_duration_ms", &["mode"]),
            llm_call_duration_ms: def(HISTOGRAM, "api_agent_llm_call_duration_ms", &["mode"]),
            tool_calls: def(COUNTER, "api_agent_tool_calls", &["tool", "class"]),
            tool_call_duration_ms: def(HISTOGRAM, "api_agent_tool_call_duration_ms", &["tool"]),
        }
    }

    /// Every metric of one finished request (tool names come from the configuration only).
    pub fn emit(&self, envoy: Envoy, r: &Report) {
        let mode = mode_name(r.mode);
        let count = |id: Option<usize>, labels: &[&str], by: u64| {
            if let (Some(id), true) = (id, by > 0) {
                envoy.metric(COUNTER, id, labels, by);
            }
        };
        let record = |id: Option<usize>, labels: &[&str], value: u64| {
            if let Some(id) = id {
                envoy.metric(HISTOGRAM, id, labels, value);
            }
        };
        count(self.requests, &[mode, r.outcome.as_str()], 1);
        count(self.llm_turns, &[mode], r.llm_turns.into());
        count(self.llm_retries, &[mode], r.llm_retries.into());
        count(self.malformed_outputs, &[mode], r.malformed.into());
        count(self.json_retries, &[mode], r.json_retries.into());
        record(self.turns_per_request, &[mode], r.llm_turns.into());
        record(self.request_duration_ms, &[mode], r.total_ms());
        for ms in &r.llm_ms {
            record(self.llm_call_duration_ms, &[mode], *ms);
        }
        for t in &r.tools {
            count(self.tool_calls, &[&t.name, t.class.as_str()], 1);
            if t.status.is_some() || t.ms > 0 {
                record(self.tool_call_duration_ms, &[&t.name], t.ms);
            }
        }
    }
}
