//! The stream protocol, written once for both shims: a shim hands the layer host facts (the request's
//! body, the upstream's body, a callout's reply or failure by the host's token, a wake-up) and gets
//! back what its callback returns; the layer turns each fact into the agent's event, runs the agent's
//! commands through `Host` (`port.rs`), and feeds refused dispatches back as failed calls. A shim never names an
//! agent event, and `Host` has no way back to the layer.

use super::callouts::{self, Lost};
use super::port::{answer_head, Host, Port};
use super::stream_run::{StreamRun, Upstream};
use crate::agent::{Command, Event, Reply};

/// The host facts of a stream, as the layer reads them.
impl StreamRun {
    /// The client's request body, whole.
    pub fn on_request_body<H: Host>(&mut self, host: &mut H, body: &[u8]) -> H::Action {
        self.feed(host, Event::ClientRequest { body })
    }

    /// The held upstream response's body, whole (after `response_head` said `Hold`).
    pub fn on_upstream_body<H: Host>(&mut self, host: &mut H, body: &[u8]) -> H::Action {
        let Upstream { status, headers_sent } = self.upstream.unwrap_or_default();
        self.feed(host, Event::UpstreamReply { status, body, headers_sent })
    }

    /// A callout's whole reply (`status`: `None` when it came without one).
    pub fn on_callout_reply<H: Host>(
        &mut self,
        host: &mut H,
        token: u64,
        status: Option<u16>,
        headers: &[(String, String)],
        body: &[u8],
    ) -> H::Action {
        let Some(id) = self.take_call(token) else {
            return host.holding();
        };
        match (callouts::classify(status, body), status) {
            (None, Some(status)) => self.feed(host, Event::CallReply { id, status, headers, body }),
            (failure, _) => {
                let failure = failure.unwrap_or_else(|| Lost::Reset.failure());
                self.feed(host, Event::CallFailed { id, failure: &failure })
            }
        }
    }

    /// A callout that ended without a reply.
    pub fn on_callout_failed<H: Host>(&mut self, host: &mut H, token: u64, why: Lost) -> H::Action {
        let Some(id) = self.take_call(token) else {
            return host.holding();
        };
        self.feed(host, Event::CallFailed { id, failure: &why.failure() })
    }

    /// A streamed callout's head, while its body is still to come (its end is `on_callout_reply`).
    pub fn on_callout_head<H: Host>(
        &mut self,
        host: &mut H,
        token: u64,
        status: u16,
        headers: &[(String, String)],
    ) -> H::Action {
        match self.calls.get(token) {
            Some(id) => self.feed(host, Event::CallHead { id, status, headers }),
            None => host.holding(),
        }
    }

    /// More of a streamed callout's body.
    pub fn on_callout_data<H: Host>(&mut self, host: &mut H, token: u64, data: &[u8]) -> H::Action {
        match self.calls.get(token) {
            Some(id) if !data.is_empty() => self.feed(host, Event::CallData { id, data }),
            _ => host.holding(),
        }
    }

    /// The wake-up the agent asked for (`wake_at`) is due.
    pub fn on_wake<H: Host>(&mut self, host: &mut H) -> H::Action {
        self.feed(host, Event::Wake)
    }

    /// Feeds one event to the agent and runs what it asks; the result is what the callback returns.
    pub(super) fn feed<H: Host>(&mut self, host: &mut H, event: Event<'_>) -> H::Action {
        let Some(commands) = self.handle(event, host.now_ms()) else {
            return host.passing();
        };
        host.spans(self.take_spans());
        let (action, wake) = self.run(host, commands);
        self.set_wake(wake);
        action
    }

    /// Runs `commands`, and what refused dispatches lead to. Returns the callback's action and the
    /// time of the wake-up the agent asked for last (none: it waits for nothing).
    fn run<H: Host>(&mut self, host: &mut H, mut commands: Vec<Command>) -> (H::Action, Option<u64>) {
        let mut action = host.holding();
        let mut wake = None;
        while !commands.is_empty() {
            let mut next = Vec::new();
            for c in commands {
                match c {
                    Command::Forward { body } => action = host.forward(self.rid(), &body),
                    Command::Dispatch(call) => match host.dispatch(&call) {
                        Ok(token) => {
                            callouts::log_sent(self.rid(), &call);
                            self.calls.insert(token, call.id);
                        }
                        Err(kind) => {
                            log::warn!("#{} dispatch to cluster '{}' refused ({kind:?})", self.rid(), call.cluster);
                            let failure = callouts::refused(kind, &call.cluster);
                            let failed = Event::CallFailed { id: call.id, failure: &failure };
                            next.extend(self.handle(failed, host.now_ms()).unwrap_or_default());
                            host.spans(self.take_spans());
                        }
                    },
                    Command::Reply(reply) => action = self.answer(host, reply),
                    Command::Open(reply) => action = self.open(host, &reply),
                    Command::Send(data) if self.opened => host.send(&data, false),
                    Command::Send(data) => {
                        log::error!("#{} no response was started; {} bytes not sent", self.rid(), data.len());
                    }
                    Command::WakeAt(at) => wake = Some(at),
                    Command::Learn(lesson) => self.learn(lesson, host.now_ms()),
                }
            }
            commands = next;
        }
        (action, wake)
    }

    /// The agent's answer: the end of the response it started (live), a local reply while no response
    /// has begun, else the held upstream response made the answer.
    fn answer<H: Host>(&mut self, host: &mut H, reply: Reply) -> H::Action {
        // Before the answer goes out: ending the response can end the stream inside the call.
        self.summarize(host.port());
        if self.opened {
            host.send(&reply.body, true);
            return host.holding();
        }
        let Some(Upstream { headers_sent, .. }) = self.upstream else {
            host.port().local_reply(reply.status, &[("content-type", reply.content_type)], &reply.body);
            return host.holding();
        };
        if reply.status >= 400 {
            let how = if headers_sent { "in the body (status already sent)" } else { "with its status" };
            log::info!("#{} late error {} sent {how}", self.rid(), reply.status);
        }
        if !headers_sent {
            answer_head(host.port(), self.rid(), Some(reply.status), reply.content_type);
        }
        host.answer_body(self.rid(), &reply.body)
    }

    /// Live streaming: the response starts now, from the filter.
    fn open<H: Host>(&mut self, host: &mut H, reply: &Reply) -> H::Action {
        if self.upstream.is_some() || self.opened {
            log::error!("#{} the response cannot be started now; {} bytes not sent", self.rid(), reply.body.len());
            return host.holding();
        }
        match host.open(self.rid(), reply) {
            Some(action) => {
                self.opened = true;
                action
            }
            None => {
                log::error!(
                    "#{} this host cannot start a response early; {} bytes not sent",
                    self.rid(),
                    reply.body.len()
                );
                host.holding()
            }
        }
    }

    /// The call a reply belongs to, once; an unknown token is logged.
    fn take_call(&mut self, token: u64) -> Option<crate::agent::CallId> {
        let id = self.calls.take(token);
        if id.is_none() {
            log::warn!("#{} reply for unknown callout token {token}", self.rid());
        }
        id
    }
}
