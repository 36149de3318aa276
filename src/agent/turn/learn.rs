//! What a request takes from the plugin instance's memory (`protocol::Memory`, one value of its
//! inputs) and what it teaches back (`Command::Learn`): the one way anything crosses from one request
//! to another. What a model's server taught is the model's: the request picks it by the model its
//! turns ask for (`llm.model`, else the client's).

use crate::agent::mcp::Sessions;
use crate::agent::protocol::{Command, Lesson, Memory, ModelFacts};
use crate::agent::tools::identity::Identity;

#[derive(Debug, Default)]
pub struct Learning {
    /// What the server of the model the request asks for taught earlier requests.
    known: ModelFacts,
    /// The MCP sessions as the host last heard of them.
    told_mcp: Sessions,
    /// Learnt and not yet told.
    lessons: Vec<Lesson>,
}

impl Learning {
    pub fn new(memory: &Memory) -> Learning {
        Learning { told_mcp: memory.mcp.clone(), ..Learning::default() }
    }

    /// The request asks for `model`: what its server taught before.
    pub fn asks(&mut self, model: &str, memory: &Memory) -> &ModelFacts {
        self.known = memory.models.iter().find(|(m, _)| m == model).map(|(_, f)| f.clone()).unwrap_or_default();
        &self.known
    }

    /// The parameters the model's server refused before: not sent.
    pub fn refused(&self) -> &[&'static str] {
        &self.known.refused
    }

    /// The server of `model` (the model the turn asked for) refused `param` in this request.
    pub fn refusal(&mut self, model: &str, param: &'static str) {
        if !self.known.refused.contains(&param) {
            self.known.refused.push(param);
            self.lessons.push(Lesson::Refused { model: model.to_string(), param });
        }
    }

    /// The chat template of `model` opens think blocks (a turn showed it).
    pub fn template_opens(&mut self, model: &str) {
        if !self.known.template_opens {
            self.known.template_opens = true;
            self.lessons.push(Lesson::TemplateOpens { model: model.to_string() });
        }
    }

    /// What the request learnt since the last event: kept MCP sessions that changed, exchanged and
    /// refused tokens, what the model's server taught. Called after every event once the request
    /// has taken or given a lesson (`Machine::handle`).
    pub fn tell(&mut self, mcp: &Sessions, identity: Option<&mut Identity>) -> Vec<Command> {
        let mut out: Vec<Lesson> = std::mem::take(&mut self.lessons);
        if *mcp != self.told_mcp {
            self.told_mcp.clone_from(mcp);
            out.push(Lesson::McpSessions(mcp.clone()));
        }
        if let Some(identity) = identity {
            out.extend(identity.take_dropped().into_iter().map(Lesson::TokenRefused));
            out.extend(identity.take_fresh().into_iter().map(Lesson::Token));
        }
        out.into_iter().map(Command::Learn).collect()
    }
}
