//! What the model is told and how its replies are read.

pub mod history;
pub mod json_format;
pub mod react;
