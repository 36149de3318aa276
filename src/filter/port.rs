//! The host-neutral layer's view of Proxy-Wasm: `Port` for the current stream, `RootPort` for MCP
//! discovery on the root context, and `MetricSink` over Envoy's stats.

use super::abi::{self, Map, Metric};
use crate::agent::SummaryValue;
use crate::config::SummaryForms;
use crate::host::discovery::RootPort;
use crate::host::metrics::{Kind, MetricSink, Metrics, CATALOGUE};
use crate::host::port::Outgoing;
use crate::host::port::SUMMARY_STATE_KEYS;
use crate::host::{Attr, Headers, Port};
use crate::vec_map::VecMap;
use std::cell::RefCell;

/// The stream whose callback runs (Proxy-Wasm's effective context).
pub struct Current;

fn map(h: Headers) -> Map {
    match h {
        Headers::Request => Map::RequestHeaders,
        Headers::Response => Map::ResponseHeaders,
    }
}

/// Milliseconds since the Unix epoch on the host's clock.
pub fn now_ms() -> u64 {
    abi::now_ns().map_or(0, |ns| ns / 1_000_000)
}

/// A header of a map, read as text (lossy: the SDK's `String` getters panicked on non-UTF-8).
pub fn header(map: Map, name: &str) -> Option<String> {
    abi::get_header(map, name).ok().flatten().map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// A property by its Higress name, or by the name Envoy 1.40 fills (`route_name` comes back empty
/// there; `xds.route_name` works). Paths are the ABI's encoding (segments joined by NUL), made once.
fn property(higress: &str, envoy: &str) -> Option<String> {
    [higress, envoy]
        .iter()
        .filter_map(|p| abi::get_property(p).ok().flatten())
        .map(|v| String::from_utf8_lossy(&v).into_owned())
        .find(|v| !v.is_empty())
}

impl Port for Current {
    fn header(&self, h: Headers, name: &str) -> Option<String> {
        header(map(h), name)
    }

    fn set_header(&self, h: Headers, name: &str, value: Option<&str>) -> bool {
        match value {
            Some(v) => abi::set_header(map(h), name, v),
            None => abi::remove_header(map(h), name),
        }
        .is_ok()
    }

    fn attribute(&self, attr: Attr) -> Option<String> {
        match attr {
            Attr::RouteName => property("route_name", "xds\0route_name"),
            Attr::ClusterName => property("cluster_name", "xds\0cluster_name"),
        }
    }

    fn local_reply(&self, status: u16, headers: &[(&str, &str)], body: &[u8]) {
        // Envoy defers the local reply until this callback returns: it does not re-enter.
        if let Err(s) = abi::send_local_response(status, headers, body) {
            log::error!("local reply failed: {s:?}");
        }
    }

    /// Filter state is this host's only form of the summary: always set.
    fn set_summary(&self, fields: &[(&'static str, SummaryValue)], _forms: SummaryForms) {
        for ((_, value), key) in fields.iter().zip(SUMMARY_STATE_KEYS) {
            let path = key.strip_prefix("wasm.").unwrap_or(key);
            if let Err(s) = abi::set_property(path, value.to_string().as_bytes()) {
                log::debug!("setting filter state {key} failed: {s:?}");
                return;
            }
        }
    }
}

/// Envoy's Wasm stats carry no labels: each label value is a segment of the name
/// (`api_agent.requests.mode.react.outcome.answered`), defined on first use. Each id is kept by metric
/// and label values, so that an update after the first looks its id up without making the name.
#[derive(Default)]
pub struct Stats {
    /// Per catalogue metric: the label values (joined by NUL, which no value holds) → Envoy's id.
    ids: RefCell<[VecMap<String, u32>; CATALOGUE.len()]>,
    /// The lookup key being built (kept: no allocation per update).
    key: RefCell<String>,
}

impl Stats {
    /// The catalogue's ids here are its indices: names are made per label values.
    pub fn catalogue() -> Metrics<usize> {
        Metrics::define(|m| CATALOGUE.iter().position(|c| c.name == m.name))
    }

    fn id(&self, metric: usize, labels: &[&str]) -> Option<u32> {
        let m = CATALOGUE.get(metric)?;
        let (Ok(mut key), Ok(mut ids)) = (self.key.try_borrow_mut(), self.ids.try_borrow_mut()) else {
            return None;
        };
        let ids = ids.get_mut(metric)?;
        key.clear();
        for value in labels.iter().take(m.labels.len()) {
            key.push_str(value);
            key.push('\0');
        }
        if let Some(id) = ids.get(key.as_str()) {
            return Some(*id);
        }
        let mut name = format!("api_agent.{}", m.name);
        for (label, value) in m.labels.iter().zip(labels) {
            name.push('.');
            name.push_str(label);
            name.push('.');
            name.push_str(value);
        }
        let kind = if m.kind == Kind::Counter { Metric::Counter } else { Metric::Histogram };
        match abi::define_metric(kind, &name) {
            Ok(id) => {
                ids.insert(key.clone(), id);
                Some(id)
            }
            Err(s) => {
                log::warn!("defining metric {name} failed: {s:?}");
                None
            }
        }
    }
}

impl MetricSink for Stats {
    type Id = usize;

    fn add(&self, metric: usize, labels: &[&str], by: u64) {
        if let Some(id) = self.id(metric, labels) {
            let _ = abi::increment_metric(id, i64::try_from(by).unwrap_or(i64::MAX));
        }
    }

    fn record(&self, metric: usize, labels: &[&str], value: u64) {
        if let Some(id) = self.id(metric, labels) {
            let _ = abi::record_metric(id, value);
        }
    }
}

/// The root context, for discovery's callouts.
pub struct Root<'a> {
    pub stats: &'a Stats,
    pub metrics: &'a Metrics<usize>,
}

impl RootPort for Root<'_> {
    fn callout(&self, call: &Outgoing<'_>) -> Result<u64, String> {
        abi::http_call(call).map(u64::from).map_err(|s| format!("{s:?}"))
    }

    fn now_ms(&self) -> u64 {
        now_ms()
    }

    fn counted(&self, api: usize, outcome: crate::host::discovery::ListingOutcome) {
        self.metrics.mcp_listing(self.stats, api, outcome.as_str());
    }
}
