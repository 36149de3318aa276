//! What the request did, for those who watch it: the `report` (metrics, the request's log line and
//! `summary`), the `steps` transcript, and the `spans`.

pub mod report;
pub mod spans;
pub mod steps;
pub mod summary;
