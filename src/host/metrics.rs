//! The plugin's metrics, one catalogue for both hosts: each metric is defined once per plugin
//! instance and incremented by id. The Proxy-Wasm build encodes labels in the name
//! (`api_agent.requests.mode.react.outcome.answered`, split again by `stats_tags`); the dynamic module
//! defines real labels (`api_agent_requests{mode,outcome}`). Tool names come from the configuration
//! only (the model's names are counted as `_unknown_`), so cardinality stays bounded.

use crate::agent::{mode_name, Report};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Histogram,
}

/// One metric: its name without the host's prefix, kind and label names.
#[derive(Debug)]
pub struct Metric {
    pub name: &'static str,
    pub kind: Kind,
    pub labels: &'static [&'static str],
}

const fn metric(name: &'static str, kind: Kind, labels: &'static [&'static str]) -> Metric {
    Metric { name, kind, labels }
}

const MODE: &[&str] = &["mode"];

/// Every metric, in the order of `Id`.
pub const CATALOGUE: [Metric; 14] = [
    metric("requests", Kind::Counter, &["mode", "outcome"]),
    metric("llm_turns", Kind::Counter, MODE),
    metric("llm_retries", Kind::Counter, MODE),
    metric("malformed_outputs", Kind::Counter, MODE),
    metric("json_retries", Kind::Counter, MODE),
    metric("turns_per_request", Kind::Histogram, MODE),
    metric("request_duration_ms", Kind::Histogram, MODE),
    metric("llm_call_duration_ms", Kind::Histogram, MODE),
    metric("tool_calls", Kind::Counter, &["tool", "class"]),
    metric("tool_call_duration_ms", Kind::Histogram, &["tool"]),
    metric("mcp_listings", Kind::Counter, &["api", "outcome"]),
    metric("tokens_per_request", Kind::Histogram, MODE),
    metric("token_exchanges", Kind::Counter, &["api", "outcome"]),
    metric("policy_decisions", Kind::Counter, &["rule", "decision"]),
];

#[derive(Debug, Clone, Copy)]
enum Id {
    Requests,
    LlmTurns,
    LlmRetries,
    MalformedOutputs,
    JsonRetries,
    TurnsPerRequest,
    RequestDurationMs,
    LlmCallDurationMs,
    ToolCalls,
    ToolCallDurationMs,
    McpListings,
    TokensPerRequest,
    TokenExchanges,
    PolicyDecisions,
}

/// Where a host records metrics; `Id` is the host's handle of one catalogue entry.
pub trait MetricSink {
    type Id: Copy;
    fn add(&self, id: Self::Id, labels: &[&str], by: u64);
    fn record(&self, id: Self::Id, labels: &[&str], value: u64);
}

/// The host's ids of the catalogue's metrics; `None`: the host refused to define it.
#[derive(Debug)]
pub struct Metrics<T>([Option<T>; CATALOGUE.len()]);

impl<T: Copy> Metrics<T> {
    /// Defines every metric once (`define` is the host's call).
    pub fn define(mut define: impl FnMut(&Metric) -> Option<T>) -> Self {
        Metrics(std::array::from_fn(|i| {
            let m = &CATALOGUE[i];
            let id = define(m);
            if id.is_none() {
                log::warn!("defining metric api_agent_{} failed", m.name);
            }
            id
        }))
    }

    fn add<S: MetricSink<Id = T>>(&self, sink: &S, id: Id, labels: &[&str], by: u64) {
        if let (Some(h), true) = (self.0[id as usize], by > 0) {
            sink.add(h, labels, by);
        }
    }

    fn record<S: MetricSink<Id = T>>(&self, sink: &S, id: Id, labels: &[&str], value: u64) {
        if let Some(h) = self.0[id as usize] {
            sink.record(h, labels, value);
        }
    }

    /// Every metric of one finished request.
    pub fn emit<S: MetricSink<Id = T>>(&self, sink: &S, r: &Report) {
        let mode = [mode_name(r.mode)];
        self.add(sink, Id::Requests, &[mode[0], r.outcome.as_str()], 1);
        self.add(sink, Id::LlmTurns, &mode, r.llm_turns.into());
        self.add(sink, Id::LlmRetries, &mode, r.llm_retries.into());
        self.add(sink, Id::MalformedOutputs, &mode, r.malformed.into());
        self.add(sink, Id::JsonRetries, &mode, r.json_retries.into());
        self.record(sink, Id::TurnsPerRequest, &mode, r.llm_turns.into());
        self.record(sink, Id::RequestDurationMs, &mode, r.total_ms());
        if !r.tokens_unread {
            self.record(sink, Id::TokensPerRequest, &mode, r.tokens.total_tokens);
        }
        for ms in &r.llm_ms {
            self.record(sink, Id::LlmCallDurationMs, &mode, *ms);
        }
        for (api, outcome) in &r.exchanges {
            self.add(sink, Id::TokenExchanges, &[&api.to_string(), outcome], 1);
        }
        for (rule, decision) in &r.policy {
            self.add(sink, Id::PolicyDecisions, &[rule, decision], 1);
        }
        for t in &r.tools {
            self.add(sink, Id::ToolCalls, &[&t.name, t.class.as_str()], 1);
            if t.status.is_some() || t.ms > 0 {
                self.record(sink, Id::ToolCallDurationMs, &[&t.name], t.ms);
            }
        }
    }

    /// One MCP `tools/list` run of the server `apis[api]`: `listed`, `failed` (kept its last tools) or
    /// `refused` (the list did not load).
    pub fn mcp_listing<S: MetricSink<Id = T>>(&self, sink: &S, api: usize, outcome: &str) {
        self.add(sink, Id::McpListings, &[&api.to_string(), outcome], 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[derive(Default)]
    struct Sink(RefCell<Vec<String>>);

    impl MetricSink for Sink {
        type Id = usize;
        fn add(&self, id: usize, labels: &[&str], by: u64) {
            self.0.borrow_mut().push(format!("{} {labels:?} +{by}", CATALOGUE[id].name));
        }
        fn record(&self, id: usize, labels: &[&str], value: u64) {
            self.0.borrow_mut().push(format!("{} {labels:?} ={value}", CATALOGUE[id].name));
        }
    }

    #[test]
    fn ids_follow_the_catalogue() {
        let names = [
            (Id::Requests, "requests"),
            (Id::LlmTurns, "llm_turns"),
            (Id::LlmRetries, "llm_retries"),
            (Id::MalformedOutputs, "malformed_outputs"),
            (Id::JsonRetries, "json_retries"),
            (Id::TurnsPerRequest, "turns_per_request"),
            (Id::RequestDurationMs, "request_duration_ms"),
            (Id::LlmCallDurationMs, "llm_call_duration_ms"),
            (Id::ToolCalls, "tool_calls"),
            (Id::ToolCallDurationMs, "tool_call_duration_ms"),
            (Id::McpListings, "mcp_listings"),
            (Id::TokensPerRequest, "tokens_per_request"),
            (Id::TokenExchanges, "token_exchanges"),
            (Id::PolicyDecisions, "policy_decisions"),
        ];
        for (id, name) in names {
            assert_eq!(CATALOGUE[id as usize].name, name);
        }
    }

    #[test]
    fn each_policy_decision_is_counted_by_rule() {
        let metrics = Metrics::define(|m| CATALOGUE.iter().position(|c| c.name == m.name));
        let sink = Sink::default();
        let mut r = Report::new(crate::config::Mode::React, 0);
        r.policy = vec![("viewers".into(), "deny"), ("_guard_".into(), "confirm")];
        metrics.emit(&sink, &r);
        let seen = sink.0.borrow();
        assert!(seen.contains(&"policy_decisions [\"viewers\", \"deny\"] +1".to_string()), "{seen:?}");
        assert!(seen.contains(&"policy_decisions [\"_guard_\", \"confirm\"] +1".to_string()));
    }

    #[test]
    fn tokens_not_said_are_not_recorded_as_zero() {
        let metrics = Metrics::define(|m| CATALOGUE.iter().position(|c| c.name == m.name));
        let tokens = |unread: bool| {
            let sink = Sink::default();
            let mut r = Report::new(crate::config::Mode::Native, 0);
            r.tokens_unread = unread;
            metrics.emit(&sink, &r);
            let seen = sink.0.borrow();
            seen.iter().filter(|l| l.starts_with("tokens_per_request")).cloned().collect::<Vec<_>>()
        };
        // A request that spent no tokens (refused before any turn) spent 0; one whose LLM did not
        // say is unknown, and left out of the histogram.
        assert_eq!(tokens(false), ["tokens_per_request [\"native\"] =0"]);
        assert!(tokens(true).is_empty());
    }

    #[test]
    fn a_refused_metric_is_skipped_and_zero_counts_are_not_sent() {
        let metrics = Metrics::define(|m| {
            (m.name != "llm_turns").then(|| CATALOGUE.iter().position(|c| c.name == m.name)).flatten()
        });
        let sink = Sink::default();
        metrics.mcp_listing(&sink, 3, "listed");
        metrics.add(&sink, Id::LlmTurns, &["react"], 2);
        metrics.add(&sink, Id::LlmRetries, &["react"], 0);
        assert_eq!(*sink.0.borrow(), vec!["mcp_listings [\"3\", \"listed\"] +1".to_string()]);
    }
}
