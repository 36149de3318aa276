//! `log` records to Envoy's log (`[dynamic_modules]`), with every configured secret masked.

use super::{abi, envoy};
use std::sync::RwLock;

struct EnvoyLogger;

static LOGGER: EnvoyLogger = EnvoyLogger;

/// Secrets of every configuration loaded so far: masking one of a replaced configuration costs nothing.
static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

pub fn install() {
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(log::LevelFilter::Info);
}

/// Envoy's level for dynamic modules, so that records below it are not even formatted.
pub fn read_level() {
    let levels = [
        (abi::LOG_TRACE, log::LevelFilter::Trace),
        (abi::LOG_DEBUG, log::LevelFilter::Debug),
        (abi::LOG_INFO, log::LevelFilter::Info),
        (abi::LOG_WARN, log::LevelFilter::Warn),
    ];
    let level = levels.iter().find(|(l, _)| envoy::log_enabled(*l)).map_or(log::LevelFilter::Error, |(_, f)| *f);
    log::set_max_level(level);
}

pub fn add_secrets(mut more: Vec<String>) {
    if let Ok(mut secrets) = SECRETS.write() {
        secrets.append(&mut more);
        crate::config::sort_secrets(&mut secrets);
    }
}

impl log::Log for EnvoyLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let level = match record.level() {
            log::Level::Trace => abi::LOG_TRACE,
            log::Level::Debug => abi::LOG_DEBUG,
            log::Level::Info => abi::LOG_INFO,
            log::Level::Warn => abi::LOG_WARN,
            log::Level::Error => abi::LOG_ERROR,
        };
        let text = record.args().to_string();
        match SECRETS.read() {
            Ok(secrets) => envoy::log(level, &crate::redact::redact(&text, &secrets)),
            Err(_) => envoy::log(level, "api-agent: a log line was dropped (the secrets lock is poisoned)"),
        }
    }

    fn flush(&self) {}
}
