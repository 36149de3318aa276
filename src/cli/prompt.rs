//! `api-agent prompt CONFIG --question TEXT`: the first LLM request body, exactly as the filter writes
//! it: the `Forward` body (`loop: response`), or the first LLM callout's (`loop: request`).

use super::select::{self, Request};
use super::{out, CliError};
use crate::agent::{Agent, Command, Event};
use crate::redact::redact;
use std::rc::Rc;

pub fn run(req: &Request) -> Result<u8, CliError> {
    let cfg = req.choose()?.config;
    let mut agent = Agent::new(Rc::clone(&cfg), select::meta(0));
    let body = req.client_body(&cfg);
    for cmd in agent.handle(Event::ClientRequest { body: &body }, 0) {
        match cmd {
            Command::Forward { body } => return Ok(print(&body)),
            Command::Dispatch(call) if call.cluster == cfg.llm.upstream.cluster => {
                return Ok(print(call.body.as_deref().unwrap_or_default()))
            }
            Command::Reply(r) => {
                let text = String::from_utf8_lossy(&r.body);
                return Err(CliError::failed(format!(
                    "the filter would answer the client itself (HTTP {}): {}",
                    r.status,
                    redact(&text, cfg.secrets())
                )));
            }
            // Open and Send come only to live hosts (select::meta is not one).
            // What the request learns is for later requests; the CLI runs one.
            Command::Dispatch(_) | Command::WakeAt(_) | Command::Open(_) | Command::Send(_) | Command::Learn(_) => {}
        }
    }
    Err(CliError::failed("the agent sent no LLM request"))
}

fn print(body: &[u8]) -> u8 {
    out::bytes(body);
    out::bytes(b"\n");
    0
}
