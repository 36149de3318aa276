//! The tool calls of a turn: what each call is and the turn's batch (`work`), the tool phase that
//! dispatches and reads them (`tool_phase`), the client's identity on them (`identity`), calls the
//! client approved (`approval`), and the views call rules and the data-flow guard read (`rule_view`,
//! `guard`).

pub mod approval;
pub mod guard;
pub mod identity;
pub mod rule_view;
pub mod tool_phase;
pub mod work;
