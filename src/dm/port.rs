//! The host-neutral layer's view of the dynamic module: `Port` and `MetricSink` over a stream's
//! filter in Envoy.

use super::abi::{Attribute, HeaderMap};
use super::envoy::Envoy;
use crate::agent::SummaryValue;
use crate::config::SummaryForms;
use crate::host::metrics::{Kind, MetricSink, Metrics};
use crate::host::port::SUMMARY_NAMESPACE;
use crate::host::summary;
use crate::host::{Attr, Headers, Port};

fn map(h: Headers) -> HeaderMap {
    match h {
        Headers::Request => HeaderMap::Request,
        Headers::Response => HeaderMap::Response,
    }
}

impl Port for Envoy {
    fn header(&self, h: Headers, name: &str) -> Option<String> {
        Envoy::header(*self, map(h), name)
    }

    fn set_header(&self, h: Headers, name: &str, value: Option<&str>) -> bool {
        Envoy::set_header(*self, map(h), name, value)
    }

    fn attribute(&self, attr: Attr) -> Option<String> {
        match attr {
            Attr::RouteName => Envoy::attribute(*self, Attribute::XdsRouteName),
            Attr::ClusterName => Envoy::attribute(*self, Attribute::XdsClusterName),
        }
    }

    fn local_reply(&self, status: u16, headers: &[(&str, &str)], body: &[u8]) {
        self.send_response(status, headers, body, "api_agent");
    }

    fn set_summary(&self, fields: &[(&'static str, SummaryValue)], forms: SummaryForms) {
        summary::write(self, SUMMARY_NAMESPACE, fields, forms);
    }

    fn traced(&self) -> bool {
        self.is_traced()
    }
}

/// Metrics are the stream configuration's, with real labels; the id is Envoy's and says its kind.
#[derive(Debug, Clone, Copy)]
pub struct StatId {
    id: usize,
    histogram: bool,
}

/// A stream's metrics: counters through its configuration's batch when there is one (`dm::tally`),
/// histograms straight to Envoy.
pub struct Metered<'a> {
    pub envoy: Envoy,
    pub tally: Option<&'a super::tally::Tally>,
}

impl MetricSink for Metered<'_> {
    type Id = StatId;

    fn add(&self, id: StatId, labels: &[&str], by: u64) {
        let batched = !id.histogram && self.tally.is_some_and(|t| t.add(id.id, labels, by));
        if !batched {
            self.envoy.metric(id.histogram, id.id, labels, by);
        }
    }

    fn record(&self, id: StatId, labels: &[&str], value: u64) {
        self.envoy.metric(id.histogram, id.id, labels, value);
    }
}

/// Every metric of the catalogue defined on the configuration (Envoy wants that on the main thread,
/// when the configuration loads).
pub fn define(cfg: super::envoy::EnvoyConfig) -> Metrics<StatId> {
    Metrics::define(|m| {
        let histogram = m.kind == Kind::Histogram;
        let id = cfg.define(histogram, &format!("api_agent_{}", m.name), m.labels)?;
        Some(StatId { id, histogram })
    })
}
