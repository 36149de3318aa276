//! The client's answer: its format, chosen from the request's API (`wire`), the answer or error
//! written in it (`finish`), and the live stream of a turn's text (`live`).

pub mod finish;
mod live;
pub mod wire;
