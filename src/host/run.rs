//! What a host does with the agent's commands: the one loop both shims (Proxy-Wasm, dynamic module)
//! run, so that "a dispatch the host refuses goes straight back to the agent as a failed call" and the
//! wake-up bookkeeping live in one place.

use super::exchange::Exchange;
use crate::agent::spans::SpanNote;
use crate::agent::{Call, Command, Event, Failure, Reply};

/// The few things a host does for the agent; the callback's result type is the host's own.
pub trait Host {
    /// What the current host callback returns (continue, pause, stop).
    type Action: Copy;
    /// The action when no command decides otherwise: keep the stream held.
    fn holding(&self) -> Self::Action;
    /// The action when no agent runs: let the stream go on.
    fn passing(&self) -> Self::Action;
    /// Send `body` upstream in place of the client's request.
    fn forward(&mut self, body: &[u8]) -> Self::Action;
    /// Start a callout; `Err` when the host refuses it.
    fn dispatch(&mut self, call: &Call) -> Result<(), Failure>;
    /// Answer the client (after `open`: the rest of the response, and its end).
    fn reply(&mut self, reply: Reply) -> Self::Action;
    /// Start the client's response while the request goes on; only hosts that set
    /// `RequestMeta::live` are asked to.
    fn open(&mut self, reply: Reply) -> Self::Action {
        log::error!("this host cannot start a response early; {} bytes not sent", reply.body.len());
        self.holding()
    }
    /// More of the response `open` started.
    fn send(&mut self, data: &[u8]) {
        log::error!("this host cannot stream a response; {} bytes not sent", data.len());
    }
    /// Carries out the agent's span notes, before the commands of the same event run; only hosts
    /// whose `Port::traced` says so get any.
    fn spans(&mut self, notes: Vec<SpanNote>) {
        if !notes.is_empty() {
            log::debug!("this host makes no spans; {} notes dropped", notes.len());
        }
    }
    fn exchange(&mut self) -> &mut Exchange;
    fn now_ms(&self) -> u64;
}

/// Feeds one event to the agent and runs what it asks; the result is what the callback returns.
pub fn feed<H: Host>(host: &mut H, event: Event<'_>) -> H::Action {
    let now = host.now_ms();
    let Some(commands) = host.exchange().handle(event, now) else {
        return host.passing();
    };
    let notes = host.exchange().take_spans();
    host.spans(notes);
    let (action, wake) = run(host, commands);
    host.exchange().set_wake(wake);
    action
}

/// Runs `commands`, and what refused dispatches lead to. Returns the callback's action and the time
/// of the wake-up the agent asked for last (none: it waits for nothing).
fn run<H: Host>(host: &mut H, mut commands: Vec<Command>) -> (H::Action, Option<u64>) {
    let mut action = host.holding();
    let mut wake = None;
    while !commands.is_empty() {
        let mut next = Vec::new();
        for c in commands {
            match c {
                Command::Forward { body } => action = host.forward(&body),
                Command::Dispatch(call) => {
                    if let Err(failure) = host.dispatch(&call) {
                        let now = host.now_ms();
                        let failed = Event::CallFailed { id: call.id, failure: &failure };
                        next.extend(host.exchange().handle(failed, now).unwrap_or_default());
                        let notes = host.exchange().take_spans();
                        host.spans(notes);
                    }
                }
                Command::Reply(reply) => action = host.reply(reply),
                Command::Open(reply) => action = host.open(reply),
                Command::Send(data) => host.send(&data),
                Command::WakeAt(at) => wake = Some(at),
                Command::Learn(lesson) => {
                    let now = host.now_ms();
                    host.exchange().learn(lesson, now);
                }
            }
        }
        commands = next;
    }
    (action, wake)
}
