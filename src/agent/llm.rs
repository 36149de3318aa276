//! An LLM turn in either mode: the conversation's first request, what a reply means (`react.rs`,
//! `native.rs`), and the next request once the turn's tools are answered.

use super::convo::{Convo, Next};
use super::error::AgentError;
use super::protocol::RequestMeta;
use super::{native, react};
use crate::config::{Config, Mode};
use crate::openai::ChatRequest;

/// The conversation and the first LLM request's body (sent upstream by the route).
pub fn start(cfg: &Config, req: ChatRequest, meta: &RequestMeta) -> Result<(Convo, Vec<u8>), AgentError> {
    let mut c = Convo::new(cfg, &req);
    match cfg.mode {
        Mode::React => react::start(&mut c, &req)?,
        Mode::Native => native::start(&mut c, cfg, &req)?,
    }
    c.add_context(cfg, meta);
    let body = c.body(cfg, None);
    Ok((c, body))
}

/// What an LLM reply leads to.
pub fn read(c: &mut Convo, cfg: &Config, body: &[u8]) -> Result<Next, AgentError> {
    let reply = c.read(body)?;
    Ok(match c.mode {
        Mode::React => react::on_reply(c, cfg, reply),
        Mode::Native => native::on_reply(c, cfg, reply),
    })
}

/// Appends this turn's observations (in call order) and returns the next LLM request's body.
pub fn observe(c: &mut Convo, cfg: &Config, observations: Vec<String>) -> Vec<u8> {
    let limit = c.ask_final(cfg);
    match c.mode {
        Mode::React => react::observe(c, cfg, observations, limit),
        Mode::Native => native::observe(c, cfg, observations, limit),
    }
    c.body(cfg, cfg.llm.model.as_deref())
}
