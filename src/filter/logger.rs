//! `log` records to the host's log, with every configured secret masked, at every level.

use super::abi;
use std::cell::RefCell;

struct HostLogger;

static LOGGER: HostLogger = HostLogger;

thread_local! {
    static SECRETS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

pub fn install() {
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(log::LevelFilter::Info);
}

/// The host's level, so that records below it are not even formatted.
pub fn read_level() {
    let level = match abi::log_level() {
        Ok(abi::LOG_TRACE) => log::LevelFilter::Trace,
        Ok(abi::LOG_DEBUG) => log::LevelFilter::Debug,
        Ok(abi::LOG_INFO) | Err(_) => log::LevelFilter::Info,
        Ok(abi::LOG_WARN) => log::LevelFilter::Warn,
        Ok(_) => log::LevelFilter::Error,
    };
    log::set_max_level(level);
}

/// Secrets of every configuration this VM has loaded (several root contexts may share it): masking one
/// of a replaced configuration costs nothing.
pub fn add_secrets(mut more: Vec<String>) {
    SECRETS.with(|s| {
        let mut s = s.borrow_mut();
        s.append(&mut more);
        crate::config::sort_secrets(&mut s);
    });
}

impl log::Log for HostLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let text = record.args().to_string();
        let level = match record.level() {
            log::Level::Trace => abi::LOG_TRACE,
            log::Level::Debug => abi::LOG_DEBUG,
            log::Level::Info => abi::LOG_INFO,
            log::Level::Warn => abi::LOG_WARN,
            log::Level::Error => abi::LOG_ERROR,
        };
        // `try_borrow`: a line logged while the secrets are being replaced is dropped, not a panic.
        SECRETS.with(|s| match s.try_borrow() {
            Ok(secrets) => abi::log(level, &crate::redact::redact(&text, &secrets)),
            Err(_) => abi::log(level, "api-agent: a log line was dropped (secrets being replaced)"),
        });
    }

    fn flush(&self) {}
}
