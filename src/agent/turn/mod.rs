//! The LLM turn: the conversation (`convo`), its request and reply in `react` or `native` mode
//! (`llm`, with the tools `offer`ed and the call `rules` applied to what the model proposes), JSON
//! mode's formatting call (`format`), and what the turns teach later requests (`learn`).

pub mod convo;
pub mod format;
pub mod learn;
pub mod llm;
mod native;
mod offer;
mod offered;
mod react;
pub mod rules;
