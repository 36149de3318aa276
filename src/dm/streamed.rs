//! Streamed callouts in flight (live streaming): their head and body as they come. The agent reads a
//! 2xx SSE reply from its data as it arrives, so that body is not kept a second time.

use crate::host::port::split_status;
use crate::openai::answer;
use std::collections::BTreeMap;

/// The most a streamed callout's reply may carry: far above any real LLM turn (an SSE turn is several
/// times its text), and above what this Envoy lets a plain callout buffer in the fault suite (28 MiB).
const STREAMED_REPLY_LIMIT: usize = 64 << 20;

/// A streamed callout: its head and body so far.
struct Streamed {
    status: Option<u16>,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Bytes received, kept or not.
    received: usize,
    sse: bool,
}

/// A streamed callout that ended: its whole reply, as far as it came.
pub struct Ended {
    pub status: Option<u16>,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Envoy's stream ids → the calls they carry.
#[derive(Default)]
pub struct Streams(BTreeMap<u64, Streamed>);

impl Streams {
    pub fn insert(&mut self, sid: u64) {
        let s = Streamed { status: None, headers: Vec::new(), body: Vec::new(), received: 0, sse: false };
        self.0.insert(sid, s);
    }

    pub fn has(&self, sid: u64) -> bool {
        self.0.contains_key(&sid)
    }

    /// The reply's head: its status and headers (`:status` taken out), kept for the end.
    pub fn head(&mut self, sid: u64, headers: Vec<(String, String)>) -> (Option<u16>, Vec<(String, String)>) {
        let (status, headers) = split_status(headers);
        if let Some(s) = self.0.get_mut(&sid) {
            let ok = status.is_some_and(|s| (200..300).contains(&s));
            s.sse = ok
                && headers.iter().any(|(k, v)| k == "content-type" && v.to_ascii_lowercase().starts_with(answer::SSE));
            s.status = status;
            s.headers.clone_from(&headers);
        }
        (status, headers)
    }

    /// More of the body; false when the reply went over the limit (the stream is forgotten then).
    pub fn data(&mut self, sid: u64, data: &[u8]) -> bool {
        let over = self.0.get_mut(&sid).is_some_and(|s| {
            s.received += data.len();
            if !s.sse {
                s.body.extend_from_slice(data);
            }
            s.received > STREAMED_REPLY_LIMIT
        });
        if over {
            self.0.remove(&sid);
        }
        !over
    }

    /// The stream ended: its whole reply, read as a callout's.
    pub fn end(&mut self, sid: u64) -> Option<Ended> {
        let s = self.0.remove(&sid)?;
        Some(Ended { status: s.status, headers: s.headers, body: s.body })
    }

    /// Forgets a stream (reset, or no longer wanted).
    pub fn remove(&mut self, sid: u64) {
        self.0.remove(&sid);
    }

    /// Every stream still open, forgotten.
    pub fn take_all(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.0).into_keys().collect()
    }
}
