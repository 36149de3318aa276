//! The operator's call rules (`policy.rules`) in the loop: before a call of the model's is made, the
//! first rule that holds for the tool, its validated arguments and the request headers the operator
//! listed decides it: made, refused with the operator's reason, or sent to the client for approval.
//! Tools the rules refuse whatever the arguments are not offered at all.

use super::convo::Convo;
use super::offered::{escaped, Offered};
use crate::agent::protocol::RequestMeta;
use crate::agent::tools::guard::Flow;
use crate::agent::tools::rule_view::{headers_view, sensitive, tool_view, CallRules};
use crate::agent::tools::work::Work;
use crate::config::{native_tool, Config, Mode};
use crate::openai::ChatRequest;
use crate::policy::{self, Decision};
use crate::prompt::react::Entry;
use crate::tools::Tool;
use serde_json::Value;

/// The rules' view of this request, when the configuration has rules (nothing is made without).
pub fn start(c: &mut Convo, cfg: &Config, meta: &RequestMeta, req: &ChatRequest) {
    let Some(p) = cfg.call_policy.as_ref().filter(|p| p.is_on()) else {
        return;
    };
    let headers = headers_view(meta);
    let offer = policy::Offer::new(&p.rules, &headers);
    let hidden = if offer.hides_nothing() {
        Vec::new()
    } else {
        cfg.tools.iter().enumerate().filter(|(_, t)| offer.hidden(&tool_view(cfg, t))).map(|(i, _)| i as u32).collect()
    };
    let flow = p.guard.as_ref().map(|_| Flow::new(req));
    c.rules = Some(Box::new(CallRules { headers, hidden, decided: Vec::new(), flow, guarded: 0 }));
}

/// A turn's tool replies, as the model is told them: the guard remembers them.
pub fn observed(c: &mut Convo, observations: &[String]) {
    if let Some(flow) = c.rules.as_deref_mut().and_then(|r| r.flow.as_mut()) {
        flow.observed(observations);
    }
}

/// A catalog offered whole, less the hidden tools: this request's own prompt or `tools` (a large
/// catalog's selection leaves them out itself, `offer`).
pub fn offer(c: &mut Convo, cfg: &Config) {
    let Some(r) = c.rules.as_deref().filter(|r| !r.hidden.is_empty()) else {
        return;
    };
    if c.offered.is_some() || cfg.offer.is_some() {
        return;
    }
    let shown: Vec<&Tool> = cfg.tools.iter().enumerate().filter(|(i, _)| !r.hides(*i as u32)).map(|(_, t)| t).collect();
    let mut offered =
        Offered { prompt_json: String::new(), tools_json: String::new(), native: Vec::new(), first: 0, max_native: 0 };
    match c.mode {
        Mode::React => {
            let entries: Vec<Entry<'_>> = shown.iter().map(|t| Entry::of(t)).collect();
            offered.prompt_json = escaped(&cfg.template.render_entries(&entries));
        }
        Mode::Native => offered.tools_json = Value::Array(shown.iter().map(|t| native_tool(t)).collect()).to_string(),
    }
    c.offered = Some(Box::new(offered));
}

/// What the rules and the data-flow guard make of a call the model asked for (`work`, validated): the
/// same, a refusal with the operator's reason, or a call for the client to approve.
pub fn check(c: &mut Convo, cfg: &Config, work: Work) -> Work {
    let Some(r) = c.rules.as_deref_mut() else {
        return work;
    };
    let (name, args) = match &work {
        Work::Call { name, args, .. } | Work::Confirm { name, args } => (name, args),
        _ => return work,
    };
    let (Some(tool), Some(p)) = (cfg.tools.get(name), &cfg.call_policy) else {
        return work;
    };
    let rules = &p.rules;
    let args_value: Value = serde_json::from_str(args).unwrap_or(Value::Null);
    let verdict =
        if rules.is_empty() { None } else { policy::decide(rules, &tool_view(cfg, tool), &args_value, &r.headers) };
    let mut by_rule = false;
    if let Some(v) = verdict {
        let rule = &rules[v.rule];
        let decision = if v.error.is_some() { Decision::Deny } else { v.decision };
        r.decided.push((name.clone(), rule.name.clone(), decision.as_str()));
        if let Some(e) = &v.error {
            // The error names the rule and what failed, never a header's or an argument's value.
            log::warn!("policy rule '{}' failed on a call of '{name}' ({e}): the call is refused", rule.name);
        }
        match v.decision {
            Decision::Deny => {
                let reason = match &v.error {
                    None => rule.reason.as_str(),
                    Some(_) => "the operator's policy could not decide on this call",
                };
                log::info!("policy rule '{}' denies a call of '{name}'", rule.name);
                return refused(name, reason, format!("denied by policy rule '{}'", rule.name));
            }
            Decision::Confirm => return confirm(work),
            Decision::Sensitive => by_rule = true,
            Decision::Allow => {}
        }
    }
    let (Some(g), Some(flow)) = (&p.guard, &r.flow) else {
        return work;
    };
    if matches!(work, Work::Confirm { .. }) || !(by_rule || sensitive(g, tool)) {
        return work;
    }
    let derived = flow.derived(g, &args_value);
    if derived.is_empty() {
        return work;
    }
    r.guarded += 1;
    r.decided.push((name.clone(), GUARD.into(), if g.deny { "deny" } else { "confirm" }));
    let paths = derived.join(", ");
    let action = if g.deny { "refused" } else { "sent to the client for approval" };
    log::warn!("data-flow guard: a call of '{name}' has tool-derived arguments ({paths}): {action}");
    if !g.deny {
        return confirm(work);
    }
    let reason = format!(
        "its arguments ({paths}) carry values from a tool's reply that the user did not give, and the operator's data-flow guard does not allow that"
    );
    refused(name, &reason, format!("tool-derived arguments for '{name}' (data-flow guard)"))
}

/// The guard's name where rules' names go (steps, metrics, spans).
const GUARD: &str = "_guard_";

/// The turn's decisions, taken from the conversation for the record (report, steps, spans).
pub fn decided(c: &mut Convo) -> Vec<(String, String, &'static str)> {
    c.rules.as_deref_mut().map(|r| std::mem::take(&mut r.decided)).unwrap_or_default()
}

fn refused(name: &str, reason: &str, why: String) -> Work {
    Work::Refused { name: name.to_string(), observation: format!("The call to '{name}' was not made: {reason}"), why }
}

fn confirm(work: Work) -> Work {
    match work {
        Work::Call { name, args, .. } => Work::Confirm { name, args },
        other => other,
    }
}
