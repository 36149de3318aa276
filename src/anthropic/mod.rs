//! The Anthropic Messages API in front of the agent (`POST /v1/messages`, what the Anthropic SDKs and
//! coding agents speak): the request translated into the chat-completions request the loop runs
//! (`request.rs`; the model behind is always asked with chat completions), the answer written as a
//! `message` object or the Messages event stream, and errors in Anthropic's shape (`answer.rs`).

pub mod answer;
pub mod request;

pub use answer::{Echo, Events};
pub use request::translate;
